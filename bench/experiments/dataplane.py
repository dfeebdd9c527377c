"""Issue 2's dataplane benchmark (bench/dataplane.py) run by the harness: the
same measurements and the same summary names, plus the harness's result
format (raw samples, commands, machine facts, figures)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.paths import ROOT

SCRIPT = ROOT / "bench" / "dataplane.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("squall_bench_dataplane_script", SCRIPT)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {SCRIPT}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(ctx: Context) -> None:
    dp = _script()
    seconds = ctx.param("seconds", 3.0, 1.0)
    starts = ctx.param("starts", 100, 20)
    for binary in (dp.MGR, dp.RING_LIMIT, dp.CHAIN_FLOOR):
        if not binary.exists():
            raise RuntimeError(f"{binary} missing: run `make build`")
    runs: dict[str, list[dict[str, Any]]] = {"chains": [], "limit": [], "floor": [], "testpmd": []}
    chains = runs["chains"]
    for rep in range(ctx.reps):
        for touch in (False, True):
            for what, tool in (("limit", dp.ring_limit), ("floor", dp.chain_floor)):
                mpps, cmd = tool(seconds, touch)
                runs[what].append({"touch": touch, "mpps": mpps})
                ctx.command(cmd, what=Path(cmd.split()[0]).name)
                ctx.sample(what, rep=rep, touch=touch, mpps=mpps)
                ctx.log(f"rep {rep}: {what}{' touch' if touch else ''} {mpps:.2f} Mpps")
        tp, cmd = dp.testpmd_io(seconds)
        if tp is None:
            ctx.unavailable["testpmd"] = f"{cmd}: no rate (dpdk-testpmd missing or silent)"
        else:
            runs["testpmd"].append({"mpps": tp})
            ctx.command(cmd, what="dpdk-testpmd")
            ctx.sample("testpmd_io", rep=rep, mpps=tp)
            ctx.log(f"rep {rep}: testpmd io on core 0 {tp:.2f} Mpps")
        for mode in ("poll", "sleep"):
            for n in (1, 2, 3):
                r = dp.run_chain(ctx.workdir, mode, n, seconds, warm_s=0.5)
                ctx.command(r["command"], what="squall-mgr", label=f"{mode} {n} NF")
                ctx.sample("chain", rep=rep, **r)
                chains.append(r)
                ctx.log(f"rep {rep}: {mode} {n} NF {r['mpps']:.2f} Mpps")
    mem = dp.idle_nf_memory(ctx.workdir)
    start_ms = dp.nf_start_times(ctx.workdir, starts)
    ctx.sample("idle_nf", **mem)
    ctx.sample("nf_start_ms", values=start_ms)

    ctx.summary.update(
        {k: rounded(v) for k, v in dp.summarize(runs, mem["nf_private_kb"], start_ms).items()}
    )
    limit = ctx.summary["mpps_limit_ring_rtt"]

    ser = []
    for mode, style in (("poll", "-o"), ("sleep", "-s")):
        sp = [
            spread(float(str(r["mpps"])) for r in chains if r["mode"] == mode and r["nfs"] == n)
            for n in (1, 2, 3)
        ]
        ser.append(
            Series(
                f"Squall, {mode} mode",
                [1, 2, 3],
                [x["median"] for x in sp],
                [x["min"] for x in sp],
                [x["max"] for x in sp],
                style,
            )
        )
    ser.append(Series("limit: ring round trip, no-op", [1, 2, 3], [limit] * 3, style="--"))
    ser.append(
        Series("target: 70% of the limit", [1, 2, 3], [0.7 * limit] * 3, style="--", color="red")
    )
    if runs["testpmd"]:
        tp = ctx.summary["mpps_testpmd_io_core0"]
        ser.append(Series("testpmd io on core 0, no NF", [1, 2, 3], [tp] * 3, style=":"))
    for key, label, style in (
        ("mpps_floor_1nf", "floor: rx, ring, no-op, ring, tx", "-."),
        ("mpps_floor_1nf_touch", "floor, no-op touches each packet", "v-."),
    ):
        if key in ctx.summary:
            ser.append(Series(label, [1, 2, 3], [ctx.summary[key]] * 3, style=style))
    ctx.figure(
        Figure(
            "chains",
            "64 B from net_null through chains of squall-nf-fwd (forwarded rate, not NDR)",
            "NFs in the chain",
            "throughput (Mpps, 64 B)",
            ser,
            caption="Manager on core 0, NFs on core 1; the source: a net_null port at full speed.",
        )
    )
    ctx.note(dp.__doc__.split("\n\n")[0].replace("\n", " ") if dp.__doc__ else "")


EXPERIMENT = Experiment(
    name="dataplane",
    title="Dataplane: forwarded rate of 1-3 NF chains against the ring limit, NF memory and start",
    seed="issue 2 (DESIGN.md §2 and §10 targets)",
    about=(
        "bench/dataplane.py's measurements: 64 B frames from a net_null port at full speed "
        "through chains of 1, 2 and 3 squall-nf-fwd in poll and sleep mode (the rate that "
        "leaves, whatever is dropped), next to bench/ring_limit (manager -> no-op -> manager "
        "through two rings), bench/chain_floor (the same with real mbufs from and to net_null "
        "ports: the least any manager does) and dpdk-testpmd in io mode from the same source "
        "on core 0 (no NF, no parsing: the most that core forwards); an idle NF's private "
        "memory; NF start-to-ready time."
    ),
    run=run,
    summary_keys=("ratio_1nf_sleep_vs_limit", "nf_private_kb", "nf_start_ms_p50"),
    targets={
        "ratio_1nf_sleep_vs_limit": ">= 0.70",
        "nf_private_kb": "<= 256",
        "nf_start_ms_p50": "<= 5",
    },
    needs_generator=False,
    full_minutes=2,
)
