"""scaling_step (seed 003 Fig 3): the offered rate steps between multiples of one
instance's capacity; a service with a scale: policy against the same chain with
one fixed instance, in the same run. Plots offered and carried rate, the instance
count and the drops against time, and counts the flows seen by two instances
(flows_moved: the scaler must move none).

The NF waits a fixed time per packet, asleep (tests/nfs/flowseen --wait-ns, as
nfs/cost --wait-ns): an instance has a known capacity and leaves the core to the
others while it waits, so instances add capacity on this 2-core machine as they
would with a core each. A CPU-bound NF's instances would share the one NF core
here and add none; the mechanism measured (reaction, drops, flows moved) is the
same."""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded
from squall.bench.paths import BUILD

FLOWSEEN = BUILD / "tests" / "nfs" / "squall-nf-flowseen"
SAMPLE_S = 0.05


def _service(out: Path, wait_ns: int, scale: dict[str, Any] | None) -> dict[str, Any]:
    svc: dict[str, Any] = {
        "name": "s",
        "exec": str(FLOWSEEN),
        "args": ["--out", str(out), "--wait-ns", str(wait_ns)],
        "ring_slots": 1024,
    }
    if scale is not None:
        svc["scale"] = scale
    return svc


def _config(ctx: Context, out: Path, wait_ns: int, scale: dict[str, Any] | None) -> dict[str, Any]:
    cfg = config.manager_config(
        ctx.manager_name(),
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=dict(
            config.generator([64], flows=64, rate_pps=0), tcp_flow_pkts=20, tcp_start="staggered"
        ),
        flow_linger_ms=50,
    )
    cfg["services"] = [_service(out, wait_ns, scale)]
    return cfg


def _out_dir(ctx: Context, name: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=ctx.workdir))
    d.chmod(0o777)  # the NFs run as manager.nf_user
    return d


def _capacity(ctx: Context, wait_ns: int) -> float:
    """One instance's carried rate when offered twice its nominal capacity."""
    out = _out_dir(ctx, "capacity")
    with ctx.manager(_config(ctx, out, wait_ns, None), label="one instance, overloaded") as m:
        m.set_rate(int(2e9 / wait_ns))
        time.sleep(0.5)
        t0, tx0 = time.monotonic(), m.ports()["out"]["tx_pkts"]
        time.sleep(2.0)
        pps = (m.ports()["out"]["tx_pkts"] - tx0) / (time.monotonic() - t0)
        m.set_rate(0)
    return float(pps)


def _run_steps(
    ctx: Context, m: Any, steps: list[float], cap: float, step_s: float, label: str
) -> dict[str, list[float]]:
    """Offer each step's rate for step_s, sampling every SAMPLE_S."""
    ts: dict[str, list[float]] = defaultdict(list)
    t_start = time.monotonic()
    last_t, last_sent, last_tx = t_start, m.gen()["sent_pkts"], m.ports()["out"]["tx_pkts"]
    for k, units in enumerate(steps):
        m.set_rate(int(units * cap))
        end = time.monotonic() + step_s
        while time.monotonic() < end:
            time.sleep(SAMPLE_S)
            now = time.monotonic()
            sent, tx = m.gen()["sent_pkts"], m.ports()["out"]["tx_pkts"]
            st = m.stats()
            running = 1
            if label == "scaled":
                running = m.query("/squall/scale")["s"]["running"]
            dt = now - last_t
            ts["t"].append(now - t_start)
            ts["offered"].append((sent - last_sent) / dt / 1000)
            ts["carried"].append((tx - last_tx) / dt / 1000)
            ts["instances"].append(running)
            ts["drops"].append(st["drop_pkts"])
            ts["step"].append(k)
            last_t, last_sent, last_tx = now, sent, tx
    m.set_rate(0)
    return ts


def _flows_moved(out: Path) -> tuple[int, int, int]:
    """(flows, flows seen by more than one instance, packets of flows an
    instance could not record) from flowseen's files."""
    seen: dict[str, set[str]] = defaultdict(set)
    unrecorded = 0
    for f in out.glob("flows.*"):
        for line in f.read_text().splitlines():
            if line.startswith("# table full:"):
                unrecorded += int(line.split()[3])
            elif line and not line.startswith("#"):
                seen[line.split()[0]].add(f.name)
    return len(seen), sum(1 for files in seen.values() if len(files) > 1), unrecorded


def run(ctx: Context) -> None:
    wait_ns = ctx.param("wait_ns", 20000)
    steps = ctx.param("steps", [1.0, 4.0, 2.0, 4.0, 1.0, 3.0, 0.5, 4.0, 1.0, 4.0])
    step_s = ctx.param("step_s", 2.0, 1.0)
    max_inst = ctx.param("max_instances", 6)
    cap = _capacity(ctx, wait_ns)
    ctx.log(f"one instance carries {cap / 1000:.1f} kpps (wait {wait_ns} ns a packet)")
    ctx.sample("capacity", pps=cap, wait_ns=wait_ns)

    runs: dict[str, dict[str, list[float]]] = {}
    drops: dict[str, int] = {}
    scale = {"min": 1, "max": max_inst}
    reply: dict[str, Any] = {}
    flows, moved, unrecorded = 0, 0, 0
    for label, policy in (("static", None), ("scaled", scale)):
        out = _out_dir(ctx, label)
        cfg = _config(ctx, out, wait_ns, policy)
        with ctx.manager(cfg, label=f"{label}: one instance" if policy is None else label) as m:
            time.sleep(0.3)
            d0 = m.stats()["drop_pkts"]
            ts = _run_steps(ctx, m, steps, cap, step_s, label)
            time.sleep(0.5)
            drops[label] = int(m.stats()["drop_pkts"] - d0)
            if policy is not None:
                reply = m.query("/squall/scale")
            runs[label] = ts
        if policy is not None:  # the NFs wrote their flows at their stop
            flows, moved, unrecorded = _flows_moved(out)
        for i in range(len(ts["t"])):
            ctx.sample(label, **{k: v[i] for k, v in ts.items()})
        ctx.log(f"{label}: {drops[label]} drops")

    sc = reply.get("s", {})
    ctx.summary["instance_capacity_kpps"] = rounded(cap / 1000, 1)
    ctx.summary["scale_out_ms_p50"] = rounded(reply.get("scale_out_us_p50", 0) / 1000, 2)
    ctx.summary["rerun_ms_p50"] = rounded(reply.get("rerun_us_p50", 0) / 1000, 2)
    ctx.summary["scale_out_samples"] = reply.get("scale_out_samples", 0)
    ctx.summary["rerun_samples"] = reply.get("rerun_samples", 0)
    ctx.summary["flows"] = flows
    ctx.summary["flows_moved"] = moved
    ctx.summary["flows_unrecorded_pkts"] = unrecorded
    ctx.summary["drops_scaled"] = drops["scaled"]
    ctx.summary["drops_static"] = drops["static"]
    ctx.summary["ratio_drops_scaled_vs_static"] = rounded(
        drops["scaled"] / max(drops["static"], 1), 4
    )
    ctx.summary["spawns"] = sc.get("spawns", 0)
    ctx.summary["reruns"] = sc.get("reruns", 0)
    ctx.summary["blocks"] = sc.get("blocks", 0)

    sx, st = runs["scaled"], runs["static"]
    ctx.figure(
        Figure(
            "scaling_step",
            "Offered rate steps: carried rate and instances, scaled against one instance",
            "time (s)",
            "rate (kpps)",
            [
                Series("carried, scaled", sx["t"], sx["carried"], style="-", color="C0"),
                Series("carried, 1 instance", st["t"], st["carried"], style="-", color="C3"),
                Series("offered", sx["t"], sx["offered"], style=":", color="k"),
                Series("instances", sx["t"], sx["instances"], style="--", axis="right", color="C2"),
            ],
            ylabel2="instances running",
            caption=(
                f"Steps of {step_s} s at {steps} x one instance's capacity "
                f"({cap / 1000:.1f} kpps); short TCP connections from the generator."
            ),
        )
    )
    ctx.figure(
        Figure(
            "scaling_step_drops",
            "Drops over the same steps",
            "time (s)",
            "packets dropped (cumulative)",
            [
                Series("scaled", sx["t"], [d - sx["drops"][0] for d in sx["drops"]], style="-"),
                Series("1 instance", st["t"], [d - st["drops"][0] for d in st["drops"]], style="-"),
            ],
        )
    )
    ctx.note(
        "Each instance waits a fixed time per packet, asleep (flowseen --wait-ns): its "
        "capacity is known and instances add capacity on this 2-core machine as they would "
        "with a core each. scale_out_ms is the time from the scaler's overload decision to "
        "the first packet the spawned instance takes; rerun_ms the same for a blocked "
        "instance run again; both are measured by the manager (/squall/scale). Detection "
        "takes hold_intervals x interval_ms (5 x 2 ms) before that. flows_moved counts "
        "flows that the NF instances' own records show on two instances."
    )


EXPERIMENT = Experiment(
    name="scaling_step",
    title="Dynamic scaling: rate steps, scaled against a fixed instance (seed 003 Fig 3)",
    seed="seed 003 §V, Fig 3; issue 15",
    about=(
        "One instance's capacity is measured first (offered twice its nominal rate). Then "
        "the offered rate steps through multiples of it (default 1, 4, 2, 4, 1, 3, 0.5, "
        "2 s each) into a service with scale: {min: 1, max: 6}, and into the same chain "
        "with one fixed instance. Sampled every 50 ms: offered and carried rate, running "
        "instances, drops. Targets: scale_out_ms_p50 <= 10, rerun_ms_p50 <= 1, "
        "flows_moved = 0, ratio_drops_scaled_vs_static <= 0.1."
    ),
    run=run,
    summary_keys=(
        "instance_capacity_kpps",
        "scale_out_ms_p50",
        "rerun_ms_p50",
        "flows_moved",
        "ratio_drops_scaled_vs_static",
        "drops_scaled",
        "drops_static",
    ),
    targets={
        "scale_out_ms_p50": "<= 10",
        "rerun_ms_p50": "<= 1",
        "flows_moved": "<= 0",
        "ratio_drops_scaled_vs_static": "<= 0.1",
    },
    full_minutes=1,
)
