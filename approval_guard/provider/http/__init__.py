"""The provider's HTTP side: the Starlette app, its routes, auth, answers and long-poll waits."""
