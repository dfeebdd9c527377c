"""Per-flow admission under attack (mgr/admit.h, docs/config.md
flow_unestablished_per_source): while spoofed sources of one /24 send a SYN
and a blind ACK for each of 10x the pool's size of new connections a second,
and as many UDP datagrams, ab's real connections through a per-flow chain
all succeed and never find the pool empty. The spoofed flows never count as
established (no SYN-ACK is seen, the ACK acknowledges nothing), at most
flow_unestablished_per_source of them are in at once, the rest are dropped
under flow_admission, and those let in end after flow_half_open_timeout_ms.
Before: the blind ACK established each spoofed flow, which then held its NFs
for the idle timeout, and real SYNs met an empty pool. Needs root."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Manager
from test_netns import HTTP_PORT, SERVER_IP, http_server, netns  # noqa: F401 (fixtures)
from test_per_flow_netns import run_ab, web_config

# (the flood: squall.bench.flood, spoofed SYNs with blind ACKs and datagrams)
pytestmark = pytest.mark.skipif(shutil.which("ab") is None, reason="ab (apache2-utils) missing")

POOL = 128  # ab runs 50 connections at once (test_per_flow_netns)
CAP = 64  # above ab's 50 connections at once from its /24
FLOOD_S = 6
SPOOFED = "10.66.1"  # a /24 of the client's side that no host has


def test_real_connections_get_nfs_while_spoofed_ones_flood(
    http_server: bytes,  # noqa: F811
    mgr: Manager,
    tmp_path: Path,
) -> None:
    # (a SYN that finds no NF waits for one; a short linger: the pool's NFs
    # come back at ab's rate, as in test_small_pool_queues_new_flows)
    cfg = web_config(mgr, POOL, pool_fallback="queue", pool_queue_pkts=512)
    cfg["manager"]["flow_linger_ms"] = 20
    cfg["manager"]["flow_unestablished_per_source"] = CAP
    cfg["manager"]["flow_half_open_timeout_ms"] = 1000
    mgr.start(cfg)
    flood = subprocess.Popen(
        ["ip", "netns", "exec", "client", sys.executable, "-m", "squall.bench.flood",
         SPOOFED, SERVER_IP, str(HTTP_PORT), str(10 * POOL), str(FLOOD_S)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        run_ab(mgr, f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin", 300)
    finally:
        out, err = flood.communicate(timeout=FLOOD_S + 60)
    assert flood.returncode == 0, err
    spoofed = int(out)
    assert spoofed >= 10 * POOL * FLOOD_S // 2, spoofed
    flows = mgr.query("/squall/flows")
    drops = mgr.stats()["drops"]
    # the spoofed SYNs and datagrams beyond the cap refused, each counted as
    # a refused flow and a flow_admission drop
    assert flows["flows_refused"] > spoofed, (flows, drops)
    assert drops["flow_admission"] == flows["flows_refused"], (flows, drops)
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_active"] == 0, 30, "every flow ended")
    flows = mgr.query("/squall/flows")
    assert flows["flows_half_open_expired"] > 0 and flows["flows_unreplied_expired"] > 0, flows
    # the real connections never met an empty pool
    assert drops["pool_empty"] == 0, drops
    mgr.finish()
