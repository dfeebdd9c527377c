"""Where things are: the source tree, its build, the experiments, the results."""

from __future__ import annotations

import os
from pathlib import Path


def _find_root() -> Path:
    env = os.environ.get("SQUALL_ROOT")
    if env:
        return Path(env).resolve()
    # python/squall/bench/paths.py -> the repository (an editable install).
    here = Path(__file__).resolve().parents[3]
    if (here / "bench" / "experiments").is_dir():
        return here
    cwd = Path.cwd().resolve()
    for d in (cwd, *cwd.parents):
        if (d / "bench" / "experiments").is_dir():
            return d
    return here


ROOT = _find_root()
BUILD = Path(os.environ.get("SQUALL_BUILD_DIR", ROOT / "build"))
MGR_BIN = BUILD / "mgr" / "squall-mgr"
NF_DIR = BUILD / "nfs"
EXPERIMENTS_DIR = ROOT / "bench" / "experiments"
RESULTS_DIR = Path(os.environ.get("SQUALL_RESULTS_DIR", ROOT / "results"))
DOCS_RESULTS_DIR = Path(os.environ.get("SQUALL_DOCS_RESULTS_DIR", ROOT / "docs" / "results"))
NETNS_SH = ROOT / "scripts" / "netns.sh"
