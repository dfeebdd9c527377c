"""What an NF activation costs the NF core, against its floor on this machine:
a token round a ring of N bare processes (and, beside them, N threads) on one
core, one futex wake, sleep and context switch per hop. Next to it, Squall's
per-flow NFs with one wake per flow: NF-core time per activation. This is the
ceiling under issue 4's activations per second and issue 3's E1."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from squall.bench import config, procstat
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.paths import BUILD

SWITCH_RING = BUILD / "bench" / "switch_ring"
NF_CORE = 1


def ring(ctx: Context, mode: str, n: int, hops: int) -> float:
    cmd = [str(SWITCH_RING), mode, str(n), str(hops), str(NF_CORE)]
    ctx.command(cmd, what=f"switch_ring {mode} x{n}")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    return float(json.loads(out)["ns_per_hop"])


def squall_activation(ctx: Context, pool: int, seconds: float) -> dict[str, Any]:
    # One connection at a time, its 4 packets back to back: one wake per flow.
    cfg = config.per_flow_noop(ctx.manager_name(), pool, conns=1)
    with ctx.manager(cfg, label=f"pool {pool}") as m:
        w0 = sum(v["wakes"] for v in m.nfs().values())
        f0 = m.query("/squall/flows")["flows_created"]
        c0, t0 = procstat.read_cpus(), time.monotonic()
        m.set_rate("max")
        time.sleep(seconds)
        f1 = m.query("/squall/flows")["flows_created"]
        c1, t1 = procstat.read_cpus(), time.monotonic()
        m.set_rate(0)
        m.wait_idle(5.0)
        w1 = sum(v["wakes"] for v in m.nfs().values())
        drops = {k: v for k, v in m.stats()["drops"].items() if v}
    flows = max(f1 - f0, 1)
    busy = procstat.cpu_busy_pct(c0[f"cpu{NF_CORE}"], c1[f"cpu{NF_CORE}"])
    per_s = flows / (t1 - t0)
    return {
        "activations_per_s": per_s,
        "nf_core_busy_pct": round(busy, 1),
        # NF-core time per activation, had the core done nothing else.
        "ns_per_activation": busy / 100 * 1e9 / per_s,
        "wakes_per_flow": (w1 - w0) / flows,
        "steal_pct": procstat.steal_by_cpu(c0, c1),
        "drops": drops,
    }


def run(ctx: Context) -> None:
    counts = ctx.param("counts", [2, 16, 128, 1000, 2000], [2, 128])
    pools = ctx.param("pools", [16, 128, 1000], [128])
    hops = ctx.param("hops", 200_000, 20_000)
    seconds = ctx.param("seconds", 3.0, 1.0)
    rings: dict[tuple[str, int], list[float]] = {}
    sq: dict[int, list[dict[str, Any]]] = {}
    for rep in range(ctx.reps):
        for n in counts:
            # Side by side, alternating, so a noisy stretch hits both.
            for mode in ("proc", "thread"):
                ns = ring(ctx, mode, n, hops)
                ctx.sample("ring", mode=mode, n=n, rep=rep, ns_per_hop=ns)
                rings.setdefault((mode, n), []).append(ns)
            ctx.log(
                f"ring of {n}: {rings['proc', n][-1]:.0f} ns/hop processes, "
                f"{rings['thread', n][-1]:.0f} threads"
            )
        for pool in pools:
            r = squall_activation(ctx, pool, seconds)
            ctx.sample("squall", pool=pool, rep=rep, **r)
            sq.setdefault(pool, []).append(r)
            ctx.log(
                f"squall pool {pool}: {r['activations_per_s']:.0f} activations/s, "
                f"{r['ns_per_activation']:.0f} ns NF core each, "
                f"{r['wakes_per_flow']:.2f} wakes/flow, drops {r['drops']}"
            )

    def med(xs: list[float]) -> float:
        return float(spread(xs)["median"])

    for n in counts:
        ctx.summary[f"ns_per_hop_proc_{n}"] = rounded(med(rings["proc", n]), 0)
        ctx.summary[f"ns_per_hop_thread_{n}"] = rounded(med(rings["thread", n]), 0)
    for pool in pools:
        ns = med([r["ns_per_activation"] for r in sq[pool]])
        ctx.summary[f"ns_per_activation_squall_{pool}"] = rounded(ns, 0)
        if ("proc", pool) in rings:
            ctx.summary[f"ratio_squall_vs_ring_{pool}"] = rounded(ns / med(rings["proc", pool]))
    # Whatever the counts asked for, the same names for the largest.
    big = max(counts)
    ctx.summary["ns_per_hop_proc_largest"] = ctx.summary[f"ns_per_hop_proc_{big}"]
    ctx.summary["ratio_proc_vs_thread"] = rounded(
        med(rings["proc", big]) / med(rings["thread", big])
    )
    ctx.summary["ns_per_activation_squall_largest"] = ctx.summary[
        f"ns_per_activation_squall_{max(pools)}"
    ]
    xs = [str(n) for n in counts]
    series = []
    for mode, label, style in (("proc", "processes", "-o"), ("thread", "threads", "--s")):
        ys = [spread(rings[mode, n]) for n in counts]
        series.append(
            Series(
                f"futex ring of {label}",
                xs,
                [y["median"] for y in ys],
                [y["min"] for y in ys],
                [y["max"] for y in ys],
                style,
            )
        )
    sq_x = [str(p) for p in pools if str(p) in xs]
    if sq_x:
        ys = [spread(r["ns_per_activation"] for r in sq[int(p)]) for p in sq_x]
        series.append(
            Series(
                "Squall: NF-core time per activation",
                sq_x,
                [y["median"] for y in ys],
                [y["min"] for y in ys],
                [y["max"] for y in ys],
                ":^",
            )
        )
    ctx.figure(
        Figure(
            "switch_cost",
            "One wake + switch per hop, against the tasks in rotation on one core",
            "tasks (or pooled NFs) taking turns on the core",
            "ns per hop / per activation",
            series,
            xscale="category",
            caption=f"bench/switch_ring, {hops} hops per run, each task writing 4 private "
            "pages per hop; Squall: per-flow no-op NFs, one 4-packet connection at a time "
            "(one wake per flow), NF-core busy time / activations.",
        )
    )
    ctx.note(
        "A hop of the ring is the least an NF activation can cost the NF core here: one "
        "FUTEX_WAKE, one FUTEX_WAIT, one context switch. Threads do the same without changing "
        "address space, so processes/threads is what Squall's process model costs per switch."
    )
    ctx.note(
        "Squall's figure also pays what the ring does not: the wake comes from the other core, "
        "and the NF dequeues, handles and returns packets the manager wrote there."
    )


EXPERIMENT = Experiment(
    name="switch_cost",
    title="The floor of an NF activation: futex wake + switch, against tasks in rotation",
    seed="issue 4 E2 and issue 3 E1 (what bounds them here); DESIGN §10 (wake costs)",
    about=(
        "bench/switch_ring passes a token round a ring of N processes (or N threads of one "
        "process) pinned to core 1: each hop is a FUTEX_WAKE of the next task, a FUTEX_WAIT "
        "and a context switch, the least an NF activation costs the NF core. N from 2 to "
        "2,000 shows how the cost grows with the tasks in rotation (cache and TLB footprint). "
        "Beside it, Squall: a per-flow no-op service of 16, 128 and 1,000 NFs, the "
        "generator opening one short TCP connection at a time (one wake per flow), "
        "NF-core busy time per activation."
    ),
    run=run,
    summary_keys=(
        "ratio_proc_vs_thread",
        "ns_per_hop_proc_largest",
        "ns_per_activation_squall_largest",
    ),
    full_minutes=3,
)
