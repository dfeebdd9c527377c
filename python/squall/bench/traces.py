"""pcap traces for replay (net_pcap rx_pcap=...,infinite_rx=1), made with scapy.

Each trace cycles a size mix over many flows, TCP and UDP, from 10.9.0.0/16
to 10.2.0.0/17, so the standard L3 forwarder routes them (10.2.0.0/16) and
the standard firewall lets them through. Frames leave the FCS off: a mix's
64 B frame is 60 bytes in the file.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from squall.bench.mixes import FCS_BYTES, Mix

DST_MAC = "02:00:00:00:00:01"
SRC_MAC = "02:00:00:00:00:fe"


def write_trace(path: Path, mix: Mix, flows: int, seed: int = 1) -> int:
    """One period of the trace: lcm(flows, len(mix.sizes)) frames, frame i of
    flow i % flows and size mix.sizes[i % len(mix.sizes)]; 70% of the flows
    TCP. Replayed with infinite_rx=1 it repeats forever. Returns the frame count."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Packet, Raw
    from scapy.utils import PcapWriter

    rng = random.Random(seed)
    heads: list[Packet] = []
    for f in range(flows):
        ip = IP(
            src=f"10.9.{(f >> 8) & 0xFF}.{f & 0xFF}", dst=f"10.2.{rng.randrange(128)}.{1 + f % 254}"
        )
        sport = 1024 + rng.randrange(60000)
        l4: Packet
        if rng.random() < 0.7:
            l4 = TCP(sport=sport, dport=rng.choice([80, 443, 8080]), flags="A")
        else:
            l4 = UDP(sport=sport, dport=rng.choice([443, 4789, 9]))
        heads.append(Ether(src=SRC_MAC, dst=DST_MAC) / ip / l4)
    n = math.lcm(flows, len(mix.sizes))
    path.parent.mkdir(parents=True, exist_ok=True)
    with PcapWriter(str(path), linktype=1, sync=False) as w:
        for i in range(n):
            head = heads[i % flows]
            size = mix.sizes[i % len(mix.sizes)] - FCS_BYTES
            pad = max(0, size - len(head))
            w.write(bytes(head / Raw(bytes(pad))) if pad else bytes(head)[:size])
    return n
