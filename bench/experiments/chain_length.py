"""Throughput and latency against chain length: 1, 2, 3, 10 and 50 NFs, each
chain direct (NF to NF, mgr/lane.h) and through the manager at every hop.
Seed 002 §4.3 (Fig. 3) and §5.2 (Fig. 6); issue 17's chain figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from squall.bench import chains, config, mixes
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded
from squall.bench.method import Method, Point, measure_rep
from squall.bench.trial import gen_trial

LENGTHS = [1, 2, 3, 10, 50]
# "direct": chains of two NFs or more are direct chains; "manager": every
# hop goes through the manager (Squall before issue 17, and what isolated or
# per-flow services still do). The first is the plain figures' variant.
VARIANTS = ["direct", "manager"]
SUFFIX = {"direct": "", "manager": "_mgr"}


def make_cfg(setup: chains.ChainSetup, mix: mixes.Mix, flows: int, **manager: Any) -> Any:
    def cfg(name: str) -> dict[str, Any]:
        return config.manager_config(
            name,
            ports=setup.ports,
            services=setup.services,
            chains=setup.chains,
            rules=setup.rules,
            gen=config.generator(mix.sizes, flows),
            **manager,
        )

    return cfg


def summarize(
    ctx: Context, points: dict[tuple[str, int], Point], lengths: list[int], size: str
) -> None:
    for (variant, n), pt in points.items():
        sfx = SUFFIX.get(variant, f"_{variant}")
        ctx.summary[f"mpps_ndr_{n}nf_{size}{sfx}"] = rounded(pt.mpps("ndr")["median"])
        ctx.summary[f"mpps_pdr_{n}nf_{size}{sfx}"] = rounded(pt.mpps("pdr")["median"])
        if 0.5 in pt.latency:
            ctx.summary[f"p50_us_{n}nf_half_pdr{sfx}"] = rounded(pt.lat_us(0.5)["median"], 2)
            ctx.summary[f"p99_us_{n}nf_half_pdr{sfx}"] = rounded(
                pt.lat_us(0.5, "p99_ns")["median"], 2
            )
    first = lengths[0]
    one = points[(VARIANTS[0], first)]
    base = one.mpps("pdr")["median"]
    if base <= 0:
        return
    # (any stall of the NF core overflows a ring at rates far below the PDR)
    ctx.summary[f"ratio_ndr_vs_pdr_{first}nf"] = rounded(one.mpps("ndr")["median"] / base)
    for (variant, n), pt in points.items():
        if n != first and variant in SUFFIX:
            ctx.summary[f"ratio_{n}nf_vs_{first}nf_pdr{SUFFIX[variant]}"] = rounded(
                pt.mpps("pdr")["median"] / base
            )
    if ("backpressure", first) in points:
        bp = points[("backpressure", first)]
        bp_pdr = bp.mpps("pdr")["median"]
        if bp_pdr > 0:
            ctx.summary[f"ratio_ndr_vs_pdr_{first}nf_backpressure"] = rounded(
                bp.mpps("ndr")["median"] / bp_pdr
            )
        ctx.summary[f"ratio_{first}nf_pdr_backpressure_vs_off"] = rounded(bp_pdr / base)
    if ("baseline", first) in points:
        old = points[("baseline", first)].mpps("pdr")["median"]
        if old > 0:
            ctx.summary[f"ratio_{first}nf_pdr_vs_baseline"] = rounded(base / old)


def run(ctx: Context) -> None:
    lengths = ctx.param("lengths", LENGTHS)
    size = ctx.param("size", "64b")
    flows = ctx.param("flows", 1024)
    mode = ctx.param("mode", "sleep")
    variants = ctx.param("variants", VARIANTS)
    prio = ctx.param("chain_priority", 0)
    # The direct chains' hop_nice_step (-1: the manager's default, 0 off its
    # core; docs/config.md), e.g. 2 to measure hops ranked downstream first.
    nice_step = ctx.param("hop_nice_step", -1)
    # Each NF's rx ring and batch budget (0: the manager's defaults, 1,024 and
    # 256). Ten NFs share core 1: each takes its turn in batches of up to the
    # budget, and the chain's first ring must hold what arrives during a
    # round of the other nine (issue 17; measured in docs/bench.md).
    ring_slots = ctx.param("ring_slots", 4096)
    budget = ctx.param("batch_budget_pkts", 2048)
    svc = {
        **({"ring_slots": ring_slots} if ring_slots else {}),
        **({"batch_budget_pkts": budget} if budget else {}),
    }
    # Another build's squall-mgr (and its NFs), e.g. the commit before a
    # change: its 1-NF chain beside this one's, interleaved.
    baseline = ctx.param("baseline_bin", "")
    # The 1-NF chain again with manager.rx_backpressure (NFVnice's
    # backpressure to the port; issue 17): the generator's port is not read
    # while the chain's first ring has no room for a burst, and holds what
    # is due in its rx_desc descriptors, as a NIC would (4,096: ixgbe's and
    # i40e's most), counting the rest as gen_missed. Does it raise the NDR
    # without costing PDR?
    backpressure = ctx.param("backpressure", True, False)
    port_rx_desc = ctx.param("port_rx_desc", 4096)
    mix = mixes.by_name(size)
    method = Method.from_ctx(ctx)
    hops = chains.max_hops(ctx.workdir, ctx.manager_name(), max(lengths))
    points: dict[tuple[str, int], Point] = {}
    cases: list[tuple[str, int, chains.ChainSetup, Path | None, dict[str, Any]]] = []
    base_mgr: dict[str, Any] = {"chain_priority": prio} if prio else {}
    for n in lengths:
        for variant in variants if n > 1 else variants[:1]:
            setup = chains.build(
                config.paper_chain(n), hops, mode=mode, direct=variant == "direct", **svc
            )
            setup.ports[0] = {**setup.ports[0], "rx_desc": port_rx_desc}
            if nice_step >= 0 and variant == "direct":
                for ch in setup.chains:
                    if ch.get("direct"):
                        ch["hop_nice_step"] = nice_step
            cases.append((variant, n, setup, None, base_mgr))
            if setup.segments > 1 and variant == variants[0]:
                ctx.note(
                    f"{n} NFs: squall-mgr takes {hops} hops per chain, so the path is "
                    f"{setup.segments} chains joined by net_ring loopback ports; latency is "
                    "the sum of the segments' (quantiles: an upper bound)."
                )
        if n == lengths[0] and backpressure:
            setup = chains.build(config.paper_chain(n), hops, mode=mode, **svc)
            setup.ports[0] = {**setup.ports[0], "rx_desc": port_rx_desc}
            cases.append(("backpressure", n, setup, None, {**base_mgr, "rx_backpressure": True}))
        if n == lengths[0] and baseline:
            # (the first variant's chain: a longer first length compares
            # direct with direct)
            setup = chains.build(
                config.paper_chain(n), hops, mode=mode, direct=variants[0] == "direct", **svc
            )
            setup.ports[0] = {**setup.ports[0], "rx_desc": port_rx_desc}
            cases.append(("baseline", n, setup, Path(baseline), base_mgr))
    # The run's first case measured low (1 NF: PDR 6.0-6.2 Mpps in its first
    # repetition, 7.6-7.8 in its second and for the baseline measured right
    # after it): the machine warms up (page faults, caches, clocks) under
    # whichever runs first. An unmeasured stretch at full rate first.
    warmup_s = ctx.param("warmup_s", 10.0, 1.0)
    if warmup_s > 0 and cases:
        variant, n, setup, mgr_bin, mgr_keys = cases[0]
        cfg = make_cfg(setup, mix, flows, **mgr_keys)
        with ctx.manager(cfg(ctx.manager_name()), label="warm-up", mgr_bin=mgr_bin) as m:
            gen_trial(m, float("inf"), warmup_s)
            m.wait_idle()
    # Interleaved: a slow stretch of the shared machine hits every case.
    for rep in range(ctx.reps):
        for variant, n, setup, mgr_bin, mgr_keys in cases:
            pt = points.setdefault((variant, n), Point(f"{n} NF {variant}"))
            measure_rep(
                ctx,
                pt,
                rep,
                make_cfg(setup, mix, flows, **mgr_keys),
                setup.chain_names,
                method,
                mgr_bin=mgr_bin,
                nfs=n,
                variant=variant,
                kinds=setup.kinds,
                segments=setup.segments,
            )
    summarize(ctx, points, lengths, size)
    figures(ctx, points, lengths, variants, mix)
    ctx.note(
        "direct: chains of two NFs or more are direct chains (chains[].direct; each NF hands "
        "its packets to the next and wakes it at the end of its burst); *_mgr figures: the same "
        "chains with every hop through the manager. The generator runs on the manager's core "
        "(core 0) with rx and tx; all NFs share core 1."
        + (f" Every NF's rx ring holds {ring_slots} packets." if ring_slots else "")
        + (f" Every NF's batch budget is {budget} packets." if budget else "")
        + (f" chain_priority {prio}: hop i of a chain runs at SCHED_RR {prio} + i." if prio else "")
        + (
            f" Direct chains' hop_nice_step {nice_step} (hop i at nice -{nice_step}i)."
            if nice_step >= 0
            else " Direct chains at the default hop_nice_step (0 off the manager's core)."
        )
    )


def figures(
    ctx: Context,
    points: dict[tuple[str, int], Point],
    lengths: list[int],
    variants: list[str],
    mix: mixes.Mix,
) -> None:
    xs = list(lengths)

    def key(v: str, n: int) -> tuple[str, int]:
        return (v, n) if (v, n) in points else (variants[0], n)

    ser = []
    for i, v in enumerate(variants):
        for which, style in (("pdr", "-o"), ("ndr", ":s")):
            sp = [points[key(v, n)].mpps(which) for n in lengths]
            ser.append(
                Series(
                    f"Squall {v}, {which.upper()}",
                    xs,
                    [s["median"] for s in sp],
                    [s["min"] for s in sp],
                    [s["max"] for s in sp],
                    style,
                    color=f"C{i}",
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
                "longer chains add L2 forwarders. Every NF sleeps when idle, all on core 1. "
                "direct: NF to NF; manager: every hop through the manager."
            ),
        )
    )
    if not all(0.5 in points[key(v, n)].latency for v in variants for n in lengths):
        return
    ser = []
    for i, v in enumerate(variants):
        for q, style in (("p50_ns", "-o"), ("p99_ns", "--^")):
            sp = [points[key(v, n)].lat_us(0.5, q) for n in lengths]
            ser.append(
                Series(
                    f"Squall {v}, {q[:3]}",
                    xs,
                    [s["median"] for s in sp],
                    [s["min"] for s in sp],
                    [s["max"] for s in sp],
                    style,
                    color=f"C{i}",
                )
            )
    if 10 in lengths:
        ser.append(Series("target: p50 <= 100 us at 10 NFs", [10], [100.0], style="k*"))
    ctx.figure(
        Figure(
            "latency",
            "rx-to-tx latency against chain length, at half of each chain's PDR",
            "NFs in the chain",
            "latency (us)",
            ser,
            xscale="log",
            yscale="log",
        )
    )


EXPERIMENT = Experiment(
    name="chain_length",
    title="Chains of 1, 2, 3, 10 and 50 NFs, direct and through the manager",
    seed="seed 002 §4.3, Fig. 3, and §5.2, Fig. 6 (latency at fractions of PDR); issue 17",
    about=(
        "Chains as in the seed: 1 NF = L3 forwarder, 2 = firewall then L3 forwarder, "
        "3 = the same then an L2 forwarder; 10 and 50 add L2 forwarders. All NFs sleep when "
        "idle and share core 1. Each chain of two NFs or more twice: direct (NF to NF, "
        "chains[].direct) and with every hop through the manager (*_mgr figures). NDR and PDR "
        "by rate search with 64 B frames over 1024 flows, then rx-to-tx latency at 10%, 50% "
        "and 90% of each chain's PDR; the cases interleaved, 3 repetitions. Every NF's rx "
        "ring holds 4,096 packets and its batch budget is 2,048 (params ring_slots, "
        "batch_budget_pkts)."
    ),
    run=run,
    # Required: the chains issue 17's targets name (50 NFs take half an
    # hour more: reported when run, --set lengths=1,2,3,10,50).
    summary_keys=tuple(
        k
        for n in (1, 2, 3, 10)
        for k in (f"mpps_ndr_{n}nf_64b", f"mpps_pdr_{n}nf_64b", f"p50_us_{n}nf_half_pdr")
    ),
    targets={
        "p50_us_10nf_half_pdr": "<= 100",
        "ratio_10nf_vs_1nf_pdr": ">= 0.5",
        "ratio_1nf_pdr_vs_baseline": ">= 0.95",
    },
    full_minutes=45,
)
