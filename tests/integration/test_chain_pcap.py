"""1000 packets through a chain of three sig NFs, pcap in, pcap out: nothing lost,
nothing changed, nothing reordered, every NF saw every packet exactly once."""

from __future__ import annotations

from pathlib import Path

import pcaps
import pytest
from conftest import Manager

N_PKTS = 1000
HOPS = ("s1", "s2", "s3")


@pytest.mark.parametrize("mode", ["sleep", "poll"])
def test_chain_of_three_sig_nfs(mgr: Manager, tmp_path: Path, mode: str) -> None:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[
            {"name": s, "exec": "squall-nf-sig", "mode": mode, "instances": 1, "ring_slots": 1024}
            for s in HOPS
        ],
        chains=[{"name": "c", "services": list(HOPS)}],
        rules=[{"in_port": "in", "dst_mac": pcaps.mac(1), "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    assert sorted(mgr.nfs()) == [f"{s}#0" for s in HOPS]
    mgr.wait_port_tx("out", N_PKTS, timeout_s=30)
    if mode == "sleep":
        # Idle sleeping NFs must be asleep, not spinning.
        mgr.wait_for(
            lambda: all(nf["state"] == "asleep" for nf in mgr.nfs().values()),
            10,
            "every sleep-mode NF asleep once the traffic is over",
        )
    ex = mgr.finish()

    assert pcaps.read_pcap(out_pcap) == frames, "out.pcap differs from in.pcap"

    st = ex["stats"]
    assert st["rx_pkts"] == st["tx_pkts"] == N_PKTS, st
    assert st["drop_pkts"] == 0, st
    assert all(n == 0 for n in st["drops"].values()), st["drops"]

    want_sum = pcaps.sig_sum(frames)
    for s in HOPS:
        nf = ex["nfs"][f"{s}#0"]
        assert nf["mode"] == mode, nf
        assert nf["rx_pkts"] == nf["tx_pkts"] == N_PKTS, nf
        assert nf["drop_verdicts"] == 0, nf
        c = nf["counters"]
        assert c["sig_pkts"] == N_PKTS, (s, c)
        assert c["sig_sum"] == want_sum, (s, c, want_sum)
        assert c["sig_mismatch"] == 0, (s, c)
        assert c["sig_revisit"] == 0, (s, c)
        if mode == "sleep":
            assert nf["sleeps"] >= 1, nf
        else:
            assert nf["sleeps"] == 0, nf

    chain = ex["chains"]["c"]
    assert chain["hops"] == ",".join(HOPS), chain
    assert chain["rx_pkts"] == chain["tx_pkts"] == N_PKTS, chain
    assert chain["visits_mismatch"] == 0, chain
    # Every packet that left the chain has its rx-to-tx time in the histogram.
    assert chain["lat_count"] == N_PKTS, chain
    assert 0 < chain["lat_p50_ns"] <= chain["lat_p99_ns"] <= chain["lat_p999_ns"], chain

    ports = ex["ports"]
    assert ports["in"]["rx_pkts"] == N_PKTS, ports
    assert ports["in"]["rx_bytes"] == sum(map(len, frames)), ports
    assert ports["out"]["tx_pkts"] == N_PKTS, ports
    assert ports["out"]["tx_bytes"] == sum(map(len, frames)), ports
