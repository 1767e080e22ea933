"""The schema the four hand-written migrations (0001_initial ... 0004_drop_emulator_seed) left; a store they wrote
is stamped at this revision (see legacy.py).

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("outcome", sa.Text),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("spec_json", sa.Text, nullable=False),
        sa.Column("plan_json", sa.Text, nullable=False),
        sa.Column("cloud_json", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("deadline", sa.Float, nullable=False),
        sa.Column("image_id", sa.Text),
        sa.Column("exit_code", sa.Integer),
        sa.Column("cost_cny", sa.Float, nullable=False, server_default=sa.text("0")),
        sa.Column("cancel_requested", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("keep_until", sa.Float),
        sa.Column("final_step", sa.Integer),
        sa.Column("lease_owner", sa.Text),
        sa.Column("lease_token", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("lease_expires", sa.Float, nullable=False, server_default=sa.text("0")),
        sa.Column("source_dir", sa.Text, nullable=False, server_default=""),
        sa.Column("settings_json", sa.Text, nullable=False, server_default="{}"),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Text, sa.ForeignKey("jobs.job_id"), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("from_state", sa.Text),
        sa.Column("to_state", sa.Text),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sqlite_autoincrement=True,
    )
    op.create_index("events_job", "events", ["job_id", "id"])
    op.create_table(
        "nodes",
        sa.Column("job_id", sa.Text, sa.ForeignKey("jobs.job_id"), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("node", sa.Integer, primary_key=True),
        sa.Column("client_token", sa.Text, nullable=False),
        sa.Column("zone", sa.Text, nullable=False),
        sa.Column("instance_type", sa.Text, nullable=False),
        sa.Column("charge_type", sa.Text, nullable=False),
        sa.Column("price_per_hour", sa.Float),
        sa.Column("instance_id", sa.Text),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("launched_at", sa.Float),
        sa.Column("running_at", sa.Float),
        sa.Column("ended_at", sa.Float),
        sa.Column("end_reason", sa.Text, nullable=False, server_default=""),
        sa.Column("cost_cny", sa.Float),
        sa.Column("on_demand_price_per_hour", sa.Float),
    )
    op.create_table(
        "images",
        sa.Column("image_id", sa.Text, primary_key=True),
        sa.Column("job_id", sa.Text, sa.ForeignKey("jobs.job_id"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("deleted_at", sa.Float),
    )
    op.create_table(
        "pool_instances",
        sa.Column("instance_id", sa.Text, primary_key=True),
        sa.Column("pool", sa.Text, nullable=False),
        sa.Column("zone", sa.Text, nullable=False),
        sa.Column("instance_type", sa.Text, nullable=False),
        sa.Column("job_id", sa.Text),
        sa.Column("since", sa.Float, nullable=False),
    )
