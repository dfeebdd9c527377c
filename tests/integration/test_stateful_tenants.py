"""Two tenants with the same address through a tenant edge (conntrack with
zones and security groups -> per-tenant SNAT), as in examples/tenant-edge.yaml.
Namespaces client (tenant a) and tenant2 (tenant b, made here) both are
10.77.0.1; they open the very same 5-tuple (source port 40000) to the
server at the same time. conntrack keeps the two connections apart by zone
(without zones the second SYN would be invalid against the first's
established connection), nat-a and nat-b give them 10.77.0.101 and
10.77.0.102, and both 1 MiB transfers arrive whole. Needs root; run under
flock /tmp/squall-netns.lock."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Manager
from test_netns import HTTP_PORT, SERVER_IP, http_server, netns  # noqa: F401 (fixtures)

MAC_A, MAC_B, MAC_S = "02:00:00:00:00:01", "02:00:00:00:00:03", "02:00:00:00:00:02"
NAT_A, NAT_B = "10.77.0.101", "10.77.0.102"
NS_B, DEV_B, PEER_B = "tenant2", "sq-d0", "sq-d1"


def sh(*cmd: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert r.returncode == 0, f"{cmd}: {r.stderr}"


@pytest.fixture
def tenant2(netns: None) -> Iterator[None]:  # noqa: F811
    """A second client namespace with the first one's address."""
    subprocess.run(["ip", "netns", "del", NS_B], capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", PEER_B], capture_output=True, check=False)
    try:
        sh("ip", "netns", "add", NS_B)
        q = ("numtxqueues", "1", "numrxqueues", "1")
        sh(
            "ip",
            "link",
            "add",
            PEER_B,
            *q,
            "type",
            "veth",
            "peer",
            "name",
            DEV_B,
            *q,
            "netns",
            NS_B,
        )
        sh("ip", "-n", NS_B, "link", "set", "dev", DEV_B, "address", MAC_B, "up")
        sh("ip", "-n", NS_B, "link", "set", "lo", "up")
        sh("ip", "-n", NS_B, "addr", "add", "10.77.0.1/24", "dev", DEV_B)
        sh("ip", "link", "set", PEER_B, "up")
        for f in ("tx", "tso", "gso", "gro", "rx"):  # as scripts/netns.sh does
            subprocess.run(["ip", "netns", "exec", NS_B, "ethtool", "-K", DEV_B, f, "off"],
                           capture_output=True, check=False)  # fmt: skip
            subprocess.run(["ethtool", "-K", PEER_B, f, "off"], capture_output=True, check=False)
        # No ARP across the edge: static neighbours both ways.
        for ns, dev in (("client", "sq-c0"), (NS_B, DEV_B)):
            sh("ip", "-n", ns, "neigh", "replace", SERVER_IP, "lladdr", MAC_S, "dev", dev)
        sh("ip", "-n", "server", "neigh", "replace", NAT_A, "lladdr", MAC_A, "dev", "sq-s0")
        sh("ip", "-n", "server", "neigh", "replace", NAT_B, "lladdr", MAC_B, "dev", "sq-s0")
        yield
    finally:
        subprocess.run(["ip", "netns", "del", NS_B], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", PEER_B], capture_output=True, check=False)


def test_same_tuple_in_two_zones(
    http_server: bytes,  # noqa: F811
    tenant2: None,
    mgr: Manager,
    tmp_path: Path,
) -> None:
    rules = tmp_path / "sg.rules"
    rules.write_text(
        f"bind ta grp-a\nbind tb grp-b\n"
        f"allow grp-a out proto=tcp port={HTTP_PORT}\nallow grp-b out proto=tcp port={HTTP_PORT}\n"
    )
    ct_args = ["--rules", str(rules), "--zone-by-port", "ta=1", "--zone-by-port", "tb=2"]
    mgr.start(
        mgr.config(
            ports=[
                {"name": "ta", "devargs": "net_af_packet0,iface=sq-c1"},
                {"name": "tb", "devargs": f"net_af_packet1,iface={PEER_B}"},
                {"name": "up", "devargs": "net_af_packet2,iface=sq-s1"},
            ],
            services=[
                {"name": "ct", "exec": "squall-nf-conntrack", "args": ct_args},
                {
                    "name": "nat-a",
                    "exec": "squall-nf-nat",
                    "args": ["--snat", f"10.77.0.1/32={NAT_A}"],
                },
                {
                    "name": "nat-b",
                    "exec": "squall-nf-nat",
                    "args": ["--snat", f"10.77.0.1/32={NAT_B}"],
                },
            ],
            chains=[
                {"name": "out-a", "services": ["ct", "nat-a"]},
                {"name": "out-b", "services": ["ct", "nat-b"]},
                {"name": "in-a", "services": ["nat-a", "ct"]},
                {"name": "in-b", "services": ["nat-b", "ct"]},
            ],
            rules=[
                {"in_port": "ta", "chain": "out-a", "out_port": "up"},
                {"in_port": "tb", "chain": "out-b", "out_port": "up"},
                {"in_port": "up", "dst_mac": MAC_A, "chain": "in-a", "out_port": "ta"},
                {"in_port": "up", "dst_mac": MAC_B, "chain": "in-b", "out_port": "tb"},
            ],
        )
    )
    url = f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin"
    procs = []
    for ns in ("client", NS_B):
        out = tmp_path / f"{ns}.bin"
        procs.append((out, subprocess.Popen(
            ["ip", "netns", "exec", ns, "curl", "-sS", "--max-time", "60", "--local-port", "40000",
             "--limit-rate", "300k", "-o", str(out), url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )))  # fmt: skip
        time.sleep(0.5)  # the first connection is established when the second opens
    for out, p in procs:
        _, err = p.communicate(timeout=90)
        assert p.returncode == 0, f"{out.name}: curl {p.returncode}: {err}\n{mgr.nfs()}"
        assert out.read_bytes() == http_server, f"{out.name}: body differs"
    log = (tmp_path / "http.log").read_text()
    assert f"{NAT_A} - -" in log and f"{NAT_B} - -" in log, log
    ex = mgr.finish()
    ct = ex["nfs"]["ct#0"]["counters"]
    assert ct["committed"] == 2 and ct["drop_no_rule"] == 0, ct
