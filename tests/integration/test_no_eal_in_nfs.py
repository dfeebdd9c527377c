"""NFs link no DPDK library (DESIGN §2): they use only DPDK's header-only APIs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import NF_DIR, NF_NAMES


def _nf_binaries() -> list[Path]:
    found = {NF_DIR / f"squall-nf-{n}" for n in NF_NAMES}
    if NF_DIR.is_dir():
        found |= {p for p in NF_DIR.glob("squall-nf-*") if p.is_file() and os.access(p, os.X_OK)}
    return sorted(found)


@pytest.mark.parametrize("binary", _nf_binaries(), ids=lambda p: p.name)
def test_nf_links_no_dpdk_library(binary: Path) -> None:
    assert binary.is_file(), f"{binary} not built (meson setup build && ninja -C build)"
    r = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    rte = [line.strip() for line in r.stdout.splitlines() if "librte_" in line]
    assert not rte, f"{binary.name} links DPDK libraries:\n" + "\n".join(rte)
