"""Throughput against frame size for one NF: the L2 forwarder (squall-nf-fwd),
the L3 forwarder (squall-nf-l3fwd, 10 routes) and the 5-tuple firewall
(squall-nf-firewall, 10 rules), seed 002 §4.1, Fig. 2 and Table 1; and the
stateful NFs of issue 18: conntrack, nat (SNAT of every flow), lb (a lookup
per packet) and dpi (10 Vectorscan rules that match nothing, so every payload
is scanned whole)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from squall.bench import config, mixes
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded
from squall.bench.method import Method, Point, measure_point

STATELESS = ["fwd", "l3fwd", "firewall"]
STATEFUL = ["conntrack", "nat", "lb", "dpi"]
NFS = STATELESS + STATEFUL
SIZES = ["64b", "128b", "256b", "512b", "1024b", "1518b", "imix", "dcmix"]
LABEL = {
    "fwd": "L2 forwarder",
    "l3fwd": "L3 forwarder (LPM)",
    "firewall": "firewall (5-tuple)",
    "conntrack": "conntrack",
    "nat": "NAT (SNAT)",
    "lb": "L4 load balancer",
    "dpi": "DPI (Vectorscan, 10 rules)",
}
STYLES = {"fwd": "o", "l3fwd": "s", "firewall": "^", "conntrack": "D", "nat": "v", "lb": "P"}
STYLES["dpi"] = "X"
# The NF counters that show a stateful NF did its job on the generator's
# flows (checked once per NF, at a low rate, before the searches).
CHECK_PKTS = 20_000
CHECK_RATE_PPS = 100_000


def make_cfg(nf: str, mix: mixes.Mix, flows: int, mode: str, workdir: Path) -> Any:
    def cfg(name: str) -> dict[str, Any]:
        svc = config.nf_service(nf, "nf", out=config.OUT_PORT_INDEX, mode=mode, workdir=workdir)
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
    for nf in nfs:
        if nf in STATEFUL:
            check_nf(ctx, nf, flows, mode)
    points: dict[tuple[str, str], Point] = {}
    for nf in nfs:
        for size in sizes:
            mix = mixes.by_name(size)
            label = f"{nf} {mix.label}"
            points[nf, size] = measure_point(
                ctx,
                label,
                make_cfg(nf, mix, flows, mode, ctx.workdir),
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
    for size in ("64b", "1518b"):
        base = points["fwd", size].mpps("pdr")["median"] if ("fwd", size) in points else 0
        for nf in nfs:
            if nf != "fwd" and (nf, size) in points and base > 0:
                v = points[nf, size].mpps("pdr")["median"] / base
                ctx.summary[f"ratio_{nf}_vs_fwd_pdr_{size}"] = rounded(v)
    figures(ctx, points, nfs, sizes)
    ctx.note(
        "The generator runs on the manager's core (core 0) with rx and tx, so the rates "
        "found are what one core sustains generating and forwarding; the NF has core 1."
    )
    ctx.note(
        "Sizes are RFC 2544 frame sizes (FCS included; the 4 FCS bytes are not sent). "
        f"IMIX: {mixes.IMIX.about}. DC mix: {mixes.DC_MIX.about}."
    )
    if any(nf in STATEFUL for nf in nfs):
        ctx.note(
            "Stateful NFs on the generator's UDP flows (10.1.x.y:1024+i -> 10.2.0.1:9): "
            "conntrack (no security groups bound: every new flow allowed) commits each flow "
            "at its first packet and tracks the rest; nat SNATs every flow to 192.0.2.1 (a "
            "port each) and rewrites every packet with incremental checksums; lb has a VIP "
            "the flows do not address, so each packet costs its connection-table lookup and "
            "passes; dpi scans every UDP payload whole against 10 Vectorscan rules that "
            "match nothing (config.DPI_RULES). The counters of each, after a check at "
            f"{CHECK_RATE_PPS:,} pps, are under samples 'nf_check' and summary "
            "check_<nf>_<counter>."
        )


def check_nf(ctx: Context, nf: str, flows: int, mode: str) -> None:
    """Offer CHECK_PKTS of 64 B at a low rate and record the NF's counters:
    the figure is only worth what the NF did (conntrack committed every
    flow, nat translated every packet, dpi matched none)."""
    mix = mixes.by_name("64b")
    cfg = make_cfg(nf, mix, flows, mode, ctx.workdir)(ctx.manager_name())
    with ctx.manager(cfg, label=f"{nf} check") as m:
        m.set_rate(CHECK_RATE_PPS)
        deadline = time.monotonic() + 10 * CHECK_PKTS / CHECK_RATE_PPS
        while int(m.gen()["sent_pkts"]) < CHECK_PKTS and time.monotonic() < deadline:
            time.sleep(0.02)
        m.set_rate(0)
        m.wait_idle()
        sent = int(m.gen()["sent_pkts"])
        counters: dict[str, int] = {}
        for info in m.nfs().values():
            for k, v in (info.get("counters") or {}).items():
                counters[k] = counters.get(k, 0) + int(v)
        drops = {k: int(v) for k, v in (m.stats().get("drops") or {}).items() if v}
    ctx.sample("nf_check", nf=nf, sent_pkts=sent, counters=counters, drops=drops,
               exit_code=m.returncode)  # fmt: skip
    ctx.summary[f"check_{nf}_sent_pkts"] = sent
    for k, v in counters.items():
        ctx.summary[f"check_{nf}_{k}"] = v
    ctx.log(f"{nf} check: {sent} sent, counters {counters}, drops {drops}")


def figures(
    ctx: Context, points: dict[tuple[str, str], Point], nfs: list[str], sizes: list[str]
) -> None:
    """Stateless NFs in one set of plots, stateful ones (with the L2
    forwarder as the reference) in another: seven NFs in one plot are too many."""
    for suffix, group in (("", STATELESS), ("_stateful", ["fwd", *STATEFUL])):
        mine = [nf for nf in group if nf in nfs]
        if mine and (suffix == "" or any(nf in STATEFUL for nf in mine)):
            group_figures(ctx, points, mine, sizes, suffix)


def group_figures(
    ctx: Context,
    points: dict[tuple[str, str], Point],
    nfs: list[str],
    sizes: list[str],
    suffix: str,
) -> None:
    labels = [mixes.by_name(s).label for s in sizes]
    colors = {nf: f"C{NFS.index(nf)}" if nf in NFS else "C9" for nf in nfs}
    what = "stateful NFs" if suffix else "One NF"

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

    styles = STYLES
    for unit, ylabel in (("mpps", "throughput (Mpps)"), ("gbps", "throughput (Gbit/s, L2 frames)")):
        ser = []
        for nf in nfs:
            ser.append(series(nf, "pdr", unit, "-" + styles.get(nf, "o")))
            ser.append(series(nf, "ndr", unit, ":" + styles.get(nf, "o")))
        ctx.figure(
            Figure(
                f"throughput_{unit}{suffix}",
                f"{what}: throughput against frame size (NDR dotted, PDR solid)",
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
                f"latency_half_pdr{suffix}",
                f"{what}: rx-to-tx latency at 50% of PDR",
                "frame size (B, with FCS) or mix",
                "latency (us)",
                ser,
                xscale="category",
            )
        )


KEYS = tuple(
    k
    for nf in NFS
    for k in (f"mpps_ndr_{nf}_64b", f"mpps_pdr_{nf}_64b", f"p50_us_{nf}_64b_half_pdr")
) + tuple(f"ratio_{nf}_vs_fwd_pdr_64b" for nf in STATEFUL)

EXPERIMENT = Experiment(
    name="nf_size",
    title=(
        "One NF: throughput against frame size (L2 forwarder, L3 forwarder, firewall; "
        "conntrack, NAT, load balancer, DPI)"
    ),
    seed="seed 002 §4.1, Fig. 2 and Table 1",
    about=(
        "Each NF alone in a chain, in sleep mode on core 1; the manager's generator offers "
        "UDP frames over 1024 flows on a net_null port, and a net_null port takes what "
        "leaves. For each frame size (64 to 1518 B, IMIX, the data-center mix) NDR and PDR "
        "are searched (MLRsearch-like: 0.5 s, 1 s, then 3 s trials), then latency is "
        "measured at 10%, 50% and 90% of the PDR; 3 repetitions, each with a fresh manager. "
        "The L3 forwarder has 10 routes and the firewall 10 rules, as in the seed; the "
        "generated packets match the last of each. The stateful NFs of issue 18 likewise: "
        "conntrack (every flow committed and tracked), nat (SNAT of every flow), lb (a "
        "connection-table lookup per packet), dpi (10 Vectorscan rules matching nothing: "
        "every payload scanned whole); each NF's counters are checked at a low rate first."
    ),
    run=run,
    summary_keys=KEYS,
    full_minutes=140,
)
