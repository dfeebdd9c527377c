"""What the strict NF sandbox costs (issue 16; mgr/sandbox.c, mgr/spawn.c):
1-NF chain PDR with the NF under `sandbox: strict` (its own uid, the seccomp
filter) against the same NF with `sandbox: none`, side by side in one run,
and bench/sandbox_micro: the filter's cost per system call alone."""

from __future__ import annotations

import subprocess
from typing import Any

from squall.bench import config, mixes
from squall.bench.experiment import Context, Experiment, Figure, rounded, spread, spread_series
from squall.bench.method import Method, Point, measure_rep
from squall.bench.paths import BUILD

SANDBOX_MICRO = BUILD / "bench" / "sandbox_micro"
CASES = ("none", "strict")


def micro(ctx: Context, calls: int) -> dict[str, float]:
    """bench/sandbox_micro on core 1 (the NFs'): ns per getppid and per
    FUTEX_WAKE, without and with the filter."""
    cmd = [str(SANDBOX_MICRO), str(calls), "1"]
    ctx.command(" ".join(cmd), what="sandbox_micro")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    _, g_off, g_on, f_off, f_on = out.stdout.split()
    return {
        "getppid_off": float(g_off),
        "getppid_on": float(g_on),
        "futex_off": float(f_off),
        "futex_on": float(f_on),
    }


def make_cfg(name: str, mix: mixes.Mix, flows: int, nf: str, sandbox: str) -> dict[str, Any]:
    cfg = config.manager_config(
        name,
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[config.nf_service(nf, "nf", out=config.OUT_PORT_INDEX)],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=config.generator(mix.sizes, flows),
    )
    cfg["services"][0]["sandbox"] = sandbox
    return cfg


def run(ctx: Context) -> None:
    mix = mixes.by_name(ctx.param("size", "64b"))
    flows = ctx.param("flows", 1024)
    nf = ctx.param("nf", "fwd")
    method = Method.from_ctx(ctx, with_latency=False)
    points = {c: Point(c) for c in CASES}
    micros: list[dict[str, float]] = []
    # Interleaved per repetition: a slow stretch of the shared machine hits
    # both cases alike.
    for rep in range(ctx.reps):
        m_ns = micro(ctx, 200_000 if ctx.quick else 2_000_000)
        micros.append(m_ns)
        ctx.sample("sandbox_micro", rep=rep, **m_ns)
        ctx.log(
            f"sandbox_micro rep {rep}: futex wake {m_ns['futex_off']:.1f} -> "
            f"{m_ns['futex_on']:.1f} ns, getppid {m_ns['getppid_off']:.1f} -> "
            f"{m_ns['getppid_on']:.1f} ns"
        )
        for case, pt in points.items():
            measure_rep(
                ctx,
                pt,
                rep,
                lambda name, case=case: make_cfg(name, mix, flows, nf, case),
                ["c"],
                method,
                sandbox=case,
            )

    med = {c: pt.mpps("pdr")["median"] for c, pt in points.items()}
    for c in CASES:
        ctx.summary[f"mpps_pdr_sandbox_{c}_{mix.name}"] = rounded(med[c])
    ctx.summary["ratio_pdr_strict_vs_none"] = (
        rounded(med["strict"] / med["none"]) if med["none"] > 0 else float("nan")
    )
    mrr_med = {c: pt.mpps("mrr")["median"] for c, pt in points.items()}
    ctx.summary["ratio_mrr_strict_vs_none"] = (
        rounded(mrr_med["strict"] / mrr_med["none"]) if mrr_med["none"] > 0 else float("nan")
    )
    for call in ("futex", "getppid"):
        ctx.summary[f"sandbox_filter_ns_per_{call}"] = rounded(
            spread(m[f"{call}_on"] - m[f"{call}_off"] for m in micros)["median"]
        )
    sp = [points[c].mpps("pdr") for c in CASES]
    ctx.figure(
        Figure(
            "pdr",
            f"1-NF chain PDR with the NF sandboxed or not ({mix.label} frames)",
            "sandbox",
            "PDR (Mpps)",
            [spread_series("Squall", list(CASES), sp, "o")],
            xscale="category",
            caption=(
                "none: the NF runs as manager.nf_user without capabilities (the default); "
                "strict: also its own uid and the manager's seccomp filter, loaded before "
                "execve."
            ),
        )
    )
    ctx.note(
        "sandbox_filter_ns_per_* are bench/sandbox_micro's, on core 1: the same system call "
        "timed in one process before and after it loads the manager's filter (a deny list "
        "with a default of allow: every call the NF makes walks it). A sleeping NF's calls "
        "are its futex waits and the yields of its spin; the packets themselves cost it no "
        "system call, so the filter shows in a PDR only through those. The PDRs of the two "
        "cases spread over each other's range on this machine (NF-core stalls of a "
        "millisecond decide a PDR here): their ratio is reported, the filter's cost per "
        "call is the target."
    )


EXPERIMENT = Experiment(
    name="sandbox_cost",
    title="The strict NF sandbox: what its own uid and seccomp filter cost",
    seed="issue 16 (untrusted NFs): the price of the sandbox",
    about=(
        "A 1-NF chain (the L2 forwarder, sleeping when idle, on core 1) fed 64 B frames over "
        "1024 flows by the manager's generator. PDR (0.5% loss) by rate search with the NF's "
        "service at `sandbox: none` and at `sandbox: strict`, interleaved, 3 repetitions (1 "
        "with --quick). And bench/sandbox_micro: ns per system call before and after the "
        "filter is loaded."
    ),
    run=run,
    summary_keys=(
        "ratio_pdr_strict_vs_none",
        "ratio_mrr_strict_vs_none",
        "sandbox_filter_ns_per_futex",
        "sandbox_filter_ns_per_getppid",
    ),
    targets={"sandbox_filter_ns_per_futex": "<= 50"},
    full_minutes=5,
)
