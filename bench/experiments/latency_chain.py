"""Latency against chain length at one sending rate for every chain.
Seed 002 §5.2, Fig. 6 (there: 128 B at 2 Mpps, average latency)."""

from __future__ import annotations

from typing import Any

from squall.bench import chains, config, mixes
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.trial import Latency, latency_at

LENGTHS = [1, 2, 3, 10, 50]
RATES = [1_000, 10_000]
# NF settings compared: the default (spin 20 us before sleeping) and no spin.
CONFIGS: dict[str, dict[str, Any]] = {"default": {}, "spin0": {"spin_us": 0}}
LABELS = {"default": "spin 20 us (default)", "spin0": "no spin before sleep"}


def run(ctx: Context) -> None:
    lengths = ctx.param("lengths", LENGTHS)
    rates = ctx.param("rates", RATES)
    size = ctx.param("size", "128b")
    dur = ctx.param("trial_s", 3.0, 0.4)
    mode = ctx.param("mode", "sleep")
    configs = ctx.param("configs", list(CONFIGS))
    mix = mixes.by_name(size)
    hops = chains.max_hops(ctx.workdir, ctx.manager_name(), max(lengths))
    res = {conf: measure(ctx, conf, lengths, rates, mix, dur, mode, hops) for conf in configs}
    for rate in rates:
        ser = []
        for i, conf in enumerate(configs):
            for q, style in (("mean_ns", "-o"), ("p99_ns", "--^")):
                sp = [spread(getattr(x, q) / 1e3 for x in res[conf][n, rate]) for n in lengths]
                ser.append(
                    Series(
                        f"{q.split('_')[0]}, {LABELS.get(conf, conf)}",
                        list(lengths),
                        [s["median"] for s in sp],
                        [s["min"] for s in sp],
                        [s["max"] for s in sp],
                        style,
                        color=f"C{i}",
                    )
                )
        ctx.figure(
            Figure(
                f"latency_{rate}pps",
                f"rx-to-tx latency against chain length at {rate:,} pps ({mix.label})",
                "NFs in the chain",
                "latency (us)",
                ser,
                xscale="log",
                yscale="log",
                caption="Chains as in chain_length; all NFs sleep when idle and share core 1.",
            )
        )


def measure(
    ctx: Context,
    conf: str,
    lengths: list[int],
    rates: list[int],
    mix: mixes.Mix,
    dur: float,
    mode: str,
    hops: int,
) -> dict[tuple[int, int], list[Latency]]:
    res: dict[tuple[int, int], list[Latency]] = {}
    for n in lengths:
        setup = chains.build(config.paper_chain(n), hops, mode=mode, **CONFIGS[conf])
        for rep in range(ctx.reps):
            cfg = config.manager_config(
                ctx.manager_name(),
                ports=setup.ports,
                services=setup.services,
                chains=setup.chains,
                rules=setup.rules,
                gen=config.generator(mix.sizes, 1024),
            )
            with ctx.manager(cfg, label=f"{n} NF {conf}") as m:
                for rate in rates:
                    r = latency_at(m, setup.chain_names, float(rate), dur)
                    res.setdefault((n, rate), []).append(r)
                    ctx.sample(
                        "latency", config=conf, nfs=n, rep=rep, kinds=setup.kinds, **r.to_dict()
                    )
                    ctx.log(
                        f"{conf} {n} NF rep {rep} {rate} pps: mean {r.mean_ns / 1e3:.1f} p50 "
                        f"{r.p50_ns / 1e3:.1f} p99 {r.p99_ns / 1e3:.1f} us, loss {r.loss_ratio:.2%}"
                    )

    def med(n: int, rate: int, q: str) -> float:
        return spread(getattr(x, q) / 1e3 for x in res[n, rate])["median"]

    sfx = "" if conf == "default" else f"_{conf}"
    for n in lengths:
        for rate in rates:
            k = f"{rate // 1000}kpps" if rate % 1000 == 0 else f"{rate}pps"
            ctx.summary[f"mean_us_{n}nf_{k}{sfx}"] = rounded(med(n, rate, "mean_ns"), 2)
            ctx.summary[f"p99_us_{n}nf_{k}{sfx}"] = rounded(med(n, rate, "p99_ns"), 2)
            lost = max(x.loss_ratio for x in res[n, rate])
            if lost > 0.005:
                ctx.note(
                    f"{conf}: {n} NF at {rate} pps lost {lost:.1%}: saturated, latency is queueing"
                )
        if n > lengths[0]:
            per_hop = (med(n, rates[0], "mean_ns") - med(lengths[0], rates[0], "mean_ns")) / (
                n - lengths[0]
            )
            ctx.summary[f"us_per_extra_nf_{n}nf_{rates[0]}pps{sfx}"] = rounded(per_hop, 2)

    return res


EXPERIMENT = Experiment(
    name="latency_chain",
    title="Latency against chain length at fixed sending rates",
    seed="seed 002 §5.2, Fig. 6",
    about=(
        "The chains of chain_length (1, 2, 3, 10, 50 NFs: L3 forwarder; firewall + L3 "
        "forwarder; + L2 forwarders), each offered the same rates (1k and 10k pps of 128 B "
        "frames: rates the longest chain still carries here; the seed used 2 Mpps on a "
        "faster machine with one core per NF) for 3 s windows; mean and 99th percentile "
        "rx-to-tx latency, 3 repetitions, and the latency each extra NF adds. Twice: with "
        "the default NF settings (a sleeping NF spins 20 us on an empty ring first) and "
        "with no spin (spin_us: 0), since spinning NFs delay the others sharing their core."
    ),
    run=run,
    summary_keys=tuple(f"mean_us_{n}nf_{r // 1000}kpps" for n in LENGTHS for r in RATES),
    full_minutes=4,
)
