"""Issue 4 E3 (seed 000 §6.2, Fig. 9): HTTP through N NFs under three ways of
spreading packets over them: spray (each burst to the next NF, seed 000's
"round robin"), rss (a flow hash) and per-flow (an idle NF per connection,
recycled at its end). Apache bench at 240 concurrent connections, N varied:
requests/s, latency, the share of TCP segments that arrived out of order,
and how many NFs were runnable at once."""

from __future__ import annotations

import threading
from pathlib import Path
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

MODES = ["spray", "rss", "per-flow"]
NF_COUNTS = [30, 60, 120, 240, 480]
CONCURRENCY = 240
TOOLS = ["ab", "ping"]


def make_cfg(name: str, mode: str, n: int) -> dict[str, Any]:
    svc = config.Service(
        "nf",
        "squall-nf-fwd",
        instances=n,
        ring_slots=256,
        # Fewer NFs than connections: new connections wait for an NF.
        pool_fallback="queue" if mode == "per-flow" else None,
        pool_queue_pkts=4096 if mode == "per-flow" else None,
    )
    return targets.flow_config(
        name,
        svc,
        mode,
        region_mb=256,
        mbufs=32767,
        flow_linger_ms=20,
        flow_idle_timeout_ms=10000,
    )


class RunnableSampler:
    """Counts the NF processes in state R (running or runnable) every
    interval_s while ab runs: seed 000 Fig 9(c)."""

    def __init__(self, pids: list[int], interval_s: float = 0.02) -> None:
        self.pids = pids
        self.interval_s = interval_s
        self.counts: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            n = 0
            for pid in self.pids:
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                except OSError:
                    continue
                n += stat[stat.rindex(")") + 2] == "R"
            self.counts.append(n)

    def __enter__(self) -> RunnableSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def mean(self) -> float:
        return sum(self.counts) / len(self.counts) if self.counts else float("nan")


def measure(ctx: Context, mode: str, n: int, requests: int) -> dict[str, Any]:
    with ctx.manager(make_cfg(ctx.manager_name(), mode, n), label=f"{mode} {n} NFs") as m:
        netns.wait_path()
        netns.ab(min(500, requests), CONCURRENCY)  # warm: ARP, caches, the NFs' first runs
        pids = [int(nf["pid"]) for nf in m.nfs().values()]
        c0 = {ns: netns.tcp_counters(ns) for ns in (netns.CLIENT_NS, netns.SERVER_NS)}
        with RunnableSampler(pids) as runnable:
            r, cmd = netns.ab(requests, CONCURRENCY)
        c1 = {ns: netns.tcp_counters(ns) for ns in (netns.CLIENT_NS, netns.SERVER_NS)}
        pools = m.query("/squall/pools")
        drops = m.stats()["drops"]
    ctx.command(cmd, what="ab", mode=mode, nfs=n)

    def delta(key: str) -> int:
        return sum(c1[ns].get(key, 0) - c0[ns].get(key, 0) for ns in c0)

    segs = delta("InSegs")
    return {
        **r,
        "ooo_pct": 100.0 * delta("TCPOFOQueue") / segs if segs else float("nan"),
        "retrans_segs": delta("RetransSegs"),
        "runnable_nfs": runnable.mean(),
        "waited": sum(int(p.get("waited", 0)) for p in pools.values()),
        "drops": {k: v for k, v in drops.items() if v},
    }


def run(ctx: Context) -> None:
    modes = ctx.param("modes", MODES)
    counts = ctx.param("nfs", NF_COUNTS, [30, 240])
    requests = ctx.param("requests", 6000, 1000)
    targets.require_netns(TOOLS)
    res: dict[tuple[str, int], list[dict[str, Any]]] = {}
    ctx.command(["scripts/netns.sh", "up"], what="namespaces")
    netns.netns("up")
    http = None
    try:
        http, http_name = netns.start_http_server(ctx.workdir, 1024)
        ctx.params["http_server"] = http_name
        for rep in range(ctx.reps):
            for mode in modes:
                for n in counts:
                    r = measure(ctx, mode, n, requests)
                    ctx.sample("point", mode=mode, nfs=n, rep=rep, **r)
                    ctx.log(
                        f"{mode:8} {n:4} NFs: {r['rps']:8,.0f} req/s, mean "
                        f"{r['mean_us'] / 1e3:6.1f} ms, out of order {r['ooo_pct']:.2f}%, "
                        f"{r['runnable_nfs']:.1f} runnable, {r['failed']} failed"
                    )
                    res.setdefault((mode, n), []).append(r)
    finally:
        if http is not None:
            http.stop()
        netns.netns("down")

    def med(mode: str, n: int, key: str) -> float:
        return spread(float(r[key]) for r in res[mode, n])["median"]

    for mode, n in sorted(res):
        tag = f"{mode.replace('-', '_')}_{n}nf"
        ctx.summary[f"rps_{tag}"] = rounded(med(mode, n, "rps"), 0)
        ctx.summary[f"mean_ms_{tag}"] = rounded(med(mode, n, "mean_us") / 1e3, 2)
        ctx.summary[f"ooo_pct_{tag}"] = rounded(med(mode, n, "ooo_pct"), 3)
        ctx.summary[f"runnable_{tag}"] = rounded(med(mode, n, "runnable_nfs"), 1)
    top = max(counts)
    for mode in modes:
        if (mode, top) in res:
            ctx.summary[f"rps_{mode.replace('-', '_')}_top"] = rounded(med(mode, top, "rps"), 0)

    def series(mode: str, key: str, scale: float = 1.0, style: str = "-o") -> Series:
        ns = sorted(n for m, n in res if m == mode)
        sp = [spread(float(r[key]) * scale for r in res[mode, n]) for n in ns]
        return spread_series(mode, ns, sp, style)

    about = (
        f"ab -c {CONCURRENCY} (a new connection per request, 1 KiB bodies) from ns client to "
        "nginx in ns server through one squall-nf-fwd service of N instances (sleep mode, "
        f"core 1); median of {ctx.reps} runs, bars min..max."
    )
    for fid, key, ylabel, scale in (
        ("rps", "rps", "HTTP requests/s", 1.0),
        ("latency", "mean_us", "mean time per request (ms)", 1e-3),
        ("out_of_order", "ooo_pct", "TCP segments queued out of order (%)", 1.0),
        ("runnable", "runnable_nfs", "NF processes runnable, mean", 1.0),
    ):
        ctx.figure(
            Figure(
                fid,
                f"Flow assignment against the number of NFs: {ylabel}",
                "NFs (instances of the service)",
                ylabel,
                [series(m, key, scale) for m in modes if any(k[0] == m for k in res)],
                xscale="log",
                caption=about,
            )
        )
    ctx.note(
        "spray is seed 000's round robin (bursts, not flows, go to NFs in turn): packets of "
        "one connection take different NFs and can overtake each other. round-robin in "
        "Squall's config is flow-aware (new flows in turn) and is not this."
    )
    ctx.note(
        f"per-flow with fewer NFs than the {CONCURRENCY} connections uses pool_fallback: "
        "queue, so a new connection's SYN waits in the manager for an NF (samples: waited)."
    )


EXPERIMENT = Experiment(
    name="flow_assign",
    title="Flow assignment: spray, rss and per-flow against the number of NFs (HTTP)",
    seed="issue 4 E3; seed 000 §6.2, Fig. 9",
    about=(
        f"Apache bench with {CONCURRENCY} concurrent connections (one request each) from ns "
        "client to nginx in ns server, through squall-mgr on af_packet ports and one service "
        "of N squall-nf-fwd (N = 30 to 480), packets spread by spray (each burst to the next "
        "NF), rss (symmetric flow hash) or per-flow (an idle NF per connection, recycled). "
        "For each: requests/s, mean and p99 time per request, the share of TCP segments the "
        "kernels queued out of order (TcpExt TCPOFOQueue over InSegs, both namespaces), and "
        "the mean number of runnable NF processes (/proc, every 20 ms)."
    ),
    run=run,
    summary_keys=("rps_rss_top", "rps_per_flow_top", "rps_spray_top"),
    needs_root=True,
    needs_generator=False,
    full_minutes=6,
)
