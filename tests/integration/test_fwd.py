"""squall-nf-fwd without an address to rewrite runs as a burst handler that
reads no packet (sq_nf_set_prefetch(nf, 0)); with one, per packet. Either
way, each packet goes on unchanged but for the rewrite, or out of --out's
port past the rest of the chain, and the counters add up."""

from __future__ import annotations

from pathlib import Path

import pcaps
import pytest
from conftest import Manager

N_PKTS = 1000
NEW_DST = "02:00:00:00:00:99"


def fwd_config(mgr: Manager, in_pcap: Path, tmp_path: Path, direct: bool, out_args: list) -> dict:
    """in -> fwd, fwd OUT_ARGS, sig -> out; a third port, side, for --out 2."""
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={tmp_path / 'out.pcap'}"},
            {"name": "side", "devargs": f"net_pcap2,tx_pcap={tmp_path / 'side.pcap'}"},
        ],
        services=[
            {"name": "f1", "exec": "squall-nf-fwd", "ring_slots": 1024},
            {"name": "f2", "exec": "squall-nf-fwd", "args": out_args, "ring_slots": 1024},
            {"name": "s3", "exec": "squall-nf-sig", "ring_slots": 1024},
        ],
        chains=[{"name": "c", "services": ["f1", "f2", "s3"], "direct": direct}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )


def run_chain(mgr: Manager, tmp_path: Path, direct: bool, out_args: list) -> tuple[list, dict]:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    mgr.start(fwd_config(mgr, in_pcap, tmp_path, direct, out_args))
    mgr.wait_accounted(N_PKTS)
    ex = mgr.finish()
    st = ex["stats"]
    assert st["rx_pkts"] == st["tx_pkts"] == N_PKTS and st["drop_pkts"] == 0, st
    for name in ("f1#0", "f2#0"):
        nf = ex["nfs"][name]
        assert nf["rx_pkts"] == nf["tx_pkts"] + nf["direct_tx_pkts"] == N_PKTS, nf
        assert nf["drop_verdicts"] == 0, nf
    return frames, ex


@pytest.mark.parametrize("direct", [True, False])
def test_fwd_passes_each_packet_unchanged_or_rewritten(
    mgr: Manager, tmp_path: Path, direct: bool
) -> None:
    """f1 (burst handler, no prefetch) leaves the bytes alone; f2 rewrites the
    destination address (per-packet handler); sig after them sees every
    packet once, with f2's address."""
    frames, ex = run_chain(mgr, tmp_path, direct, ["--dst-mac", NEW_DST])
    want = [bytes.fromhex(NEW_DST.replace(":", "")) + f[6:] for f in frames]
    assert pcaps.read_pcap(tmp_path / "out.pcap") == want
    assert pcaps.read_pcap(tmp_path / "side.pcap") == []
    sig = ex["nfs"]["s3#0"]["counters"]
    assert sig["sig_pkts"] == N_PKTS and sig["sig_sum"] == pcaps.sig_sum(want), sig
    chain = ex["chains"]["c"]
    assert chain["rx_pkts"] == chain["tx_pkts"] == N_PKTS, chain
    assert chain["visits_mismatch"] == 0, chain
    if direct:
        assert ex["nfs"]["f1#0"]["direct_tx_pkts"] + ex["nfs"]["f1#0"]["direct_full_pkts"] == (
            N_PKTS
        )


@pytest.mark.parametrize("direct", [True, False])
def test_fwd_out_sends_each_packet_past_the_rest_of_the_chain(
    mgr: Manager, tmp_path: Path, direct: bool
) -> None:
    """f2 --out 2 (burst handler: the verdict on each packet is sq_out(2))
    sends every packet out of port side, unchanged; sig never sees one."""
    frames, ex = run_chain(mgr, tmp_path, direct, ["--out", "2"])
    assert pcaps.read_pcap(tmp_path / "side.pcap") == frames
    assert pcaps.read_pcap(tmp_path / "out.pcap") == []
    assert ex["nfs"]["s3#0"]["rx_pkts"] == 0, ex["nfs"]["s3#0"]
    assert ex["ports"]["side"]["tx_pkts"] == N_PKTS, ex["ports"]
