"""The Linux kernel path as a peer: a bridge, and a chain of three nftables firewalls.

kernel-bridge     sq-c1 and sq-s1 as members of one bridge in the root namespace.
kernel-nft-chain  sq-c1 -> [sqfw1] -> [sqfw2] -> [sqfw3] -> sq-s1: three namespaces,
                  each a bridge whose forward hook runs an nftables (bridge family)
                  firewall, joined by veth pairs. L2, so client and server keep
                  their addresses. The two ends move into sqfw1 and sqfw3 for
                  the run and come back as they were (up, IPv6 off) on stop.

The root namespace keeps the machine's settings: where br_netfilter is loaded
(built in on the Firecracker kernel) net.bridge.bridge-nf-call-iptables=1 sends
kernel-bridge's IPv4 through the (empty) IPv4 netfilter hooks as well; the peer
leaves that as it is. The sqfw namespaces set it to 0: only the nft rules run.
"""

from __future__ import annotations

import os
from functools import partial

from .common import (
    CLIENT_END,
    READY_TIMEOUT_S,
    SERVER_END,
    SUBNET,
    PeerError,
    bridge_ready,
    ipv6_disabled,
    link,
    missing_tool,
    not_root,
    ns_exists,
    require_free_end,
    run,
    wait_until,
    why_not,
)

# As scripts/netns.sh sets every end: a peer sees the same MTU-sized frames.
OFFLOADS = ("tx", "tso", "gso", "gro", "rx")


def _bridge_add(name: str, ns: str | None = None) -> None:
    ip = ["ip", *(["-n", ns] if ns else [])]
    run([*ip, "link", "add", name, "type", "bridge", "forward_delay", "0", "stp_state", "0"])
    # No router solicitations or DAD from the bridge itself.
    sysctl = ["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"]
    run([*(["ip", "netns", "exec", ns] if ns else []), *sysctl])


def _offloads_off(dev: str, ns: str) -> None:
    for f in OFFLOADS:  # one at a time: veth refuses some on some kernels
        why_not(["ip", "netns", "exec", ns, "ethtool", "-K", dev, f, "off"])


class KernelBridge:
    """sq-c1 and sq-s1 in one Linux bridge (no STP, forward delay 0)."""

    name = "kernel-bridge"

    def __init__(self, ends: tuple[str, str] = (CLIENT_END, SERVER_END), bridge: str = "sqbr0"):
        self.ends = ends
        self.bridge = bridge

    def unavailable(self) -> str | None:
        if why := not_root() or missing_tool("ip", "iproute2"):
            return why
        probe = "sqbrprobe0"
        why_not(["ip", "link", "del", probe])  # a leftover of an interrupted probe
        if why := why_not(["ip", "link", "add", probe, "type", "bridge"]):
            return why
        return why_not(["ip", "link", "del", probe])

    def start(self) -> None:
        self.stop()  # a bridge left by an interrupted run
        for end in self.ends:
            require_free_end(end)
        try:
            _bridge_add(self.bridge)
            for end in self.ends:
                run(["ip", "link", "set", "dev", end, "master", self.bridge])
            run(["ip", "link", "set", "dev", self.bridge, "up"])
            wait_until(
                lambda: bridge_ready(self.bridge, self.ends),
                READY_TIMEOUT_S,
                f"bridge {self.bridge}",
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        # Deleting the bridge releases its members; they stay up, with no master.
        if link(self.bridge) is not None:
            run(["ip", "link", "del", "dev", self.bridge])


NFT_RULESET = """\
table bridge squall_fw {{
    chain forward {{
        type filter hook forward priority filter; policy drop;
        ether type arp counter accept
        ip saddr {net} ip daddr {net} ip protocol icmp counter accept
        ip saddr {net} ip daddr {net} ip protocol tcp counter accept
        ip saddr {net} ip daddr {net} ip protocol udp counter accept
        counter drop
    }}
}}
"""


class KernelNftChain:
    """Three forwarding namespaces in a row, each a bridge with an nftables firewall."""

    name = "kernel-nft-chain"

    def __init__(
        self,
        ends: tuple[str, str] = (CLIENT_END, SERVER_END),
        namespaces: tuple[str, str, str] = ("sqfw1", "sqfw2", "sqfw3"),
        subnet: str = SUBNET,
    ):
        self.ends = ends
        self.namespaces = namespaces
        self.ruleset = NFT_RULESET.format(net=subnet)
        # End -> (was up, had IPv6 disabled), recorded by start for stop.
        self._saved: dict[str, tuple[bool, bool]] = {}

    def _home(self, end: str) -> str:
        """The namespace an end lives in during the run."""
        return self.namespaces[0] if end == self.ends[0] else self.namespaces[-1]

    def _ports(self, i: int) -> list[str]:
        """Bridge members in namespace i: the end or the veth to each neighbour."""
        ports = [self.ends[0]] if i == 0 else [f"{self.namespaces[i]}a"]
        ports.append(self.ends[1] if i == len(self.namespaces) - 1 else f"{self.namespaces[i]}b")
        return ports

    def unavailable(self) -> str | None:
        if why := not_root() or missing_tool("ip", "iproute2") or missing_tool("nft", "nftables"):
            return why
        # A check-only transaction: the kernel validates the ruleset, nothing is loaded.
        return why_not(["nft", "--check", "-f", "-"], stdin=self.ruleset)

    def start(self) -> None:
        self.stop()  # namespaces left by an interrupted run
        infos = {end: require_free_end(end) for end in self.ends}
        self._saved = {
            end: ("UP" in info.get("flags", []), ipv6_disabled(end) is not False)
            for end, info in infos.items()
        }
        mtu = str(infos[self.ends[0]].get("mtu", 1500))
        try:
            self._build(mtu)
        except BaseException:
            self.stop()
            raise

    def _build(self, mtu: str) -> None:
        for ns in self.namespaces:
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            # Nothing here speaks IPv6; the bridge-family rules are the only
            # netfilter hooks (no br_netfilter detour through the IPv4 hooks).
            run(
                [
                    *("ip", "netns", "exec", ns, "sysctl", "-qw"),
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                    "net.bridge.bridge-nf-call-iptables=0",
                    "net.bridge.bridge-nf-call-ip6tables=0",
                    "net.bridge.bridge-nf-call-arptables=0",
                ]
            )
        for left, right in zip(self.namespaces, self.namespaces[1:], strict=False):
            a, b = f"{left}b", f"{right}a"
            # One queue per end, as netns.sh makes them.
            one_queue = ["mtu", mtu, "numtxqueues", "1", "numrxqueues", "1"]
            run(
                ["ip", "-n", left, "link", "add", a, *one_queue, "type", "veth"]
                + ["peer", "name", b, *one_queue, "netns", right]
            )
            _offloads_off(a, left)
            _offloads_off(b, right)
        for end in self.ends:
            run(["ip", "link", "set", "dev", end, "netns", self._home(end)])
        for i, ns in enumerate(self.namespaces):
            _bridge_add("br0", ns)
            for port in self._ports(i):
                run(["ip", "-n", ns, "link", "set", "dev", port, "master", "br0"])
                run(["ip", "-n", ns, "link", "set", "dev", port, "up"])
            run(["ip", "netns", "exec", ns, "nft", "-f", "-"], stdin=self.ruleset)
            run(["ip", "-n", ns, "link", "set", "dev", "br0", "up"])
        for i, ns in enumerate(self.namespaces):
            ready = partial(bridge_ready, "br0", self._ports(i), ns)
            wait_until(ready, READY_TIMEOUT_S, f"bridge br0 in ns {ns}")

    def stop(self) -> None:
        errors: list[str] = []
        for end in self.ends:
            ns = self._home(end)
            if not ns_exists(ns) or link(end, ns) is None:
                continue  # never moved, or gone with its namespace
            was_up, no_ipv6 = self._saved.get(end, (True, True))
            try:
                run(["ip", "-n", ns, "link", "set", "dev", end, "nomaster"])
                # Back to the namespace this process runs in (where start found it).
                run(["ip", "-n", ns, "link", "set", "dev", end, "netns", str(os.getpid())])
                # A moved device gets the namespace's default IPv6 settings:
                # restore them before it comes up, so it sends nothing.
                run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6={int(no_ipv6)}"])
                if was_up:
                    run(["ip", "link", "set", "dev", end, "up"])
            except PeerError as e:
                errors.append(str(e))
        for ns in self.namespaces:
            if ns_exists(ns):
                try:
                    run(["ip", "netns", "del", ns])
                except PeerError as e:
                    errors.append(str(e))
        self._saved = {}
        if errors:
            raise PeerError(f"{self.name} stop: " + "; ".join(errors))
