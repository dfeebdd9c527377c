"""What an NF inherits: a minimal environment in which the manager's own
SQUALL_* values are the only ones; and where its binary is found: the
install directory before the build directory unless --nf-path is given."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BUILD, Manager

FLAKY = BUILD / "tests" / "nfs" / "squall-nf-flaky"
INSTALL_DIR = Path("/usr/local/libexec/squall")  # meson's default prefix, as built here


def simple_config(mgr: Manager, exec_: str, args: list[str]) -> dict:
    cfg = mgr.config(
        ports=[{"name": "gen", "devargs": "net_null0,no-rx=1"}],
        services=[{"name": "e", "exec": exec_, "args": args}],
        chains=[{"name": "c", "services": ["e"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "gen"}],
    )
    return cfg


def test_nf_environment_is_minimal_and_the_managers(
    mgr: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out_dir = tmp_path / "nf"  # the NF's user may write here (manager.nf_user)
    out_dir.mkdir(mode=0o777)
    out_dir.chmod(0o777)
    out = out_dir / "env.txt"
    monkeypatch.setenv("SQUALL_NF_ID", "4242")
    monkeypatch.setenv("SQUALL_REGION", "/nonexistent/region")
    monkeypatch.setenv("SQUALL_TEST_SECRET", "do-not-pass")
    mgr.start(simple_config(mgr, str(FLAKY), ["--env-out", str(out)]))
    env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert env["SQUALL_NF_ID"] == "0", env
    assert env["SQUALL_REGION"] != "/nonexistent/region", env
    assert "SQUALL_TEST_SECRET" not in env, env
    assert set(env) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "TZ",
        "HOME",
        "LD_LIBRARY_PATH",
        "SQUALL_LOG_LEVEL",
        "SQUALL_REGION",
        "SQUALL_REGION_FD",
        "SQUALL_NF_ID",
        "SQUALL_MGR_PID",
    }, env
    # the manager's pid as the manager says it (the region's copy any NF can write)
    assert mgr.proc is not None and env["SQUALL_MGR_PID"] == str(mgr.proc.pid), env
    mgr.finish()


def test_install_dir_wins_over_the_build_dir(mgr: Manager, tmp_path: Path) -> None:
    name = f"squall-nf-order-{os.getpid()}"
    made_dir = not INSTALL_DIR.exists()
    paths = {"install": INSTALL_DIR / name, "build": BUILD / "nfs" / name}
    out = tmp_path / "nf"  # the NF's user may write here (manager.nf_user)
    out.mkdir()
    out.chmod(0o777)
    try:
        INSTALL_DIR.mkdir(parents=True, exist_ok=True)
        for where, p in paths.items():
            p.write_text(f'#!/bin/sh\necho {where} > "{out}/which"\nexit 0\n')
            p.chmod(0o755)
        cfg = simple_config(mgr, name, [])
        mgr.write_config(cfg)
        # No --nf-path: the manager's own search order. The NF exits at start,
        # so the manager stops at once, having run the one it found.
        r = subprocess.run(
            [str(BUILD / "mgr" / "squall-mgr"), "-q", str(mgr.config_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (out / "which").read_text().strip() == "install", r.stderr
        # With --nf-path the given directory comes first.
        r = subprocess.run(
            [
                str(BUILD / "mgr" / "squall-mgr"),
                "-q",
                "--nf-path",
                str(BUILD / "nfs"),
                str(mgr.config_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (out / "which").read_text().strip() == "build", r.stderr
    finally:
        for p in paths.values():
            p.unlink(missing_ok=True)
        if made_dir:
            shutil.rmtree(INSTALL_DIR, ignore_errors=True)
