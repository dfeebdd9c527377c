"""How far apart the manager's core and the NFs' core are right now, and a
gate that keeps rate-search trials to the times they are near.

On a VM the hypervisor places the vCPUs on host cores and moves them at will.
On the 2-vCPU AMD EPYC machine the round trip of a cache line between cpu0
and cpu1 (bench/core_rtt) was ~57 ns most of the time and ~335 ns for
stretches of seconds to minutes, and a 1-NF chain, whose packets cross
between the manager's core and the NF's twice, forwarded 11.0-11.6 Mpps in
the first state and 4.6-5.6 Mpps in the second. Its PDR moved 2.6x between
the repetitions of one run (3.9-10.2 Mpps), and every ratio against it with
it: a trial measured the host's placement as much as Squall.

CoreGate reads the round trip (a few ms, between trials, while the offered
rate is 0) before each trial, waits a bounded time for the cores to be near
(within NEAR_FACTOR of the fastest round trip the run has seen), and has a
trial redone, a bounded number of times, when they were far at either end of
it. A run that starts in the far state reads on for a nearer round trip
before its first trial (SUSPECT_NS). What it did goes into each trial's
record (extra.core_rtt_ns) and the run's summary (core_rtt_ns_best,
core_rtt_ns_median, trials_core_far_redone, trials_core_far_kept: trials
that counted with the cores far by the run's final fastest, core_wait_s).
On a machine whose cores stay put it never waits and never redoes a trial.
A move in the middle of a trial, back before its end, is not seen.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from squall.bench.paths import BUILD
from squall.bench.search import Trial

CORE_RTT = BUILD / "bench" / "core_rtt"
# Near: a round trip within this factor of the run's fastest. The two states
# seen were 6x apart; the spread within a state stayed under 1.5x.
NEAR_FACTOR = 2.0
# Between probes while waiting for the cores to come near.
WAIT_STEP_S = 0.25
# A run may start in the far state: then its fastest round trip is the far
# one, and far trials pass as near until a nearer reading comes. Above this
# after calibration (the AMD VM's near was ~57 ns; cores of one socket on
# bare metal take ~100-150), the gate reads on for up to CALIBRATE_MORE_S for
# a nearer one, once per run.
SUSPECT_NS = 150.0
CALIBRATE_MORE_S = 30.0


def probe_rtt(cores: tuple[int, int] = (0, 1)) -> float:
    """One reading of bench/core_rtt: ns per round trip (its fastest block)."""
    r = subprocess.run(
        [str(CORE_RTT), str(cores[0]), str(cores[1])],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"{CORE_RTT}: exit {r.returncode}: {r.stderr.strip()}")
    return float(json.loads(r.stdout)["rtt_ns"])


@dataclass
class CoreGate:
    """Keeps trials to the times cores[0] and cores[1] are near (module doc)."""

    cores: tuple[int, int] = (0, 1)
    wait_s: float = 20.0  # at most, before a trial, for the cores to come near
    retries: int = 3  # a trial with far cores at either end is redone this many times
    calibrate: int = 8  # readings, WAIT_STEP_S apart, before the first trial
    probe: Callable[[], float] | None = None  # tests give their own
    readings: list[float] = field(default_factory=list)
    best_ns: float = float("inf")
    waited_s: float = 0.0
    redone: int = 0
    counted: list[tuple[float, float]] = field(default_factory=list)  # each trial's two readings
    broken: str | None = None  # why the gate stopped reading (the run goes on ungated)

    def read(self) -> float:
        """One reading. A probe that fails stops the gate for the rest of the
        run rather than the run: every later reading is the fastest so far
        (near), and broken says why."""
        if self.broken is not None:
            return self.best_ns if self.best_ns != float("inf") else 0.0
        try:
            ns = self.probe() if self.probe is not None else probe_rtt(self.cores)
        except (OSError, RuntimeError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
            self.broken = f"{type(e).__name__}: {e}"
            return self.read()
        self.readings.append(ns)
        self.best_ns = min(self.best_ns, ns)
        return ns

    def near(self, ns: float) -> bool:
        return ns <= NEAR_FACTOR * self.best_ns

    def wait_near(self) -> float:
        """Read until the cores are near, for at most wait_s; the last reading."""
        if not self.readings and self.calibrate > 0:
            self._calibrate()
        deadline = time.monotonic() + self.wait_s
        ns = self.read()
        while not self.near(ns) and time.monotonic() < deadline:
            t0 = time.monotonic()
            time.sleep(WAIT_STEP_S)
            ns = self.read()
            self.waited_s += time.monotonic() - t0
        return ns

    def _calibrate(self) -> None:
        t0 = time.monotonic()
        for _ in range(self.calibrate):
            self.read()
            time.sleep(WAIT_STEP_S)
        while self.best_ns > SUSPECT_NS and time.monotonic() - t0 < CALIBRATE_MORE_S:
            self.read()
            time.sleep(WAIT_STEP_S)
        self.waited_s += time.monotonic() - t0

    def gated(self, trial: Callable[[float, float], Trial]) -> Callable[[float, float], Trial]:
        """trial, run when the cores are near, and again while they were far
        at either end (up to retries times; then kept, and counted)."""

        def run(rate: float, duration: float) -> Trial:
            for attempt in range(self.retries + 1):
                before = self.wait_near()
                t = trial(rate, duration)
                after = self.read()
                t.extra["core_rtt_ns"] = [round(before, 1), round(after, 1)]
                if attempt:
                    t.extra["core_far_redone"] = attempt
                if (self.near(before) and self.near(after)) or attempt == self.retries:
                    self.counted.append((before, after))
                    return t
                self.redone += 1
            raise AssertionError("unreachable")

        return run

    def far_kept(self) -> int:
        """Trials that counted with the cores far at either end, by the run's
        fastest round trip at the end (those the retries ran out on, and any
        that passed as near before a nearer reading came)."""
        return sum(1 for b, a in self.counted if not (self.near(b) and self.near(a)))

    def summary(self) -> dict[str, Any]:
        if not self.readings:
            return {}
        return {
            "core_rtt_ns_best": round(self.best_ns, 1),
            "core_rtt_ns_median": round(statistics.median(self.readings), 1),
            "trials_core_far_redone": self.redone,
            "trials_core_far_kept": self.far_kept(),
            "core_wait_s": round(self.waited_s, 1),
        }
