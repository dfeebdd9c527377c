"""Issue 4 E1 and E2 (seed 000 §6.2): how long the director takes to set a
new flow up, and how many new NF assignments per second one manager core
sustains, from a generator of short TCP connections over a pool of 1,000 to
2,000 per-flow NFs."""

from __future__ import annotations

import time
from typing import Any

from squall.bench import config, procstat, stall
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread

RATES_PPS = [300_000, 400_000, 500_000, "max"]
# The queue variant's depth: 131,072 packets wait ~310 ms at 420,000/s. Sized
# for this VM, where a core is now and then taken away for tens of ms (a
# 40 ms stall of the NF core overflowed 16,384; 131,072 rode out 100-150 ms).
QUEUE_PKTS = 131_072


def make_cfg(ctx: Context, pool: int, k: int, conns: int, variant: str) -> dict[str, Any]:
    """variant: the pool order, then options joined by "+": "bN" pool_backlog_max
    N; "q" pool_fallback queue (QUEUE_PKTS packets); "rr" the NFs under SCHED_RR
    priority 1 (a woken NF does not preempt the running one); "sN" spin_us N
    (an NF done with its flow spins N us before it sleeps: with lifo the next
    flow may take it still running, with no wake)."""
    order, *opts = variant.split("+")
    queue = "q" in opts
    cfg = config.per_flow_noop(
        ctx.manager_name(),
        pool,
        conns,
        k,
        # A connection the pause between trials cuts short ends idle: soon,
        # so its NF is back for the next trial.
        flow_idle_timeout_ms=1000,
        # Room for a full queue besides what the NFs' rings hold.
        mbufs=262_143 if queue else 65_535,
        region_mb=1024 if queue else 256,
    )
    s = cfg["services"][0]
    s["pool_order"] = order
    for opt in opts:
        if opt.startswith("b"):
            s["pool_backlog_max"] = int(opt[1:])
        elif opt == "q":
            s["pool_fallback"] = "queue"
            s["pool_queue_pkts"] = QUEUE_PKTS
        elif opt.startswith("s"):
            s["spin_us"] = int(opt[1:])
        elif opt == "rr":
            s["priority"] = 1
        else:
            raise ValueError(f"variant {variant!r}: unknown option {opt!r}")
    return cfg


def wait_no_flows(m: Any, timeout_s: float) -> None:
    """Until the last trial's flows are gone: after an overload, connections
    whose FINs were dropped hold their NFs until the idle timeout (1 s), and
    a trial started then would find the pool nearly empty."""
    deadline = time.monotonic() + timeout_s
    while m.query("/squall/flows")["flows_active"] > 0 and time.monotonic() < deadline:
        time.sleep(0.05)


def trial(
    m: Any, rate: int | str, seconds: float, stalls: stall.Stalls | None = None
) -> dict[str, Any]:
    m.set_rate(0)
    m.wait_idle(5.0)
    wait_no_flows(m, 5.0)
    f0, s0, g0 = m.query("/squall/flows"), m.stats(), m.gen()
    t0 = time.monotonic()
    m.set_rate(rate)
    cpus0 = procstat.read_cpus()
    stalling = stall.start(stalls) if stalls else None
    try:
        time.sleep(seconds)
        # (bounded, not tight: the child's own start and sleeps run late on
        # a loaded 2-core CI host; its 2 s in a quick run once ran out)
        if stalling is not None and stalling.wait(timeout=seconds + 15) != 0:
            raise RuntimeError(f"stalls {stalls}: the stalling process failed")
    finally:  # a SCHED_FIFO spinner must not outlive the trial
        if stalling is not None and stalling.poll() is None:
            stalling.kill()
            stalling.wait()
    cpus1 = procstat.read_cpus()
    f1, s1, g1 = m.query("/squall/flows"), m.stats(), m.gen()
    t1 = time.monotonic()
    m.set_rate(0)
    dt = t1 - t0
    drops = {k: s1["drops"][k] - s0["drops"].get(k, 0) for k in s1["drops"]}
    return {
        "rate_pps": rate,
        "activations_per_s": (f1["flows_created"] - f0["flows_created"]) / dt,
        "conns_offered_per_s": (g1["conns_started"] - g0["conns_started"]) / dt,
        "pkts_per_s": (g1["sent_pkts"] - g0["sent_pkts"]) / dt,
        "drops": {k: v for k, v in drops.items() if v},
        "setup_ns_p50": f1["setup_ns_p50"],
        "setup_ns_p99": f1["setup_ns_p99"],
        "handoffs_per_s": (f1["handoffs"] - f0["handoffs"]) / dt,
        "flows_active_end": f1["flows_active"],
        "nf_core_busy_pct": round(procstat.cpu_busy_pct(cpus0["cpu1"], cpus1["cpu1"]), 1),
        "steal_pct": procstat.steal_by_cpu(cpus0, cpus1),
        # Since the manager started (a high-water mark): meaningful for the
        # long trials, which run in a manager of their own.
        "queue_max_pkts": m.query("/squall/pools")["nf"]["waiting_max"],
    }


def run(ctx: Context) -> None:
    pools = ctx.param("pools", [1000, 2000], [1000])
    variants = ctx.param(
        "variants",
        ["fifo", "lifo+b128", "lifo+b128+s20", "lifo+b128+q+s20"],
        ["fifo", "lifo+b128+q+s20"],
    )
    k = ctx.param("pkts_per_conn", 4)
    shapes = ctx.param("concurrent_conns", [64, 1], [64])
    rates = ctx.param("rates_pps", RATES_PPS, [200_000, "max"])
    seconds = ctx.param("seconds", 3.0, 1.0)
    # Then one long trial of one variant: is the rate held for half a minute?
    sustain_variant = ctx.param("sustain_variant", "lifo+b128+q+s20")
    sustain_rate = ctx.param("sustain_rate_pps", 420_000, 200_000)
    sustain_s = ctx.param("sustain_s", 30.0, 3.0)
    # And, at that rate, trials in which each core in turn is taken away
    # three times (SCHED_FIFO spin): does the queue ride the stalls out?
    stall_ms = ctx.param("stall_ms", 100, 50)
    stall_s = ctx.param("stall_s", 10.0, 2.0)
    stall_cpus = ctx.param("stall_cpus", [1, 0], [1])
    why_not = stall.can_stall()
    if why_not:
        ctx.unavailable["stalls"] = why_not
        stall_cpus = []
    stalled: list[dict[str, Any]] = []
    rows: dict[tuple[int, str, int, str], list[dict[str, Any]]] = {}
    sustained: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for rep in range(ctx.reps):
        for pool in pools:
            for variant in variants:
                for conns in shapes:
                    label = f"pool {pool} {variant} {conns} open"
                    cfg = make_cfg(ctx, pool, k, conns, variant)
                    with ctx.manager(cfg, label=label) as m:
                        for rate in rates:
                            r = trial(m, rate, seconds)
                            ctx.sample("trial", pool=pool, order=variant, conns=conns, rep=rep, **r)
                            ctx.log(
                                f"{label} rate {rate}: {r['activations_per_s']:.0f} "
                                f"activations/s, setup p50 {r['setup_ns_p50']} ns, NF core "
                                f"{r['nf_core_busy_pct']}% busy, "
                                f"{r['handoffs_per_s']:.0f} handoffs/s, "
                                f"steal {r['steal_pct']}, "
                                f"drops {r['drops']}"
                            )
                            rows.setdefault((pool, variant, conns, str(rate)), []).append(r)
                    if variant != sustain_variant:
                        continue
                    # A manager of its own: no backlog left from the overloads
                    # above, and its queue's high-water mark is this trial's.
                    cfg = make_cfg(ctx, pool, k, conns, variant)
                    with ctx.manager(cfg, label=f"{label} sustained") as m:
                        r = trial(m, sustain_rate, sustain_s)
                        ctx.sample("sustain", pool=pool, order=variant, conns=conns, rep=rep, **r)
                        ctx.log(
                            f"{label} sustained {sustain_s:.0f} s at {sustain_rate}: "
                            f"{r['activations_per_s']:.0f} activations/s of "
                            f"{r['conns_offered_per_s']:.0f} offered, drops {r['drops']}, "
                            f"queue peak {r['queue_max_pkts']} packets"
                        )
                        sustained.setdefault((pool, conns), []).append(r)
                        for cpu in stall_cpus:
                            st = stall.Stalls(cpu, stall_ms, 3, stall_s / 4)
                            r = trial(m, sustain_rate, stall_s, st)
                            ctx.sample("stall", pool=pool, conns=conns, rep=rep, cpu=cpu, **r)
                            ctx.log(
                                f"{label} with 3 stalls of core {cpu} ({stall_ms} ms): "
                                f"{r['activations_per_s']:.0f} activations/s, "
                                f"drops {r['drops']}, queue peak {r['queue_max_pkts']}"
                            )
                            stalled.append(r)
    summarize(ctx, rows, variants, shapes)
    summarize_sustained(ctx.summary, sustained)
    if stall_cpus:
        ctx.summary["stall_ms"] = stall_ms
        ctx.summary["stall_clean_trials"] = sum(not r["drops"] for r in stalled)
        ctx.summary["stall_trials"] = len(stalled)
    figure(ctx, rows, pools, variants, shapes, rates, k)
    ctx.note(
        "Flow setup is timed inside the director: from the first packet's table miss to the "
        "packet staged for its new NF (table insert and a pool pop per hop included)."
    )
    ctx.note(
        "The generator shares the manager's core, and each activation also costs the NF core a "
        "wake; a trial with any drop (pool empty, ring full, stray) does not count as "
        "sustained. Each trial records the NF core's busy share and the hypervisor's steal."
    )
    ctx.note(
        "Traffic shapes: 64 connections open at once, their packets interleaved (a flow's "
        "packets ~64 packets apart, so its NF may wake for each), or one at a time (a "
        "flow's 4 packets back to back: about one wake per flow)."
    )
    ctx.note(
        "lifo pools hand a flow's NF back at its close (no linger: a handoff), so the next "
        "flow queues behind the close; with spin_us (+sN) the NF is often still running "
        "then and the flow costs no wake. Without a spin (the bench's NFs default to 0) it "
        "has gone to sleep. Each trial counts handoffs."
    )


def summarize(
    ctx: Context,
    rows: dict[tuple[int, str, int, str], list[dict[str, Any]]],
    variants: list[str],
    shapes: list[int],
) -> None:
    # The best clean 3 s trial (no drop of any cause).
    every = [r for rs in rows.values() for r in rs]
    clean = [r for r in every if not r["drops"]]
    ctx.summary["best_3s_activations_per_s"] = (
        rounded(max(r["activations_per_s"] for r in clean), 0) if clean else 0
    )
    # How often that held: clean trials at or above the target, of all trials.
    ctx.summary["clean_trials_ge_100k"] = sum(r["activations_per_s"] >= 100_000 for r in clean)
    ctx.summary["trials"] = len(every)
    for variant in variants:
        slug = variant.replace("+", "_")
        mine = [r for (_, v, _, _), rs in rows.items() if v == variant for r in rs]
        for conns in shapes:
            ok = [
                r
                for (_, v, c, _), rs in rows.items()
                if v == variant and c == conns
                for r in rs
                if not r["drops"]
            ]
            best = max((r["activations_per_s"] for r in ok), default=0)
            ctx.summary[f"activations_per_s_{slug}_c{conns}"] = rounded(best, 0)
        ctx.summary[f"flow_setup_ns_p50_{slug}"] = spread(r["setup_ns_p50"] for r in mine)["median"]
    ctx.summary["flow_setup_ns_p50"] = spread(r["setup_ns_p50"] for r in every)["median"]
    ctx.summary["flow_setup_ns_p99"] = spread(r["setup_ns_p99"] for r in every)["median"]


def summarize_sustained(
    summary: dict[str, Any], sustained: dict[tuple[int, int], list[dict[str, Any]]]
) -> None:
    """Per pool and shape, the worst repetition of the 30 s trial (a drop in
    any shows); and the target's figure, activations_per_s: the rate held for
    30 s with no drop at all, in every pool, shape and repetition (0 if any
    trial dropped)."""
    every = [r for rs in sustained.values() for r in rs]
    for (pool, conns), rs in sustained.items():
        worst = min(rs, key=lambda r: (not r["drops"], r["activations_per_s"]))
        summary[f"sustained_activations_per_s_p{pool}_c{conns}"] = rounded(
            worst["activations_per_s"], 0
        )
        summary[f"sustained_drops_p{pool}_c{conns}"] = sum(worst["drops"].values())
        summary[f"sustained_queue_max_pkts_p{pool}_c{conns}"] = max(r["queue_max_pkts"] for r in rs)
    if every:
        clean = all(not r["drops"] for r in every)
        summary["activations_per_s"] = (
            rounded(min(r["activations_per_s"] for r in every), 0) if clean else 0
        )
        summary["sustained_clean_trials"] = sum(not r["drops"] for r in every)
        summary["sustained_trials"] = len(every)


def figure(
    ctx: Context,
    rows: dict[tuple[int, str, int, str], list[dict[str, Any]]],
    pools: list[int],
    variants: list[str],
    shapes: list[int],
    rates: list[Any],
    k: int,
) -> None:
    xs = [str(r) for r in rates]
    for conns in shapes:
        ctx.figure(
            Figure(
                f"activations_c{conns}",
                f"New NF assignments per second, {conns} connection(s) open at once",
                "offered rate (packets/s; 'max' = unpaced)",
                "activations per second",
                [
                    Series(
                        f"pool of {pool}, {variant}",
                        xs,
                        [
                            spread(x["activations_per_s"] for x in rows[pool, variant, conns, r])[
                                "median"
                            ]
                            for r in xs
                        ],
                    )
                    for pool in pools
                    for variant in variants
                ],
                xscale="category",
                caption=f"Short TCP connections of {k} packets, {conns} open at once, linger 0. "
                f"Offered activations = offered packets / {k}. Variants: pool order, b = "
                "pool_backlog_max, q = pool_fallback queue, sN = spin_us N, rr = SCHED_RR NFs.",
            )
        )


EXPERIMENT = Experiment(
    name="flow_activations",
    title="Per-flow NFs: flow setup time and activations per second",
    seed="issue 4 E1 and E2; seed 000 §6.2 (708 ns setup, ~80,000 activations/s)",
    about=(
        "One per-flow service of squall-nf-noop with a pool of 1,000 or 2,000 NFs on core 1, "
        "in four variants: fifo (the default: the NF idle longest); lifo with "
        "pool_backlog_max 128 (the NF back last, and with no linger handed back at its "
        "flow's close, so the next flow queues behind it; no new flow gets an NF while 128 "
        "woken NFs wait to run: it is dropped); that with NFs that spin 20 us before they "
        "sleep (a handed-off NF is then often still running when its next flow comes); and "
        "that with pool_fallback queue (a held-back flow waits in the manager instead of "
        "being dropped). The manager's generator makes short TCP "
        "connections (SYN, data, FIN, FIN back; 4 packets), 64 open at a time with their "
        "packets interleaved, or one at a time, at increasing rates. Per trial: new flows per "
        "second (director activations), drops by cause, the flow setup time histogram, the "
        "NF core's busy share and steal. Targets: median setup <= 500 ns; >= 100,000 "
        "activations per second (activations_per_s: the rate every 30 s trial held with no "
        "drop). Last, per pool and shape, in a manager of its own, one 30 s trial of the "
        "queue variant (131,072 packets deep) at 420,000 packets/s (105,000 connections/s "
        "offered), then two 10 s trials at that rate in which core 1, then core 0, is taken "
        "away three times for 100 ms (a SCHED_FIFO spin), as this VM's host sometimes does: "
        "drops, and the queue's peak."
    ),
    run=run,
    summary_keys=("activations_per_s", "best_3s_activations_per_s", "flow_setup_ns_p50"),
    full_minutes=25,
    targets={"flow_setup_ns_p50": "<= 500", "activations_per_s": ">= 100000"},
)
