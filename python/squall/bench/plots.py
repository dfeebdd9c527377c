"""PNG plots of an experiment's figures (matplotlib, no display needed).

One PNG per figure; every series of a figure (Squall's variants and the
peers) in the same axes; error bars span min..max over repetitions, the
marker is the median.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from squall.bench.experiment import Figure


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _tick(v: float) -> str:
    """1500 -> 1.5k, 2000000 -> 2M."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def _valid_fmt(fmt: str) -> str:
    """fmt if matplotlib takes it, else a plain line with markers."""
    from matplotlib.lines import Line2D

    markers = set(Line2D.markers) - {None, "None", " ", ""}
    rest = fmt
    for ls in ("--", "-.", "-", ":"):
        if ls in rest:
            rest = rest.replace(ls, "", 1)
            break
    ok = all(c in markers or c in "bgrcmykw" for c in rest) and len(rest) <= 2
    return fmt if ok and not any(ls in rest for ls in ("-", ":")) else "-o"


def draw(fig_spec: Figure, path: Path, subtitle: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.4))
    ax2 = None
    categories: list[str] = []
    if fig_spec.xscale == "category":
        for s in fig_spec.series:
            for x in s.x:
                if str(x) not in categories:
                    categories.append(str(x))
    for s in fig_spec.series:
        target = ax
        if s.axis == "right":
            if ax2 is None:
                ax2 = ax.twinx()
            target = ax2
        if fig_spec.xscale == "category":
            xs = [float(categories.index(str(x))) for x in s.x]
        else:
            xs = [_num(x) for x in s.x]
        ys = [_num(y) for y in s.y]
        style = _valid_fmt(s.style)
        if s.ymin is not None and s.ymax is not None:
            lo = [
                max(0.0, y - _num(a)) if not math.isnan(_num(a)) else 0.0
                for y, a in zip(ys, s.ymin, strict=True)
            ]
            hi = [
                max(0.0, _num(b) - y) if not math.isnan(_num(b)) else 0.0
                for y, b in zip(ys, s.ymax, strict=True)
            ]
            target.errorbar(
                xs, ys, yerr=[lo, hi], fmt=style, capsize=3, label=s.label, color=s.color
            )
        else:
            target.plot(xs, ys, style, label=s.label, color=s.color)
    if fig_spec.xscale == "category":
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories)
    else:
        if fig_spec.xscale == "log":
            ax.set_xscale("log")
        xvals = sorted({_num(x) for s in fig_spec.series for x in s.x} - {float("nan")})
        if 0 < len(xvals) <= 12:  # few points: label exactly those
            from matplotlib.ticker import NullLocator

            ax.set_xticks(xvals)
            ax.set_xticklabels([_tick(v) for v in xvals])
            ax.xaxis.set_minor_locator(NullLocator())
    if fig_spec.yscale == "log":
        ax.set_yscale("log")
        if ax2 is not None:
            ax2.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
        if ax2 is not None:
            ax2.set_ylim(bottom=0)
    ax.set_xlabel(fig_spec.xlabel)
    ax.set_ylabel(fig_spec.ylabel)
    if ax2 is not None and fig_spec.ylabel2:
        ax2.set_ylabel(fig_spec.ylabel2)
    title = fig_spec.title + (f"\n{subtitle}" if subtitle else "")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if ax2 is not None:
        h2, l2 = ax2.get_legend_handles_labels()
        handles += h2
        labels += l2
    if handles:
        ax.legend(handles, labels, fontsize=8, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw_all(result: dict[str, Any], stem: Path) -> list[Path]:
    """Every figure of a result: <stem>-<figure id>.png."""
    m = result.get("machine", {})
    subtitle = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores" + (
        ", --quick" if result.get("quick") else ""
    )
    out = []
    for d in result.get("figures", []):
        f = Figure.from_dict(d)
        out.append(draw(f, stem.parent / f"{stem.name}-{f.id}.png", subtitle))
    return out
