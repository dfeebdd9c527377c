"""Peers measured in the same run as Squall, on the same two ports (sq-c1, sq-s1)
with the same traffic: the Linux kernel (a bridge; a chain of three nftables
firewalls), Open vSwitch with DPDK, and DPDK's testpmd in io mode (the least a
DPDK forwarder does: it moves bursts, nothing else); and, doing the job of
Squall's conntrack (and conntrack -> nat), stateful_peers(): the kernel with nftables
ct state (and masquerade) on a router namespace, OVS-DPDK with ct() (and
ct(nat)) flows.

    for peer in all_peers():
        if (why := peer.unavailable()) is not None:
            report(peer.name, why)      # exactly why it cannot run here
            continue
        peer.start()                    # after scripts/netns.sh up
        try:
            measure(peer.name)
        finally:
            peer.stop()

start() raises PeerError (the failing command and its error) if the peer cannot
come up after all, e.g. a datapath that refuses the ports; stop() is idempotent.
"""

from __future__ import annotations

from .common import ALLOWED_TCP_PORTS, CLIENT_END, SERVER_END, SNAT_IP, Peer, PeerError
from .kernel import KernelBridge, KernelNftChain, KernelNftCt
from .ovs import OvsDpdk, OvsDpdkCt
from .testpmd import TestpmdIo

__all__ = [
    "ALLOWED_TCP_PORTS",
    "CLIENT_END",
    "SNAT_IP",
    "KernelNftCt",
    "OvsDpdkCt",
    "stateful_peers",
    "SERVER_END",
    "KernelBridge",
    "KernelNftChain",
    "OvsDpdk",
    "TestpmdIo",
    "Peer",
    "PeerError",
    "all_peers",
]


def all_peers() -> list[Peer]:
    """Every peer, in the order a report lists them."""
    return [KernelBridge(), KernelNftChain(), OvsDpdk(), TestpmdIo()]


def stateful_peers(allowed_tcp_ports: tuple[int, ...] = ALLOWED_TCP_PORTS) -> list[Peer]:
    """The peers of a stateful firewall, then of a stateful firewall with SNAT."""
    return [
        KernelNftCt(allowed_tcp_ports=allowed_tcp_ports),
        OvsDpdkCt(allowed_tcp_ports=allowed_tcp_ports),
        KernelNftCt(nat=True, allowed_tcp_ports=allowed_tcp_ports),
        OvsDpdkCt(nat=True, allowed_tcp_ports=allowed_tcp_ports),
    ]
