"""The controller's state store (SQLite embedded, PostgreSQL shared; one writer per job, fenced by a lease token)."""
