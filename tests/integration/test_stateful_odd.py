"""Odd packets through each stateful NF (conntrack, nat, lb, dpi) and the
firewall and l3fwd: IPv4 fragments, an IPv6 fragment header, a TCP header
cut short or with a data offset below 5, an ICMP error whose quote is cut,
and the manager's own malformed frames, among good UDP and an IPv6 SYN
behind a hop-by-hop header. No NF crashes; every odd frame is counted once,
by the manager (malformed header) or by the NF (its bad-header counter, or
for the firewall and l3fwd, which judge headers only: in exactly one of
their verdict counters); the good ones pass."""

from __future__ import annotations

from pathlib import Path

import pcaps
import pytest
from conftest import NF_DIR, Manager
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

DST = pcaps.mac(1)
N_GOOD = 50


def eth() -> Ether:
    return Ether(src="02:00:00:00:00:aa", dst=DST)


def odd_frames() -> list[bytes]:
    syn = TCP(sport=1234, dport=80, flags="S")
    tcp_full = bytes(eth() / IP(src="10.9.1.1", dst="10.9.1.2") / syn / Raw(b"x" * 20))
    quote = bytes(IP(src="10.9.1.2", dst="10.9.1.1") / UDP(sport=53, dport=999))[:22]
    frames = [
        bytes(eth() / IP(src="10.9.1.1", dst="10.9.1.2", flags="MF") / syn / Raw(b"a" * 40)),
        bytes(eth() / IP(src="10.9.1.1", dst="10.9.1.2", frag=8) / Raw(b"b" * 40)),
        bytes(eth() / IPv6(src="fd00::1", dst="fd00::2") / IPv6ExtHdrFragment(m=1) / syn),
        # IP length covers 10 bytes of a 20-byte TCP header
        bytes(eth() / IP(src="10.9.1.1", dst="10.9.1.2", len=30) / syn)[: 14 + 30],
        bytes(eth() / IP(src="10.9.1.1", dst="10.9.1.2") / TCP(sport=1, dport=2, dataofs=2)),
        bytes(eth() / IP(src="10.9.1.2", dst="10.9.1.1") / ICMP(type=3, code=3) / Raw(quote)),
        *pcaps.malformed_frames(DST)[:4],  # truncated IPv4, Ethernet only, IHL 3, IHL past the end
    ]
    assert len(tcp_full) > 60
    return frames


GOOD_V6 = bytes(
    eth()
    / IPv6(src="fd00::1", dst="fd00::2")
    / IPv6ExtHdrHopByHop()
    / TCP(sport=5, dport=80, flags="S")
)

NFS = {
    "conntrack": ([], "drop_bad_hdr"),
    "nat": (["--snat", "10.0.0.0/8=192.0.2.1"], "drop_bad_hdr"),
    "lb": (["--vip", "tcp:10.9.1.2:80", "--backend", "10.9.1.3:80"], "dropped"),
    "dpi": (["--rules", "RULES"], "bad_hdr"),
}


@pytest.mark.parametrize("nf", sorted(NFS))
def test_odd_packets_counted(nf: str, mgr: Manager, tmp_path: Path) -> None:
    if not (NF_DIR / f"squall-nf-{nf}").is_file():
        pytest.skip(f"squall-nf-{nf} not built")
    args, bad_counter = NFS[nf]
    rules = tmp_path / "dpi.rules"
    rules.write_text("1 drop /never-seen-here/\n")
    args = [str(rules) if a == "RULES" else a for a in args]
    odd = odd_frames()
    good = list(pcaps.good_frames(N_GOOD, [DST], seed=7)) + [GOOD_V6]
    frames: list[bytes] = []
    for i, g in enumerate(good):
        frames.append(g)
        if i < len(odd):
            frames.append(odd[i])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    mgr.start(
        mgr.config(
            ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
            services=[{"name": "s", "exec": f"squall-nf-{nf}", "args": args}],
            chains=[{"name": "c", "services": ["s"]}],
            rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        )
    )

    def accounted() -> bool:
        st = mgr.stats()
        return bool(st["rx_pkts"] == len(frames) == st["tx_pkts"] + st["drop_pkts"])

    mgr.wait_for(accounted, 30, f"{len(frames)} frames accounted")
    ex = mgr.finish()
    st = ex["stats"]
    s = ex["nfs"]["s#0"]
    assert st["drops"]["nf_died"] == 0, st["drops"]  # no crash
    # conntrack also drops the good frames' TCP segments of no connection
    # (no mid-stream pick-up) as invalid: counted, and not odd.
    invalid = s["counters"].get("drop_invalid", 0)
    assert s["drop_verdicts"] == s["counters"][bad_counter] + invalid, s["counters"]
    by_mgr = st["drops"]["parse"] + st["drops"]["oversize"]
    assert by_mgr + s["counters"][bad_counter] == len(odd), (st["drops"], s["counters"])
    assert s["counters"][bad_counter] >= 5, s["counters"]  # the NF saw the L4 cases
    assert st["tx_pkts"] == len(good) - invalid, st


# The firewall's and l3fwd's verdict counters: every packet the NF saw is in
# exactly one.
VERDICTS = {
    "firewall": ("allowed", "denied"),
    "l3fwd": ("routed", "no_route", "ttl_expired", "not_ip", "link_scope"),
}
STATELESS_ARGS = {
    "firewall": ["--rule", "deny,proto=tcp,dport=22", "--default", "allow"],
    "l3fwd": ["--route", "0.0.0.0/0=next", "--route", "::/0=next"],
}


def header_odd_frames() -> list[bytes]:
    """What only an NF that reads past the manager's parse can find wrong:
    IPv4 whose total length stops inside the UDP ports (padding past it),
    IPv6 AH (DPDK's parse does not walk it) longer than the payload, and
    the same behind three VLAN tags."""
    udp_cut = bytes(eth() / IP(src="10.9.1.1", dst="10.9.1.2", proto=17, len=22)) + bytes(30)
    ah_cut = (
        bytes(eth() / IPv6(src="fd00::1", dst="fd00::2", nh=51, plen=8)) + b"\x06\x04" + bytes(6)
    )
    tagged = (
        bytes(
            eth()
            / Dot1Q(vlan=1)
            / Dot1Q(vlan=2)
            / Dot1Q(vlan=3)
            / IPv6(src="fd00::1", dst="fd00::2", nh=51, plen=8)
        )
        + b"\x06\x04"
        + bytes(6)
    )
    return [udp_cut, ah_cut, tagged]


@pytest.mark.parametrize("nf", sorted(VERDICTS))
def test_odd_packets_through_firewall_and_l3fwd(nf: str, mgr: Manager, tmp_path: Path) -> None:
    odd = odd_frames() + header_odd_frames()
    good = list(pcaps.good_frames(N_GOOD, [DST], seed=7)) + [GOOD_V6]
    frames: list[bytes] = []
    for i, g in enumerate(good):
        frames.append(g)
        if i < len(odd):
            frames.append(odd[i])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    mgr.start(
        mgr.config(
            ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
            services=[{"name": "s", "exec": f"squall-nf-{nf}", "args": STATELESS_ARGS[nf]}],
            chains=[{"name": "c", "services": ["s"]}],
            rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        )
    )

    def accounted() -> bool:
        st = mgr.stats()
        return bool(st["rx_pkts"] == len(frames) == st["tx_pkts"] + st["drop_pkts"])

    mgr.wait_for(accounted, 30, f"{len(frames)} frames accounted")
    ex = mgr.finish()
    st = ex["stats"]
    s = ex["nfs"]["s#0"]
    c = s["counters"]
    assert st["drops"]["nf_died"] == 0, st["drops"]  # no crash
    by_mgr = st["drops"]["parse"] + st["drops"]["oversize"]
    assert by_mgr == 4, st["drops"]  # the manager's own malformed frames
    assert s["rx_pkts"] == len(frames) - by_mgr, s
    assert sum(c[k] for k in VERDICTS[nf]) == s["rx_pkts"], c  # each counted once
    if nf == "firewall":
        # the three whose ports or extension headers are cut: malformed,
        # denied; the fragments and cut TCP judged on what they hold
        assert c["malformed"] == 3 and c["denied"] == 3, c
        assert s["drop_verdicts"] == c["denied"] and c["ipv6"] == 4, c
    else:
        assert c["routed"] == s["rx_pkts"] and s["drop_verdicts"] == 0, c
        assert c["ipv6"] == 4, c  # the fragment, the SYN, the AH ones: routed by their header
    assert st["tx_pkts"] == s["rx_pkts"] - s["drop_verdicts"], st
