"""kill -9 every instance of a service, again and again, under wrk through a
3-service chain between the namespaces (scripts/netns.sh): the instances come
back in their slots fast enough that TCP retransmits over the gap and no
request fails. Run under `flock /tmp/squall-netns.lock`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest
from conftest import Manager
from test_netns import HTTP_PORT, NETNS_SH, SERVER_IP, http_server, netns  # noqa: F401

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
    pytest.mark.skipif(not NETNS_SH.is_file(), reason=f"{NETNS_SH} not found"),
]

INSTANCES = 4
ROUNDS = 5
CONNS = 8


def test_wrk_survives_killing_every_instance(
    http_server: bytes,  # noqa: F811
    mgr: Manager,
) -> None:
    cfg = mgr.config(
        ports=[
            {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
            {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
        ],
        services=[
            {"name": "mon", "exec": "squall-nf-monitor", "args": ["--interval-ms", "0"],
             "instances": INSTANCES},
            {"name": "mid", "exec": "squall-nf-noop", "instances": INSTANCES},
            {"name": "fwd", "exec": "squall-nf-fwd", "instances": INSTANCES},
        ],
        chains=[{"name": "web", "services": ["mon", "mid", "fwd"]}],
        rules=[
            {"in_port": "client", "chain": "web", "out_port": "server"},
            {"in_port": "server", "chain": "web", "out_port": "client"},
        ],
    )  # fmt: skip
    mgr.start(cfg)
    wrk = subprocess.Popen(
        [
            "ip", "netns", "exec", "client", "wrk", "-t2", f"-c{CONNS}", "-d12s",
            "--timeout", "10s", f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        mgr.wait_for(lambda: mgr.chains()["web"]["tx_pkts"] > 2000, 10, "wrk traffic")
        for r in range(ROUNDS):
            nfs = mgr.nfs()
            for i in range(INSTANCES):
                os.kill(nfs[f"mid#{i}"]["pid"], signal.SIGKILL)
            mgr.wait_for(
                lambda r=r: all(
                    nf["restarts"] == r + 1 and nf["state"] != "dead" and nf["pid"] > 0
                    for k, nf in mgr.nfs().items()
                    if k.startswith("mid#")
                ),
                15,
                f"round {r}: every mid instance restarted",
            )
            time.sleep(0.5)
        out, _ = wrk.communicate(timeout=60)
    finally:
        if wrk.poll() is None:
            wrk.kill()
            wrk.wait()
    assert wrk.returncode == 0, out
    done = re.search(r"(\d+) requests in", out)
    assert done is not None and int(done.group(1)) > 0, out
    # wrk prints these only when some failed: none may.
    assert "Socket errors" not in out, out
    assert "Non-2xx" not in out, out
    nfs = mgr.nfs()
    for i in range(INSTANCES):
        assert nfs[f"mid#{i}"]["restarts"] == ROUNDS, nfs[f"mid#{i}"]
        assert nfs[f"mid#{i}"]["exit_reason"] == "signal 9 (KILL)"
    print(out)  # for the record with -s
    mgr.finish()
