"""A guarded call's only I/O: exchanges with the provider (requests or httpx), and the drivers."""
