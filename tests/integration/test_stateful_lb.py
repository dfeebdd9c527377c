"""squall-nf-lb between the namespaces client and server of
scripts/netns.sh: three backends (http.server on 10.77.0.2:8081..8083, each
serving its own id.txt) behind the virtual address 10.77.0.200:80 (a static
neighbour in client). 30 short connections spread over all three, the NF's
per-backend counters agree with the ids the client got, and 1 MiB transfers
arrive whole (a connection that switched backends would be reset). Needs
root; run under flock /tmp/squall-netns.lock."""

from __future__ import annotations

import collections
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Manager
from test_netns import SERVER_IP, netns  # noqa: F401 (fixture)

VIP = "10.77.0.200"
SERVER_MAC = "02:00:00:00:00:02"
PORTS = (8081, 8082, 8083)
N_CONNS = 30


def ns(name: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", name, *cmd], capture_output=True, text=True, check=False
    )


@pytest.fixture
def backends(netns: None, tmp_path: Path) -> Iterator[bytes]:  # noqa: F811
    body = os.urandom(1 << 20)
    procs = []
    for port in PORTS:
        www = tmp_path / f"www{port}"
        www.mkdir()
        (www / "id.txt").write_text(str(port))
        (www / "blob.bin").write_bytes(body)
        procs.append(
            subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    "server",
                    "python3",
                    "-m",
                    "http.server",
                    str(port),
                    "--bind",
                    SERVER_IP,
                    "--directory",
                    str(www),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        )
    try:
        deadline = time.monotonic() + 10
        while len(ns("server", "ss", "-Hltn").stdout.strip().splitlines()) < len(PORTS):
            assert time.monotonic() < deadline, "backends not listening"
            time.sleep(0.1)
        yield body
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=5)


def test_lb_spreads_and_keeps_connections(backends: bytes, mgr: Manager, tmp_path: Path) -> None:
    assert (
        ns("client", "ip", "neigh", "add", VIP, "lladdr", SERVER_MAC, "dev", "sq-c0").returncode
        == 0
    )
    args = ["--vip", f"tcp:{VIP}:80", "--maglev-size", "251"]
    for port in PORTS:
        args += ["--backend", f"{SERVER_IP}:{port}"]
    mgr.start(
        mgr.config(
            ports=[
                {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
                {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
            ],
            services=[{"name": "lb", "exec": "squall-nf-lb", "args": args}],
            chains=[{"name": "edge", "services": ["lb"]}],
            rules=[
                {"in_port": "client", "chain": "edge", "out_port": "server"},
                {"in_port": "server", "chain": "edge", "out_port": "client"},
            ],
        )
    )
    got: collections.Counter[str] = collections.Counter()
    for _ in range(N_CONNS):
        r = ns("client", "curl", "-sS", "--max-time", "20", f"http://{VIP}/id.txt")
        assert r.returncode == 0, f"{r}\n{mgr.nfs()}"
        got[r.stdout] += 1
    assert set(got) == {str(p) for p in PORTS}, got  # every backend had some
    blob = tmp_path / "got.bin"
    for _ in range(3):
        r = ns(
            "client", "curl", "-sS", "--max-time", "60", "-o", str(blob), f"http://{VIP}/blob.bin"
        )
        assert r.returncode == 0 and blob.read_bytes() == backends, r
    c = mgr.finish()["nfs"]["lb#0"]["counters"]
    per_backend = [c[f"conns_b{i}"] for i in range(len(PORTS))]
    assert sum(per_backend) == N_CONNS + 3, c
    for i, port in enumerate(PORTS):  # the blobs went somewhere too: at least the ids
        assert per_backend[i] >= got[str(port)], (c, got)
    assert c["dropped"] == 0, c
