"""How big the coder's and the judge's prompts are, in tokens: a two-round LLM session on an op
against a scripted OpenAI-protocol server (the one the tests use) that answers with a fixed
candidate, its prompts counted with litellm's tokenizer for gpt-4o. Beside each request's tokens:
how many of them open with a prefix an earlier request of the session already sent (what a
provider's automatic prompt cache can serve: OpenAI's caches prefixes of 1024 tokens and more, in
steps of 128), and the rest, which are new. The shared prefix is counted on the token ids of the
messages written out in order; the total is litellm's count for the chat request, a few tokens a
message more.

    python -m benchmarks.costs.prompt_sizes examples/ops/layernorm.py examples/candidates/layernorm_cpp.py
    python -m benchmarks.costs.prompt_sizes OP CANDIDATE --forge /path/to/other/checkout   # a before/after

``--forge`` runs another checkout's ``python -m forge`` (this interpreter, that checkout first on
PYTHONPATH), so two versions' prompts are compared on the same op, replies and machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.support.llm_server import Script, serve
from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT

JUDGE = json.dumps({"diagnosis": "", "bottleneck": "memory traffic", "next_step": "fuse the passes", "continue": True})


def run_session(op: Path, candidate: Path, forge_root: Path, rounds: int) -> Script:
    reply = f"```python\n{candidate.read_text()}\n```"
    script = Script(coder=[reply] * rounds, judge=[JUDGE] * rounds)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(forge_root), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp, serve(script) as url:
        argv = [
            sys.executable,
            "-m",
            "forge",
            "optimize",
            str(op.resolve()),
            "--model",
            "openai/prompt-sizes",
            "--api-base",
            url,
            "--rounds",
            str(rounds),
            "--bank",
            str(Path(tmp) / "bank.db"),
        ]
        done = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True, timeout=1800)
        if done.returncode not in (0, 1):
            raise SystemExit(f"forge optimize failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return script


def _serialized(messages: list[dict[str, str]]) -> str:
    return "".join(f"<{m['role']}>{m['content']}" for m in messages)


def _common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two requests' encodings share from their start."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _cacheable(tokens: int) -> int:
    """The part of a shared prefix an automatic cache serves: none under 1024 tokens, else whole 128-token steps."""
    return 0 if tokens < 1024 else tokens - tokens % 128


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("op", type=Path)
    parser.add_argument("candidate", type=Path, help="the source the scripted coder answers with, every round")
    parser.add_argument("--forge", type=Path, default=ROOT, help="the checkout whose prompts are measured")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--save", type=Path, help="write each prompt here (role_N.md)")
    add_page_option(parser)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    script = run_session(args.op, args.candidate, args.forge.resolve(), args.rounds)
    counts: dict[str, int] = {}
    print(f"{args.op.name} with {args.candidate.name}, forge at {args.forge}")
    print(f"{'request':<10} {'tokens':>7} {'chars':>7} {'cached':>7} {'new':>7}")
    sent: list[list[int]] = []
    totals = [0, 0]
    for request in script.requests:
        role = request["role"]
        if role == "ping":
            continue
        counts[role] = counts.get(role, 0) + 1
        name = f"{role}_{counts[role]}"
        tokens = litellm.token_counter(model="gpt-4o", messages=request["messages"])
        chars = sum(len(m["content"]) for m in request["messages"])
        ids = litellm.encode(model="gpt-4o", text=_serialized(request["messages"]))
        cached = _cacheable(max((_common_prefix(ids, earlier) for earlier in sent), default=0))
        sent.append(ids)
        totals[0] += tokens
        totals[1] += tokens - cached
        print(f"{name:<10} {tokens:>7} {chars:>7} {cached:>7} {tokens - cached:>7}")
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            shown = "\n\n".join(f"=== {m['role']} ===\n{m['content']}" for m in request["messages"])
            (args.save / f"{name}.md").write_text(shown)
    print(f"{'all':<10} {totals[0]:>7} {'':>7} {totals[0] - totals[1]:>7} {totals[1]:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Prompt sizes of the LLM agents"))
