"""Ways of reaching reviewers, one interface (``base``): webhooks, Slack, email, ntfy, Discord."""
