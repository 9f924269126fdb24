"""Sessions on a Ray cluster (``forge optimize --executor ray``); imported only when asked for.

- ``connect``: join a cluster (or start a local Ray) and decide what each session asks of it
  (``ClusterPlan``: a whole node's cores or ``threads`` cores, or one GPU);
- ``RemoteVerifier``: a session's verifier whose verifications run in an actor on a node
  (``node_actor``), which starts forge's isolated workers there as a local run does; node losses,
  time limits and Ctrl-C are handled here, and verdicts come back as validated JSON.

The sessions themselves (agents, search, the bank's writes, events) stay on the driver.
"""

from forge.cluster.plan import ClusterPlan, connect, disconnect, plan_sessions
from forge.cluster.remote import RemoteVerifier

__all__ = ["ClusterPlan", "RemoteVerifier", "connect", "disconnect", "plan_sessions"]
