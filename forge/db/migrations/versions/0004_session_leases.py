"""Session leases: which driver process runs a session now (its host, pid, and where that pid
means one process), the lease's token, and when that driver last said it was alive. A driver
resuming a session takes its lease first, so two drivers on one bank never run the same session.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("driver_host", sa.String(255)),
    ("driver_pid", sa.Integer),
    ("driver_scope", sa.String(200)),
    ("lease_token", sa.String(32)),
    ("heartbeat_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        for name, _kind in reversed(_COLUMNS):
            batch.drop_column(name)
