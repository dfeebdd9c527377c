"""PNG plots of an experiment's figures (matplotlib, no display needed).

One PNG per figure; every series of a figure (Squall's variants and the
peers) in the same axes; error bars span min..max over repetitions, the
marker is the median. A target is a black dotted line across the plot: a
series labelled "target..." (the experiment draws it), or one of
TARGET_LINES for figures published before targets were drawn. A target that
holds at one x only (a series labelled "target..." of one point, or one of
TARGET_POINTS) is a black star there, not a line. Axis numbers read 1.5k /
2M when that is exact to two decimals, else in full (a 1024 B frame reads
1024, not 1.024k); a legend of more than three entries goes under the plot, so it
never hides a line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from squall.bench.experiment import Figure

# Targets (docs/results README "target" column) of published figures whose y
# axis is in the target's unit: "experiment/figure id" -> (y, label).
TARGET_LINES: dict[str, list[tuple[float, str]]] = {
    "density/memory": [(3.0, "target: 10,000 idle NFs in <= 3 GiB")],
    "flow_activations/activations_c1": [(100_000, "target: 100,000 new flows/s held")],
    "flow_activations/activations_c64": [(100_000, "target: 100,000 new flows/s held")],
    "e1_nfs_per_core/latency": [(1000, "target: p99 <= 1 ms at half load, 1,000 NFs")],
    "nf_restart/nf_restart": [(10, "target: median restart <= 10 ms")],
}
# Targets that hold at one x only: "experiment/figure id" -> (x, y, label).
TARGET_POINTS: dict[str, list[tuple[float, float, str]]] = {
    "e2_cpu_vs_rate/cpu_vs_rate": [(0.0, 1.0, "target: <= 1% of the core at 0 pkt/s, 20 NFs")],
}
LEGEND_INSIDE_MAX = 3


def _is_target(label: str) -> bool:
    return label.lower().startswith("target")


def _spaced_labels(xvals: list[float], log: bool) -> list[str]:
    """Tick labels for xvals; on a linear axis one too close to the last
    labelled tick (under 4% of the span: 0, 10, 50 on an axis to 2,000) is
    left blank rather than printed over it."""
    span = xvals[-1] - xvals[0] if len(xvals) > 1 else 0.0
    labels, last = [], None
    for v in xvals:
        if log or last is None or span <= 0 or v - last >= 0.04 * span:
            labels.append(_tick(v))
            last = v
        else:
            labels.append("")
    return labels


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _tick(v: float) -> str:
    """1500 -> 1.5k, 1750 -> 1.75k, 2000000 -> 2M; 1024 and 1518 as they are
    (no exact short form with two decimals)."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            short = v / div
            if abs(short * 100 - round(short * 100)) < 1e-9:
                return f"{short:g}{unit}"
            return f"{v:.0f}" if float(v).is_integer() else f"{v:g}"
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


def _category(x: Any) -> str:
    """A category label: numbers read 300k, names as they are."""
    if isinstance(x, int | float) and not isinstance(x, bool):
        return _tick(float(x))
    s = str(x)
    try:
        return _tick(float(s)) if s.replace(".", "", 1).isdigit() else s
    except ValueError:
        return s


def draw(
    fig_spec: Figure,
    path: Path,
    subtitle: str = "",
    targets: list[tuple[float, str]] | None = None,
    target_points: list[tuple[float, float, str]] | None = None,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(7, 4.4))
    ax2 = None
    categories: list[str] = []
    if fig_spec.xscale == "category":
        for s in fig_spec.series:
            for x in s.x:
                if str(x) not in categories:
                    categories.append(str(x))
    hlines = list(targets or [])
    points = list(target_points or [])
    for s in fig_spec.series:
        ys_t = {_num(y) for y in s.y} - {float("nan")}
        if _is_target(s.label) and len(s.x) == 1 and s.axis != "right":
            points.append((_num(s.x[0]), _num(s.y[0]), s.label))
            continue
        if _is_target(s.label) and len(ys_t) == 1 and s.axis != "right":
            hlines.append((ys_t.pop(), s.label))
            continue
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
    for y, label in hlines:
        ax.axhline(y, color="k", linestyle=":", linewidth=1.5, label=label, zorder=1)
    for x, y, label in points:
        ax.plot(
            [x], [y], marker="*", markersize=14, color="k", linestyle="none", label=label, zorder=5
        )
    if fig_spec.xscale == "category":
        labels = [_category(c) for c in categories]
        ax.set_xticks(range(len(categories)))
        # Names that would run into each other side by side are slanted.
        if sum(len(lb) for lb in labels) > 60:
            ax.set_xticklabels(labels, rotation=30, ha="right")
        else:
            ax.set_xticklabels(labels)
    else:
        if fig_spec.xscale == "log":
            ax.set_xscale("log")
        xvals = sorted({_num(x) for s in fig_spec.series for x in s.x} - {float("nan")})
        if 0 < len(xvals) <= 12:  # few points: label exactly those
            from matplotlib.ticker import NullLocator

            ax.set_xticks(xvals)
            ax.set_xticklabels(_spaced_labels(xvals, fig_spec.xscale == "log"))
            ax.xaxis.set_minor_locator(NullLocator())
    if fig_spec.yscale == "log":
        ax.set_yscale("log")
        if ax2 is not None:
            ax2.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
        if ax2 is not None:
            ax2.set_ylim(bottom=0)
    for a in (ax, ax2):
        if a is not None and a.get_yscale() == "linear":
            a.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _tick(v)))
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
    if handles and len(handles) <= LEGEND_INSIDE_MAX:
        ax.legend(handles, labels, fontsize=8, loc="best")
    elif handles:
        ax.legend(
            handles,
            labels,
            fontsize=8,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncol=2,
            frameon=False,
        )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def draw_all(result: dict[str, Any], stem: Path) -> list[Path]:
    """Every figure of a result: <stem>-<figure id>.png."""
    m = result.get("machine", {})
    subtitle = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores" + (
        ", --quick" if result.get("quick") else ""
    )
    exp = str(result.get("experiment") or stem.parent.name)
    out = []
    for d in result.get("figures", []):
        f = Figure.from_dict(d)
        out.append(
            draw(
                f,
                stem.parent / f"{stem.name}-{f.id}.png",
                subtitle,
                TARGET_LINES.get(f"{exp}/{f.id}"),
                TARGET_POINTS.get(f"{exp}/{f.id}"),
            )
        )
    return out
