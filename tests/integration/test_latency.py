"""Per-chain rx-to-tx latency: every packet that leaves a chain is counted in
its histogram, and /squall/latency_reset clears it for the next measurement."""

from __future__ import annotations

from pathlib import Path

import pcaps
from conftest import Manager


def test_latency_histogram_counts_and_resets(mgr: Manager, tmp_path: Path) -> None:
    frames = pcaps.good_frames(200, [pcaps.mac(1)], seed=7)
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "c1", "exec": "squall-nf-cost", "args": ["--cycles", "20000"]}],
        chains=[{"name": "c", "services": ["c1"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    mgr.wait_port_tx("out", 200)
    chain = mgr.chains()["c"]
    assert chain["lat_count"] == 200, chain
    # 20,000 cycles of work per packet is at least a few microseconds.
    assert chain["lat_p50_ns"] >= 2000, chain
    assert chain["lat_p50_ns"] <= chain["lat_p99_ns"] <= chain["lat_p999_ns"], chain
    # rx to the first NF's handler: counted for each packet, and shorter than rx to tx
    # (the NF spends its 20,000 cycles after that point). Each packet's difference is
    # at least those cycles, so the means differ strictly; the quantiles are bucket
    # edges and may share a bucket when queueing while the NF starts dominates.
    assert chain["to_nf_count"] == 200, chain
    assert 0 < chain["to_nf_p50_ns"] <= chain["lat_p50_ns"], chain
    assert 0 < chain["to_nf_mean_ns"] < chain["lat_mean_ns"], chain
    mgr.query("/squall/latency_reset")
    mgr.wait_for(lambda: mgr.chains()["c"]["lat_count"] == 0, 10, "histogram cleared")
    assert mgr.chains()["c"]["lat_p99_ns"] == 0
    mgr.finish()
