"""Pages of results: results/report.md and report.html from the latest run of
each experiment, and with --publish docs/results/ (NAME.json, its PNGs,
README.md and index.html). The HTML page is the markdown rendered
(markdown-it-py, which rich already brings) with the plots inline, one file
to open in a browser; --redraw draws the PNGs again from the stored JSON.

A full run is preferred to a --quick one; a page says which it shows.
Results written before this harness (bench/dataplane.py's) are shown too:
their summary, targets and PNG.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from squall.bench import plots
from squall.bench.experiment import Experiment
from squall.bench.paths import DOCS_RESULTS_DIR, RESULTS_DIR, ROOT

_TARGET = re.compile(r"^\s*(>=|<=|>|<|==)\s*(-?[0-9.]+(?:[eE][-+]?[0-9]+)?|[a-z_][a-z0-9_]*)\s*$")


def _number(v: Any) -> float | None:
    if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(float(v)):
        return None
    return float(v)


def target_met(value: Any, target: str, summary: dict[str, Any] | None = None) -> bool | None:
    """ ">= 0.7", or "== attacks_tried" (another figure of the same summary),
    against value; None when either is not a number."""
    m = _TARGET.match(target)
    if m is None or _number(value) is None:
        return None
    op, name = m.group(1), m.group(2)
    ref = _number((summary or {}).get(name)) if name[0].isalpha() else float(name)
    if ref is None:
        return None
    return {
        ">=": value >= ref,
        "<=": value <= ref,
        ">": value > ref,
        "<": value < ref,
        "==": value == ref,
    }[op]


def latest(name: str, results_dir: Path = RESULTS_DIR) -> Path | None:
    """The newest complete full run of NAME, else the newest complete quick
    one, else the newest run (failed or interrupted: the page says so)."""
    d = results_dir / name
    if not d.is_dir():
        return None
    runs = sorted(d.glob("*.json"), key=lambda p: p.stat().st_mtime)
    heads = {p: _head(p) for p in runs}
    for want_quick in (False, True):
        ok = [p for p in runs if heads[p] == (want_quick, False)]
        if ok:
            return ok[-1]
    return runs[-1] if runs else None


def _head(p: Path) -> tuple[bool, bool]:
    """(quick, failed) of a result file."""
    try:
        d = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return ("-quick" in p.name, True)
    return (bool(d.get("quick")) or "-quick" in p.name, bool(d.get("error")))


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _pngs_of(json_path: Path, result: dict[str, Any]) -> list[tuple[str, Path, str]]:
    """(title, png, caption) for each figure; legacy results: <stem>.png."""
    stem = json_path.with_suffix("")
    out = []
    for f in result.get("figures", []):
        png = stem.parent / f"{stem.name}-{f['id']}.png"
        out.append((str(f.get("title", f["id"])), png, str(f.get("caption", ""))))
    legacy = json_path.with_suffix(".png")
    if not result.get("figures") and legacy.exists():
        out.append((result.get("experiment", json_path.parent.name), legacy, ""))
    return out


def _ensure_pngs(json_path: Path, result: dict[str, Any]) -> str | None:
    """Draw any missing PNG from the figures in the JSON; why not, if it fails."""
    pngs = _pngs_of(json_path, result)
    if result.get("figures") and any(not p.exists() for _, p, _ in pngs):
        try:
            plots.draw_all(result, json_path.with_suffix(""))
        except Exception as e:  # noqa: BLE001 - one bad figure must not stop the report
            return f"cannot draw its figures: {type(e).__name__}: {e}"
    return None


def section_title(name: str, result: dict[str, Any], exp: Experiment | None) -> str:
    return str(result.get("title") or (exp.title if exp else name))


def section(
    name: str,
    result: dict[str, Any],
    json_link: str,
    png_links: list[tuple[str, str, str]],
    exp: Experiment | None,
) -> str:
    lines = []
    title = section_title(name, result, exp)
    lines.append(f"## `{name}`: {title}\n")
    if result.get("quick"):
        lines.append(
            "> **Quick run** (`--quick`: short trials, 1 repetition): a smoke test, "
            "not a measurement to quote.\n"
        )
    if result.get("error"):
        lines.append(f"> **This run failed**: {result['error']}\n")
    seed = result.get("seed") or (exp.seed if exp else "")
    if seed:
        lines.append(f"*Reproduces:* {seed}.\n")
    about = result.get("about") or (exp.about if exp else "")
    if about:
        lines.append(about.strip() + "\n")
    m = result.get("machine", {})
    load_b = m.get("loadavg_before") or m.get("loadavg")
    load_a = m.get("loadavg_after")
    git = m.get("git") or {}
    lines.append("| run | |\n|---|---|")
    lines.append(f"| command | `{result.get('command', '?')}` |")
    if result.get("started"):
        lines.append(f"| started | {result['started']} ({_fmt(result.get('duration_s'))} s) |")
    lines.append(
        f"| machine | {m.get('cpu', '?')}, {m.get('cores', '?')} cores, kernel "
        f"{m.get('kernel', '?')}, DPDK {m.get('dpdk', '?')}, "
        f"{m.get('hugepages_total', m.get('hugepages_2m', '?'))} hugepages |"
    )
    if load_b is not None:
        lines.append(f"| load average | {load_b} before, {load_a} after |")
    if m.get("steal_pct"):
        shown = ", ".join(f"{c} {v}%" for c, v in m["steal_pct"].items())
        lines.append(f"| hypervisor steal | {shown} of the run |")
    if git.get("commit"):
        dirty = " (uncommitted changes)" if git.get("dirty") else ""
        lines.append(f"| commit | `{git['commit'][:12]}`{dirty} |")
    lines.append(f"| raw data | [{Path(json_link).name}]({json_link}) |\n")

    summary: dict[str, Any] = result.get("summary") or {}
    targets: dict[str, str] = result.get("targets") or {}
    if summary:
        lines.append("| figure | value | target | met |\n|---|---:|---|---|")
        for k, v in summary.items():
            t = targets.get(k, "")
            met = target_met(v, t, summary) if t else None
            mark = "" if met is None else ("yes" if met else "**no**")
            lines.append(f"| `{k}` | {_fmt(v)} | {t} | {mark} |")
        lines.append("")
    unavailable: dict[str, str] = result.get("unavailable") or {}
    if unavailable:
        lines.append("Not run here:\n")
        for what, why in unavailable.items():
            lines.append(f"- **{what}**: {why}")
        lines.append("")
    for title_, link, caption in png_links:
        lines.append(f"![{title_}]({link})\n")
        if caption:
            lines.append(f"*{caption}*\n")
    notes = [n for n in result.get("notes") or [] if not n.startswith("traceback:")]
    if isinstance(result.get("notes"), str):
        notes = [result["notes"]]
    if notes:
        lines.append("Notes:\n")
        lines += [f"- {n}" for n in notes]
        lines.append("")
    return "\n".join(lines) + "\n"


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    data.setdefault("experiment", path.parent.name)
    return data


def render(
    experiments: dict[str, Experiment],
    names: Sequence[str] | None = None,
    results_dir: Path = RESULTS_DIR,
) -> tuple[Path, list[str]]:
    """Write results_dir/report.md; return it and the experiments it shows."""
    out = results_dir / "report.md"
    shown: list[tuple[str, str]] = []
    body = []
    for name in _names(experiments, names, results_dir):
        p = latest(name, results_dir)
        if p is None:
            continue
        result = _load(p)
        why = _ensure_pngs(p, result)
        if why:
            result.setdefault("notes", []).append(why)
        pngs = [
            (t, str(png.relative_to(results_dir)), c)
            for t, png, c in _pngs_of(p, result)
            if png.exists()
        ]
        exp = experiments.get(name)
        body.append(section(name, result, str(p.relative_to(results_dir)), pngs, exp))
        shown.append((name, section_title(name, result, exp)))
    out.parent.mkdir(parents=True, exist_ok=True)
    page = _page(body, shown, "results/report.md")
    out.write_text(page)
    write_html(page, results_dir / "report.html")
    return out, [n for n, _ in shown]


def publish(
    experiments: dict[str, Experiment],
    names: Sequence[str] | None = None,
    results_dir: Path = RESULTS_DIR,
    docs_dir: Path = DOCS_RESULTS_DIR,
    include_quick: bool = False,
) -> tuple[Path, list[str], list[str]]:
    """Copy each experiment's latest full run to docs_dir/NAME.json (+ PNGs)
    and write docs_dir/README.md over everything published there."""
    docs_dir.mkdir(parents=True, exist_ok=True)
    published, skipped = [], []
    for name in _names(experiments, names, results_dir):
        p = latest(name, results_dir)
        if p is None:
            continue
        result = _load(p)
        if (result.get("quick") and not include_quick) or result.get("error"):
            skipped.append(name)
            continue
        if _ensure_pngs(p, result) is not None:
            skipped.append(name)
            continue
        for old in docs_dir.glob(f"{name}-*.png"):
            old.unlink()
        shutil.copyfile(p, docs_dir / f"{name}.json")
        for _, png, _ in _pngs_of(p, result):
            if not png.exists():
                continue
            suffix = png.name.removeprefix(p.stem)  # "-<figure id>.png" or ".png"
            shutil.copyfile(png, docs_dir / f"{name}{suffix}")
        published.append(name)
    # The README covers every NAME.json in docs/results, published now or before.
    body: list[str] = []
    shown: list[tuple[str, str]] = []
    for j in sorted(docs_dir.glob("*.json")):
        name = j.stem
        result = _load(j)
        pngs = [(t, png.name, c) for t, png, c in _pngs_of(j, result)]
        exp = experiments.get(name)
        body.append(section(name, result, j.name, pngs, exp))
        shown.append((name, section_title(name, result, exp)))
    readme = docs_dir / "README.md"
    page = _page(body, shown, "docs/results/README.md")
    readme.write_text(page)
    write_html(page, docs_dir / "index.html")
    return readme, published, skipped


def redraw(docs_dir: Path = DOCS_RESULTS_DIR) -> list[Path]:
    """Draw every published figure again from its stored NAME.json, over its PNGs."""
    out: list[Path] = []
    for j in sorted(docs_dir.glob("*.json")):
        result = json.loads(j.read_text())
        result["experiment"] = result.get("experiment") or j.stem
        if result.get("figures"):
            out += plots.draw_all(result, j.with_suffix(""))
    return out


HTML_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1000px; margin: 2em auto;
  padding: 0 1em; color: #1d2330; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #d9dde3; padding: 3px 8px; }
th { background: #f2f4f7; }
td:nth-child(2) { font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #e3e6eb; }
code { background: #f2f4f7; padding: 0 3px; border-radius: 3px; }
blockquote { border-left: 4px solid #d8a31a; margin: 0; padding: 0 1em; background: #fffaf0; }
h2 { border-top: 1px solid #e3e6eb; padding-top: 1em; margin-top: 2em; }
"""


def write_html(markdown: str, path: Path) -> Path:
    """The markdown page as one HTML file beside it (links and images relative)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    body = md.render(markdown)
    # Headings get the anchors the markdown table of contents links to.
    body = re.sub(
        r"<h2>(.*?)</h2>",
        lambda m: f'<h2 id="{_anchor_html(m.group(1))}">{m.group(1)}</h2>',
        body,
    )
    path.write_text(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Squall benchmark results</title>"
        f"<style>{HTML_STYLE}</style></head><body>\n{body}</body></html>\n"
    )
    return path


def _anchor_html(heading_html: str) -> str:
    text = re.sub(r"<[^>]+>", "", heading_html)
    text = text.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
    text = text.replace("&gt;", ">").replace("&#39;", "'")
    return re.sub(r"[^a-z0-9 _-]", "", text.lower()).replace(" ", "-")


def _names(
    experiments: dict[str, Experiment], names: Sequence[str] | None, results_dir: Path
) -> list[str]:
    if names:
        return list(names)
    extra = sorted(
        d.name for d in results_dir.glob("*") if d.is_dir() and d.name not in experiments
    )
    return [*experiments, *extra]


def _page(body: list[str], shown: list[tuple[str, str]], where: str) -> str:
    head = [
        "# Squall benchmark results\n",
        f"`{where}`, written by `squall-bench report` on {time.strftime('%Y-%m-%d %H:%M')} "
        f"from the latest run of each experiment (see [docs/bench.md]"
        f"({_rel_docs(where)}bench.md) for what each one measures and how to run it).\n",
        "Throughput is NDR (no loss) and PDR (loss <= 0.5%) found by rate search "
        "(MLRsearch-like); error bars and ranges are min..max over repetitions, the "
        "value shown is the median. The traffic generator runs inside squall-mgr on "
        "its core (core 0, with rx and tx; NFs on core 1): at high rates it competes "
        "with the forwarding it measures.\n",
    ]
    if shown:
        head.append("| experiment | what |\n|---|---|")
        for name, title in shown:
            head.append(f"| [`{name}`](#{_anchor(name, title)}) | {title} |")
        head.append("")
    else:
        head.append("No results yet: `squall-bench run NAME`.\n")
    return "\n".join(head) + "\n" + "\n".join(body)


def _anchor(name: str, title: str) -> str:
    """GitHub's anchor for the heading "## `name`: title"."""
    return re.sub(r"[^a-z0-9 _-]", "", f"{name}: {title}".lower()).replace(" ", "-")


def _rel_docs(where: str) -> str:
    return "../" if where.startswith("docs/") else "../docs/"


def rel_to_root(p: Path) -> str:
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)
