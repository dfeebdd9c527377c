"""squall-bench: list, run and report Squall's experiments.

squall-bench list
squall-bench run NAME [--quick] [--reps N] [--set KEY=VALUE]... [--systems a,b]
squall-bench report [--publish] [NAME...]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence

from rich.table import Table

from squall.bench import registry, report, runner
from squall.bench.paths import RESULTS_DIR
from squall.console import console
from squall.exit import Exit


def cmd_list(args: argparse.Namespace) -> Exit:
    exps = registry.all_experiments()
    if args.json:
        rows = [
            {
                "name": e.name,
                "title": e.title,
                "seed": e.seed,
                "summary_keys": list(e.summary_keys),
                "targets": e.targets,
                "full_minutes": e.full_minutes,
                "unavailable": e.unavailable(),
            }
            for e in exps.values()
        ]
        print(json.dumps(rows, indent=1))
        return Exit.OK
    table = Table("name", "what", "reproduces", "full run", "here")
    for e in exps.values():
        why = e.unavailable()
        table.add_row(
            e.name, e.title, e.seed, f"~{e.full_minutes:g} min", "ok" if why is None else why
        )
    console().print(table)
    print("--quick runs any of them in under a minute.", file=sys.stderr)
    return Exit.OK


def _params(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ValueError(f"--set {p}: expected KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def cmd_run(args: argparse.Namespace) -> Exit:
    try:
        exp = registry.get(args.name)
        params = _params(args.set)
    except (registry.RegistryError, ValueError) as e:
        print(f"squall-bench: {e}", file=sys.stderr)
        return Exit.USAGE
    systems = [s for s in args.systems.split(",") if s] if args.systems else None
    if systems and not exp.uses_systems:
        print(f"squall-bench: {exp.name} runs on Squall only: no --systems", file=sys.stderr)
        return Exit.USAGE
    try:
        path = runner.run(
            exp,
            quick=args.quick,
            reps=args.reps,
            params=params,
            systems=systems,
            argv=["squall-bench", *sys.argv[1:]],
            verbose=not args.quiet,
        )
    except runner.RunFailed as e:
        print(f"squall-bench: {e}", file=sys.stderr)
        return Exit.FAILED
    except KeyboardInterrupt:
        print("squall-bench: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    result = json.loads(path.read_text())
    width = max((len(k) for k in result["summary"]), default=10)
    print(f"{exp.name}: summary")
    for k, v in result["summary"].items():
        t = result["targets"].get(k, "")
        met = report.target_met(v, t, result["summary"]) if t else None
        mark = "" if met is None else ("  (met)" if met else "  (NOT met)")
        print(f"  {k:{width}}  {v!s:>12}  {('target ' + t) if t else ''}{mark}")
    for what, why in (result.get("unavailable") or {}).items():
        print(f"  not run: {what}: {why}")
    print(f"wrote {path}")
    return Exit.OK


def cmd_report(args: argparse.Namespace) -> Exit:
    exps = registry.all_experiments()
    unknown = [n for n in args.names if n not in exps and not (RESULTS_DIR / n).is_dir()]
    if unknown:
        print(f"squall-bench: no experiment or results named {', '.join(unknown)}", file=sys.stderr)
        return Exit.USAGE
    path, shown = report.render(exps, args.names or None)
    print(f"wrote {path} ({', '.join(shown) or 'no results yet'})")
    if args.publish:
        readme, published, skipped = report.publish(
            exps, args.names or None, include_quick=args.include_quick
        )
        for n in skipped:
            print(f"not published: {n}: its latest run is --quick or failed (--include-quick)")
        print(f"published {', '.join(published) or 'nothing'}; wrote {readme}")
    if args.redraw:
        print(f"redrew {len(report.redraw())} published plots from their stored JSON")
    return Exit.OK


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="squall-bench", description="Run Squall's experiments and report their results."
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", help="the experiments, and whether they can run here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_list)

    p = sub.add_parser("run", help="run one experiment, write results/NAME/<time>.json and PNGs")
    p.add_argument("name")
    p.add_argument("--quick", action="store_true", help="short trials, 1 repetition: < 1 min")
    p.add_argument("--reps", type=int, default=None, help="repetitions per point (3; 1 quick)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a parameter (the result's params list them), e.g. --set sizes=64b,128b",
    )
    p.add_argument(
        "--systems",
        default=None,
        help="systems to compare, comma-separated: squall and peers (default: all available; "
        "with --quick, tcp_peers and ct_peers run their own smaller set: docs/bench.md)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("report", help="results/report.md and report.html from the latest runs")
    p.add_argument("names", nargs="*", help="only these experiments")
    p.add_argument(
        "--publish",
        action="store_true",
        help="also docs/results/NAME.json, PNGs, README.md, index.html",
    )
    p.add_argument("--include-quick", action="store_true", help="publish --quick runs too")
    p.add_argument(
        "--redraw",
        action="store_true",
        help="then draw docs/results' PNGs again from their stored JSON",
    )
    p.set_defaults(fn=cmd_report)
    return ap


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM stops a run as Ctrl-C does: managers stop, namespaces go down.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        return int(Exit.INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
