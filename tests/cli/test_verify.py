"""The real CLI: in a subprocess (the output contract of a real process, exit codes), and in this process
through typer's runner (refusals, checks, options: the same command's code), errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_here import invoke_here
from tests.conftest import CANDIDATES, EXAMPLES, OPS

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"problem", "status", "passed", "reason", "checks", "timings_ms", "speedup_vs_eager", "speedup_vs_compile"}


def forge(*args: str, cache: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FORGE_CACHE_DIR": str(cache), "FORGE_TIMING_BUDGET_S": "0.2", **extra_env}
    return subprocess.run(
        [sys.executable, "-m", "forge", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


def forge_here(*args: str, cache: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """The same command in this process (typer's runner): its exit code and its two streams, without
    a fresh interpreter importing torch, forge and a verifier's template again. The output contract
    of a real process (one JSON object on stdout, nothing else) is held by the tests that use
    ``forge``."""
    env = {"FORGE_CACHE_DIR": str(cache), "FORGE_TIMING_BUDGET_S": "0.2", "COLUMNS": "300", **extra_env}
    done = invoke_here(list(args), env)
    return subprocess.CompletedProcess(list(args), done.exit_code, done.stdout, done.stderr)


def test_json_passing(cache_dir):
    r = forge(
        "verify",
        str(OPS / "small_softmax.py"),
        str(CANDIDATES / "softmax/honest_torch.py"),
        "--no-compile-baseline",
        "--json",
        cache=cache_dir,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # exactly one JSON object, nothing else
    assert set(data) >= REQUIRED
    assert data["status"] == "passed" and data["passed"] is True and data["reason"] is None
    assert all({"name", "passed", "detail"} <= set(c) for c in data["checks"])
    assert set(data["timings_ms"]) == {"candidate", "eager", "compile"}
    assert data["timings_ms"]["compile"] is None and data["speedup_vs_compile"] is None
    assert data["speedup_vs_eager"] > 0


def test_null_control_says_whether_a_session_would_bank_it(cache_dir):
    """--null-control: the reference verified against itself next to the candidate, with as many
    calls; the verdict carries the null, and the JSON the judgement a session would make of it."""
    from forge.core.acceptance import beats_eager, null_bar
    from forge.core.verdict import Verdict

    files = (str(OPS / "small_softmax.py"), str(CANDIDATES / "softmax/honest_torch.py"))
    r = forge_here(
        "verify", *files, "--no-compile-baseline", "--null-control", "--json", cache=cache_dir, FORGE_TIMING_TRIALS="12"
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    v = Verdict.from_json(data)
    null, paired = v.timing_stats.null_eager, v.timing_stats.headline_pairs()[0]
    assert null is not None and paired is not None and null.pairs == paired.pairs == 12, v.timing_stats
    judged = data["acceptance"]
    assert (judged["accepted"], judged["reason"]) == beats_eager(v)  # the stored verdict says the same
    assert not judged["accepted"] or paired.low > null_bar(null)


def test_timed_trials_come_in_batches_alternating_with_eager(cache_dir):
    # 1 MiB holds 8 of this op's input+output sets: its 30 trials need four batches (capped at three),
    # each timed call by call, every candidate call paired with an adjacent eager call.
    args = ("verify", str(OPS / "small_softmax.py"), str(CANDIDATES / "softmax/honest_torch.py"))
    env = {"FORGE_TIMING_BATCH_MB": "1", "FORGE_TIMING_BUDGET_S": "5"}  # a budget for the most trials (30)
    r = forge_here(*args, "--no-compile-baseline", cache=cache_dir, **env)
    assert r.returncode == 0, r.stderr
    assert "timing: 8 pairs of calls, eager and candidate, cold (batch 1/3)" in r.stderr
    assert "timing: 8 pairs of calls, eager and candidate, warm (batch 3/3)" in r.stderr
    data = json.loads(forge_here(*args, "--no-compile-baseline", "--json", cache=cache_dir, **env).stdout)
    stats = data["timing_stats"]
    assert stats["candidate"]["trials"] == stats["eager"]["trials"] == stats["paired_eager"]["pairs"] == 24
    paired = stats["paired_eager"]
    assert paired["low"] <= paired["median"] <= paired["high"]
    assert stats["eager"]["q1_ms"] <= stats["eager"]["median_ms"] <= stats["eager"]["q3_ms"]
    timed = next(c for c in data["checks"] if c["name"] == "timed_outputs")
    assert timed["passed"] and "all 48 timed calls" in timed["detail"]  # each pair timed cold and warm
    warm = stats["warm_paired_eager"]
    assert warm["pairs"] == 24 and stats["regime"] in ("cold", "warm") and stats["working_set_bytes"] > 0
    judged = stats["paired_eager"] if stats["regime"] == "cold" else warm
    assert data["speedup_vs_eager"] == judged["median"]


def test_asked_trials_are_all_timed_in_as_many_batches_as_they_take(cache_dir):
    # --trials lifts the budget's cap (30 trials, 3 batches): 40 calls a side, 8 sets a batch
    args = ("verify", str(OPS / "small_softmax.py"), str(CANDIDATES / "softmax/honest_torch.py"))
    r = forge_here(*args, "--no-compile-baseline", "--trials", "40", cache=cache_dir, FORGE_TIMING_BATCH_MB="1")
    assert r.returncode == 0, r.stderr
    assert "timing: 8 pairs of calls, eager and candidate, cold (batch 5/5)" in r.stderr
    assert "all 80 timed calls" in r.stdout
    bad = forge_here(*args, "--trials", "3", cache=cache_dir)
    assert bad.returncode == 2 and "--trials" in bad.stderr and "Traceback" not in bad.stderr


def test_json_stays_clean_when_candidate_prints(cache_dir):
    r = forge(
        "verify",
        str(OPS / "small_softmax.py"),
        str(CANDIDATES / "softmax/fake_report.py"),
        "--no-compile-baseline",
        "--json",
        cache=cache_dir,
    )
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["status"] == "failed_correctness" and data["passed"] is False
    assert "PASSED" in data["candidate_output"]
    assert "PASSED" not in r.stderr


def test_human_output_explains_failure(cache_dir):
    r = forge(
        "verify",
        str(OPS / "small_softmax.py"),
        str(CANDIDATES / "softmax/mutate_inputs.py"),
        "--no-compile-baseline",
        cache=cache_dir,
    )
    assert r.returncode == 1
    assert "FAILED_INTEGRITY" in r.stdout and "inputs_unchanged" in r.stdout and "reason:" in r.stdout


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (OPS / "does_not_exist.py", "no such op file"),
        (OPS / "bad" / "syntax_error.py", "syntax error"),
        (OPS / "bad" / "no_model.py", "does not define Model"),
        (OPS / "bad" / "inputs_raise.py", "get_inputs() raised"),
        (OPS / "bad" / "inputs_not_tensors.py", "not a torch.Tensor"),
        (OPS / "bad" / "reference_fails.py", "reference Model fails on its own inputs"),
    ],
)
def test_bad_op_files_exit_2_with_a_clear_message(cache_dir, op, message):
    honest = str(CANDIDATES / "softmax/honest_torch.py")
    r = forge_here("verify", str(op), honest, "--no-compile-baseline", cache=cache_dir)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in " ".join(r.stderr.split())
    assert "Traceback (most recent call last)" not in r.stderr
    assert "forge/verifier" not in r.stderr  # forge's own frames are not shown to the user


def test_bad_op_json_error_object(cache_dir):
    r = forge(
        "verify",
        str(OPS / "bad" / "no_model.py"),
        str(CANDIDATES / "softmax/honest_torch.py"),
        "--json",
        cache=cache_dir,
    )
    assert r.returncode == 2
    assert json.loads(r.stdout)["error"]["kind"] == "ProblemError"


def test_missing_candidate_and_bad_device(cache_dir):
    r = forge_here("verify", str(OPS / "small_softmax.py"), "nope.py", cache=cache_dir)
    assert r.returncode == 2 and "no such candidate file" in r.stderr
    r = forge_here(
        "verify",
        str(OPS / "small_softmax.py"),
        str(CANDIDATES / "softmax/honest_torch.py"),
        "--device",
        "tpu",
        cache=cache_dir,
    )
    assert r.returncode == 2 and "device" in r.stderr


def test_shipped_example_with_declared_shapes(cache_dir):
    r = forge_here(
        "verify",
        str(OPS / "declared_shapes.py"),
        str(EXAMPLES / "candidates" / "rowsum_torch.py"),
        "--no-compile-baseline",
        "--json",
        cache=cache_dir,
    )
    data = json.loads(r.stdout)
    assert data["problem"] == "declared_rowsum" and data["status"] == "passed", data["reason"]
    assert "rows=3, cols=17" in data["shapes"]


def test_degenerate_problem_is_flagged(cache_dir, tmp_path):
    cand = tmp_path / "zeros.py"
    cand.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.zeros_like(x)\n"
    )
    r = forge_here("verify", str(OPS / "degenerate.py"), str(cand), "--no-compile-baseline", "--json", cache=cache_dir)
    data = json.loads(r.stdout)
    assert any("degenerate problem" in w for w in data["warnings"])


def test_train_checks_the_candidates_backward(cache_dir, tmp_path):
    """--train: the gradients of the op's inputs and parameters against the reference's autograd;
    a kernel that returns its result without an autograd graph fails, saying what to write."""
    op = str(OPS / "gated_scale.py")
    honest = tmp_path / "torch_ops.py"
    honest.write_text(
        "import torch\nfrom torch import nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, channels):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.randn(channels))\n\n"
        "    def forward(self, x, gate):\n        return x * torch.sigmoid(gate) * self.weight\n"
    )
    r = forge_here("verify", op, str(honest), "--no-compile-baseline", "--train", "--json", cache=cache_dir)
    assert r.returncode == 0, r.stderr
    gradients = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "gradients")
    assert gradients["passed"] and "match the reference's autograd" in gradients["detail"]
    no_backward = tmp_path / "no_backward.py"
    no_backward.write_text(
        honest.read_text()
        .replace("        return x *", "        return (x *")
        .replace("self.weight\n", "self.weight).detach()\n")
    )
    r = forge_here("verify", op, str(no_backward), "--no-compile-baseline", "--train", cache=cache_dir)
    assert r.returncode != 0
    assert "provides no backward" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.e2e  # four CLI processes (25 s on 2 cores): .ci/run's heavy run
def test_from_a_project_folder_the_dotenv_stays_unread_and_a_printed_key_is_redacted(cache_dir, tmp_path):
    """`forge verify` run in a project that keeps its key in .env: a candidate that reads it is
    refused with the path named; one that prints the key (it was handed it) has it redacted, in
    the JSON verdict and in the text a user reads."""
    canary = "zq9" + "f00dfeed" * 3
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={canary}\n")
    (tmp_path / "softmax_op.py").write_text((OPS / "small_softmax.py").read_text())
    honest = (CANDIDATES / "softmax" / "honest_torch.py").read_text()
    (tmp_path / "reads.py").write_text("print(open('.env').read())\n" + honest)
    (tmp_path / "prints.py").write_text(f"print('key', {canary[:8]!r} + {canary[8:]!r})\n" + honest)
    env = {**os.environ, "FORGE_CACHE_DIR": str(cache_dir), "FORGE_TIMING_BUDGET_S": "0.2"}

    def run(cand: str, *extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "forge", "verify", "softmax_op.py", cand, "--no-compile-baseline", *extra]
        return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)

    read = run("reads.py", "--json")
    data = json.loads(read.stdout)
    assert read.returncode != 0 and not data["passed"], read.stdout[-800:]
    assert "Permission denied" in data["reason"] and ".env" in data["reason"], data["reason"]
    for extra in (("--json",), ()):
        printed = run("prints.py", *extra)
        assert printed.returncode == 0, printed.stdout[-800:] + printed.stderr[-800:]
        assert canary not in printed.stdout + printed.stderr
    assert "[redacted:" in json.loads(run("prints.py", "--json").stdout)["candidate_output"]
