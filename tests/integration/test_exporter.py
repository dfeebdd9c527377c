"""squallctl serve as Prometheus sees it: Debian's prometheus scrapes the
exporter while a chain carries generator traffic, and its query API agrees
with the manager's own counters; promtool accepts the exposition; the
exporter reports a manager that went away and reconnects when it is back."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Manager
from squall.api import by_name
from squall.telemetry import TelemetryError
from test_apply import squallctl

SCRAPE_S = 1


def require_tool(name: str, package: str) -> str:
    """The path of a tool scripts/setup.sh installs: missing, the test fails
    (it does not skip) and says which package brings it."""
    path = shutil.which(name)
    assert path is not None, (
        f"{name} not found: install Debian's {package} package (scripts/setup.sh does)"
    )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout_s: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return bytes(r.read())


def wait_until(pred: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = pred()
            if last:
                return last
        except OSError as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")


def metric_value(text: str, name: str, labels: str = "") -> float | None:
    """The value of one sample line `name{labels} value` in an exposition, if there."""
    want = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return None


def promtool_accepts(exposition: str) -> None:
    """promtool's linter: naming, units, types and help of every metric."""
    r = subprocess.run(
        [require_tool("promtool", "prometheus"), "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


class Exporter:
    """squallctl serve as a user starts it, on a free loopback port."""

    def __init__(self, name: str, workdir: Path, *options: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"serve-{self.port}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "squall.ctl",
                    "--name",
                    name,
                    "serve",
                    "--listen",
                    f"127.0.0.1:{self.port}",
                    "--interval",
                    "0.5",
                    *options,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                # This tree's squall package, not the one the venv has installed.
                env={**os.environ, "PYTHONPATH": str(REPO / "python")},
            )
        # Every caller starts it with a manager running: wait for a first poll
        # that succeeded, not just for the server, so a first poll that failed
        # (a slow manager under ASan) is retried rather than read as no metrics.
        try:
            wait_until(lambda: b"squall_up 1" in http_get(self.url + "/metrics"), 30, "squall_up 1")
        except AssertionError as e:
            self.stop()
            raise AssertionError(
                f"{e}; serve log: {self.log.read_text(errors='replace')[-2000:]}"
            ) from None

    def metrics(self) -> str:
        return http_get(self.url + "/metrics").decode()

    def up_metrics(self) -> str:
        """An exposition from a poll that succeeded (a poll that failed, the
        manager slow to answer, has only squall_up 0 and the exporter's own)."""

        def up() -> str | None:
            text = self.metrics()
            return text if metric_value(text, "squall_up") == 1 else None

        return str(wait_until(up, 30, "squall_up 1"))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def exporter(mgr: Manager) -> Iterator[Exporter]:
    ex = Exporter(mgr.name, mgr.workdir)
    yield ex
    ex.stop()


def chain_config(mgr: Manager) -> dict[str, Any]:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {"name": "mon", "exec": "squall-nf-monitor"},
            {"name": "fwd", "exec": "squall-nf-fwd", "instances": 2},
        ],
        chains=[{"name": "web-chain", "services": ["mon", "fwd"]}],
        rules=[{"in_port": "gen", "chain": "web-chain", "out_port": "out"}],
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 0, "sizes": [64], "flows": 16}
    return cfg


class Prometheus:
    """Debian's prometheus on a free loopback port, scraping one target every second."""

    def __init__(self, target: str, workdir: Path) -> None:
        prometheus = require_tool("prometheus", "prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = workdir / "prometheus.yml"
        # a plain scrape config: the exporter's labels clash with none of
        # Prometheus's own (job, instance)
        conf.write_text(
            f"global: {{scrape_interval: {SCRAPE_S}s, evaluation_interval: {SCRAPE_S}s}}\n"
            "scrape_configs:\n"
            "  - job_name: squall\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n"
        )
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={conf}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: http_get(self.url + "/-/ready").startswith(b"Prometheus"), 30, "ready")

    def query(self, expr: str) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"query": expr})
        reply = json.loads(http_get(f"{self.url}/api/v1/query?{q}"))
        assert reply["status"] == "success", reply
        return list(reply["data"]["result"])

    def value(self, expr: str) -> float | None:
        res = self.query(expr)
        return float(res[0]["value"][1]) if res else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def check_grafana_dashboard(prom: Prometheus, exposition: str) -> None:
    """Every query of docs/grafana's dashboard parses in Prometheus and names
    only metrics the exporter has."""
    dash = json.loads((REPO / "docs" / "grafana" / "squall-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 20, exprs
    for expr in exprs:
        concrete = expr.replace("$__rate_interval", "5s")
        for var in ("$job", "$chain", "$service"):
            concrete = concrete.replace(var, ".*")
        prom.query(concrete)  # asserts status success: the query parses
        for name in re.findall(r"\bsquall_[a-z0-9_]+", expr):
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            assert f"# TYPE {base} " in exposition, f"dashboard uses {name}, not exported"


def test_prometheus_scrapes_rates_and_counters(mgr: Manager, exporter: Exporter) -> None:
    cfg = chain_config(mgr)
    mgr.start(cfg)
    prom = Prometheus(f"127.0.0.1:{exporter.port}", mgr.workdir)
    try:
        wait_until(lambda: prom.value("squall_up") == 1, 30, "prometheus sees squall_up 1")
        rate = 4000
        assert mgr.query(f"/squall/gen_rate,{rate}")["rate_pps"] == rate
        # rate() over 5 s of a steady 4,000 pps: within 25% (scrape jitter).
        expr = 'rate(squall_chain_transmitted_packets_total{chain="web-chain"}[5s])'

        def steady() -> bool:
            v = prom.value(expr)
            return v is not None and abs(v - rate) < rate * 0.25

        wait_until(steady, 40, f"{expr} near {rate}")
        port_rate = prom.value('rate(squall_port_transmitted_packets_total{port="out"}[5s])')
        assert port_rate is not None and abs(port_rate - rate) < rate * 0.25, port_rate
        sent = mgr.gen_send(0)
        mgr.wait_accounted(sent)
        st = mgr.stats()
        chains = mgr.chains()
        nfs = mgr.nfs()
        # After traffic stops, Prometheus's latest samples equal the manager's counters.
        checks = {
            "squall_received_packets_total": st["rx_pkts"],
            "squall_transmitted_packets_total": st["tx_pkts"],
            'squall_chain_transmitted_packets_total{chain="web-chain"}': chains["web-chain"][
                "tx_pkts"
            ],
            'squall_port_received_packets_total{port="gen"}': mgr.ports()["gen"]["rx_pkts"],
            'squall_nf_received_packets_total{service="mon",nf_instance="0"}': nfs["mon#0"][
                "rx_pkts"
            ],
            'squall_service_received_packets_total{service="fwd"}': sum(
                nf["rx_pkts"] for k, nf in nfs.items() if k.startswith("fwd#")
            ),
            'squall_chain_latency_seconds_count{chain="web-chain"}': chains["web-chain"][
                "lat_count"
            ],
            'squall_dropped_packets_total{cause="no_rule"}': st["drops"]["no_rule"],
        }
        for expr, want in checks.items():
            wait_until(lambda e=expr, w=want: prom.value(e) == w, 15, f"{expr} == {want}")
        # The histogram's quantile agrees with the manager's p99 within one
        # 1-2-5 bucket step (the manager's buckets are finer).
        p99 = prom.value(
            'histogram_quantile(0.99, squall_chain_latency_seconds_bucket{chain="web-chain"})'
        )
        want_p99 = chains["web-chain"]["lat_p99_ns"] / 1e9
        assert p99 is not None and want_p99 / 2.6 <= p99 <= want_p99 * 2.6, (p99, want_p99)
        # Every NF has a series with its labels, and fwd's two instances are up.
        up = prom.query('squall_nf_up{service="fwd"}')
        assert sorted(r["metric"]["nf_instance"] for r in up) == ["0", "1"], up
        assert all(r["value"][1] == "1" for r in up), up
        check_grafana_dashboard(prom, exporter.metrics())
    finally:
        prom.stop()
    # promtool's linter accepts the exposition (naming, units, types, help).
    text = exporter.metrics()
    promtool_accepts(text)
    mgr.finish()


def test_exporter_reports_a_restarted_manager(mgr: Manager, exporter: Exporter) -> None:
    cfg = chain_config(mgr)
    mgr.start(cfg)
    wait_until(lambda: metric_value(exporter.metrics(), "squall_nfs_live") == 3, 20, "3 NFs live")
    text = exporter.metrics()
    assert metric_value(text, "squall_up") == 1
    first_pid = mgr.proc.pid if mgr.proc else 0
    assert metric_value(text, "squall_manager_info", f'pid="{first_pid}"') == 1
    mgr.finish()
    wait_until(lambda: metric_value(exporter.metrics(), "squall_up") == 0, 20, "squall_up 0")
    mgr.start(cfg)
    second_pid = mgr.proc.pid if mgr.proc else 0
    assert second_pid != first_pid
    wait_until(
        lambda: f'squall_manager_info{{pid="{second_pid}"}} 1.0' in exporter.metrics(),
        30,
        "the exporter reconnected to the new manager",
    )
    text = exporter.metrics()
    assert metric_value(text, "squall_up") == 1
    assert (metric_value(text, "squall_exporter_poll_errors_total") or 0) >= 1
    events = json.loads(http_get(exporter.url + "/api/events"))
    kinds = [e["what"].split(":")[0] for e in events if e["kind"] == "manager"]
    assert kinds == ["manager up", "manager down", "manager up"], events
    mgr.finish()


def test_latency_buckets_add_up(mgr: Manager) -> None:
    """/squall/latency returns the chain's raw buckets; they sum to its count."""
    cfg = chain_config(mgr)
    cfg["generator"]["rate_pps"] = 20000
    mgr.start(cfg)
    sent = mgr.gen_send(2000)
    mgr.wait_accounted(sent)
    lat = mgr.query("/squall/latency,web-chain")
    assert lat["chain"] == "web-chain"
    assert sum(lat["counts"]) == lat["count"] == mgr.chains()["web-chain"]["lat_count"] > 0
    assert lat["counts"][0] > 0, "the page starts at the first non-empty bucket"
    to_nf = mgr.query("/squall/latency,0,to_nf")
    assert sum(to_nf["counts"]) == to_nf["count"] > 0
    with pytest.raises(TelemetryError, match="no such chain"):
        mgr.query("/squall/latency,nope")
    rules = mgr.query("/squall/rules")
    assert rules["r0"]["chain"] == "web-chain" and rules["r0"]["out_port"] == "out", rules
    mgr.finish()


def _snap(nfs: dict[str, dict[str, Any]], pid: int = 1, **kw: Any) -> Any:
    from squall.exporter import Snapshot

    base: dict[str, Any] = dict(
        time=time.time(),
        pid=pid,
        stats={},
        ports={},
        chains={},
        nfs=nfs,
        flows={},
        pools={},
        drop_causes={},
        rules=[],
        latency={},
        to_nf={},
        control=None,
    )
    base.update(kw)
    return Snapshot(**base)


def test_events_and_states_from_snapshots() -> None:
    """What the event log, the "blocked" state and "ring full" make of two
    snapshots (no manager)."""
    from squall.exporter import diff_events, ring_full, shown_state

    def nf(inst: int, pid: int, state: str = "asleep", **kw: Any) -> dict[str, Any]:
        return {
            "service": "s",
            "instance": inst,
            "pid": pid,
            "state": state,
            "wake_policy": "min",
            "wake_thresh_pkts": 1,
            "wake_timeout_us": 100,
            **kw,
        }

    a = _snap(
        {"s#0": nf(0, 10), "s#1": nf(1, 11), "s#2": nf(2, 12, "dead")},
        pools={"s": {"pooled": 1, "started": 3}},
        control={"applies": 1},
    )
    b = _snap(
        {
            "s#0": nf(0, 20, restarts=1),  # a new pid: restarted
            "s#1": nf(1, 11, "dead", exit_reason="signal 9"),
            "s#2": nf(2, 13),  # dead -> live with a new pid: restarted
            "s#3": nf(3, 14),  # new
        },
        pools={"s": {"pooled": 1, "started": 4}},
        control={"applies": 2},
    )
    b.nfs["s#0"]["wake_policy"] = "adaptive"
    first = diff_events(None, a)
    assert [e.kind for e in first] == ["manager"], first
    got = sorted((e.kind, e.what) for e in diff_events(a, b))
    kinds = [k for k, _ in got]
    assert kinds.count("restart") == 2, got
    assert ("restart", "s#0 restarted: pid 10 -> 20") in got, got
    assert any(k == "exit" and "s#1 dead" in w and "signal 9" in w for k, w in got), got
    assert [w for k, w in got if k == "start"] == ["s#3 started (pid 14)"], got
    assert any(k == "scale" and "3 -> 4" in w for k, w in got), got
    assert any(k == "config" and "adaptive" in w for k, w in got), got
    assert any(k == "config" and "applies 1 -> 2" in w for k, w in got), got
    # A new manager pid: one "manager up", no per-NF noise.
    assert [e.kind for e in diff_events(a, _snap(a.nfs, pid=2))] == ["manager"]
    # blocked: what the scaler says of the instance, not a full ring
    assert shown_state(nf(0, 10, "awake"), "blocked") == "blocked"
    assert shown_state(nf(0, 10, "asleep"), "draining") == "blocked"
    assert shown_state(nf(0, 10, "awake"), "running") == "awake"
    assert shown_state(nf(0, 10, "dead"), "blocked") == "dead"
    assert shown_state(nf(0, 10, "awake", tx_full_spins=9)) == "awake"
    old = nf(0, 10, "awake", tx_full_spins=5, ring_full_drops=0)
    assert ring_full(nf(0, 10, "awake", tx_full_spins=9), old)
    assert ring_full(nf(0, 10, "awake", ring_full_drops=1), old)
    assert not ring_full(nf(0, 10, "asleep", tx_full_spins=5), old)
    assert not ring_full(nf(0, 11, "awake", tx_full_spins=9), old), "another process"
    # config edits: a service and a chain added, a chain's hops and the rules changed
    c = _snap(
        {**b.nfs, "t#0": dict(nf(0, 30), service="t")},
        chains={"c1": {"hops": "s,t"}, "c2": {"hops": "t"}},
        rules=[{"in_port": "a", "chain": "c2"}],
        control={"applies": 2},
    )
    b2 = _snap(b.nfs, chains={"c1": {"hops": "s"}}, rules=[], control={"applies": 2})
    got = [e.what for e in diff_events(b2, c) if e.kind == "config"]
    assert got == [
        "service t added",
        "chain c2 added: t",
        "chain c1: hops s -> s,t",
        "rules changed: 0 -> 1",
    ], got
    got = [e.what for e in diff_events(c, b2) if e.kind == "config"]
    assert got == [
        "service t removed",
        "chain c2 removed",
        "chain c1: hops s,t -> s",
        "rules changed: 1 -> 0",
    ], got


def test_each_scaler_decision_is_one_event() -> None:
    """The scaler's log (/squall/scale_events) read at every poll: a decision
    becomes one "scale" event, the first time a poll sees it (no manager)."""
    from squall.exporter import diff_events

    def ev(seq: int, frm: int, to: int) -> dict[str, Any]:
        return {"seq": seq, "service": "s", "reason": "over", "from": frm, "to": to}

    a = _snap({}, scale_events=[ev(0, 1, 2)])
    b = _snap({}, scale_events=[ev(0, 1, 2), ev(1, 2, 3)])
    c = _snap({}, scale_events=[ev(1, 2, 3), ev(2, 3, 2)])  # the log moved on
    assert [e.kind for e in diff_events(None, a)] == ["manager"]
    got = [(e.kind, e.what, e.service) for e in diff_events(a, b)]
    assert got == [("scale", "s: over: 2 -> 3 instances", "s")], got
    got = [e.what for e in diff_events(b, c)]
    assert got == ["s: over: 3 -> 2 instances"], got
    assert diff_events(c, c) == []


def test_per_flow_pools_and_flows_are_exported(mgr: Manager, exporter: Exporter) -> None:
    """A per-flow service: its pool, the flow table and flow setup time are
    metrics that agree with telemetry, and promtool accepts them too."""
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "s", "exec": "squall-nf-sig", "instances": 4}],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out", "assign": "per-flow"}],
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 5000, "flows": 2, "tcp_flow_pkts": 10000}
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_created"] == 2, 30, "2 flows")
    sent = mgr.gen_send(0)
    mgr.wait_accounted(sent)
    flows, pool = mgr.query("/squall/flows"), by_name(mgr.query("/squall/pools"))["s"]

    def agrees() -> bool:
        text = exporter.metrics()
        return (
            metric_value(text, "squall_flows_created_total") == flows["flows_created"]
            and metric_value(text, "squall_pool_assigned_total", 'service="s"') == pool["assigned"]
            and metric_value(text, "squall_pool_size_nfs", 'service="s"') == pool["size"]
            and metric_value(text, "squall_flow_setup_p99_seconds") == flows["setup_ns_p99"] / 1e9
        )

    wait_until(agrees, 15, "flow and pool metrics equal to telemetry")
    promtool_accepts(exporter.metrics())
    mgr.finish(live_mbufs=False)


def test_scaling_and_messages_are_exported(
    mgr: Manager, exporter: Exporter, tmp_path: Path
) -> None:
    """A scaled service told by hand to 3 instances and back to 1: its
    instances by state and the scaler's counts are metrics equal to
    /squall/scale, the BLOCK messages it sent are squall_msgs_sent_total, and
    each decision is one "scale" event in the page's log."""
    from test_scaling import scale_of, scaled_config, set_rate, stop_traffic, wait_running

    mgr.start(scaled_config(mgr, tmp_path / "flows"))
    # decisions before the exporter's first look at a manager are its past
    wait_until(lambda: metric_value(exporter.metrics(), "squall_up") == 1, 15, "a first poll")
    set_rate(mgr, 5000)
    assert squallctl(mgr, "scale", "s", "3").returncode == 0
    wait_running(mgr, lambda n: n == 3, "3 instances")
    assert squallctl(mgr, "scale", "s", "1").returncode == 0
    wait_running(mgr, lambda n: n == 1, "1 instance running")
    svc = 'service="s"'

    def agrees() -> bool:
        st, scale, msgs = scale_of(mgr), mgr.query("/squall/scale"), mgr.query("/squall/msgs")
        text = exporter.metrics()
        return (
            metric_value(text, "squall_scale_running_nfs", svc) == st["running"] == 1
            and metric_value(text, "squall_scale_blocked_nfs", svc) == st["blocked"] == 2
            and metric_value(text, "squall_scale_spawns_total", svc) == st["spawns"] == 2
            and metric_value(text, "squall_scale_blocks_total", svc) == st["blocks"] == 2
            and metric_value(text, "squall_scale_max_instances", svc) == 4
            and metric_value(text, "squall_scale_events_total") == scale["events"]
            and metric_value(text, "squall_msgs_sent_total") == msgs["sent"] >= 2
            and (metric_value(text, "squall_service_handler_seconds_total", svc) or 0) > 0
            and (metric_value(text, "squall_generator_sent_packets_total") or 0) > 0
        )

    wait_until(agrees, 15, "scaler and message metrics equal to telemetry")
    promtool_accepts(exporter.metrics())

    # The page's "blocked" is the scaler's: exactly the instances it told to
    # block (blocked, or draining their last flows), whatever their rings do.
    def blocked_match() -> bool:
        told = mgr.query("/squall/scale_nfs,s")
        want = sorted(
            f"s#{v['instance']}"
            for v in told.values()
            if isinstance(v, dict) and v["state"] in ("blocked", "draining")
        )
        page = json.loads(http_get(exporter.url + "/api/nfs?service=s&state=blocked"))
        got = sorted(str(r["name"]) for r in page["rows"])
        return (
            len(want) == 2
            and got == want
            and all(r["scaler_state"] in ("blocked", "draining") for r in page["rows"])
        )

    wait_until(blocked_match, 15, "the page's blocked NFs are the scaler's")
    summ = json.loads(http_get(exporter.url + "/api/summary"))
    states = next(v["states"] for v in summ["services"] if v["name"] == "s")
    assert states.get("blocked") == 2, states
    decisions = [
        e["what"]
        for e in json.loads(http_get(exporter.url + "/api/events"))
        if e["kind"] == "scale" and e["what"].endswith(" instances")
    ]
    # each once: the hand's two, and none the scaler logged twice
    assert [w for w in decisions if w.endswith("1 -> 3 instances")] != [], decisions
    assert [w for w in decisions if w.endswith("3 -> 1 instances")] != [], decisions
    assert len(decisions) <= int(mgr.query("/squall/scale")["events"]), decisions
    stop_traffic(mgr)
    mgr.finish()


# As exporter_scale's largest point (bench/experiments/exporter_scale.py):
# 10,000 idle NFs, 64-slot rings, a 256 MiB region. Its published run: an
# 8.9 MB exposition, 0.38 MB gzipped; the bounds leave twice that.
N_SCALE = 10_000
SCALE_PLAIN_MAX_BYTES = 18_000_000
SCALE_GZIP_MAX_BYTES = 800_000
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def test_a_10000_nf_manager_is_scraped_over_http(mgr: Manager, exporter: Exporter) -> None:
    """Issue 19: a manager with 10,000 NFs. A real HTTP GET of /metrics, plain
    and as Prometheus asks (OpenMetrics, gzip), completes (each within a 30 s
    client timeout, three times Prometheus's default scrape timeout) with a
    series for every NF, under the size bounds."""
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {
                "name": "nf",
                "exec": "squall-nf-noop",
                "instances": N_SCALE,
                "ring_slots": 64,
                "spin_us": 0,
            }
        ],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
        region_mb=256,
    )
    mgr.start(cfg)

    def plain() -> bytes | None:
        body = http_get(exporter.url + "/metrics", timeout_s=30)
        live = metric_value(body.decode(), "squall_nfs_live")
        return body if live == N_SCALE else None

    body = wait_until(plain, 90, f"an exposition with {N_SCALE} NFs live")
    nf_up = [ln for ln in body.splitlines() if ln.startswith(b"squall_nf_up{")]
    assert len(nf_up) == N_SCALE, len(nf_up)
    assert len(body) < SCALE_PLAIN_MAX_BYTES, len(body)
    req = urllib.request.Request(
        exporter.url + "/metrics",
        headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["Content-Encoding"] == "gzip", dict(r.headers)
        assert r.headers["Content-Type"].startswith("application/openmetrics-text"), dict(r.headers)
        packed = bytes(r.read())
    assert len(packed) < SCALE_GZIP_MAX_BYTES, len(packed)
    text = gzip.decompress(packed)
    assert text.rstrip().endswith(b"# EOF"), text[-100:]
    assert sum(1 for ln in text.splitlines() if ln.startswith(b"squall_nf_up{")) == N_SCALE
    mgr.finish()
