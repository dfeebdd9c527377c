"""How fast a killed NF is back at work: SIGKILL the only NF of a service
under generator traffic, N times; the manager reaps it on SIGCHLD, starts a
new process in the same slot, and records the time from the reap to the
first packet the new instance takes (/squall/nfs restart_us)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread


def run(ctx: Context) -> None:
    kills = ctx.param("kills", 15, 3)
    rate = ctx.param("rate_pps", 100000)
    window_s = 1
    svc = config.Service("nf", "squall-nf-noop")
    cfg = config.manager_config(
        ctx.manager_name(),
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[svc],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=config.generator([64], flows=1, rate_pps=0),
    )
    # Kills further apart than the window: each restart is the first of its
    # window, so the policy's backoff adds nothing and the mechanism is measured.
    cfg["services"][0]["restart_window_s"] = window_s
    restart_ms: list[float] = []
    start_ms: list[float] = []
    with ctx.manager(cfg, label="one noop NF, killed repeatedly") as m:
        m.set_rate(rate)
        time.sleep(0.5)
        for k in range(kills):
            nf = next(iter(m.nfs().values()))
            os.kill(int(nf["pid"]), signal.SIGKILL)
            deadline = time.monotonic() + 10
            now: dict[str, Any] = nf
            # Done when the new instance took its first packet: the manager
            # counts it then (restart_us is set too, but two restarts can
            # take the same time to the microsecond: 1 kill in ~500 did).
            while time.monotonic() < deadline:
                now = next(iter(m.nfs().values()))
                if now["restarts_recovered"] == nf["restarts_recovered"] + 1:
                    break
                time.sleep(0.01)
            else:
                raise RuntimeError(f"kill {k}: no new instance took a packet in 10 s: {now}")
            ms = now["restart_us"] / 1000
            restart_ms.append(ms)
            start_ms.append(now["start_us"] / 1000)
            ctx.sample(
                "restart",
                kill=k,
                restart_ms=ms,
                start_to_ready_ms=now["start_us"] / 1000,
                exit_reason=now["exit_reason"],
                restarts=now["restarts"],
            )
            ctx.log(f"kill {k}: back in {ms:.2f} ms (start to ready {now['start_us']} us)")
            time.sleep(window_s + 0.2)
        m.set_rate(0)
    s = spread(restart_ms)
    ctx.summary["nf_restart_ms_p50"] = rounded(s["median"], 2)
    ctx.summary["nf_restart_ms_max"] = rounded(s["max"], 2)
    ctx.summary["nf_start_to_ready_ms_p50"] = rounded(spread(start_ms)["median"], 2)
    xs = list(range(len(restart_ms)))
    ctx.figure(
        Figure(
            "nf_restart",
            "NF restart: reap to the new instance's first packet",
            "kill (in order)",
            "restart time (ms)",
            [Series("restart", xs, restart_ms, restart_ms, restart_ms, "-o")],
            caption=f"One no-op NF under {rate} pps from the generator, SIGKILLed {kills} times.",
        )
    )
    ctx.note(
        "Measured by the manager: from the reap (SIGCHLD, microseconds after the kill; the "
        "manager reaps in its loop) to the new instance's first dequeued packet. It spans "
        "the reclaim of the dead NF's packets, posix_spawn, the NF attaching the region "
        "and its first burst."
    )


EXPERIMENT = Experiment(
    name="nf_restart",
    title="NF restart: SIGKILL to the new instance's first packet",
    seed="issue 14 (operate a running Squall): supervision",
    about=(
        "One no-op NF carries the generator's traffic; it is SIGKILLed N times, each "
        "further apart than restart_window_s so the backoff adds nothing. The manager "
        "restarts it in its slot and records the time from the reap to the first packet "
        "the new instance takes. Target: p50 <= 10 ms."
    ),
    run=run,
    summary_keys=("nf_restart_ms_p50", "nf_restart_ms_max", "nf_start_to_ready_ms_p50"),
    targets={"nf_restart_ms_p50": "<= 10"},
    full_minutes=1,
)
