"""Outgoing webhooks: targets, signing, payloads, and delivery from the outbox."""
