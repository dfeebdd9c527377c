"""IPv6 through squall-nf-conntrack: the namespaces of scripts/netns.sh get
fd77::1 and fd77::2 (IPv6 turned back on for this test); the security group
lets TCP 8077 in for IPv6 only. Neighbour discovery passes untracked, curl
over IPv6 works, port 22 over IPv6 is refused, ping6 is refused (no rule).
Needs root; run under flock /tmp/squall-netns.lock."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Manager
from test_netns import netns  # noqa: F401 (fixture)

C6, S6, PORT = "fd77::1", "fd77::2", 8077


def ns(name: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", name, *cmd], capture_output=True, text=True, check=False
    )


@pytest.fixture
def v6_server(netns: None) -> Iterator[None]:  # noqa: F811
    for name, dev, addr in (("client", "sq-c0", C6), ("server", "sq-s0", S6)):
        for key in ("all", "default", dev):
            ns(name, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=0")
        r = ns(name, "ip", "-6", "addr", "add", f"{addr}/64", "dev", dev, "nodad")
        assert r.returncode == 0, r.stderr
    proc = subprocess.Popen(
        ["ip", "netns", "exec", "server", "python3", "-m", "http.server", str(PORT),
         "--bind", S6],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not ns("server", "ss", "-Hltn", f"sport = :{PORT}").stdout.strip():
            assert proc.poll() is None and time.monotonic() < deadline, "no IPv6 server"
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=5)


@pytest.mark.parametrize("per_flow", [False, True], ids=["rss", "per-flow"])
def test_ipv6_through_conntrack(
    v6_server: None, mgr: Manager, tmp_path: Path, per_flow: bool
) -> None:
    """Shared (one instance, a table of connections) and per flow (an NF per
    IPv6 connection from the manager's flow table, its state cleaned at the
    flow's end)."""
    rules = tmp_path / "sg.rules"
    rules.write_text(f"bind server web\nallow web in proto=tcp port={PORT} ethertype=ipv6\n")
    svc: dict[str, object] = {
        "name": "ct",
        "exec": "squall-nf-conntrack",
        "args": ["--rules", str(rules)],
    }
    if per_flow:
        svc.update(args=["--rules", str(rules), "--table-size", "64"], instances=8)
        svc["ring_slots"] = 256
    assign = {"assign": "per-flow"} if per_flow else {}
    mgr.start(
        mgr.config(
            ports=[
                {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
                {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
            ],
            services=[svc],
            chains=[{"name": "edge", "services": ["ct"]}],
            rules=[
                {"in_port": "client", "chain": "edge", "out_port": "server", **assign},
                {"in_port": "server", "chain": "edge", "out_port": "client", **assign},
            ],
        )
    )
    url = f"http://[{S6}]:{PORT}/"
    ok = ns(
        "client", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", url
    )
    assert ok.returncode == 0 and ok.stdout == "200", f"{ok}\n{mgr.nfs()}"
    refused = ns("client", "curl", "-sS", "--connect-timeout", "3", f"http://[{S6}]:22/")
    assert refused.returncode == 28, refused
    ping = ns("client", "ping", "-6", "-c", "1", "-W", "2", S6)
    assert ping.returncode != 0, "ping6 passed without a rule"
    if per_flow:
        flows = mgr.query("/squall/flows")
        # the connection to 8077 and the one to 22: each an IPv6 flow
        assert flows["flows_created"] >= 2, flows
    nfs = mgr.finish()["nfs"]
    c: dict[str, int] = {}
    for nf in nfs.values():
        for k, v in nf.get("counters", {}).items():
            c[k] = c.get(k, 0) + int(v)
    assert c["committed"] == 1 and c["established"] > 0, c
    assert c["drop_no_rule"] >= 2, c  # port 22 and the ping
    assert c["untracked"] > 0, c  # neighbour discovery
    assert c["drop_no_rule"] >= 2, c  # the SYN to 22 and the echo request
    assert c["drop_bad_hdr"] == 0, c
