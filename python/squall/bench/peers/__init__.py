"""Peers measured in the same run as Squall, on the same two ports (sq-c1, sq-s1)
with the same traffic: the Linux kernel (a bridge; a chain of three nftables
firewalls) and Open vSwitch with DPDK.

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

from .common import CLIENT_END, SERVER_END, Peer, PeerError
from .kernel import KernelBridge, KernelNftChain
from .ovs import OvsDpdk

__all__ = [
    "CLIENT_END",
    "SERVER_END",
    "KernelBridge",
    "KernelNftChain",
    "OvsDpdk",
    "Peer",
    "PeerError",
    "all_peers",
]


def all_peers() -> list[Peer]:
    """Every peer, in the order a report lists them."""
    return [KernelBridge(), KernelNftChain(), OvsDpdk()]
