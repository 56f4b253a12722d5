"""The provider's store: its protocol and models, and the SQLite and PostgreSQL stores."""
