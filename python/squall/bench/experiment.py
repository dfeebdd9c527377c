"""An experiment's definition, and the context one run of it gets.

A definition (``bench/experiments/NAME.py``) builds an :class:`Experiment`
named ``EXPERIMENT``. Its ``run(ctx)`` takes parameters from ``ctx.param()``,
starts managers with ``ctx.manager()``, records every raw measurement with
``ctx.sample()``, every other command it runs with ``ctx.command()``, sets
``ctx.summary[...]`` (names carry their unit: ``mpps_pdr_fwd_64b``) and adds
figures with ``ctx.figure()``. The runner writes all of it, with the machine
facts, to ``results/NAME/<time>.json`` and draws the figures.
"""

from __future__ import annotations

import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from squall.bench.manager import Manager

T = TypeVar("T")


@dataclass
class Series:
    label: str
    x: Sequence[Any]  # numbers, or strings for a categorical axis
    y: Sequence[float | None]
    ymin: Sequence[float | None] | None = None  # error bars: min and max over repetitions
    ymax: Sequence[float | None] | None = None
    style: str = "-o"  # matplotlib format string
    axis: str = "left"  # or "right": a second y axis (ylabel2)
    color: str | None = None  # matplotlib color ("C0"); None: the next in the cycle


@dataclass
class Figure:
    id: str  # file name part: results/NAME/<time>-<id>.png
    title: str
    xlabel: str  # with the unit: "frame size (B)"
    ylabel: str  # with the unit: "throughput (Mpps)"
    series: list[Series]
    xscale: str = "linear"  # linear | log | category
    yscale: str = "linear"
    ylabel2: str | None = None
    caption: str = ""  # one sentence under the plot in the report

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Figure:
        series = [Series(**s) for s in d.get("series", [])]
        return cls(**{**d, "series": series})


@dataclass
class Experiment:
    name: str
    title: str
    seed: str  # what it reproduces: "seed 002 §4.1, Fig. 2 and Table 1"
    about: str  # what it measures and how, for docs and the report (markdown)
    run: Callable[[Context], None]
    summary_keys: tuple[str, ...]  # present after every run, --quick included
    targets: dict[str, str] = field(default_factory=dict)  # summary name -> ">= 0.7"
    needs_root: bool = False
    needs_generator: bool = True
    full_minutes: float = 10.0  # rough length of a full run, for `list`
    uses_systems: bool = False  # runs on a list of systems (Squall and peers)

    def unavailable(self) -> str | None:
        """None if it can run here, else why not."""
        if self.needs_root and os.geteuid() != 0:
            return f"needs root (running as uid {os.geteuid()})"
        return None


def spread(values: Iterable[float]) -> dict[str, float]:
    """min, median and max of repetitions."""
    v = [x for x in values if x is not None and not math.isnan(x)]
    if not v:
        return {"min": float("nan"), "median": float("nan"), "max": float("nan")}
    return {"min": min(v), "median": statistics.median(v), "max": max(v)}


def spread_series(
    label: str, xs: Sequence[Any], spreads: Sequence[dict[str, float]], style: str = "-o", **kw: Any
) -> Series:
    """A series of medians with min..max error bars, one spread() per x."""
    return Series(
        label,
        list(xs),
        [s["median"] for s in spreads],
        [s["min"] for s in spreads],
        [s["max"] for s in spreads],
        style,
        **kw,
    )


def rounded(x: float, digits: int = 3) -> float:
    if math.isnan(x) or math.isinf(x):
        return x
    return round(x, digits)


class Context:
    """One run of one experiment."""

    def __init__(
        self,
        exp: Experiment,
        *,
        quick: bool,
        reps: int | None,
        params: dict[str, str],
        workdir: Path,
        systems: Sequence[str] | None = None,
        verbose: bool = True,
    ) -> None:
        self.exp = exp
        self.quick = quick
        self.reps = reps if reps is not None else (1 if quick else 3)
        self.workdir = workdir
        self.systems = list(systems) if systems else None
        self.verbose = verbose
        self._overrides = dict(params)
        self.params: dict[str, Any] = {"reps": self.reps}
        self.summary: dict[str, Any] = {}
        self.samples: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.figures: list[Figure] = []
        self.notes: list[str] = []
        self.unavailable: dict[str, str] = {}  # system or part -> exactly why it did not run
        self.kept: dict[str, Any] = {}  # what helpers keep across a run's cases (method.core_gate)
        self.started = time.monotonic()
        self._managers: list[Manager] = []
        self._n_managers = 0

    # -- parameters -----------------------------------------------------------

    def param(self, name: str, full: T, quick: T | None = None) -> T:
        """A parameter: `--set name=value` wins, then the quick or full default."""
        value: Any = quick if (self.quick and quick is not None) else full
        if name in self._overrides:
            raw = self._overrides.pop(name)
            value = _parse_like(raw, full, name)
        self.params[name] = value
        return value  # type: ignore[no-any-return]

    def unused_overrides(self) -> list[str]:
        return sorted(self._overrides)

    # -- recording ------------------------------------------------------------

    def log(self, msg: str) -> None:
        if self.verbose:
            dt = time.monotonic() - self.started
            print(f"[{self.exp.name} {dt:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def sample(self, kind: str, **fields: Any) -> dict[str, Any]:
        s = {"kind": kind, "t_s": round(time.monotonic() - self.started, 3), **fields}
        self.samples.append(s)
        return s

    def command(self, cmd: Sequence[str] | str, **info: Any) -> None:
        text = cmd if isinstance(cmd, str) else shlex.join(cmd)
        self.commands.append({"command": text, **info})

    def figure(self, fig: Figure) -> None:
        self.figures.append(fig)

    def note(self, text: str) -> None:
        self.notes.append(text)

    # -- managers -------------------------------------------------------------

    def manager_name(self) -> str:
        self._n_managers += 1
        return f"sqb{os.getpid() % 100000}-{self._n_managers}"

    def manager(
        self,
        cfg: dict[str, Any],
        *options: str,
        label: str = "",
        mgr_bin: Path | None = None,
        want_nfs: int | None = None,
    ) -> Manager:
        """A started manager on cfg (its manager.name from manager_name()); the
        command and the config text are recorded. Use it in a with block.
        mgr_bin: another build's squall-mgr (a baseline), not this one's.
        want_nfs: NFs live that make it started (default: all it starts)."""
        m = Manager(
            self.workdir,
            cfg,
            *options,
            **({"mgr_bin": mgr_bin} if mgr_bin else {}),
            want_nfs=want_nfs,
        )
        self.command(m.command, what="squall-mgr", label=label, config=m.config_text)
        self._managers.append(m)
        return m.start()

    def cleanup(self) -> None:
        for m in self._managers:
            m.cleanup()
        self._managers.clear()

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


def _parse_like(raw: str, like: Any, name: str) -> Any:
    """--set values take the type of the default."""
    try:
        if isinstance(like, bool):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if isinstance(like, int):
            return int(float(raw))
        if isinstance(like, float):
            return float(raw)
        if isinstance(like, list | tuple):
            items = [x for x in raw.split(",") if x]
            if like and isinstance(like[0], int):
                return [int(x) for x in items]
            if like and isinstance(like[0], float):
                return [float(x) for x in items]
            return items
    except ValueError:
        raise ValueError(f"--set {name}={raw}: expected a value like {like!r}") from None
    return raw
