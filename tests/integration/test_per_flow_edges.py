"""In a per-flow service every instance is some flow's NF: what is not a
TCP/UDP flow must not land on another flow's NF by an address hash (issue
20). IPv6 connections are flows as IPv4 ones are (issue 18); IP fragments of
either family are dropped, counted; an ICMP or ICMPv6 error goes to the flow
it quotes; a SYN flood holds the pool's NFs only for the half-open timeout;
unreadable IPv6 is dropped before any NF. In an rss service IPv6 flows spread
by a hash of their addresses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pcaps
from conftest import Manager
from scapy.layers.inet import ICMP, IP, TCP, UDP, fragment
from scapy.layers.inet6 import (
    ICMPv6DestUnreach,
    ICMPv6ND_NS,
    ICMPv6TimeExceeded,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    fragment6,
)
from scapy.layers.l2 import Ether
from test_per_flow import A, B, connection, per_flow_config

PORT = 40000


def _eth(src: str) -> Ether:
    return (
        Ether(src=pcaps.mac(2), dst=pcaps.mac(1))
        if src == A
        else Ether(src=pcaps.mac(1), dst=pcaps.mac(2))
    )


def _run(mgr: Manager, tmp_path: Path, frames: list[bytes], delivered: int) -> dict[str, Any]:
    """frames through sig -> fwd, per-flow, 4 instances each; wait until
    delivered went out; return the NFs (telemetry) and the drops."""
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    mgr.start(per_flow_config(mgr, in_pcap, "net_null1,no-rx=1", instances=4))
    mgr.wait_for(lambda: mgr.stats()["rx_pkts"] == len(frames), 10, "every frame in")
    mgr.wait_port_tx("out", delivered)
    nfs = mgr.nfs()
    drops = mgr.stats()["drops"]
    mgr.finish()
    return {"nfs": nfs, "drops": drops}


def _sig_rx(nfs: dict[str, Any]) -> list[int]:
    return sorted(nf["rx_pkts"] for nf in nfs.values() if nf["service"] == "sig")


def test_fragments_to_a_per_flow_service_are_dropped_counted(mgr: Manager, tmp_path: Path) -> None:
    conn = connection(PORT)
    big = IP(src=A, dst=B) / TCP(sport=PORT, dport=80, flags="PA") / (b"x" * 200)
    frags = [bytes(_eth(A) / f) for f in fragment(big, fragsize=64)]
    assert len(frags) >= 3
    udp_frags = [
        bytes(_eth(A) / f)
        for f in fragment(IP(src=A, dst=B) / UDP(sport=PORT, dport=53) / (b"y" * 100), 64)
    ]
    r = _run(mgr, tmp_path, conn[:3] + frags + udp_frags + conn[3:], delivered=len(conn))
    # Only the flow's NF saw anything: its 7 packets.
    assert _sig_rx(r["nfs"]) == [0, 0, 0, 7], r["nfs"]
    assert r["drops"]["fragment"] == len(frags) + len(udp_frags), r["drops"]


def test_an_icmp_error_goes_to_the_flow_it_quotes(mgr: Manager, tmp_path: Path) -> None:
    conn = connection(PORT)
    quote = IP(src=A, dst=B) / TCP(sport=PORT, dport=80, flags="PA")
    # From a router on the way: A's packet could not be delivered.
    err = bytes(_eth(B) / IP(src="10.0.0.254", dst=A) / ICMP(type=3, code=1) / quote)
    # Time exceeded for a flow nobody opened: no NF of this service is its.
    stranger = IP(src=A, dst=B) / UDP(sport=PORT + 1, dport=53)
    lost = bytes(_eth(B) / IP(src="10.0.0.254", dst=A) / ICMP(type=11) / stranger)
    r = _run(mgr, tmp_path, conn[:3] + [err, lost] + conn[3:], delivered=len(conn) + 1)
    assert _sig_rx(r["nfs"]) == [0, 0, 0, 8], r["nfs"]
    assert r["drops"]["icmp_no_flow"] == 1, r["drops"]
    fwd = sorted(nf["rx_pkts"] for nf in r["nfs"].values() if nf["service"] == "fwd")
    assert fwd == [0, 0, 0, 8], "the flow's NF at every hop"


A6, B6 = "fd00::1", "fd00::2"


def _v6(src: str, dst: str, l4: Any) -> bytes:
    return bytes(_eth(A if src == A6 else B) / IPv6(src=src, dst=dst) / l4)


def connection6(port: int) -> list[bytes]:
    """A whole TCP connection over IPv6, both directions: 7 packets."""
    seg = [
        (A6, B6, "S", b""),
        (B6, A6, "SA", b""),
        (A6, B6, "A", b""),
        (A6, B6, "PA", b"GET / HTTP/1.0\r\n\r\n"),
        (A6, B6, "FA", b""),
        (B6, A6, "FA", b""),
        (A6, B6, "A", b""),
    ]
    return [
        _v6(s, d, TCP(sport=port if s == A6 else 80, dport=80 if s == A6 else port, flags=f) / p)
        for s, d, f, p in seg
    ]


def test_ipv6_flows_get_an_nf_of_their_own(mgr: Manager, tmp_path: Path) -> None:
    """An IPv6 connection is a flow as an IPv4 one is: both directions at one
    NF per hop, not the IPv4 flow's; an ICMPv6 error goes to the flow it
    quotes; neighbour discovery goes by hash; IPv6 fragments, and errors
    quoting no flow, are dropped and counted."""
    conn4, conn6 = connection(PORT), connection6(PORT + 1)
    quote = IPv6(src=A6, dst=B6) / TCP(sport=PORT + 1, dport=80, flags="PA")
    err = _v6(B6, A6, ICMPv6DestUnreach(code=1) / quote)
    stranger = IPv6(src=A6, dst=B6) / UDP(sport=PORT + 2, dport=53)
    lost = _v6(B6, A6, ICMPv6TimeExceeded() / stranger)
    ns = _v6(A6, "ff02::1:ff00:2", ICMPv6ND_NS(tgt=B6))
    frags = [
        bytes(_eth(A) / f)
        for f in fragment6(
            IPv6(src=A6, dst=B6)
            / IPv6ExtHdrFragment()
            / UDP(sport=PORT + 3, dport=53)
            / (b"z" * 300),
            120,
        )
    ]
    assert len(frags) >= 3
    frames = conn4[:3] + conn6[:3] + [err, lost, ns] + frags + conn6[3:] + conn4[3:]
    # out: both connections, the error (to its flow), the solicitation (by hash)
    r = _run(mgr, tmp_path, frames, delivered=len(conn4) + len(conn6) + 2)
    got = _sig_rx(r["nfs"])
    assert sorted(got) == [0, 1, 7, 8] or sorted(got) == [0, 0, 7, 9], r["nfs"]
    # each flow's NF at every hop: the same counts at fwd as at sig
    fwd = sorted(nf["rx_pkts"] for nf in r["nfs"].values() if nf["service"] == "fwd")
    assert fwd == sorted(got), (fwd, got)
    assert r["drops"]["icmp_no_flow"] == 1, r["drops"]
    assert r["drops"]["fragment"] == len(frags), r["drops"]


def test_unreadable_ipv6_is_dropped_as_ipv6_header(mgr: Manager, tmp_path: Path) -> None:
    """Before any rule or NF reads it: a header cut short, a payload length
    past the frame, an extension header chain longer than DPDK walks."""
    eth = Ether(src=pcaps.mac(2), dst=pcaps.mac(1), type=0x86DD)
    good = bytes(_eth(A) / IPv6(src=A6, dst=B6) / UDP(sport=PORT, dport=53) / b"ok")
    short = bytes(eth / bytes(IPv6(src=A6, dst=B6))[:30])
    long_len = bytearray(good)
    long_len[14 + 4 : 14 + 6] = (1400).to_bytes(2, "big")
    chain = IPv6(src=A6, dst=B6)
    for _ in range(8):
        chain = chain / IPv6ExtHdrDestOpt()
    deep = bytes(_eth(A) / chain / UDP(sport=PORT, dport=53))
    r = _run(mgr, tmp_path, [good, short, bytes(long_len), deep], delivered=1)
    assert r["drops"]["ipv6_header"] == 3, r["drops"]
    assert sum(_sig_rx(r["nfs"])) == 1, r["nfs"]


def test_a_syn_flood_does_not_empty_the_pool_for_long(mgr: Manager, tmp_path: Path) -> None:
    # 300 spoofed SYNs take all 8 NFs of the pool (the rest: pool_empty) and
    # never ACK. After the half-open timeout the NFs come back and the
    # generator's connections (SYN, data with ACK, FINs) get them. Before,
    # the SYNs held them for the 60 s idle timeout.
    n_syn, instances = 300, 8
    syns = [
        bytes(
            Ether(src=pcaps.mac(2), dst=pcaps.mac(1))
            / IP(src=f"10.9.{i // 250}.{i % 250 + 1}", dst=B)
            / TCP(sport=1024 + i, dport=80, flags="S")
        )
        for i in range(n_syn)
    ]
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", syns)
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "s", "exec": "squall-nf-sig", "instances": instances}],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[
            {"in_port": "in", "chain": "c", "out_port": "out", "assign": "per-flow"},
            {"in_port": "gen", "chain": "c", "out_port": "out", "assign": "per-flow"},
        ],
        flow_linger_ms=0,
        flow_idle_timeout_ms=60000,
        flow_half_open_timeout_ms=200,
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 0, "flows": 1, "tcp_flow_pkts": 4}
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.stats()["rx_pkts"] == n_syn, 10, "the flood in")
    assert mgr.stats()["drops"]["pool_empty"] == n_syn - instances
    mgr.wait_for(
        lambda: mgr.query("/squall/pools")["s"]["idle"] == instances, 10, "the pool refilled"
    )
    assert mgr.query("/squall/flows")["flows_half_open_expired"] == instances
    mgr.query("/squall/gen_rate,1000")
    sent = mgr.gen_send(40)
    mgr.wait_accounted(n_syn + sent)
    flows = mgr.query("/squall/flows")
    assert flows["flows_closed"] >= 10, flows
    assert mgr.stats()["drops"]["pool_empty"] == n_syn - instances, mgr.stats()["drops"]
    assert flows["flows_half_open_expired"] == instances, flows
    mgr.finish()


def test_ipv6_flows_spread_over_rss_instances(mgr: Manager, tmp_path: Path) -> None:
    # rss spreads by a symmetric hash; IPv6's was 0, every flow on instance 0.
    frames = []
    for i in range(16):
        a, b = f"fd00::{i + 1:x}", "fd00::ffff"
        frames.append(bytes(_eth(A) / IPv6(src=a, dst=b) / UDP(sport=1000 + i, dport=53)))
        frames.append(bytes(_eth(B) / IPv6(src=b, dst=a) / UDP(sport=53, dport=1000 + i)))
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    mgr.start(per_flow_config(mgr, in_pcap, "net_null1,no-rx=1", instances=4, assign="rss"))
    mgr.wait_port_tx("out", len(frames))
    rx = [nf["rx_pkts"] for nf in mgr.nfs().values() if nf["service"] == "sig"]
    mgr.finish()
    assert sum(rx) == len(frames)
    assert sum(1 for n in rx if n > 0) >= 2, f"16 flows on one instance: {rx}"
    # Both directions of a flow meet one instance: every count is even.
    assert all(n % 2 == 0 for n in rx), rx
