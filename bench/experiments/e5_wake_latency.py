"""E5 (issue 3): how long a sleeping NF takes to run once a packet waits for
it, against the raw futex wake between two bare processes on the same
placement, measured in the same run."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.paths import BUILD

PINGPONG = BUILD / "bench" / "futex_pingpong"
# (label, manager/waker core, NF/sleeper core)
PLACEMENTS = [("other core", 0, 1), ("same core", 0, 0)]


def raw_wake(ctx: Context, iters: int, waker: int, sleeper: int, gap_us: int) -> dict[str, Any]:
    cmd = [str(PINGPONG), str(iters), str(waker), str(sleeper), str(gap_us)]
    ctx.command(cmd, what="raw futex ping-pong")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    return dict(json.loads(out))


def squall_wake(ctx: Context, nf_core: int, rate_pps: int, seconds: float) -> dict[str, Any]:
    """One NF asleep between packets: from a packet's rx (the round that
    enqueues it) to its NF's handler starting, i.e. the wake, as libsquall
    stamps it (meta nf0_tsc) and the manager histograms it per chain."""
    svc = config.Service("nf", "squall-nf-noop", spin_us=0, wake={"policy": "min"})
    cfg = config.manager_config(
        ctx.manager_name(),
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[svc],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=config.generator([64], flows=1, rate_pps=0),
        nf_core=nf_core,
    )
    with ctx.manager(cfg, label=f"nf on core {nf_core}") as m:
        m.set_rate(rate_pps)
        time.sleep(min(0.5, seconds / 4))
        m.query("/squall/latency_reset")
        time.sleep(seconds)
        chain = m.chains()["c"]
        nf = next(iter(m.nfs().values()))
    return {
        # Enqueue (rx) to the NF's handler starting: the wake as the issue defines it.
        "n": chain["to_nf_count"],
        "p50_ns": chain["to_nf_p50_ns"],
        "p99_ns": chain["to_nf_p99_ns"],
        # And the whole rx-to-tx path, for reference.
        "rx_tx_p50_ns": chain["lat_p50_ns"],
        "rx_tx_p99_ns": chain["lat_p99_ns"],
        "nf_sleeps": nf["sleeps"],
        "nf_wakes": nf["wakes"],
    }


def run(ctx: Context) -> None:
    iters = ctx.param("raw_iters", 3000, 500)
    rate = ctx.param("rate_pps", 2000)
    seconds = ctx.param("seconds", 3.0, 1.0)
    gap_us = 1_000_000 // rate
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for label, mgr_core, nf_core in PLACEMENTS:
        raw_runs, sq_runs = [], []
        for rep in range(ctx.reps):
            raw = raw_wake(ctx, iters, mgr_core, nf_core, gap_us)
            ctx.sample("raw_futex", placement=label, rep=rep, **raw)
            sq = squall_wake(ctx, nf_core, rate, seconds)
            ctx.sample("squall_wake", placement=label, rep=rep, **sq)
            ctx.log(
                f"{label}: raw p50 {raw['p50_ns'] / 1000:.1f} us, "
                f"squall p50 {sq['p50_ns'] / 1000:.1f} us"
            )
            raw_runs.append(raw)
            sq_runs.append(sq)
        results[label] = {"raw": raw_runs, "squall": sq_runs}

    keys = {"other core": "cross", "same core": "same"}
    for label, runs in results.items():
        k = keys[label]
        for q in ("p50", "p99"):
            raw_v = spread(r[f"{q}_ns"] / 1000 for r in runs["raw"])["median"]
            sq_v = spread(r[f"{q}_ns"] / 1000 for r in runs["squall"])["median"]
            ctx.summary[f"wake_{q}_us_raw_{k}"] = rounded(raw_v, 2)
            ctx.summary[f"wake_{q}_us_squall_{k}"] = rounded(sq_v, 2)
        ratio = ctx.summary[f"wake_p50_us_squall_{k}"] / max(
            ctx.summary[f"wake_p50_us_raw_{k}"], 1e-9
        )
        ctx.summary[f"wake_ratio_vs_raw_futex_{k}"] = rounded(ratio)
    ctx.summary["wake_ratio_vs_raw_futex"] = ctx.summary["wake_ratio_vs_raw_futex_cross"]

    labels = list(results)
    ser = []
    styles = {("raw", "p50"): "--s", ("raw", "p99"): ":s", ("squall", "p50"): "-o"}
    for who in ("raw", "squall"):
        for q in ("p50", "p99"):
            style = styles.get((who, q), ":o")
            ys = [spread(r[f"{q}_ns"] / 1000 for r in results[p][who]) for p in labels]
            ser.append(
                Series(
                    f"{'raw futex' if who == 'raw' else 'Squall'} {q}",
                    labels,
                    [y["median"] for y in ys],
                    [y["min"] for y in ys],
                    [y["max"] for y in ys],
                    style,
                )
            )
    ctx.figure(
        Figure(
            "wake_latency",
            "Wake latency: Squall's sleeping NF vs the raw futex wake",
            "placement of the sleeper relative to the busy waker",
            "latency (us)",
            ser,
            xscale="category",
            caption=(
                "Squall: rx to the handler starting, for a 2000 pps trickle through one "
                "no-op NF that sleeps between packets (spin 0). Raw: bench/futex_pingpong, "
                "a busy process waking a sleeping one."
            ),
        )
    )
    ctx.note(
        "Squall's figure runs from the packet's rx (its enqueue is in the same manager round) "
        "to the NF's handler starting: the wake decision, FUTEX_WAKE, the scheduler and the "
        "dequeue. Histogram buckets are upper edges (within 6.25%)."
    )


EXPERIMENT = Experiment(
    name="e5_wake_latency",
    title="E5: wake latency of a sleeping NF vs the raw futex wake",
    seed="issue 3 E5; DESIGN §10 (wake costs on this machine class)",
    about=(
        "A no-op NF in sleep mode (no spin) gets a 2000 pps trickle from the manager's "
        "generator, so it sleeps before every packet; its chain's rx-to-tx latency "
        "histogram gives p50 and p99. In the same run bench/futex_pingpong measures the "
        "mechanism alone: a busy process wakes a process sleeping on a futex in shared "
        "memory, after the same gap. Both with the sleeper on the other core and on the "
        "waker's core. Target: Squall's p50 within 1.2x of the raw wake."
    ),
    run=run,
    summary_keys=(
        "wake_ratio_vs_raw_futex",
        "wake_p50_us_raw_cross",
        "wake_p50_us_squall_cross",
        "wake_p50_us_raw_same",
        "wake_p50_us_squall_same",
    ),
    targets={"wake_ratio_vs_raw_futex": "<= 1.2"},
    full_minutes=2,
)
