"""Formats shared with the provider: wire models, exact JSON, durations, display, time, hosts."""
