"""Real TCP traffic between the test namespaces (scripts/netns.sh): ns client
(10.77.0.1, sq-c0) and ns server (10.77.0.2, sq-s0), whose only path is
through the root-namespace ends sq-c1 and sq-s1 that the system under test
(Squall or a peer) joins. Servers (iperf3, nginx or python's http.server)
run in ns server; clients (iperf3, wrk) in ns client. Every command has a
timeout; every process started here is stopped here.

Those names are global: tests use them under flock /tmp/squall-netns.lock.
A long run can take a set of its own, passing ``hosts=`` (a :class:`Hosts`,
e.g. :data:`SOAK`) to every call here; the default is the set above.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squall.bench.manager import BenchError
from squall.bench.paths import NETNS_SH

CLIENT_NS, SERVER_NS = "client", "server"
CLIENT_IP, SERVER_IP = "10.77.0.1", "10.77.0.2"
IPERF_PORT = 5201
HTTP_PORT = 8080
NETNS_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Hosts:
    """A set of the two namespaces (scripts/netns.sh's SQUALL_NETNS_* variables)."""

    client_ns: str = CLIENT_NS
    server_ns: str = SERVER_NS
    dev: str = "sq"  # devices DEV-c0 (in client_ns), DEV-c1 (root), DEV-s0, DEV-s1
    net: str = "10.77.0"  # a /24: client .1, server .2

    @property
    def client_ip(self) -> str:
        return f"{self.net}.1"

    @property
    def server_ip(self) -> str:
        return f"{self.net}.2"

    @property
    def client_end(self) -> str:
        """The root-namespace end the system under test joins, client side."""
        return f"{self.dev}-c1"

    @property
    def server_end(self) -> str:
        return f"{self.dev}-s1"

    def env_vars(self) -> dict[str, str]:
        """What scripts/netns.sh reads to make this set."""
        return {
            "SQUALL_NETNS_CLIENT": self.client_ns,
            "SQUALL_NETNS_SERVER": self.server_ns,
            "SQUALL_NETNS_DEV": self.dev,
            "SQUALL_NETNS_NET": self.net,
        }

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.env_vars()}


DEFAULT = Hosts()
# The soak's own (bench/experiments/soak.py): an hour in the tests' namespaces
# would hold their lock that long.
SOAK = Hosts("sqsoak-c", "sqsoak-s", "sqk", "10.78.0")
SOAK_QUICK = Hosts("sqsoakq-c", "sqsoakq-s", "sqq", "10.79.0")  # its --quick, beside a full run


def netns(action: str, hosts: Hosts = DEFAULT) -> str:
    """scripts/netns.sh up|down; raises BenchError with its output on failure."""
    try:
        r = subprocess.run(
            [str(NETNS_SH), action],
            capture_output=True,
            text=True,
            timeout=NETNS_TIMEOUT_S,
            check=False,
            env=hosts.env(),
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"{NETNS_SH} {action}: timed out after {NETNS_TIMEOUT_S:g} s") from None
    if r.returncode != 0:
        raise BenchError(f"{NETNS_SH} {action} exited {r.returncode}: {r.stdout}{r.stderr}")
    return r.stdout


def in_ns(ns: str, cmd: Sequence[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def missing_tools(tools: Sequence[str]) -> list[str]:
    return [t for t in tools if shutil.which(t) is None]


class Background:
    """A process in a namespace, stopped (TERM, then KILL) on stop()."""

    def __init__(self, ns: str, cmd: Sequence[str], log: Path) -> None:
        self.cmd = in_ns(ns, cmd)
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def restart(self) -> None:
        """Stop it and start the same command again (its log appended to)."""
        self.stop()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-500:]
        except OSError:
            return ""


def wait_listening(ns: str, port: int, proc: Background, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        ss = subprocess.run(
            in_ns(ns, ["ss", "-Hltn", f"sport = :{port}"]),
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        if ss.stdout.strip():
            return
        if not proc.alive():
            raise BenchError(f"{' '.join(proc.cmd)} exited: {proc.tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"nothing listens on {ns}:{port} after {timeout_s:g} s")
        time.sleep(0.1)


def wait_path(timeout_s: float = 15.0, hosts: Hosts = DEFAULT) -> float:
    """Ping server from client until one answer comes back; the seconds it took."""
    t0 = time.monotonic()
    while True:
        r = subprocess.run(
            in_ns(hosts.client_ns, ["ping", "-c", "1", "-W", "1", hosts.server_ip]),
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        if r.returncode == 0:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise BenchError(f"no ping reply from {hosts.server_ip} within {timeout_s:g} s")


def _ns_hint() -> str:
    return (
        " (was scripts/netns.sh run meanwhile by someone else? it kills what runs in "
        "the namespaces)"
    )


# The iperf3 server of each server namespace, for iperf3() to restart when
# it stays busy with a test whose client is gone.
_IPERF_SERVERS: dict[str, Background] = {}


def start_iperf3_server(workdir: Path, hosts: Hosts = DEFAULT) -> Background:
    srv = Background(
        hosts.server_ns,
        ["iperf3", "-s", "-B", hosts.server_ip, "-p", str(IPERF_PORT)],
        workdir / "iperf3-server.log",
    )
    wait_listening(hosts.server_ns, IPERF_PORT, srv)
    _IPERF_SERVERS[hosts.server_ns] = srv
    return srv


NGINX_CONF = """worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/tmp;
  proxy_temp_path {prefix}/tmp;
  fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp;
  scgi_temp_path {prefix}/tmp;
  keepalive_requests 1000000;
  server {{
    listen {ip}:{port};
    root {prefix}/www;
  }}
}}
"""


def start_http_server(
    workdir: Path, body_bytes: int, hosts: Hosts = DEFAULT
) -> tuple[Background, str]:
    """nginx (one worker) in ns server serving one file of body_bytes, else
    python's http.server. Returns the process and the server's name."""
    www = workdir / "www"
    www.mkdir(parents=True, exist_ok=True)
    (www / "blob.bin").write_bytes(bytes(body_bytes))
    (workdir / "tmp").mkdir(exist_ok=True)
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx:
        conf = workdir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(prefix=workdir, ip=hosts.server_ip, port=HTTP_PORT))
        srv = Background(
            hosts.server_ns, [nginx, "-c", str(conf), "-p", str(workdir)], workdir / "nginx.log"
        )
        name = "nginx (1 worker)"
    else:
        cmd = ["python3", "-m", "http.server", str(HTTP_PORT), "--bind", hosts.server_ip,
               "--directory", str(www)]  # fmt: skip
        srv = Background(hosts.server_ns, cmd, workdir / "http.log")
        name = "python3 -m http.server"
    wait_listening(hosts.server_ns, HTTP_PORT, srv)
    return srv, name


IPERF_BUSY_TRIES = 10
# Busy this many tries: the last test's client is gone (its IPERF_DONE lost
# when a manager stopped right after the client returned, and the server
# waits for it with no timeout), so the server is started anew.
IPERF_BUSY_RESTART = 4


def iperf3(
    seconds: float, streams: int = 1, reverse: bool = False, hosts: Hosts = DEFAULT
) -> tuple[dict[str, Any], list[str]]:
    """One iperf3 TCP run client -> server (reverse: server -> client).
    Returns (figures, command)."""
    cmd = ["iperf3", "-c", hosts.server_ip, "-p", str(IPERF_PORT), "-t", f"{seconds:g}", "-J",
           "-P", str(streams), *(["-R"] if reverse else [])]  # fmt: skip
    full = in_ns(hosts.client_ns, cmd)
    # The server takes one test at a time and may still be closing the last
    # one (its end exchange cut short when a manager stopped right after the
    # client returned): "busy" is worth a bounded wait, not a failed run.
    for tries in range(1, IPERF_BUSY_TRIES + 1):
        r = subprocess.run(full, capture_output=True, text=True, timeout=seconds + 30, check=False)
        try:
            data = json.loads(r.stdout)
        except json.JSONDecodeError:
            raise BenchError(
                f"iperf3 exited {r.returncode}: {r.stderr.strip() or r.stdout[:300]}"
            ) from None
        if "busy" not in str(data.get("error", "")):
            break
        srv = _IPERF_SERVERS.get(hosts.server_ns)
        if tries == IPERF_BUSY_RESTART and srv is not None and srv.alive():
            srv.restart()
            wait_listening(hosts.server_ns, IPERF_PORT, srv)
        else:
            time.sleep(1.0)
    if "error" in data:
        raise BenchError(f"iperf3: {data['error']}{_ns_hint()}")
    end = data["end"]
    return {
        "gbps": float(end["sum_received"]["bits_per_second"]) / 1e9,
        "retransmits": int(end["sum_sent"].get("retransmits", 0)),
        "seconds": float(end["sum_received"]["seconds"]),
    }, full


_WRK_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def _wrk_us(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", text.strip())
    if m is None:
        return float("nan")
    return float(m.group(1)) * _WRK_UNITS[m.group(2)]


def wrk(
    seconds: float, connections: int = 16, threads: int = 1, hosts: Hosts = DEFAULT
) -> tuple[dict[str, Any], list[str]]:
    """wrk against the HTTP server; requests/s and latency percentiles (us)."""
    url = f"http://{hosts.server_ip}:{HTTP_PORT}/blob.bin"
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--latency",
        url,
    ]
    full = in_ns(hosts.client_ns, cmd)
    r = subprocess.run(full, capture_output=True, text=True, timeout=seconds + 30, check=False)
    if r.returncode != 0:
        raise BenchError(f"wrk exited {r.returncode}: {r.stderr.strip()}{_ns_hint()}")
    out = r.stdout
    rps = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    if rps is None:
        raise BenchError(f"wrk: no Requests/sec in its output: {out[-300:]}")
    lat = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", out, re.M))
    errors = re.search(r"Socket errors: (.*)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(rps.group(1)),
        "p50_us": _wrk_us(lat.get("50", "")),
        "p99_us": _wrk_us(lat.get("99", "")),
        "socket_errors": errors.group(1) if errors else "",
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
    }, full


def _ms_to_us(text: str | None) -> float:
    return float(text) * 1e3 if text is not None else float("nan")


def ab(
    requests: int, concurrency: int, timeout_s: float = 120.0, hosts: Hosts = DEFAULT
) -> tuple[dict[str, Any], list[str]]:
    """apache bench (a new connection per request, as seed 000 §6.2 used it)
    against the HTTP server: requests/s, mean and p99 latency (us), failures."""
    url = f"http://{hosts.server_ip}:{HTTP_PORT}/blob.bin"
    cmd = ["ab", "-q", "-s", "20", "-n", str(requests), "-c", str(concurrency), url]
    full = in_ns(hosts.client_ns, cmd)
    r = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s, check=False)
    out = r.stdout
    rps = re.search(r"Requests per second:\s+([0-9.]+)", out)
    if r.returncode != 0 or rps is None:
        raise BenchError(f"ab exited {r.returncode}: {r.stderr.strip()[-300:]}{_ns_hint()}")
    mean = re.search(r"Time per request:\s+([0-9.]+) \[ms\] \(mean\)", out)
    p = dict(re.findall(r"^\s+(50|99)%\s+(\d+)", out, re.M))
    complete = re.search(r"Complete requests:\s+(\d+)", out)
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    return {
        "rps": float(rps.group(1)),
        "mean_us": _ms_to_us(mean.group(1) if mean else None),
        "p50_us": _ms_to_us(p.get("50")),
        "p99_us": _ms_to_us(p.get("99")),
        "complete": int(complete.group(1)) if complete else 0,
        "failed": int(failed.group(1)) if failed else requests,
    }, full


def tcp_counters(ns: str) -> dict[str, int]:
    """The namespace's TCP counters (/proc/net/snmp Tcp and /proc/net/netstat
    TcpExt): segments in and out, retransmits, out-of-order queued."""
    out: dict[str, int] = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        r = subprocess.run(in_ns(ns, ["cat", path]), capture_output=True, text=True,
                           timeout=10, check=True)  # fmt: skip
        lines = r.stdout.splitlines()
        for names, values in zip(lines[::2], lines[1::2], strict=False):
            kind, *keys = names.split()
            vals = values.split()[1:]
            if kind in ("Tcp:", "TcpExt:"):
                out.update({k: int(v) for k, v in zip(keys, vals, strict=False)})
    return out
