"""Formats the guard shares with the provider: wire models, exact JSON, durations, display, time."""
