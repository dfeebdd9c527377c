"""The firewall and the L3 forwarder see the IPv4 header of a VLAN or QinQ
tagged frame where the manager's parse found it: a tag neither slips a frame
past the firewall's rules nor sends it on unrouted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pcaps
from conftest import Manager
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether

MAC = pcaps.mac(1)


def _tagged(dport: int, ttl: int = 64) -> list[bytes]:
    """One TCP frame untagged, one with a VLAN tag, one QinQ."""
    ip = IP(src="10.0.0.1", dst="10.2.0.1", ttl=ttl) / TCP(sport=1234, dport=dport)
    eth = Ether(dst=MAC, src=pcaps.mac(2))
    return [
        bytes(eth / ip),
        bytes(eth / Dot1Q(vlan=5) / ip),
        bytes(eth / Dot1AD(vlan=6) / Dot1Q(vlan=7) / ip),
    ]


def _run(mgr: Manager, tmp_path: Path, frames: list[bytes], svc: dict[str, Any]) -> tuple:
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, out_pcap),
        services=[{"name": "nf", "instances": 1, **svc}],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    mgr.wait_for(
        lambda: mgr.nfs()["nf#0"]["rx_pkts"] == len(frames), 30, "every frame through the NF"
    )
    ex = mgr.finish()
    return ex, pcaps.read_pcap(out_pcap)


def test_a_tag_does_not_slip_past_the_firewall(mgr: Manager, tmp_path: Path) -> None:
    ssh, web = _tagged(22), _tagged(80)
    fw = {"exec": "squall-nf-firewall", "args": ["--rule", "deny,proto=tcp,dport=22"]}
    ex, out = _run(mgr, tmp_path, ssh + web, fw)
    assert out == web, "only the port-80 frames, tagged or not, unchanged"
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["denied"] == 3 and c["allowed"] == 3, c
    assert c["not_ipv4"] == 0 and c["no_match"] == 3, c
    assert ex["stats"]["drops"]["nf_verdict"] == 3, ex["stats"]["drops"]


def test_tagged_frames_are_routed(mgr: Manager, tmp_path: Path) -> None:
    frames = _tagged(80, ttl=64)
    l3 = {"exec": "squall-nf-l3fwd", "args": ["--route", "10.2.0.0/16=next"]}
    ex, out = _run(mgr, tmp_path, frames, l3)
    assert len(out) == 3, out
    for sent, got in zip(frames, out, strict=True):
        ip = Ether(got)[IP]
        assert ip.ttl == 63, Ether(got).summary()
        want = ip.copy()
        del want.chksum  # scapy recomputes it on build
        assert ip.chksum == IP(bytes(want)).chksum, "checksum not patched"
        assert len(got) == len(sent)
    c = ex["nfs"]["nf#0"]["counters"]
    assert c["not_ipv4"] == 0 and c["no_route"] == 0 and c["ttl_expired"] == 0, c
