"""The measurement method every generator experiment shares (issue 5):
NDR and PDR by rate search (search.py), then latency at 10%, 50% and 90% of
the PDR; each point repeated (3 by default, 1 with --quick), a fresh manager
per repetition, reported as min/median/max."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.bench.cores import CORE_RTT, CoreGate
from squall.bench.experiment import Context, spread
from squall.bench.search import NDR, PDR, Phase, RateSearch, Trial
from squall.bench.trial import Latency, gen_trial, latency_at

LAT_FRACS = (0.1, 0.5, 0.9)


@dataclass
class Method:
    phases: list[Phase]
    lat_duration_s: float
    lat_fracs: tuple[float, ...] = LAT_FRACS
    max_rate_pps: float = 50e6
    min_rate_pps: float = 1000.0
    gate: CoreGate | None = None  # trials only while the cores are near (cores.py)

    @classmethod
    def from_ctx(cls, ctx: Context, with_latency: bool = True) -> Method:
        """Trial lengths from the context: --quick is short, --set may change them."""
        coarse = ctx.param("coarse_trial_s", 0.5, 0.2)
        fine = ctx.param("fine_trial_s", 1.0, 0.0)
        final = ctx.param("final_trial_s", 3.0, 0.5)
        phases = [Phase(coarse, 0.1)]
        if fine > 0:
            phases.append(Phase(fine, 0.03))
        phases.append(Phase(final, ctx.param("final_width", 0.01, 0.05)))
        lat_s = ctx.param("latency_trial_s", 2.0, 0.3) if with_latency else 0.0
        fracs = tuple(ctx.param("latency_fracs", list(LAT_FRACS), [0.5])) if with_latency else ()
        return cls(phases, lat_s, fracs, gate=core_gate(ctx))


def core_gate(ctx: Context) -> CoreGate | None:
    """The run's gate on the cores' distance (cores.py), one per run; None
    when --set core_gate=false or bench/core_rtt is not built."""
    if not ctx.param("core_gate", True):
        return None
    if not CORE_RTT.exists():
        ctx.note(f"{CORE_RTT} is not built: trials ran whatever the cores' distance")
        return None
    gate = ctx.kept.get("core_gate")
    if gate is None:
        gate = CoreGate(
            wait_s=ctx.param("core_gate_wait_s", 20.0, 1.0),
            retries=ctx.param("core_gate_retries", 3, 1),
            calibrate=8 if not ctx.quick else 2,
        )
        ctx.kept["core_gate"] = gate
    assert isinstance(gate, CoreGate)
    return gate


def gate_note(ctx: Context, gate: CoreGate) -> None:
    """Say once that the gate stopped, and why."""
    if gate.broken is not None and not ctx.kept.get("core_gate_noted"):
        ctx.kept["core_gate_noted"] = True
        ctx.note(f"the core gate stopped ({gate.broken}): later trials ran ungated")


@dataclass
class Point:
    """One configuration measured ctx.reps times."""

    label: str
    ndr_pps: list[float] = field(default_factory=list)
    pdr_pps: list[float] = field(default_factory=list)
    mrr_pps: list[float] = field(default_factory=list)
    latency: dict[float, list[Latency]] = field(default_factory=dict)  # frac -> per rep

    def mpps(self, which: str) -> dict[str, float]:
        vals = {"ndr": self.ndr_pps, "pdr": self.pdr_pps, "mrr": self.mrr_pps}[which]
        return spread(v / 1e6 for v in vals)

    def lat_us(self, frac: float, what: str = "p50_ns") -> dict[str, float]:
        return spread(getattr(lat, what) / 1e3 for lat in self.latency.get(frac, []))


def measure_point(
    ctx: Context,
    label: str,
    make_cfg: Callable[[str], dict[str, Any]],
    chains: Sequence[str],
    method: Method,
    out_port: str = "out",
    **info: Any,
) -> Point:
    """Search NDR/PDR and measure latency at fractions of the PDR, ctx.reps
    times, each with a fresh manager on make_cfg(name)."""
    pt = Point(label)
    for rep in range(ctx.reps):
        measure_rep(ctx, pt, rep, make_cfg, chains, method, out_port, **info)
    return pt


def measure_rep(
    ctx: Context,
    pt: Point,
    rep: int,
    make_cfg: Callable[[str], dict[str, Any]],
    chains: Sequence[str],
    method: Method,
    out_port: str = "out",
    mgr_bin: Path | None = None,
    **info: Any,
) -> None:
    """One repetition of measure_point into pt, with a fresh manager (of
    mgr_bin, another build's, if given): for experiments that interleave
    their cases per repetition, so a slow stretch of the machine hits all."""
    label = pt.label
    with ctx.manager(make_cfg(ctx.manager_name()), label=label, mgr_bin=mgr_bin) as m:

        def one(rate: float, dur: float) -> Trial:
            return gen_trial(m, rate, dur, out_port)

        search = RateSearch(
            method.gate.gated(one) if method.gate is not None else one,
            method.phases,
            min_rate_pps=method.min_rate_pps,
            max_rate_pps=method.max_rate_pps,
        )
        res = search.run()
        lats = []
        for frac in method.lat_fracs:
            if res.pdr_pps <= 0:
                break
            if method.gate is not None:
                method.gate.wait_near()
            lat = latency_at(m, chains, frac * res.pdr_pps, method.lat_duration_s, out_port)
            lats.append((frac, lat))
            pt.latency.setdefault(frac, []).append(lat)
        m.set_rate(0)
        m.wait_idle()
    pt.ndr_pps.append(res.ndr_pps)
    pt.pdr_pps.append(res.pdr_pps)
    pt.mrr_pps.append(res.mrr_pps)
    ctx.sample(
        "rate_search",
        point=label,
        rep=rep,
        **info,
        ndr_pps=round(res.rates_pps[NDR]),
        pdr_pps=round(res.rates_pps[PDR]),
        mrr_pps=round(res.mrr_pps),
        out_of_trials=res.out_of_trials,
        trials=[t.to_dict() for t in res.trials],
        latency=[{"frac_of_pdr": f, **lat.to_dict()} for f, lat in lats],
        exit_code=m.returncode,
    )
    if method.gate is not None:
        ctx.summary.update(method.gate.summary())
        gate_note(ctx, method.gate)
    lat50 = next((lat for f, lat in lats if f == 0.5), None)
    ctx.log(
        f"{label} rep {rep}: NDR {res.ndr_pps / 1e6:.3f} PDR {res.pdr_pps / 1e6:.3f} "
        f"MRR {res.mrr_pps / 1e6:.3f} Mpps ({len(res.trials)} trials)"
        + (f", p50 {lat50.p50_ns / 1e3:.1f} us at 50% PDR" if lat50 else "")
    )
