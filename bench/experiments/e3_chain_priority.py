"""E3 (issue 3): a 3-NF chain with per-packet costs 1:3:7 on one core,
overloaded, with chain-position-aware priorities (hop i at SCHED_RR base + i)
and without. Seed 000 §6.2, Fig. 8: aware, the overload is dropped at the
chain's entry before any work is spent on it, and throughput rises (2.5x in
Flurries)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.manager import Manager
from squall.bench.procstat import ProcSnap, proc_delta

RATES = [250_000, 500_000, 1_000_000, 2_000_000]
QUICK_RATES = [1_000_000]
CYCLES = [300, 900, 2100]  # 1:3:7
HOPS = ("h0", "h1", "h2")
# Per-NF telemetry counters recorded per hop (deltas over the window).
NF_COUNTERS = (
    "rx_pkts",
    "tx_pkts",
    "ring_full_drops",
    "tx_full_spins",
    "bursts",
    "sleeps",
    "wakes",
)
MODES = ("unaware", "aware")

# (the same small readers are in e2_cpu_vs_rate.py and e4_wake_policies.py)


# ---------------------------------------------------------------- experiment


def make_cfg(
    name: str, cycles: list[int], chain_priority: int, flows: int, nf_core: int, spin_us: int
) -> dict[str, Any]:
    svcs = [
        config.Service(h, "squall-nf-cost", [f"--cycles={c}"], spin_us=spin_us)
        for h, c in zip(HOPS, cycles, strict=True)
    ]
    return config.manager_config(
        name,
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=svcs,
        chains=[{"name": "c", "services": list(HOPS)}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=config.generator([64], flows=flows, rate_pps=0),
        nf_core=nf_core,
        chain_priority=chain_priority,
    )


@dataclass
class Counts:
    t: float
    sent: int
    fwd: int
    drops: int
    causes: dict[str, int]
    hop: dict[str, list[int]]  # NF_COUNTERS per hop

    @classmethod
    def read(cls, m: Manager) -> Counts:
        # The rate counters first, between two clock reads (a telemetry query
        # takes ~1 ms, more on a loaded machine); the rest after.
        t0 = time.monotonic()
        g = m.gen()
        out = m.ports()["out"]
        t1 = time.monotonic()
        nfs = {str(n["service"]): n for n in m.nfs().values()}
        st = m.stats()
        return cls(
            t=(t0 + t1) / 2,
            sent=int(g["sent_pkts"]),
            fwd=int(out["tx_pkts"]),
            drops=int(st["drop_pkts"]),
            causes={str(k): int(v) for k, v in (st.get("drops") or {}).items()},
            hop={k: [int(nfs[h].get(k, 0)) for h in HOPS] for k in NF_COUNTERS},
        )


def measure(
    ctx: Context, m: Manager, pids: list[int], core: int, rate: int, window_s: float, warm_s: float
) -> dict[str, Any]:
    m.set_rate(0)
    m.wait_idle(5.0)
    m.set_rate(rate)
    ctx.command(f"/squall/gen_rate,{rate}", what="telemetry", manager=m.name)
    time.sleep(warm_s)  # the rings fill: steady overload
    c0 = Counts.read(m)
    p0 = ProcSnap.take(core, pids)
    time.sleep(window_s)
    p1 = ProcSnap.take(core, pids)
    c1 = Counts.read(m)
    m.set_rate(0)
    wall = c1.t - c0.t
    hop = {k: [b - a for a, b in zip(c0.hop[k], c1.hop[k], strict=True)] for k in NF_COUNTERS}
    hop_drops, hop_rx = hop["ring_full_drops"], hop["rx_pkts"]
    causes = {k: v - c0.causes.get(k, 0) for k, v in c1.causes.items()}
    drops = c1.drops - c0.drops
    pwall = p1.t - p0.t
    hop_cpu = [100.0 * (p1.runtime_ns[p] - p0.runtime_ns[p]) / (pwall * 1e9) for p in pids]
    pd = proc_delta(p0, p1)
    return {
        "rate_pps": rate,
        "wall_s": round(wall, 4),
        "sent_pkts": c1.sent - c0.sent,
        "fwd_pkts": c1.fwd - c0.fwd,
        "drop_pkts": drops,
        "drops_by_cause": {k: v for k, v in causes.items() if v},
        "hop_ring_full_drops": hop_drops,
        "hop_rx_pkts": hop_rx,
        "hop_counters": hop,
        "offered_pps": round((c1.sent - c0.sent) / wall, 1),
        "delivered_pps": round((c1.fwd - c0.fwd) / wall, 1),
        "mid_chain_drops": sum(hop_drops[1:]),
        "pct_drops_mid_chain": round(100.0 * sum(hop_drops[1:]) / drops, 3) if drops else 0.0,
        "hop_cpu_pct": [round(x, 2) for x in hop_cpu],
        "cpu_pct": pd["cpu_pct"],
        "nf_cpu_pct": pd["nf_cpu_pct"],
        "ctxsw_per_s": pd["ctxsw_per_s"],
        "cpu_jiffies": pd["cpu_jiffies"],
        "loadavg": pd["loadavg"],
    }


def mpps_label(r: int) -> str:
    return f"{r / 1e6:g}"


def run(ctx: Context) -> None:
    cycles = ctx.param("cycles", CYCLES)
    rates = ctx.param("rates", RATES, QUICK_RATES)
    base = ctx.param("chain_priority", 10)
    flows = ctx.param("flows", 1024)
    # No spin: a real-time NF spinning on an empty ring keeps the lower hops
    # off the core (20 us gave 0.54x of chain-unaware here, 0 us 0.70x).
    spin_us = ctx.param("spin_us", 0)
    window_s = ctx.param("window_s", 2.0, 0.5)
    warm_s = ctx.param("warmup_s", 0.5, 0.3)
    core = ctx.param("nf_core", 1)
    if len(cycles) != len(HOPS):
        raise ValueError(f"cycles: {len(HOPS)} values, one per hop (got {cycles})")
    res: dict[tuple[str, int], list[dict[str, Any]]] = {}
    prios: dict[str, list[int]] = {}
    for rep in range(ctx.reps):
        for mode in MODES:
            prio = base if mode == "aware" else 0
            cfg = make_cfg(ctx.manager_name(), cycles, prio, flows, core, spin_us)
            with ctx.manager(cfg, label=f"chain-{mode}, rep {rep}") as m:
                nfs = {str(n["service"]): n for n in m.nfs().values()}
                pids = [int(nfs[h]["pid"]) for h in HOPS]
                prios[mode] = [int(nfs[h]["sched_priority"]) for h in HOPS]
                for rate in rates:
                    s = measure(ctx, m, pids, core, rate, window_s, warm_s)
                    ctx.sample(
                        "trial", mode=mode, rep=rep, chain_priority=prio, prios=prios[mode], **s
                    )
                    res.setdefault((mode, rate), []).append(s)
                    ctx.log(
                        f"{mode:7} rep {rep} {rate / 1e6:4g} Mpps: delivered "
                        f"{s['delivered_pps'] / 1e6:.3f} Mpps, ring-full drops per hop "
                        f"{s['hop_ring_full_drops']}, hop CPU % {s['hop_cpu_pct']}"
                    )
    if prios.get("aware") != [base + i for i in range(len(HOPS))]:
        ctx.note(
            f"chain-aware run: sched_priority read back {prios.get('aware')}, expected "
            f"{[base + i for i in range(len(HOPS))]} (no right to SCHED_RR? the manager "
            "then uses nice)"
        )

    def med(mode: str, rate: int, key: str, i: int | None = None) -> float:
        vals = [float(s[key] if i is None else s[key][i]) for s in res[mode, rate]]
        return spread(vals)["median"]

    top = max(rates)
    aware, unaware = med("aware", top, "delivered_pps"), med("unaware", top, "delivered_pps")
    ctx.summary["ratio_chain_aware_vs_unaware"] = rounded(aware / unaware if unaware else 0.0)
    ctx.summary["mpps_chain_aware"] = rounded(aware / 1e6, 4)
    ctx.summary["mpps_chain_unaware"] = rounded(unaware / 1e6, 4)
    for mode in MODES:
        ctx.summary[f"pct_drops_mid_chain_{mode}"] = rounded(
            med(mode, top, "pct_drops_mid_chain"), 2
        )
    for rate in rates:
        for mode in MODES:
            ctx.summary[f"mpps_chain_{mode}_{mpps_label(rate)}mpps"] = rounded(
                med(mode, rate, "delivered_pps") / 1e6, 4
            )
    ctx.summary["offered_mpps_top"] = rounded(top / 1e6, 3)

    label = {
        "aware": f"chain-aware (SCHED_RR {base}, {base + 1}, {base + 2})",
        "unaware": "normal scheduler",
    }
    color = {"aware": "C0", "unaware": "C1"}
    xs = [r / 1e6 for r in rates]
    ser = []
    for mode in MODES:
        sp = [spread(float(s["delivered_pps"]) / 1e6 for s in res[mode, r]) for r in rates]
        ser.append(
            Series(
                label[mode],
                xs,
                [x["median"] for x in sp],
                [x["min"] for x in sp],
                [x["max"] for x in sp],
                "-o",
                color=color[mode],
            )
        )
    ctx.figure(
        Figure(
            "throughput",
            "E3: delivered throughput of a 1:3:7 chain on one core, overloaded",
            "offered rate (Mpps, 64 B frames)",
            "delivered (Mpps)",
            ser,
            caption=(
                f"Three squall-nf-cost NFs ({', '.join(str(c) for c in cycles)} TSC cycles per "
                f"packet) in sleep mode on core {core}; median of {ctx.reps} repetitions, bars "
                "min..max."
            ),
        )
    )
    hop_names = [f"hop {i} ({c} cyc){' entry' if i == 0 else ''}" for i, c in enumerate(cycles)]
    ser = []
    for mode in MODES:
        for i_style, (key, what, scale) in enumerate(
            (("hop_ring_full_drops", "drops", 1e-6), ("hop_rx_pkts", "processed", 1e-6))
        ):
            per_hop = [
                spread(float(s[key][i]) * scale / float(s["wall_s"]) for s in res[mode, top])
                for i in range(len(HOPS))
            ]
            ser.append(
                Series(
                    f"{mode}: {what}",
                    hop_names,
                    [v["median"] for v in per_hop],
                    [v["min"] for v in per_hop],
                    [v["max"] for v in per_hop],
                    ("-s" if i_style == 0 else ":o"),
                    color=color[mode],
                )
            )
    ctx.figure(
        Figure(
            "drops_per_hop",
            f"E3: where packets are dropped and processed, {top / 1e6:g} Mpps offered",
            "hop of the chain",
            "rate (Mpps)",
            ser,
            xscale="category",
            caption=(
                "Drops: packets dropped because that hop's rx ring was full (the entry's "
                "are dropped before any work; later hops' after work on earlier hops). "
                "Processed: packets the hop's NF received."
            ),
        )
    )
    ser = []
    for mode in MODES:
        vals = [spread(float(s["hop_cpu_pct"][i]) for s in res[mode, top]) for i in range(3)]
        ser.append(
            Series(
                label[mode],
                hop_names,
                [v["median"] for v in vals],
                [v["min"] for v in vals],
                [v["max"] for v in vals],
                "-o",
                color=color[mode],
            )
        )
    ideal = [100.0 * c / sum(cycles) for c in cycles]
    ser.append(Series("share of the per-packet cost", hop_names, ideal, style="--x", color="C2"))
    ctx.figure(
        Figure(
            "cpu_per_hop",
            f"E3: CPU time per hop, {top / 1e6:g} Mpps offered (seed 000 Fig. 8b)",
            "hop of the chain",
            f"CPU time (% of core {core})",
            ser,
            xscale="category",
            caption=(
                "From /proc/PID/task/*/schedstat. With no wasted work each hop's share "
                "matches its share of the per-packet cost (dashed)."
            ),
        )
    )
    ctx.note(
        "The machine has 2 cores: the manager (rx, tx, wakeup) and its generator share core 0, "
        f"the three NFs share core {core}. The chain's compute alone ({sum(cycles)} cycles per "
        "packet) bounds it at tsc_hz / that, e.g. ~0.6 Mpps at 2 GHz, before any switching."
    )
    ctx.note(
        "SCHED_RR tasks are throttled to sched_rt_runtime_us / sched_rt_period_us (95% by "
        "default) of the core; chain-aware NFs are real-time, so the last 5% goes to other "
        "tasks on the core. A SCHED_RR NF that spins before sleeping (spin_us) keeps "
        "lower-priority hops off the core while it spins."
    )


EXPERIMENT = Experiment(
    name="e3_chain_priority",
    title="E3: chain-position-aware priorities on an overloaded 1:3:7 chain",
    seed="seed 000 §5.2 and §6.2, Fig. 8; issue 3 E3",
    about=(
        "A chain of three squall-nf-cost NFs spinning 300, 900 and 2100 TSC cycles per packet "
        "(1:3:7), all in sleep mode on core 1; the manager's generator offers 64 B UDP frames "
        "over 1024 flows at 0.25, 0.5, 1 and 2 Mpps (the chain's compute alone caps it near "
        "0.6 Mpps). Twice per repetition, each with a fresh manager: without priorities "
        "(normal scheduler) and with manager.chain_priority: 10 (hops at SCHED_RR 10, 11, "
        "12). A 2 s window after 0.5 s of warm-up counts delivered packets (the out port's "
        "tx), each hop's ring-full drops (at hop 0 = the chain's entry, hops 1-2 = "
        "mid-chain, after work was spent), the manager's drops by cause and each NF's CPU "
        "time. Expected, as in Flurries: unaware, hop 0 takes more than its share of the core "
        "and overload is dropped mid-chain; aware, drops move to the entry and the "
        "throughput at overload rises (Flurries: 2.5x)."
    ),
    run=run,
    summary_keys=(
        "ratio_chain_aware_vs_unaware",
        "mpps_chain_aware",
        "mpps_chain_unaware",
        "pct_drops_mid_chain_aware",
        "pct_drops_mid_chain_unaware",
    ),
    full_minutes=2,
)
