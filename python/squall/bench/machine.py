"""Facts about the machine a run measured on, recorded with every result."""

from __future__ import annotations

import os
import platform
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from squall.bench import procstat
from squall.bench.paths import ROOT


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _cpu_mhz() -> float | None:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":", 1)[1])
    return None


def _out(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("MemTotal", "HugePages_Total", "HugePages_Free", "Hugepagesize"):
            out[k] = int(v.split()[0])
    return out


def _cpu_ticks() -> dict[int, tuple[str, int]]:
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(d.name)] = (comm, int(fields[11]) + int(fields[12]))  # utime + stime
    return out


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    seen, todo = {root}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def busy_others(sample_s: float = 0.5, min_pct: float = 10.0) -> list[dict[str, Any]]:
    """Processes outside this run that used at least min_pct of a CPU over
    sample_s: what else competed with the measurement."""
    hz = os.sysconf("SC_CLK_TCK")
    t0 = _cpu_ticks()
    time.sleep(sample_s)
    t1 = _cpu_ticks()
    mine = _descendants(os.getpid())
    busy = []
    for pid, (comm, ticks) in t1.items():
        if pid in mine or pid not in t0:
            continue
        pct = 100.0 * (ticks - t0[pid][1]) / hz / sample_s
        if pct >= min_pct:
            busy.append({"pid": pid, "comm": comm, "cpu_pct": round(pct)})
    return sorted(busy, key=lambda b: -int(b["cpu_pct"]))


# A vCPU that lost this much of an interval to the hypervisor is noted.
STEAL_NOTE_PCT = 5.0


class ContentionMonitor:
    """Samples busy_others() and the hypervisor's steal every interval_s in a
    thread while a run goes on: when something else competed with the
    measurement, and how hard."""

    def __init__(self, interval_s: float = 5.0) -> None:
        self.interval_s = interval_s
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="contention", daemon=True)

    def _loop(self) -> None:
        cpus = procstat.read_cpus()
        while not self._stop.wait(self.interval_s):
            others = busy_others(sample_s=0.5, min_pct=20.0)
            now = procstat.read_cpus()
            steal = procstat.steal_by_cpu(cpus, now)
            cpus = now
            stolen = {c: v for c, v in steal.items() if v >= STEAL_NOTE_PCT}
            if others or stolen:
                t = round(time.monotonic() - self._t0, 1)
                sample: dict[str, Any] = {"t_s": t, "others": others[:5]}
                if stolen:
                    sample["steal_pct"] = stolen
                self.samples.append(sample)

    def start(self) -> ContentionMonitor:
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.samples

    def busy_share(self, duration_s: float) -> float:
        """Share of the run's samples that saw another busy process."""
        n = max(1, int(duration_s / self.interval_s))
        return min(1.0, sum(1 for s in self.samples if s["others"]) / n)


def git_state() -> dict[str, Any]:
    commit = _out(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
    dirty = _out(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit or None, "dirty": bool(dirty)}


def facts() -> dict[str, Any]:
    """CPU model, cores, kernel, DPDK version, hugepages, memory, load average."""
    mem = _meminfo()
    return {
        "cpu": _cpu_model(),
        "cpu_mhz": _cpu_mhz(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "os": _out(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "dpdk": _out(["pkg-config", "--modversion", "libdpdk"]),
        "python": platform.python_version(),
        "mem_total_kb": mem.get("MemTotal"),
        "hugepages_total": mem.get("HugePages_Total"),
        "hugepages_free": mem.get("HugePages_Free"),
        "hugepage_kb": mem.get("Hugepagesize"),
        "loadavg_before": loadavg(),
        "busy_others_before": busy_others(),
        "git": git_state(),
    }
