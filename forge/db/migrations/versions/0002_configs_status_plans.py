"""Per-shape-bucket kernel configs, a status on kernels (bad entries), room for parallel plans.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("kernels") as batch:
        batch.add_column(sa.Column("status", sa.String(20), nullable=False, server_default="active"))
    op.create_table(
        "kernel_configs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kernel_id", sa.Integer, sa.ForeignKey("kernels.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("bucket", sa.JSON, nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("timing_ms", sa.Float),
    )
    op.create_table(
        "parallel_plans",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id"), nullable=False, index=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("plan", sa.JSON, nullable=False),
        sa.Column("status", sa.String(40), nullable=False),
        sa.Column("evidence", sa.JSON),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("parallel_plans")
    op.drop_table("kernel_configs")
    with op.batch_alter_table("kernels") as batch:
        batch.drop_column("status")
