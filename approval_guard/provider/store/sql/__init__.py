"""The store's behaviour as SQL, written once for SQLite and PostgreSQL."""
