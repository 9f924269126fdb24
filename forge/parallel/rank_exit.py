"""How a rank process of forge's own leaves its gloo group: every rank passes a last barrier,
then the process ends without tearing gloo down.

gloo's teardown at exit (``destroy_process_group``, then the interpreter's) races the other
rank's: the store's thread and the pair sockets of one rank go while the other still talks to
them, and now and then a process aborts with "terminate called without an active exception".
That would make a plan which ran correctly, or a link measurement, look like a crashed rank.
After the barrier no collective is in flight, so there is nothing left for the teardown to do
that the kernel's closing of the process does not."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import torch.distributed as dist


def leave_group() -> NoReturn:
    """End this rank once every rank got here (call it after the rank's results are written)."""
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
