"""Rules by destination MAC: A through chain 1 to outA, B through chain 2 to
outB, every other MAC dropped and counted as no_rule."""

from __future__ import annotations

from pathlib import Path

import pcaps
from conftest import Manager

N_PKTS = 1000
MAC_A = pcaps.mac(0xA)
MAC_B = pcaps.mac(0xB)
MAC_OTHER = pcaps.mac(0xC)
BROADCAST = "ff:ff:ff:ff:ff:ff"


def test_dst_mac_selects_chain_and_port(mgr: Manager, tmp_path: Path) -> None:
    frames = pcaps.good_frames(
        N_PKTS, [MAC_A, MAC_B, MAC_A, MAC_OTHER, MAC_B, MAC_A, BROADCAST], seed=3
    )
    want_a = [f for f in frames if pcaps.dst_mac_of(f) == MAC_A]
    want_b = [f for f in frames if pcaps.dst_mac_of(f) == MAC_B]
    n_other = N_PKTS - len(want_a) - len(want_b)
    assert want_a and want_b and n_other > 0

    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_a, out_b = tmp_path / "outA.pcap", tmp_path / "outB.pcap"
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "outA", "devargs": f"net_pcap1,tx_pcap={out_a}"},
            {"name": "outB", "devargs": f"net_pcap2,tx_pcap={out_b}"},
        ],
        services=[
            {"name": "fa", "exec": "squall-nf-fwd", "mode": "sleep"},
            {"name": "sb", "exec": "squall-nf-sig", "mode": "sleep"},
            {"name": "nb", "exec": "squall-nf-noop", "mode": "sleep"},
        ],
        chains=[
            {"name": "chain1", "services": ["fa"]},
            {"name": "chain2", "services": ["sb", "nb"]},
        ],
        rules=[
            {"in_port": "in", "dst_mac": MAC_A, "chain": "chain1", "out_port": "outA"},
            {"dst_mac": MAC_B, "chain": "chain2", "out_port": "outB"},
        ],
    )
    mgr.start(cfg)
    mgr.wait_for(
        lambda: (
            mgr.stats()["rx_pkts"] == N_PKTS
            and mgr.ports()["outA"]["tx_pkts"] == len(want_a)
            and mgr.ports()["outB"]["tx_pkts"] == len(want_b)
        ),
        30,
        f"rx {N_PKTS}, outA tx {len(want_a)}, outB tx {len(want_b)}",
    )
    ex = mgr.finish()

    assert pcaps.read_pcap(out_a) == want_a, "outA got other packets than those to MAC A"
    assert pcaps.read_pcap(out_b) == want_b, "outB got other packets than those to MAC B"

    st = ex["stats"]
    assert st["rx_pkts"] == N_PKTS, st
    assert st["tx_pkts"] == len(want_a) + len(want_b), st
    assert st["drops"]["no_rule"] == n_other, st
    assert st["drop_pkts"] == n_other, st

    c1, c2 = ex["chains"]["chain1"], ex["chains"]["chain2"]
    assert c1["rx_pkts"] == c1["tx_pkts"] == len(want_a), c1
    assert c2["rx_pkts"] == c2["tx_pkts"] == len(want_b), c2
    assert c1["visits_mismatch"] == c2["visits_mismatch"] == 0, (c1, c2)
    assert ex["nfs"]["sb#0"]["counters"]["sig_sum"] == pcaps.sig_sum(want_b)
    assert ex["nfs"]["fa#0"]["rx_pkts"] == len(want_a)
    assert ex["ports"]["outA"]["tx_pkts"] == len(want_a), ex["ports"]
    assert ex["ports"]["outB"]["tx_pkts"] == len(want_b), ex["ports"]
