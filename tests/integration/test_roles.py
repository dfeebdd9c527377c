"""Manager roles on two lcores (rx on one, tx and control on the other) move the
same bytes as on one, and a crash reclaim waits for the rx lcore to be quiet."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pcaps
import pytest
from conftest import Manager

N_PKTS = 2000


def two_lcore_config(mgr: Manager, in_pcap: Path, out_pcap: Path, hops: int) -> dict:
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[
            {"name": f"s{i}", "exec": "squall-nf-sig", "ring_slots": 4096} for i in range(hops)
        ],
        chains=[{"name": "c", "services": [f"s{i}" for i in range(hops)]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )


def endless_config(mgr: Manager, in_pcap: Path, **svc: str) -> dict:
    """in_pcap over and over (infinite_rx) through one NF to a null port."""
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap},infinite_rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "s0", "exec": "squall-nf-sig", **svc}],
        chains=[{"name": "c", "services": ["s0"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )


def start_endless(
    mgr: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str, **svc: str
) -> None:
    """endless_config with rx on its own lcore, started and moving packets."""
    monkeypatch.setenv("SQUALL_TEST_EAL_ARGS", "-l 0,1")
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", pcaps.good_frames(500, [pcaps.mac(1)]))
    mgr.start(endless_config(mgr, in_pcap, **svc), *options)
    mgr.wait_port_tx("out", 10_000, timeout_s=30)


def test_rx_on_its_own_lcore_moves_the_same_bytes(
    mgr: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQUALL_TEST_EAL_ARGS", "-l 0,1")
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(two_lcore_config(mgr, in_pcap, out_pcap, hops=2))
    mgr.wait_port_tx("out", N_PKTS, timeout_s=60)
    ex = mgr.finish()

    assert "rx on lcore 1" in mgr.stderr_path.read_text()
    assert pcaps.read_pcap(out_pcap) == frames
    st = ex["stats"]
    assert st["rx_pkts"] == st["tx_pkts"] == N_PKTS and st["drop_pkts"] == 0, st
    for nf in ex["nfs"].values():
        assert nf["counters"]["sig_sum"] == pcaps.sig_sum(frames), nf


def test_crash_with_rx_on_its_own_lcore_loses_no_mbuf(
    mgr: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start_endless(mgr, tmp_path, monkeypatch, restart="never")
    pid = next(iter(mgr.nfs().values()))["pid"]
    os.kill(pid, signal.SIGKILL)
    mgr.wait_for(lambda: next(iter(mgr.nfs().values()))["state"] == "dead", 10, "the NF seen dead")
    died_before = mgr.stats()["drops"]["no_nf"]
    mgr.wait_for(
        lambda: mgr.stats()["drops"]["no_nf"] > died_before, 10, "packets for the dead NF counted"
    )
    ex = mgr.finish(live_mbufs=False)  # infinite_rx keeps mbufs moving until stop
    assert ex["stats"]["mbufs_in_use"] == 0


def test_rx_on_its_own_lcore_is_not_idle_while_packets_flow(
    mgr: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --idle-exit-ms with rx on its own lcore: rx stamps its packets after
    # the main loop's "now", and the plain difference wrapped to "idle for
    # ages": the manager quit while packets flowed. It must run on.
    start_endless(mgr, tmp_path, monkeypatch, "--idle-exit-ms", "1500")
    # Three idle timeouts of steady traffic, counted by the packets moved.
    sent = mgr.ports()["out"]["tx_pkts"]
    mgr.wait_for(lambda: mgr.ports()["out"]["tx_pkts"] > sent + 100_000, 30, "traffic on")
    deadline = time.monotonic() + 4.5
    while time.monotonic() < deadline:
        assert mgr.proc is not None and mgr.proc.poll() is None, mgr.log_tail()
        time.sleep(0.1)
    ex = mgr.finish(live_mbufs=False)  # infinite_rx keeps mbufs moving until stop
    assert ex["stats"]["mbufs_in_use"] == 0
