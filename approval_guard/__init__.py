"""approval_guard: put a person between an AI agent and its dangerous tools."""
