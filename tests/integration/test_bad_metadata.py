"""An NF can write every byte of a packet's metadata, and the manager indexes
its own tables with some of them (chain, hop, flow, egress port). A broken NF
that scribbles over them (tests/nfs/badmeta.c) must cost only its packets,
each counted as a drop, never the manager: it keeps running, exits cleanly,
and every mbuf is back in the pool."""

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
]


@pytest.mark.parametrize(("what", "hops", "cause"), CASES, ids=[c[0] for c in CASES])
def test_scribbled_metadata_costs_only_the_packet(
    mgr: Manager, tmp_path: Path, what: str, hops: list[str], cause: str
) -> None:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    exe = {"bad": str(BADMETA), "fwd": "squall-nf-fwd"}
    args = {"bad": ["--corrupt", what], "fwd": []}
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[{"name": h, "exec": exe[h], "args": args[h], "instances": 1} for h in hops],
        chains=[{"name": "c", "services": hops}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
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
