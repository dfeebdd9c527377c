"""Issue 2's dataplane benchmark (bench/dataplane.py) run by the harness: the
same measurements and the same summary names, plus the harness's result
format (raw samples, commands, machine facts, figures)."""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import statistics
import subprocess
from types import ModuleType

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


def ring_limit(dp: ModuleType, seconds: float, touch: bool) -> tuple[float, str]:
    """bench/dataplane.py's ring_limit(), bounded: the tool can hang (its no-op
    child spins on a full tx ring after the parent stopped draining it), so it
    runs in its own process group, all of which is killed after a timeout."""
    cmd = [str(dp.RING_LIMIT), str(seconds), "0", "1", "32", "1024", "1" if touch else "0"]
    timeout = seconds + 30
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"{shlex.join(cmd)}: no result after {timeout:g} s") from None
    except BaseException:  # Ctrl-C, SIGTERM: nothing of it may outlive the run
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0 or not out.startswith("mpps"):
        raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}: {err.strip()}")
    return float(out.split()[1]), shlex.join(cmd)


def run(ctx: Context) -> None:
    dp = _script()
    seconds = ctx.param("seconds", 3.0, 1.0)
    starts = ctx.param("starts", 100, 20)
    for binary in (dp.MGR, dp.RING_LIMIT):
        if not binary.exists():
            raise RuntimeError(f"{binary} missing: run `make build`")
    chains: list[dict[str, object]] = []
    limits: dict[bool, list[float]] = {False: [], True: []}
    testpmd: list[float] = []
    for rep in range(ctx.reps):
        for touch in (False, True):
            mpps, cmd = ring_limit(dp, seconds, touch)
            limits[touch].append(mpps)
            ctx.command(cmd, what="ring_limit")
            ctx.sample("limit", rep=rep, touch=touch, mpps=mpps)
        tp, cmd = dp.testpmd_io(seconds)
        if tp is None:
            ctx.unavailable["testpmd"] = f"{cmd}: no rate (dpdk-testpmd missing or silent)"
        else:
            testpmd.append(tp)
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

    def med(mode: str, n: int) -> float:
        return statistics.median(
            float(str(r["mpps"])) for r in chains if r["mode"] == mode and r["nfs"] == n
        )

    limit, limit_touch = statistics.median(limits[False]), statistics.median(limits[True])
    s = ctx.summary
    s["mpps_limit_ring_rtt"] = rounded(limit)
    s["mpps_limit_ring_rtt_touch"] = rounded(limit_touch)
    for mode in ("poll", "sleep"):
        for n in (1, 2, 3):
            s[f"mpps_{n}nf_{mode}"] = rounded(med(mode, n))
    s["ratio_1nf_sleep_vs_limit"] = rounded(med("sleep", 1) / limit)
    s["ratio_1nf_sleep_vs_limit_touch"] = rounded(med("sleep", 1) / limit_touch)
    s["ratio_1nf_sleep_vs_1nf_poll"] = rounded(med("sleep", 1) / med("poll", 1))
    if testpmd:
        tp = statistics.median(testpmd)
        s["mpps_testpmd_io_core0"] = rounded(tp)
        s["ratio_testpmd_io_vs_limit"] = rounded(tp / limit)
        s["ratio_1nf_sleep_vs_testpmd_io"] = rounded(med("sleep", 1) / tp)
    s["nf_private_kb"] = mem["nf_private_kb"]
    s["nf_start_ms_p50"] = rounded(statistics.median(start_ms))
    s["nf_start_ms_max"] = rounded(max(start_ms))

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
    if testpmd:
        tp = statistics.median(testpmd)
        ser.append(Series("testpmd io on core 0, no NF", [1, 2, 3], [tp] * 3, style=":"))
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
        "through two rings) and dpdk-testpmd in io mode from the same source on core 0 (no NF, "
        "no parsing: the most that core forwards); an idle NF's private memory; NF "
        "start-to-ready time."
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
