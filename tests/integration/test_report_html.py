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
    before = (docs / "fake-throughput.png").stat().st_mtime_ns
    (docs / "fake-throughput.png").unlink()
    assert report.redraw(docs) == [docs / "fake-throughput.png"]
    assert (docs / "fake-throughput.png").stat().st_mtime_ns >= before


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
