"""Running the provider: ProviderServer on uvicorn, and a bare process for tests and benchmarks."""
