"""Packets for the integration tests: crafted with scapy, written and read as pcap.

Every frame is returned as bytes, exactly as it goes on the wire without the
FCS, so a test compares what squall-mgr transmitted with what it was given
byte for byte. Good frames carry a sequence number in their payload, which
makes every frame of one call unique.
"""

from __future__ import annotations

import functools
import os
import random
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import PcapWriter, RawPcapReader

SRC_MAC = "02:00:00:00:00:aa"
MIN_FRAME_BYTES = 60  # without FCS
MAX_FRAME_BYTES = 1514
JUMBO_FRAME_BYTES = 9000

_UDP_HEAD_BYTES = 14 + 20 + 8
_TCP_HEAD_BYTES = 14 + 20 + 20
_TAG_BYTES = 8

FNV1A_OFFSET_BASIS = 2166136261
FNV1A_PRIME = 16777619
SIG_BYTES = 64


def mac(i: int) -> str:
    """A locally administered unicast MAC: mac(1) == "02:00:00:00:00:01"."""
    return "02:00:00:00:" + f"{(i >> 8) & 0xFF:02x}:{i & 0xFF:02x}"


def good_frames(
    n: int,
    dst_macs: Sequence[str] = (mac(1),),
    seed: int = 1,
    min_bytes: int = MIN_FRAME_BYTES,
    max_bytes: int = MAX_FRAME_BYTES,
) -> list[bytes]:
    return list(_good_frames(n, tuple(dst_macs), seed, min_bytes, max_bytes))


@functools.lru_cache(maxsize=16)
def _good_frames(
    n: int, dst_macs: tuple[str, ...], seed: int, min_bytes: int, max_bytes: int
) -> tuple[bytes, ...]:
    """n well-formed IPv4 UDP/TCP frames of sizes min_bytes..max_bytes.

    Frame i goes to dst_macs[i % len(dst_macs)]; sizes and the UDP/TCP mix are
    random but reproducible from seed; frame 0 has min_bytes, frame 1 max_bytes.
    """
    rng = random.Random(seed)
    frames: list[bytes] = []
    for i in range(n):
        if i == 0:
            size = min_bytes
        elif i == 1:
            size = max_bytes
        else:
            size = rng.randint(min_bytes, max_bytes)
        dst = dst_macs[i % len(dst_macs)]
        ip = IP(src=f"10.0.{(i >> 8) & 0xFF}.{i & 0xFF}", dst=f"10.1.0.{1 + i % 200}")
        sport = 1024 + rng.randrange(60000)
        # A TCP frame with its tag needs 62 B; smaller ones are UDP.
        l4: Packet
        if rng.random() < 0.5 and size >= _TCP_HEAD_BYTES + _TAG_BYTES:
            l4 = TCP(sport=sport, dport=80 + i % 7, flags="A", seq=i)
            head_len = _TCP_HEAD_BYTES
        else:
            l4 = UDP(sport=sport, dport=53 + i % 7)
            head_len = _UDP_HEAD_BYTES
        # The sequence number makes frames unique even when headers repeat.
        tag = struct.pack("!4sI", b"SQLL", i)
        pad = max(0, size - head_len - _TAG_BYTES)
        frame = bytes(Ether(src=SRC_MAC, dst=dst) / ip / l4 / Raw(tag + rng.randbytes(pad)))
        assert len(frame) == size, (i, len(frame), size)
        frames.append(frame)
    return tuple(frames)


def truncated_ipv4(dst_mac: str = mac(1)) -> bytes:
    """Ethertype IPv4 but only 6 bytes of the 20-byte IPv4 header."""
    full = bytes(Ether(src=SRC_MAC, dst=dst_mac) / IP(src="10.9.0.1", dst="10.9.0.2") / UDP())
    return full[: 14 + 6]


def eth_only(dst_mac: str = mac(1)) -> bytes:
    """A 14-byte frame: Ethernet header, nothing after it."""
    return bytes(Ether(src=SRC_MAC, dst=dst_mac, type=0x0800))


def bad_ihl(dst_mac: str = mac(1), ihl: int = 3) -> bytes:
    """IPv4 with an IHL below 5 (the header claims to be shorter than it can be)."""
    pkt = Ether(src=SRC_MAC, dst=dst_mac) / IP(src="10.9.0.3", dst="10.9.0.4", ihl=ihl)
    return bytes(pkt / UDP(sport=1, dport=2) / Raw(b"\0" * 40))


def ihl_past_end(dst_mac: str = mac(1)) -> bytes:
    """IPv4 whose IHL (15 words = 60 B) runs past the end of a 60-byte frame."""
    head = Ether(src=SRC_MAC, dst=dst_mac) / IP(src="10.9.0.5", dst="10.9.0.6", ihl=15)
    return bytes(head)[:60].ljust(60, b"\0")


def jumbo(dst_mac: str = mac(1), size: int = JUMBO_FRAME_BYTES) -> bytes:
    """A well-formed UDP jumbo frame of `size` bytes."""
    head = Ether(src=SRC_MAC, dst=dst_mac) / IP(src="10.9.0.7", dst="10.9.0.8") / UDP(dport=9)
    return bytes(head / Raw(b"J" * (size - len(head))))


def malformed_frames(dst_mac: str = mac(1)) -> list[bytes]:
    """One of each malformed frame the tests feed the manager."""
    return [
        truncated_ipv4(dst_mac),
        eth_only(dst_mac),
        bad_ihl(dst_mac),
        ihl_past_end(dst_mac),
        jumbo(dst_mac),
    ]


def dst_mac_of(frame: bytes) -> str:
    return ":".join(f"{b:02x}" for b in frame[:6])


def write_pcap(path: str | os.PathLike[str], frames: Iterable[bytes]) -> Path:
    """Write frames (Ethernet link type, 65535 snaplen) exactly as given."""
    path = Path(path)
    writer = PcapWriter(str(path), linktype=1, snaplen=65535, sync=False)
    try:
        for frame in frames:
            writer.write(frame)
    finally:
        writer.close()
    return path


def read_pcap(path: str | os.PathLike[str]) -> list[bytes]:
    """Frames of a pcap (micro- or nanosecond timestamps), as bytes, in file order."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return []
    frames: list[bytes] = []
    for data, meta in RawPcapReader(str(path)):
        assert meta.caplen == meta.wirelen, f"{path}: frame truncated in capture"
        frames.append(bytes(data))
    return frames


def fnv1a32(data: bytes) -> int:
    h = FNV1A_OFFSET_BASIS
    for b in data:
        h ^= b
        h = (h * FNV1A_PRIME) & 0xFFFFFFFF
    return h


def sig_sum(frames: Iterable[bytes]) -> int:
    """What squall-nf-sig's sig_sum counter should read after seeing frames."""
    return sum(fnv1a32(f[:SIG_BYTES]) for f in frames) & 0xFFFFFFFFFFFFFFFF


def pcap_ports(in_pcap: str | os.PathLike[str], out_pcap: str | os.PathLike[str]) -> list[dict]:
    """Config ports "in" (replays in_pcap once) and "out" (writes out_pcap)."""
    return [
        {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
        {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
    ]
