"""The first bank schema: problems, sessions, attempts, kernels.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "problems",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, index=True),
        sa.Column("op_hash", sa.String(64), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("target_class_path", sa.String(400)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("name", "op_hash"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id"), nullable=False, index=True),
        sa.Column("strategy", sa.String(40), nullable=False),
        sa.Column("agent", sa.String(40), nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("status", sa.String(40), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("session_id", sa.Integer, sa.ForeignKey("sessions.id"), nullable=False, index=True),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("attempts.id")),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("role", sa.String(40), nullable=False),
        sa.Column("prompt", sa.Text),
        sa.Column("response", sa.Text),
        sa.Column("candidate_source", sa.Text),
        sa.Column("backend", sa.String(40)),
        sa.Column("verdict", sa.JSON),
        sa.Column("status", sa.String(40), nullable=False),
        sa.Column("speedup_vs_eager", sa.Float),
        sa.Column("speedup_vs_compile", sa.Float),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "kernels",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id"), nullable=False, index=True),
        sa.Column("op_name", sa.String(200), nullable=False, index=True),
        sa.Column("op_hash", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(40), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("entry_point", sa.String(200), nullable=False),
        sa.Column("device_kind", sa.String(20), nullable=False),
        sa.Column("capability_min", sa.String(20)),
        sa.Column("capability_max", sa.String(20)),
        sa.Column("dtype", sa.String(40), nullable=False),
        sa.Column("verified_shapes", sa.JSON, nullable=False),
        sa.Column("speedup_vs_eager", sa.Float),
        sa.Column("speedup_vs_compile", sa.Float),
        sa.Column("beats_reference", sa.Boolean, nullable=False),
        sa.Column("evidence", sa.JSON, nullable=False),
        sa.Column("session_id", sa.Integer, sa.ForeignKey("sessions.id")),
        sa.Column("attempt_id", sa.Integer, sa.ForeignKey("attempts.id")),
        sa.Column("agent", sa.String(40)),
        sa.Column("model", sa.String(200)),
        sa.Column("cost_usd", sa.Float),
        sa.Column("torch_version", sa.String(40), nullable=False),
        sa.Column("triton_version", sa.String(40)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for table in ("kernels", "attempts", "sessions", "problems"):
        op.drop_table(table)
