"""Throughput and latency against chain length: 1, 2, 3, 10 and 50 NFs.
Seed 002 §4.3 (Fig. 3) and §5.2 (Fig. 6)."""

from __future__ import annotations

from typing import Any

from squall.bench import chains, config, mixes
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded
from squall.bench.method import Method, Point, measure_point

LENGTHS = [1, 2, 3, 10, 50]


def make_cfg(setup: chains.ChainSetup, mix: mixes.Mix, flows: int) -> Any:
    def cfg(name: str) -> dict[str, Any]:
        return config.manager_config(
            name,
            ports=setup.ports,
            services=setup.services,
            chains=setup.chains,
            rules=setup.rules,
            gen=config.generator(mix.sizes, flows),
        )

    return cfg


def run(ctx: Context) -> None:
    lengths = ctx.param("lengths", LENGTHS)
    size = ctx.param("size", "64b")
    flows = ctx.param("flows", 1024)
    mode = ctx.param("mode", "sleep")
    direct = bool(ctx.param("direct", False))
    mix = mixes.by_name(size)
    method = Method.from_ctx(ctx)
    hops = chains.max_hops(ctx.workdir, ctx.manager_name(), max(lengths))
    points: dict[int, Point] = {}
    for n in lengths:
        setup = chains.build(config.paper_chain(n), hops, mode=mode, direct=direct)
        if setup.segments > 1:
            ctx.note(
                f"{n} NFs: squall-mgr takes {hops} hops per chain, so the path is "
                f"{setup.segments} chains joined by net_ring loopback ports; latency is the "
                "sum of the segments' (quantiles: an upper bound)."
            )
        points[n] = measure_point(
            ctx,
            f"{n} NF",
            make_cfg(setup, mix, flows),
            setup.chain_names,
            method,
            nfs=n,
            kinds=setup.kinds,
            segments=setup.segments,
        )

    for n, pt in points.items():
        ctx.summary[f"mpps_ndr_{n}nf_{size}"] = rounded(pt.mpps("ndr")["median"])
        ctx.summary[f"mpps_pdr_{n}nf_{size}"] = rounded(pt.mpps("pdr")["median"])
        if 0.5 in pt.latency:
            ctx.summary[f"p50_us_{n}nf_half_pdr"] = rounded(pt.lat_us(0.5)["median"], 2)
            ctx.summary[f"p99_us_{n}nf_half_pdr"] = rounded(pt.lat_us(0.5, "p99_ns")["median"], 2)
    first = lengths[0]
    base = points[first].mpps("pdr")["median"]
    if base > 0:
        # (issue 17: any stall of the NF core overflows a ring at rates far
        # below the PDR, so no-loss rates sit far below it)
        ctx.summary[f"ratio_ndr_vs_pdr_{first}nf"] = rounded(
            points[first].mpps("ndr")["median"] / base
        )
    for n in lengths[1:]:
        if base > 0:
            ctx.summary[f"ratio_{n}nf_vs_{first}nf_pdr"] = rounded(
                points[n].mpps("pdr")["median"] / base
            )

    xs = list(lengths)
    ser = []
    for which, style in (("pdr", "-o"), ("ndr", ":s")):
        sp = [points[n].mpps(which) for n in lengths]
        ser.append(
            Series(
                f"Squall, {which.upper()}",
                xs,
                [s["median"] for s in sp],
                [s["min"] for s in sp],
                [s["max"] for s in sp],
                style,
            )
        )
    ctx.figure(
        Figure(
            "throughput",
            f"Throughput against chain length ({mix.label} frames)",
            "NFs in the chain",
            "throughput (Mpps)",
            ser,
            xscale="log",
            yscale="log",
            caption=(
                "1 NF = L3 forwarder; 2 = firewall, L3 forwarder; 3 = + L2 forwarder; "
                "longer chains add L2 forwarders. Every NF sleeps when idle, all on core 1."
            ),
        )
    )
    if all(0.5 in points[n].latency for n in lengths):
        ser = []
        for frac in method.lat_fracs:
            for q, style in (("p50_ns", "-o"), ("p99_ns", "--^")):
                sp = [points[n].lat_us(frac, q) for n in lengths]
                ser.append(
                    Series(
                        f"{q[:3]} at {frac:.0%} of PDR",
                        xs,
                        [s["median"] for s in sp],
                        [s["min"] for s in sp],
                        [s["max"] for s in sp],
                        style,
                    )
                )
        ctx.figure(
            Figure(
                "latency",
                "rx-to-tx latency against chain length, at fractions of each chain's PDR",
                "NFs in the chain",
                "latency (us)",
                ser,
                xscale="log",
                yscale="log",
            )
        )
    ctx.note(
        "The generator runs on the manager's core (core 0) with rx and tx; all NFs share core 1."
    )


EXPERIMENT = Experiment(
    name="chain_length",
    title="Chains of 1, 2, 3, 10 and 50 NFs: throughput and latency",
    seed="seed 002 §4.3, Fig. 3, and §5.2, Fig. 6 (latency at fractions of PDR)",
    about=(
        "Chains as in the seed: 1 NF = L3 forwarder, 2 = firewall then L3 forwarder, "
        "3 = the same then an L2 forwarder; 10 and 50 add L2 forwarders. All NFs sleep when "
        "idle and share core 1. NDR and PDR by rate search with 64 B frames over 1024 flows, "
        "then rx-to-tx latency at 10%, 50% and 90% of each chain's PDR; 3 repetitions."
    ),
    run=run,
    summary_keys=tuple(
        k
        for n in LENGTHS
        for k in (f"mpps_ndr_{n}nf_64b", f"mpps_pdr_{n}nf_64b", f"p50_us_{n}nf_half_pdr")
    ),
    full_minutes=25,
)
