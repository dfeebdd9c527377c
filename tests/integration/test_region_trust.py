"""What the manager trusts stays its own: an NF (or anyone) that rewrites
shared state hurts at most itself, and the manager's files cannot be turned
against it.

- --exit-stats never writes through a symlink planted at its path.
- Two processes cannot attach to one NF slot.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pcaps
from conftest import NF_DIR, Manager

N_PKTS = 50


def one_fwd_chain(mgr: Manager, tmp_path: Path) -> dict:
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", pcaps.good_frames(N_PKTS, [pcaps.mac(1)]))
    return mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[{"name": "fwd", "exec": "squall-nf-fwd"}],
        chains=[{"name": "c", "services": ["fwd"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )


def test_exit_stats_replaces_a_symlink_instead_of_following_it(
    mgr: Manager, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    mgr.exit_stats_path.symlink_to(victim)
    mgr.start(one_fwd_chain(mgr, tmp_path))
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    ex = mgr.finish()
    assert victim.read_text() == "precious\n"
    assert not mgr.exit_stats_path.is_symlink()
    assert ex["stats"]["tx_pkts"] == N_PKTS
    assert json.loads(mgr.exit_stats_path.read_text())["stats"]["tx_pkts"] == N_PKTS
    assert [p.name for p in tmp_path.glob("exit.json.*")] == []  # no temp file left


def region_of(mgr: Manager) -> str:
    """The path a hand-started NF attaches with (--sq-region)."""
    return f"/dev/hugepages/squall-{mgr.name}.region"


def test_a_second_process_cannot_attach_to_a_taken_slot(mgr: Manager, tmp_path: Path) -> None:
    mgr.start(one_fwd_chain(mgr, tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUALL_")}
    r = subprocess.run(
        [str(NF_DIR / "squall-nf-fwd"), "--sq-region", region_of(mgr), "--sq-id", "0"],
        capture_output=True,
        text=True,
        timeout=20,
        env=env,
    )
    assert r.returncode != 0
    assert "already attached by pid" in r.stderr, r.stderr
    # The slot's owner still gets every packet.
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    assert mgr.nfs()["fwd#0"]["rx_pkts"] == N_PKTS
    mgr.finish()
