"""E4 (issue 3): wake policies on a mix of latency-sensitive and bulk traffic
sharing one NF core: min, fixed 32 pkts / 100 us, fixed 32 pkts / 1 ms and
adaptive. Seed 000 §5.1 and §6.3, Table 2."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.manager import Manager
from squall.bench.procstat import ProcSnap, proc_delta

CLASSES = ("lat", "bulk")
NF_COUNTERS = (
    "rx_pkts",
    "wakes",
    "wakes_by_thresh",
    "wakes_by_timeout",
    "wakes_by_urgent",
    "sleeps",
    "ring_full_drops",
)


@dataclass(frozen=True)
class Policy:
    name: str  # in summary names
    label: str
    wake: dict[str, Any]  # services[].wake


POLICIES = [
    Policy("min", "min (wake at 1 pkt)", {"policy": "min"}),
    Policy(
        "fixed100us",
        "fixed 32 pkts / 100 us",
        {"policy": "fixed", "thresh_pkts": 32, "timeout_us": 100},
    ),
    Policy(
        "fixed1ms",
        "fixed 32 pkts / 1 ms",
        {"policy": "fixed", "thresh_pkts": 32, "timeout_us": 1000},
    ),
    # seed 000 §6.3: "during flow startup it mimics the Min technique, but once
    # flows are established it uses an adaptive threshold and a 1ms timeout".
    Policy("adaptive", "adaptive (T_lat 36, 1 ms)", {"policy": "adaptive", "timeout_us": 1000}),
]

# (the same small readers are in e2_cpu_vs_rate.py and e3_chain_priority.py)


# ---------------------------------------------------------------- experiment


def make_cfg(
    name: str,
    wake: dict[str, Any],
    nfs_per_class: int,
    flows: dict[str, int],
    nf_core: int,
    spin_us: int,
) -> dict[str, Any]:
    svcs = [
        config.Service(c, "squall-nf-fwd", instances=nfs_per_class, spin_us=spin_us, wake=wake)
        for c in CLASSES
    ]
    ports = [{"name": c, "devargs": f"net_null{i},no-rx=1"} for i, c in enumerate(CLASSES)]
    ports.append({"name": "out", "devargs": f"net_null{len(CLASSES)},no-rx=1"})
    cfg = config.manager_config(
        name,
        ports=ports,
        services=svcs,
        chains=[{"name": c, "services": [c]} for c in CLASSES],
        rules=[{"in_port": c, "chain": c, "out_port": "out"} for c in CLASSES],
        nf_core=nf_core,
    )
    cfg["generator"] = [config.generator([64], flows=flows[c], port=c) for c in CLASSES]
    return cfg


@dataclass
class Counts:
    t: float
    sent: dict[str, int]  # per class: the generator's
    chain_rx: dict[str, int]
    chain_tx: dict[str, int]
    nf: dict[str, dict[str, int]]  # class -> NF_COUNTERS summed over its NFs
    drops: dict[str, int]  # by cause

    @classmethod
    def read(cls, m: Manager) -> Counts:
        # The rate counters first, between two clock reads (a telemetry query
        # takes ~1 ms, more on a loaded machine); the rest after.
        t0 = time.monotonic()
        sent = {c: int(m.query(f"/squall/gen,{c}")["sent_pkts"]) for c in CLASSES}
        ch = m.chains()
        t1 = time.monotonic()
        nfs = m.nfs().values()
        st = m.stats()
        return cls(
            t=(t0 + t1) / 2,
            sent=sent,
            chain_rx={c: int(ch[c]["rx_pkts"]) for c in CLASSES},
            chain_tx={c: int(ch[c]["tx_pkts"]) for c in CLASSES},
            nf={
                c: {k: sum(int(n.get(k, 0)) for n in nfs if n["service"] == c) for k in NF_COUNTERS}
                for c in CLASSES
            },
            drops={str(k): int(v) for k, v in (st.get("drops") or {}).items()},
        )


def measure(
    ctx: Context,
    m: Manager,
    pids: dict[str, list[int]],
    core: int,
    rates: dict[str, int],
    window_s: float,
    warm_s: float,
) -> dict[str, Any]:
    for c in CLASSES:
        m.query(f"/squall/gen_rate,{rates[c]},{c}")
        ctx.command(f"/squall/gen_rate,{rates[c]},{c}", what="telemetry", manager=m.name)
    time.sleep(warm_s)  # adaptive thresholds settle; queues reach steady state
    m.query("/squall/latency_reset")
    time.sleep(0.01)  # the tx role clears the histograms at its next round
    all_pids = [p for c in CLASSES for p in pids[c]]
    c0 = Counts.read(m)
    p0 = ProcSnap.take(core, all_pids)
    time.sleep(window_s)
    p1 = ProcSnap.take(core, all_pids)
    ch = m.chains()
    nfs = m.nfs().values()
    c1 = Counts.read(m)
    for c in CLASSES:
        m.query(f"/squall/gen_rate,0,{c}")
    wall = c1.t - c0.t
    pwall = p1.t - p0.t
    pd = proc_delta(p0, p1)
    out: dict[str, Any] = {
        "wall_s": round(wall, 4),
        "cpu_pct": pd["cpu_pct"],
        "nf_cpu_pct": pd["nf_cpu_pct"],
        "ctxsw_per_s": pd["ctxsw_per_s"],
        "cpu_jiffies": pd["cpu_jiffies"],
        "loadavg": pd["loadavg"],
        "drops_by_cause": {
            k: v - c0.drops.get(k, 0) for k, v in c1.drops.items() if v - c0.drops.get(k, 0)
        },
    }
    for c in CLASSES:
        cs = sum(p1.ctxsw[p] - p0.ctxsw[p] for p in pids[c])
        rt = sum(p1.runtime_ns[p] - p0.runtime_ns[p] for p in pids[c])
        thresh = sorted(int(n["wake_thresh_pkts"]) for n in nfs if n["service"] == c)
        out[c] = {
            "rate_pps": rates[c],
            "offered_pps": round((c1.sent[c] - c0.sent[c]) / wall, 1),
            "delivered_pps": round((c1.chain_tx[c] - c0.chain_tx[c]) / wall, 1),
            "chain_rx_pkts": c1.chain_rx[c] - c0.chain_rx[c],
            "chain_tx_pkts": c1.chain_tx[c] - c0.chain_tx[c],
            "lat_count": int(ch[c]["lat_count"]),
            "lat_mean_ns": int(ch[c].get("lat_mean_ns", 0)),
            "lat_p50_ns": int(ch[c]["lat_p50_ns"]),
            "lat_p99_ns": int(ch[c]["lat_p99_ns"]),
            "lat_p999_ns": int(ch[c]["lat_p999_ns"]),
            "ctxsw_per_s": round(cs / pwall, 1),
            "nf_cpu_pct": round(100.0 * rt / (pwall * 1e9), 3),
            "nf": {k: c1.nf[c][k] - c0.nf[c][k] for k in NF_COUNTERS},
            "wake_thresh_pkts_end": thresh,
        }
    return out


def run(ctx: Context) -> None:
    names = ctx.param("policies", [p.name for p in POLICIES])
    n = ctx.param("nfs_per_class", 10)
    lat_pps = ctx.param("lat_pps", 2_000)
    lat_flows = ctx.param("lat_flows", 200)
    bulk_pps = ctx.param("bulk_pps", 1_000_000)
    bulk_flows = ctx.param("bulk_flows", 16)
    spin_us = ctx.param("spin_us", 20)
    window_s = ctx.param("window_s", 5.0, 1.0)
    warm_s = ctx.param("warmup_s", 1.0, 0.3)
    core = ctx.param("nf_core", 1)
    policies = [p for p in POLICIES if p.name in names]
    rates = {"lat": lat_pps, "bulk": bulk_pps}
    flows = {"lat": lat_flows, "bulk": bulk_flows}
    res: dict[str, list[dict[str, Any]]] = {p.name: [] for p in policies}
    for rep in range(ctx.reps):
        for pol in policies:
            cfg = make_cfg(ctx.manager_name(), pol.wake, n, flows, core, spin_us)
            with ctx.manager(cfg, label=f"{pol.name}, rep {rep}") as m:
                nfs = m.nfs().values()
                pids = {c: [int(x["pid"]) for x in nfs if x["service"] == c] for c in CLASSES}
                s = measure(ctx, m, pids, core, rates, window_s, warm_s)
            ctx.sample("policy", policy=pol.name, rep=rep, wake=pol.wake, **s)
            res[pol.name].append(s)
            ctx.log(
                f"{pol.name:10} rep {rep}: lat p50 {s['lat']['lat_p50_ns'] / 1e3:.1f} "
                f"p99 {s['lat']['lat_p99_ns'] / 1e3:.1f} us, bulk "
                f"{s['bulk']['delivered_pps'] / 1e6:.3f} Mpps (p99 "
                f"{s['bulk']['lat_p99_ns'] / 1e3:.1f} us), {s['ctxsw_per_s']:,.0f} ctxsw/s, "
                f"core {core} {s['cpu_pct']:.1f}%"
            )

    def med(p: str, key: str, cls: str | None = None, scale: float = 1.0) -> dict[str, float]:
        return spread(float(s[key] if cls is None else s[cls][key]) * scale for s in res[p])

    for p in res:
        ctx.summary[f"p50_us_lat_{p}"] = rounded(med(p, "lat_p50_ns", "lat", 1e-3)["median"], 2)
        ctx.summary[f"p99_us_lat_{p}"] = rounded(med(p, "lat_p99_ns", "lat", 1e-3)["median"], 2)
        ctx.summary[f"mpps_bulk_{p}"] = rounded(med(p, "delivered_pps", "bulk", 1e-6)["median"], 4)
        ctx.summary[f"ctxsw_per_s_{p}"] = rounded(med(p, "ctxsw_per_s")["median"], 0)
        ctx.summary[f"cpu_pct_{p}"] = rounded(med(p, "cpu_pct")["median"], 2)
        ctx.summary[f"p99_us_bulk_{p}"] = rounded(med(p, "lat_p99_ns", "bulk", 1e-3)["median"], 2)
        ctx.summary[f"kpps_lat_{p}"] = rounded(med(p, "delivered_pps", "lat", 1e-3)["median"], 3)

    labels = [p.name for p in policies if p.name in res]

    def series(
        key: str, label: str, style: str, cls: str | None, scale: float, **kw: Any
    ) -> Series:
        sp = [med(p, key, cls, scale) for p in labels]
        return Series(
            label,
            labels,
            [x["median"] for x in sp],
            [x["min"] for x in sp],
            [x["max"] for x in sp],
            style,
            **kw,
        )

    ctx.figure(
        Figure(
            "latency",
            "E4: rx-to-tx latency per traffic class and wake policy",
            "wake policy (all 2 x 10 NFs)",
            "latency (us)",
            [
                series("lat_p50_ns", "latency class p50", "-o", "lat", 1e-3, color="C0"),
                series("lat_p99_ns", "latency class p99", "--o", "lat", 1e-3, color="C0"),
                series("lat_p50_ns", "bulk class p50", "-s", "bulk", 1e-3, color="C1"),
                series("lat_p99_ns", "bulk class p99", "--s", "bulk", 1e-3, color="C1"),
            ],
            xscale="category",
            yscale="log",
            caption=(
                f"Latency class: {lat_pps:,} pps over {lat_flows} flows; bulk: {bulk_pps:,} pps "
                f"over {bulk_flows} flows; {n} squall-nf-fwd NFs per class on core {core}. "
                f"Median of {ctx.reps} runs, bars min..max."
            ),
        )
    )
    ctx.figure(
        Figure(
            "throughput",
            "E4: delivered throughput per traffic class and wake policy",
            "wake policy",
            "bulk class delivered (Mpps)",
            [
                series("delivered_pps", "bulk class (left)", "-s", "bulk", 1e-6, color="C1"),
                series(
                    "delivered_pps",
                    "latency class (right)",
                    "-o",
                    "lat",
                    1e-3,
                    color="C0",
                    axis="right",
                ),
            ],
            xscale="category",
            ylabel2="latency class delivered (kpps)",
            caption=f"Offered: bulk {bulk_pps / 1e6:g} Mpps, latency class {lat_pps / 1e3:g} kpps.",
        )
    )
    ctx.figure(
        Figure(
            "ctxsw_cpu",
            "E4: context switches and CPU use per wake policy",
            "wake policy",
            "context switches (thousands per s)",
            [
                series(
                    "ctxsw_per_s",
                    f"NF context switches, all {2 * n} NFs",
                    "-o",
                    None,
                    1e-3,
                    color="C0",
                ),
                series(
                    "cpu_pct",
                    f"core {core} busy (right)",
                    "--s",
                    None,
                    1.0,
                    axis="right",
                    color="C3",
                ),
            ],
            xscale="category",
            ylabel2=f"core {core} busy (%)",
            caption="Context switches: voluntary + involuntary, /proc/PID/task/*/status.",
        )
    )
    ctx.note(
        "The machine has 2 cores: the manager (rx, tx, wakeup) and both generators share "
        f"core 0; the 2 x {n} NFs share core {core}. The traffic is open-loop UDP: the "
        "latency class's throughput is what was offered unless packets are dropped, where the "
        "seed's web requests/s fall as latency rises (closed loop)."
    )
    ctx.note(
        "Squall's adaptive policy classifies per NF, not per flow: an NF wakes at 1 packet "
        "until it has been sent t_lat_pkts (36) packets in its lifetime, then batches. Each "
        "latency-class NF passes 36 packets within a fraction of a second, so after the "
        "warm-up it batches like the bulk NFs do; Flurries counted per flow, so short "
        "request/response flows stayed at threshold 1."
    )


EXPERIMENT = Experiment(
    name="e4_wake_policies",
    title="E4: wake policies (min, fixed 100 us, fixed 1 ms, adaptive) on mixed traffic",
    seed="seed 000 §5.1 and §6.3, Table 2; issue 3 E4",
    about=(
        "Two traffic classes from two of the manager's generators on two net_null ports, "
        "steered by in_port rules to two chains with their own service of 10 squall-nf-fwd "
        "instances each, all 20 NFs in sleep mode on core 1: a latency-sensitive class of "
        "2,000 pps over 200 flows (10 pps per flow, like request/response traffic) and a "
        "bulk class of 1 Mpps over 16 flows. Every NF gets the same wake policy, one fresh "
        "manager per policy: min (wake at the first packet), fixed 32 packets or 100 us, "
        "fixed 32 packets or 1 ms, and adaptive (1 packet for the first 36, then +1 per wake "
        "by threshold, halved per wake by timeout; 1 ms timeout as in the seed). After 1 s of "
        "warm-up the chains' histograms are reset and a 5 s window measures per class the "
        "delivered rate and the rx-to-tx latency p50/p99, the NFs' context switches "
        "(/proc/PID/status) and core 1's busy share (/proc/stat); 3 repetitions. Expected, "
        "as in the seed's Table 2: min has the most context switches and the lowest latency "
        "for the latency class; fixed thresholds add up to their timeout to the latency "
        "class's packets; adaptive should keep the latency of min with fewer switches."
    ),
    run=run,
    summary_keys=tuple(
        f"{k}_{p.name}"
        for p in POLICIES
        for k in ("p99_us_lat", "p50_us_lat", "mpps_bulk", "ctxsw_per_s", "cpu_pct")
    ),
    full_minutes=3,
)
