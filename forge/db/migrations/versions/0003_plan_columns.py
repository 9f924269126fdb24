"""Parallel plans banked: what a plan is for (model structure, world size, mesh, device kind,
training or inference), its measured and predicted step, and its provenance.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("op_hash", sa.String(64)),
    ("structure_hash", sa.String(64)),
    ("world_size", sa.Integer),
    ("mesh", sa.String(40)),
    ("device_kind", sa.String(20)),
    ("mode", sa.String(10)),
    ("step_ms", sa.Float),
    ("predicted_step_ms", sa.Float),
    ("session_id", sa.Integer),
    ("attempt_id", sa.Integer),
    ("agent", sa.String(40)),
    ("model", sa.String(200)),
    ("torch_version", sa.String(40)),
)


def upgrade() -> None:
    with op.batch_alter_table("parallel_plans") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind))
        batch.create_index("ix_parallel_plans_structure_hash", ["structure_hash"])


def downgrade() -> None:
    with op.batch_alter_table("parallel_plans") as batch:
        batch.drop_index("ix_parallel_plans_structure_hash")
        for name, _kind in reversed(_COLUMNS):
            batch.drop_column(name)
