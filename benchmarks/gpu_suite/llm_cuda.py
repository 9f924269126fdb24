"""The GPU suite's LLM part: ``forge optimize`` with the CUDA backend against a scripted
OpenAI-compatible server (the real litellm client; nothing reaches the network), whose coder
answers with a ``load_inline`` CUDA kernel, which is built, verified and judged."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from benchmarks.gpu_suite.archive import remove_bank
from benchmarks.gpu_suite.part import TEST_CANDIDATES, TEST_OPS, Context, PartResult, last_json
from benchmarks.support.llm_server import Script, serve

SOFTMAX = TEST_OPS / "small_softmax.py"


def _reply(candidate: str) -> str:
    source = (TEST_CANDIDATES / candidate).read_text()
    return f"A kernel that fuses the row max, the exponentials and the sum into one pass:\n\n```python\n{source}```\n"


def _judge(go_on: bool) -> str:
    return json.dumps({"diagnosis": "one block a row", "bottleneck": "memory", "next_step": "stop", "continue": go_on})


def llm_cuda_part(ctx: Context) -> PartResult:
    """One round of the LLM path: on CUDA the coder's reply is the CUDA ``load_inline`` softmax
    (built by torch, then verified); on a dry run the backend is C++ (a ``forge.cpp`` kernel)."""
    candidate = "softmax/honest_cpp.py" if ctx.dry else "softmax/honest_cuda.py"
    backend = "cpp" if ctx.dry else "cuda"
    script = Script(coder=[_reply(candidate)], judge=[_judge(False)])
    bank = ctx.work / "llm.db"
    remove_bank(bank)  # its verdicts are this run's alone
    with serve(script) as url:
        args = [
            "optimize",
            str(SOFTMAX),
            "--model",
            "openai/scripted",
            "--api-base",
            url,
            "--backend",
            backend,
            "--rounds",
            "1",
            "--bank",
            str(bank),
            "--json",
        ]
        try:
            done = ctx.forge(*args, timeout=ctx.left())
        except subprocess.TimeoutExpired:
            return PartResult("llm_cuda", "failed", "forge optimize ran past the part's time")
    result = ((last_json(done.stdout) or {}).get("problems") or [{}])[0]
    coder_asked = sum(1 for r in script.requests if r["role"] == "coder")
    status = str(result.get("status") or f"exit {done.returncode}")
    verdicts = _coder_verdicts(bank)
    verified = "passed" in verdicts
    said = f"forge optimize: {status}, accepted: {result.get('accepted')}, {result.get('reason') or ''}"[:500]
    notes = [f"the coder was asked {coder_asked} time(s); its candidates' verdicts: {verdicts}; {said}"]
    if done.returncode != 0:  # what forge said on its way out: the next loan fixes it from here
        notes.append("forge optimize's last words: " + (done.stderr or done.stdout or "(nothing)")[-1500:])
    if ctx.dry:  # compiling the CUDA reply with nvcc is tests/test_nvcc.py's (minutes)
        notes.append("the CUDA candidate's source is compiled for sm_90 by tests/test_nvcc.py, not here")
    ok = verified and coder_asked >= 1
    summary = f"{backend} backend through a scripted OpenAI server: {status}" + ("" if ok else " (NOT verified)")
    return PartResult("llm_cuda", "passed" if ok else "failed", summary, notes=notes)


def _coder_verdicts(bank: Path) -> list[str]:
    """The statuses of the coder's attempts in the bank the run wrote (oldest first)."""
    from forge.core.statuses import AttemptRole
    from forge.db import list_sessions, load_session, open_bank

    if not bank.is_file():
        return []
    with open_bank(bank) as engine:
        attempts = [a for s in list_sessions(engine) for a in load_session(engine, s.id).attempts]
    return [str(a.status) for a in sorted(attempts, key=lambda a: a.id) if a.role is AttemptRole.CODER]
