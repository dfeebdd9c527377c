"""What the manager's checks of what NFs hand back cost (issue 16, mgr/guard.h):
1-NF chain PDR with the checks (the default build) against the same source
built with -Dguard_checks=false (descriptors and mbuf headers taken back as
the NF left them), side by side in one run."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Any

from squall.bench import config, mixes
from squall.bench.experiment import (
    Context,
    Experiment,
    Figure,
    Series,
    rounded,
    spread,
    spread_series,
)
from squall.bench.method import Method, Point, measure_rep
from squall.bench.paths import BUILD, ROOT
from squall.bench.trial import gen_trial

NO_CHECKS_DIR = ROOT / "build-nochecks"
MRR_REPS = 7
TARGET_RATIO = 0.95
# How the two builds read on the plots.
SHOWN = {"checks": "with the checks (default)", "no_checks": "without (-Dguard_checks=false)"}
GUARD_MICRO = BUILD / "bench" / "guard_micro"


def micro(ctx: Context, seconds: float) -> tuple[float, float]:
    """bench/guard_micro on core 0 (the manager's): ns per packet of the give
    and of the take back with its checks, alone."""
    cmd = [str(GUARD_MICRO), str(seconds), "0"]
    ctx.command(" ".join(cmd), what="guard_micro")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    _, give, take, _loop = out.stdout.split()
    return float(give), float(take)


def no_checks_build(ctx: Context) -> Path:
    """The same source with the checks compiled out, built (or brought up to
    date) here: meson setup once, then ninja."""
    if not (NO_CHECKS_DIR / "build.ninja").is_file():
        cmd = ["meson", "setup", str(NO_CHECKS_DIR), str(ROOT), "-Dguard_checks=false"]
        ctx.command(" ".join(cmd), what="build")
        subprocess.run(cmd, check=True, capture_output=True)
    cmd = ["ninja", "-C", str(NO_CHECKS_DIR), "mgr/squall-mgr"]
    ctx.command(" ".join(cmd), what="build")
    subprocess.run(cmd, check=True, capture_output=True)
    return NO_CHECKS_DIR / "mgr" / "squall-mgr"


def make_cfg(name: str, mix: mixes.Mix, flows: int, nf: str) -> dict[str, Any]:
    return config.manager_config(
        name,
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[config.nf_service(nf, "nf", out=config.OUT_PORT_INDEX)],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=config.generator(mix.sizes, flows),
    )


def mrr(ctx: Context, mgr_bin: Path, cfg_of: Any, build: str, seconds: float) -> float:
    """Mpps forwarded with the generator unpaced (the maximum receive rate):
    the manager's core is then busy every cycle, so what its checks cost
    shows, unlike at the PDR, which an NF-core stall of a millisecond decides."""
    with ctx.manager(cfg_of(ctx.manager_name()), mgr_bin=mgr_bin, label=f"{build} mrr") as m:
        gen_trial(m, math.inf, min(1.0, seconds))  # warm
        return gen_trial(m, math.inf, seconds).fwd_rate_pps / 1e6


def run(ctx: Context) -> None:
    mix = mixes.by_name(ctx.param("size", "64b"))
    flows = ctx.param("flows", 1024)
    nf = ctx.param("nf", "fwd")
    builds = {"checks": BUILD / "mgr" / "squall-mgr", "no_checks": no_checks_build(ctx)}
    method = Method.from_ctx(ctx, with_latency=False)
    points = {b: Point(b) for b in builds}
    gives: list[float] = []
    takes: list[float] = []
    # Interleaved per repetition: a slow stretch of the shared machine hits
    # both builds alike.
    for rep in range(ctx.reps):
        give, take = micro(ctx, 0.5 if ctx.quick else 2.0)
        gives.append(give)
        takes.append(take)
        ctx.sample("guard_micro", rep=rep, give_ns=give, take_ns=take)
        ctx.log(f"guard_micro rep {rep}: give {give:.2f} ns, take {take:.2f} ns per packet")
        for build, mgr_bin in builds.items():
            measure_rep(
                ctx,
                points[build],
                rep,
                lambda name: make_cfg(name, mix, flows, nf),
                ["c"],
                method,
                mgr_bin=mgr_bin,
                build=build,
            )

    # The MRR, interleaved (each rep in the other order), MRR_REPS times: one
    # trial of seconds each, so many more repetitions than the rate search.
    seconds = 1.0 if ctx.quick else 3.0
    mrrs: dict[str, list[float]] = {b: [] for b in builds}
    for rep in range(1 if ctx.quick else ctx.param("mrr_reps", MRR_REPS)):
        order = list(builds) if rep % 2 == 0 else list(reversed(builds))
        for build in order:
            mpps = mrr(
                ctx, builds[build], lambda name: make_cfg(name, mix, flows, nf), build, seconds
            )
            mrrs[build].append(mpps)
            ctx.sample("mrr", rep=rep, build=build, mpps=mpps)
            ctx.log(f"{build} mrr rep {rep}: {mpps:.3f} Mpps")
    mrr_med = {b: spread(v)["median"] for b, v in mrrs.items()}
    for b in builds:
        ctx.summary[f"mpps_mrr_{b}_{mix.name}"] = rounded(mrr_med[b])

    med = {b: pt.mpps("pdr")["median"] * 1e6 for b, pt in points.items()}
    for b in builds:
        ctx.summary[f"mpps_pdr_{b}_{mix.name}"] = rounded(med[b] / 1e6)
    # Each repetition measured both builds back to back: its ratio is of two
    # runs a slow stretch of the machine hit alike. The ratios' median and
    # spread, at the MRR and at the PDR.
    ratios = {
        "mrr": [c / n for c, n in zip(mrrs["checks"], mrrs["no_checks"], strict=True) if n > 0],
        "pdr": [
            c / n
            for c, n in zip(points["checks"].pdr_pps, points["no_checks"].pdr_pps, strict=True)
            if n > 0
        ],
    }
    for which, rs in ratios.items():
        sp = spread(rs)
        for k in ("median", "min", "max"):
            ctx.summary[f"ratio_{which}_checks_vs_no_checks_{k}"] = rounded(sp[k])
    # The figure, of the 1-NF chain: at the MRR, where the manager's
    # core (which runs the checks) is the bottleneck and repetitions agree;
    # the PDR's, beside it, decided by NF-core stalls (pdr_max_vs_min_checks).
    ctx.summary["ratio_1nf_checked_vs_unchecked"] = ctx.summary[
        "ratio_mrr_checks_vs_no_checks_median"
    ]
    # how far apart one build's own PDRs are: the reason the ratio is not of them
    pdr = points["checks"].mpps("pdr")
    ctx.summary["pdr_max_vs_min_checks"] = rounded(pdr["max"] / pdr["min"]) if pdr["min"] > 0 else 0
    ctx.summary["guard_give_ns_per_pkt"] = rounded(spread(gives)["median"])
    ctx.summary["guard_take_ns_per_pkt"] = rounded(spread(takes)["median"])
    ctx.summary["guard_ns_per_pkt"] = rounded(spread(gives)["median"] + spread(takes)["median"])
    # what those nanoseconds are of the manager core's time per packet at the
    # checks build's MRR (busy every cycle there)
    if mrr_med["checks"] > 0:
        ctx.summary["guard_share_of_pkt_time"] = rounded(
            ctx.summary["guard_ns_per_pkt"] / (1e3 / mrr_med["checks"])
        )
    shown = [SHOWN[b] for b in builds]

    def target_line(no_checks: float) -> Series:
        return Series(
            f"target: with the checks >= {TARGET_RATIO:g} x without",
            shown,
            [TARGET_RATIO * no_checks] * len(shown),
        )

    ctx.figure(
        Figure(
            "mrr",
            f"1-NF chain maximum receive rate with and without the guard's checks "
            f"({mix.label} frames)",
            "manager build",
            "forwarded at the MRR (Mpps)",
            [
                spread_series(
                    "1-NF chain, L2 forwarder: median, bars min..max",
                    shown,
                    [spread(mrrs[b]) for b in builds],
                    "o",
                ),
                target_line(mrr_med["no_checks"]),
            ],
            xscale="category",
            caption="The generator unpaced, one trial per build per repetition, interleaved.",
        )
    )
    ctx.figure(
        Figure(
            "pdr",
            f"1-NF chain PDR with and without the guard's checks ({mix.label} frames)",
            "manager build",
            "PDR (Mpps)",
            [
                spread_series(
                    "1-NF chain, L2 forwarder: median, bars min..max",
                    shown,
                    [points[b].mpps("pdr") for b in builds],
                    "o",
                ),
                target_line(med["no_checks"] / 1e6),
            ],
            xscale="category",
            caption=(
                "With the checks: every descriptor an NF hands back looked up in the "
                "manager's own record and the mbuf header restored (the default); without: "
                "the same source built with -Dguard_checks=false."
            ),
        )
    )
    ctx.figure(
        Figure(
            "ratio",
            "1-NF chain: with the checks against without, per interleaved repetition",
            "rate measured",
            "with / without the checks",
            [
                spread_series(
                    "ratio of one repetition's two runs: median, bars min..max",
                    ["at the MRR", "at the PDR"],
                    [spread(ratios["mrr"]), spread(ratios["pdr"])],
                    "o",
                ),
                Series(
                    f"target: >= {TARGET_RATIO:g}",
                    ["at the MRR", "at the PDR"],
                    [TARGET_RATIO, TARGET_RATIO],
                ),
            ],
            xscale="category",
            caption=(
                f"{len(ratios['mrr'])} MRR repetitions, {len(ratios['pdr'])} PDR repetitions "
                "(each a rate search), both builds back to back in each."
            ),
        )
    )
    ctx.note(
        "guard_ns_per_pkt is bench/guard_micro's: the give (before an NF's rx ring) and the "
        "take back with its checks (after its tx ring) on a pool laid out as the "
        "manager's, alone, on core 0, net of the loop around them; guard_share_of_pkt_time "
        "is that against the manager core's time per packet at the checks build's MRR."
    )
    ctx.note(
        "ratio_1nf_checked_vs_unchecked is the median of the per-repetition ratios at the "
        "MRR (the generator unpaced: the manager's core, which runs the checks, busy every "
        "cycle), the basis chosen because there the checks are what differs between the two "
        "runs. The PDR's ratios are reported beside it (ratio_pdr_checks_vs_no_checks_*, and "
        "the ratio plot): one build's own PDRs differ by pdr_max_vs_min_checks times between "
        "repetitions, as NF-core stalls (the NF's ring fills when its core is taken for a "
        "millisecond) decide a PDR on this machine, not a few ns of the manager's."
    )


EXPERIMENT = Experiment(
    name="guard_cost",
    title="A manager that trusts no NF: what checking what NFs hand back costs",
    seed="issue 16 (untrusted NFs): the cost of the descriptor and mbuf header checks",
    about=(
        "A 1-NF chain (the L2 forwarder, sleeping when idle, on core 1) fed 64 B frames over "
        "1024 flows by the manager's generator. PDR (0.5% loss) by rate search with the "
        "default build, whose tx role takes back only descriptors it gave that NF (its own "
        "record per mbuf) and restores each mbuf's header, and with the same source built "
        "with `-Dguard_checks=false` into build-nochecks (made by the experiment); the two "
        "interleaved, 3 repetitions (1 with --quick); the maximum receive rate (the "
        "generator unpaced) of each, interleaved, 7 repetitions of 3 s (1 of 1 s with "
        "--quick). And bench/guard_micro: the give and the take with its checks alone, ns "
        "per packet."
    ),
    run=run,
    summary_keys=(
        "ratio_1nf_checked_vs_unchecked",
        "ratio_mrr_checks_vs_no_checks_min",
        "ratio_mrr_checks_vs_no_checks_max",
        "ratio_pdr_checks_vs_no_checks_median",
        "ratio_pdr_checks_vs_no_checks_min",
        "ratio_pdr_checks_vs_no_checks_max",
        "pdr_max_vs_min_checks",
        "guard_ns_per_pkt",
        "guard_share_of_pkt_time",
    ),
    targets={
        "guard_share_of_pkt_time": "<= 0.1",
        "ratio_1nf_checked_vs_unchecked": f">= {TARGET_RATIO:g}",
    },
    full_minutes=5,
)
