"""Every example config in examples/ is one the manager accepts (`--check`):
the examples the docs point at stay in step with the config loader."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import MGR_BIN, NF_DIR

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 5, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_an_example_config_is_accepted(path: Path) -> None:
    # From the repo root, as the examples' comments run them (relative rule files).
    r = subprocess.run(
        [str(MGR_BIN), "--nf-path", str(NF_DIR), "--check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": ok (" in r.stdout + r.stderr, r.stdout + r.stderr
