"""A flood of spoofed new connections, for the per-flow admission test and
the pool_flood experiment (docs/config.md, flow_unestablished_per_source).

Run in the client namespace: for SECONDS, RATE new spoofed TCP connections a
second (a SYN, then an ACK sent blind: it acknowledges a guess, not the
responder's sequence number) and RATE UDP datagrams, each from a random host
of the /24 NET, sent as frames out of DEV (raw, so any source goes). Prints
how many connections it sent. Bounded in time and rate; it sends only to DST.

    python -m squall.bench.flood NET DST PORT RATE SECONDS [DEV]
"""

from __future__ import annotations

import random
import socket
import struct
import sys
import time

CLIENT_MAC = bytes.fromhex("020000000001")  # scripts/netns.sh's
SERVER_MAC = bytes.fromhex("020000000002")
TCP, UDP = 6, 17
SYN, ACK = 0x02, 0x10


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def frame(src: str, dst: str, proto: int, l4: bytes) -> bytes:
    """An Ethernet frame with an IPv4 header and @p l4, both checksums set."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, proto, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))  # fmt: skip
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    pseudo = ip[12:20] + struct.pack("!BBH", 0, proto, len(l4))
    off = 16 if proto == TCP else 6
    l4 = l4[:off] + struct.pack("!H", checksum(pseudo + l4)) + l4[off + 2 :]
    return SERVER_MAC + CLIENT_MAC + b"\x08\x00" + ip + l4


def tcp(sport: int, dport: int, seq: int, ack: int, flags: int) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)


def connections(net: str, dst: str, port: int, n: int) -> list[tuple[bytes, bytes, bytes]]:
    """@p n spoofed connections' frames: SYN, blind ACK, a datagram each."""
    rng = random.Random(7)
    out = []
    for _ in range(n):
        src = f"{net}.{rng.randrange(1, 255)}"
        sport = rng.randrange(1024, 65535)
        seq = rng.randrange(1 << 32)
        out.append(
            (
                frame(src, dst, TCP, tcp(sport, port, seq, 0, SYN)),
                frame(src, dst, TCP, tcp(sport, port, seq + 1, rng.randrange(1 << 32), ACK)),
                frame(src, dst, UDP, struct.pack("!HHHH", sport, 9, 13, 0) + b"flood"),
            )
        )
    return out


def flood(net: str, dst: str, port: int, rate: int, seconds: float, dev: str) -> int:
    """Made before the clock starts, so the flood costs its sender little
    CPU (a send a frame): two seconds' worth, sent round (a tuple comes
    again after two seconds, when the flow it made is long gone)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((dev, 0))
    conns = connections(net, dst, port, max(1, 2 * rate))
    sent = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        tick = time.monotonic()
        for _ in range(max(1, rate // 10)):
            for f in conns[sent % len(conns)]:
                s.send(f)
            sent += 1
        time.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))
    return sent


def main(argv: list[str]) -> int:
    if len(argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    net, dst = argv[0], argv[1]
    port, rate, seconds = int(argv[2]), int(argv[3]), float(argv[4])
    print(flood(net, dst, port, rate, seconds, argv[5] if len(argv) == 6 else "sq-c0"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
