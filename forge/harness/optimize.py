"""``optimize``: the main job. For each op: a session (new or resumed) under shared limits.

Front ends call this and render the events; it never prints. User mistakes raise ``ForgeError``
(exit 2 for usage, 3 for an unusable LLM provider) before any session starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from forge.errors import ForgeError, ProviderError, UsageError
from forge.harness import events as ev
from forge.harness.limits import Limits, ctrl_c_stops
from forge.harness.session import OptimizeOptions, Session, SessionResult
from forge.settings import ForgeSettings

BACKENDS = ("auto", "triton", "cpp", "cuda")


@dataclass
class RunResult:
    results: list[SessionResult] = field(default_factory=list)
    interrupted: bool = False
    tokens: int = 0
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"problems": [r.summary() for r in self.results], "tokens": self.tokens, "cost_usd": self.cost_usd}

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        if any(r.status == "provider_error" for r in self.results):
            return 3
        if self.results and all(r.accepted for r in self.results):
            return 0
        if any(r.status in ("budget", "time_limit") for r in self.results) and not any(
            r.accepted for r in self.results
        ):
            return 4
        return 1


def collect_ops(paths: list[Path]) -> list[Path]:
    """The op files named: files as given, directories expanded to their *.py files (sorted)."""
    ops: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.glob("*.py") if not q.name.startswith("_"))
            if not found:
                raise UsageError(f"{str(p)!r}: the directory holds no .py op files")
            ops.extend(found)
        elif p.is_file():
            ops.append(p)
        else:
            raise UsageError(f"{str(p)!r}: no such op file or directory")
    return ops


def resolve_backend(choice: str, device: str) -> str:
    if choice not in BACKENDS:
        raise UsageError(f"--backend {choice!r}: choose one of {', '.join(BACKENDS)}")
    if choice == "auto":
        return "triton" if device == "cuda" else "cpp"
    if choice in ("triton", "cuda") and device != "cuda":
        why = "Triton runs on CPU only in its interpreter, where timings mean nothing" if choice == "triton" else ""
        raise UsageError(f"--backend {choice} needs a CUDA device (this run uses cpu). {why}".strip())
    if choice == "cpp" and device != "cpu":
        raise UsageError("--backend cpp writes CPU kernels; use --device cpu with it")
    return choice


def device_spec(device: str, settings: ForgeSettings) -> dict[str, Any]:
    """What the coder's prompt says about the machine (measured figures are cached)."""
    from forge.verifier import machine
    from forge.verifier.verify import _cache_dir

    threads = settings.threads or machine.available_cores()
    spec: dict[str, Any] = {"device": device, **machine.machine_figures(device, threads, _cache_dir(settings))}
    if device == "cpu":
        spec.update(
            cpu_model=machine.cpu_model(),
            cores=machine.available_cores(),
            isa=[f for f in machine.cpu_flags() if f.startswith(("avx", "fma", "sse4", "amx", "f16c", "bmi"))],
            caches=machine.cache_sizes(),
        )
    else:
        import torch

        props = torch.cuda.get_device_properties(0)
        spec.update(
            gpu=props.name,
            sms=props.multi_processor_count,
            memory_gb=round(props.total_memory / 2**30, 1),
            capability=f"{props.major}.{props.minor}",
        )
    return spec


def _make_session(
    op_path: Path,
    options: OptimizeOptions,
    settings: ForgeSettings,
    limits: Limits,
    engine: Any,
    emit: ev.Emit,
    resume_id: int | None,
) -> Session:
    from forge.agents.factory import make_agents
    from forge.harness.problem import load_problem, reference_hash
    from forge.verifier.machine import resolve_device

    device = resolve_device(settings.device)
    backend = resolve_backend(options.backend, device)
    problem = load_problem(op_path)
    spec = device_spec(device, settings) if options.model else {"device": device}
    coder, judge, agent = make_agents(op_path, options, device, backend)
    return Session(
        op_path=op_path, spec=problem.spec, op_hash=reference_hash(problem), target=problem.target_class_path,
        device=device, backend=backend, options=options, settings=settings, limits=limits, engine=engine,
        coder=coder, judge=judge, agent=agent, device_spec=spec, emit=emit, resume_id=resume_id,
    )  # fmt: skip


def _run_one(session: Session) -> SessionResult:
    from forge.harness.search import STRATEGIES

    session.emit(
        ev.SessionStarted, strategy=session.options.strategy, agent=session.agent,
        model=session.options.model, device=session.device, backend=session.backend, resumed=session.resumed,
    )  # fmt: skip
    try:
        session.verify_pending()
        status, reason = STRATEGIES[session.options.strategy](session)
    except ProviderError as exc:  # the provider went away mid-session: stop cleanly, resumable
        return session.finish("provider_error", exc.message)
    except KeyboardInterrupt:
        from forge.verifier.process import kill_all

        kill_all()
        return session.finish("interrupted", "interrupted (Ctrl-C); `--resume` continues the session")
    return session.finish(status, reason)


def optimize(
    op_paths: list[Path],
    options: OptimizeOptions,
    settings: ForgeSettings,
    emit: ev.Emit = ev.ignore,
    *,
    budget_usd: float | None = None,
    time_limit_s: float | None = None,
    resume: int | None = None,
    resume_rounds: int | None = None,
) -> RunResult:
    """Optimise each op in turn (or resume one session; ``resume_rounds`` replaces its stored
    round count). Raises ForgeError for bad input."""
    from forge.agents.factory import check_provider
    from forge.db.engine import open_for_writing

    if options.strategy not in ("refine", "evolve"):
        raise UsageError(f"--strategy {options.strategy!r}: choose refine or evolve")
    for name in ("rounds", "workers", "population", "top_k"):
        if getattr(options, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(options, name)})")
    limits = Limits(budget_usd=budget_usd, time_limit_s=time_limit_s)
    engine = open_for_writing(options.bank)
    try:
        if resume is not None:
            options, op_paths = _resumed(engine, resume, options)
            if resume_rounds is not None:
                options = replace(options, rounds=resume_rounds)
        ops = collect_ops(op_paths)
        if not ops:
            raise UsageError("name at least one op file (or a directory of them), or pass --resume SESSION")
        check_provider(options)
        run = RunResult()
        with ctrl_c_stops(limits):
            for op in ops:
                session = _make_session(op, options, settings, limits, engine, emit, resume)
                result = _run_one(session)
                run.results.append(result)
                if result.status == "interrupted":
                    run.interrupted = True
                    break
                if result.status == "provider_error":
                    break
        run.tokens, run.cost_usd = limits.tokens, limits.cost_reported
        return run
    finally:
        engine.dispose()


def _resumed(engine: Any, session_id: int, options: OptimizeOptions) -> tuple[OptimizeOptions, list[Path]]:
    """The stored session's options, and its op file (rewritten from the bank if it moved or changed)."""
    import tempfile

    from forge.db.sessions import load_session

    stored = load_session(engine, session_id)
    if stored.status == "finished":
        raise ForgeError(f"session {session_id} already finished; start a new one with `forge optimize OP.py`")
    s = stored.settings
    names = ("model", "judge_model", "api_base", "strategy", "rounds", "population", "top_k")
    keep: dict[str, Any] = {k: s[k] for k in names if k in s}
    fields: dict[str, Any] = {**options.__dict__, **keep, "backend": s.get("backend", options.backend)}
    merged = OptimizeOptions(**fields)
    path = Path(s.get("op_path", ""))
    if not (path.is_file() and path.read_text() == stored.problem_source):
        tmp = Path(tempfile.mkdtemp(prefix="forge-resume-"))
        path = tmp / f"{stored.problem_name}.py"
        path.write_text(stored.problem_source)
    return merged, [path]
