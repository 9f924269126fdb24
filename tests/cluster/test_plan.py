"""What a session asks of a Ray cluster, from the nodes Ray reports (pure logic, no cluster)."""

from __future__ import annotations

import pytest

from forge.core.errors import UsageError
from forge.core.settings import ForgeSettings

# (threads=None is spelled out below: ForgeSettings() also reads FORGE_THREADS from the environment)

plan_sessions = pytest.importorskip("forge.cluster", reason="Ray is not installed").plan_sessions


def _node(cpu: float, gpu: float = 0, alive: bool = True) -> dict[str, object]:
    return {"Alive": alive, "Resources": {"CPU": cpu, **({"GPU": gpu} if gpu else {})}}


def test_a_cpu_session_takes_a_whole_node_by_default():
    plan = plan_sessions([_node(8), _node(16), _node(4, alive=False)], ForgeSettings(device="auto", threads=None))
    assert (plan.device, plan.nodes, plan.cpus_per_session, plan.sessions_at_once) == ("cpu", 2, 8, 3)


def test_threads_set_the_cores_a_session_asks_for():
    plan = plan_sessions([_node(8), _node(16)], ForgeSettings(device="cpu", threads=4))
    assert (plan.cpus_per_session, plan.sessions_at_once) == (4, 6)
    with pytest.raises(UsageError, match="no Ray node has that many CPUs"):
        plan_sessions([_node(8)], ForgeSettings(device="cpu", threads=12))


def test_gpus_make_it_one_session_per_gpu():
    plan = plan_sessions([_node(16, gpu=8), _node(16, gpu=8)], ForgeSettings(device="auto", threads=None))
    assert (plan.device, plan.gpus_per_session, plan.sessions_at_once) == ("cuda", 1, 16)
    with pytest.raises(UsageError, match="the Ray cluster has no GPUs"):
        plan_sessions([_node(16)], ForgeSettings(device="cuda"))
