"""Take a core away for a while, as a busy host does to a vCPU: a child
process pinned to the core spins under SCHED_FIFO, which no normal-priority
thread there (manager or NF) preempts. For experiments that ask how much of
such a stall the dataplane rides out without a drop."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

# The child: sleep, then hold the core at FIFO priority for ms, `times` times.
_CHILD = """
import os, sys, time
cpu, ms, times, every = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
os.sched_setaffinity(0, {cpu})
for _ in range(times):
    time.sleep(every)
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    end = time.monotonic() + ms / 1000
    while time.monotonic() < end:
        pass
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
"""


@dataclass(frozen=True)
class Stalls:
    cpu: int
    ms: float
    times: int
    every_s: float


def can_stall() -> str | None:
    """None if this process may use SCHED_FIFO, else why not."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError as e:
        return f"SCHED_FIFO not allowed here ({e})"
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return None


def start(s: Stalls) -> subprocess.Popen[bytes]:
    """Stalls begin every_s after this call, and then every every_s; wait()
    on the result to know they are done (it fails if the child could not)."""
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(s.cpu), str(s.ms), str(s.times), str(s.every_s)]
    )
