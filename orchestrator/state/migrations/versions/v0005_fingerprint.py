"""The inputs a job was submitted on (`cvmjob run --if-changed`: contract.Fingerprint as JSON), for the check at
its end: only a job whose data did not change while it trained is entered in the fingerprint index.

Revision ID: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("fingerprint_json", sa.Text))
