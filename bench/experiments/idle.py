"""The manager's sleep when idle (issue 17; mgr/idle.h): its CPU over an idle
interval, the first packet's round trip after an idle gap, and the loss at a
step from idle to a full rate of real UDP, for several longest sleeps
(`manager.idle_sleep_max_us`; 0 = the busy poll) side by side in one run."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
from typing import Any

from squall.bench import netns, procstat, targets
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.manager import BenchError

SLEEPS_US = [0, 250, 1000, 2000]
DEFAULT_SLEEP_US = 1000  # config.c's default: the figure the target is on
# The af_xdp ports as tcp_peers's "squall" opens them: no preferred busy
# polling. The "busypoll" case keeps DPDK's default (busy_budget 64,
# SO_BUSY_POLL 20 us), which the examples use: does an idle wake's poll of
# an empty port cost more with it?
XDP_ARGS = ",busy_budget=0"
BUSYPOLL = "busypoll"
TOOLS = ["ping", "iperf3"]
# The step: 64 B UDP datagrams at a rate the busy-polling path carries with
# no loss of its own (at 195 kpps iperf3 lost 12-48% with the manager polling),
# so a loss the sleeping cases add is the sleep's.
STEP_RATE = "25M"


def case_label(sleep_us: int, busypoll: bool) -> str:
    return f"{sleep_us}us" + (f"_{BUSYPOLL}" if busypoll else "")


def squall_cfg(ctx: Context, sleep_us: int, busypoll: bool) -> dict[str, Any]:
    sq = targets.Squall(
        ctx.workdir,
        ctx.manager_name(),
        ["fwd"],
        port_kind="af_xdp",
        xdp_args="" if busypoll else XDP_ARGS,
    )
    cfg = sq.config()
    cfg["manager"]["idle_sleep_max_us"] = sleep_us
    return cfg


def idle_cpu_pct(pid: int, seconds: float) -> float:
    """The manager's CPU (every thread) over an idle interval, % of a core."""
    t0, r0 = time.monotonic(), procstat.runtime_ns(pid)
    time.sleep(seconds)
    return 100.0 * (procstat.runtime_ns(pid) - r0) / ((time.monotonic() - t0) * 1e9)


def ping_rtts_us(count: int, interval_s: float) -> list[float]:
    """Round trips of pings client -> server, one every interval_s (each
    finds the path idle for that long)."""
    cmd = netns.in_ns(
        netns.CLIENT_NS,
        ["ping", "-c", str(count), "-i", f"{interval_s:g}", "-W", "1", netns.SERVER_IP],
    )
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=count * interval_s + 30)
    rtts = [float(m) * 1000 for m in re.findall(r"time=([0-9.]+) ms", r.stdout)]
    if not rtts:
        raise BenchError(f"no ping replies: {r.stdout[-300:]}{r.stderr[-300:]}")
    return rtts


def udp_step(seconds: float, rate: str, size: int) -> dict[str, Any]:
    """iperf3 UDP client -> server at rate from the first moment (the path
    idle before): datagrams sent, lost."""
    cmd = netns.in_ns(
        netns.CLIENT_NS,
        ["iperf3", "-c", netns.SERVER_IP, "-p", str(netns.IPERF_PORT), "-u", "-b", rate,
         "-l", str(size), "-t", f"{seconds:g}", "-J"],
    )  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    try:
        end = json.loads(r.stdout)["end"]["sum"]
    except (json.JSONDecodeError, KeyError):
        raise BenchError(f"iperf3 -u: {r.stdout[-300:]}{r.stderr[-300:]}") from None
    return {"packets": int(end["packets"]), "lost": int(end["lost_packets"]), "cmd": cmd}


def measure(
    ctx: Context, case: tuple[int, bool], idle_s: float, pings: int, step: dict[str, Any]
) -> Any:
    sleep_us, busypoll = case
    cfg = squall_cfg(ctx, sleep_us, busypoll)
    with ctx.manager(cfg, label=f"sleep {case_label(*case)}") as m:
        netns.wait_path()
        time.sleep(1.0)  # the path's first packets out of the way
        assert m.proc is not None
        cpu = idle_cpu_pct(m.proc.pid, idle_s)
        rtts = ping_rtts_us(pings, 0.2)
        time.sleep(1.0)  # idle again before the step
        st = udp_step(step["seconds"], step["rate"], step["size"])
        ctx.command(st.pop("cmd"), what="iperf3 -u", case=case_label(*case))
        stats = m.query("/squall/stats")
        ports = m.query("/squall/ports")
    missed = sum(p.get("rx_eth_missed", 0) for p in ports.values() if isinstance(p, dict))
    return cpu, rtts, st, stats.get("idle", {}), missed


def run(ctx: Context) -> None:
    sleeps = ctx.param("sleeps_us", SLEEPS_US)
    cases = [(s, False) for s in sleeps] + [(DEFAULT_SLEEP_US, True)]
    idle_s = ctx.param("idle_s", 5.0, 2.0)
    pings = ctx.param("pings", 20, 10)
    step = {
        "seconds": ctx.param("step_s", 2.0, 1.0),
        "rate": ctx.param("step_rate", STEP_RATE),
        "size": ctx.param("step_size_bytes", 64),
    }
    missing = netns.missing_tools(TOOLS)
    if missing:
        raise BenchError(f"missing tools: {', '.join(missing)} (scripts/setup.sh installs them)")
    if (why := targets.squall_unavailable()) is not None:
        raise BenchError(why)
    res: dict[str, dict[str, list[float]]] = {case_label(*c): {} for c in cases}
    ctx.command(["scripts/netns.sh", "up"], what="namespaces")
    netns.netns("up")
    iperf = netns.start_iperf3_server(ctx.workdir)
    try:
        # Interleaved: a slow stretch of the machine hits every case alike.
        for rep in range(ctx.reps):
            for case in cases:
                cpu, rtts, st, idle, missed = measure(ctx, case, idle_s, pings, step)
                loss = st["lost"] / st["packets"] if st["packets"] else float("nan")
                label = case_label(*case)
                r = res[label]
                r.setdefault("cpu_pct", []).append(cpu)
                r.setdefault("rtt_p50_us", []).append(statistics.median(rtts))
                r.setdefault("rtt_max_us", []).append(max(rtts))
                r.setdefault("step_loss", []).append(loss)
                r.setdefault("step_missed", []).append(missed)
                ctx.sample("idle", rep=rep, sleep_us=case[0], busypoll=case[1],
                           cpu_pct=round(cpu, 3), rtts_us=rtts, step=st, idle=idle,
                           rx_eth_missed=missed)  # fmt: skip
                ctx.log(
                    f"sleep {label} rep {rep}: idle cpu {cpu:.2f}%, ping p50 "
                    f"{statistics.median(rtts):.0f} us, step loss {st['lost']}/{st['packets']}"
                    f" (port missed {missed}), sleeps {idle.get('sleeps')}"
                )
    finally:
        iperf.stop()
        netns.netns("down")

    for label, r in res.items():
        ctx.summary[f"mgr_idle_cpu_pct_sleep_{label}"] = rounded(spread(r["cpu_pct"])["median"], 2)
        ctx.summary[f"ping_rtt_us_p50_sleep_{label}"] = rounded(
            spread(r["rtt_p50_us"])["median"], 1
        )
        ctx.summary[f"step_loss_ratio_sleep_{label}"] = rounded(spread(r["step_loss"])["median"], 5)
        ctx.summary[f"step_rx_missed_sleep_{label}"] = max(r["step_missed"])
    default = case_label(DEFAULT_SLEEP_US, False)
    if default in res:
        ctx.summary["mgr_idle_cpu_pct"] = ctx.summary[f"mgr_idle_cpu_pct_sleep_{default}"]

    labels = list(res)
    xs = [lb.replace("us_", " ").removesuffix("us") for lb in labels]
    for key, fid, unit, title in (
        ("cpu_pct", "cpu", "manager CPU while idle (% of a core)", "Idle manager CPU"),
        ("rtt_p50_us", "rtt", "ping round trip, p50 (µs)", "First packet after 200 ms idle"),
    ):
        sp = [spread(res[lb][key]) for lb in labels]
        series = [
            Series(
                "Squall, median (min..max)",
                xs,
                [v["median"] for v in sp],
                [v["min"] for v in sp],
                [v["max"] for v in sp],
                "o",
            )
        ]
        if key == "cpu_pct":
            series.append(
                Series("target: <= 2% at the default (1000)", xs, [2.0] * len(xs), style="--")
            )
        ctx.figure(
            Figure(
                fid,
                title,
                "idle_sleep_max_us (0: poll)",
                unit,
                series,
                xscale="category",
                # (the busy poll's 100% beside the sleeps' few: a log axis)
                yscale="log" if key == "cpu_pct" else "linear",
                caption="squall-mgr, af_xdp ports (busy_budget=0 but in the busypoll case) on "
                "the test veths, one squall-nf-fwd.",
            )
        )
    ctx.note(
        "CPU: every thread of squall-mgr (/proc/PID/task/*/schedstat) over the idle "
        "interval, the namespaces quiet. Ping: one echo every 200 ms from ns client to ns "
        "server and back, each through the manager twice, each finding it asleep: veth "
        "ports have no rx interrupt in DPDK 22.11, but the manager waits in epoll on the "
        "af_xdp sockets the PMD reads (samples' idle.sock_ports, wakes_by_sock), so a frame "
        "ends its sleep; idle_sleep_max_us bounds only sleeps while NFs hold packets, and on "
        "ports with neither (idle.wakes_by_timer: the control period's, every 10 ms, and "
        "those). Step: iperf3 UDP at step_rate from the first moment, after "
        "a second idle; lost datagrams against sent (the kernel's own drops included, the "
        "same for every case) and the ports' rx_eth_missed (the af_xdp ring overflowing "
        "while the manager slept)."
    )


EXPERIMENT = Experiment(
    name="idle",
    title="The manager asleep when idle: CPU, first-packet latency, a step to full rate",
    seed="issue 17; seed 001 §10 (adaptive polling)",
    about=(
        "squall-mgr with af_xdp ports between ns client and ns server (scripts/netns.sh) and "
        "one L2 forwarder, for each manager.idle_sleep_max_us (0: the busy poll), interleaved "
        "over the repetitions: its CPU over an idle interval, ping round trips after 200 ms "
        "gaps, and the UDP loss of an iperf3 step from idle to a full rate."
    ),
    run=run,
    summary_keys=("mgr_idle_cpu_pct",),
    targets={"mgr_idle_cpu_pct": "<= 2"},
    needs_root=True,
    needs_generator=False,
    full_minutes=4,
)
