"""An NF can write every byte of a packet's metadata, and the manager indexes
its own tables with some of them (chain, hop, flow, egress port). A broken NF
that scribbles over them, or gives a verdict that names no port, no service
or no verdict at all (tests/nfs/badmeta.c), must cost only its packets, each
counted as a drop, never the manager: it keeps running, exits cleanly, and
every mbuf is back in the pool.

An isolated NF (`sandbox: isolated`) writes a copy's metadata: the manager
copies back only what an NF may write (the verdict, sig, user[]), so its
writes to chain, hop, flow or egress port change nothing (every packet goes
on as the manager routed it), and its verdict is checked as a shared NF's."""

from __future__ import annotations

from pathlib import Path

import pcaps
import pytest
from conftest import BUILD, Manager

N_PKTS = 50
BADMETA = BUILD / "tests" / "nfs" / "squall-nf-badmeta"

# (what it corrupts, the chain around it, the drop cause that must count them)
CASES = [
    ("chain", ["bad"], "bad_verdict"),
    ("hop", ["bad"], "bad_verdict"),
    ("out_port", ["bad"], "bad_verdict"),
    ("flow_id", ["bad", "fwd"], "bad_verdict"),
    ("hop_back", ["fwd", "bad"], "hop_limit"),  # a loop back to itself
    ("verdict_port", ["bad"], "bad_verdict"),
    ("verdict_service", ["bad"], "bad_verdict"),
    ("verdict_kind", ["bad"], "bad_verdict"),
]
ISO = {"sandbox": "isolated", "ring_slots": 256}


def start(
    mgr: Manager, tmp_path: Path, what: str, hops: list[str], bad: dict | None = None
) -> list[bytes]:
    """A chain of hops; the bad one corrupts what, with bad's service keys."""
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    exe = {"bad": str(BADMETA), "fwd": "squall-nf-fwd"}
    args = {"bad": ["--corrupt", what], "fwd": []}
    extra = {"bad": bad or {}, "fwd": {}}
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[
            {"name": h, "exec": exe[h], "args": args[h], "instances": 1, **extra[h]} for h in hops
        ],
        chains=[{"name": "c", "services": hops}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    return frames


@pytest.mark.parametrize(("what", "hops", "cause"), CASES, ids=[c[0] for c in CASES])
def test_scribbled_metadata_costs_only_the_packet(
    mgr: Manager, tmp_path: Path, what: str, hops: list[str], cause: str
) -> None:
    start(mgr, tmp_path, what, hops)
    mgr.wait_for(
        lambda: mgr.stats()["drops"][cause] == N_PKTS,
        30,
        f"{N_PKTS} packets counted as {cause}",
    )
    assert mgr.is_running(), mgr.log_tail()
    ex = mgr.finish()  # exit 0, every mbuf home
    st = ex["stats"]
    assert st["drop_pkts"] == N_PKTS and st["tx_pkts"] == 0, st
    assert pcaps.read_pcap(tmp_path / "out.pcap") == []


@pytest.mark.parametrize("what", ["chain", "hop", "flow_id", "out_port"])
def test_an_isolated_nf_s_metadata_writes_change_nothing(
    mgr: Manager, tmp_path: Path, what: str
) -> None:
    """The fields the manager routes by stay the manager's: every packet goes
    on, out unchanged, no drop."""
    frames = start(mgr, tmp_path, what, ["bad", "fwd"], ISO)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    assert mgr.nfs()["bad#0"]["copied_out_pkts"] == N_PKTS
    ex = mgr.finish()
    assert ex["stats"]["drop_pkts"] == 0, ex["stats"]["drops"]
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames


@pytest.mark.parametrize("what", ["verdict_port", "verdict_service", "verdict_kind"])
def test_an_isolated_nf_s_bad_verdict_costs_only_the_packet(
    mgr: Manager, tmp_path: Path, what: str
) -> None:
    """Its verdict is copied back and checked as a shared NF's: bad_verdict."""
    start(mgr, tmp_path, what, ["bad", "fwd"], ISO)
    mgr.wait_for(
        lambda: mgr.stats()["drops"]["bad_verdict"] == N_PKTS, 30, "every packet bad_verdict"
    )
    assert mgr.is_running(), mgr.log_tail()
    assert mgr.nfs()["fwd#0"]["rx_pkts"] == 0, "none went on"
    ex = mgr.finish()
    assert ex["stats"]["drop_pkts"] == N_PKTS and ex["stats"]["tx_pkts"] == 0, ex["stats"]
    assert pcaps.read_pcap(tmp_path / "out.pcap") == []
