"""The firewall and the L3 forwarder see the IPv4 header of a VLAN or QinQ
tagged frame where the manager's parse found it: a tag neither slips a frame
past the firewall's rules nor sends it on unrouted, however many tags (up to
8; more is a parse drop). Frames that are not IPv4 get the firewall's
--non-ipv4 action, and a frame's padding past the IP total length is never
read as ports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pcaps
from conftest import Manager
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

MAC = pcaps.mac(1)


def _tagged(dport: int, ttl: int = 64) -> list[bytes]:
    """One TCP frame untagged, one with a VLAN tag, one QinQ, then stacks
    rte_net_get_ptype() alone does not read: two 802.1Q tags, three tags,
    and eight."""
    ip = IP(src="10.0.0.1", dst="10.2.0.1", ttl=ttl) / TCP(sport=1234, dport=dport)
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


def test_a_tag_does_not_slip_past_the_firewall(mgr: Manager, tmp_path: Path) -> None:
    ssh, web = _tagged(22), _tagged(80)
    fw = {"exec": "squall-nf-firewall", "args": ["--rule", "deny,proto=tcp,dport=22"]}
    ex, out = _run(mgr, tmp_path, ssh + web, fw)
    assert out == web, "only the port-80 frames, tagged or not, unchanged"
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["denied"] == N and c["allowed"] == N, c
    assert c["not_ipv4"] == 0 and c["no_match"] == N, c
    assert ex["stats"]["drops"]["nf_verdict"] == N, ex["stats"]["drops"]


def test_tagged_frames_are_routed(mgr: Manager, tmp_path: Path) -> None:
    frames = _tagged(80, ttl=64)
    l3 = {"exec": "squall-nf-l3fwd", "args": ["--route", "10.2.0.0/16=next"]}
    ex, out = _run(mgr, tmp_path, frames, l3)
    assert len(out) == N, out
    for sent, got in zip(frames, out, strict=True):
        ip = Ether(got)[IP]
        assert ip.ttl == 63, Ether(got).summary()
        want = ip.copy()
        del want.chksum  # scapy recomputes it on build
        assert ip.chksum == IP(bytes(want)).chksum, "checksum not patched"
        assert len(got) == len(sent)
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["not_ipv4"] == 0 and c["no_route"] == 0 and c["ttl_expired"] == 0, c


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


def _not_ipv4() -> list[bytes]:
    eth = Ether(dst=MAC, src=pcaps.mac(2))
    return [
        bytes(eth / ARP(psrc="10.0.0.1", pdst="10.0.0.2")),
        bytes(eth / IPv6(src="fd00::1", dst="fd00::2") / TCP(sport=1234, dport=22)),
        bytes(eth / Dot1Q(vlan=3) / Dot1Q(vlan=4) / ARP(psrc="10.0.0.1", pdst="10.0.0.2")),
    ]


def test_the_firewall_denies_what_it_cannot_judge_by_default(mgr: Manager, tmp_path: Path) -> None:
    fw = {"exec": "squall-nf-firewall", "args": ["--rule", "deny,proto=tcp,dport=22"]}
    web = _tagged(80)[:1]
    ex, out = _run(mgr, tmp_path, _not_ipv4() + web, fw)
    assert out == web, "ARP and IPv6 denied: no rule can judge them"
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["not_ipv4"] == 3 and c["denied"] == 3 and c["allowed"] == 1, c


def test_the_firewall_passes_non_ipv4_when_told(mgr: Manager, tmp_path: Path) -> None:
    fw = {
        "exec": "squall-nf-firewall",
        "args": ["--non-ipv4", "allow", "--default", "deny"],
    }
    frames = _not_ipv4()
    ex, out = _run(mgr, tmp_path, frames, fw)
    assert out == frames
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["not_ipv4"] == 3 and c["allowed"] == 3 and c["no_match"] == 0, c


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
    ex, out = _run(mgr, tmp_path, [padded, good], fw)
    assert out == [good], "the padded frame is malformed, denied"
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["malformed"] == 1 and c["denied"] == 1 and c["allowed"] == 1, c
