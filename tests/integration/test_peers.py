"""The benchmark peers (python/squall/bench/peers): each one, started on the
namespaces of scripts/netns.sh, carries ping and HTTP from client to server,
and once stopped nothing does, so the peer was the path. The stateful peers
(nftables ct state, OVS ct(), each also with SNAT) carry the allowed port and
drop a new connection to another, and with SNAT the server sees the
translated address. A peer that cannot run here is skipped with its own
reason. Needs root."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from squall.bench.peers import CLIENT_END, SERVER_END, SNAT_IP, Peer, all_peers, stateful_peers
from squall.bench.peers.common import link

NETNS_SH = REPO / "scripts" / "netns.sh"
SERVER_IP = "10.77.0.2"
HTTP_PORT = 8078
BODY_BYTES = 256 << 10


def _run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)


def _ping(count: int) -> subprocess.CompletedProcess[str]:
    return _run(
        ["ip", "netns", "exec", "client", "ping", "-c", str(count), "-i", "0.2", "-W", "1"]
        + [SERVER_IP]
    )


@pytest.fixture(params=all_peers(), ids=lambda p: p.name)
def peer(request: pytest.FixtureRequest) -> Peer:
    """Each peer; skipped, with the peer's own reason, if it cannot run here."""
    p: Peer = request.param
    why = p.unavailable()
    if why is not None:
        pytest.skip(f"{p.name} cannot run here: {why}")
    return p


@pytest.fixture(params=stateful_peers((HTTP_PORT,)), ids=lambda p: p.name)
def stateful_peer(request: pytest.FixtureRequest) -> Peer:
    """Each stateful peer, allowing new connections to HTTP_PORT only."""
    p: Peer = request.param
    why = p.unavailable()
    if why is not None:
        pytest.skip(f"{p.name} cannot run here: {why}")
    return p


@pytest.fixture
def netns() -> Iterator[None]:
    r = _run([str(NETNS_SH), "up"], timeout=60)
    try:
        assert r.returncode == 0, f"netns.sh up failed ({r.returncode}):\n{r.stdout}{r.stderr}"
        yield
    finally:
        down = _run([str(NETNS_SH), "down"], timeout=60)
        assert down.returncode == 0, f"netns.sh down failed:\n{down.stdout}{down.stderr}"


@pytest.fixture
def http_server(netns: None, tmp_path: Path) -> Iterator[bytes]:
    """python3 -m http.server in namespace server, serving one random file."""
    www = tmp_path / "www"
    www.mkdir()
    body = os.urandom(BODY_BYTES)
    (www / "blob.bin").write_bytes(body)
    log_path = tmp_path / "http.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", "server", "python3", "-m", "http.server", str(HTTP_PORT)]
            + ["--bind", SERVER_IP, "--directory", str(www)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 10
        while not _run(
            ["ip", "netns", "exec", "server", "ss", "-Hltn", f"sport = :{HTTP_PORT}"]
        ).stdout.strip():
            assert proc.poll() is None, f"http.server exited: {log_path.read_text()}"
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


def test_peers_are_named_once() -> None:
    names = [p.name for p in all_peers()]
    assert len(names) == len(set(names)), names
    assert all(isinstance(p, Peer) for p in all_peers())


def _end(dev: str) -> dict[str, Any]:
    info = link(dev)
    assert info is not None, f"{dev} missing from the root namespace"
    return info


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces")
@pytest.mark.skipif(not NETNS_SH.is_file(), reason=f"{NETNS_SH} not found")
def test_peer_carries_traffic(peer: Peer, http_server: bytes, tmp_path: Path) -> None:
    ends = {end: _end(end) for end in (CLIENT_END, SERVER_END)}
    assert _ping(1).returncode != 0, "client reaches server before any peer runs"

    peer.start()
    try:
        r = _ping(3)
        assert r.returncode == 0, f"ping through {peer.name} failed:\n{r.stdout}{r.stderr}"
        got = tmp_path / "got.bin"
        r = _run(
            ["ip", "netns", "exec", "client", "curl", "-sS", "--max-time", "10", "-o", str(got)]
            + [f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin"]
        )
        assert r.returncode == 0, f"curl through {peer.name} failed: {r.stderr}"
        assert got.read_bytes() == http_server, "the page came back different"
    finally:
        peer.stop()
    peer.stop()  # idempotent

    r = _ping(1)
    assert r.returncode != 0, f"client still reaches server after {peer.name} stopped"
    for end, before in ends.items():
        after = _end(end)
        assert after["ifindex"] == before["ifindex"], f"{end} was recreated"
        left = {k: after[k] for k in ("master", "xdp") if k in after}
        assert not left, f"{end} after {peer.name} stopped: {left}"
        assert set(after["flags"]) == set(before["flags"]), f"{end} flags changed"


PROBE = (
    "import socket,sys\n"
    "s=socket.socket(); s.settimeout(1.5)\n"
    "try:\n"
    "    s.connect((sys.argv[1], int(sys.argv[2]))); print('connected')\n"
    "except socket.timeout: print('dropped')\n"
    "except ConnectionRefusedError: print('refused')\n"
)


def _connect(port: int) -> str:
    """What a new TCP connection from client to server:port meets."""
    r = _run(["ip", "netns", "exec", "client", "python3", "-c", PROBE, SERVER_IP, str(port)])
    return r.stdout.strip() or r.stderr


def _http_clients(log: Path) -> set[str]:
    """The client addresses http.server logged a request from."""
    return {m.group(1) for m in re.finditer(r"^(\S+) - - \[.*\"GET ", log.read_text(), re.M)}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces")
@pytest.mark.skipif(not NETNS_SH.is_file(), reason=f"{NETNS_SH} not found")
def test_stateful_peer_filters_and_translates(
    stateful_peer: Peer, http_server: bytes, tmp_path: Path
) -> None:
    peer = stateful_peer
    ends = {end: _end(end) for end in (CLIENT_END, SERVER_END)}
    # Without a path, and then through the peer, port 22 has no listener: a
    # passed SYN would be refused by the server's kernel.
    peer.start()
    try:
        r = _ping(3)
        assert r.returncode == 0, f"ping through {peer.name} failed:\n{r.stdout}{r.stderr}"
        got = tmp_path / "got.bin"
        for _ in range(3):  # new connections each time: each committed, then closed
            r = _run(
                ["ip", "netns", "exec", "client", "curl", "-sS", "--max-time", "10", "-o"]
                + [str(got), f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin"]
            )
            assert r.returncode == 0, f"curl through {peer.name} failed: {r.stderr}"
            assert got.read_bytes() == http_server, "the page came back different"
        assert _connect(22) == "dropped", f"{peer.name} let a new connection to port 22 through"
        # The http_server fixture logs to tmp_path: who the server saw.
        seen = _http_clients(tmp_path / "http.log")
        want = SNAT_IP if peer.name.endswith("-nat") else "10.77.0.1"
        assert seen == {want}, f"the server saw connections from {seen} through {peer.name}"
    finally:
        peer.stop()
    peer.stop()  # idempotent

    assert _ping(1).returncode != 0, f"client still reaches server after {peer.name} stopped"
    for end, before in ends.items():
        after = _end(end)
        assert after["ifindex"] == before["ifindex"], f"{end} was recreated"
        left = {k: after[k] for k in ("master", "xdp") if k in after}
        assert not left, f"{end} after {peer.name} stopped: {left}"
        assert set(after["flags"]) == set(before["flags"]), f"{end} flags changed"
