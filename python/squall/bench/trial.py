"""Trials with the manager's generator: offer a rate for a while and count
(loss = delta of stats drop_pkts / delta of gen sent_pkts, both exact
counters), or measure rx-to-tx latency from the chains' histograms.

The generator runs on the manager's lcore, with rx and tx: at high rates it
takes cycles from them, so a rate found here is the rate the manager core
sustains generating *and* forwarding. Between trials the generator pauses and
the trial waits (bounded) until every mbuf is home, so a trial never starts
with the previous one's queues.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from squall.bench.manager import Manager
from squall.bench.search import PDR, Trial

WARMUP_S = 0.1
IDLE_TIMEOUT_S = 5.0


@dataclass
class Counters:
    t: float
    sent: int
    drops: int
    fwd: int
    drops_by_cause: dict[str, int]

    @classmethod
    def read(cls, m: Manager, out_port: str) -> Counters:
        g = m.gen()
        st = m.stats()
        t = time.monotonic()
        tx = int(m.ports()[out_port]["tx_pkts"])
        return cls(
            t=t,
            sent=int(g["sent_pkts"]),
            # (what the generator's port missed while rx_backpressure held
            # it, as a NIC's missed: offered and lost, but never received)
            drops=int(st["drop_pkts"]) + int(g.get("missed_pkts", 0)),
            fwd=tx,
            drops_by_cause={
                **{str(k): int(v) for k, v in (st.get("drops") or {}).items()},
                "gen_missed": int(g.get("missed_pkts", 0)),
            },
        )


def _start(m: Manager, rate: float) -> None:
    m.set_rate(0)
    m.wait_idle(IDLE_TIMEOUT_S)
    m.set_rate("max" if rate == float("inf") else max(1, round(rate)))
    time.sleep(WARMUP_S)


def _causes(c0: Counters, c1: Counters) -> dict[str, int]:
    d = {k: v - c0.drops_by_cause.get(k, 0) for k, v in c1.drops_by_cause.items()}
    return {k: v for k, v in d.items() if v}


def gen_trial(m: Manager, rate: float, duration_s: float, out_port: str = "out") -> Trial:
    """Offer rate pps (inf: as fast as the generator can) for duration_s."""
    _start(m, rate)
    c0 = Counters.read(m, out_port)
    time.sleep(duration_s)
    c1 = Counters.read(m, out_port)
    lag = int(m.gen().get("lag_pkts", 0))
    m.set_rate(0)
    return Trial(
        rate_pps=rate,
        duration_s=duration_s,
        wall_s=c1.t - c0.t,
        sent_pkts=c1.sent - c0.sent,
        drop_pkts=c1.drops - c0.drops,
        fwd_pkts=c1.fwd - c0.fwd,
        extra={"drops_by_cause": _causes(c0, c1), "gen_lag_pkts_end": lag},
    )


@dataclass
class Latency:
    rate_pps: float
    duration_s: float
    count: int  # packets in the histogram(s)
    mean_ns: float
    p50_ns: float
    p99_ns: float
    p999_ns: float
    sent_pkts: int
    drop_pkts: int
    segments: int  # chains summed (a long chain split over several)

    @property
    def loss_ratio(self) -> float:
        return self.drop_pkts / self.sent_pkts if self.sent_pkts else 0.0

    @property
    def saturated(self) -> bool:
        """Over the PDR loss ratio: queues grow, latency is queueing."""
        return self.loss_ratio > PDR

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["loss_ratio"] = round(self.loss_ratio, 9)
        return d


def latency_at(
    m: Manager,
    chains: Sequence[str],
    rate: float,
    duration_s: float,
    out_port: str = "out",
) -> Latency:
    """rx-to-tx latency at rate pps over duration_s, from the histograms of
    chains (several when one path is split over segment chains: mean and
    quantiles are then sums over the segments, an upper bound for the
    quantiles)."""
    _start(m, rate)
    m.query("/squall/latency_reset")
    time.sleep(0.01)  # the tx role clears the histograms at its next round
    c0 = Counters.read(m, out_port)
    time.sleep(duration_s)
    ch = m.chains()
    c1 = Counters.read(m, out_port)
    m.set_rate(0)
    per = [ch[c] for c in chains]
    count = min(int(c.get("lat_count", 0)) for c in per)
    return Latency(
        rate_pps=rate,
        duration_s=duration_s,
        count=count,
        mean_ns=float(sum(float(c.get("lat_mean_ns", 0)) for c in per)),
        p50_ns=float(sum(float(c.get("lat_p50_ns", 0)) for c in per)),
        p99_ns=float(sum(float(c.get("lat_p99_ns", 0)) for c in per)),
        p999_ns=float(sum(float(c.get("lat_p999_ns", 0)) for c in per)),
        sent_pkts=c1.sent - c0.sent,
        drop_pkts=c1.drops - c0.drops,
        segments=len(per),
    )
