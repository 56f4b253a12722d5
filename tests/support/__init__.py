"""What the test modules share: fakes, clients, servers and fixtures; no tests here."""
