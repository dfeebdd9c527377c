"""Systems an experiment runs side by side on the test namespaces' two ends
(sq-c1, sq-s1): Squall, and the peers of squall.bench.peers when that
package is there. Squall implements the same Peer protocol:

    name: str
    unavailable() -> str | None   # None if it can run here, else exactly why not
    start() -> None               # joins ns client and ns server (netns.sh up has run)
    stop() -> None
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from squall.bench import config, netns
from squall.bench.manager import BenchError, Manager
from squall.bench.paths import MGR_BIN

CLIENT_END, SERVER_END = "sq-c1", "sq-s1"


class System(Protocol):
    name: str

    def unavailable(self) -> str | None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


# The path's two directions, for the L3 forwarder: the client's and the
# server's addresses leave by their own port (0 = client, 1 = server).
NETNS_ROUTES = ["--route=10.77.0.1/32=0", "--route=10.77.0.2/32=1"]


class Squall:
    """squall-mgr bridging sq-c1 and sq-s1 through a chain of NFs, both
    directions through the same chain (examples/demo.yaml's layout)."""

    def __init__(
        self,
        workdir: Path,
        mgr_name: str,
        kinds: Sequence[str] = ("fwd",),
        *,
        name: str = "squall",
        port_kind: str = "af_packet",
        mode: str = "sleep",
        xdp_args: str = "",
        direct: bool = False,
        manager: dict[str, Any] | None = None,
        services: Sequence[config.Service] | None = None,
        reverse_return: bool = False,
        snat_neighbour: bool = False,
        rx_desc: int | None = None,
        service_keys: dict[str, Any] | None = None,
    ) -> None:
        """services: the chain's services as given, in place of kinds';
        service_keys: set on every service (config.Service fields: nice, spin_us);
        reverse_return: the server's packets pass the chain the other way
        round (a NAT before a conntrack, as each expects its own tuples);
        snat_neighbour: ns server reaches peers.SNAT_IP at the client's MAC
        while the system runs (a chain that SNATs the client to it)."""
        self.name = name
        self.workdir = workdir
        self.mgr_name = mgr_name
        self.services = list(services) if services is not None else None
        self.kinds = [s.name for s in services] if services is not None else list(kinds)
        self.port_kind = port_kind
        self.mode = mode
        self.xdp_args = xdp_args  # appended to the af_xdp devargs: ",busy_budget=0"
        self.direct = direct  # a direct chain (NF to NF, mgr/lane.h)
        self.manager_keys = dict(manager or {})  # manager: keys over the defaults
        self.reverse_return = reverse_return
        self.snat_neighbour = snat_neighbour
        self.rx_desc = rx_desc  # each port's rx ring; None: the manager's default
        self.service_keys = dict(service_keys or {})
        self.manager: Manager | None = None

    def describe(self) -> str:
        extra = [
            *([self.xdp_args.lstrip(",")] if self.xdp_args else []),
            *(["direct"] if self.direct else []),
            *([f"rx_desc={self.rx_desc}"] if self.rx_desc else []),
            *(f"services' {k} {v}" for k, v in self.service_keys.items()),
            *(f"{k}={v}" for k, v in self.manager_keys.items()),
        ]
        return (
            f"squall-mgr, {self.port_kind} ports, chain {' -> '.join(self.kinds)} ({self.mode}"
            + "".join(f", {e}" for e in extra)
            + ")"
        )

    def config(self) -> dict[str, Any]:
        def devargs(i: int, iface: str) -> list[str]:
            xdp = f"net_af_xdp{i},iface={iface},start_queue=0,queue_count=1{self.xdp_args}"
            pkt = f"net_af_packet{i},iface={iface}"
            return [xdp, pkt] if self.port_kind == "af_xdp" else [pkt]

        services = []
        for i, k in enumerate(self.kinds):
            if self.services is not None:
                services.append(self.services[i])
            elif k == "l3fwd":
                services.append(
                    config.Service(f"s{i}", "squall-nf-l3fwd", list(NETNS_ROUTES), mode=self.mode)
                )
            else:
                services.append(config.nf_service(k, f"s{i}", mode=self.mode, workdir=self.workdir))
        if self.service_keys:
            services = [dataclasses.replace(s, **self.service_keys) for s in services]
        names = [s.name for s in services]
        back = "r" if self.reverse_return else "c"
        ring = {"rx_desc": self.rx_desc} if self.rx_desc else {}
        chains: list[dict[str, Any]] = [{"name": "c", "services": names}]
        if self.reverse_return:
            chains.append({"name": "r", "services": names[::-1]})
        if self.direct and len(names) > 1:
            for ch in chains:
                ch["direct"] = True
        return config.manager_config(
            self.mgr_name,
            ports=[
                {"name": "client", "devargs": devargs(0, CLIENT_END), **ring},
                {"name": "server", "devargs": devargs(1, SERVER_END), **ring},
            ],
            services=services,
            chains=chains,
            rules=[
                {"in_port": "client", "chain": "c", "out_port": "server"},
                {"in_port": "server", "chain": back, "out_port": "client"},
            ],
            **self.manager_keys,
        )

    def unavailable(self) -> str | None:
        return squall_unavailable()

    def start(self) -> None:
        self.stop()
        self.manager = Manager(self.workdir, self.config())
        self.manager.start()
        if self.snat_neighbour:
            from squall.bench.peers.common import snat_neighbour

            snat_neighbour(True)

    def stop(self) -> None:
        if self.snat_neighbour:
            from squall.bench.peers.common import snat_neighbour

            snat_neighbour(False)
        if self.manager is not None:
            self.manager.cleanup()
            self.manager = None


def squall_unavailable() -> str | None:
    """Why squall-mgr cannot join the namespaces here, or None."""
    if os.geteuid() != 0:
        return f"needs root (running as uid {os.geteuid()})"
    if not MGR_BIN.is_file():
        return f"{MGR_BIN} not found: run `make build`"
    return None


def require_netns(tools: Sequence[str]) -> None:
    """Raise BenchError unless squall-mgr can join the namespaces and the
    traffic tools are installed."""
    missing = netns.missing_tools(tools)
    if missing:
        raise BenchError(f"missing tools: {', '.join(missing)} (scripts/setup.sh installs them)")
    why = squall_unavailable()
    if why is not None:
        raise BenchError(why)


def flow_config(
    name: str,
    service: config.Service,
    assign: str,
    **manager: Any,
) -> dict[str, Any]:
    """squall-mgr between the namespaces with one service, both directions
    steered by `assign` (rss, spray, round-robin, per-flow); af_packet rings
    of 4,096 frames (docs/config.md's advice for real TCP on veth)."""
    return config.manager_config(
        name,
        ports=[
            {"name": "client", "devargs": f"net_af_packet0,iface={CLIENT_END}", "rx_desc": 4096},
            {"name": "server", "devargs": f"net_af_packet1,iface={SERVER_END}", "rx_desc": 4096},
        ],
        services=[service],
        chains=[{"name": "c", "services": [service.name]}],
        rules=[
            {"in_port": "client", "chain": "c", "out_port": "server", "assign": assign},
            {"in_port": "server", "chain": "c", "out_port": "client", "assign": assign},
        ],
        **manager,
    )


def peers() -> tuple[list[System], str | None]:
    """The peers, or none and why (the package is written in parallel and
    may be missing or broken: that must not stop Squall's own runs)."""
    try:
        from squall.bench.peers import all_peers
    except Exception as e:  # noqa: BLE001 - any import failure just means no peers
        return [], f"squall.bench.peers not importable: {type(e).__name__}: {e}"
    return list(all_peers()), None
