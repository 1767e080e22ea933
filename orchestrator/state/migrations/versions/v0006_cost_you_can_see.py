"""What `cvmjob cost` reads of each node beside its bill: where the bill came from (the cloud's bill, an estimate
from the price and the running time, or nothing added for a reserved pool member), and how long the agent's
training ran on it (the rest of its billed time is boot, setup, preflight, sync, imaging and teardown). Nodes
billed before this revision have neither: their share outside training is unknown.

Revision ID: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("cost_source", sa.Text))
    op.add_column("nodes", sa.Column("training_seconds", sa.Float))
