"""What a core and a set of processes did over an interval, from /proc:
the core's busy share, the processes' own CPU time and their context
switches. For experiments that measure CPU use (issue 3 E2-E4)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# /proc/stat cpuN fields: user nice system idle iowait irq softirq steal (guest
# and guest_nice are already inside user and nice).
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def read_cpu(core: int) -> list[int]:
    """The cpuN line of /proc/stat: jiffies per STAT_FIELDS."""
    tag = f"cpu{core}"
    for line in Path("/proc/stat").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == tag:
            return [int(x) for x in parts[1 : 1 + len(STAT_FIELDS)]]
    raise RuntimeError(f"/proc/stat has no {tag} line")


def read_cpus() -> dict[str, list[int]]:
    """Every cpuN line of /proc/stat (not the cpu total): jiffies per STAT_FIELDS."""
    cpus = {}
    for line in Path("/proc/stat").read_text().splitlines():
        parts = line.split()
        if parts and parts[0].startswith("cpu") and parts[0] != "cpu":
            cpus[parts[0]] = [int(x) for x in parts[1 : 1 + len(STAT_FIELDS)]]
    return cpus


def steal_pct(a: list[int], b: list[int]) -> float:
    """The share of the interval a..b the hypervisor gave this vCPU to others
    (steal), in percent: time no program here could use, so a benchmark on a
    VM reads it next to its numbers."""
    d = [y - x for x, y in zip(a, b, strict=True)]
    total = sum(d)
    return 100.0 * d[7] / total if total > 0 else float("nan")


def steal_by_cpu(a: dict[str, list[int]], b: dict[str, list[int]]) -> dict[str, float]:
    return {c: round(steal_pct(a[c], b[c]), 1) for c in a if c in b}


def cpu_busy_pct(a: list[int], b: list[int]) -> float:
    """(total - idle - iowait) / total over the interval a..b, in percent."""
    d = [y - x for x, y in zip(a, b, strict=True)]
    total = sum(d)
    return 100.0 * (total - d[3] - d[4]) / total if total > 0 else float("nan")


def _tasks(pid: int) -> list[Path]:
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []


def ctxsw(pid: int) -> int:
    """Voluntary + involuntary context switches of every thread of pid."""
    n = 0
    for t in _tasks(pid):
        try:
            for line in (t / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                    n += int(line.split()[1])
        except OSError:
            continue
    return n


def runtime_ns(pid: int) -> int:
    """CPU time of every thread of pid (/proc/PID/task/TID/schedstat, ns)."""
    n = 0
    for t in _tasks(pid):
        try:
            n += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return n


@dataclass
class ProcSnap:
    t: float
    cpu: list[int]
    ctxsw: dict[int, int]
    runtime_ns: dict[int, int]

    @classmethod
    def take(cls, core: int, pids: list[int]) -> ProcSnap:
        return cls(
            t=time.monotonic(),
            cpu=read_cpu(core),
            ctxsw={p: ctxsw(p) for p in pids},
            runtime_ns={p: runtime_ns(p) for p in pids},
        )


def proc_delta(a: ProcSnap, b: ProcSnap) -> dict[str, Any]:
    """Core busy %, the NFs' own CPU % and their context switches per second."""
    wall = b.t - a.t
    cs = sum(b.ctxsw[p] - a.ctxsw[p] for p in a.ctxsw)
    rt = sum(b.runtime_ns[p] - a.runtime_ns[p] for p in a.runtime_ns)
    jiffies = [y - x for x, y in zip(a.cpu, b.cpu, strict=True)]
    return {
        "wall_s": round(wall, 4),
        "cpu_pct": round(cpu_busy_pct(a.cpu, b.cpu), 3),
        "steal_pct": round(steal_pct(a.cpu, b.cpu), 1),
        "cpu_jiffies": dict(zip(STAT_FIELDS, jiffies, strict=True)),
        "nf_cpu_pct": round(100.0 * rt / (wall * 1e9), 3) if wall > 0 else float("nan"),
        "ctxsw": cs,
        "ctxsw_per_s": round(cs / wall, 1) if wall > 0 else float("nan"),
        # Others' work on the machine shows here (and in cpu_pct - nf_cpu_pct).
        "loadavg": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
    }
