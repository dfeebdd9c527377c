"""Telemetry replies while NFs spin (mgr/ctlprio.h): the time the manager
takes to answer a command, against an idle manager and against one that
carries traffic while an NF on each core spins without yielding at the
highest priority an NF may have (SCHED_RR 98). The control threads run
SCHED_FIFO 99 above them; the same load with `control_realtime: false`
(the normal scheduler, as before) shows what that buys."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.telemetry import Telemetry, TelemetryError

PHASES = ("idle", "load", "load_normal_sched")
COMMANDS = ("/squall/stats", "/squall/ports", "/squall/nfs")


def spin_service() -> config.Service:
    """A poll-mode NF: it spins on its empty ring and never yields."""
    return config.Service("spin", "squall-nf-noop", mode="poll")


def make_cfg(name: str, phase: str, rate_pps: int) -> dict[str, Any]:
    """The manager asked: a forwarder carrying the generator's traffic and,
    under load, a spinning NF at SCHED_RR 98 on its NFs' core (core 1, where
    DPDK runs its control threads too)."""
    load = phase != "idle"
    services = [config.Service("fwd", "squall-nf-fwd")] + ([spin_service()] if load else [])
    cfg = config.manager_config(
        name,
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=services,
        chains=[{"name": "c", "services": ["fwd"]}]
        + ([{"name": "s", "services": ["spin"]}] if load else []),
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=config.generator([64], flows=64, rate_pps=rate_pps if load else 0),
    )
    if load:
        cfg["services"][1]["priority"] = 98
    if phase == "load_normal_sched":
        cfg["manager"]["control_realtime"] = False
    return cfg


def hog_cfg(name: str) -> dict[str, Any]:
    """Another manager, whose NF spins at SCHED_RR 98 on core 0 (the asked
    manager's own lcore)."""
    cfg = config.manager_config(
        name,
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[spin_service()],
        chains=[{"name": "s", "services": ["spin"]}],
        rules=[{"in_port": "in", "chain": "s", "out_port": "out"}],
        nf_core=0,
    )
    cfg["services"][0]["priority"] = 98
    return cfg


@contextmanager
def realtime_client() -> Iterator[None]:
    """This process at SCHED_FIFO 99 while it asks: what is measured is the
    manager's answer, not this client's own wait for a core the spinners
    hold (an exporter under such load needs the same: docs/observability.md)."""
    old = os.sched_getscheduler(0)
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
    try:
        yield
    finally:
        os.sched_setscheduler(0, old, os.sched_param(0))


def ask(name: str, n: int) -> tuple[list[float], int]:
    """n commands over one connection, in turn; each reply's time in ms, and
    how many got no reply within the client's limit (5 s)."""
    times: list[float] = []
    failed = 0
    tm = Telemetry.connect(name=name)
    try:
        for i in range(n):
            t0 = time.perf_counter()
            try:
                tm.query(COMMANDS[i % len(COMMANDS)])
            except TelemetryError:
                failed += 1
                tm.close()
                tm = Telemetry.connect(name=name)
                continue
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        tm.close()
    return times, failed


def run(ctx: Context) -> None:
    n = ctx.param("commands", 1000, 200)
    rate = ctx.param("rate_pps", 200000)
    results: dict[str, list[float]] = {}
    for phase in PHASES:
        with ExitStack() as stack:
            if phase != "idle":
                stack.enter_context(
                    ctx.manager(hog_cfg(ctx.manager_name()), label="another manager's NF")
                )
            cfg = make_cfg(ctx.manager_name(), phase, rate)
            m = stack.enter_context(ctx.manager(cfg, label=f"telemetry under {phase}"))
            time.sleep(1.0)  # (the spinners spinning, the traffic flowing)
            before = m.stats()
            with realtime_client():
                times, failed = ask(m.name, n)
            after = m.stats()
        results[phase] = times
        s = spread(times)
        p99 = sorted(times)[max(0, int(len(times) * 0.99) - 1)] if times else float("nan")
        ctx.summary[f"telemetry_reply_ms_max_{phase}"] = rounded(s["max"], 2)
        ctx.summary[f"telemetry_reply_ms_p99_{phase}"] = rounded(p99, 2)
        ctx.summary[f"telemetry_no_reply_{phase}"] = failed
        moved = after["tx_pkts"] - before["tx_pkts"]
        ctx.sample(
            "phase",
            phase=phase,
            commands=n,
            no_reply=failed,
            max_ms=s["max"],
            p50_ms=s["median"],
            p99_ms=p99,
            tx_pkts_meanwhile=moved,
        )
        ctx.log(
            f"{phase}: {n} commands, max {s['max']:.2f} ms, p99 {p99:.2f} ms, "
            f"p50 {s['median']:.2f} ms, {failed} unanswered; {moved} packets moved meanwhile"
        )
    ctx.figure(
        Figure(
            "replies",
            "Telemetry reply time, each command in turn",
            "command (in order)",
            "reply (ms)",
            [Series(p, list(range(len(t))), t, t, t, ".") for p, t in results.items() if t],
            yscale="log",
            caption=(
                f"{n} commands ({', '.join(COMMANDS)} in turn) per phase over one "
                "connection. load: the generator at "
                f"{rate} pps through a forwarder, a poll-mode NF at SCHED_RR 98 spinning "
                "on core 1 and another manager's on core 0; load_normal_sched: the same "
                "with the control threads under the normal scheduler."
            ),
        )
    )
    ctx.note(
        "The client asks at SCHED_FIFO 99 itself, so its own wait for a core is not "
        "counted. Under load the spinners hold both cores at SCHED_RR 98 (the kernel's "
        "real-time throttling leaves the normal scheduler 5% of each), so the manager's "
        "data path, a normal task, moves little: the point is that the operator still gets "
        "answers."
    )


EXPERIMENT = Experiment(
    name="telemetry_load",
    title="Telemetry replies while NFs spin at real-time priority",
    seed="what a new user trips over: a control plane that starves",
    about=(
        "1,000 telemetry commands (stats, ports, nfs in turn) against an idle manager, "
        "against one carrying generator traffic while a poll-mode NF at SCHED_RR 98 spins "
        "on each core (its own on core 1, another manager's on core 0), and the same with "
        "control_realtime false. Reply time per "
        "command: max and p99 per phase. Target: max <= 100 ms idle and under load."
    ),
    run=run,
    summary_keys=(
        "telemetry_reply_ms_max_idle",
        "telemetry_reply_ms_max_load",
        "telemetry_reply_ms_p99_idle",
        "telemetry_reply_ms_p99_load",
        "telemetry_reply_ms_max_load_normal_sched",
        "telemetry_no_reply_load_normal_sched",
    ),
    targets={"telemetry_reply_ms_max_idle": "<= 100", "telemetry_reply_ms_max_load": "<= 100"},
    full_minutes=2,
)
