"""The kernel bank's schema (SQLAlchemy 2.0 declarative). Migrations in ``migrations/`` build it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Dialect, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A moment, read back in UTC from either database: SQLite stores it without its zone (and
    hands it back naive), PostgreSQL in the session's zone; both banks then list the same times."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    pass


class ProblemRow(Base):
    """An op, identified by name plus the hash of its normalized reference source."""

    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("name", "op_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    op_hash: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(Text)
    target_class_path: Mapped[str | None] = mapped_column(String(400))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

    kernels: Mapped[list[KernelRow]] = relationship(back_populates="problem")


class SessionRow(Base):
    """One optimisation run over one problem."""

    __tablename__ = "sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    strategy: Mapped[str] = mapped_column(String(40))
    agent: Mapped[str] = mapped_column(String(40))
    model: Mapped[str | None] = mapped_column(String(200))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(40), default="running")
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    # its lease (``forge.db.leases``): the driver process running it now, and when it last said so
    driver_host: Mapped[str | None] = mapped_column(String(255))
    driver_pid: Mapped[int | None] = mapped_column(Integer)
    driver_scope: Mapped[str | None] = mapped_column(String(200))
    lease_token: Mapped[str | None] = mapped_column(String(32))
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class AttemptRow(Base):
    """Everything one candidate produced: prompt, response, source, verdict, cost."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id"), index=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("attempts.id"))
    round: Mapped[int] = mapped_column(Integer, default=0)
    role: Mapped[str] = mapped_column(String(40), default="coder")
    prompt: Mapped[str | None] = mapped_column(Text)
    response: Mapped[str | None] = mapped_column(Text)
    candidate_source: Mapped[str | None] = mapped_column(Text)
    backend: Mapped[str | None] = mapped_column(String(40))
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(40), default="pending")
    speedup_vs_eager: Mapped[float | None] = mapped_column(Float)
    speedup_vs_compile: Mapped[float | None] = mapped_column(Float)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class KernelRow(Base):
    """A bank entry: a verified candidate with its evidence, validators and provenance."""

    __tablename__ = "kernels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    op_name: Mapped[str] = mapped_column(String(200), index=True)
    op_hash: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(40))
    source: Mapped[str] = mapped_column(Text)
    entry_point: Mapped[str] = mapped_column(String(200), default="ModelNew")
    device_kind: Mapped[str] = mapped_column(String(20))
    capability_min: Mapped[str | None] = mapped_column(String(20))
    capability_max: Mapped[str | None] = mapped_column(String(20))
    dtype: Mapped[str] = mapped_column(String(40))
    verified_shapes: Mapped[list[Any]] = mapped_column(JSON, default=list)
    speedup_vs_eager: Mapped[float | None] = mapped_column(Float)
    speedup_vs_compile: Mapped[float | None] = mapped_column(Float)
    beats_reference: Mapped[bool] = mapped_column(Boolean, default=False)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id"))
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempts.id"))
    agent: Mapped[str | None] = mapped_column(String(40))
    model: Mapped[str | None] = mapped_column(String(200))
    cost_usd: Mapped[float | None] = mapped_column(Float)
    torch_version: Mapped[str] = mapped_column(String(40))
    triton_version: Mapped[str | None] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20), default="active")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

    problem: Mapped[ProblemRow] = relationship(back_populates="kernels")
    configs: Mapped[list[KernelConfigRow]] = relationship(back_populates="kernel", cascade="all, delete-orphan")
    instances: Mapped[list[KernelInstanceRow]] = relationship(
        back_populates="kernel", cascade="all, delete-orphan", order_by="KernelInstanceRow.id"
    )


class KernelConfigRow(Base):
    """A launch/parallel config and its timing for one shape bucket of a kernel."""

    __tablename__ = "kernel_configs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kernel_id: Mapped[int] = mapped_column(ForeignKey("kernels.id", ondelete="CASCADE"), index=True)
    bucket: Mapped[list[Any]] = mapped_column(JSON)  # input shapes, e.g. [[4096, 1024]]
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timing_ms: Mapped[float | None] = mapped_column(Float)

    kernel: Mapped[KernelRow] = relationship(back_populates="configs")


class KernelInstanceRow(Base):
    """An instance of a model (by its path) a carved op's kernel was verified on, or failed on
    (``core.instance_checks.InstanceCheck``): ``kernelize`` binds the kernel only where it passed."""

    __tablename__ = "kernel_instances"
    __table_args__ = (UniqueConstraint("kernel_id", "path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kernel_id: Mapped[int] = mapped_column(ForeignKey("kernels.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(String(500))
    config: Mapped[str] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(20))
    detail: Mapped[str] = mapped_column(Text, default="")
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

    kernel: Mapped[KernelRow] = relationship(back_populates="instances")


class ParallelPlanRow(Base):
    """A banked parallel plan: the plan (JSON), what it is for, its evidence and provenance."""

    __tablename__ = "parallel_plans"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))  # the model's op name
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(40), default="active")
    evidence: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    op_hash: Mapped[str | None] = mapped_column(String(64))
    structure_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    world_size: Mapped[int | None] = mapped_column(Integer)
    mesh: Mapped[str | None] = mapped_column(String(40))
    device_kind: Mapped[str | None] = mapped_column(String(20))
    mode: Mapped[str | None] = mapped_column(String(10))  # train | infer
    step_ms: Mapped[float | None] = mapped_column(Float)
    predicted_step_ms: Mapped[float | None] = mapped_column(Float)
    session_id: Mapped[int | None] = mapped_column(Integer)
    attempt_id: Mapped[int | None] = mapped_column(Integer)
    agent: Mapped[str | None] = mapped_column(String(40))
    model: Mapped[str | None] = mapped_column(String(200))
    torch_version: Mapped[str | None] = mapped_column(String(40))
