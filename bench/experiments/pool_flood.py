"""Per-flow admission under attack (mgr/admit.h; docs/config.md,
flow_unestablished_per_source): ab's real connections through a per-flow
chain (a pool of NFs, one per connection), alone and while spoofed sources
of one /24 open new connections at 10x the pool's size a second (a SYN and
a blind ACK each, and as many UDP datagrams: squall.bench.flood),
interleaved per repetition, with the cap and without it."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Any

from squall.bench import config, netns
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded

POOL = 128
# Above ab's 50 connections at once from its one /24 (a real client's burst
# of handshakes is half-open too), far below the flood's.
CAP = 64
SPOOFED = "10.77.1"  # a /24 beside the test hosts' 10.77.0.0/24: no host has it
CASES = {"cap": CAP, "nocap": 0}


def make_cfg(name: str, cap: int) -> dict[str, Any]:
    svc = {
        "instances": POOL,
        "ring_slots": 1024,
        "pool_fallback": "queue",  # a SYN that finds no NF waits, it is not lost
        "pool_queue_pkts": 512,
    }
    services = [
        {"name": "mon", "exec": "squall-nf-monitor", "args": ["--interval-ms", "0"], **svc},
        {"name": "fwd", "exec": "squall-nf-fwd", **svc},
    ]
    return config.manager_config(
        name,
        ports=[
            {"name": "client", "devargs": "net_af_packet0,iface=sq-c1", "rx_desc": 4096},
            {"name": "server", "devargs": "net_af_packet1,iface=sq-s1", "rx_desc": 4096},
        ],
        services=[],
        chains=[{"name": "web", "services": ["mon", "fwd"]}],
        rules=[
            {"in_port": "client", "chain": "web", "out_port": "server", "assign": "per-flow"},
            {"in_port": "server", "chain": "web", "out_port": "client", "assign": "per-flow"},
        ],
        # (a 200 ms linger at ab's rate needs more NFs than the pool has:
        # test_per_flow_netns's small pool case uses 20)
        flow_linger_ms=20,
        flow_idle_timeout_ms=30000,
        flow_half_open_timeout_ms=1000,
        flow_unestablished_per_source=cap,
        mbufs=16383,
        region_mb=128,
    ) | {"services": services}


def trial(m: Any, flood_s: float, requests: int, conc: int) -> dict[str, Any]:
    """ab alone (flood_s 0) or with the flood running from half a second
    before it to after it; the manager's flow and drop counters it moved."""
    before = (m.query("/squall/flows"), m.stats()["drops"])
    flood = None
    if flood_s > 0:
        cmd = netns.in_ns(netns.CLIENT_NS, [sys.executable, "-m", "squall.bench.flood",
                          SPOOFED, netns.SERVER_IP, str(netns.HTTP_PORT), str(10 * POOL),
                          str(flood_s)])  # fmt: skip
        flood = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # (its frames are made first)
    try:
        a, _ = netns.ab(requests, conc)
    finally:
        spoofed = 0
        if flood is not None:
            out, _ = flood.communicate(timeout=flood_s + 60)
            spoofed = int(out or 0)
    # the half-open flows it left end (flow_half_open_timeout_ms, a sweep)
    time.sleep(2.0)
    after = (m.query("/squall/flows"), m.stats()["drops"])

    def moved(i: int, key: str) -> int:
        return int(after[i].get(key, 0)) - int(before[i].get(key, 0))

    return {
        "rps": a["rps"],
        "failed": a["failed"],
        "p99_us": a["p99_us"],
        "spoofed_conns": spoofed,
        "flows_refused": moved(0, "flows_refused"),
        "half_open_expired": moved(0, "flows_half_open_expired"),
        "unreplied_expired": moved(0, "flows_unreplied_expired"),
        "pool_empty": moved(1, "pool_empty"),
        "flow_admission": moved(1, "flow_admission"),
    }


def run(ctx: Context) -> None:
    requests = ctx.param("requests", 4000, 300)
    conc = ctx.param("concurrency", 50)
    cases = ctx.param("cases", list(CASES))
    flood_s = ctx.param("flood_s", 8.0, 2.0)
    ctx.command(["scripts/netns.sh", "up"], what="namespaces")
    netns.netns("up")
    http, http_name = netns.start_http_server(ctx.workdir, 1024)
    ctx.params["http_server"] = http_name
    rows: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    try:
        for rep in range(ctx.reps):
            for case in cases:
                with ctx.manager(make_cfg(ctx.manager_name(), CASES[case]), label=case) as m:
                    netns.wait_path()
                    for flooded in (False, True):
                        r = trial(m, flood_s if flooded else 0.0, requests, conc)
                        ctx.sample("trial", case=case, flood=flooded, rep=rep, **r)
                        rows.setdefault((case, flooded), []).append(r)
                        ctx.log(
                            f"{case} rep {rep} {'flood' if flooded else 'alone'}: ab "
                            f"{r['rps']:,.0f} conns/s ({r['failed']} failed), spoofed "
                            f"{r['spoofed_conns']}, refused {r['flows_refused']}, "
                            f"pool_empty {r['pool_empty']}"
                        )
    finally:
        http.stop()

    def med(case: str, flooded: bool, key: str) -> float:
        return statistics.median(float(r[key]) for r in rows[case, flooded])

    for case in cases:
        sfx = "" if case == "cap" else f"_{case}"
        ctx.summary[f"pool_flood_real_conns_ratio{sfx}"] = rounded(
            med(case, True, "rps") / med(case, False, "rps")
        )
        ctx.summary[f"cps_alone{sfx}"] = rounded(med(case, False, "rps"), 0)
        ctx.summary[f"cps_flood{sfx}"] = rounded(med(case, True, "rps"), 0)
        ctx.summary[f"pool_empty_drops_flood{sfx}"] = int(med(case, True, "pool_empty"))
        ctx.summary[f"ab_failed_flood{sfx}"] = int(max(r["failed"] for r in rows[case, True]))
    ctx.figure(
        Figure(
            "cps",
            "ab's connections/s through a per-flow pool, alone and under a spoofed flood",
            "case (0: the cap, 1: no cap)",
            "connections/s (median)",
            [
                Series(
                    "alone",
                    list(range(len(cases))),
                    [med(c, False, "rps") for c in cases],
                    style="o",
                ),
                Series(
                    "under the flood",
                    list(range(len(cases))),
                    [med(c, True, "rps") for c in cases],
                    style="s",
                ),
            ],
            caption=f"x: {', '.join(f'{i} {c}' for i, c in enumerate(cases))}; flood: "
            f"{10 * POOL} spoofed connections/s of one /24 (SYN + blind ACK) and as many "
            f"UDP datagrams; cap: flow_unestablished_per_source {CAP}.",
        )
    )
    ctx.note(
        f"A pool of {POOL} NFs per hop (monitor -> fwd; pool_fallback queue, 512 packets), "
        f"af_packet ports, ab with {conc} connections at once, {requests} requests per "
        "trial; flow_linger_ms 20, flow_half_open_timeout_ms 1000. The flood's hosts do "
        "not exist: the server's replies to them have no route, so their handshakes never "
        "finish (mgr/admit.h). Without the cap, the spoofed flows take the pool's NFs for "
        "the half-open timeout, real SYNs wait in the queue or meet a full one "
        "(pool_empty) and the client resends them."
    )


EXPERIMENT = Experiment(
    name="pool_flood",
    title="A per-flow pool under a spoofed flood: real connections per second, with and "
    "without the per-source cap",
    seed="seed 000 §3.2 (an NF per flow); the trust model (docs/nf-api.md)",
    about=(
        "ab through a per-flow chain, alone and while spoofed sources of one /24 open "
        f"{10 * POOL} new connections a second (10x the pool), interleaved, with "
        f"flow_unestablished_per_source {CAP} and 0. 3 repetitions (1 with --quick)."
    ),
    run=run,
    summary_keys=(
        "pool_flood_real_conns_ratio",
        "pool_flood_real_conns_ratio_nocap",
        "pool_empty_drops_flood",
        "ab_failed_flood",
    ),
    targets={"pool_flood_real_conns_ratio": ">= 0.8"},
    needs_root=True,
    needs_generator=False,
    full_minutes=4,
)
