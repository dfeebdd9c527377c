"""A manager that trusts no NF (issue 16), in shared mode: every descriptor an
NF hands back is checked against the manager's own record of what it gave
that NF, and the mbuf header fields it and the PMDs rely on are restored
before use (mgr/guard.h). A hostile NF (tests/nfs/baddesc.c) that hands back
foreign pointers, misaligned ones, one packet twice, scribbled headers or
impossible lengths costs only its own packets: the manager keeps running,
counts each case, never frees a packet twice, and every mbuf is home."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pcaps
import pytest
from conftest import BUILD, Manager

N_PKTS = 64
EVERY = 4  # the NF misuses the 1st, 5th, ... packet it sees
BADDESC = BUILD / "tests" / "nfs" / "squall-nf-baddesc"


def start(mgr: Manager, tmp_path: Path, misuse: str) -> list[bytes]:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[
            {
                "name": "bad",
                "exec": str(BADDESC),
                "args": ["--misuse", misuse],
                "restart": "never",
            }
        ],
        chains=[{"name": "c", "services": ["bad"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    return frames


def accounted(mgr: Manager) -> int:
    """Packets out, dropped, or still held by the NF (what it kept)."""
    st = mgr.stats()
    return int(st["tx_pkts"] + st["drop_pkts"] + st["mbufs_in_use"])


@pytest.mark.parametrize("misuse", ["foreign", "misaligned", "double"])
def test_descriptors_the_nf_does_not_hold_are_ignored_and_counted(
    mgr: Manager, tmp_path: Path, misuse: str
) -> None:
    frames = start(mgr, tmp_path, misuse)
    nf = "bad#0"
    # Each misuse hands back one descriptor that is no packet the NF holds
    # and keeps the packet it should have returned.
    mgr.wait_for(
        lambda: mgr.stats()["tx_pkts"] + mgr.stats()["region_corrupt"]["descriptor"] == N_PKTS,
        30,
        "every packet back or replaced by a bad descriptor",
    )
    bad = int(mgr.stats()["region_corrupt"]["descriptor"])
    assert int(mgr.nfs()[nf]["bad_descs"]) == bad
    expect = N_PKTS // EVERY
    assert bad == expect if misuse != "double" else 0 < bad <= expect, bad
    st = mgr.stats()
    assert st["tx_pkts"] == N_PKTS - bad and st["drop_pkts"] == 0, st
    assert st["mbufs_in_use"] == bad, "the NF still holds the packets it kept"
    assert mgr.is_running(), mgr.log_tail()

    # Killed, the NF's held packets are reclaimed by the manager's record.
    os.kill(int(mgr.nfs()[nf]["pid"]), signal.SIGKILL)
    mgr.wait_for(lambda: mgr.stats()["drops"]["nf_died"] == bad, 30, "its packets reclaimed")
    ex = mgr.finish()
    assert ex["stats"]["drops"]["nf_died"] == bad
    out = pcaps.read_pcap(tmp_path / "out.pcap")
    assert len(out) == N_PKTS - bad and all(f in frames for f in out)


def test_scribbled_mbuf_headers_are_restored(mgr: Manager, tmp_path: Path) -> None:
    frames = start(mgr, tmp_path, "mangle")
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    st = mgr.stats()
    assert st["drop_pkts"] == 0 and st["region_corrupt"]["descriptor"] == 0, st
    mgr.finish()
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames, "bytes in == bytes out"


def test_impossible_lengths_cost_the_packet(mgr: Manager, tmp_path: Path) -> None:
    frames = start(mgr, tmp_path, "lengths")
    bad = N_PKTS // EVERY
    mgr.wait_for(lambda: accounted(mgr) == N_PKTS, 30, "every packet out or dropped")
    st = mgr.stats()
    assert st["drops"]["bad_mbuf"] == bad and st["drop_pkts"] == bad, st["drops"]
    assert st["tx_pkts"] == N_PKTS - bad
    mgr.finish()
    kept = [f for i, f in enumerate(frames) if i % EVERY != 0]
    assert pcaps.read_pcap(tmp_path / "out.pcap") == kept
