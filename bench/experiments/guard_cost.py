"""What the manager's checks of what NFs hand back cost (issue 16, mgr/guard.h):
1-NF chain PDR with the checks (the default build) against the same source
built with -Dguard_checks=false (descriptors and mbuf headers taken back as
the NF left them), side by side in one run."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from squall.bench import config, mixes
from squall.bench.experiment import Context, Experiment, Figure, rounded, spread, spread_series
from squall.bench.method import Method, Point, measure_rep
from squall.bench.paths import BUILD, ROOT

NO_CHECKS_DIR = ROOT / "build-nochecks"
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

    med = {b: pt.mpps("pdr")["median"] * 1e6 for b, pt in points.items()}
    for b in builds:
        ctx.summary[f"mpps_pdr_{b}_{mix.name}"] = rounded(med[b] / 1e6)
    ok = med["no_checks"] > 0
    ctx.summary["ratio_pdr_checks_vs_no_checks"] = (
        rounded(med["checks"] / med["no_checks"]) if ok else float("nan")
    )
    # (the name for the same figure)
    ctx.summary["ratio_1nf_checked_vs_unchecked"] = ctx.summary["ratio_pdr_checks_vs_no_checks"]
    ctx.summary["guard_give_ns_per_pkt"] = rounded(spread(gives)["median"])
    ctx.summary["guard_take_ns_per_pkt"] = rounded(spread(takes)["median"])
    ctx.summary["guard_ns_per_pkt"] = rounded(spread(gives)["median"] + spread(takes)["median"])
    # what those nanoseconds are of the checks build's time per packet at PDR
    # (the manager's core is this chain's bottleneck)
    if med["checks"] > 0:
        ctx.summary["guard_share_of_pkt_time"] = rounded(
            ctx.summary["guard_ns_per_pkt"] / (1e9 / med["checks"])
        )
    sp = [points[b].mpps("pdr") for b in builds]
    ctx.figure(
        Figure(
            "pdr",
            f"1-NF chain PDR with and without the guard's checks ({mix.label} frames)",
            "build",
            "PDR (Mpps)",
            [spread_series("Squall", list(builds), sp, "o")],
            xscale="category",
            caption=(
                "checks: every descriptor an NF hands back looked up in the manager's own "
                "record and the mbuf header restored (the default); no_checks: the same "
                "source built with -Dguard_checks=false."
            ),
        )
    )
    ctx.note(
        "guard_ns_per_pkt is bench/guard_micro's: the give (before an NF's rx ring) and the "
        "take back with its checks (after its tx ring) on a pool laid out as the "
        "manager's, alone, on core 0, net of the loop around them; guard_share_of_pkt_time "
        "is that against the manager core's time per packet at the checks build's PDR (the "
        "manager's core is this chain's bottleneck). The two builds' PDRs differ by less "
        "than the repetitions of either: NF-core stalls (the NF's ring fills when its core "
        "is taken for a millisecond) decide a PDR on this machine, not a few ns."
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
        "interleaved, 3 repetitions (1 with --quick). And bench/guard_micro: the give and "
        "the take with its checks alone, ns per packet."
    ),
    run=run,
    summary_keys=(
        "ratio_pdr_checks_vs_no_checks",
        "ratio_1nf_checked_vs_unchecked",
        "guard_ns_per_pkt",
        "guard_share_of_pkt_time",
    ),
    targets={"guard_share_of_pkt_time": "<= 0.1", "ratio_1nf_checked_vs_unchecked": ">= 0.95"},
    full_minutes=5,
)
