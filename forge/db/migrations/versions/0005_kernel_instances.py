"""Kernel instances: for a kernel of an op carved from a model, each instance of the model (by
its path) the kernel was verified on, or failed on, with the configuration it was verified as.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kernel_instances",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kernel_id", sa.Integer, sa.ForeignKey("kernels.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("path", sa.String(500), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("seconds", sa.Float, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("kernel_id", "path"),
    )


def downgrade() -> None:
    op.drop_table("kernel_instances")
