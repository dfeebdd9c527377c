"""squall-nf-nat between the namespaces client (10.77.0.1) and server
(10.77.0.2) of scripts/netns.sh, with real TCP (curl of a 1 MiB file) and
UDP. SNAT: the client's connections leave as 10.77.0.100 (which the client
namespace also holds, so it answers the server's ARP for it); the server's
log shows that address, the body arrives whole, neither kernel counted a
checksum error and neither retransmitted a segment. UDP: datagrams echoed
back through the translation, and a datagram to a closed port answered by
an ICMP port unreachable that the NF translates back, so the client's
socket is refused (untranslated, it would reach 10.77.0.100, quoting a
socket the client does not have, and be ignored). DNAT: the client reaches
10.77.0.200:80 (a static neighbour in the client) and lands on the
server's 8077. Per flow: each one-way UDP flow gets its NF and a port of
the NF's share, given back by the state cleaner at the flow's end; TCP
cannot work per flow yet (the server's reply carries the translated tuple,
which no flow entry of the manager holds: it must learn it). Needs root."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Manager
from test_netns import HTTP_PORT, SERVER_IP, http_server, netns  # noqa: F401 (fixtures)

SNAT_IP = "10.77.0.100"
VIP = "10.77.0.200"
SERVER_MAC = "02:00:00:00:00:02"


def ns(name: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", name, *cmd], capture_output=True, text=True, check=False
    )


def csum_errors(name: str) -> int:
    """InCsumErrors of TCP and UDP, and IP's InHdrErrors (a bad header
    checksum among them), in namespace @name: the kernel's count of what it
    refused for a checksum the NF got wrong."""
    total = 0
    lines = ns(name, "cat", "/proc/net/snmp").stdout.splitlines()
    for proto, field in (
        ("Tcp:", "InCsumErrors"),
        ("Udp:", "InCsumErrors"),
        ("Ip:", "InHdrErrors"),
    ):
        names, values = [line.split() for line in lines if line.startswith(proto)][:2]
        total += int(values[names.index(field)])
    return total


def nat_config(
    mgr: Manager, args: list[str], per_flow: bool = False, instances: int = 1
) -> dict[str, object]:
    svc: dict[str, object] = {"name": "nat", "exec": "squall-nf-nat", "args": args}
    extra: dict[str, object] = {}
    assign: dict[str, object] = {}
    if per_flow:
        # One connection per NF: a small table, cleaned at each flow's end.
        svc.update(args=[*args, "--table-size", "64"], instances=instances, ring_slots=256)
        extra = {"flow_linger_ms": 100, "flow_idle_timeout_ms": 500}
        assign = {"assign": "per-flow"}
    return mgr.config(
        ports=[
            {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
            {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
        ],
        services=[svc],
        chains=[{"name": "edge", "services": ["nat"]}],
        rules=[
            {"in_port": "client", "chain": "edge", "out_port": "server", **assign},
            {"in_port": "server", "chain": "edge", "out_port": "client", **assign},
        ],
        **extra,
    )


def nat_counters(ex: dict[str, object]) -> dict[str, int]:
    """The nat instances' counters, summed."""
    total: dict[str, int] = {}
    for name, nf in ex["nfs"].items():  # type: ignore[attr-defined]
        if name.startswith("nat#"):
            for k, v in nf["counters"].items():
                total[k] = total.get(k, 0) + v
    return total


UDP_PORT, CLOSED_PORT = 9999, 9998

# A UDP server in namespace server: writes each datagram's source to a log,
# and echoes it unless started with "sink".
UDP_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
echo = sys.argv[4] == "echo"
with open(sys.argv[3], "a") as log:
    while True:
        data, peer = s.recvfrom(2048)
        log.write(f"{peer[0]}:{peer[1]}\\n")
        log.flush()
        if echo:
            s.sendto(data, peer)
"""

# In namespace client: N datagrams on one connected socket, each echoed;
# then one to a closed port, which must be refused (the port unreachable
# came back to this socket). Prints a JSON summary.
UDP_CLIENT = f"""
import json, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.connect(("{SERVER_IP}", {UDP_PORT}))
echoed = 0
for i in range(20):
    s.send(b"datagram %d" % i)
    try:
        echoed += s.recv(64) == b"datagram %d" % i
    except TimeoutError:
        pass
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.settimeout(3)
c.connect(("{SERVER_IP}", {CLOSED_PORT}))
c.send(b"anyone?")
try:
    c.recv(64)
    closed = "data"
except ConnectionRefusedError:
    closed = "refused"
except TimeoutError:
    closed = "timeout"
print(json.dumps({{"echoed": echoed, "closed": closed}}))
"""


@contextlib.contextmanager
def run_udp_server(tmp_path: Path, echo: bool) -> Iterator[Path]:
    """A UDP server on 10.77.0.2:9999 in namespace server; yields its log of
    sources. It echoes each datagram, or with echo False only logs it."""
    log = tmp_path / "udp.log"
    log.touch()
    proc = subprocess.Popen(
        ["ip", "netns", "exec", "server", "python3", "-c", UDP_SERVER, SERVER_IP,
         str(UDP_PORT), str(log), "echo" if echo else "sink"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not ns("server", "ss", "-Hlun", f"sport = :{UDP_PORT}").stdout.strip():
            assert proc.poll() is None and time.monotonic() < deadline, "no UDP server"
            time.sleep(0.1)
        yield log
    finally:
        proc.terminate()
        proc.wait(timeout=5)


@pytest.fixture
def udp_echo(netns: None, tmp_path: Path) -> Iterator[Path]:  # noqa: F811
    with run_udp_server(tmp_path, echo=True) as log:
        yield log


@pytest.fixture
def udp_sink(netns: None, tmp_path: Path) -> Iterator[Path]:  # noqa: F811
    with run_udp_server(tmp_path, echo=False) as log:
        yield log


def fetch(url: str, out: Path) -> subprocess.CompletedProcess[str]:
    return ns(
        "client", "curl", "-sS", "--max-time", "60", "-o", str(out), "-w", "%{http_code}", url
    )


def download_three_times(body: bytes, mgr: Manager, tmp_path: Path) -> None:
    """Three 1 MiB downloads through SNAT, byte for byte; the server saw the
    translated address, never the client's own."""
    got = tmp_path / "got.bin"
    for _ in range(3):
        r = fetch(f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin", got)
        assert r.returncode == 0 and r.stdout == "200", f"{r}\n{mgr.snapshot()}"
        assert got.read_bytes() == body, "body differs"
    log = (tmp_path / "http.log").read_text()
    assert f"{SNAT_IP} - -" in log and "10.77.0.1 - -" not in log, log


def test_snat_long_transfers(http_server: bytes, mgr: Manager, tmp_path: Path) -> None:  # noqa: F811
    assert ns("client", "ip", "addr", "add", f"{SNAT_IP}/32", "dev", "sq-c0").returncode == 0
    mgr.start(nat_config(mgr, ["--snat", f"10.77.0.1/32={SNAT_IP}:20000-20999"]))
    errors_before = csum_errors("client") + csum_errors("server")
    download_three_times(http_server, mgr, tmp_path)
    # (Retransmissions are no measure of it: 4 and 78 segments in 2 runs of
    # 8 here, the manager polling, no drop counted in it or its ports: TCP's
    # own timers, or the af_packet sockets' kernel rings, which 22.11's
    # af_packet PMD does not read.)
    assert csum_errors("client") + csum_errors("server") == errors_before, mgr.snapshot()
    ex = mgr.finish()
    c = ex["nfs"]["nat#0"]["counters"]
    assert c["new_conns"] == 3, c
    assert c["translated"] >= 3 * 700, c  # 1 MiB is ~720 full frames per transfer
    assert c["drop_no_port"] == c["drop_bad_hdr"] == c["drop_table_full"] == 0, c


def test_dnat(http_server: bytes, mgr: Manager, tmp_path: Path) -> None:  # noqa: F811
    assert (
        ns("client", "ip", "neigh", "add", VIP, "lladdr", SERVER_MAC, "dev", "sq-c0").returncode
        == 0
    )
    mgr.start(nat_config(mgr, ["--dnat", f"tcp:{VIP}:80={SERVER_IP}:{HTTP_PORT}"]))
    got = tmp_path / "got.bin"
    r = fetch(f"http://{VIP}/blob.bin", got)
    assert r.returncode == 0 and r.stdout == "200", f"{r}\n{mgr.nfs()}"
    assert got.read_bytes() == http_server
    c = mgr.finish()["nfs"]["nat#0"]["counters"]
    assert c["new_conns"] == 1 and c["translated"] >= 700, c


def test_udp_and_icmp_errors_through_snat(udp_echo: Path, mgr: Manager) -> None:
    assert ns("client", "ip", "addr", "add", f"{SNAT_IP}/32", "dev", "sq-c0").returncode == 0
    mgr.start(nat_config(mgr, ["--snat", f"10.77.0.1/32={SNAT_IP}:20000-20999"]))
    errors_before = csum_errors("client") + csum_errors("server")
    r = ns("client", "python3", "-c", UDP_CLIENT)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == {"echoed": 20, "closed": "refused"}, f"{got}\n{mgr.nfs()}"
    sources = set(udp_echo.read_text().split())
    assert len(sources) == 1 and sources.pop().startswith(f"{SNAT_IP}:200"), sources
    assert csum_errors("client") + csum_errors("server") == errors_before
    c = nat_counters(mgr.finish())
    assert c["new_conns"] == 2, c  # the echoed flow and the one to the closed port
    assert c["translated"] >= 40 and c["icmp_errors"] == 1, c
    assert c["drop_bad_hdr"] == c["drop_no_port"] == 0, c


# In namespace client: one datagram from each of N new sockets (a flow
# each), a pause longer than the manager's idle timeout after each.
UDP_FLOWS = f"""
import socket, time
for i in range(6):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"flow %d" % i, ("{SERVER_IP}", {UDP_PORT}))
    s.close()
    time.sleep(1.2)
"""


def test_per_flow_snat_gives_ports_back(udp_sink: Path, mgr: Manager) -> None:
    """Per flow, one way: two pooled NFs with one SNAT port each carry six
    flows one after the other. Each NF's port comes back at its flow's end
    (the state cleaner), or its next flow would find none (drop_no_port)."""
    mgr.start(
        nat_config(
            mgr,
            ["--snat", f"10.77.0.1/32={SNAT_IP}:20000-20001", "--ports-per-instance", "1"],
            per_flow=True,
            instances=2,
        )
    )
    r = ns("client", "python3", "-c", UDP_FLOWS)
    assert r.returncode == 0, r.stderr
    mgr.wait_for(lambda: len(udp_sink.read_text().split()) == 6, 10, "6 datagrams at the server")
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_ended"] >= 6, 10, "the 6 flows ended")
    sources = udp_sink.read_text().split()
    # two NFs, one port each: the six flows took turns on them
    assert set(sources) <= {f"{SNAT_IP}:20000", f"{SNAT_IP}:20001"}, sources
    c = nat_counters(mgr.finish())
    assert c["new_conns"] == 6 and c["translated"] == 6 and c["drop_no_port"] == 0, c


def test_per_flow_snat_over_tcp(http_server: bytes, mgr: Manager, tmp_path: Path) -> None:  # noqa: F811
    """Per flow over TCP: each connection gets its own NAT NF, which returns
    the SYN rekeyed (sq_rekeyed); the manager then knows the flow by its
    translated tuple too, so the SYN-ACK and every reply, addressed to
    10.77.0.100:port, reach that NF and are translated back. Three 1 MiB
    downloads, byte for byte; each flow closed by its FINs, seen from both
    sides through the two keys (not ended by the idle timeout)."""
    assert ns("client", "ip", "addr", "add", f"{SNAT_IP}/32", "dev", "sq-c0").returncode == 0
    mgr.start(
        nat_config(
            mgr,
            ["--snat", f"10.77.0.1/32={SNAT_IP}:20000-20015", "--ports-per-instance", "2"],
            per_flow=True,
            instances=8,
        )
    )
    errors_before = csum_errors("client") + csum_errors("server")
    download_three_times(http_server, mgr, tmp_path)
    assert csum_errors("client") + csum_errors("server") == errors_before
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_ended"] >= 3, 10, "3 flows ended")
    flows = mgr.query("/squall/flows")
    assert flows["flows_rekeyed"] == flows["flows_created"] == 3, flows
    assert flows["flows_closed"] == 3 and flows["rekeys_refused"] == 0, flows
    assert flows["rekeys_lost"] == 0, flows
    ex = mgr.finish()
    c = nat_counters(ex)
    assert c["new_conns"] == 3 and c["translated"] >= 3 * 700, c
    assert ex["stats"]["drops"]["stray"] == 0, ex["stats"]["drops"]
