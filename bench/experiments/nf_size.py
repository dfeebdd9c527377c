"""Throughput against frame size for one NF: the L2 forwarder (squall-nf-fwd),
the L3 forwarder (squall-nf-l3fwd, 10 routes) and the 5-tuple firewall
(squall-nf-firewall, 10 rules). Seed 002 §4.1, Fig. 2 and Table 1."""

from __future__ import annotations

from typing import Any

from squall.bench import config, mixes
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded
from squall.bench.method import Method, Point, measure_point

NFS = ["fwd", "l3fwd", "firewall"]
SIZES = ["64b", "128b", "256b", "512b", "1024b", "1518b", "imix", "dcmix"]
LABEL = {"fwd": "L2 forwarder", "l3fwd": "L3 forwarder (LPM)", "firewall": "firewall (5-tuple)"}


def make_cfg(nf: str, mix: mixes.Mix, flows: int, mode: str) -> Any:
    def cfg(name: str) -> dict[str, Any]:
        svc = config.nf_service(nf, "nf", out=config.OUT_PORT_INDEX, mode=mode)
        return config.manager_config(
            name,
            ports=[config.GEN_PORT, config.OUT_PORT],
            services=[svc],
            chains=[{"name": "c", "services": ["nf"]}],
            rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
            gen=config.generator(mix.sizes, flows),
        )

    return cfg


def run(ctx: Context) -> None:
    nfs = ctx.param("nfs", NFS)
    sizes = ctx.param("sizes", SIZES, ["64b"])
    flows = ctx.param("flows", 1024)
    mode = ctx.param("mode", "sleep")
    method = Method.from_ctx(ctx)
    points: dict[tuple[str, str], Point] = {}
    for nf in nfs:
        for size in sizes:
            mix = mixes.by_name(size)
            label = f"{nf} {mix.label}"
            points[nf, size] = measure_point(
                ctx,
                label,
                make_cfg(nf, mix, flows, mode),
                ["c"],
                method,
                nf=nf,
                mix=mix.name,
                sizes=list(mix.sizes),
            )

    for (nf, size), pt in points.items():
        mix = mixes.by_name(size)
        pdr = pt.mpps("pdr")["median"]
        ctx.summary[f"mpps_ndr_{nf}_{size}"] = rounded(pt.mpps("ndr")["median"])
        ctx.summary[f"mpps_pdr_{nf}_{size}"] = rounded(pdr)
        ctx.summary[f"gbps_pdr_{nf}_{size}"] = rounded(mix.gbps(pdr * 1e6))
        if 0.5 in pt.latency:
            ctx.summary[f"p50_us_{nf}_{size}_half_pdr"] = rounded(pt.lat_us(0.5)["median"], 2)
            ctx.summary[f"p99_us_{nf}_{size}_half_pdr"] = rounded(
                pt.lat_us(0.5, "p99_ns")["median"], 2
            )
    if ("fwd", "64b") in points:
        base = points["fwd", "64b"].mpps("pdr")["median"]
        for nf in ("l3fwd", "firewall"):
            if (nf, "64b") in points and base > 0:
                v = points[nf, "64b"].mpps("pdr")["median"] / base
                ctx.summary[f"ratio_{nf}_vs_fwd_pdr_64b"] = rounded(v)

    labels = [mixes.by_name(s).label for s in sizes]

    colors = {nf: f"C{i}" for i, nf in enumerate(nfs)}

    def series(nf: str, which: str, unit: str, style: str) -> Series:
        ys, lo, hi = [], [], []
        for s in sizes:
            sp = points[nf, s].mpps(which)
            k = mixes.by_name(s).gbps(1e6) if unit == "gbps" else 1.0
            ys.append(sp["median"] * k)
            lo.append(sp["min"] * k)
            hi.append(sp["max"] * k)
        label = f"{LABEL.get(nf, nf)}, {which.upper()}"
        return Series(label, labels, ys, lo, hi, style, color=colors[nf])

    styles = {"fwd": "o", "l3fwd": "s", "firewall": "^"}
    for unit, ylabel in (("mpps", "throughput (Mpps)"), ("gbps", "throughput (Gbit/s, L2 frames)")):
        ser = []
        for nf in nfs:
            ser.append(series(nf, "pdr", unit, "-" + styles.get(nf, "o")))
            ser.append(series(nf, "ndr", unit, ":" + styles.get(nf, "o")))
        ctx.figure(
            Figure(
                f"throughput_{unit}",
                "One NF: throughput against frame size (NDR dotted, PDR solid)",
                "frame size (B, with FCS) or mix",
                ylabel,
                ser,
                xscale="category",
                caption="Manager (rx, tx, generator) on core 0, the NF on core 1, sleep mode.",
            )
        )
    if all(0.5 in points[nf, s].latency for nf in nfs for s in sizes):
        ser = []
        for nf in nfs:
            for q, style in (("p50_ns", "-"), ("p99_ns", "--")):
                sp = [points[nf, s].lat_us(0.5, q) for s in sizes]
                ser.append(
                    Series(
                        f"{LABEL.get(nf, nf)}, {q[:3]}",
                        labels,
                        [x["median"] for x in sp],
                        [x["min"] for x in sp],
                        [x["max"] for x in sp],
                        style + styles.get(nf, "o"),
                        color=colors[nf],
                    )
                )
        ctx.figure(
            Figure(
                "latency_half_pdr",
                "One NF: rx-to-tx latency at 50% of PDR",
                "frame size (B, with FCS) or mix",
                "latency (us)",
                ser,
                xscale="category",
            )
        )
    ctx.note(
        "The generator runs on the manager's core (core 0) with rx and tx, so the rates "
        "found are what one core sustains generating and forwarding; the NF has core 1."
    )
    ctx.note(
        "Sizes are RFC 2544 frame sizes (FCS included; the 4 FCS bytes are not sent). "
        f"IMIX: {mixes.IMIX.about}. DC mix: {mixes.DC_MIX.about}."
    )


KEYS = tuple(
    k
    for nf in NFS
    for k in (f"mpps_ndr_{nf}_64b", f"mpps_pdr_{nf}_64b", f"p50_us_{nf}_64b_half_pdr")
)

EXPERIMENT = Experiment(
    name="nf_size",
    title="One NF: throughput against frame size (L2 forwarder, L3 forwarder, firewall)",
    seed="seed 002 §4.1, Fig. 2 and Table 1",
    about=(
        "Each NF alone in a chain, in sleep mode on core 1; the manager's generator offers "
        "UDP frames over 1024 flows on a net_null port, and a net_null port takes what "
        "leaves. For each frame size (64 to 1518 B, IMIX, the data-center mix) NDR and PDR "
        "are searched (MLRsearch-like: 0.5 s, 1 s, then 3 s trials), then latency is "
        "measured at 10%, 50% and 90% of the PDR; 3 repetitions, each with a fresh manager. "
        "The L3 forwarder has 10 routes and the firewall 10 rules, as in the seed; the "
        "generated packets match the last of each."
    ),
    run=run,
    summary_keys=KEYS,
    full_minutes=60,
)
