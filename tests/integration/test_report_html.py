"""squall-bench report writes an HTML page with the plots beside the markdown
(results/report.html; --publish: docs/results/index.html), and --redraw draws
the published PNGs again from their stored JSON. No manager needed."""

from __future__ import annotations

import json
from pathlib import Path

from squall.bench import plots, report
from squall.bench.experiment import Figure, Series

RESULT = {
    "experiment": "fake",
    "title": "Fake: a figure with a target",
    "summary": {"mpps_top": 1.5},
    "targets": {"mpps_top": ">= 2"},
    "figures": [
        Figure(
            "throughput",
            "Throughput against NFs",
            "NFs",
            "throughput (Mpps)",
            [
                Series("Squall", [1, 10, 100], [3.0, 2.0, 1.5]),
                Series("peer", [1, 10, 100], [2.5, 1.0, 0.5], style="--s"),
                Series("target: 2 Mpps", [1, 10, 100], [2.0, 2.0, 2.0]),
            ],
            xscale="log",
        ).to_dict()
    ],
}


def test_report_writes_html_with_the_plots(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = results / "fake" / "20260101T000000.json"
    run.parent.mkdir(parents=True)
    run.write_text(json.dumps(RESULT))
    md, shown = report.render({}, ["fake"], results_dir=results)
    assert shown == ["fake"]
    html = (results / "report.html").read_text()
    png = "fake/20260101T000000-throughput.png"
    assert (results / png).is_file()
    assert f'<img src="{png}"' in html, html[:2000]
    assert "<table>" in html and "mpps_top" in html
    # The contents table's links land on the sections' anchors.
    anchor = report._anchor("fake", RESULT["title"])
    assert f'href="#{anchor}"' in html and f'<h2 id="{anchor}"' in html

    docs = tmp_path / "docs"
    readme, published, _ = report.publish({}, ["fake"], results_dir=results, docs_dir=docs)
    assert published == ["fake"]
    index = (docs / "index.html").read_text()
    assert '<img src="fake-throughput.png"' in index
    # --redraw draws from the stored JSON: the same JSON gives the same
    # picture, and a changed one (a point moved) another.
    png = docs / "fake-throughput.png"
    published_png = png.read_bytes()
    png.unlink()
    assert report.redraw(docs) == [png]
    assert png.read_bytes() == published_png, "redrawn from the same JSON: the same PNG"
    stored = json.loads((docs / "fake.json").read_text())
    stored["figures"][0]["series"][0]["y"] = [3.0, 2.0, 0.5]
    (docs / "fake.json").write_text(json.dumps(stored))
    assert report.redraw(docs) == [png]
    assert png.read_bytes() != published_png, "redrawn from the changed JSON"


def test_a_target_series_is_a_line_across_the_plot(tmp_path: Path) -> None:
    """The target is drawn as a horizontal line over the whole axis, in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn: list[tuple[float, str]] = []
    real = plt.Axes.axhline

    def spy(self: plt.Axes, y: float = 0, *a: object, **kw: object) -> object:
        drawn.append((y, str(kw.get("label"))))
        return real(self, y, *a, **kw)

    plt.Axes.axhline = spy  # type: ignore[method-assign]
    try:
        plots.draw_all(RESULT, tmp_path / "x")
        plots.draw_all({**RESULT, "experiment": "density", "figures": []}, tmp_path / "y")
    finally:
        plt.Axes.axhline = real  # type: ignore[method-assign]
    assert drawn == [(2.0, "target: 2 Mpps")], drawn


def test_tick_labels_are_exact() -> None:
    """1.5k and 2M where exact to two decimals; a 1024 or 1518 B frame reads as it is."""
    got = [plots._tick(v) for v in (64, 1024, 1518, 1500, 1750, 2000, 10000, 2.5e6, 0.5)]
    assert got == ["64", "1024", "1518", "1.5k", "1.75k", "2k", "10k", "2.5M", "0.5"], got


def test_a_one_point_target_is_a_star_not_a_line(tmp_path: Path) -> None:
    """e2's 1% holds at zero rate only: a black star at x=0, no line across."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: list[object] = []
    stars: list[tuple[list[float], list[float], str]] = []
    real_h, real_plot = plt.Axes.axhline, plt.Axes.plot

    def spy_h(self: plt.Axes, *a: object, **kw: object) -> object:
        lines.append(kw.get("label"))
        return real_h(self, *a, **kw)

    def spy_plot(self: plt.Axes, *a: object, **kw: object) -> object:
        if kw.get("marker") == "*":
            stars.append((list(a[0]), list(a[1]), str(kw.get("label"))))  # type: ignore[call-overload]
        return real_plot(self, *a, **kw)

    fig = Figure(
        "cpu_vs_rate",
        "CPU against rate",
        "offered rate (kpps)",
        "core busy (%)",
        [Series("core busy", [0, 10, 100], [0.5, 3.0, 40.0])],
    )
    plt.Axes.axhline = spy_h  # type: ignore[method-assign]
    plt.Axes.plot = spy_plot  # type: ignore[method-assign]
    try:
        plots.draw_all(
            {"experiment": "e2_cpu_vs_rate", "figures": [fig.to_dict()]}, tmp_path / "e2"
        )
    finally:
        plt.Axes.axhline = real_h  # type: ignore[method-assign]
        plt.Axes.plot = real_plot  # type: ignore[method-assign]
    assert lines == [], lines
    assert len(stars) == 1 and stars[0][:2] == ([0.0], [1.0]), stars


def test_a_target_may_name_another_figure() -> None:
    """isolation's attacks_contained must equal attacks_tried."""
    s = {"attacks_tried": 14, "attacks_contained": 14}
    assert report.target_met(14, "== attacks_tried", s) is True
    assert report.target_met(13, "== attacks_tried", s) is False
    assert report.target_met(13, "== nothing_of_that_name", s) is None
    assert report.target_met(2e-3, "<= 1e-2") is True
