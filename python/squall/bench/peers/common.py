"""What every peer shares: the Peer protocol, the test topology's names, and
bounded helpers to run commands and inspect links.

The topology is scripts/netns.sh's: ns client (sq-c0, 10.77.0.1) and ns server
(sq-s0, 10.77.0.2), whose veth peers sq-c1 and sq-s1 sit in the root namespace
with no address. Squall's ports are those two root-side ends; a peer joins the
same two ends so client and server talk through it.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

CLIENT_END = "sq-c1"
SERVER_END = "sq-s1"
SUBNET = "10.77.0.0/24"

CMD_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 10.0
POLL_S = 0.05
EXIT_TIMEOUT_S = 10.0


class PeerError(RuntimeError):
    """A peer could not start or stop; the message names the command and its error."""


@runtime_checkable
class Peer(Protocol):
    name: str

    def unavailable(self) -> str | None:
        """None if the peer can run here, else exactly why not."""
        ...

    def start(self) -> None:
        """Join ns client and ns server (netns.sh up has run). Raises PeerError."""
        ...

    def stop(self) -> None:
        """Undo everything start did; idempotent, also after a failed start."""
        ...


def run(
    cmd: Sequence[str],
    *,
    timeout: float = CMD_TIMEOUT_S,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run cmd; return its stdout. Any failure raises PeerError naming the command."""
    shown = shlex.join(cmd)
    try:
        r = subprocess.run(
            list(cmd),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=None if env is None else {**os.environ, **env},
            check=False,
        )
    except FileNotFoundError:
        raise PeerError(f"`{shown}`: {cmd[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise PeerError(f"`{shown}` timed out after {timeout:g} s") from None
    if r.returncode != 0:
        err = (r.stderr.strip() or r.stdout.strip() or "(no output)").splitlines()
        raise PeerError(f"`{shown}` exited {r.returncode}: " + " | ".join(err[-5:]))
    return r.stdout


def why_not(cmd: Sequence[str], **kw: Any) -> str | None:
    """None if cmd succeeds, else the PeerError text (for unavailable())."""
    try:
        run(cmd, **kw)
    except PeerError as e:
        return str(e)
    return None


def not_root() -> str | None:
    if os.geteuid() != 0:
        return f"needs root (running as uid {os.geteuid()})"
    return None


def missing_tool(prog: str, package: str) -> str | None:
    if shutil.which(prog) is None:
        return f"{prog} not found in PATH: install Debian package {package} (scripts/setup.sh)"
    return None


def link(dev: str, ns: str | None = None) -> dict[str, Any] | None:
    """`ip -j -d link show dev` as a dict, or None if there is no such device."""
    cmd = ["ip", *(["-n", ns] if ns else []), "-j", "-d", "link", "show", "dev", dev]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=CMD_TIMEOUT_S, check=False)
    if r.returncode != 0:
        return None
    links: list[dict[str, Any]] = json.loads(r.stdout)
    return links[0] if links else None


def ns_exists(ns: str) -> bool:
    return os.path.exists(f"/run/netns/{ns}")


def ipv6_disabled(dev: str) -> bool | None:
    """net.ipv6.conf.DEV.disable_ipv6 in this namespace; None if unknown."""
    try:
        with open(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6") as f:
            return f.read().strip() == "1"
    except OSError:
        return None


def require_free_end(dev: str) -> dict[str, Any]:
    """The end's link info; PeerError if it is missing or already in use."""
    info = link(dev)
    if info is None:
        raise PeerError(f"{dev} not found in this namespace: run scripts/netns.sh up first")
    if "master" in info:
        raise PeerError(f"{dev} is already a member of {info['master']}")
    if "xdp" in info:
        raise PeerError(f"{dev} already has an XDP program attached (is squall-mgr running?)")
    return info


def bridge_ready(bridge: str, ports: Sequence[str], ns: str | None = None) -> str | None:
    """None when bridge and every port are up and forwarding, else what is not."""
    br = link(bridge, ns)
    if br is None or br.get("operstate") != "UP":
        return f"{bridge}: {br.get('operstate') if br else 'missing'}"
    for p in ports:
        info = link(p, ns)
        if info is None:
            return f"{p}: missing"
        state = info.get("linkinfo", {}).get("info_slave_data", {}).get("state")
        if info.get("operstate") != "UP" or state != "forwarding":
            return f"{p}: operstate {info.get('operstate')}, bridge port state {state}"
    return None


def wait_until(check: Callable[[], str | None], timeout: float, what: str) -> None:
    """Poll check (None = done, else what is still missing) for at most timeout s."""
    deadline = time.monotonic() + timeout
    while (missing := check()) is not None:
        if time.monotonic() > deadline:
            raise PeerError(f"{what} not ready after {timeout:g} s: {missing}")
        time.sleep(POLL_S)


def die_with_parent() -> None:
    """In the child: SIGTERM when the harness dies, so no switch outlives it."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def hugepages_free_mib() -> tuple[int, str]:
    """Free default-size hugepages in MiB, and the /proc/meminfo lines it came from."""
    info = dict(
        line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line
    )
    free = int(info.get("HugePages_Free", "0").strip())
    size_kb = int(info.get("Hugepagesize", "0 kB").split()[0])
    return free * size_kb // 1024, f"HugePages_Free: {free}, Hugepagesize: {size_kb} kB"


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """Wait (bounded) for proc to exit, then SIGTERM, then SIGKILL."""
    if proc is None:
        return
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None and proc.poll() is None:
            proc.send_signal(sig)
        try:
            proc.wait(timeout=EXIT_TIMEOUT_S / 2)
            return
        except subprocess.TimeoutExpired:
            continue


def save_end(end: str) -> dict[str, Any]:
    """What restore_ends puts back: the free end's flags and ifindex
    (PeerError if it is missing or in use)."""
    info = require_free_end(end)
    return {"flags": set(info.get("flags", [])), "ifindex": info["ifindex"]}


def restore_ends(saved: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Put back what a DPDK process changed on the ends (saved by save_end):
    promiscuous mode, XDP, up. @return the fixes that failed."""
    errors = []
    for end, was in saved.items():
        now = link(end)
        if now is None or now["ifindex"] != was["ifindex"]:
            continue  # gone, or recreated since (netns.sh down/up)
        flags = set(now.get("flags", []))
        fixes: list[list[str]] = []
        if "xdp" in now:
            fixes.append(["ip", "link", "set", "dev", end, "xdp", "off"])
        if "PROMISC" in flags and "PROMISC" not in was["flags"]:
            fixes.append(["ip", "link", "set", "dev", end, "promisc", "off"])
        if "UP" in was["flags"] and "UP" not in flags:
            fixes.append(["ip", "link", "set", "dev", end, "up"])
        for fix in fixes:
            if why := why_not(fix):
                errors.append(why)
        # libxdp's dispatcher pins, if it managed to load one for this end.
        for pin in Path("/sys/fs/bpf/xdp").glob(f"dispatch-{was['ifindex']}-*"):
            shutil.rmtree(pin, ignore_errors=True)
    return errors


# ------------------------------------------------------------------ stateful peers

CLIENT_NS, SERVER_NS = "client", "server"
CLIENT_IP, SERVER_IP = "10.77.0.1", "10.77.0.2"
CLIENT_DEV, SERVER_DEV = "sq-c0", "sq-s0"
# The stateful peers' and Squall's conntrack allow new connections from the
# client to these server ports (iperf3, the benchmarks' HTTP server) and ICMP
# echo; anything else new is dropped, established and related pass.
ALLOWED_TCP_PORTS = (5201, 8080)
# The address SNAT gives the client's connections on the server side: the
# server reaches it at the client's MAC (a static neighbour, as a router's
# gateway address would be learned), so an L2 path (Squall, OVS) carries it
# as a routed one (the kernel's, which owns the address) does.
SNAT_IP = "10.77.0.254"


def mac_of(dev: str, ns: str) -> str:
    info = link(dev, ns)
    if info is None or "address" not in info:
        raise PeerError(f"{dev} not found in ns {ns}: run scripts/netns.sh up first")
    return str(info["address"])


def snat_neighbour(on: bool) -> None:
    """In ns server, SNAT_IP at the client's MAC (on), or no such entry."""
    if on:
        mac = mac_of(CLIENT_DEV, CLIENT_NS)
        run(["ip", "-n", SERVER_NS, "neigh", "replace", SNAT_IP, "lladdr", mac, "nud",
             "permanent", "dev", SERVER_DEV])  # fmt: skip
    elif ns_exists(SERVER_NS) and link(SERVER_DEV, SERVER_NS) is not None:
        why_not(["ip", "-n", SERVER_NS, "neigh", "del", SNAT_IP, "dev", SERVER_DEV])
