"""The Linux kernel path as a peer: a bridge, a chain of three nftables
firewalls, and a stateful firewall (with masquerade) on a router.

kernel-bridge     sq-c1 and sq-s1 as members of one bridge in the root namespace.
kernel-nft-chain  sq-c1 -> [sqfw1] -> [sqfw2] -> [sqfw3] -> sq-s1: three namespaces,
                  each a bridge whose forward hook runs an nftables (bridge family)
                  firewall, joined by veth pairs. L2, so client and server keep
                  their addresses. The two ends move into sqfw1 and sqfw3 for
                  the run and come back as they were (up, IPv6 off) on stop.
kernel-nft-ct     sq-c1 and sq-s1 in namespace sqct, a router (proxy ARP on both
                  ends, so client and server keep their /24) whose nftables
                  forward chain tracks connections: established and related
                  accepted, invalid dropped, new accepted from the client to the
                  allowed ports (and ICMP echo), the rest dropped.
kernel-nft-ct-nat the same with masquerade out of sq-s1: the server sees the
                  client's connections from the router's address there, SNAT_IP.

The root namespace keeps the machine's settings: where br_netfilter is loaded
(built in on the Firecracker kernel) net.bridge.bridge-nf-call-iptables=1 sends
kernel-bridge's IPv4 through the (empty) IPv4 netfilter hooks as well; the peer
leaves that as it is. The sqfw namespaces set it to 0: only the nft rules run.
"""

from __future__ import annotations

import os
from functools import partial

from .common import (
    ALLOWED_TCP_PORTS,
    CLIENT_END,
    CLIENT_IP,
    READY_TIMEOUT_S,
    SERVER_END,
    SERVER_IP,
    SNAT_IP,
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


def _return_end(end: str, ns: str, was_up: bool, no_ipv6: bool) -> None:
    """Move end from ns back to this process's namespace, as start found it."""
    run(["ip", "-n", ns, "link", "set", "dev", end, "netns", str(os.getpid())])
    # A moved device gets the namespace's default IPv6 settings (and loses
    # its addresses): restore them before it comes up, so it sends nothing.
    run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6={int(no_ipv6)}"])
    if was_up:
        run(["ip", "link", "set", "dev", end, "up"])


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
                _return_end(end, ns, was_up, no_ipv6)
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


NFT_CT_RULESET = """\
table inet squall_ct {{
    chain forward {{
        type filter hook forward priority filter; policy drop;
        ct state established,related counter accept
        ct state invalid counter drop
        iifname "{cend}" oifname "{send}" tcp dport {{ {ports} }} ct state new counter accept
        iifname "{cend}" oifname "{send}" icmp type echo-request ct state new counter accept
        counter drop
    }}
}}
"""

NFT_MASQUERADE = """\
table ip squall_nat {{
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        oifname "{send}" counter masquerade
    }}
}}
"""


class KernelNftCt:
    """A router namespace with an nftables stateful firewall (ct state), and
    with masquerade if nat."""

    def __init__(
        self,
        nat: bool = False,
        ends: tuple[str, str] = (CLIENT_END, SERVER_END),
        namespace: str = "sqct",
        allowed_tcp_ports: tuple[int, ...] = ALLOWED_TCP_PORTS,
    ):
        self.name = "kernel-nft-ct-nat" if nat else "kernel-nft-ct"
        self.nat = nat
        self.ends = ends
        self.ns = namespace
        cend, send = ends
        ports = ", ".join(str(p) for p in allowed_tcp_ports)
        self.ruleset = NFT_CT_RULESET.format(cend=cend, send=send, ports=ports)
        if nat:
            self.ruleset += NFT_MASQUERADE.format(send=send)
        self._saved: dict[str, tuple[bool, bool]] = {}

    def describe(self) -> str:
        what = "ct state firewall" + (" + masquerade" if self.nat else "")
        return f"Linux router in ns {self.ns}, nftables {what}"

    def unavailable(self) -> str | None:
        if why := not_root() or missing_tool("ip", "iproute2") or missing_tool("nft", "nftables"):
            return why
        # A check-only transaction: the kernel validates ct and masquerade
        # expressions (conntrack and NAT support), nothing is loaded.
        return why_not(["nft", "--check", "-f", "-"], stdin=self.ruleset)

    def counters(self) -> dict[str, int]:
        """Packets each rule of the ruleset counted (for the run's records)."""
        out = run(["ip", "netns", "exec", self.ns, "nft", "list", "ruleset"])
        found: dict[str, int] = {}
        for line in out.splitlines():
            rule, sep, rest = f" {line.strip()}".partition(" counter packets ")
            if sep:
                key = rule.strip() + " " + rest.split()[-1]  # the match and its verdict
                found[key] = found.get(key, 0) + int(rest.split()[0])
        return found

    def start(self) -> None:
        self.stop()
        infos = {end: require_free_end(end) for end in self.ends}
        self._saved = {
            end: ("UP" in info.get("flags", []), ipv6_disabled(end) is not False)
            for end, info in infos.items()
        }
        try:
            self._build()
        except BaseException:
            self.stop()
            raise

    def _build(self) -> None:
        ns = self.ns
        run(["ip", "netns", "add", ns])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(
            [
                *("ip", "netns", "exec", ns, "sysctl", "-qw"),
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
                "net.ipv4.ip_forward=1",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
                "net.ipv4.conf.all.send_redirects=0",
            ]
        )
        cend, send = self.ends
        # An address on each end (the server side's is what masquerade gives
        # the client's connections); /32, so the only routes are the hosts'.
        for end, addr, host in ((cend, "10.77.0.253", CLIENT_IP), (send, SNAT_IP, SERVER_IP)):
            run(["ip", "link", "set", "dev", end, "netns", ns])
            # Client and server think they share a /24: the router answers
            # each one's ARP for the other (proxy ARP) and routes between them.
            # (proxy_delay 0: else the first reply waits up to 0.8 s at random)
            run(
                ["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv4.conf.{end}.proxy_arp=1"]
                + [f"net.ipv4.neigh.{end}.proxy_delay=0"]
            )
            run(["ip", "-n", ns, "addr", "add", f"{addr}/32", "dev", end])
            run(["ip", "-n", ns, "link", "set", "dev", end, "up"])
            run(["ip", "-n", ns, "route", "add", f"{host}/32", "dev", end])
        run(["ip", "netns", "exec", ns, "nft", "-f", "-"], stdin=self.ruleset)

        def ends_up() -> str | None:
            for end in self.ends:
                info = link(end, ns)
                if info is None or info.get("operstate") != "UP":
                    return f"{end}: {info.get('operstate') if info else 'missing'}"
            return None

        wait_until(ends_up, READY_TIMEOUT_S, f"router ns {ns}")

    def stop(self) -> None:
        errors: list[str] = []
        for end in self.ends:
            if not ns_exists(self.ns) or link(end, self.ns) is None:
                continue  # never moved, or gone with its namespace
            was_up, no_ipv6 = self._saved.get(end, (True, True))
            try:
                _return_end(end, self.ns, was_up, no_ipv6)
            except PeerError as e:
                errors.append(str(e))
        if ns_exists(self.ns):
            try:
                run(["ip", "netns", "del", self.ns])
            except PeerError as e:
                errors.append(str(e))
        self._saved = {}
        if errors:
            raise PeerError(f"{self.name} stop: " + "; ".join(errors))
