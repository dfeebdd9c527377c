"""squall-nf-nat between the namespaces client (10.77.0.1) and server
(10.77.0.2) of scripts/netns.sh, with real TCP (curl of a 1 MiB file).
SNAT: the client's connections leave as 10.77.0.100 (which the client
namespace also holds, so it answers the server's ARP for it); the server's
log shows that address, the body arrives whole, and neither kernel counted
a checksum error. DNAT: the client reaches 10.77.0.200:80 (a static
neighbour in the client) and lands on the server's 8077. Needs root; run
under flock /tmp/squall-netns.lock."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
    """InCsumErrors of TCP and UDP in namespace @name (the kernel's count of
    segments it refused for a bad checksum)."""
    total = 0
    lines = ns(name, "cat", "/proc/net/snmp").stdout.splitlines()
    for proto in ("Tcp:", "Udp:"):
        names, values = [line.split() for line in lines if line.startswith(proto)][:2]
        total += int(values[names.index("InCsumErrors")])
    return total


def retrans_segs(name: str) -> int:
    lines = ns(name, "cat", "/proc/net/snmp").stdout.splitlines()
    names, values = [line.split() for line in lines if line.startswith("Tcp:")][:2]
    return int(values[names.index("RetransSegs")])


def nat_config(mgr: Manager, args: list[str]) -> dict[str, object]:
    return mgr.config(
        ports=[
            {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
            {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
        ],
        services=[{"name": "nat", "exec": "squall-nf-nat", "args": args}],
        chains=[{"name": "edge", "services": ["nat"]}],
        rules=[
            {"in_port": "client", "chain": "edge", "out_port": "server"},
            {"in_port": "server", "chain": "edge", "out_port": "client"},
        ],
    )


def fetch(url: str, out: Path) -> subprocess.CompletedProcess[str]:
    return ns(
        "client", "curl", "-sS", "--max-time", "60", "-o", str(out), "-w", "%{http_code}", url
    )


def test_snat_long_transfers(http_server: bytes, mgr: Manager, tmp_path: Path) -> None:  # noqa: F811
    assert ns("client", "ip", "addr", "add", f"{SNAT_IP}/32", "dev", "sq-c0").returncode == 0
    mgr.start(nat_config(mgr, ["--snat", f"10.77.0.1/32={SNAT_IP}:20000-20999"]))
    errors_before = csum_errors("client") + csum_errors("server")
    got = tmp_path / "got.bin"
    for _ in range(3):
        r = fetch(f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin", got)
        assert r.returncode == 0 and r.stdout == "200", f"{r}\n{mgr.nfs()}"
        assert got.read_bytes() == http_server, "body differs"
    # The server saw the translated address, never the client's own.
    log = (tmp_path / "http.log").read_text()
    assert f"{SNAT_IP} - -" in log and "10.77.0.1 - -" not in log, log
    assert csum_errors("client") + csum_errors("server") == errors_before
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
