"""NF supervision: a dead NF is started again in its own slot by its
service's restart policy, with backoff; a crash loop is stopped at
restart_limit and the service's packets are then counted as service_failed;
restart: never leaves it dead (test_nf_crash.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import BUILD, REPO, Manager, pid_is_alive

FLAKY = BUILD / "tests" / "nfs" / "squall-nf-flaky"


def gen_config(mgr: Manager, services: list[dict[str, Any]]) -> dict[str, Any]:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=services,
        chains=[{"name": "c", "services": [s["name"] for s in services]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 50000, "flows": 64}
    return cfg


def kill_and_wait_back(mgr: Manager, key: str) -> int:
    """SIGKILL NF key; wait until the same slot runs a new process that took
    packets. Returns the new pid."""
    before = mgr.nfs()[key]
    pid = before["pid"]
    assert pid > 0 and pid_is_alive(pid), before
    os.kill(pid, signal.SIGKILL)

    def back() -> bool:
        nf = mgr.nfs()[key]
        return (
            nf["restarts"] == before["restarts"] + 1
            and nf["pid"] not in (0, pid)
            and nf["state"] in ("awake", "asleep", "waking")
            and nf["rx_pkts"] > before["rx_pkts"]
            and nf["restarts_recovered"] == before["restarts_recovered"] + 1
        )

    mgr.wait_for(back, 15, f"{key} restarted in its slot and taking packets")
    nf = mgr.nfs()[key]
    assert nf["exit_reason"] == "signal 9 (KILL)", nf
    assert nf["id"] == before["id"]
    return int(nf["pid"])


def test_killed_instances_come_back(mgr: Manager) -> None:
    cfg = gen_config(
        mgr,
        [
            {"name": "a", "exec": "squall-nf-fwd", "instances": 3},
            {"name": "b", "exec": "squall-nf-sig", "instances": 3},
        ],
    )
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.chains()["c"]["tx_pkts"] > 5000, 30, "traffic through the chain")
    for _round in range(3):
        for key in ("a#0", "a#1", "a#2", "b#0", "b#1", "b#2"):
            kill_and_wait_back(mgr, key)
    nfs = mgr.nfs()
    assert all(nf["restarts"] == 3 for nf in nfs.values()), nfs
    assert mgr.stats()["nfs_live"] == 6
    # Still carrying: every instance of each service is back.
    tx = mgr.chains()["c"]["tx_pkts"]
    mgr.wait_for(lambda: mgr.chains()["c"]["tx_pkts"] > tx + 5000, 15, "chain moving again")
    log = mgr.stderr_path.read_text(errors="replace")
    assert log.count("restarted (pid") == 18, log[-3000:]
    # squallctl's nfs table shows them.
    ctl = subprocess.run(
        [sys.executable, "-m", "squall.ctl", "--name", mgr.name, "nfs"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
        check=False,
        timeout=30,
    )
    assert ctl.returncode == 0, ctl.stderr
    assert "restarts" in ctl.stdout and "signal 9 (KILL)" in ctl.stdout, ctl.stdout
    mgr.query("/squall/gen_rate,0")
    st = mgr.finish()
    assert st["stats"]["drops"]["service_failed"] == 0


def test_crash_loop_stops_at_the_limit(mgr: Manager, tmp_path: Path) -> None:
    flag = tmp_path / "crash"
    cfg = gen_config(
        mgr,
        [
            {
                "name": "f",
                "exec": str(FLAKY),
                "args": ["--crash-if", str(flag)],
                "restart_limit": 3,
                "restart_window_s": 60,
                "restart_backoff_ms": 1,
                "restart_backoff_max_ms": 8,
            }
        ],
    )
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.chains()["c"]["tx_pkts"] > 1000, 30, "traffic")
    flag.touch()  # every start from now on exits 3 at once
    os.kill(mgr.nfs()["f#0"]["pid"], signal.SIGKILL)
    mgr.wait_for(lambda: mgr.nfs()["f#0"]["service_failed"] == 1, 15, "service failed")
    nf = mgr.nfs()["f#0"]
    assert nf["restarts"] == 3, nf
    assert nf["exit_reason"] == "exit 3", nf
    assert nf["state"] == "dead" and nf["pid"] == 0, nf
    mgr.wait_for(
        lambda: mgr.stats()["drops"]["service_failed"] > 1000, 15, "packets as service_failed"
    )
    log = mgr.stderr_path.read_text(errors="replace")
    assert "restart_limit" in log and "service f failed" in log, log[-3000:]
    assert log.count("restarted (pid") == 3, log[-3000:]
    # Stays failed: no more starts.
    restarts = mgr.nfs()["f#0"]["restarts"]
    mgr.query("/squall/gen_rate,0")
    assert mgr.nfs()["f#0"]["restarts"] == restarts
    mgr.finish()


def test_restart_config_errors(mgr: Manager) -> None:
    base = [{"name": "f", "exec": "squall-nf-fwd"}]
    for key, value, want in [
        ("restart", "sometimes", 'expected "always", "on-failure" or "never"'),
        ("restart_limit", 0, "restart_limit"),
        ("restart_window_s", 0, "restart_window_s"),
        ("restart_backoff_ms", 700000, "restart_backoff_ms"),
    ]:
        svc = dict(base[0], **{key: value})
        r = mgr.run_to_exit(gen_config(mgr, [svc]), "--check")
        assert r.returncode == 2, r
        assert f"services[0].{key}" in r.stderr and want in r.stderr, r.stderr
        assert ".yaml:" in r.stderr, r.stderr
    svc = dict(base[0], restart_backoff_ms=100, restart_backoff_max_ms=10)
    r = mgr.run_to_exit(gen_config(mgr, [svc]), "--check")
    assert r.returncode == 2 and "services[0].restart_backoff_max_ms" in r.stderr, r.stderr


def test_pool_spawn_failures_back_off(mgr: Manager, tmp_path: Path) -> None:
    """A per-flow pool whose new NFs die at start tries again after a growing
    delay, not every director period (500 us: thousands of spawns a second)."""
    flag = tmp_path / "crash"
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {
                "name": "s",
                "exec": str(FLAKY),
                "args": ["--crash-if", str(flag)],
                "instances": 8,
                "pool_idle": 2,
            }
        ],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out", "assign": "per-flow"}],
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 0, "flows": 4, "tcp_flow_pkts": 10000}
    mgr.start(cfg, want_nfs=2)
    flag.touch()
    mgr.query("/squall/gen_rate,20000")  # 4 flows take the 2 idle NFs: refills start
    mgr.wait_for(
        lambda: "exited with 3" in mgr.stderr_path.read_text(errors="replace"),
        15,
        "a refill NF died at start",
    )
    time.sleep(2)
    deaths = mgr.stderr_path.read_text(errors="replace").count("exited with 3")
    # Backoff from 1 ms doubling: about 11 tries in 2 s.
    assert 1 <= deaths <= 20, f"{deaths} failed starts in 2 s"
    mgr.query("/squall/gen_rate,0")
    mgr.finish(live_mbufs=False)


def test_hung_nf_is_killed_by_the_watchdog(mgr: Manager) -> None:
    """An NF that stops returning packets and never leaves its handler holds
    its ring's mbufs: the watchdog kills it, its packets come home, it is
    restarted, and the service carries traffic again."""
    cfg = gen_config(
        mgr,
        [
            {
                "name": "h",
                "exec": str(FLAKY),
                "args": ["--hang-after", "2000"],
                "watchdog_ms": 200,
                "restart_limit": 1000,
            }
        ],
    )
    cfg["generator"]["rate_pps"] = 20000
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.nfs()["h#0"]["watchdog_kills"] >= 1, 15, "a watchdog kill")
    mgr.wait_for(lambda: mgr.nfs()["h#0"]["restarts"] >= 2, 15, "restarted after the hang")
    nf = mgr.nfs()["h#0"]
    assert nf["exit_reason"] == "watchdog", nf
    # Each instance carried packets before it hung: the service works again
    # after each kill (a new instance takes 2,000 before it hangs).
    assert nf["rx_pkts"] >= 2 * 2000, nf
    assert mgr.stats()["drops"]["nf_died"] > 0
    mgr.query("/squall/gen_rate,0")
    # The last instance hangs holding packets too: the watchdog frees them.
    mgr.wait_mbufs_home(timeout_s=15)
    log = mgr.stderr_path.read_text(errors="replace")
    assert "(watchdog_ms); killing it" in log, log[-3000:]
    mgr.finish()


def test_an_nf_cannot_pin_the_pool(mgr: Manager) -> None:
    """An NF that takes packets and never returns them gets at most
    max_outstanding_pkts; the rest are dropped as nf_overloaded, and the pool
    keeps mbufs for everything else."""
    cfg = gen_config(
        mgr,
        [
            {
                "name": "o",
                "exec": str(FLAKY),
                "args": ["--hoard-after", "100"],
                "max_outstanding_pkts": 256,
                "watchdog_ms": 0,
            }
        ],
    )
    cfg["generator"]["rate_pps"] = 50000
    mgr.start(cfg)
    mgr.wait_for(
        lambda: mgr.stats()["drops"]["nf_overloaded"] > 5000, 30, "packets as nf_overloaded"
    )
    st = mgr.stats()
    assert st["mbufs_in_use"] <= 256 + 64, st
    assert mgr.query("/squall/gen")["alloc_fail"] == 0
    assert mgr.nfs()["o#0"]["outstanding"] <= 256, mgr.nfs()["o#0"]
    mgr.query("/squall/gen_rate,0")
    os.kill(mgr.nfs()["o#0"]["pid"], signal.SIGKILL)  # what it kept comes home
    mgr.wait_for(lambda: mgr.nfs()["o#0"]["restarts"] == 1, 15, "restarted")
    mgr.finish()
