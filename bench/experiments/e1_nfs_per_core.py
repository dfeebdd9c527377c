"""E1 (issue 3; seed 000 Fig 4a and 6; seed 004): throughput and latency
against the number of NFs sharing one core, traffic spread over all of them,
poll mode against sleep mode."""

from __future__ import annotations

import math
from typing import Any

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.trial import gen_trial, latency_at

COUNTS = [1, 10, 45, 100, 240, 500, 1000]


def make_cfg(ctx: Context, mode: str, n: int, wake: str) -> dict[str, Any]:
    svc = config.Service(
        "nf",
        "squall-nf-fwd",
        mode=mode,
        instances=n,
        ring_slots=256,
        wake={"policy": wake} if mode == "sleep" else None,
    )
    return config.manager_config(
        ctx.manager_name(),
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[svc],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        # Enough flows that the symmetric hash gives every NF traffic.
        gen=config.generator([64], flows=min(65536, max(1024, 16 * n)), rate_pps=0),
        region_mb=256 if n <= 500 else 512,
    )


def measure(ctx: Context, mode: str, n: int, wake: str, seconds: float) -> dict[str, Any]:
    with ctx.manager(make_cfg(ctx, mode, n, wake), label=f"{mode} {n} NFs") as m:
        top = gen_trial(m, math.inf, seconds)
        half = latency_at(m, ["c"], max(1.0, 0.5 * top.fwd_rate_pps), seconds)
        nfs = m.nfs().values()
        busy = sum(1 for nf in nfs if nf["rx_pkts"] > 0)
    return {
        "mpps": top.fwd_rate_pps / 1e6,
        "loss_at_max": top.loss_ratio,
        "half_load_pps": half.rate_pps,
        "p50_us_half": half.p50_ns / 1000,
        "p99_us_half": half.p99_ns / 1000,
        "loss_at_half": half.loss_ratio,
        "nfs_with_traffic": busy,
    }


def run(ctx: Context) -> None:
    counts = ctx.param("counts", COUNTS, [1, 10, 100])
    poll_max = ctx.param("poll_max_nfs", 240, 10)
    wake = ctx.param("wake", "adaptive")
    seconds = ctx.param("seconds", 2.0, 0.5)
    res: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for rep in range(ctx.reps):
        for mode in ("sleep", "poll"):
            for n in counts:
                if mode == "poll" and n > poll_max:
                    continue
                r = measure(ctx, mode, n, wake, seconds)
                ctx.sample("point", mode=mode, nfs=n, rep=rep, **r)
                ctx.log(
                    f"{mode} {n:5} NFs: {r['mpps']:.3f} Mpps, p99 at half load "
                    f"{r['p99_us_half']:.0f} us, {r['nfs_with_traffic']} NFs busy"
                )
                res.setdefault((mode, n), []).append(r)

    def med(mode: str, n: int, key: str) -> float:
        return spread(r[key] for r in res[mode, n])["median"]

    for (mode, n), _ in sorted(res.items()):
        ctx.summary[f"mpps_{n}nf_{mode}"] = rounded(med(mode, n, "mpps"))
        ctx.summary[f"p99_us_{n}nf_{mode}_half_load"] = rounded(med(mode, n, "p99_us_half"), 1)
    top_n = max(n for mode, n in res if mode == "sleep")
    base = med("sleep", 1, "mpps") if ("sleep", 1) in res else float("nan")
    ctx.summary[f"ratio_{top_n}nf_vs_1nf"] = rounded(med("sleep", top_n, "mpps") / base)
    if top_n == 1000:  # the DESIGN §10 names of the targets
        ctx.summary["p99_us_1000nf_half_load"] = ctx.summary["p99_us_1000nf_sleep_half_load"]
    ctx.summary["ratio_top_nf_vs_1nf_sleep"] = ctx.summary[f"ratio_{top_n}nf_vs_1nf"]
    ctx.summary["p99_us_top_nf_half_load_sleep"] = ctx.summary[f"p99_us_{top_n}nf_sleep_half_load"]

    def series(mode: str, key: str, label: str, style: str) -> Series:
        ns = sorted(n for m, n in res if m == mode)
        sp = [spread(r[key] for r in res[mode, n]) for n in ns]
        return Series(
            label,
            ns,
            [s["median"] for s in sp],
            [s["min"] for s in sp],
            [s["max"] for s in sp],
            style,
        )

    ctx.figure(
        Figure(
            "throughput",
            "Throughput against NFs sharing one core",
            "NFs on core 1",
            "throughput (Mpps, 64 B)",
            [
                series("sleep", "mpps", f"sleep mode ({wake} wakes)", "-o"),
                series("poll", "mpps", "poll mode", "--s"),
            ],
            xscale="log",
            caption="Traffic spread over every NF by a symmetric flow hash; the manager "
            "and its generator on core 0.",
        )
    )
    ctx.figure(
        Figure(
            "latency",
            "Latency at 50% of each point's maximum throughput",
            "NFs on core 1",
            "rx-to-tx latency (us)",
            [
                series("sleep", "p50_us_half", "sleep p50", "-o"),
                series("sleep", "p99_us_half", "sleep p99", ":o"),
                series("poll", "p50_us_half", "poll p50", "--s"),
                series("poll", "p99_us_half", "poll p99", ":s"),
            ],
            xscale="log",
            yscale="log",
        )
    )
    ctx.note(
        f"Poll mode stops at {poll_max} NFs: NFs that spin on one core share it by the "
        "scheduler's time slices, which is the collapse Flurries and OpenNetVM reported."
    )
    ctx.note(
        "Maximum throughput is the forwarded rate with the generator unpaced; the generator "
        "runs on the manager's core, so the figure is what that core sustains while also "
        "generating."
    )


EXPERIMENT = Experiment(
    name="e1_nfs_per_core",
    title="E1: throughput and latency against NFs per core, poll vs sleep",
    seed="issue 3 E1; seed 000 Fig 4a and 6; seed 004",
    about=(
        "One service of N squall-nf-fwd instances on core 1 (N = 1 to 1000), the manager's "
        "generator offering 64 B UDP over 16 x N flows so the symmetric hash spreads them "
        "over every NF. For each N: the maximum forwarded rate (generator unpaced, 2 s), "
        "then rx-to-tx latency p50/p99 at half of it. Sleep mode (adaptive wakes) for every "
        "N; poll mode up to 240 NFs. Targets: sleep mode at 1000 NFs >= 85% of its 1-NF "
        "throughput; p99 <= 1 ms at 50% of the maximum load with 1000 NFs."
    ),
    run=run,
    summary_keys=("ratio_top_nf_vs_1nf_sleep", "p99_us_top_nf_half_load_sleep", "mpps_1nf_sleep"),
    targets={"ratio_1000nf_vs_1nf": ">= 0.85", "p99_us_1000nf_half_load": "<= 1000"},
    full_minutes=15,
)
