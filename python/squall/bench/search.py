"""NDR and PDR by search over the offered rate, after FD.io CSIT's MLRsearch.

A *trial* offers a rate for a duration and counts what was sent and what was
lost. The search is coarse-to-fine: phases of growing trial duration and
shrinking width goal. Each phase first re-measures the lower bound it
inherited at its own (longer) duration, moves the bounds outward when they
turn out wrong (external search, with a step that doubles), then bisects
until the bounds are within the phase's width. The last phase is the final
one: its trials are the longest, so the rate reported was held for a full
final trial. The first trial offers as much as the source can; its forwarding
rate is where the search starts (MLRsearch's MRR start).

PDR (loss ratio <= 0.5%) is searched first; NDR (no loss) starts from the PDR
found, and every trial already made is reused when it settles a question.

Pure logic: ``measure(rate_pps, duration_s)`` is given, so the search is
tested without a manager.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

NDR = 0.0
PDR = 0.005
# The source must have offered this share of the rate asked for; less means
# the manager core (which runs the generator) could not keep up, which counts
# as a failed trial whatever the loss.
MIN_OFFERED_RATIO = 0.995


@dataclass
class Trial:
    rate_pps: float  # asked for; float("inf") = as fast as the source can
    duration_s: float  # asked for
    wall_s: float  # measured window
    sent_pkts: int  # by the source, in the window
    drop_pkts: int  # by the system under test, in the window (every cause)
    fwd_pkts: int  # left the system under test, in the window
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def loss_ratio(self) -> float:
        return self.drop_pkts / self.sent_pkts if self.sent_pkts > 0 else 1.0

    @property
    def offered_ratio(self) -> float:
        if self.rate_pps == float("inf"):
            return 1.0
        want = self.rate_pps * self.wall_s
        return self.sent_pkts / want if want > 0 else 0.0

    @property
    def fwd_rate_pps(self) -> float:
        return self.fwd_pkts / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def sent_rate_pps(self) -> float:
        return self.sent_pkts / self.wall_s if self.wall_s > 0 else 0.0

    def passes(self, loss_ratio: float) -> bool:
        return self.offered_ratio >= MIN_OFFERED_RATIO and self.loss_ratio <= loss_ratio

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["rate_pps"] == float("inf"):
            d["rate_pps"] = "max"
        d["loss_ratio"] = round(self.loss_ratio, 9)
        d["offered_ratio"] = round(self.offered_ratio, 6)
        return d


@dataclass(frozen=True)
class Phase:
    duration_s: float
    width: float  # relative: stop when (upper - lower) <= width * upper


Measure = Callable[[float, float], Trial]


class _OutOfTrials(Exception):
    pass


@dataclass
class SearchResult:
    rates_pps: dict[float, float]  # loss ratio -> highest rate that passed
    mrr_pps: float  # forwarding rate at the source's maximum
    trials: list[Trial]
    out_of_trials: bool = False  # max_trials reached: the rates are lower bounds only

    @property
    def ndr_pps(self) -> float:
        return self.rates_pps.get(NDR, 0.0)

    @property
    def pdr_pps(self) -> float:
        return self.rates_pps.get(PDR, 0.0)


class RateSearch:
    def __init__(
        self,
        measure: Measure,
        phases: Sequence[Phase],
        *,
        min_rate_pps: float = 1000.0,
        max_rate_pps: float = 50e6,
        loss_ratios: Sequence[float] = (NDR, PDR),
        max_trials: int = 60,
    ) -> None:
        if not phases:
            raise ValueError("at least one phase")
        self.measure = measure
        self.phases = list(phases)
        self.min_rate = min_rate_pps
        self.max_rate = max_rate_pps
        self.loss_ratios = sorted(loss_ratios, reverse=True)
        self.max_trials = max_trials
        self.trials: list[Trial] = []

    def _trial(self, rate: float, duration: float) -> Trial:
        if len(self.trials) >= self.max_trials:
            raise _OutOfTrials
        t = self.measure(rate, duration)
        self.trials.append(t)
        return t

    def _known(self, rate: float, duration: float, ratio: float) -> bool | None:
        """A trial already made at this rate and duration settles it."""
        for t in self.trials:
            if t.duration_s == duration and abs(t.rate_pps - rate) <= 1e-6 * rate:
                return t.passes(ratio)
        return None

    def _passes(
        self, rate: float, duration: float, ratio: float, found: list[float] | None = None
    ) -> bool:
        known = self._known(rate, duration, ratio)
        ok = known if known is not None else self._trial(rate, duration).passes(ratio)
        if ok and found is not None and duration == self.phases[-1].duration_s:
            if not found or rate > found[-1]:
                found.append(rate)
        return ok

    def run(self) -> SearchResult:
        first = self.phases[0]
        mrr = self._trial(float("inf"), first.duration_s)
        start = min(self.max_rate, max(self.min_rate, mrr.fwd_rate_pps))
        rates: dict[float, float] = {}
        out_of_trials = False
        for ratio in self.loss_ratios:
            found: list[float] = []
            try:
                rates[ratio] = self._search(ratio, start, found)
            except _OutOfTrials:
                # What passed so far is still a valid lower bound.
                rates[ratio] = found[-1] if found else 0.0
                out_of_trials = True
            # A lower loss ratio never passes at a higher rate.
            start = max(self.min_rate, rates[ratio])
        # A rate held with less loss also meets every looser ratio (noise can
        # let the stricter search climb past where the looser one stopped).
        for i, ratio in enumerate(self.loss_ratios):
            rates[ratio] = max(rates[r] for r in self.loss_ratios[i:])
        return SearchResult(rates, mrr.fwd_rate_pps, self.trials, out_of_trials)

    def _search(self, ratio: float, start: float, found: list[float]) -> float:
        """found gets each lower bound held in the final phase, so a search cut
        short still reports one."""
        lower: float | None = None
        upper: float | None = None
        for phase in self.phases:
            d, w = phase.duration_s, phase.width
            if lower is not None and not self._passes(lower, d, ratio, found):
                upper, lower = lower, None
            if lower is None and upper is None:
                if self._passes(start, d, ratio, found):
                    lower = start
                else:
                    upper = start
            step = w
            while lower is None:  # external search downwards
                assert upper is not None
                cand = max(self.min_rate, upper * (1 - step))
                if self._passes(cand, d, ratio, found):
                    lower = cand
                elif cand <= self.min_rate:
                    return 0.0  # not even the minimum rate passes
                else:
                    upper = cand
                    step = min(2 * step, 0.5)
            step = w
            while upper is None:  # external search upwards
                cand = min(self.max_rate, lower * (1 + step))
                if not self._passes(cand, d, ratio, found):
                    upper = cand
                elif cand >= self.max_rate:
                    upper = lower = cand  # capped: passes at the maximum
                else:
                    lower = cand
                    step = 2 * step
            while upper - lower > w * upper:
                mid = (lower + upper) / 2
                if self._passes(mid, d, ratio, found):
                    lower = mid
                else:
                    upper = mid
        assert lower is not None
        return lower
