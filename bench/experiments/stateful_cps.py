"""Issue 18: connections per second through the conntrack NF and through the
NAT NF, fed by the manager's generator of short TCP connections (SYN, data,
the client's FIN, the server's FIN: tcp_flow_pkts 4, started at an even
rate), shared instances (assign: rss) and an NF per connection (per-flow).

Every trial starts from an idle manager and ends at one, so the counters
are exact: the NF's own counters (conntrack: committed, established,
drop_invalid, ...; nat: new_conns, translated, untouched, ...) plus the
manager's drops before the NF add up to the packets the generator sent, and
a rate counts as carried only if every connection it started was committed
(conntrack) or given a translation (nat) and nothing was dropped for want
of room, time or a port.
"""

from __future__ import annotations

import time
from typing import Any

from squall.bench import config, procstat
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread

K = 4  # packets per connection
CONNS_PER_S = [2_000, 5_000, 10_000, 25_000, 50_000, 75_000, 100_000, 125_000, 150_000]
# The per-flow pool as flow_activations' best variant (lifo, backlog 128,
# flows that find no NF wait in a queue, NFs spin 20 us before sleeping).
POOL = 1000
QUEUE_PKTS = 131_072
# Shared instances hold every connection: a table with room for the rates
# offered. The generator's connections never complete a handshake (see
# NOTE_INVALID), so conntrack keeps each in SYN_SENT; its netfilter default,
# 120 s, would hold 12 million at 100,000/s. Here 1 s, as a busy firewall
# tunes it; the other closing states likewise.
CT_SHARED_ARGS = [
    "--table-size=1048576",
    "--timeout=syn_sent=1",
    "--timeout=time_wait=1",
    "--timeout=close=1",
    "--timeout=fin_wait=1",
    "--timeout=last_ack=1",
]
CT_PER_FLOW_ARGS = ["--table-size=16"]  # one connection per NF, cleaned at its end
NAT_ARGS = ["--snat=0.0.0.0/0=192.0.2.1", "--table-size=1048576"]
# Per flow, each NF of the pool its own 64 of the SNAT ports (1,000 x 64 fit
# in 1024-65535), back at its flow's end; the manager brings a connection's
# replies to its NF by the translated tuple (sq_rekeyed).
NAT_PER_FLOW_ARGS = ["--snat=0.0.0.0/0=192.0.2.1", "--table-size=16", "--ports-per-instance=64"]
PER_FLOW_ARGS = {"conntrack": CT_PER_FLOW_ARGS, "nat": NAT_PER_FLOW_ARGS}

# case -> (NF kind, assign)
CASES = {
    "conntrack_rss": ("conntrack", "rss"),
    "conntrack_per_flow": ("conntrack", "per-flow"),
    "nat_rss": ("nat", "rss"),
    "nat_per_flow": ("nat", "per-flow"),
}
# What the NF does with a connection it takes: the counter that says so.
TAKEN = {"conntrack": "committed", "nat": "new_conns"}
# NF counters that mean a connection was refused for want of a resource.
NF_FAILURES = {
    "conntrack": ("drop_table_full", "drop_no_rule", "drop_bad_hdr"),
    "nat": ("drop_no_port", "drop_table_full", "drop_bad_hdr"),
}
NOTE_INVALID = (
    "The generator's connections are not valid TCP to a stateful firewall: it sends the "
    "client's SYN, then (with no SYN/ACK from the server) the client's data and FIN with the "
    "ACK flag, sequence numbers 1, 2, ... regardless of payload, and the server's FIN. "
    "conntrack, like netfilter and OVS, accepts nothing but a SYN/ACK or a RST from the server "
    "in SYN_SENT, so it commits each connection at its SYN and drops the other 3 packets as "
    "drop_invalid (counted, and checked here: committed = connections started, drop_invalid = "
    "3 per connection). cps_conntrack is therefore the rate of connections set up (tracked, "
    "checked against the rules, committed), with the invalid packets' cost included, not of "
    "connections carried to their end."
)
NOTE_NAT = (
    "nat gives every connection a port of one SNAT address (192.0.2.1, ports 1024-65535) and "
    "holds it 10 s after a FIN (NAT_TO_TCP_END_MS in nfs/nat/nat.h, not configurable), all "
    "towards the generator's one server address and port, so at most 64,512 connections fit "
    "in any 10 s: about 6,450/s sustained. The generator's server FIN is addressed to the "
    "client's own address, not the translated one, so nat passes it untouched."
)


def ct_counters(m: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for info in m.nfs().values():
        for k, v in (info.get("counters") or {}).items():
            total[k] = total.get(k, 0) + int(v)
    return total


def make_cfg(name: str, kind: str, assign: str, conns: int) -> dict[str, Any]:
    exe = f"squall-nf-{kind}"
    if assign == "per-flow":
        svc = config.Service("nf", exe, list(PER_FLOW_ARGS[kind]), instances=POOL, ring_slots=64,
                             spin_us=20)  # fmt: skip
        cfg = config.tcp_conns_config(
            name, svc, conns, K, "per-flow", staggered=True,
            flow_idle_timeout_ms=1000, mbufs=262_143, region_mb=1024,
        )  # fmt: skip
        s = cfg["services"][0]
        s.update(pool_order="lifo", pool_backlog_max=128, pool_fallback="queue",
                 pool_queue_pkts=QUEUE_PKTS)  # fmt: skip
        return cfg
    args = CT_SHARED_ARGS if kind == "conntrack" else NAT_ARGS
    svc = config.Service("nf", exe, list(args), ring_slots=4096)
    return config.tcp_conns_config(name, svc, conns, K, "rss", staggered=True, mbufs=65_535)


def trial(m: Any, kind: str, conns_per_s: int, seconds: float) -> dict[str, Any]:
    """From idle to idle: offer conns_per_s connections a second for seconds."""
    m.set_rate(0)
    m.wait_idle(10.0)
    c0, s0, g0 = ct_counters(m), m.stats(), m.gen()
    cpus0 = procstat.read_cpus()
    t0 = time.monotonic()
    m.set_rate(conns_per_s * K)
    time.sleep(seconds)
    g_mid = m.gen()
    dt = time.monotonic() - t0
    m.set_rate(0)
    cpus1 = procstat.read_cpus()
    idle = m.wait_idle(10.0)
    c1, s1, g1 = ct_counters(m), m.stats(), m.gen()
    nf = {k: v - c0.get(k, 0) for k, v in c1.items()}
    drops = {k: int(v) - int(s0["drops"].get(k, 0)) for k, v in s1["drops"].items()}
    drops = {k: v for k, v in drops.items() if v}
    sent = int(g1["sent_pkts"]) - int(g0["sent_pkts"])
    started = int(g1["conns_started"]) - int(g0["conns_started"])
    taken = nf.get(TAKEN[kind], 0)
    # Every packet the NF saw is in exactly one of its counters (conntrack:
    # committed + established + related + drops + untracked; nat: translated
    # + untouched + drops, new_conns being a subset of translated).
    if kind == "conntrack":
        seen = sum(v for k, v in nf.items())
    else:
        seen = sum(v for k, v in nf.items() if k != "new_conns")
    # The NF's own drops (nf_verdict) are in its counters already.
    platform = sum(v for k, v in drops.items() if k != "nf_verdict")
    failures = {k: nf[k] for k in NF_FAILURES[kind] if nf.get(k)}
    lag = int(g_mid.get("lag_pkts", 0))
    offered_ok = sent >= 0.995 * conns_per_s * K * dt
    return {
        "conns_per_s_offered": conns_per_s,
        "seconds": round(dt, 3),
        "sent_pkts": sent,
        "conns_started": started,
        "conns_taken": taken,
        "cps": taken / dt,
        "nf_counters": nf,
        "nf_pkts_counted": seen,
        "drops": drops,
        "platform_drops": platform,
        "nf_failures": failures,
        "accounted": seen + platform == sent,
        "idle_at_end": idle,
        "gen_lag_pkts": lag,
        "offered_ok": offered_ok,
        "clean": offered_ok and taken == started and platform == 0 and not failures,
        "nf_core_busy_pct": round(procstat.cpu_busy_pct(cpus0["cpu1"], cpus1["cpu1"]), 1),
        "mgr_core_busy_pct": round(procstat.cpu_busy_pct(cpus0["cpu0"], cpus1["cpu0"]), 1),
    }


def run(ctx: Context) -> None:
    cases = ctx.param("cases", list(CASES))
    rates = ctx.param("conns_per_s", CONNS_PER_S, [5_000, 50_000])
    # Shared nat holds a port 10 s after a FIN: its trials outlast that, so a
    # rate counts only if it holds once the ports come back. Per flow, a
    # port is back at its flow's end.
    trial_s = {
        "conntrack": ctx.param("trial_s", 5.0, 1.0),
        "nat": ctx.param("nat_trial_s", 12.0, 1.0),
    }
    conns = ctx.param("concurrent_conns", 64)
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for rep in range(ctx.reps):
        for case in cases:
            kind, assign = CASES[case]
            # A fresh manager per rate: no table, port or pool state left from
            # a faster rate's trial.
            for rate in rates:
                cfg = make_cfg(ctx.manager_name(), kind, assign, conns)
                seconds = trial_s["nat" if case == "nat_rss" else "conntrack"]
                with ctx.manager(cfg, label=f"{case} {rate}/s") as m:
                    r = trial(m, kind, rate, seconds)
                ctx.sample("trial", case=case, rep=rep, **r, exit_code=m.returncode)
                rows.setdefault((case, rate), []).append(r)
                ctx.log(
                    f"{case} rep {rep} {rate:,}/s: {r['cps']:,.0f} conns/s taken of "
                    f"{r['conns_started']:,} started ({r['conns_taken']:,} taken), "
                    f"NF {r['nf_counters']}, drops {r['drops']}, "
                    f"accounted {r['accounted']}, clean {r['clean']}, "
                    f"NF core {r['nf_core_busy_pct']}%"
                )
    summarize(ctx, rows, cases, rates)
    figure(ctx, rows, cases, rates)
    ctx.note(NOTE_INVALID)
    if "nat_rss" in cases:
        ctx.note(NOTE_NAT)
    ctx.note(
        f"Each trial: a fresh manager, {trial_s['conntrack']:g} s (nat: {trial_s['nat']:g} s) "
        "at the rate from idle to idle, so the "
        "counters are exact; rates are a ladder (the figure is the highest clean rung, a "
        "lower bound within one rung). A trial is clean if the generator offered the rate, "
        "every connection started was taken by the NF, the manager dropped nothing before "
        "it and the NF refused none for want of a table slot or port. The generator shares "
        "the manager's core; the NFs have core 1."
    )
    ctx.note(
        "Shared (rss): one instance, conntrack with a table of 1,048,576 slots and 1 s "
        "timeouts in SYN_SENT and the closing states; nat with 1,048,576 slots. Per-flow: a "
        f"pool of {POOL} NFs (a table of 16 slots each, cleaned at the flow's end; nat: 64 "
        "SNAT ports each, its connections' replies brought to it by their translated tuple) "
        "taken lifo with pool_backlog_max 128, pool_fallback queue and spin_us 20, as "
        "flow_activations' best variant."
    )


def summarize(
    ctx: Context,
    rows: dict[tuple[str, int], list[dict[str, Any]]],
    cases: list[str],
    rates: list[int],
) -> None:
    for case in cases:
        best = 0.0
        for rate in rates:
            rs = rows.get((case, rate), [])
            # A rung holds if every repetition was clean; the worst one counts.
            if rs and all(r["clean"] for r in rs):
                best = max(best, min(r["cps"] for r in rs))
        ctx.summary[f"cps_{case}"] = rounded(best, 0)
        every = [r for rate in rates for r in rows.get((case, rate), [])]
        ctx.summary[f"accounted_trials_{case}"] = sum(r["accounted"] for r in every)
        ctx.summary[f"trials_{case}"] = len(every)
    for kind in ("conntrack", "nat"):
        mine = [ctx.summary[f"cps_{c}"] for c in cases if CASES[c][0] == kind]
        if mine:
            ctx.summary[f"cps_{kind}"] = max(mine)


def figure(
    ctx: Context,
    rows: dict[tuple[str, int], list[dict[str, Any]]],
    cases: list[str],
    rates: list[int],
) -> None:
    series = []
    styles = ["-o", "--s", ":^", "-.D"]
    for i, case in enumerate(cases):
        sp = [spread(r["cps"] for r in rows[case, rate]) for rate in rates]
        label = case.replace("_", " ").replace("per flow", "per-flow")
        xs = [float(r) for r in rates]
        series.append(
            Series(
                label,
                xs,
                [s["median"] for s in sp],
                [s["min"] for s in sp],
                [s["max"] for s in sp],
                styles[i % len(styles)],
                color=f"C{i}",
            )  # fmt: skip
        )
        # Trials that did not count: a drop before the NF, a connection not
        # taken, or the generator short of the rate.
        bad = [(float(r["conns_per_s_offered"]), r["cps"]) for rate in rates
               for r in rows[case, rate] if not r["clean"]]  # fmt: skip
        if bad:
            series.append(
                Series(
                    f"{label}: not clean",
                    [b[0] for b in bad],
                    [b[1] for b in bad],
                    style="x",
                    color=f"C{i}",
                )  # fmt: skip
            )
    series.append(
        Series(
            "offered",
            [float(r) for r in rates],
            [float(r) for r in rates],
            style="--",
            color="0.6",
        )  # fmt: skip
    )
    series.append(
        Series("target 100,000/s", [float(rates[0]), float(rates[-1])], [1e5, 1e5], style=":k")
    )
    ctx.figure(
        Figure(
            "cps",
            "Connections per second taken by conntrack and nat (generator's short TCP)",
            "connections offered per second",
            "connections taken per second",
            series,
            caption="Each point one trial from idle to idle with a fresh manager; "
            "taken = committed (conntrack) or translated (nat); x: a trial with drops or "
            "connections not taken. Error bars min..max over repetitions.",
        )
    )


EXPERIMENT = Experiment(
    name="stateful_cps",
    title="Connections per second through conntrack and NAT (generator's short TCP)",
    seed="issue 18 benchmarks: cps_conntrack, cps_nat",
    about=(
        "The manager's generator makes short TCP connections (4 packets: SYN, data, the "
        "client's FIN, the server's FIN), 64 open at once and started at an even rate, into "
        "one service: squall-nf-conntrack shared (assign: rss, one instance), "
        "squall-nf-conntrack per flow (a pool of 1,000, one NF per connection), and "
        "squall-nf-nat shared (SNAT of every connection). For each rate of a ladder (2,000 to "
        "150,000 connections/s), a fresh manager, one trial from idle to idle; the NF's "
        "counters and the manager's drops must add up to the packets sent, and the rate "
        "counts if every connection started was taken. cps_conntrack and cps_nat: the "
        "highest such rate over the modes (target >= 100,000/s, the rate the per-flow "
        "director sustains)."
    ),
    run=run,
    summary_keys=("cps_conntrack", "cps_nat", "cps_conntrack_rss", "cps_conntrack_per_flow"),
    full_minutes=14,
    targets={"cps_conntrack": ">= 100000", "cps_nat": ">= 100000"},
)
