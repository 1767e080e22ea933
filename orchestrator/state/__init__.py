"""The controller's SQLite state store (one writer per job, fenced by a lease token)."""
