"""Latency against sending rate, from 100 pps to saturation, and how the
NF's batch size and wake behaviour change it. Seed 002 §5.1, Fig. 5."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from squall.bench import config, mixes
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.trial import Latency, latency_at

RATES = [100, 1_000, 10_000, 100_000, 300_000, 1_000_000, 1_500_000, 2_000_000, 2_500_000,
         3_000_000, 4_000_000]  # fmt: skip
QUICK_RATES = [100, 10_000, 1_000_000]


@dataclass(frozen=True)
class Variant:
    name: str  # in summary names
    label: str
    svc: dict[str, Any]  # Service fields


VARIANTS = [
    Variant("default", "sleep, burst 32, wake at 1st pkt, spin 20 us", {}),
    Variant("burst1", "sleep, burst 1", {"burst_max": 1}),
    Variant(
        "wake_batch",
        "sleep, wake at 32 pkts or 100 us",
        {"wake": {"policy": "fixed", "thresh_pkts": 32, "timeout_us": 100}},
    ),
    Variant("wake_adaptive", "sleep, adaptive wake (seed 000)", {"wake": {"policy": "adaptive"}}),
    Variant("spin0", "sleep, no spin before sleeping", {"spin_us": 0}),
    Variant("poll", "poll mode (spins on its ring)", {"mode": "poll"}),
]


def rate_label(pps: float) -> str:
    if pps >= 1e6 and pps % 1e6 == 0:
        return f"{pps / 1e6:g}mpps"
    if pps >= 1e3 and pps % 1e3 == 0:
        return f"{pps / 1e3:g}kpps"
    return f"{pps:g}pps"


def run(ctx: Context) -> None:
    nf = ctx.param("nf", "l3fwd")
    size = ctx.param("size", "128b")
    rates = ctx.param("rates", RATES, QUICK_RATES)
    names = ctx.param("variants", [v.name for v in VARIANTS])
    dur = ctx.param("trial_s", 2.0, 0.3)
    min_pkts = ctx.param("min_pkts", 500, 30)  # low rates: a window long enough for this many
    max_trial_s = ctx.param("max_trial_s", 5.0, 0.5)
    mix = mixes.by_name(size)
    variants = [v for v in VARIANTS if v.name in names]
    lat: dict[tuple[str, float], list[Latency]] = {}
    saturation: dict[str, list[float]] = {}
    for v in variants:
        for rep in range(ctx.reps):
            svc = config.nf_service(nf, "nf", out=config.OUT_PORT_INDEX, **v.svc)
            cfg = config.manager_config(
                ctx.manager_name(),
                ports=[config.GEN_PORT, config.OUT_PORT],
                services=[svc],
                chains=[{"name": "c", "services": ["nf"]}],
                rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
                gen=config.generator(mix.sizes, 1024),
            )
            sat = float("nan")
            lossy = 0  # consecutive rates over 0.5% loss
            with ctx.manager(cfg, label=v.name) as m:
                for rate in rates:
                    window = min(max_trial_s, max(dur, min_pkts / rate))
                    r = latency_at(m, ["c"], float(rate), window)
                    lat.setdefault((v.name, rate), []).append(r)
                    ctx.sample("latency", variant=v.name, rep=rep, **r.to_dict())
                    ctx.log(
                        f"{v.name} rep {rep} {rate_label(rate)}: p50 {r.p50_ns / 1e3:.1f} "
                        f"p99 {r.p99_ns / 1e3:.1f} us, loss {r.loss_ratio:.2%} ({r.count} pkts)"
                    )
                    # Saturated: over 0.5% loss at two rates in a row (one lossy
                    # window alone can be a hiccup of a shared machine); the
                    # first of them is the saturation rate.
                    lossy = lossy + 1 if r.saturated else 0
                    if lossy == 1:
                        sat = rate
                    elif lossy == 0:
                        sat = float("nan")
                    if lossy == 2:
                        break  # further rates only queue more
            saturation.setdefault(v.name, []).append(sat)

    def med(vname: str, rate: float, q: str) -> float:
        return spread(getattr(x, q) / 1e3 for x in lat.get((vname, rate), []))["median"]

    for v in variants:
        for rate in rates:
            if (v.name, rate) not in lat:
                continue
            rl = rate_label(rate)
            ctx.summary[f"p50_us_{v.name}_{rl}"] = rounded(med(v.name, rate, "p50_ns"), 2)
            ctx.summary[f"p99_us_{v.name}_{rl}"] = rounded(med(v.name, rate, "p99_ns"), 2)
        sats = saturation[v.name]
        if all(x == x for x in sats):  # every repetition reached saturation
            ctx.summary[f"mpps_saturated_{v.name}"] = rounded(spread(sats)["median"] / 1e6)
        else:
            ctx.note(f"{v.name}: not saturated at {rates[-1]:,} pps in every repetition")
    lo, hi = rates[0], next((r for r in rates if r >= 1_000_000), rates[-1])
    if ("default", lo) in lat and ("default", hi) in lat and med("default", hi, "p50_ns") > 0:
        ctx.summary[f"ratio_p50_{rate_label(lo)}_vs_{rate_label(hi)}_default"] = rounded(
            med("default", lo, "p50_ns") / med("default", hi, "p50_ns")
        )

    for q, title in (("p50_ns", "median"), ("p99_ns", "99th percentile")):
        ser = []
        for v in variants:
            xs = [r for r in rates if (v.name, r) in lat]
            sp = [spread(getattr(x, q) / 1e3 for x in lat[v.name, r]) for r in xs]
            ser.append(
                Series(
                    v.label,
                    xs,
                    [s["median"] for s in sp],
                    [s["min"] for s in sp],
                    [s["max"] for s in sp],
                    "-o",
                )
            )
        ctx.figure(
            Figure(
                f"latency_{q[:3]}",
                f"rx-to-tx latency ({title}) against sending rate, {nf}, {mix.label}",
                "sending rate (packets/s)",
                f"{title} latency (us)",
                ser,
                xscale="log",
                yscale="log",
                caption=(
                    "Each line ends one rate past saturation (more than 0.5% loss at two "
                    "rates in a row): there latency is queueing."
                ),
            )
        )
    ctx.note(
        "The generator runs on the manager's core (core 0) with rx and tx; the NF has core 1. "
        "Latency is from the manager's rx timestamp to its tx, per packet, log-bucket histogram."
    )


EXPERIMENT = Experiment(
    name="latency_rate",
    title="Latency against sending rate (100 pps to saturation), batch size and wake policy",
    seed="seed 002 §5.1, Fig. 5 (at low rates batching hurts latency)",
    about=(
        "One L3 forwarder, 128 B frames (the seed's choice, near the data-center mean). For "
        "each NF configuration the generator offers 100 pps, 1k, 10k, 100k, 300k, 1M, 1.5M ... "
        "pps until more than 0.5% is lost at two rates in a row, and the manager's per-chain "
        "histogram gives rx-to-tx latency (windows of 2 s, longer at low rates so each holds "
        "500 packets). "
        "Configurations: the default (sleep, burst 32, woken at the first packet, 20 us spin "
        "before sleeping), burst 1, a batching wake (woken at 32 packets or after 100 us: the "
        "seed's 'burst threshold or timer'), the adaptive wake of seed 000, no spin, and poll mode."
    ),
    run=run,
    # 100 pps is measured in every mode; higher rates only until saturation.
    summary_keys=tuple(f"{q}_us_{v.name}_100pps" for v in VARIANTS for q in ("p50", "p99")),
    full_minutes=12,
)
