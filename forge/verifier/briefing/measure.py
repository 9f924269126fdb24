"""An op's brief (``forge.core.op_brief``) for the agents' prompts: measured by
``forge.verifier.briefing.brief_worker`` in a process of its own with the verification workers'
environment, bounded in time, and cached per op and machine.

A part that fails or runs out of time is left out and named in ``missing``, never fatal: the
brief informs the agents, it decides nothing."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from forge.core.errors import ForgeError
from forge.core.op_brief import OpBrief, PairedBaseline
from forge.core.sandbox import python_argv
from forge.core.settings import ForgeSettings
from forge.verifier.briefing.paired_baseline import PAIRED_TRIALS, paired_baseline, with_paired
from forge.verifier.machine import facts as machine
from forge.verifier.parent.service import Verifier
from forge.verifier.processes.sandboxing import op_reads, sandboxed
from forge.verifier.processes.worker_env import BRIEF, worker_env

BRIEF_TIMEOUT_S = 240.0
_VERSION = 15  # what the brief holds: a brief cached by an older forge is measured again


def measure_op_brief(
    op_path: Path, op_hash: str, device: str, settings: ForgeSettings, service: Verifier | None = None
) -> OpBrief:
    """The op's brief on this machine, measured in a fresh process with the verification workers'
    environment (threads, allocator), or read back from the cache when this op was measured on
    this machine and torch before. With ``service`` (the session's verifier), eager's and
    torch.compile's figures are those of the verifier's own pairs (``paired_baseline``)."""
    import torch

    threads = settings.threads or machine.available_cores()
    ident = torch.cuda.get_device_name(0) if device == "cuda" else f"{machine.cpu_model()}|{threads}"
    compiled = settings.compile_baseline
    # its roofline holds the machine's figures: measured again, they measure the brief again too
    figures = machine.measured_figures(device, threads, settings.cache_path())
    said = f"{op_hash}|{device}|{ident}|{torch.__version__}|{compiled}|{_VERSION}|{figures}"
    key = hashlib.sha256(said.encode()).hexdigest()[:24]
    env = worker_env(device, threads, settings.cache_path(), settings.gpu, BRIEF)
    # the op's own code, run before any candidate: confined as the candidates are all the same
    env = sandboxed(env, settings.sandbox, [*op_reads(op_path), Path.cwd()], device)
    # the worker's own cache holds figures of its own (measured in its process, perhaps under load):
    # the brief's roofline reads the session's, as the verdicts' do
    argv = python_argv(
        "forge.verifier.briefing.brief_worker",
        str(op_path),
        "--device",
        device,
        "--figures",
        json.dumps(figures.to_json()),
    )
    cached = settings.cache_path() / "briefs" / f"{key}.json"
    brief = _brief(argv + ([] if compiled else ["--no-compile"]), device, env, cached)
    if service is None or brief.paired is not None or brief.eager is None:
        return brief
    paired = _paired(service, settings)
    if isinstance(paired, str):
        brief = brief.model_copy(update={"missing": [*brief.missing, f"eager in the verifier's pairs: {paired}"]})
        return brief  # not cached: the next session asks again
    brief = with_paired(brief, paired)
    _store(brief, cached)
    return brief


def _paired(service: Verifier, settings: ForgeSettings) -> PairedBaseline | str:
    """The null control's figures, or why there are none: the brief informs, it never ends a
    session (a stop asked for during it is the search's to honour: its first round sees it)."""
    try:
        return paired_baseline(service.verify_null(PAIRED_TRIALS, settings.timeout))
    except ForgeError as exc:
        return f"the reference verified against itself failed: {exc}"
    except KeyboardInterrupt:
        if not service.stop.is_set():
            raise
        return "stopped before the reference was timed against itself"


def _brief(argv: list[str], device: str, env: dict[str, str], cached: Path) -> OpBrief:
    if cached.exists():
        try:
            return OpBrief.model_validate_json(cached.read_text())
        except ValueError:
            cached.unlink(missing_ok=True)  # an older forge's or a torn write: measure again
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=BRIEF_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return OpBrief(device=device, missing=[f"the brief took over {BRIEF_TIMEOUT_S:.0f} s and was stopped"])
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return OpBrief(device=device, missing=[f"the brief's process failed: {tail[:300]}"])
    brief = OpBrief.model_validate_json(lines[-1])
    _store(brief, cached)
    return brief


def _store(brief: OpBrief, cached: Path) -> None:
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(brief.model_dump_json())
    tmp.replace(cached)
