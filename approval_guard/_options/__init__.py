"""Decoration time, no I/O: a tool's checked options, and what they decide for each call."""
