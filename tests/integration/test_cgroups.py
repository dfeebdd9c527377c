"""Per-service cgroup limits (issue 16; mgr/cgroup.c): a service's NFs
together under cpu_max_pct, cpu_weight, memory_max_mb and pids_max, in
cgroup v2 where its controllers are, else cgroup v1 (this machine). Each
limit is shown to hold by a hostile NF that goes past it (threads, memory,
a spin), with the control case of the same NF unlimited; the NF is in its
group from its first instruction (its /proc/PID/cgroup); a limit changes
while running; the groups are gone when the manager stops. The other chain
keeps every packet, byte for byte, and every mbuf comes home."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from conftest import Manager
from test_apply import get_config, squallctl
from test_exporter import Exporter, metric_value, promtool_accepts, wait_until
from test_sandbox import alive, finish_clean, outcome, start

# each limit's file: cgroup v2's, cgroup v1's
FILES = {
    "cpu_max_pct": ("cpu", "cpu.max", "cpu.cfs_quota_us"),
    "cpu_weight": ("cpu", "cpu.weight", "cpu.shares"),
    "memory_max_mb": ("memory", "memory.max", "memory.limit_in_bytes"),
    "pids_max": ("pids", "pids.max", "pids.max"),
}


def expected(version: int, key: str, value: int) -> str:
    """What the kernel shows in that limit's file for value."""
    if key == "cpu_max_pct":
        return f"{value * 1000} 100000" if version == 2 else str(value * 1000)
    if key == "cpu_weight":
        return str(value) if version == 2 else str(value * 1024 // 100)
    if key == "memory_max_mb":
        return str(value << 20)
    return str(value)


def limit_file(group: dict, key: str) -> Path:
    ctrl, v2, v1 = FILES[key]
    return Path(group[f"{ctrl}_dir"]) / (v2 if group["version"] == 2 else v1)


def cgroups(mgr: Manager) -> dict:
    return mgr.query("/squall/cgroups")


LIMITS = {"cpu_max_pct": 150, "cpu_weight": 300, "memory_max_mb": 512, "pids_max": 16}


@pytest.mark.parametrize("sandbox", ["none", "isolated"])
def test_limits_are_written_and_the_nfs_are_in_the_group(
    mgr: Manager, tmp_path: Path, sandbox: str
) -> None:
    # (a try that leaves the NF running: an isolated NF's first thread is
    # killed by its seccomp allow list, test_sandbox.py)
    good = start(mgr, tmp_path, "ctl", sandbox=sandbox, pids_max=64)
    # the good chain's service gets limits too: in its own group
    r = squallctl(mgr, "service", "set", "fwd", *[f"{k}={v}" for k, v in LIMITS.items()])
    assert r.returncode == 0, r.stderr
    groups = cgroups(mgr)
    assert set(groups) == {"fwd", "bad"}, groups
    fwd = groups["fwd"]
    for key, value in LIMITS.items():
        assert fwd[key] == value, fwd
        assert limit_file(fwd, key).read_text().strip() == expected(fwd["version"], key, value)
    # the NFs run in their service's group, from the start
    for name, nf in mgr.nfs().items():
        if not alive(nf):
            continue
        group = groups[name.split("#")[0]]
        lines = Path(f"/proc/{int(nf['pid'])}/cgroup").read_text().splitlines()
        for ctrl in ("cpu", "memory", "pids"):
            where = group[f"{ctrl}_dir"]
            line = next(
                ln
                for ln in lines
                if (group["version"] == 2 and ln.startswith("0::"))
                or ctrl in ln.split(":")[1].split(",")
            )
            assert where.endswith(line.split(":", 2)[2]), (where, lines)
            assert str(int(nf["pid"])) in (Path(where) / "cgroup.procs").read_text().split()
    dirs = {g[f"{c}_dir"] for g in groups.values() for c in ("cpu", "memory", "pids")}
    finish_clean(mgr, tmp_path, good)
    # gone with the manager, and the manager's own level with them
    assert not [d for d in dirs if Path(d).exists()]
    assert not [d for d in dirs if Path(d).parent.exists()]


@pytest.mark.parametrize("sandbox", ["none", "strict"])
def test_pids_max_bounds_the_nfs_threads(mgr: Manager, tmp_path: Path, sandbox: str) -> None:
    good = start(mgr, tmp_path, "threads", sandbox=sandbox, pids_max=8)
    got = outcome(mgr, "threads")
    # the NF's main thread is one of the 8
    assert got == "stopped at 7: Resource temporarily unavailable", got
    assert cgroups(mgr)["bad"]["pids_max_hits"] >= 1
    finish_clean(mgr, tmp_path, good)


def test_without_pids_max_the_threads_are_made(mgr: Manager, tmp_path: Path) -> None:
    """The control: the same NF with no limit starts all its threads."""
    good = start(mgr, tmp_path, "threads")
    assert outcome(mgr, "threads") == "succeeded at 64"
    assert "bad" not in cgroups(mgr)
    finish_clean(mgr, tmp_path, good)


def test_memory_max_ends_an_nf_that_takes_more(mgr: Manager, tmp_path: Path) -> None:
    """memory_max_mb, unlike memory_mb (RLIMIT_DATA, a failed malloc), is the
    kernel's: past it the OOM killer ends the NF (SIGKILL), counted."""
    good = start(mgr, tmp_path, "alloc", sandbox="strict", memory_max_mb=64)
    got = outcome(mgr, "alloc")
    assert got.startswith("signal 9"), got
    group = cgroups(mgr)["bad"]
    assert group["oom_kills"] >= 1 and group["memory_max_hits"] >= 1, group
    finish_clean(mgr, tmp_path, good)


def test_cpu_max_throttles_a_spinning_nf_and_changes_while_running(
    mgr: Manager, tmp_path: Path
) -> None:
    good = start(mgr, tmp_path, "spin", cpu_max_pct=10)
    mgr.wait_for(lambda: cgroups(mgr)["bad"]["cpu_throttled"] >= 3, 30, "the spin throttled")
    group = cgroups(mgr)["bad"]
    assert limit_file(group, "cpu_max_pct").read_text().strip() == expected(
        group["version"], "cpu_max_pct", 10
    )
    # a live change: the file follows, and the running config says so
    r = squallctl(mgr, "service", "set", "bad", "cpu_max_pct=40")
    assert r.returncode == 0, r.stderr
    group = cgroups(mgr)["bad"]
    assert group["cpu_max_pct"] == 40
    assert limit_file(group, "cpu_max_pct").read_text().strip() == expected(
        group["version"], "cpu_max_pct", 40
    )
    assert "cpu_max_pct: 40" in get_config(mgr)
    # and back to no limit
    r = squallctl(mgr, "service", "set", "bad", "cpu_max_pct=0")
    assert r.returncode == 0, r.stderr
    unlimited = limit_file(cgroups(mgr)["bad"], "cpu_max_pct").read_text().strip()
    assert unlimited in ("-1", "max 100000"), unlimited
    os.kill(int(mgr.nfs()["bad#0"]["pid"]), signal.SIGKILL)  # (it never returns)
    finish_clean(mgr, tmp_path, good)


def test_cgroup_counts_are_exported(mgr: Manager, tmp_path: Path) -> None:
    """squallctl serve's metrics carry the limits and the kernel's counts,
    equal to /squall/cgroups, and promtool accepts them."""
    good = start(mgr, tmp_path, "threads", pids_max=8, memory_max_mb=256)
    assert outcome(mgr, "threads").startswith("stopped at 7")
    ex = Exporter(mgr.name, mgr.workdir)
    try:
        group = cgroups(mgr)["bad"]

        def agrees() -> bool:
            text = ex.metrics()
            svc = 'service="bad"'
            return (
                metric_value(text, "squall_cgroup_pids_max", svc) == 8
                and metric_value(text, "squall_cgroup_memory_max_bytes", svc) == 256 << 20
                and metric_value(text, "squall_cgroup_pids_max_events_total", svc)
                == group["pids_max_hits"]
                and metric_value(text, "squall_cgroup_pids", svc) == group["pids"]
                and metric_value(text, "squall_cgroup_cpu_max_cpus", svc) is None
            )

        wait_until(agrees, 15, "cgroup metrics equal to telemetry")
        promtool_accepts(ex.metrics())
    finally:
        ex.stop()
    finish_clean(mgr, tmp_path, good)
