"""The firewall and the L3 forwarder see the IPv4 or IPv6 header of a VLAN
or QinQ tagged frame where the manager's parse found it: a tag neither
slips a frame past the firewall's rules nor sends it on unrouted, however
many tags (up to 8; more is a parse drop). Frames that are neither IPv4 nor
IPv6 get the firewall's --non-ip action, and a frame's padding past the IP
length is never read as ports. IPv6: rules with IPv6 prefixes, matched on
the protocol after the extension headers; routes with IPv6 prefixes, the
hop limit decremented, 1 dropped, neighbour discovery passed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pcaps
import pytest
from conftest import Manager
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import (
    ICMPv6ND_NS,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, Raw

MAC = pcaps.mac(1)
FAMILIES = ["ipv4", "ipv6"]


def _ip(family: str, ttl: int = 64, src: str = "") -> Packet:
    """The IP header of the test frames: 10.0.0.1 -> 10.2.0.1, or
    fd00:1::1 -> fd00:2::1."""
    if family == "ipv6":
        return IPv6(src=src or "fd00:1::1", dst="fd00:2::1", hlim=ttl)
    return IP(src=src or "10.0.0.1", dst="10.2.0.1", ttl=ttl)


def _tagged(dport: int, ttl: int = 64, family: str = "ipv4") -> list[bytes]:
    """One TCP frame untagged, one with a VLAN tag, one QinQ, then stacks
    rte_net_get_ptype() alone does not read: two 802.1Q tags, three tags,
    and eight."""
    ip = _ip(family, ttl) / TCP(sport=1234, dport=dport)
    eth = Ether(dst=MAC, src=pcaps.mac(2))
    eight = eth / Dot1AD(vlan=1)
    for v in range(2, 9):
        eight = eight / Dot1Q(vlan=v)
    return [
        bytes(eth / ip),
        bytes(eth / Dot1Q(vlan=5) / ip),
        bytes(eth / Dot1AD(vlan=6) / Dot1Q(vlan=7) / ip),
        bytes(eth / Dot1Q(vlan=8) / Dot1Q(vlan=9) / ip),
        bytes(eth / Dot1AD(vlan=10) / Dot1Q(vlan=11) / Dot1Q(vlan=12) / ip),
        bytes(eight / ip),
    ]


N = len(_tagged(22))


def _run(
    mgr: Manager, tmp_path: Path, frames: list[bytes], svc: dict[str, Any], n_nf: int = -1
) -> tuple:
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, out_pcap),
        services=[{"name": "nf", "instances": 1, **svc}],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    n_nf = len(frames) if n_nf < 0 else n_nf
    mgr.wait_for(lambda: mgr.nfs()["nf#0"]["rx_pkts"] == n_nf, 30, "every frame through the NF")
    ex = mgr.finish()
    return ex, pcaps.read_pcap(out_pcap)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tag_does_not_slip_past_the_firewall(mgr: Manager, tmp_path: Path, family: str) -> None:
    ssh, web = _tagged(22, family=family), _tagged(80, family=family)
    # A rule of no family, and one of the frames' own (which the other
    # family's frames must not match: they would be denied by it).
    rules = ["deny,proto=tcp,dport=22"]
    rules.append(
        "deny,src=fd00:1::/32,dport=23" if family == "ipv6" else "deny,src=10.0.0.0/8,dport=23"
    )
    rules.append(
        "deny,src=10.0.0.0/8,dport=80" if family == "ipv6" else "deny,src=fd00:1::/32,dport=80"
    )
    fw = {"exec": "squall-nf-firewall", "args": [a for r in rules for a in ("--rule", r)]}
    ex, out = _run(mgr, tmp_path, ssh + web + _tagged(23, family=family)[:2], fw)
    assert out == web, "only the port-80 frames, tagged or not, unchanged"
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["denied"] == N + 2 and c["allowed"] == N, c
    assert c["not_ip"] == 0 and c["no_match"] == N and c["malformed"] == 0, c
    assert c["ipv6"] == (2 * N + 2 if family == "ipv6" else 0), c
    assert ex["stats"]["drops"]["nf_verdict"] == N + 2, ex["stats"]["drops"]


@pytest.mark.parametrize("family", FAMILIES)
def test_tagged_frames_are_routed(mgr: Manager, tmp_path: Path, family: str) -> None:
    frames = _tagged(80, ttl=64, family=family)
    # a route of the other family for the same bits must not be taken
    routes = ["10.2.0.0/16=next", "fd00:2::/32=0"]
    if family == "ipv6":
        routes = ["fd00:2::/32=next", "10.2.0.0/16=0", "fd00::/16=0"]
    l3 = {"exec": "squall-nf-l3fwd", "args": [a for r in routes for a in ("--route", r)]}
    ex, out = _run(mgr, tmp_path, frames, l3)
    assert len(out) == N, out
    for sent, got in zip(frames, out, strict=True):
        if family == "ipv6":
            ip6 = Ether(got)[IPv6]
            assert ip6.hlim == 63, Ether(got).summary()
            # nothing else changed: the hop limit is the 8th byte of the header
            off = len(sent) - len(bytes(Ether(sent)[IPv6]))
            assert got[: off + 7] == sent[: off + 7] and got[off + 8 :] == sent[off + 8 :]
            continue
        ip = Ether(got)[IP]
        assert ip.ttl == 63, Ether(got).summary()
        want = ip.copy()
        del want.chksum  # scapy recomputes it on build
        assert ip.chksum == IP(bytes(want)).chksum, "checksum not patched"
        assert len(got) == len(sent)
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["routed"] == N and c["ipv6"] == (N if family == "ipv6" else 0), c
    assert c["not_ip"] == 0 and c["no_route"] == 0 and c["ttl_expired"] == 0, c


def test_l3fwd_ipv6_hop_limit_no_route_and_link_scope(mgr: Manager, tmp_path: Path) -> None:
    """Hop limit 1 and 0 dropped as an expired TTL, an address no route
    covers dropped, neighbour discovery and link-local traffic passed as
    they are; a /64 route wins over the /32 around it."""
    eth = Ether(dst=MAC, src=pcaps.mac(2))
    tcp = TCP(sport=1, dport=2)
    routed = [
        bytes(eth / IPv6(src="fd00:1::1", dst="fd00:2::1", hlim=2) / tcp),
        bytes(eth / Dot1Q(vlan=4) / IPv6(src="fd00:1::1", dst="fd00:2:0:7::1") / tcp),
    ]
    expired = [
        bytes(eth / IPv6(src="fd00:1::1", dst="fd00:2::1", hlim=1) / tcp),
        bytes(eth / Dot1Q(vlan=4) / IPv6(src="fd00:1::1", dst="fd00:2::1", hlim=0) / tcp),
        bytes(eth / IP(src="10.0.0.1", dst="10.2.0.1", ttl=1) / tcp),
    ]
    unrouted = [bytes(eth / IPv6(src="fd00:1::1", dst="fd00:3::1") / tcp)]
    link = [
        bytes(
            eth
            / IPv6(src="fd00:1::1", dst="ff02::1:ff00:2", hlim=255)
            / ICMPv6ND_NS(tgt="fd00:2::2")
        ),
        bytes(
            eth / IPv6(src="fd00:1::1", dst="fd00:2::2", hlim=255) / ICMPv6ND_NS(tgt="fd00:2::2")
        ),
        bytes(eth / IPv6(src="fe80::1", dst="fe80::2") / tcp),
    ]
    routes = ["fd00:2::/32=1", "fd00:2:0:7::/64=next", "10.2.0.0/16=next"]
    l3 = {"exec": "squall-nf-l3fwd", "args": [a for r in routes for a in ("--route", r)]}
    ex, out = _run(mgr, tmp_path, routed + expired + unrouted + link, l3)
    # the /32 sends to port 1, "out" itself, and the /64 along the chain to it
    assert len(out) == len(routed) + len(link), [Ether(f).summary() for f in out]
    assert [Ether(f)[IPv6].hlim for f in out[: len(routed)]] == [1, 63]
    assert out[len(routed) :] == link, "link-scoped frames pass unchanged"
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["routed"] == c["ipv6"] == 2, c
    assert c["ttl_expired"] == 3 and c["no_route"] == 1 and c["link_scope"] == 3, c
    assert ex["stats"]["drops"]["nf_verdict"] == 4, ex["stats"]["drops"]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_tag_does_not_slip_past_conntrack(mgr: Manager, tmp_path: Path, family: str) -> None:
    """The stateful NFs start at the IP header the manager found too: a SYN
    to 22 under three or eight tags (more than their own Ethernet reading
    took) is refused by the security group like an untagged one, never
    passed as "not IP"."""
    rules = tmp_path / "sg.rules"
    rules.write_text("bind out web\nallow web in proto=tcp port=80\n")
    ct = {"exec": "squall-nf-conntrack", "args": ["--rules", str(rules)]}
    web = _tagged(80, family=family)
    ex, out = _run(mgr, tmp_path, _tagged(22, family=family) + web, ct)
    assert out == web, [Ether(f).summary() for f in out]
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["drop_no_rule"] == N and c["untracked"] == 0, c
    # one connection (its SYN resent under each tag stack) committed
    assert c["committed"] == 1 and c["established"] == N - 1, c


def test_more_than_eight_tags_is_a_parse_drop(mgr: Manager, tmp_path: Path) -> None:
    ip = IP(src="10.0.0.1", dst="10.2.0.1") / TCP(sport=1234, dport=22)
    nine = Ether(dst=MAC, src=pcaps.mac(2))
    for v in range(1, 10):
        nine = nine / Dot1Q(vlan=v)
    fw = {"exec": "squall-nf-firewall", "args": ["--rule", "deny,proto=tcp,dport=22"]}
    frames = [bytes(nine / ip), *_tagged(80)[:1]]
    ex, out = _run(mgr, tmp_path, frames, fw, n_nf=1)
    assert out == frames[1:], "the nine-tag frame never reached the NF"
    assert ex["stats"]["drops"]["parse"] == 1, ex["stats"]["drops"]


def _not_ip() -> list[bytes]:
    eth = Ether(dst=MAC, src=pcaps.mac(2))
    return [
        bytes(eth / ARP(psrc="10.0.0.1", pdst="10.0.0.2")),
        bytes(Ether(dst=MAC, src=pcaps.mac(2), type=0x88CC) / Raw(bytes(46))),  # LLDP
        bytes(eth / Dot1Q(vlan=3) / Dot1Q(vlan=4) / ARP(psrc="10.0.0.1", pdst="10.0.0.2")),
    ]


def test_the_firewall_denies_what_it_cannot_judge_by_default(mgr: Manager, tmp_path: Path) -> None:
    """ARP passes (hosts behind a bump-in-the-wire firewall must find each
    other), tagged or not; LLDP, which no rule can judge, is denied; IPv6 is
    judged."""
    fw = {"exec": "squall-nf-firewall", "args": ["--rule", "deny,proto=tcp,dport=22"]}
    web = _tagged(80)[:1] + _tagged(80, family="ipv6")[:1]
    arp, lldp, tagged_arp = _not_ip()
    ex, out = _run(mgr, tmp_path, _not_ip() + web, fw)
    assert out == [arp, tagged_arp, *web]
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["neighbour"] == 2 and c["not_ip"] == 1, c
    assert c["denied"] == 1 and c["allowed"] == 4, c


def test_the_firewall_denies_arp_when_told(mgr: Manager, tmp_path: Path) -> None:
    fw = {"exec": "squall-nf-firewall", "args": ["--neighbour", "deny", "--non-ip", "allow"]}
    arp, lldp, tagged_arp = _not_ip()
    ex, out = _run(mgr, tmp_path, _not_ip(), fw)
    assert out == [lldp]
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["neighbour"] == 2 and c["denied"] == 2 and c["not_ip"] == 1, c


@pytest.mark.parametrize("option", ["--non-ip", "--non-ipv4"])
def test_the_firewall_passes_non_ip_when_told(mgr: Manager, tmp_path: Path, option: str) -> None:
    """--non-ipv4 is the option's old name, still taken."""
    fw = {
        "exec": "squall-nf-firewall",
        "args": [option, "allow", "--default", "deny"],
    }
    frames = _not_ip()
    ex, out = _run(mgr, tmp_path, frames, fw)
    assert out == frames
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["not_ip"] == 1 and c["neighbour"] == 2, c
    assert c["allowed"] == 3 and c["no_match"] == 0, c


def test_the_firewall_walks_ipv6_extension_headers(mgr: Manager, tmp_path: Path) -> None:
    """The port rule sees TCP behind hop-by-hop, destination options, AH and
    a first fragment's header; a later fragment has no ports (the default
    decides); an extension header cut short is malformed (the manager
    drops the ones its own parse walks, as ipv6_header)."""
    eth = Ether(dst=MAC, src=pcaps.mac(2))
    ip6 = IPv6(src="fd00:1::1", dst="fd00:2::1")
    ssh = TCP(sport=1234, dport=22)
    denied = [
        bytes(eth / ip6 / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / ssh),
        bytes(eth / Dot1Q(vlan=2) / ip6 / AH(nh=6, payloadlen=4, spi=1, icv=bytes(12)) / ssh),
        bytes(eth / ip6 / IPv6ExtHdrFragment(offset=0, m=1, nh=6) / ssh),
    ]
    later_fragment = bytes(eth / ip6 / IPv6ExtHdrFragment(offset=8, nh=6) / Raw(bytes(ssh)))
    # AH (which DPDK's parse does not walk: the NF does) that claims 24
    # bytes of a payload of 8
    cut = bytes(
        eth / IPv6(src="fd00:1::1", dst="fd00:2::1", nh=51, plen=8) / Raw(b"\x06\x04" + bytes(6))
    )
    fw = {"exec": "squall-nf-firewall", "args": ["--rule", "deny,proto=tcp,dport=22"]}
    ex, out = _run(mgr, tmp_path, denied + [later_fragment, cut], fw)
    assert out == [later_fragment], [Ether(f).summary() for f in out]
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["ipv6"] == 5 and c["denied"] == 4 and c["malformed"] == 1, c
    assert c["allowed"] == c["no_match"] == 1, c


def test_the_firewall_reads_no_ports_past_the_ip_total_length(mgr: Manager, tmp_path: Path) -> None:
    # An IP header that says it is all there is (total length 20, protocol
    # TCP), then padding that looks like ports 1234 -> 80: the allow rule
    # must not match bytes that are not part of the packet.
    eth = Ether(dst=MAC, src=pcaps.mac(2))
    padded = bytes(eth / IP(src="10.0.0.1", dst="10.2.0.1", proto=6, len=20)) + bytes(
        Raw(b"\x04\xd2\x00\x50" + bytes(30))
    )
    assert Ether(padded)[IP].len == 20
    good = bytes(eth / IP(src="10.0.0.1", dst="10.2.0.1") / TCP(sport=1234, dport=80))
    fw = {
        "exec": "squall-nf-firewall",
        "args": ["--default", "deny", "--rule", "allow,proto=tcp,dport=80"],
    }
    # The same for IPv6: a payload length of 0, "ports" in the padding.
    padded6 = bytes(eth / IPv6(src="fd00:1::1", dst="fd00:2::1", nh=6, plen=0)) + bytes(
        Raw(b"\x04\xd2\x00\x50" + bytes(30))
    )
    good6 = bytes(eth / IPv6(src="fd00:1::1", dst="fd00:2::1") / TCP(sport=1234, dport=80))
    ex, out = _run(mgr, tmp_path, [padded, good, padded6, good6], fw)
    assert out == [good, good6], "the padded frames are malformed, denied"
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["malformed"] == 2 and c["denied"] == 2 and c["allowed"] == 2, c
