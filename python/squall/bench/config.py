"""squall-mgr configs for experiments: YAML writing and the standard NFs.

The standard NFs are configured as seed 002 §3.3 does: the L3 forwarder with
10 routes, the firewall with 10 rules; the generator's packets (UDP from
10.1.x.y to 10.2.0.1, destination port 9) match the last route and the last
rule, so every packet pays for a full lookup or a full rule scan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# Ports for Mpps experiments: the generator's packets enter as if received on
# "in"; "out" discards what it is given (net_null, no rx).
GEN_PORT = {"name": "in", "devargs": "net_null0,no-rx=1"}
OUT_PORT = {"name": "out", "devargs": "net_null1,no-rx=1"}
OUT_PORT_INDEX = 1

# seed 002 §3.3: "we insert 10 entries to the routing table". 10.2.0.1 (the
# generator's destination) matches 10.0.0.0/8 and, longer, 10.2.0.0/16.
L3FWD_OTHER_ROUTES = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "192.168.1.0/24",
    "198.18.0.0/15",
    "203.0.113.0/24",
    "10.3.0.0/16",
    "10.2.128.0/17",
    "100.64.0.0/10",
]
L3FWD_MATCH_ROUTE = "10.2.0.0/16"

# seed 002 §3.3: "we use 10 rules to filter packets". None of the first nine
# matches the generator's packets (some nearly do); the tenth allows them.
FIREWALL_RULES = [
    "deny,src=192.168.0.0/16",
    "deny,src=172.16.0.0/12",
    "deny,proto=tcp,dport=22",
    "deny,proto=tcp,dport=23",
    "deny,dst=10.2.0.0/16,proto=udp,dport=53",
    "deny,dst=10.2.0.0/16,proto=udp,dport=137-139",
    "deny,src=10.1.0.0/16,proto=tcp",
    "deny,dst=10.3.0.0/16",
    "deny,src=0.0.0.0/8",
    "allow,dst=10.2.0.0/16,proto=udp",
]


@dataclass
class Service:
    """One services[] entry; None fields keep the manager's default."""

    name: str
    exec: str
    args: list[str] = field(default_factory=list)
    mode: str = "sleep"
    instances: int = 1
    burst_max: int | None = None
    spin_us: int | None = None
    ring_slots: int | None = None
    batch_budget_pkts: int | None = None
    wake: dict[str, Any] | None = None  # {policy: min|fixed|adaptive, thresh_pkts, timeout_us}
    pool_idle: int | None = None  # per-flow services (docs/config.md)
    pool_fallback: str | None = None
    pool_queue_pkts: int | None = None
    nice: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "exec": self.exec, "mode": self.mode}
        if self.args:
            d["args"] = list(self.args)
        if self.instances != 1:
            d["instances"] = self.instances
        for k in (
            "burst_max",
            "spin_us",
            "ring_slots",
            "batch_budget_pkts",
            "pool_idle",
            "pool_fallback",
            "pool_queue_pkts",
            "nice",
        ):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.wake:
            d["wake"] = dict(self.wake)
        return d


NF_KINDS = ("fwd", "l3fwd", "firewall", "noop", "conntrack", "nat", "lb", "dpi")

# squall-nf-dpi --rules for benchmarks: 10 rules, as the firewall has 10, of
# the kinds an IDS carries (literals, case-insensitive, classes, anchors).
# None matches what the generator sends (its payloads are the zeros of fresh
# buffers, or the bytes of earlier frames' headers), so no flow is dropped or
# tagged and every payload is scanned to its end.
DPI_RULES = r"""# squall-bench: rules that match nothing in generated traffic
1 drop /evil-payload/i
2 drop /X5O!P%@AP\[4\\PZX54\(P\^\)7CC\)7\}\$EICAR/
3 tag /^GET \/admin\//
4 drop /cmd\.exe/i
5 drop /\/etc\/passwd/
6 drop /union\s+select/i
7 tag /User-Agent: sqlmap/i
8 drop /<script>alert\(/i
9 tag /BitTorrent protocol/
10 drop /wget\s+http:\/\/[a-z0-9.]+\/[a-z]+\.sh/i
"""
DPI_RULES_FILE = "dpi-nomatch.rules"


def dpi_rules(workdir: Path) -> Path:
    """DPI_RULES written in workdir (which NFs may read: the runner makes it
    0711), for squall-nf-dpi --rules."""
    path = workdir / DPI_RULES_FILE
    if not path.exists():
        path.write_text(DPI_RULES)
        path.chmod(0o644)
    return path


def nf_service(
    kind: str,
    name: str | None = None,
    *,
    out: int | None = None,
    workdir: Path | None = None,
    **kw: Any,
) -> Service:
    """A standard NF. out: l3fwd's matching route sends to this port index
    (sq_out), else on along the chain ("next"). workdir: where an NF's file
    (dpi's rules) is written; needed for dpi."""
    name = name or kind
    if kind == "fwd":
        return Service(name, "squall-nf-fwd", **kw)
    if kind == "noop":
        return Service(name, "squall-nf-noop", **kw)
    if kind == "l3fwd":
        other = [f"--route={r}=0" for r in L3FWD_OTHER_ROUTES]
        hop = "next" if out is None else str(out)
        return Service(
            name, "squall-nf-l3fwd", [*other, f"--route={L3FWD_MATCH_ROUTE}={hop}"], **kw
        )
    if kind == "firewall":
        # --non-ipv4=allow: ARP between the kernel peers must pass (the NF denies
        # what its IPv4 rules cannot judge by default).
        rules = [f"--rule={r}" for r in FIREWALL_RULES]
        return Service(name, "squall-nf-firewall", [*rules, "--non-ipv4=allow"], **kw)
    # Stateful NFs (docs/nf-api.md "Stateful NFs"): the generator's flows are
    # UDP from 10.0.0.0/8, so conntrack commits each flow's first packet and
    # tracks the rest, nat SNATs every flow, lb balances none (not its VIP)
    # but looks each packet up.
    if kind == "conntrack":
        return Service(name, "squall-nf-conntrack", [], **kw)
    if kind == "nat":
        return Service(name, "squall-nf-nat", ["--snat=0.0.0.0/0=192.0.2.1"], **kw)
    if kind == "lb":
        return Service(
            name, "squall-nf-lb", ["--vip=udp:192.0.2.80:80", "--backend=10.1.0.1:80"], **kw
        )
    if kind == "dpi":
        if workdir is None:
            raise ValueError("the dpi NF needs workdir= for its rules file")
        return Service(name, "squall-nf-dpi", ["--rules", str(dpi_rules(workdir))], **kw)
    raise ValueError(f"unknown NF kind {kind!r}: one of {', '.join(NF_KINDS)}")


def paper_chain(length: int) -> list[str]:
    """seed 002 §4.3's chains: 1 = L3FWD; 2 = firewall, L3FWD; 3 = firewall,
    L3FWD, L2FWD; longer ones add more L2 forwarders."""
    if length < 1:
        raise ValueError("a chain has at least one NF")
    if length == 1:
        return ["l3fwd"]
    return ["firewall", "l3fwd"] + ["fwd"] * (length - 2)


def generator(
    sizes: Sequence[int], flows: int = 1024, rate_pps: int = 0, port: str = "in"
) -> dict[str, Any]:
    return {"port": port, "rate_pps": rate_pps, "sizes": list(sizes), "flows": flows}


def manager_config(
    name: str,
    *,
    ports: Sequence[dict[str, Any]],
    services: Sequence[Service],
    chains: Sequence[dict[str, Any]],
    rules: Sequence[dict[str, Any]],
    gen: dict[str, Any] | None = None,
    **manager: Any,
) -> dict[str, Any]:
    """A full config; manager keys default to manager on core 0, NFs on core 1."""
    mgr: dict[str, Any] = {
        "name": name,
        "region_mb": 256,
        "mbufs": 16383,
        "stats_interval_ms": 0,
        "nf_core": 1,
    }
    mgr.update(manager)
    cfg: dict[str, Any] = {
        "manager": mgr,
        "ports": list(ports),
        "services": [s.to_dict() for s in services],
        "chains": list(chains),
        "rules": list(rules),
    }
    if gen is not None:
        cfg["generator"] = gen
    return cfg


# ------------------------------------------------------------------ YAML


def to_yaml(obj: dict[str, Any]) -> str:
    """Block-style YAML in the config's key order. PyYAML quotes any string
    that YAML could read as another type (a MAC like 10:20:30:40:50:59)."""
    return yaml.safe_dump(obj, default_flow_style=False, sort_keys=False)


def per_flow_noop(
    name: str, pool: int, conns: int, pkts_per_conn: int = 4, **manager: Any
) -> dict[str, Any]:
    """A per-flow service of `pool` no-op NFs (no spin, so each packet that
    finds its NF asleep costs a wake) fed by the generator's short TCP
    connections, `conns` open at once; flows end as soon as their NF is done
    (linger 0). Issue 4's activation experiments."""
    svc = Service("nf", "squall-nf-noop", instances=pool, ring_slots=64, spin_us=0)
    return tcp_conns_config(name, svc, conns, pkts_per_conn, "per-flow", **manager)


def tcp_conns_config(
    name: str,
    svc: Service,
    conns: int,
    pkts_per_conn: int,
    assign: str,
    staggered: bool = False,
    **manager: Any,
) -> dict[str, Any]:
    """One service between the generator's short TCP connections (`conns`
    open at once, `pkts_per_conn` packets each; staggered: new ones at an
    even rate) and a net_null sink, flows spread by `assign`; flows end as
    soon as their NF is done (linger 0)."""
    manager = {"flow_linger_ms": 0, "max_flows": 65536, "region_mb": 256, **manager}
    cfg = manager_config(
        name,
        ports=[GEN_PORT, OUT_PORT],
        services=[svc],
        chains=[{"name": "c", "services": [svc.name]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out", "assign": assign}],
        gen=generator([64], flows=conns, rate_pps=0),
        **manager,
    )
    cfg["generator"]["tcp_flow_pkts"] = pkts_per_conn
    if staggered:
        cfg["generator"]["tcp_start"] = "staggered"
    return cfg
