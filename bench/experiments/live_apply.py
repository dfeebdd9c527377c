"""Run-time changes under traffic. A manager carries two chains at a
steady rate; one (steady: sig -> sig) never changes, the other (flip) is changed
by every apply, alternating between one hop and two. Counts what the unchanged
chain lost (the target: nothing), what the changed one lost and under which
cause, and how long an apply takes end to end (squallctl's call: load, check,
switch between two rx rounds, wait out the old config's readers).

Then real TCP (wrk against nginx between two namespaces) through an unchanged
chain, in intervals with and without applies that change only another chain
and rule, each apply a `squallctl apply` process as a user runs it: what the
applies cost the chain they do not touch, counted in the manager's drops."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from squall import control
from squall.bench import config, netns
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.paths import ROOT
from squall.telemetry import Telemetry

# The TCP part's namespaces, its own set: the tests' (netns.DEFAULT) may be in
# use meanwhile.
TCP_HOSTS = netns.Hosts("sqapply-c", "sqapply-s", "sqa", "10.80.0")
TCP_TOOLS = ["wrk", "ping", "ss"]


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
    if ctx.param("generator_part", True):
        run_generator(ctx)
    run_tcp(ctx)


def run_generator(ctx: Context) -> None:
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


# ---------------------------------------------------------------- real TCP


def tcp_config(name: str, flip: int) -> dict[str, Any]:
    """examples/demo.yaml's layout (af_xdp ports, the NFs on the manager's core,
    core_yield_rounds 4) carrying wrk through chain `wire` (fwd); chain `other`
    (null ports, no traffic) and its rule are what every apply changes."""
    h = TCP_HOSTS

    def devargs(i: int, iface: str) -> list[str]:
        return [
            f"net_af_xdp{i},iface={iface},start_queue=0,queue_count=1,busy_budget=0",
            f"net_af_packet{i},iface={iface}",
        ]

    return config.manager_config(
        name,
        ports=[
            {"name": "client", "devargs": devargs(0, h.client_end), "rx_desc": 4096},
            {"name": "server", "devargs": devargs(1, h.server_end), "rx_desc": 4096},
            {"name": "x", "devargs": "net_null0,no-rx=1"},
            {"name": "y", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            config.Service("fwd", "squall-nf-fwd"),
            config.Service("o1", "squall-nf-fwd"),
            config.Service("o2", "squall-nf-fwd"),
        ],
        chains=[
            {"name": "wire", "services": ["fwd"]},
            {"name": "other", "services": ["o1"] if flip == 0 else ["o1", "o2"]},
        ],
        rules=[
            {"in_port": "client", "chain": "wire", "out_port": "server"},
            {"in_port": "server", "chain": "wire", "out_port": "client"},
            {"in_port": "x", "chain": "other", "out_port": "y" if flip == 0 else "x"},
        ],
        nf_core=0,
        core_yield_rounds=4,
    )


def squallctl_apply(name: str, path: Path) -> None:
    """One `squallctl apply` process, this tree's (PYTHONPATH), as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    cmd = [sys.executable, "-m", "squall.ctl", "--name", name, "apply", str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)
    if r.returncode != 0 or "applied" not in r.stdout:
        raise RuntimeError(f"squallctl apply {path.name}: {r.returncode} {r.stdout}{r.stderr}")


def drop_counts(st: dict[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in st["drops"].items()}


class Applier:
    """A squallctl apply every period_s in a thread, alternating two files."""

    def __init__(self, name: str, files: list[Path], period_s: float) -> None:
        self.name, self.files, self.period_s = name, files, period_s
        self.applies = 0
        self.cpu_s = 0.0  # the squallctl processes' CPU time
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        start = time.monotonic()
        try:
            # at a steady rate: the k-th apply begins k periods in
            while not self._stop.wait(
                max(0.0, start + (self.applies + 1) * self.period_s - time.monotonic())
            ):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                squallctl_apply(self.name, self.files[(self.applies + 1) % 2])
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                self.cpu_s += r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
                self.applies += 1
        except Exception as e:  # noqa: BLE001 - raised in the caller's thread
            self.error = e

    def __enter__(self) -> Applier:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def tcp_run(ctx: Context, rep: int, tr: dict[str, Any]) -> list[dict[str, Any]]:
    """Fresh namespaces, nginx and a manager; tr["pairs"] pairs of wrk intervals
    through chain wire, one with applies and one without, in turn (odd reps
    begin with the applies); each interval's drops from the manager's stats."""
    h = TCP_HOSTS
    netns.netns("up", h)
    http, _ = netns.start_http_server(ctx.workdir, tr["body"], h)
    rows: list[dict[str, Any]] = []
    try:
        name = ctx.manager_name()
        files = [Path(ctx.workdir) / f"tcp-{rep}-{i}.yaml" for i in range(2)]
        for i, f in enumerate(files):
            f.write_text(config.to_yaml(tcp_config(name, i)))
            f.chmod(0o644)
        with ctx.manager(tcp_config(name, 0), label=f"tcp rep {rep}") as m:
            netns.wait_path(hosts=h)
            for k in range(2 * tr["pairs"]):
                applying = (k + rep) % 2 == 1
                d0 = drop_counts(m.stats())
                applier = Applier(name, files, tr["period_s"])
                if applying:
                    applier.__enter__()
                try:
                    w, cmd = netns.wrk(tr["interval_s"], tr["conns"], hosts=h)
                finally:
                    if applying:
                        applier.__exit__()
                if applier.error is not None:
                    raise applier.error
                time.sleep(0.2)  # what is in flight is counted in this interval
                d1 = drop_counts(m.stats())
                dd = {c: d1[c] - d0.get(c, 0) for c in d1 if d1[c] != d0.get(c, 0)}
                row = {
                    "rep": rep,
                    "interval": k,
                    "applies": applier.applies,
                    "squallctl_cpu_ms": rounded(applier.cpu_s * 1000, 1),
                    "rps": w["rps"],
                    "p99_us": w["p99_us"],
                    # chain other carries no packet: every drop is wire's
                    # (config_changed, none expected, apart)
                    "drops": sum(v for c, v in dd.items() if c != "config_changed"),
                    "config_changed": dd.get("config_changed", 0),
                    "by_cause": dd,
                }
                ctx.sample("tcp", **row)
                ctx.log(
                    f"tcp rep {rep} interval {k}: {applier.applies} applies, "
                    f"{row['drops']} drops {dd}, {w['rps']:,.0f} req/s"
                )
                rows.append(row)
            if rep == 0:
                ctx.command(cmd, what="wrk")
    finally:
        http.stop()
        netns.netns("down", h)
    return rows


def tcp_summary(ctx: Context, rows: list[dict[str, Any]]) -> None:
    """The applies' intervals against the others, over equal time: drops summed
    (every cause but config_changed). The ratio adds 1 to both sums, so 0 and 0
    is 1.0 and x against 0 is x + 1; the sums are published too."""
    with_a = [r for r in rows if r["applies"] > 0]
    without = [r for r in rows if r["applies"] == 0]
    d_a = sum(r["drops"] for r in with_a)
    d_n = sum(r["drops"] for r in without)
    applies = sum(r["applies"] for r in with_a)
    ctx.summary["drops_unaffected_apply_tcp"] = d_a
    ctx.summary["drops_unaffected_none_tcp"] = d_n
    ctx.summary["ratio_drops_unaffected_apply_vs_none_tcp"] = rounded((d_a + 1) / (d_n + 1), 2)
    ctx.summary["applies_tcp"] = applies
    ctx.summary["drops_per_apply_tcp"] = rounded((d_a - d_n) / max(1, applies), 2)
    ctx.summary["config_changed_tcp"] = sum(r["config_changed"] for r in rows)
    ctx.summary["squallctl_apply_cpu_ms"] = rounded(
        sum(r["squallctl_cpu_ms"] for r in with_a) / max(1, applies), 1
    )
    ctx.summary["rps_apply_vs_none_tcp"] = rounded(
        spread(r["rps"] for r in with_a)["median"] / spread(r["rps"] for r in without)["median"],
        3,
    )


def run_tcp(ctx: Context) -> None:
    tr = {
        "pairs": ctx.param("tcp_pairs", 3, 1),
        "interval_s": ctx.param("tcp_interval_s", 15.0, 5.0),
        # the user's rate: 50 applies in 45 s
        "period_s": ctx.param("tcp_apply_period_s", 0.9),
        "conns": ctx.param("tcp_connections", 64),
        "body": ctx.param("tcp_body_bytes", 65536),
    }
    keys = ("drops_unaffected_apply_tcp", "drops_unaffected_none_tcp",
            "ratio_drops_unaffected_apply_vs_none_tcp")  # fmt: skip
    if missing := netns.missing_tools(TCP_TOOLS):
        ctx.unavailable["tcp"] = f"missing tools: {', '.join(missing)}"
        ctx.summary.update(dict.fromkeys(keys))
        return
    rows: list[dict[str, Any]] = []
    for rep in range(ctx.reps):
        rows += tcp_run(ctx, rep, tr)
    tcp_summary(ctx, rows)
    ctx.log(
        f"tcp: {ctx.summary['drops_unaffected_apply_tcp']} drops with "
        f"{ctx.summary['applies_tcp']} applies, {ctx.summary['drops_unaffected_none_tcp']} "
        f"without; ratio {ctx.summary['ratio_drops_unaffected_apply_vs_none_tcp']}"
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
        "`no_apply_lost_pkts_unaffected` is what the host's own stalls cost that chain.\n\n"
        "Then real TCP: wrk (`tcp_connections` connections, `tcp_body_bytes` a response) "
        "against nginx between two namespaces, through chain `wire` (one fwd NF) of a manager "
        "laid out as examples/demo.yaml (af_xdp ports, the NFs on the manager's core); chain "
        "`other` on null ports carries nothing. `tcp_pairs` pairs of `tcp_interval_s` "
        "intervals, one with applies and one without, in turn (odd reps begin with the "
        "applies): every `tcp_apply_period_s` a `squallctl apply` process, as a user runs "
        "it, changes chain `other` and its rule (50 applies in 45 s at 0.9 s). Each "
        "interval's drops are the manager's (every cause; `config_changed` apart, none "
        "expected): all are `wire`'s. `ratio_drops_unaffected_apply_vs_none_tcp` is "
        "(drops with applies + 1) / (drops without + 1) over equal time (0 and 0 is 1.0), "
        "with both sums published; `squallctl_apply_cpu_ms` is the CPU time of one "
        "`squallctl apply` process, which on a 2-core host shares the cores that move the "
        "packets. `generator_part=false` runs the TCP part alone."
    ),
    run=run,
    summary_keys=(
        "drops_unaffected_apply_tcp",
        "drops_unaffected_none_tcp",
        "ratio_drops_unaffected_apply_vs_none_tcp",
    ),
    targets={
        "apply_lost_pkts_unaffected": "== 0",
        "ratio_drops_unaffected_apply_vs_none_tcp": "<= 1.1",
    },
    needs_root=True,
    full_minutes=6,
)
