"""The verifier runs each passing candidate the way ``bank.kernelize`` will (bound to an instance of
the user's class holding weights of its own) and records how it binds, or why it does not. These
run the real verifier on an op whose Model is the user's own class."""

from __future__ import annotations

import pytest

from forge.core.statuses import BindMode
from forge.verifier import verify
from tests.conftest import CANDIDATES, TESTS, sweep

USERPKG = TESTS.parent / "examples" / "kernelbank"
OP = USERPKG / "rmsnorm_op.py"


@pytest.fixture(autouse=True)
def _user_package(monkeypatch):
    # The op imports the user's package; the workers start in the working directory, as they
    # would for a user running forge beside their code.
    monkeypatch.chdir(USERPKG)
    monkeypatch.syspath_prepend(str(USERPKG))


@pytest.mark.parametrize(
    ("candidate", "mode", "words"),
    sweep(
        [
            (USERPKG / "rmsnorm_kernel.py", BindMode.DIRECT, "instance itself"),  # subclass form
            (CANDIDATES / "user_rmsnorm" / "view_helpers.py", BindMode.VIEW, "hidden_size, _scale"),
            (CANDIDATES / "user_rmsnorm" / "forge_built_only.py", BindMode.NONE, "gave wrong outputs"),
            (USERPKG / "rmsnorm_kernelbench.py", BindMode.DIRECT, "instance itself"),  # KernelBench form
            (CANDIDATES / "user_rmsnorm" / "tensor_state.py", BindMode.NONE, "buffer 'ones'"),
        ],
        ids=["rmsnorm_kernel", "view_helpers", "forge_built_only", "rmsnorm_kernelbench", "tensor_state"],
        kept=3,  # one of each way to bind
        marker=pytest.mark.variants,
    ),
)
def test_how_each_kernel_binds_is_verified_and_recorded(candidate, mode, words, fast_settings):
    v = verify(OP, candidate, fast_settings)
    assert v.status == "passed", v.reason  # bank.load uses every one of them
    assert v.binding is not None and v.binding.mode is mode, v.binding
    assert words in v.binding.reason
    check = next(c for c in v.checks if c.name == "binds")
    assert check.passed is (mode is not BindMode.NONE) and not check.fatal


def test_failed_candidates_are_not_bound(fast_settings, tmp_path):
    bad = tmp_path / "wrong.py"
    bad.write_text((USERPKG / "rmsnorm_kernelbench.py").read_text().replace("* inv * w[c]", "* w[c]"))
    v = verify(OP, bad, fast_settings)
    assert v.status == "failed_correctness" and v.binding is None
    assert "binds" not in {c.name for c in v.checks}
