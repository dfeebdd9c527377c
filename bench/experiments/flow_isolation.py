"""Issue 4 E4 (seed 000 §6.2, Table 1): latency-sensitive web requests and a
bulk iperf3 transfer through the same NF type at once. With rss the bulk flow
shares its NF with some web connections; per-flow gives every connection its
own NF. Web requests/s and latency, iperf3 throughput, for each."""

from __future__ import annotations

import threading
from typing import Any

from squall.bench import config, netns, targets
from squall.bench.experiment import (
    Context,
    Experiment,
    Figure,
    Series,
    rounded,
    spread,
    spread_series,
)
from squall.bench.manager import BenchError

TOOLS = ["iperf3", "wrk", "ping"]
# Each NF spends this many TSC cycles per packet, so an NF that carries the
# bulk flow is busy and whoever shares it waits (seed 000 used real NFs).
NF_CYCLES = 2000


def make_cfg(name: str, assign: str, nfs: int) -> dict[str, Any]:
    svc = config.Service(
        "nf",
        "squall-nf-cost",
        [f"--cycles={NF_CYCLES}"],
        instances=nfs,
        ring_slots=1024,
        pool_fallback="queue" if assign == "per-flow" else None,
    )
    return targets.flow_config(
        name,
        svc,
        assign,
        region_mb=256,
        mbufs=32767,
        flow_linger_ms=50,
        flow_idle_timeout_ms=30000,
    )


def measure(ctx: Context, assign: str, nfs: int, seconds: float, conns: int) -> dict[str, Any]:
    with ctx.manager(make_cfg(ctx.manager_name(), assign, nfs), label=f"{assign}, {nfs} NFs"):
        netns.wait_path()
        bulk: dict[str, Any] = {}

        def run_iperf() -> None:
            try:
                bulk["r"], bulk["cmd"] = netns.iperf3(seconds + 2)
            except BenchError as e:
                bulk["error"] = str(e)

        t = threading.Thread(target=run_iperf, daemon=True)
        t.start()
        try:
            threading.Event().wait(1.0)  # iperf3 at full speed before the web load
            web, wcmd = netns.wrk(seconds, conns)
        finally:
            t.join(timeout=seconds + 40)
    if "error" in bulk:
        raise BenchError(f"iperf3: {bulk['error']}")
    ctx.command(wcmd, what="wrk", assign=assign)
    ctx.command(bulk["cmd"], what="iperf3", assign=assign)
    return {
        "web_rps": web["rps"],
        "web_p50_us": web["p50_us"],
        "web_p99_us": web["p99_us"],
        "web_errors": web["socket_errors"],
        "iperf_gbps": bulk["r"]["gbps"],
        "iperf_retransmits": bulk["r"]["retransmits"],
    }


def run(ctx: Context) -> None:
    seconds = ctx.param("seconds", 8.0, 2.0)
    conns = ctx.param("web_conns", 16)
    rss_nfs = ctx.param("rss_nfs", 4)
    pool = ctx.param("per_flow_pool", 64)
    targets.require_netns(TOOLS)
    setups = [("rss", rss_nfs), ("per-flow", pool)]
    res: dict[str, list[dict[str, Any]]] = {}
    ctx.command(["scripts/netns.sh", "up"], what="namespaces")
    netns.netns("up")
    servers: list[netns.Background] = []
    try:
        servers.append(netns.start_iperf3_server(ctx.workdir))
        http, http_name = netns.start_http_server(ctx.workdir, 1024)
        servers.append(http)
        ctx.params["http_server"] = http_name
        for rep in range(ctx.reps):
            for assign, nfs in setups:
                r = measure(ctx, assign, nfs, seconds, conns)
                ctx.sample("point", assign=assign, nfs=nfs, rep=rep, **r)
                ctx.log(
                    f"{assign:8} ({nfs} NFs): web {r['web_rps']:8,.0f} req/s, p50 "
                    f"{r['web_p50_us'] / 1e3:.2f} ms, p99 {r['web_p99_us'] / 1e3:.2f} ms; "
                    f"iperf3 {r['iperf_gbps']:.2f} Gbit/s"
                )
                res.setdefault(assign, []).append(r)
    finally:
        for s in servers:
            s.stop()
        netns.netns("down")

    def med(assign: str, key: str) -> float:
        return spread(float(r[key]) for r in res[assign])["median"]

    for assign, _ in setups:
        a = assign.replace("-", "_")
        ctx.summary[f"web_rps_{a}"] = rounded(med(assign, "web_rps"), 0)
        ctx.summary[f"web_p50_ms_{a}"] = rounded(med(assign, "web_p50_us") / 1e3, 3)
        ctx.summary[f"web_p99_ms_{a}"] = rounded(med(assign, "web_p99_us") / 1e3, 3)
        ctx.summary[f"iperf_gbps_{a}"] = rounded(med(assign, "iperf_gbps"), 3)
    if med("rss", "web_rps"):
        ctx.summary["ratio_web_rps_per_flow_vs_rss"] = rounded(
            med("per-flow", "web_rps") / med("rss", "web_rps")
        )
    if med("rss", "iperf_gbps"):
        ctx.summary["ratio_iperf_per_flow_vs_rss"] = rounded(
            med("per-flow", "iperf_gbps") / med("rss", "iperf_gbps")
        )

    names = [a for a, _ in setups]

    def bars(key: str, scale: float) -> Series:
        sp = [spread(float(r[key]) * scale for r in res[a]) for a in names]
        return spread_series("median (min..max)", names, sp, "o")

    about = (
        f"wrk -c {conns} ({seconds:g} s, 1 KiB bodies) and one iperf3 stream at once through "
        f"squall-nf-cost ({NF_CYCLES} cycles per packet): rss over {rss_nfs} NFs, per-flow "
        f"from a pool of {pool}; median of {ctx.reps} runs."
    )
    for fid, key, ylabel, scale in (
        ("web_rps", "web_rps", "web requests/s", 1.0),
        ("web_p99", "web_p99_us", "web p99 latency (ms)", 1e-3),
        ("iperf", "iperf_gbps", "iperf3 throughput (Gbit/s)", 1.0),
    ):
        ctx.figure(
            Figure(
                fid,
                f"Web and bulk traffic together: {ylabel}",
                "assignment",
                ylabel,
                [bars(key, scale)],
                xscale="category",
                caption=about,
            )
        )
    ctx.note(
        "rss spreads flows over as many NFs as a NIC has queues would (rss_nfs); per-flow "
        "takes an NF per connection from its pool, so the bulk flow has an NF to itself."
    )


EXPERIMENT = Experiment(
    name="flow_isolation",
    title="Web and bulk traffic through one NF type: rss against per-flow",
    seed="issue 4 E4; seed 000 §6.2, Table 1",
    about=(
        "One iperf3 TCP stream and wrk (16 connections, 1 KiB bodies) run together from ns "
        "client to ns server through squall-mgr (af_packet ports) and one service of "
        f"squall-nf-cost NFs ({NF_CYCLES} cycles per packet). rss: 4 NFs, flows spread by a "
        "symmetric hash, so the bulk flow shares an NF with some web connections. per-flow: "
        "every connection gets its own NF from a pool of 64. Web requests/s and latency, "
        "iperf3 Gbit/s, and their ratios per-flow / rss."
    ),
    run=run,
    summary_keys=("ratio_web_rps_per_flow_vs_rss", "ratio_iperf_per_flow_vs_rss"),
    needs_root=True,
    needs_generator=False,
    full_minutes=2,
)
