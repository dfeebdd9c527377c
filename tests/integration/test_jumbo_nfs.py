"""9,000-byte frames through every shipped NF. A frame longer than the pool's
data room reaches an NF as a chain of mbufs (squall/pkt.h): each NF must
judge it by its headers in the first segment and its IP length against the
whole frame, and an NF that reads or writes payload must follow the chain.
Each test sends jumbo UDP and TCP frames (with a few ordinary ones between)
through a one-NF chain and checks what came out byte for byte: unchanged,
or changed exactly as the NF changes a short frame."""

from __future__ import annotations

from pathlib import Path

import pcaps
import pytest
from conftest import NF_DIR, Manager
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

DST = pcaps.mac(1)
JUMBO = pcaps.JUMBO_FRAME_BYTES
N_JUMBO = 12
NEEDLE = b"NEEDLE-PAST-THE-FIRST-SEGMENT"
NEEDLE_AT = 5000  # bytes into the frame: in its third segment


def jumbo_frame(i: int, tcp: bool, needle: bool = False) -> bytes:
    ip = IP(src=f"10.9.0.{1 + i}", dst="10.9.0.200")
    l4 = TCP(sport=2000 + i, dport=80, flags="A", seq=i) if tcp else UDP(sport=2000 + i, dport=9)
    head = Ether(src=pcaps.SRC_MAC, dst=DST) / ip / l4
    body = bytearray(bytes(range(256)) * (JUMBO // 256 + 1))[: JUMBO - len(head)]
    body[:4] = i.to_bytes(4, "big")  # every frame unique
    if needle:
        at = NEEDLE_AT - len(head)
        body[at : at + len(NEEDLE)] = NEEDLE
    frame = bytes(head / Raw(bytes(body)))
    assert len(frame) == JUMBO
    return frame


def frames(tcp: bool = True, needles: frozenset[int] = frozenset()) -> list[bytes]:
    out: list[bytes] = []
    short = pcaps.good_frames(N_JUMBO, [DST], seed=11)
    for i in range(N_JUMBO):
        out.append(jumbo_frame(i, tcp=tcp and i % 2 == 1, needle=i in needles))
        out.append(short[i])
    return out


def run(
    mgr: Manager, tmp_path: Path, services: list[dict], sent: list[bytes]
) -> tuple[list[bytes], dict]:
    """The frames through a chain of `services`; what came out, and the exit."""
    for s in services:
        if not (NF_DIR / s["exec"]).is_file():
            pytest.skip(f"{s['exec']} not built")
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", sent)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(
        mgr.config(
            ports=pcaps.pcap_ports(in_pcap, out_pcap),
            services=services,
            chains=[{"name": "c", "services": [s["name"] for s in services]}],
            rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        )
    )

    def accounted() -> bool:
        st = mgr.stats()
        return bool(st["rx_pkts"] == len(sent) == st["tx_pkts"] + st["drop_pkts"])

    mgr.wait_for(accounted, 30, f"{len(sent)} frames accounted")
    ex = mgr.finish()
    assert ex["stats"]["rx_pkts"] == len(sent)
    assert ex["stats"]["drops"]["parse"] == 0, ex["stats"]["drops"]
    return pcaps.read_pcap(out_pcap), ex


def jumbos(fs: list[bytes]) -> list[bytes]:
    return [f for f in fs if len(f) == JUMBO]


# NFs that pass every frame as it came: (exec, args, a counter that saw all).
UNCHANGED = {
    "noop": ("squall-nf-noop", [], None),
    "monitor": ("squall-nf-monitor", ["--interval-ms", "0"], "pkts"),
    "sig": ("squall-nf-sig", [], "sig_pkts"),
    "cost": ("squall-nf-cost", ["--cycles", "10"], None),
    "fwd": ("squall-nf-fwd", [], None),
    "firewall": ("squall-nf-firewall", ["--rule", "deny,proto=udp,dport=22"], "allowed"),
    # (jumbo UDP only: a TCP segment of no connection it saw open is dropped)
    "conntrack": ("squall-nf-conntrack", [], None),
}


@pytest.mark.parametrize("nf", sorted(UNCHANGED))
def test_jumbo_frames_pass_unchanged(nf: str, mgr: Manager, tmp_path: Path) -> None:
    exe, args, counter = UNCHANGED[nf]
    sent = frames(tcp=nf != "conntrack")
    got, ex = run(mgr, tmp_path, [{"name": "s", "exec": exe, "args": args}], sent)
    counters = ex["nfs"]["s#0"]["counters"]
    if nf == "conntrack":
        # the short frames' TCP segments belong to no connection it saw open
        assert jumbos(got) == jumbos(sent), counters
        assert len(got) + counters["drop_invalid"] == len(sent), counters
        return
    assert got == sent, (len(got), len(sent), counters)
    if counter is not None:
        assert counters[counter] == len(sent), counters
    if nf == "monitor":
        assert counters["bytes"] == sum(len(f) for f in sent), counters
    if nf == "firewall":
        assert counters.get("malformed", 0) == 0, counters


def test_firewall_judges_a_jumbo_frame_by_its_rules(mgr: Manager, tmp_path: Path) -> None:
    """A deny rule on the jumbo frames' port drops exactly them, as denied."""
    sent = frames(tcp=False)
    args = ["--rule", "deny,proto=udp,dport=9"]
    got, ex = run(mgr, tmp_path, [{"name": "s", "exec": "squall-nf-firewall", "args": args}], sent)
    counters = ex["nfs"]["s#0"]["counters"]
    assert got == [f for f in sent if len(f) != JUMBO]
    assert counters["denied"] == N_JUMBO and counters.get("malformed", 0) == 0, counters


def test_l3fwd_routes_jumbo_frames(mgr: Manager, tmp_path: Path) -> None:
    sent = frames()
    args = ["--route", "0.0.0.0/0=next"]
    got, ex = run(mgr, tmp_path, [{"name": "s", "exec": "squall-nf-l3fwd", "args": args}], sent)
    assert len(got) == len(sent), ex["nfs"]["s#0"]["counters"]
    for a, b in zip(sent, got, strict=True):
        want = Ether(a)
        want[IP].ttl -= 1
        del want[IP].chksum
        assert bytes(want) == b


def test_nat_translates_jumbo_frames(mgr: Manager, tmp_path: Path) -> None:
    """Addresses rewritten, checksums still right, the payload past the first
    segment untouched."""
    sent = frames(tcp=False)
    args = ["--snat", "10.9.0.0/24=192.0.2.1"]
    got, ex = run(mgr, tmp_path, [{"name": "s", "exec": "squall-nf-nat", "args": args}], sent)
    assert len(jumbos(got)) == N_JUMBO, ex["nfs"]["s#0"]["counters"]
    for a, b in zip(jumbos(sent), jumbos(got), strict=True):
        pa, pb = Ether(a), Ether(b)
        assert pb[IP].src == "192.0.2.1"
        assert bytes(pb[UDP].payload) == bytes(pa[UDP].payload)
        fixed = Ether(b)
        del fixed[IP].chksum
        del fixed[UDP].chksum
        assert bytes(Ether(bytes(fixed))) == b  # both checksums as scapy makes them


def test_lb_balances_jumbo_frames(mgr: Manager, tmp_path: Path) -> None:
    sent = frames(tcp=False)
    args = ["--vip", "udp:10.9.0.200:9", "--backend", "10.9.0.201:9"]
    got, ex = run(mgr, tmp_path, [{"name": "s", "exec": "squall-nf-lb", "args": args}], sent)
    assert len(jumbos(got)) == N_JUMBO, ex["nfs"]["s#0"]["counters"]
    for a, b in zip(jumbos(sent), jumbos(got), strict=True):
        assert Ether(b)[IP].dst == "10.9.0.201"
        assert bytes(Ether(b)[UDP].payload) == bytes(Ether(a)[UDP].payload)


def test_dpi_finds_a_pattern_past_the_first_segment(mgr: Manager, tmp_path: Path) -> None:
    """The needle sits 5,000 bytes into the frame: only a scan across the
    segments sees it. Those frames are dropped, the rest pass unchanged."""
    needles = frozenset({2, 5, 8})
    sent = frames(tcp=False, needles=needles)
    rules = tmp_path / "dpi.rules"
    rules.write_text(f"1 drop /{NEEDLE.decode()}/\n")
    svc = {"name": "s", "exec": "squall-nf-dpi", "args": ["--rules", str(rules)]}
    got, ex = run(mgr, tmp_path, [svc], sent)
    counters = ex["nfs"]["s#0"]["counters"]
    assert got == [f for f in sent if NEEDLE not in f], counters
    assert counters.get("bad_hdr", 0) == 0, counters
    assert ex["nfs"]["s#0"]["drop_verdicts"] == len(needles), counters


def test_aes_encrypts_every_segment(mgr: Manager, tmp_path: Path) -> None:
    """One aes NF changes every payload byte of every segment (and no header);
    a second with the same key restores the frames exactly."""
    key = tmp_path / "key"
    key.write_bytes(bytes(range(16)))
    sent = frames()
    one = [{"name": "a", "exec": "squall-nf-aes", "args": ["--key-file", str(key)]}]
    got, ex = run(mgr, tmp_path, one, sent)
    assert ex["nfs"]["a#0"]["counters"]["aes_pkts"] == len(sent), ex["nfs"]["a#0"]["counters"]
    for a, b in zip(jumbos(sent), jumbos(got), strict=True):
        head = len(Ether(a)) - len(Ether(a)[IP].payload.payload)
        assert a[:head] == b[:head]
        tail_a, tail_b = a[head:], b[head:]
        # CTR keystream: a byte stays the same 1 time in 256; whole 512-byte
        # stretches (one per segment and more) never do
        for off in range(0, len(tail_a) - 512, 512):
            assert tail_a[off : off + 512] != tail_b[off : off + 512], off


def test_aes_twice_gives_the_frames_back(mgr: Manager, tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_bytes(bytes(range(16)))
    sent = frames()
    two = [
        {"name": n, "exec": "squall-nf-aes", "args": ["--key-file", str(key)]} for n in ("a", "b")
    ]
    got, _ = run(mgr, tmp_path, two, sent)
    assert got == sent


def test_drop_drops_jumbo_frames_whole(mgr: Manager, tmp_path: Path) -> None:
    sent = frames()
    got, ex = run(mgr, tmp_path, [{"name": "s", "exec": "squall-nf-drop", "args": []}], sent)
    assert got == []
    assert ex["nfs"]["s#0"]["drop_verdicts"] == len(sent)


def test_firewall_passes_arp_by_default(mgr: Manager, tmp_path: Path) -> None:
    """A bump-in-the-wire firewall carries ARP (hosts on either side find each
    other) unless told --neighbour deny; other non-IP frames get --non-ip."""
    arp = bytes(Ether(src=pcaps.SRC_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.9.0.200"))
    lldp = bytes(Ether(src=pcaps.SRC_MAC, dst="01:80:c2:00:00:0e", type=0x88CC) / Raw(b"\0" * 46))
    sent = [arp, lldp, *pcaps.good_frames(4, [DST], seed=3)]
    svc = {"name": "s", "exec": "squall-nf-firewall", "args": []}
    got, ex = run(mgr, tmp_path, [svc], sent)
    counters = ex["nfs"]["s#0"]["counters"]
    assert got == [f for f in sent if f != lldp]
    assert counters["neighbour"] == 1 and counters["not_ip"] == 1, counters
