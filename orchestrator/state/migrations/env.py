"""Alembic's environment: the store runs its migrations itself (orchestrator.state.migrations.upgrade), on its own
connection and inside its own transaction, so there is no alembic.ini and no URL here."""

from __future__ import annotations

from alembic import context

attributes = context.config.attributes
context.configure(
    connection=attributes["connection"], version_table=attributes["version_table"], transactional_ddl=True
)
with context.begin_transaction():  # joins the caller's transaction: the schema changes all at once or not at all
    context.run_migrations()
