"""Run one experiment and write its result: results/NAME/<time>.json and one
PNG per figure next to it."""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from squall.bench import machine, plots, procstat
from squall.bench.experiment import Context, Experiment
from squall.bench.paths import RESULTS_DIR

FORMAT = "squall-bench/1"


class RunFailed(Exception):
    def __init__(self, msg: str, path: Path | None) -> None:
        super().__init__(msg)
        self.path = path


def _json_safe(v: Any) -> Any:
    """NaN and infinity are not JSON: write them as null."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_safe(x) for x in v]
    return v


def run(
    exp: Experiment,
    *,
    quick: bool = False,
    reps: int | None = None,
    params: dict[str, str] | None = None,
    systems: Sequence[str] | None = None,
    results_dir: Path = RESULTS_DIR,
    argv: Sequence[str] | None = None,
    verbose: bool = True,
) -> Path:
    """Run exp; return the JSON's path. Raises RunFailed (the JSON is still
    written, with the error) when the run fails or misses summary names."""
    why = exp.unavailable()
    if why is not None:
        raise RunFailed(f"{exp.name}: cannot run here: {why}", None)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out_dir = results_dir / exp.name
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stamp}{'-quick' if quick else ''}.json"
    n = 1
    while path.exists():
        n += 1
        path = out_dir / f"{stamp}{'-quick' if quick else ''}-{n}.json"
    facts = machine.facts()
    if facts["busy_others_before"] and verbose:
        shown = ", ".join(f"{o['comm']} {o['cpu_pct']}%" for o in facts["busy_others_before"])
        print(f"squall-bench: warning: other busy processes: {shown}", file=sys.stderr)
    started = time.time()
    cpus_before = procstat.read_cpus()
    monitor = machine.ContentionMonitor().start()
    error: str | None = None
    interrupted = False
    with tempfile.TemporaryDirectory(prefix=f"squall-bench-{exp.name}-") as tmp:
        # NFs run as manager.nf_user: they may open the files a case writes
        # here (rules, keys), not list the directory.
        os.chmod(tmp, 0o711)
        ctx = Context(
            exp,
            quick=quick,
            reps=reps,
            params=params or {},
            workdir=Path(tmp),
            systems=systems,
            verbose=verbose,
        )
        try:
            exp.run(ctx)
            unused = ctx.unused_overrides()
            if unused:
                ctx.note(f"--set names this experiment does not use: {', '.join(unused)}")
        except KeyboardInterrupt:
            # Keep what was measured: the raw samples are written, then the
            # interrupt goes on (exit 130).
            interrupted = True
            error = "interrupted (Ctrl-C or SIGTERM): the summary is incomplete"
        except Exception as e:  # noqa: BLE001 - recorded in the result, then re-raised as RunFailed
            error = f"{type(e).__name__}: {e}"
            ctx.note("traceback:\n" + traceback.format_exc())
        finally:
            ctx.cleanup()
    contention = monitor.stop()
    share = monitor.busy_share(time.time() - started)
    facts["steal_pct"] = procstat.steal_by_cpu(cpus_before, procstat.read_cpus())
    stolen = {c: v for c, v in facts["steal_pct"].items() if v >= machine.STEAL_NOTE_PCT}
    if stolen:
        shown = ", ".join(f"{c} {v}%" for c, v in stolen.items())
        ctx.note(
            f"the hypervisor took {shown} of the run's time (steal, /proc/stat): "
            "numbers may be disturbed; contention lists the 5 s checks that saw it"
        )
    if any(s["others"] for s in contention):
        ctx.note(
            f"another process used more than 20% of a CPU in {share:.0%} of the 5 s checks "
            "during the run (see contention): numbers may be disturbed"
        )
    facts["loadavg_after"] = machine.loadavg()
    facts["busy_others_after"] = machine.busy_others()
    for when in ("before", "after"):
        others = facts.get(f"busy_others_{when}") or []
        if others:
            shown = ", ".join(f"{o['comm']} ({o['pid']}) {o['cpu_pct']}%" for o in others)
            ctx.note(f"other busy processes {when} the run: {shown}: numbers may be disturbed")
    missing = [k for k in exp.summary_keys if k not in ctx.summary]
    if error is None and missing:
        error = f"summary misses {', '.join(missing)}"
    result: dict[str, Any] = {
        "format": FORMAT,
        "experiment": exp.name,
        "title": exp.title,
        "seed": exp.seed,
        "about": exp.about,
        "quick": quick,
        "command": shlex.join(list(argv) if argv is not None else sys.argv),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "duration_s": round(time.time() - started, 1),
        "machine": facts,
        "params": ctx.params,
        "systems": ctx.systems,
        "unavailable": ctx.unavailable,
        "summary": ctx.summary,
        "targets": exp.targets,
        "figures": [f.to_dict() for f in ctx.figures],
        "notes": ctx.notes,
        "error": error,
        "contention": contention,
        "commands": ctx.commands,
        "samples": ctx.samples,
    }
    path.write_text(json.dumps(_json_safe(result), indent=1) + "\n")
    try:
        plots.draw_all(result, path.with_suffix(""))
    except Exception as e:  # noqa: BLE001 - a plot failure must not lose the result
        if error is None:
            error = f"plotting failed: {type(e).__name__}: {e}"
            result["error"] = error
            path.write_text(json.dumps(_json_safe(result), indent=1) + "\n")
    if interrupted:
        print(f"squall-bench: partial result in {path}", file=sys.stderr)
        raise KeyboardInterrupt
    if error is not None:
        raise RunFailed(f"{exp.name}: {error} (result in {path})", path)
    return path
