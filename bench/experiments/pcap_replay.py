"""Replay of a generated data-center trace at the highest rate the manager
takes it (net_pcap, infinite_rx): seed 002 §4.1's "Facebook web-server mix"
measurement, as maximum receive rate (MRR) and loss."""

from __future__ import annotations

import time
from typing import Any

from squall.bench import config, mixes, traces
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread

SYSTEMS = {
    "fwd": ["fwd"],
    "l3fwd": ["l3fwd"],
    "firewall": ["firewall"],
    "chain3": ["firewall", "l3fwd", "fwd"],
}


def run(ctx: Context) -> None:
    mix = mixes.by_name(ctx.param("mix", "dcmix"))
    flows = ctx.param("flows", 1024, 256)
    names = ctx.param("nfs", list(SYSTEMS))
    dur = ctx.param("trial_s", 3.0, 0.5)
    trace = ctx.workdir / f"{mix.name}-{flows}.pcap"
    t0 = time.monotonic()
    n_frames = traces.write_trace(trace, mix, flows)
    ctx.sample("trace", path=trace.name, frames=n_frames, flows=flows, sizes=list(mix.sizes))
    ctx.log(f"trace: {n_frames} frames, {flows} flows, {time.monotonic() - t0:.1f} s with scapy")
    res: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        kinds = SYSTEMS[name]
        svcs = [config.nf_service(k, f"s{i}") for i, k in enumerate(kinds)]
        for rep in range(ctx.reps):
            cfg = config.manager_config(
                ctx.manager_name(),
                ports=[
                    {"name": "in", "devargs": f"net_pcap0,rx_pcap={trace},infinite_rx=1"},
                    config.OUT_PORT,
                ],
                services=svcs,
                chains=[{"name": "c", "services": [s.name for s in svcs]}],
                rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
            )
            with ctx.manager(cfg, label=name) as m:
                time.sleep(0.3)  # past start-up
                p0, s0, t0 = m.ports(), m.stats(), time.monotonic()
                m.query("/squall/latency_reset")
                time.sleep(dur)
                p1, s1, t1 = m.ports(), m.stats(), time.monotonic()
                ch = m.chains()["c"]
            wall = t1 - t0
            rx = p1["in"]["rx_pkts"] - p0["in"]["rx_pkts"]
            tx = p1["out"]["tx_pkts"] - p0["out"]["tx_pkts"]
            txb = p1["out"]["tx_bytes"] - p0["out"]["tx_bytes"]
            drops = s1["drop_pkts"] - s0["drop_pkts"]
            r = {
                "rx_mpps": rx / wall / 1e6,
                "fwd_mpps": tx / wall / 1e6,
                # tx_bytes leave the FCS off; Gbit/s counts frames with it, as the mixes do.
                "fwd_gbps": (txb + 4 * tx) * 8 / wall / 1e9,
                "loss_ratio": drops / rx if rx else 0.0,
                "p50_us": float(ch.get("lat_p50_ns", 0)) / 1e3,
                "p99_us": float(ch.get("lat_p99_ns", 0)) / 1e3,
            }
            res.setdefault(name, []).append(r)
            counts = {"rx_pkts": rx, "tx_pkts": tx, "tx_bytes": txb, "drop_pkts": drops}
            ctx.sample("replay", system=name, kinds=kinds, rep=rep, wall_s=wall, **counts,
                       exit_code=m.returncode, **r)  # fmt: skip
            ctx.log(
                f"{name} rep {rep}: rx {r['rx_mpps']:.3f} fwd {r['fwd_mpps']:.3f} Mpps "
                f"({r['fwd_gbps']:.2f} Gbit/s), loss {r['loss_ratio']:.1%}, "
                f"p50 {r['p50_us']:.0f} us"
            )

    for name in names:
        fwd = spread(r["fwd_mpps"] for r in res[name])
        ctx.summary[f"mpps_mrr_{name}_{mix.name}"] = rounded(fwd["median"])
        ctx.summary[f"gbps_mrr_{name}_{mix.name}"] = rounded(
            spread(r["fwd_gbps"] for r in res[name])["median"]
        )
        ctx.summary[f"loss_ratio_{name}_{mix.name}"] = rounded(
            spread(r["loss_ratio"] for r in res[name])["median"], 4
        )
    ser = []
    for key, label, axis, style in (
        ("fwd_mpps", "forwarded (Mpps)", "left", "o"),
        ("fwd_gbps", "forwarded (Gbit/s)", "right", "s"),
    ):
        sp = [spread(r[key] for r in res[n]) for n in names]
        ser.append(
            Series(
                label,
                names,
                [s["median"] for s in sp],
                [s["min"] for s in sp],
                [s["max"] for s in sp],
                style,
                axis=axis,
            )  # fmt: skip
        )
    ctx.figure(
        Figure(
            "mrr",
            f"Replay of the {mix.label} trace at full speed (net_pcap, infinite_rx)",
            "NF or chain",
            "forwarded (Mpps)",
            ser,
            xscale="category",
            ylabel2="forwarded (Gbit/s, L2 frames)",
            caption=(
                f"{mix.about}; {flows} flows, 70% TCP. "
                "chain3 = firewall, L3 forwarder, L2 forwarder."
            ),
        )
    )
    ctx.note(
        "Replay is unpaced: the manager's rx takes frames as fast as it polls, so this is the "
        "maximum receive rate (MRR) with the loss it costs, not a no-drop rate."
    )


EXPERIMENT = Experiment(
    name="pcap_replay",
    title="Replay of a data-center size mix trace (MRR and loss)",
    seed="seed 002 §4.1 (Facebook web-server packet sizes through one NF)",
    about=(
        "The harness writes a trace with scapy: the data-center size mix (median 120 B, 80% "
        "under 256 B) over 1024 TCP and UDP flows, one lcm(flows, 64)-frame period. squall-mgr "
        "replays it from a net_pcap port with infinite_rx=1 through each NF alone and through "
        "the 3-NF chain; over 3 s windows it counts what was received, forwarded and dropped, "
        "and the chain's latency (under overload: queueing). 3 repetitions."
    ),
    run=run,
    summary_keys=tuple(f"mpps_mrr_{n}_dcmix" for n in SYSTEMS),
    needs_generator=False,
    full_minutes=2,
)
