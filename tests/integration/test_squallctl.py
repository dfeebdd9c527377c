"""squallctl against a running manager: every subcommand, --json for scripts,
tables for people, exit 1 when the manager is not there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pcaps
import pytest
from conftest import REPO, Manager
from squall.telemetry import socket_path

N_PKTS = 100


def squallctl(*args: str) -> subprocess.CompletedProcess[str]:
    # piped, as in a log, with no COLUMNS: the tables must still show whole
    # cells (squall/console.py)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(REPO / "python")
    return subprocess.run(
        [sys.executable, "-m", "squall.ctl", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=30,
    )


@pytest.fixture
def running(mgr: Manager, tmp_path: Path) -> Manager:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)], seed=7)
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={tmp_path / 'out.pcap'}"},
        ],
        services=[{"name": "s1", "exec": "squall-nf-sig", "mode": "sleep"}],
        chains=[{"name": "c", "services": ["s1"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    mgr.wait_port_tx("out", N_PKTS)
    mgr.wait_mbufs_home()
    return mgr


def test_squallctl_json(running: Manager) -> None:
    name = running.name
    r = squallctl("--name", name, "--json", "status")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["stats"]["rx_pkts"] == st["stats"]["tx_pkts"] == N_PKTS, st["stats"]
    assert st["ports"]["out"]["tx_pkts"] == N_PKTS, st["ports"]
    assert st["nfs"]["s1#0"]["counters"]["sig_pkts"] == N_PKTS, st["nfs"]

    r = squallctl("--name", name, "nfs", "--json")  # --json after the subcommand too
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["s1#0"]["rx_pkts"] == N_PKTS

    r = squallctl("--name", name, "--json", "chains")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["c"]["tx_pkts"] == N_PKTS

    r = squallctl("--name", name, "--json", "drops")
    assert r.returncode == 0, r.stderr
    drops = json.loads(r.stdout)
    assert drops["no_rule"]["pkts"] == 0, drops
    assert all(isinstance(d["what"], str) and d["what"] for d in drops.values()), drops

    r = squallctl("--socket", str(socket_path(name)), "--json", "ports")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["in"]["rx_pkts"] == N_PKTS

    r = squallctl("--name", name, "raw", "/squall/stats")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mbufs_in_use"] == 0

    r = squallctl("--name", name, "raw", "/squall/no_such_command")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "no command '/squall/no_such_command'" in r.stderr, r.stderr

    # A known command that refuses says why, not that it does not exist.
    r = squallctl("--name", name, "raw", "/squall/gen_rate,1000")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "the config has no generator" in r.stderr, r.stderr
    r = squallctl("--name", name, "raw", "/squall/wake,s1,sometimes")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "expected /squall/wake,SERVICE,min|fixed|adaptive" in r.stderr, r.stderr

    running.finish()


def test_squallctl_tables(running: Manager) -> None:
    r = squallctl("--name", running.name, "status")
    assert r.returncode == 0, r.stderr
    pids = [str(nf["pid"]) for nf in running.nfs().values()]
    for text in ("rx_pkts", "in", "out", "s1#0", "sig_pkts=100", *pids):
        assert text in r.stdout, (text, r.stdout)
    assert "…" not in r.stdout, r.stdout  # no cell cut short
    for cmd in ("ports", "nfs", "chains", "drops"):
        r = squallctl("--name", running.name, cmd)
        assert r.returncode == 0, (cmd, r.stderr)
        assert r.stdout.strip(), cmd
    running.finish()


def test_squallctl_without_manager() -> None:
    r = squallctl("--name", "squall-test-nobody-here", "status")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "not running" in r.stderr, r.stderr
    r = squallctl("--no-such-option")
    assert r.returncode == 2, r.returncode
    r = squallctl("--help")
    assert r.returncode == 0 and "status" in r.stdout, r.stdout
