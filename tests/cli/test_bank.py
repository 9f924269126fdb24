"""As a user would: verify and save a kernel for an op whose Model lives in their package, then
use the bank from a fresh process (read-only), and manage it with `forge bank`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USERPKG = ROOT / "examples" / "kernelbank"


def forge(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forge", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "FORGE_TIMING_BUDGET_S": "0.2", **(env or {})},
        timeout=600,
    )


USE_BANK = """
import warnings, torch, forge.kernelbank as kb
from mylayers.norm import Block
warnings.simplefilter("always")
torch.manual_seed(0)
model = Block(256)
x = torch.randn(64, 256)
with torch.no_grad():
    model.norm1.weight.normal_()  # the two layers differ, as in a trained model
    model.norm2.weight.uniform_(0.5, 2.0)
    ref = model(x)
    with warnings.catch_warnings(record=True) as caught:
        bank = kb.open({bank!r})
        swapped = bank.kernelize(model, mode="eager")  # an eager program: no note about torch.compile
        out = model(x)
        out2 = model(x)
    restored = bank.restore(model)
print("RESULT", swapped, restored, bool(torch.allclose(out, ref, atol=1e-5)), len(caught),
      "|".join(str(w.message) for w in caught))
"""


def use_bank(bank: Path, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, int, bool, int, str]:
    r = subprocess.run(
        [sys.executable, "-c", USE_BANK.format(bank=str(bank))],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT"))
    _, swapped, restored, same, n, msgs = [*line.split(" ", 5), ""][:6]
    return int(swapped), int(restored), same == "True", int(n), msgs


@pytest.fixture(scope="module")
def saved_bank(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bank")
    bank = tmp / "bank.db"
    r = forge(
        "verify",
        "rmsnorm_op.py",
        "rmsnorm_kernel.py",
        "--no-compile-baseline",
        "--save",
        "--bank",
        str(bank),
        "--json",
        cwd=USERPKG,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert data["status"] == "passed" and isinstance(data["kernel_id"], int)
    return bank, data["kernel_id"]


def test_fresh_process_kernelizes_read_only(saved_bank, tmp_path):
    bank, _ = saved_bank
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copy(bank, ro / "bank.db")
    for side in ("-wal", "-shm"):
        if Path(str(bank) + side).exists():
            shutil.copy(str(bank) + side, ro / ("bank.db" + side))
    (ro / "bank.db").chmod(0o444)
    swapped, restored, same, n_warn, _ = use_bank(ro / "bank.db", USERPKG)
    assert (swapped, restored, same, n_warn) == (2, 2, True, 0)


@pytest.mark.e2e  # forge verify --save and a fresh process's kernelize (~10 s on 2 cores)
def test_kernelbench_form_saved_by_verify_is_kernelized(tmp_path):
    """A standalone ``ModelNew(nn.Module)`` (KernelBench's form) swaps into every instance of the
    user's class in a fresh process, gives the reference's outputs, and is restored."""
    bank = tmp_path / "bank.db"
    r = forge(
        "verify",
        "rmsnorm_op.py",
        "rmsnorm_kernelbench.py",
        "--no-compile-baseline",
        "--save",
        "--bank",
        str(bank),
        cwd=USERPKG,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "binds" in r.stdout and "direct" in r.stdout
    swapped, restored, same, n_warn, msgs = use_bank(bank, USERPKG)
    assert (swapped, restored, same, n_warn) == (2, 2, True, 0), msgs
    shown = forge("bank", "show", "1", "--bank", str(bank), cwd=tmp_path)
    assert "binds to instances" in shown.stdout and "direct" in shown.stdout, shown.stdout


def test_switched_off_gives_reference(saved_bank):
    bank, _ = saved_bank
    swapped, restored, same, n_warn, msgs = use_bank(bank, USERPKG, {"FORGE_KERNELBANK": "off"})
    assert (swapped, restored, same, n_warn) == (0, 0, True, 1)
    assert "FORGE_KERNELBANK=off" in msgs


def test_changed_user_class_is_stale_with_one_warning(saved_bank, tmp_path):
    bank, _ = saved_bank
    pkg = tmp_path / "userpkg"
    shutil.copytree(USERPKG, pkg)
    norm = pkg / "mylayers" / "norm.py"
    norm.write_text(norm.read_text().replace("keepdim=True) + self.eps)", "keepdim=True) + 2 * self.eps)"))
    swapped, _, same, n_warn, msgs = use_bank(bank, pkg)
    assert (swapped, same, n_warn) == (0, True, 1)
    assert "no longer matches" in msgs


def test_failing_candidate_is_not_saved(tmp_path):
    bank = tmp_path / "b.db"
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import torch\nfrom forge_reference import Model\nclass ModelNew(Model):\n"
        "    def forward(self, x):\n        return x\n"
    )
    r = forge("verify", "rmsnorm_op.py", str(bad), "--no-compile-baseline", "--save", "--bank", str(bank), cwd=USERPKG)
    assert r.returncode == 1 and "not saved" in r.stdout
    assert forge("bank", "list", "--bank", str(bank), cwd=USERPKG).returncode == 2  # still no bank


@pytest.mark.e2e
def test_bank_commands(saved_bank, tmp_path):
    bank, kid = saved_bank
    work = tmp_path / "b.db"
    shutil.copy(bank, work)
    rows = json.loads(forge("bank", "list", "--bank", str(work), "--json", cwd=USERPKG).stdout)
    assert [r["id"] for r in rows] == [kid] and rows[0]["op"] == "user_rmsnorm" and rows[0]["status"] == "active"
    shown = json.loads(forge("bank", "show", str(kid), "--source", "--bank", str(work), "--json", cwd=USERPKG).stdout)
    assert "class ModelNew" in shown["source"] and shown["target_class"] == "mylayers.norm:RMSNorm"
    assert shown["configs"] and shown["configs"][0]["bucket"] == [[64, 256]]
    human = forge("bank", "list", "--bank", str(work), cwd=USERPKG)
    assert human.returncode == 0 and "user_rmsnorm" in human.stdout.replace("\n", "")
    # piped into a file the source is byte for byte the stored one: no wrapping at 80 columns
    piped = forge("bank", "show", str(kid), "--source", "--bank", str(work), cwd=USERPKG).stdout
    assert shown["source"] in piped and max(len(line) for line in shown["source"].splitlines()) > 80

    shipped = tmp_path / "ship.db"
    r = forge("bank", "export", str(shipped), "--op", "user_rmsnorm", "--bank", str(work), "--json", cwd=USERPKG)
    assert json.loads(r.stdout)["exported"] == 1
    other = tmp_path / "other.db"
    r = forge("bank", "import", str(shipped), "--bank", str(other), "--json", cwd=USERPKG)
    assert json.loads(r.stdout)["imported"] == 1
    assert len(json.loads(forge("bank", "list", "--bank", str(other), "--json", cwd=USERPKG).stdout)) == 1

    r = forge("bank", "verify", str(kid), "--bank", str(work), "--json", cwd=USERPKG)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)[0]["status"] == "passed"

    assert forge("bank", "rm", str(kid), "--bank", str(work), cwd=USERPKG).returncode == 0
    assert json.loads(forge("bank", "list", "--bank", str(work), "--json", cwd=USERPKG).stdout) == []
    r = forge("bank", "show", "999", "--bank", str(work), cwd=USERPKG)
    assert r.returncode == 2 and "no kernel with id 999" in r.stderr
