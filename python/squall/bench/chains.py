"""Chains of N NFs for experiments, also past the manager's hop limit.

squall-mgr takes up to SQ_MAX_HOPS (16) services per chain. A longer chain
is split into segments joined by net_ring ports: a net_ring port with no
arguments loops what it transmits back to its own rx, so segment k leaves by
ring port k and segment k+1 takes packets arriving on it. Every NF still
sees every packet once and in order; the manager does one extra tx and rx
per joint (on its own core), and latency is the sum of the segments'
histograms (mean exact up to the ring's queueing; quantiles an upper bound).
Whether the manager takes a long chain whole is asked with `squall-mgr
--check`, so a manager with a higher limit gets single chains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.bench import config
from squall.bench.manager import check_config

MAX_HOPS_DEFAULT = 16


@dataclass
class ChainSetup:
    services: list[config.Service]
    chains: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    ports: list[dict[str, Any]]
    chain_names: list[str]  # the segments, in path order
    kinds: list[str] = field(default_factory=list)

    @property
    def segments(self) -> int:
        return len(self.chain_names)


def build(
    kinds: Sequence[str],
    max_hops: int = MAX_HOPS_DEFAULT,
    *,
    in_port: dict[str, Any] = config.GEN_PORT,
    out_port: dict[str, Any] = config.OUT_PORT,
    direct: bool = False,
    **svc_kw: Any,
) -> ChainSetup:
    """NFs of the given kinds in a chain from in_port to out_port. svc_kw go to
    every service (mode, burst_max, spin_us, wake...); direct: each segment of
    two NFs or more is a direct chain (NF to NF, mgr/lane.h)."""
    services = [config.nf_service(k, f"s{i}", **svc_kw) for i, k in enumerate(kinds)]
    names = [s.name for s in services]
    segs = [names[i : i + max_hops] for i in range(0, len(names), max_hops)]
    rings = [{"name": f"j{k}", "devargs": f"net_ring{k}"} for k in range(len(segs) - 1)]
    ports = [in_port, out_port, *rings]
    chains, rules, chain_names = [], [], []
    for k, seg in enumerate(segs):
        cname = "c" if len(segs) == 1 else f"c{k}"
        src = in_port["name"] if k == 0 else rings[k - 1]["name"]
        dst = out_port["name"] if k == len(segs) - 1 else rings[k]["name"]
        chain: dict[str, Any] = {"name": cname, "services": seg}
        if direct and len(seg) > 1:
            chain["direct"] = True
        chains.append(chain)
        rules.append({"in_port": src, "chain": cname, "out_port": dst})
        chain_names.append(cname)
    return ChainSetup(services, chains, rules, ports, chain_names, list(kinds))


def max_hops(workdir: Path, name: str, want: int) -> int:
    """The most hops (up to want) squall-mgr accepts in one chain."""
    if want <= MAX_HOPS_DEFAULT:
        return MAX_HOPS_DEFAULT
    setup = build(["fwd"] * want, max_hops=want)
    cfg = config.manager_config(
        name,
        ports=setup.ports,
        services=setup.services,
        chains=setup.chains,
        rules=setup.rules,
    )
    return want if check_config(workdir, cfg) is None else MAX_HOPS_DEFAULT
