"""Where one core's time goes while traffic runs: `perf record` on that CPU,
then the split of its samples (issue 17's why).

On veth ends with af_xdp ports, a DPDK forwarder's transmit is a sendto()
into the af_xdp socket, and the kernel delivers the frames into the
receiving namespace in that call: the hosts' TCP receive, and the ACK-clocked
transmit it triggers, run on the forwarder's core, inside xsk_sendmsg
(af_packet's: packet_sendmsg). So the forwarder's core splits into the
kernel's work inside those calls (the
same per packet for every forwarder) and the forwarder's own (its polling,
lookups, NF hops; for a busy poller also its empty polls, which take what
the rest leaves). This module measures those shares.

A forwarder of several processes (Squall's NFs on the manager's core) also
pays a context switch at each hop of a batch: record() counts the core's
switches beside the samples (`perf stat`), so its own share can be read
against them.

    prof = CoreProfile(cpu=0, workdir=path)
    prof.record(seconds)                 # while traffic runs
    split = prof.split(r"^squall-")      # comms of the forwarder
    prof.switches_per_s                  # the core's context switches
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

PERF = "perf"
# The ports' transmit system calls (af_xdp's, af_packet's) and, within them,
# the kernel's delivery into the peer namespace (veth: in the sender's
# context). One never runs inside the other.
KERNEL_TX_SYMBOLS = ("xsk_sendmsg", "packet_sendmsg")
REPORT_TIMEOUT_S = 60.0
SHARES = ("kernel_tx", "fwd_own", "idle", "other")  # what shares() returns

# `perf stat -x,` rows: value,unit,event,...
STAT_EVENTS = ("context-switches", "sched:sched_wakeup")
_COMM_LINE = re.compile(r"^\s*([0-9.]+)%\s+(\S.*?)\s*$")
_SYM_LINE = re.compile(r"^\s*([0-9.]+)%\s+([0-9.]+)%\s+\[[k.]\]\s+(\S+)\s*$")


def unavailable() -> str | None:
    """None if perf can sample a CPU here, else why not."""
    if shutil.which(PERF) is None:
        return f"{PERF} not found in PATH: install Debian package linux-perf"
    if os.geteuid() != 0:
        return "perf record -C needs root here"
    r = subprocess.run(
        [PERF, "record", "-q", "-C", "0", "-o", "/dev/null", "--", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if r.returncode != 0:
        return f"perf record -C 0 exited {r.returncode}: {r.stderr.strip()[-300:]}"
    return None


def parse_comms(text: str) -> dict[str, float]:
    """`perf report --no-children --sort comm -g none --stdio`: comm -> % of samples."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not (m := _COMM_LINE.match(line)):
            continue
        out[m.group(2)] = out.get(m.group(2), 0.0) + float(m.group(1))
    return out


def parse_children(text: str) -> dict[str, float]:
    """`perf report --children --sort sym -g none --stdio`: symbol -> % of
    samples with it on the stack (children included)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not (m := _SYM_LINE.match(line)):
            continue
        out.setdefault(m.group(3), float(m.group(1)))
    return out


def parse_stat(text: str) -> dict[str, float]:
    """`perf stat -x,` output (its stderr): event -> count; an event perf
    could not count (`<not counted>`, `<not supported>`) is left out."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        f = line.split(",")
        if len(f) < 3 or line.startswith("#"):
            continue
        try:
            out[f[2]] = float(f[0])
        except ValueError:
            continue
    return out


def shares(comms: dict[str, float], children: dict[str, float], fwd: str) -> dict[str, float]:
    """The core's samples split four ways, in % (they add up to ~100):
    kernel_tx (inside the ports' transmit calls, xsk_sendmsg or
    packet_sendmsg: the kernel's delivery into the hosts),
    fwd_own (the forwarder's processes, comms matching fwd, outside it),
    idle (swapper), other (anything else: the hosts' own programs, kthreads)."""
    pattern = re.compile(fwd)
    fwd_pct = sum(p for c, p in comms.items() if pattern.search(c))
    tx = min(sum(children.get(sym, 0.0) for sym in KERNEL_TX_SYMBOLS), fwd_pct)
    idle = sum(p for c, p in comms.items() if c.startswith("swapper"))
    return {
        "kernel_tx": round(tx, 1),
        "fwd_own": round(fwd_pct - tx, 1),
        "idle": round(idle, 1),
        "other": round(max(0.0, 100.0 - fwd_pct - idle), 1),
    }


class CoreProfile:
    """perf record on one CPU into workdir, and the split of its samples."""

    def __init__(self, cpu: int, workdir: Path, name: str = "profile"):
        self.cpu = cpu
        self.data = Path(workdir) / f"{name}.perf.data"
        self.switches_per_s: float | None = None  # record()'s count; None: not counted
        self.wakeups_per_s: float | None = None  # tasks woken onto the core

    def record(self, seconds: float) -> list[str]:
        """Sample the CPU (with call stacks) for seconds, and count its
        context switches and wakeups over the same time; returns the
        record command."""
        cmd = [PERF, "record", "-q", "-g", "-C", str(self.cpu), "-o", str(self.data), "--",
               "sleep", f"{seconds:g}"]  # fmt: skip
        stat = subprocess.Popen(self._stat_cmd(seconds), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30,
                               check=False)  # fmt: skip
        finally:
            _, err = stat.communicate(timeout=seconds + 30)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-300:]}")
        self._take_counts(err if stat.returncode == 0 else "", seconds)
        return cmd

    def count_switches(self, seconds: float) -> list[str]:
        """Count the CPU's context switches (and wakeups) for seconds, with
        no sampling; sets switches_per_s, wakeups_per_s; returns the command."""
        cmd = self._stat_cmd(seconds)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30,
                           check=False)  # fmt: skip
        self._take_counts(r.stderr if r.returncode == 0 else "", seconds)
        return cmd

    def _stat_cmd(self, seconds: float) -> list[str]:
        return [PERF, "stat", "-x,", "-C", str(self.cpu), "-e", ",".join(STAT_EVENTS), "--",
                "sleep", f"{seconds:g}"]  # fmt: skip

    def _take_counts(self, stat_err: str, seconds: float) -> None:
        """switches_per_s, wakeups_per_s from `perf stat -x,`'s stderr (None
        for an event it did not count)."""
        counts = parse_stat(stat_err)
        sw, wk = counts.get("context-switches"), counts.get("sched:sched_wakeup")
        self.switches_per_s = round(sw / seconds) if sw is not None else None
        self.wakeups_per_s = round(wk / seconds) if wk is not None else None

    def _report(self, *args: str) -> str:
        cmd = [PERF, "report", "-i", str(self.data), "--stdio", "-g", "none", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=REPORT_TIMEOUT_S,
                           check=False)  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-300:]}")
        return r.stdout

    def split(self, fwd: str) -> dict[str, float]:
        """shares() of what record() sampled; the perf data is removed after."""
        try:
            comms = parse_comms(self._report("--no-children", "--sort", "comm"))
            children = parse_children(self._report("--children", "--sort", "sym"))
        finally:
            self.data.unlink(missing_ok=True)
        return shares(comms, children, fwd)
