"""HTTP through squall-mgr between two network namespaces (scripts/netns.sh):
client (sq-c0, 10.77.0.1) -> sq-c1 | squall: monitor -> fwd | sq-s1 -> server
(sq-s0, 10.77.0.2). Needs root."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, Manager

NETNS_SH = REPO / "scripts" / "netns.sh"
SERVER_IP = "10.77.0.2"
HTTP_PORT = 8077
BODY_BYTES = 1 << 20

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
    pytest.mark.skipif(not NETNS_SH.is_file(), reason=f"{NETNS_SH} not found"),
]


def _netns(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NETNS_SH), *args], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.fixture
def netns() -> Iterator[None]:
    r = _netns("up")
    try:
        assert r.returncode == 0, f"netns.sh up failed ({r.returncode}):\n{r.stdout}{r.stderr}"
        yield
    finally:
        down = _netns("down")
        assert down.returncode == 0, f"netns.sh down failed:\n{down.stdout}{down.stderr}"


@pytest.fixture
def http_server(netns: None, tmp_path: Path) -> Iterator[bytes]:
    """python3 -m http.server in namespace server, serving one random file."""
    www = tmp_path / "www"
    www.mkdir()
    body = os.urandom(BODY_BYTES)
    (www / "blob.bin").write_bytes(body)
    log = (tmp_path / "http.log").open("wb")
    cmd = ["ip", "netns", "exec", "server", "python3", "-m", "http.server", str(HTTP_PORT)]
    proc = subprocess.Popen(
        [*cmd, "--bind", SERVER_IP, "--directory", str(www)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:  # listening inside the namespace (not through squall yet)
            ss = subprocess.run(
                ["ip", "netns", "exec", "server", "ss", "-Hltn", f"sport = :{HTTP_PORT}"],
                capture_output=True,
                text=True,
                check=False,
            )
            if ss.stdout.strip():
                break
            assert proc.poll() is None, f"http.server exited: {(tmp_path / 'http.log').read_text()}"
            assert time.monotonic() < deadline, "http.server not listening after 10 s"
            time.sleep(0.1)
        yield body
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.parametrize("sandbox", ["none", "isolated"])
def test_http_through_monitor_and_fwd(
    http_server: bytes, mgr: Manager, tmp_path: Path, sandbox: str
) -> None:
    """Real TCP through a 2-NF chain, shared and isolated (each packet copied
    into each NF's private region and back, twice per hop pair)."""
    # http_server (and netns) come first, so the manager stops before the
    # namespaces go down.
    cfg = mgr.config(
        ports=[
            {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
            {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
        ],
        services=[
            {
                "name": "mon",
                "exec": "squall-nf-monitor",
                "mode": "sleep",
                "args": ["--interval-ms", "0"],
                "sandbox": sandbox,
            },
            {"name": "fwd", "exec": "squall-nf-fwd", "mode": "sleep", "sandbox": sandbox},
        ],
        chains=[{"name": "web", "services": ["mon", "fwd"]}],
        rules=[
            {"in_port": "client", "chain": "web", "out_port": "server"},
            {"in_port": "server", "chain": "web", "out_port": "client"},
        ],
    )
    mgr.start(cfg)

    got = tmp_path / "got.bin"
    curl = subprocess.run(
        [
            "ip", "netns", "exec", "client", "curl", "-sS", "--max-time", "30",
            "-o", str(got), "-w", "%{http_code}",
            f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin",
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert curl.returncode == 0, f"curl failed ({curl.returncode}): {curl.stderr}\n{mgr.snapshot()}"
    assert curl.stdout == "200", curl.stdout
    assert got.read_bytes() == http_server, "body differs from the served file"

    ports = mgr.ports()
    for name in ("client", "server"):
        assert ports[name]["rx_pkts"] > 0 and ports[name]["tx_pkts"] > 0, ports
    # The 1 MiB body alone is ~700 full-size frames from server to client.
    assert ports["server"]["rx_bytes"] >= BODY_BYTES, ports
    assert ports["client"]["tx_bytes"] >= BODY_BYTES, ports

    if sandbox == "isolated":
        # every packet each NF saw was a copy, and came back as one
        nfs = mgr.nfs()
        for name in ("mon#0", "fwd#0"):
            nf = nfs[name]
            assert nf["isolated"] == 1 and nf["copied_in_pkts"] >= nf["rx_pkts"] > 0, nf
    ex = mgr.finish()
    mon = ex["nfs"]["mon#0"]
    assert mon["rx_pkts"] > 0 and mon["counters"]["pkts"] == mon["rx_pkts"], mon
    assert ex["stats"]["drops"].get("isolated_copy", 0) == 0, ex["stats"]["drops"]
    chain = ex["chains"]["web"]
    assert chain["visits_mismatch"] == 0, chain
    assert chain["tx_pkts"] > 0, chain
