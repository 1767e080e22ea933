"""What CI retraining keeps with a job: the inputs it was submitted on (`cvmjob run --if-changed`:
contract.Fingerprint as JSON), for the check at its end (only a job whose data did not change while it trained is
entered in the fingerprint index), and where it ran from (contract.RunLabels: the git ref and commit, the CI run),
which picks a later run's baseline.

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
    op.add_column("jobs", sa.Column("labels_json", sa.Text, nullable=False, server_default="{}"))
