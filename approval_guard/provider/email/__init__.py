"""One-click email approvals for the local provider (docs/email.md)."""
