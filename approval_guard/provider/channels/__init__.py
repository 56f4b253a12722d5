"""Ways of reaching reviewers, one interface (``base``), one outbox, one decision path."""
