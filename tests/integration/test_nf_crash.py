"""SIGKILL an NF of a `restart: never` service while traffic flows: the
manager lives on, marks the NF dead and leaves it so, keeps the other chain
moving, and gets every mbuf back (restarts: test_restart.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pcaps
from conftest import Manager, pid_is_alive


def test_killed_nf_does_not_stop_other_chain(mgr: Manager, tmp_path: Path) -> None:
    a_pcap = pcaps.write_pcap(tmp_path / "a.pcap", pcaps.good_frames(64, [pcaps.mac(1)], seed=5))
    b_pcap = pcaps.write_pcap(tmp_path / "b.pcap", pcaps.good_frames(64, [pcaps.mac(2)], seed=6))
    # infinite_rx replays the file forever; with no tx_pcap the port drops what
    # it transmits, which is all a sink must do.
    cfg = mgr.config(
        ports=[
            {"name": "a", "devargs": f"net_pcap0,rx_pcap={a_pcap},infinite_rx=1"},
            {"name": "b", "devargs": f"net_pcap1,rx_pcap={b_pcap},infinite_rx=1"},
        ],
        services=[
            {"name": "sa", "exec": "squall-nf-sig", "mode": "sleep", "restart": "never"},
            {"name": "sb", "exec": "squall-nf-sig", "mode": "sleep"},
        ],
        chains=[{"name": "ca", "services": ["sa"]}, {"name": "cb", "services": ["sb"]}],
        rules=[
            {"in_port": "a", "chain": "ca", "out_port": "a"},
            {"in_port": "b", "chain": "cb", "out_port": "b"},
        ],
    )
    mgr.start(cfg)
    mgr.wait_for(
        lambda: all(c["tx_pkts"] > 1000 for c in mgr.chains().values()),
        30,
        "both chains moving packets",
    )

    victim = mgr.nfs()["sa#0"]
    pid = victim["pid"]
    assert pid > 0 and pid_is_alive(pid), victim
    assert b"squall-nf-sig" in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert mgr.stats()["nfs_live"] == 2
    os.kill(pid, signal.SIGKILL)

    mgr.wait_for(lambda: mgr.nfs()["sa#0"]["state"] == "dead", 10, "killed NF state 'dead'")
    assert mgr.is_running(), "the manager died with its NF"
    assert mgr.stats()["nfs_live"] == 1
    assert mgr.nfs()["sb#0"]["state"] != "dead"

    # After the death: chain B keeps going, chain A's packets are counted drops.
    b_tx = mgr.chains()["cb"]["tx_pkts"]
    no_nf = mgr.stats()["drops"]["no_nf"]
    mgr.wait_for(
        lambda: mgr.chains()["cb"]["tx_pkts"] > b_tx + 10_000, 10, "chain cb tx still rising"
    )
    mgr.wait_for(
        lambda: mgr.stats()["drops"]["no_nf"] > no_nf, 10, "chain ca packets counted as no_nf"
    )
    assert mgr.is_running()
    nf = mgr.nfs()["sa#0"]
    assert nf["restarts"] == 0 and nf["pid"] == 0, nf
    assert nf["exit_reason"] == "signal 9 (KILL)", nf
    assert "not restarted (signal 9 (KILL); restart: never)" in mgr.stderr_path.read_text()

    # Traffic never stops here, so only the exit stats can show every mbuf home.
    ex = mgr.finish(live_mbufs=False)
    assert ex["nfs"]["sa#0"]["state"] == "dead", ex["nfs"]["sa#0"]
    assert ex["chains"]["cb"]["tx_pkts"] > b_tx + 10_000, ex["chains"]
    assert ex["nfs"]["sb#0"]["counters"]["sig_mismatch"] == 0
    assert ex["nfs"]["sb#0"]["counters"]["sig_revisit"] == 0
