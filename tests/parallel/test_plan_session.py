"""``forge plan MODEL.py`` end to end, as a user runs it: the built-in search banks a
plan verified on two real ranks, with its measured step and the cost model's prediction beside it;
a two-process program that calls ``bank.parallelize`` (or the plan exported as plain torch) gets
the unsharded model's outputs and parameters after a training step. Bad input is refused with
exit 2 before anything runs; ``--simulate`` ranks a mesh too large for this machine. The old
``forge optimize --parallel`` form says what it became."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from forge.parallel.mesh_run import free_port

pytestmark = pytest.mark.mesh  # multi-process meshes (minutes): in .ci/run's heavy run

ROOT = Path(__file__).resolve().parents[2]
OPS = Path(__file__).parent / "ops"
TRANSFORMER = OPS / "tiny_transformer.py"


def forge(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FORGE_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "forge", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


def user_program(how: str, source: Path, result: Path, dp: int, world: int = 2) -> dict[str, object]:
    """Run tests/parallel/user_program.py on ``world`` ranks; rank 0's findings."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).parent / "user_program.py"),
                str(TRANSFORMER),
                how,
                str(source),
                str(result),
                str(dp),
            ],
            env={
                **os.environ,
                "RANK": str(r),
                "WORLD_SIZE": str(world),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "OMP_NUM_THREADS": "1",
                "PYTHONPATH": str(ROOT),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    return dict(json.loads(result.read_text()))


@pytest.fixture(scope="module")
def banked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object], Path]:
    tmp = tmp_path_factory.mktemp("plans")
    bank, cache = tmp / "bank.db", tmp / "cache"
    done = forge(
        "plan",
        str(TRANSFORMER),
        "--world-size",
        "2",
        "--rounds",
        "2",
        "--bank",
        str(bank),
        "--json",
        cache=cache,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return bank, json.loads(done.stdout), cache


def test_a_verified_plan_is_banked_with_its_measurement_and_prediction(banked):
    bank, result, _cache = banked
    assert result["plan_id"] == 1 and result["status"] == "finished" and result["runs"] == 2
    assert result["measured_ms"] > 0 and result["predicted_ms"] > 0
    assert result["error_before"] is not None and result["error_after"] is not None
    with sqlite3.connect(bank) as db:
        rows = db.execute("SELECT status FROM attempts WHERE role = 'plan' ORDER BY id").fetchall()
        (mesh, world, mode, step, status) = db.execute(
            "SELECT mesh, world_size, mode, step_ms, status FROM parallel_plans"
        ).fetchone()
    statuses = [s for (s,) in rows]
    # two run for real (passed), the rest recorded as ranked but not run, or refused with their reason
    assert statuses.count("passed") == 2 and set(statuses) <= {"passed", "predicted", "refused"}
    assert (world, mode, status) == (2, "train", "active") and step == pytest.approx(result["measured_ms"])
    assert mesh == result["mesh"]


def test_bank_parallelize_in_a_two_process_program_equals_the_unsharded_model(banked, tmp_path):
    bank, result, _cache = banked
    dp = int(str(result["mesh"]).split("x")[0])
    found = user_program("bank", bank, tmp_path / "bank.json", dp)
    assert found["plan_id"] == result["plan_id"] and found["plain_tensor"] and found["same_output"]
    assert found["param_error_after_step"] < 1e-4


def test_the_plan_exported_as_plain_torch_does_the_same(banked, tmp_path):
    bank, result, cache = banked
    out = tmp_path / "plan1.py"
    done = forge("bank", "export", "--plan", str(result["plan_id"]), str(out), "--bank", str(bank), cache=cache)
    assert done.returncode == 0, done.stderr
    assert "forge" not in "".join(line for line in out.read_text().splitlines() if line.startswith(("import", "from")))
    dp = int(str(result["mesh"]).split("x")[0])
    found = user_program("export", out, tmp_path / "export.json", dp)
    assert found["plain_tensor"] and found["same_output"] and found["param_error_after_step"] < 1e-4


def test_bank_list_and_show_show_the_plan(banked):
    bank, result, cache = banked
    listed = forge("bank", "list", "--bank", str(bank), "--json", cache=cache)
    plans = [p for p in json.loads(listed.stdout) if p.get("kind") == "plan"]
    assert [p["id"] for p in plans] == [result["plan_id"]] and plans[0]["mode"] == "train"
    shown = forge("bank", "show", "--plan", str(result["plan_id"]), "--bank", str(bank), cache=cache)
    assert shown.returncode == 0 and "predicted: step" in shown.stdout and "measured: step" in shown.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--world-size", "4", "--mesh", "2x3"], "must multiply to the world size"),
        (["--world-size", "2", "--mesh", "two"], "write it as DPxTP"),
        (["--world-size", "4096"], "this machine can spawn"),
        (["--world-size", "1"], "at least 2 ranks"),
        ([], "forge plan needs --world-size"),
    ],
)
def test_bad_input_is_refused_with_exit_2(args, said, tmp_path):
    done = forge("plan", str(TRANSFORMER), *args, "--bank", str(tmp_path / "b.db"), cache=tmp_path)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_model_that_does_not_run_on_its_inputs_is_refused(tmp_path):
    broken = tmp_path / "broken.py"
    source = TRANSFORMER.read_text().replace("torch.randint(0, 128, (batch, seq))", "torch.randn(batch, seq)")
    path_line = f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    broken.write_text(source.replace("from tests.parallel.models", path_line + "from tests.parallel.models"))
    done = forge("plan", str(broken), "--world-size", "2", "--bank", str(tmp_path / "b.db"), cache=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "the reference Model fails on its own inputs: RuntimeError" in said, said
    assert "parallel/models.py:" in said and "Traceback" not in said  # the line in the user's code that failed


def test_simulate_ranks_a_mesh_too_large_to_run_and_says_it_is_predicted(tmp_path):
    model = ROOT / "examples" / "models" / "transformer.py"
    done = forge(
        "plan",
        str(model),
        "--world-size",
        "64",
        "--mesh",
        "8x8",
        "--simulate",
        "--bank",
        str(tmp_path / "b.db"),
        cache=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "predicted only (--simulate): not measured" in done.stdout
    with sqlite3.connect(tmp_path / "b.db") as db:
        assert db.execute("SELECT status, world_size, mesh FROM parallel_plans").fetchall() == [
            ("predicted", 64, "8x8")
        ]


def test_resume_runs_more_plans_and_none_of_them_again(tmp_path):
    bank = tmp_path / "b.db"
    first = forge(
        "plan",
        str(TRANSFORMER),
        "--world-size",
        "2",
        "--rounds",
        "1",
        "--bank",
        str(bank),
        "--json",
        cache=tmp_path,
    )
    assert first.returncode == 0, first.stderr[-2000:]
    again = forge("plan", "--resume", "1", "--bank", str(bank), cache=tmp_path)
    assert again.returncode == 2 and "already finished its 1 rounds" in again.stderr
    kernel_path = forge("optimize", "--resume", "1", "--bank", str(bank), cache=tmp_path)
    assert kernel_path.returncode == 2 and "resume it with `forge plan --resume 1`" in kernel_path.stderr
    # the 0.1 form says what it became and runs nothing
    old = forge("optimize", "--parallel", "--resume", "1", "--bank", str(bank), cache=tmp_path)
    assert old.returncode == 2 and "`forge plan MODEL.py` now" in " ".join(old.stderr.split()), old.stderr
    more = forge("plan", "--resume", "1", "--rounds", "2", "--bank", str(bank), "--json", cache=tmp_path)
    assert more.returncode == 0, more.stderr[-2000:]
    assert json.loads(more.stdout)["session_id"] == 1 and "resuming 1" in more.stderr
    with sqlite3.connect(bank) as db:
        passed = db.execute("SELECT candidate_source FROM attempts WHERE status = 'passed'").fetchall()
        sessions = db.execute("SELECT COUNT(*) FROM sessions").fetchone()
    assert len(passed) == 2 and len(set(passed)) == 2 and sessions == (1,)
