"""What a verification costs: workers forked from a template, the reference worker kept between a
session's verifications, cases drawn one at a time, and each process's peak memory reported."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest
import torch

from forge.core.statuses import VerdictStatus
from forge.verifier import verify
from forge.verifier.machine import memory
from forge.verifier.parent.reference_pool import ReferencePool
from forge.verifier.protocol import codec
from forge.verifier.worker.candidate_watch import busy_python_threads
from tests.conftest import CANDIDATES, OPS, sweep

SOFTMAX = OPS / "small_softmax.py"
HONEST = CANDIDATES / "softmax" / "honest_torch.py"

LEAVES_STATE = """
import torch
import torch.nn as nn

import forge.verifier.worker.candidate_side as side

side.LEFT_BY_AN_EARLIER_CANDIDATE = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

CHECKS_STATE = """
import os

import torch
import torch.nn as nn

import forge.verifier.worker.candidate_side as side

if getattr(side, "LEFT_BY_AN_EARLIER_CANDIDATE", False):
    raise RuntimeError("an earlier candidate's state is visible here")
print("PARENT:", open(f"/proc/{os.getppid()}/cmdline", "rb").read().replace(b"\\0", b" ").decode())


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""


def test_memory_bound_is_the_ops_working_set_or_a_gib():
    assert memory.budget_bytes(0) == 1 << 30
    assert memory.budget_bytes(100 << 20) == 1 << 30  # 8 x 100 MiB is under the floor
    assert memory.budget_bytes(1 << 30) == 8 << 30


def test_decoded_tensors_are_freed_without_the_garbage_collector():
    """A frame's tensors die with the last reference to them, not at the next collection (the
    decoder's closure was a cycle that kept every case of a verification alive)."""
    gc.disable()
    try:
        frame = codec.encode({"x": [torch.ones(1000)], "t": (torch.zeros(3),)})
        out = codec.decode(bytearray(frame))
        alive = weakref.ref(out["x"][0])
        del out
        assert alive() is None
        sent = torch.ones(1000)
        parts = codec.encode_parts({"x": sent})
        del parts
        alive = weakref.ref(sent)
        del sent
        assert alive() is None
    finally:
        gc.enable()


def test_thread_scan_leaves_no_cycle_holding_the_callers_tensors():
    def a_case() -> weakref.ref[torch.Tensor]:
        outputs = torch.ones(1000)
        busy_python_threads(set(threading.enumerate()))
        return weakref.ref(outputs)

    gc.disable()
    try:
        assert a_case()() is None
    finally:
        gc.enable()


def test_reference_worker_is_kept_between_verifications(fast_settings):
    pool = ReferencePool()
    try:
        first = verify(SOFTMAX, HONEST, fast_settings, references=pool)
        kept = pool.pids()
        second = verify(SOFTMAX, HONEST, fast_settings, references=pool)
        assert first.passed and second.passed, (first.reason, second.reason)
        assert len(kept) == 1 and pool.pids() == kept  # the same worker served both
        assert first.seed != second.seed  # new cases and weights for the second
        assert second.cases == first.cases
    finally:
        pool.close()
    assert pool.pids() == []


@pytest.mark.parametrize(
    "bad",
    sweep(
        ["hardcoded_shape.py", "syntax_error.py", "raises.py"],
        ids=["fails_a_case", "fails_to_load", "raises_on_a_case"],
        marker=pytest.mark.variants,
    ),
)
def test_a_failed_verification_leaves_the_reference_ready_for_the_next(fast_settings, bad):
    pool = ReferencePool()
    try:
        failed = verify(SOFTMAX, CANDIDATES / "softmax" / bad, fast_settings, references=pool)
        assert not failed.passed
        kept = pool.pids()
        assert len(kept) == 1
        after = verify(SOFTMAX, HONEST, fast_settings, references=pool)
        assert after.passed, after.reason
        assert pool.pids() == kept
    finally:
        pool.close()


def test_forked_workers_start_clean_of_earlier_candidates(fast_settings, tmp_path: Path):
    """Each candidate runs in a process forked from a template that never ran candidate code."""
    leaves, checks = tmp_path / "leaves.py", tmp_path / "checks.py"
    leaves.write_text(LEAVES_STATE)
    checks.write_text(CHECKS_STATE)
    # unsandboxed: the check reads its parent's command line, which the sandbox keeps out of reach
    unconfined = fast_settings.model_copy(update={"sandbox": False})
    assert verify(SOFTMAX, leaves, unconfined).passed
    second = verify(SOFTMAX, checks, unconfined)
    assert second.passed, second.reason
    assert "forge.verifier.processes.template_process" in second.candidate_output


def test_templates_off_exec_every_worker(fast_settings, tmp_path: Path, monkeypatch):
    checks = tmp_path / "checks.py"
    checks.write_text(CHECKS_STATE)
    monkeypatch.setenv("FORGE_WORKER_TEMPLATE", "0")
    v = verify(SOFTMAX, checks, fast_settings.model_copy(update={"sandbox": False}))
    assert v.passed, v.reason
    assert "template_process" not in v.candidate_output
    assert "PARENT:" in v.candidate_output


def test_verdict_reports_each_processes_peak_memory(fast_settings):
    v = verify(SOFTMAX, HONEST, fast_settings)
    assert v.memory is not None
    assert v.memory.bound_mib == 1024  # a small op: the 1 GiB floor
    assert v.memory.candidate_mib and v.memory.reference_mib and v.memory.forge_mib
    assert v.memory.candidate_mib > 100  # torch alone is more: a real high-water mark, not a stub
    check = next(c for c in v.checks if c.name == "memory")
    assert check.passed and check.fatal and v.memory.within_limit
    assert v.memory.limit_mib is not None and v.memory.limit_mib >= v.memory.reference_mib + 256
    assert "candidate" in check.detail and "= 1024 MiB" in check.detail


def test_the_candidates_memory_limit_is_the_bound_or_the_references_own_peak_plus_a_margin():
    assert memory.candidate_limit_mib(1024, 400, 1 << 20) == 1024  # the reference is well under the bound
    assert memory.candidate_limit_mib(1024, 1138, 1 << 20) == 1138 + 256  # the reference itself is over it
    assert memory.candidate_limit_mib(1024, 1138, 600 << 20) == 1138 + 1200  # big calls: twice their data
    assert memory.candidate_limit_mib(1024, None, 1 << 20) == 1024


def test_a_candidate_far_above_the_references_memory_fails(fast_settings):
    v = verify(SOFTMAX, CANDIDATES / "softmax" / "memory_greedy.py", fast_settings)
    assert v.memory is not None and v.memory.candidate_mib and v.memory.limit_mib
    assert v.memory.candidate_mib > v.memory.limit_mib > v.memory.reference_mib
    assert v.status is VerdictStatus.FAILED_INTEGRITY and "memory" in (v.reason or "")
    check = next(c for c in v.checks if c.name == "memory")
    assert not check.passed and check.fatal
