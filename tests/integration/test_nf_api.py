"""The NF API as a user meets it: an NF built outside the tree with pkg-config
runs in a chain, and an NF refuses a region of another ABI in words."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pcaps
import pytest
from conftest import BUILD, NF_DIR, REPO, Manager
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

SQ_REGION_MAGIC = 0x4C4C415551535153
EXAMPLE = REPO / "examples" / "out-of-tree-nf"


def build_example(dst: Path) -> Path:
    """make in a copy of examples/out-of-tree-nf, against the uninstalled libsquall."""
    shutil.copytree(EXAMPLE, dst)
    env = dict(os.environ, PKG_CONFIG_PATH=str(BUILD / "meson-uninstalled"))
    r = subprocess.run(["make", "-C", str(dst)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return dst / "my_nf"


def test_out_of_tree_nf_runs_in_a_chain(
    mgr: Manager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    my_nf = build_example(tmp_path / "my_nf")
    ldd = subprocess.run(["ldd", str(my_nf)], capture_output=True, text=True).stdout
    assert "libsquall" in ldd and "librte_" not in ldd, ldd
    # Uninstalled libsquall has no rpath: the manager passes its environment on.
    monkeypatch.setenv("LD_LIBRARY_PATH", str(BUILD / "lib"))

    frames = [
        bytes(
            Ether(dst=pcaps.mac(1), src=pcaps.mac(2))
            / IP(src="10.0.0.1", dst="10.0.0.2", ttl=ttl)
            / UDP(sport=1000 + i, dport=53)
            / (b"x" * 20)
        )
        for i, ttl in enumerate([1, 5, 9, 10, 64, 200] * 50)
    ]
    kept = [f for f in frames if IP(f[14:]).ttl >= 10]
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[
            {"name": "mine", "exec": str(my_nf), "args": ["--min-ttl", "10"]},
            {"name": "fwd", "exec": "squall-nf-fwd"},
        ],
        chains=[{"name": "c", "services": ["mine", "fwd"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    mgr.wait_for(
        lambda: mgr.stats()["tx_pkts"] + mgr.stats()["drop_pkts"] == len(frames),
        30,
        "every packet out or dropped",
    )
    ex = mgr.finish()

    assert pcaps.read_pcap(out_pcap) == kept
    st = ex["stats"]
    assert st["tx_pkts"] == len(kept)
    assert st["drops"]["nf_verdict"] == len(frames) - len(kept) == 150
    mine = next(nf for nf in ex["nfs"].values() if nf["service"] == "mine")
    assert mine["counters"]["low_ttl"] == 150
    assert mine["drop_verdicts"] == 150


def write_region(path: Path, abi: int) -> None:
    """A region file whose header claims another ABI version."""
    hdr = struct.pack("<QII", SQ_REGION_MAGIC, abi, 256) + b"\0" * 4096
    path.write_bytes(hdr)


def test_nf_refuses_a_region_of_another_abi(tmp_path: Path) -> None:
    region = tmp_path / "squall-other.region"
    write_region(region, abi=999)
    r = subprocess.run(
        [str(NF_DIR / "squall-nf-fwd"), "--sq-region", str(region), "--sq-id", "0"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert r.returncode != 0
    assert "ABI 999" in r.stderr and "rebuild" in r.stderr, r.stderr


def test_nf_refuses_a_file_that_is_no_region(tmp_path: Path) -> None:
    region = tmp_path / "not-a-region"
    region.write_bytes(b"hello" * 100)
    r = subprocess.run(
        [str(NF_DIR / "squall-nf-fwd"), "--sq-region", str(region), "--sq-id", "0"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert r.returncode != 0
    assert "not a Squall region" in r.stderr, r.stderr


def test_nf_without_a_manager_says_how_to_run_it() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUALL_")}
    r = subprocess.run(
        [str(NF_DIR / "squall-nf-fwd")], capture_output=True, text=True, timeout=10, env=env
    )
    assert r.returncode == 2
    assert "--sq-region" in r.stderr, r.stderr
