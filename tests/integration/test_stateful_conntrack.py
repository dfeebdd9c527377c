"""squall-nf-conntrack with security groups between the namespaces client
(10.77.0.1) and server (10.77.0.2) of scripts/netns.sh: the server port is
bound to a group that allows TCP 8077 (HTTP) and UDP 9999 in, not 22. Real
curl: 8077 works (its return traffic is established), 22 fails although a
server listens there, a UDP datagram to a closed port comes back as an ICMP
port unreachable (related; per flow too: the manager hands an ICMP error to
the NF of the flow it quotes), and SIGHUP reloads the rules. Needs root; run
under flock /tmp/squall-netns.lock."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Manager
from test_apply import squallctl
from test_netns import HTTP_PORT, SERVER_IP, http_server, netns  # noqa: F401 (fixtures)

SSH_PORT = 22
UDP_PORT = 9999

RULES = f"""# the server port faces the web group's workloads
bind server web
allow web in proto=tcp port={HTTP_PORT}
allow web in proto=udp port={UDP_PORT}
allow web in proto=icmp port=8
allow web out
"""

UDP_PROBE = f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.connect(("{SERVER_IP}", {UDP_PORT}))
s.send(b"hello")
try:
    s.recv(16)
    print("data")
except ConnectionRefusedError:
    print("refused")
except TimeoutError:
    print("timeout")
"""


@pytest.fixture
def ssh_listener(netns: None) -> Iterator[None]:  # noqa: F811
    """Something listening on port 22 in server: a refusal is the NF's."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", "server", "python3", "-m", "http.server", str(SSH_PORT),
         "--bind", SERVER_IP],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not subprocess.run(
            ["ip", "netns", "exec", "server", "ss", "-Hltn", f"sport = :{SSH_PORT}"],
            capture_output=True, text=True, check=False,
        ).stdout.strip():  # fmt: skip
            assert proc.poll() is None and time.monotonic() < deadline, "no listener on 22"
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def curl(port: int, timeout_s: int = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", "client", "curl", "-sS", "-o", "/dev/null",
         "--connect-timeout", "3", "--max-time", str(timeout_s), "-w", "%{http_code}",
         f"http://{SERVER_IP}:{port}/"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def ct_config(mgr: Manager, rules: Path, per_flow: bool) -> dict[str, object]:
    svc: dict[str, object] = {
        "name": "ct",
        "exec": "squall-nf-conntrack",
        "args": ["--rules", str(rules)],
    }
    extra: dict[str, object] = {}
    if per_flow:
        # One connection per NF: a small table, cleaned at each flow's end.
        svc["args"] = ["--rules", str(rules), "--table-size", "64"]
        svc["instances"] = 16
        svc["ring_slots"] = 256
        extra = {"flow_linger_ms": 200, "flow_idle_timeout_ms": 30000}
    rule_extra = {"assign": "per-flow"} if per_flow else {}
    return mgr.config(
        ports=[
            {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
            {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
        ],
        services=[svc],
        chains=[{"name": "edge", "services": ["ct"]}],
        rules=[
            {"in_port": "client", "chain": "edge", "out_port": "server", **rule_extra},
            {"in_port": "server", "chain": "edge", "out_port": "client", **rule_extra},
        ],
        **extra,
    )


def counters(ex: dict[str, object]) -> dict[str, int]:
    """The ct instances' counters, summed."""
    total: dict[str, int] = {}
    for name, nf in ex["nfs"].items():  # type: ignore[attr-defined]
        if name.startswith("ct#"):
            for k, v in nf["counters"].items():
                total[k] = total.get(k, 0) + v
    return total


@pytest.mark.parametrize("per_flow", [False, True], ids=["shared", "per-flow"])
def test_security_group_allows_80_refuses_22(
    http_server: bytes,  # noqa: F811
    ssh_listener: None,
    mgr: Manager,
    tmp_path: Path,
    per_flow: bool,
) -> None:
    rules = tmp_path / "sg.rules"
    rules.write_text(RULES)
    mgr.start(ct_config(mgr, rules, per_flow))

    for _ in range(3):
        web = curl(HTTP_PORT)
        assert web.returncode == 0 and web.stdout == "200", f"{web}\n{mgr.nfs()}"
    ssh = curl(SSH_PORT)
    assert ssh.returncode == 28, f"port 22 not refused: {ssh}"  # connect timed out
    ping = subprocess.run(
        ["ip", "netns", "exec", "client", "ping", "-c", "2", "-i", "0.2", "-W", "3", SERVER_IP],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ping.returncode == 0, ping.stdout + ping.stderr
    # The port unreachable is another 5-tuple: per flow, the manager hands it
    # to the NF of the UDP flow it quotes, which finds it related.
    udp = subprocess.run(
        ["ip", "netns", "exec", "client", "python3", "-c", UDP_PROBE],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert udp.stdout.strip() == "refused", f"{udp}\n{mgr.snapshot()}"
    flows = mgr.query("/squall/flows") if per_flow else {}

    ex = mgr.finish()
    c = counters(ex)
    # 3 HTTP connections, a ping and a UDP flow committed; the SYNs to 22
    # (curl retries within its 3 s) are all refused by rule.
    assert c["committed"] >= 5, c
    assert c["drop_no_rule"] >= 1, c
    assert c["established"] > 0, c
    assert c["related"] >= 1, c
    assert c["drop_bad_hdr"] == 0, c
    if per_flow:
        # the error went to its flow, not to an NF of its own
        assert ex["stats"]["drops"].get("icmp_no_flow", 0) == 0, ex["stats"]["drops"]
        assert flows["flows_created"] >= 4, flows


@pytest.mark.parametrize("how", ["message", "sighup"])
def test_rules_reload_while_running(
    http_server: bytes,  # noqa: F811
    mgr: Manager,
    tmp_path: Path,
    how: str,
) -> None:
    """The rules file read again at run time: by a message on the NF's ring
    (answered by one, which squallctl msgs shows), or by SIGHUP."""
    rules = tmp_path / "sg.rules"
    rules.write_text(RULES.replace(f"port={HTTP_PORT}", "port=1"))
    mgr.start(ct_config(mgr, rules, per_flow=False))
    before = curl(HTTP_PORT, timeout_s=5)
    assert before.returncode == 28, f"8077 passed before the reload: {before}"

    rules.write_text(RULES)
    if how == "message":
        r = squallctl(mgr, "msg", "ct", "0", "256", "reload")
        assert r.returncode == 0, r.stderr

        def answered() -> bool:
            log = mgr.query("/squall/msgs")
            return any(
                isinstance(m, dict) and m.get("dir") == "from_nf" and m.get("type") == 256
                for m in log.values()
            )

        mgr.wait_for(answered, 20, "the NF's answer")
        said = [
            bytes.fromhex(m["data"]).decode()
            for m in mgr.query("/squall/msgs").values()
            if isinstance(m, dict) and m.get("dir") == "from_nf" and m.get("type") == 256
        ]
        assert said and said[-1].startswith("reloaded "), said
    else:
        pids = mgr.live_nf_pids()
        assert len(pids) == 1, pids
        os.kill(pids.pop(), signal.SIGHUP)
    # The NF reloads at once (message) or at its next burst (SIGHUP): retry
    # a bounded number of times.
    for _ in range(5):
        after = curl(HTTP_PORT)
        if after.returncode == 0:
            break
    assert after.returncode == 0 and after.stdout == "200", f"{after}\n{mgr.log_tail()}"
    c = counters(mgr.finish())
    assert c["drop_no_rule"] >= 1 and c["committed"] >= 1, c
