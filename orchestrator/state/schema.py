"""The store's tables as SQLAlchemy Core sees them: what the queries in store.py are written against.

Migrations never import this module (a revision must keep meaning what it meant when it was written);
tests/unit/state/test_migrations.py checks that the migrations at head produce exactly these tables."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("outcome", Text),  # the terminal state a tearing-down job heads for
    Column("reason", Text, nullable=False, server_default=""),
    Column("spec_json", Text, nullable=False),
    Column("plan_json", Text, nullable=False),
    Column("cloud_json", Text, nullable=False),  # where the job runs: region, endpoint, appid, bucket (no secrets)
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("deadline", Float, nullable=False),  # max_runtime from creation: the instances' ActionTimer
    Column("image_id", Text),
    Column("exit_code", Integer),
    Column("cost_cny", Float, nullable=False, server_default=text("0")),
    Column("cancel_requested", Integer, nullable=False, server_default=text("0")),
    Column("cancel_checkpoint", Integer, nullable=False, server_default=text("1")),  # the cancel wants one first
    Column("keep_until", Float),
    Column("final_step", Integer),
    Column("lease_owner", Text),
    # Random 63-bit fencing tokens (store.py's _new_token): BIGINT on PostgreSQL (revision 0007); SQLite's INTEGER
    # already holds 64 bits.
    Column("lease_token", BigInteger().with_variant(Integer(), "sqlite"), nullable=False, server_default=text("0")),
    Column("lease_expires", Float, nullable=False, server_default=text("0")),
    Column("source_dir", Text, nullable=False, server_default=""),  # the spec file's folder
    Column("settings_json", Text, nullable=False, server_default="{}"),  # what decide() reads, as submitted
    Column("keys_issued_at", Float),  # the short-lived COS keys the current attempt's agents hold: issued,
    Column("keys_expire_at", Float),  # and expiring (decide() rotates them)
    Column("image_error", Text),  # why CreateImage was refused (the job then succeeds without an image)
    Column("entered_at", Float, nullable=False, server_default=text("0")),  # its latest transition's time
    Column("fingerprint_json", Text),  # `run --if-changed`: the inputs at submission (contract.Fingerprint)
    Column("labels_json", Text, nullable=False, server_default="{}"),  # where it ran from (contract.RunLabels)
    Index("jobs_claim", "state", "lease_expires"),
)

events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Text, ForeignKey("jobs.job_id"), nullable=False),
    Column("at", Float, nullable=False),
    Column("kind", Text, nullable=False),  # transition | note | phase | launch | preemption | bill | ...
    Column("from_state", Text),
    Column("to_state", Text),
    Column("detail", Text, nullable=False, server_default=""),
    Index("events_job", "job_id", "id"),
    sqlite_autoincrement=True,
)

nodes = Table(
    "nodes",
    metadata,
    Column("job_id", Text, ForeignKey("jobs.job_id"), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("node", Integer, primary_key=True),
    Column("client_token", Text, nullable=False),
    Column("zone", Text, nullable=False),
    Column("instance_type", Text, nullable=False),
    Column("charge_type", Text, nullable=False),
    Column("price_per_hour", Float),
    Column("instance_id", Text),
    Column("state", Text, nullable=False),  # intent | launched | running | lost | failed | gone
    Column("launched_at", Float),
    Column("running_at", Float),
    Column("ended_at", Float),
    Column("end_reason", Text, nullable=False, server_default=""),
    Column("cost_cny", Float),
    Column("on_demand_price_per_hour", Float),
    Column("cost_source", Text),  # bill | estimate | pool: where cost_cny came from (NodeRecord.cost_source)
    Column("training_seconds", Float),  # the agent's own measure of its training on the node
)

images = Table(
    "images",
    metadata,
    Column("image_id", Text, primary_key=True),
    Column("job_id", Text, ForeignKey("jobs.job_id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("deleted_at", Float),
)

# Prepaid instances a team keeps between jobs (billing.mode: reserved). The cloud knows them by their cvmjob:pool
# tag; this table records which job holds which one (claims are atomic here).
pool_instances = Table(
    "pool_instances",
    metadata,
    Column("instance_id", Text, primary_key=True),
    Column("pool", Text, nullable=False),
    Column("zone", Text, nullable=False),
    Column("instance_type", Text, nullable=False),
    Column("job_id", Text),  # NULL: idle
    Column("since", Float, nullable=False),
)

# The controller replicas sharing the store: `cvmjob controller status` and the API budgets split among them.
controllers = Table(
    "controllers",
    metadata,
    Column("owner", Text, primary_key=True),
    Column("started_at", Float, nullable=False),
    Column("beat_at", Float, nullable=False),
    Column("info_json", Text, nullable=False, server_default="{}"),
)

# The one `cvmjob sweep run` of each study: a compare-and-set lease with a random fencing token, as a job's
# (store.SweeperLeases). Optuna's study attributes cannot serve: a read then a write let two runs both take over.
sweepers = Table(
    "sweepers",
    metadata,
    Column("study", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("token", BigInteger().with_variant(Integer(), "sqlite"), nullable=False),
    Column("expires", Float, nullable=False),
)

# The notifications to send (state/outbox.py): written in the transaction of the transition they tell of, marked
# sent once the receiver took one, so that a controller killed in between (or a replica taking over) sends what is
# left and nothing twice. ``target`` is the spec's target as JSON: a url_env's name, never the URL it holds.
notifications = Table(
    "notifications",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("subject", Text, nullable=False),  # the job id (or the study) the event is of
    Column("key", Text, nullable=False),  # the event's own id, the same in every retry: receivers dedupe by it
    Column("event", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("body", Text, nullable=False),  # the json format's event; the other formats are rendered from it
    Column("state", Text, nullable=False, server_default="pending"),  # pending | sent | gave_up
    Column("tries", Integer, nullable=False, server_default=text("0")),
    Column("next_at", Float, nullable=False),
    Column("claimed_by", Text),
    Column("claimed_until", Float, nullable=False, server_default=text("0")),
    Column("created_at", Float, nullable=False),
    Column("sent_at", Float),
    Column("last_error", Text, nullable=False, server_default=""),
    UniqueConstraint("key", "target", name="notifications_once"),
    Index("notifications_due", "state", "next_at"),
    sqlite_autoincrement=True,
)
