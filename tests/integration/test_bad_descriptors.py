"""A manager that trusts no NF (issue 16), in shared mode: every descriptor an
NF hands back is checked against the manager's own record of what it gave
that NF, and the mbuf header fields it and the PMDs rely on are restored
before use (mgr/guard.h), each restore counted by field (stats
"headers_restored"). A hostile NF (tests/nfs/baddesc.c) that hands back
foreign pointers, a real pool mbuf it was never given, misaligned pointers,
one packet twice, a header with one field (or all) scribbled over,
impossible lengths or a jumbo frame's segments linked in a loop costs only its
own packets: the manager keeps running, counts each case, never frees a packet
(or a segment) twice, and every mbuf is home. The same NF in isolated mode
(`sandbox: isolated`, mgr/isolate.c) does the same to the copies in its
private region, with the same outcome."""

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


def jumbo_frames() -> list[bytes]:
    """9000 B frames: each a chain of mbufs (2 KiB buffers) from the pcap PMD."""
    return [pcaps.jumbo(pcaps.mac(1))[:-2] + i.to_bytes(2, "big") for i in range(N_PKTS)]


def start(
    mgr: Manager, tmp_path: Path, misuse: str, jumbo: bool = False, sandbox: str = "none"
) -> list[bytes]:
    frames = jumbo_frames() if jumbo else pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[
            {
                "name": "bad",
                "exec": str(BADDESC),
                "args": ["--misuse", misuse],
                "restart": "never",
                "sandbox": sandbox,
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


@pytest.mark.parametrize(
    "misuse,jumbo,sandbox",
    [
        ("foreign", False, "none"),
        ("stolen", False, "none"),
        ("misaligned", False, "none"),
        ("double", False, "none"),
        ("foreign", True, "none"),
        ("foreign", False, "isolated"),
        ("misaligned", False, "isolated"),
        ("double", False, "isolated"),
    ],
)
def test_descriptors_the_nf_does_not_hold_are_ignored_and_counted(
    mgr: Manager, tmp_path: Path, misuse: str, jumbo: bool, sandbox: str
) -> None:
    frames = start(mgr, tmp_path, misuse, jumbo, sandbox)
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
    segs = -(-len(frames[0]) // 2048) if jumbo else 1  # mbufs per packet
    assert st["mbufs_in_use"] == bad * segs, "the NF still holds the packets it kept"
    assert mgr.is_running(), mgr.log_tail()
    if misuse == "stolen":
        assert "squall-nf-baddesc: stolen: a pool mbuf" in mgr.stderr_path.read_text()

    # Killed, the NF's held packets are reclaimed by the manager's record:
    # every segment freed, each packet counted once.
    os.kill(int(mgr.nfs()[nf]["pid"]), signal.SIGKILL)
    mgr.wait_for(lambda: mgr.stats()["drops"]["nf_died"] == bad, 30, "its packets reclaimed")
    ex = mgr.finish()
    assert ex["stats"]["drops"]["nf_died"] == bad
    out = pcaps.read_pcap(tmp_path / "out.pcap")
    assert len(out) == N_PKTS - bad and all(f in frames for f in out)


RESTORED = ("buf_addr", "buf_len", "pool", "next", "nb_segs", "refcnt")


@pytest.mark.parametrize("sandbox", ["none", "isolated"])
def test_scribbled_mbuf_headers_are_restored(mgr: Manager, tmp_path: Path, sandbox: str) -> None:
    """Every field at once. In isolated mode the NF scribbles over its private
    copy, which the manager never reads a pointer of: nothing to restore."""
    frames = start(mgr, tmp_path, "mangle", sandbox=sandbox)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    st = mgr.stats()
    assert st["drop_pkts"] == 0 and st["region_corrupt"]["descriptor"] == 0, st
    want = N_PKTS // EVERY if sandbox == "none" else 0
    assert st["headers_restored"] == {
        f: want if f in RESTORED else 0 for f in st["headers_restored"]
    }, st["headers_restored"]
    mgr.finish()
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames, "bytes in == bytes out"


@pytest.mark.parametrize("field", ["buf_addr", "pool", "next", "nb_segs", "refcnt"])
def test_each_rewritten_header_field_is_restored_and_counted(
    mgr: Manager, tmp_path: Path, field: str
) -> None:
    """One field per case: the packet goes out as it came in, and the restore
    is counted under that field alone."""
    frames = start(mgr, tmp_path, field)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    st = mgr.stats()
    assert st["drop_pkts"] == 0 and st["region_corrupt"]["descriptor"] == 0, st
    assert st["headers_restored"] == {
        f: N_PKTS // EVERY if f == field else 0 for f in st["headers_restored"]
    }, st["headers_restored"]
    mgr.finish()
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames, "bytes in == bytes out"


@pytest.mark.parametrize(
    "field,sandbox",
    [(f, "none") for f in ("data_off", "data_len", "pkt_len")] + [("data_len", "isolated")],
)
def test_impossible_lengths_cost_the_packet(
    mgr: Manager, tmp_path: Path, field: str, sandbox: str
) -> None:
    """data_off or data_len past the buffer, pkt_len not the data's: no length
    the manager could restore, so the packet is dropped (bad_mbuf)."""
    frames = start(mgr, tmp_path, field, sandbox=sandbox)
    bad = N_PKTS // EVERY
    mgr.wait_for(lambda: accounted(mgr) == N_PKTS, 30, "every packet out or dropped")
    st = mgr.stats()
    assert st["drops"]["bad_mbuf"] == bad and st["drop_pkts"] == bad, st["drops"]
    assert st["tx_pkts"] == N_PKTS - bad
    assert not any(st["headers_restored"].values()), st["headers_restored"]
    mgr.finish()
    kept = [f for i, f in enumerate(frames) if i % EVERY != 0]
    assert pcaps.read_pcap(tmp_path / "out.pcap") == kept


def test_a_looped_chain_costs_the_packet(mgr: Manager, tmp_path: Path) -> None:
    """A jumbo frame's segments come back linked in a loop: the walk stops at
    the first segment it already took back, the packet is dropped (bad_mbuf)
    and each of its segments freed once; the chains left alone go out whole."""
    frames = start(mgr, tmp_path, "loop", jumbo=True)
    bad = N_PKTS // EVERY
    mgr.wait_for(lambda: accounted(mgr) == N_PKTS, 30, "every packet out or dropped")
    st = mgr.stats()
    assert st["drops"]["bad_mbuf"] == bad and st["drop_pkts"] == bad, st["drops"]
    assert st["tx_pkts"] == N_PKTS - bad and st["region_corrupt"]["descriptor"] == 0, st
    mgr.finish()
    kept = [f for i, f in enumerate(frames) if i % EVERY != 0]
    assert pcaps.read_pcap(tmp_path / "out.pcap") == kept


def test_a_jumbo_frame_is_not_copied_to_an_isolated_nf(mgr: Manager, tmp_path: Path) -> None:
    """An isolated NF's private mbufs are single buffers: a chained packet is
    dropped before the copy, under its own cause, and every segment freed."""
    start(mgr, tmp_path, "mangle", jumbo=True, sandbox="isolated")
    mgr.wait_for(lambda: accounted(mgr) == N_PKTS, 30, "every packet out or dropped")
    st = mgr.stats()
    assert st["drops"]["isolated_copy"] == N_PKTS == st["drop_pkts"], st["drops"]
    assert mgr.nfs()["bad#0"]["copied_in_pkts"] == 0
    mgr.finish()
