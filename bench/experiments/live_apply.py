"""Issue 14: run-time changes under traffic. A manager carries two chains at a
steady rate; one (steady: sig -> sig) never changes, the other (flip) is changed
by every apply, alternating between one hop and two. Counts what the unchanged
chain lost (the target: nothing), what the changed one lost and under which
cause, and how long an apply takes end to end (squallctl's call: load, check,
switch between two rx rounds, wait out the old config's readers)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from squall import control
from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.telemetry import Telemetry


def make_config(ctx: Context, name: str, flip_hops: list[str]) -> dict[str, Any]:
    svcs = [
        config.Service("sig1", "squall-nf-sig", ring_slots=4096),
        config.Service("sig2", "squall-nf-sig", ring_slots=4096),
        config.Service("f1", "squall-nf-fwd", ring_slots=4096),
        config.Service("f2", "squall-nf-fwd", ring_slots=4096),
    ]
    return config.manager_config(
        name,
        ports=[
            {"name": "a", "devargs": "net_null0,no-rx=1"},
            {"name": "b", "devargs": "net_null1,no-rx=1"},
            {"name": "outa", "devargs": "net_null2,no-rx=1"},
            {"name": "outb", "devargs": "net_null3,no-rx=1"},
        ],
        services=svcs,
        chains=[
            {"name": "steady", "services": ["sig1", "sig2"]},
            {"name": "flip", "services": flip_hops},
        ],
        rules=[
            {"in_port": "a", "chain": "steady", "out_port": "outa"},
            {"in_port": "b", "chain": "flip", "out_port": "outb"},
        ],
        gen=[  # type: ignore[arg-type]
            config.generator([64, 570, 1518], flows=256, port="a"),
            config.generator([64], flows=256, port="b"),
        ],
    )


def sig_counters(nfs: dict[str, Any], service: str) -> dict[str, int]:
    nf = next(n for n in nfs.values() if n["service"] == service)
    return {k: int(v) for k, v in nf["counters"].items()}


def one_run(
    ctx: Context, applies: int, rate_pps: int, rep: int, idle_s: float = 0.0
) -> dict[str, Any]:
    """applies > 0: that many applies as fast as they go; 0: the same traffic
    for idle_s with no apply (what this host loses anyway)."""
    name = ctx.manager_name()
    cfgs = [make_config(ctx, name, ["f1"]), make_config(ctx, name, ["f1", "f2"])]
    files = [Path(ctx.workdir) / f"apply-{rep}-{i}.yaml" for i in range(2)]
    for f, c in zip(files, cfgs, strict=True):
        f.write_text(config.to_yaml(c))
    with ctx.manager(cfgs[0], label=f"rep {rep}") as m:
        for port in ("a", "b"):
            m.query(f"/squall/gen_rate,{rate_pps},{port}")
        time.sleep(0.2)
        apply_ms: list[float] = []
        t_start = time.perf_counter()
        if applies == 0:
            time.sleep(idle_s)
        with Telemetry.connect(name=name) as tm:
            for i in range(applies):
                t0 = time.perf_counter()
                res = control.apply_file(tm, files[(i + 1) % 2])
                apply_ms.append((time.perf_counter() - t0) * 1000)
                if not res.applied:
                    raise RuntimeError(f"apply {i} made no change: {res}")
        busy_s = time.perf_counter() - t_start
        time.sleep(0.2)
        for port in ("a", "b"):
            m.query(f"/squall/gen_rate,0,{port}")
        sent_a = int(m.query("/squall/gen,a")["sent_pkts"])
        sent_b = int(m.query("/squall/gen,b")["sent_pkts"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            st = m.stats()
            if st["tx_pkts"] + st["drop_pkts"] == sent_a + sent_b:
                break
            time.sleep(0.05)
        ports = m.ports()
        nfs = m.nfs()
        s1, s2 = sig_counters(nfs, "sig1"), sig_counters(nfs, "sig2")
        st = m.stats()
    lost_a = sent_a - int(ports["outa"]["tx_pkts"])
    return {
        "applies": applies,
        "rate_pps": rate_pps,
        "sent_unaffected": sent_a,
        "lost_unaffected": lost_a,
        "sig_mismatch_unaffected": s2["sig_mismatch"],
        "sig_sums_equal": s1["sig_sum"] == s2["sig_sum"],
        "sent_changed": sent_b,
        "out_changed": int(ports["outb"]["tx_pkts"]),
        "config_changed": int(st["drops"].get("config_changed", 0)),
        "other_drops": int(st["drop_pkts"]) - int(st["drops"].get("config_changed", 0)),
        "apply_ms": [rounded(x, 3) for x in apply_ms],
        "busy_s": rounded(busy_s, 3),
        "drops": {k: int(v) for k, v in st["drops"].items() if v},
    }


def run(ctx: Context) -> None:
    applies = ctx.param("applies", 1000, 200)
    rate = ctx.param("rate_pps", 100_000, 50_000)
    runs = []
    baselines = []
    for rep in range(ctx.reps):
        r = one_run(ctx, applies, rate, rep)
        # the same traffic as long, no apply: what the host's own stalls cost
        b = one_run(ctx, 0, rate, rep, idle_s=float(r["busy_s"]))
        b.pop("apply_ms")
        ctx.sample("baseline", rep=rep, **b)
        baselines.append(b)
        ms = r.pop("apply_ms")
        ctx.sample("run", rep=rep, apply_ms=ms, **r)
        r["apply_ms"] = ms
        ctx.log(
            f"rep {rep}: {applies} applies, unaffected lost {r['lost_unaffected']} of "
            f"{r['sent_unaffected']:,}; changed chain: {r['config_changed']:,} config_changed of "
            f"{r['sent_changed']:,}; apply p50 {spread(ms)['median']:.2f} ms"
        )
        runs.append(r)
    all_ms = sorted(x for r in runs for x in r["apply_ms"])
    lost = sum(r["lost_unaffected"] + r["sig_mismatch_unaffected"] for r in runs)
    lost += sum(0 if r["sig_sums_equal"] else 1 for r in runs)
    ctx.summary["apply_lost_pkts_unaffected"] = lost
    # with no apply at all, the same traffic as long: a loss there is the
    # host's (a starved NF core filling a ring), not the applies'
    ctx.summary["no_apply_lost_pkts_unaffected"] = sum(
        b["lost_unaffected"] + b["sig_mismatch_unaffected"] for b in baselines
    )
    ctx.summary["applies_total"] = sum(r["applies"] for r in runs)
    ctx.summary["apply_ms_p50"] = rounded(all_ms[len(all_ms) // 2], 3)
    ctx.summary["apply_ms_p99"] = rounded(all_ms[min(len(all_ms) - 1, len(all_ms) * 99 // 100)], 3)
    ctx.summary["changed_config_changed_pkts_per_apply"] = rounded(
        sum(r["config_changed"] for r in runs) / max(1, ctx.summary["applies_total"]), 2
    )
    ctx.summary["changed_chain_other_drops"] = sum(r["other_drops"] for r in runs)
    r0 = runs[0]
    ctx.figure(
        Figure(
            "apply_latency",
            "Time of one apply (squallctl's call) under traffic",
            "apply number",
            "apply time (ms)",
            [
                Series(f"rep {i}", list(range(len(r["apply_ms"]))), r["apply_ms"], style=".")
                for i, r in enumerate(runs)
            ],
            caption=(
                f"{r0['applies']} applies alternating the flip chain between 1 and 2 hops, "
                f"{r0['rate_pps']:,} pps on each chain; the steady chain lost "
                f"{ctx.summary['apply_lost_pkts_unaffected']} packets."
            ),
        )
    )


EXPERIMENT = Experiment(
    name="live_apply",
    title="Run-time changes under traffic: what an apply costs the chains it does not touch",
    seed="issue 14 (operate a running Squall)",
    about=(
        "Two chains at a steady generator rate each: `steady` (sig -> sig, never changed) and "
        "`flip` (fwd, or fwd -> fwd), which every apply changes. `applies` applies alternate "
        "between the two configs as fast as squallctl's call returns. The unchanged chain must "
        "lose nothing: `apply_lost_pkts_unaffected` counts its packets not transmitted, plus "
        "any whose bytes changed between its two sig hops. The changed chain's in-flight "
        "packets are counted under `config_changed`. Apply time is the whole call: load, check, "
        "the switch between two rx rounds, and the wait for the old config's readers. Each rep "
        "is followed by the same traffic for as long with no apply: "
        "`no_apply_lost_pkts_unaffected` is what the host's own stalls cost that chain."
    ),
    run=run,
    summary_keys=("apply_lost_pkts_unaffected", "apply_ms_p50", "apply_ms_p99"),
    targets={"apply_lost_pkts_unaffected": "== 0"},
    full_minutes=1,
)
