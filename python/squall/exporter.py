"""squallctl serve: a Prometheus exporter and a live web page for one squall-mgr.

The manager serves no HTTP: this process reads its DPDK telemetry socket (as
VPP's exporter reads the stats segment) once per interval into a snapshot,
and every reader is served from the latest snapshot:

- ``/metrics``: Prometheus exposition (prometheus_client), rendered once per
  snapshot however many scrapers ask;
- ``/``: the dashboard (``squall/web/``), fed by ``/api/stream`` (server-sent
  events, one summary per snapshot) and ``/api/nfs`` (NFs, searched and paged
  on the server so 10,000 NFs cost the browser one page);
- ``/api/summary``, ``/api/events``: the same data as JSON (``/?snapshot=1``
  renders the page once from ``/api/summary``, no stream: for screenshots).

Events (NF start, exit, restart, pool growth, config changes, the manager
going down and coming back) are derived by diffing successive snapshots: the
manager keeps no event feed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from squall import serve_cli
from squall.api import ControlApi, by_name
from squall.telemetry import Telemetry, TelemetryError

DEFAULT_LISTEN = serve_cli.DEFAULT_LISTEN
parse_listen = serve_cli.parse_listen
WEB_DIR = Path(__file__).parent / "web"
LIVE_STATES = ("spawned", "awake", "asleep", "waking")
# Prometheus histogram bounds (seconds) for the per-chain latency: 1-2-5 steps
# from 1 us to 10 s. The manager's buckets are finer (1/16 of an octave); each
# is counted under the first bound at or above its upper edge, so a bucket
# never claims less latency than it holds.
LATENCY_BOUNDS_S = [m * 10.0**e for e in range(-6, 1) for m in (1, 2, 5)] + [10.0]
MAX_EVENTS = 1000
NF_PAGE_MAX = 500


# ----------------------------------------------------------------- snapshots


def bucket_upper_tsc(b: int, sub_bits: int = 4) -> int:
    """Upper edge (exclusive) of the manager's latency bucket b (mgr/latency.c)."""
    if b < (1 << sub_bits):
        return b + 1
    msb, sub = b >> sub_bits, b & ((1 << sub_bits) - 1)
    return ((1 << sub_bits) + sub + 1) << (msb - sub_bits)


@dataclass
class Hist:
    """A chain's latency histogram as the manager holds it: non-empty fine buckets."""

    tsc_hz: int
    sum_tsc: int
    buckets: dict[int, int]  # bucket index -> count
    sub_bits: int = 4

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    @property
    def sum_s(self) -> float:
        return self.sum_tsc / self.tsc_hz if self.tsc_hz else 0.0

    def fine(self) -> list[tuple[float, int]]:
        """(upper edge in seconds, count) of every non-empty bucket, in order."""
        hz = self.tsc_hz or 1
        return [
            (bucket_upper_tsc(b, self.sub_bits) / hz, n) for b, n in sorted(self.buckets.items())
        ]

    def cumulative(self, bounds: list[float]) -> list[tuple[str, int]]:
        """Prometheus buckets: (le, count of observations <= le), +Inf last."""
        counts = [0] * (len(bounds) + 1)
        for upper_s, n in self.fine():
            i = next((i for i, le in enumerate(bounds) if upper_s <= le * (1 + 1e-9)), len(bounds))
            counts[i] += n
        out, acc = [], 0
        for le, n in zip([*(f"{b:g}" for b in bounds), "+Inf"], counts, strict=True):
            acc += n
            out.append((le, acc))
        return out


@dataclass
class Snapshot:
    """Everything read from the manager in one poll."""

    time: float
    pid: int
    stats: dict[str, Any]
    ports: dict[str, dict[str, Any]]
    chains: dict[str, dict[str, Any]]
    nfs: dict[str, dict[str, Any]]  # "<service>#<instance>"
    flows: dict[str, Any]
    pools: dict[str, dict[str, Any]]
    drop_causes: dict[str, str]
    rules: list[dict[str, Any]]
    latency: dict[str, Hist]  # chain -> rx-to-tx
    to_nf: dict[str, Hist]  # chain -> rx to the first NF
    control: dict[str, Any] | None
    poll_s: float = 0.0
    cgroups: dict[str, dict[str, Any]] = field(default_factory=dict)  # service -> group
    scale: dict[str, Any] | None = None  # /squall/scale: scaled services and totals
    scale_events: list[dict[str, Any]] = field(default_factory=list)  # the last decisions
    msgs: dict[str, Any] | None = None  # /squall/msgs: message totals
    captures: dict[str, Any] | None = None  # /squall/captures: each capture's counters
    gen: dict[str, Any] | None = None  # /squall/gen: the traffic generator, if configured
    # "<service>#<instance>" -> the scaler's state of a scaled service's
    # instance (/squall/scale_nfs: running, blocked, draining, starting, down)
    scaler_states: dict[str, str] = field(default_factory=dict)


def _read_hist(tm: Telemetry, chain: str, which: str) -> Hist | None:
    """A chain's histogram over /squall/latency (None on a manager without it)."""
    suffix = ",to_nf" if which == "to_nf" else ""
    buckets: dict[int, int] = {}
    first: int | None = None
    reply: Any = None
    for _ in range(8):  # 1024 buckets, 512 a page
        reply = tm.query_raw(f"/squall/latency,{chain}{suffix}" + (f",{first}" if first else ""))
        if not isinstance(reply, dict) or "counts" not in reply:
            return None
        start = int(reply.get("first", 0))
        for i, n in enumerate(reply["counts"]):
            if n:
                buckets[start + i] = int(n)
        nxt = reply.get("next")
        if not isinstance(nxt, int):
            break
        first = nxt
    return Hist(
        tsc_hz=int(reply.get("tsc_hz", 0)),
        sum_tsc=int(reply.get("sum_tsc", 0)),
        buckets=buckets,
        sub_bits=int(reply.get("sub_bits", 4)),
    )


def _optional(tm: Telemetry, cmd: str) -> dict[str, Any] | None:
    """A command the manager may not have (older, or built without it)."""
    value = tm.query_raw(cmd)
    if not isinstance(value, dict) or set(value) == {"error"}:
        return None
    return value


def _scaler_states(tm: Telemetry, scale: dict[str, Any] | None) -> dict[str, str]:
    """Each scaled service's instances as the scaler sees them (its first
    250 per service, as /squall/scale_nfs gives)."""
    out: dict[str, str] = {}
    for svc, row in (scale or {}).items():
        if not isinstance(row, dict):
            continue
        reply = _optional(tm, f"/squall/scale_nfs,{svc}") or {}
        for inst in reply.values():
            if isinstance(inst, dict) and "instance" in inst:
                out[f"{svc}#{inst['instance']}"] = str(inst.get("state", ""))
    return out


def read_snapshot(tm: Telemetry) -> Snapshot:
    """One poll of every command; raises TelemetryError if the manager goes away."""
    t0 = time.monotonic()
    stats = tm.query("/squall/stats")
    ports = by_name(tm.query("/squall/ports"))
    chains = by_name(tm.query("/squall/chains"))
    nfs = ControlApi(tm).nfs_dict()
    rules: list[dict[str, Any]] = []
    rnext: int | None = 0
    while rnext is not None:
        rpage = _optional(tm, "/squall/rules" + (f",{rnext}" if rnext else ""))
        if rpage is None:
            break
        rules += sorted(
            (v for v in rpage.values() if isinstance(v, dict)), key=lambda r: int(r.get("id", 0))
        )
        n = rpage.get("next")
        rnext = n if isinstance(n, int) and n > rnext else None
    scale = _optional(tm, "/squall/scale")
    latency: dict[str, Hist] = {}
    to_nf: dict[str, Hist] = {}
    for name in chains:
        for which, into in (("lat", latency), ("to_nf", to_nf)):
            h = _read_hist(tm, name, which)
            if h is not None:
                into[name] = h
    return Snapshot(
        time=time.time(),
        pid=tm.greeting.pid,
        stats=stats,
        ports=ports,
        chains=chains,
        nfs=nfs,
        flows=tm.query("/squall/flows"),
        pools=by_name(tm.query("/squall/pools")),
        drop_causes={str(k): str(v) for k, v in tm.query("/squall/drop_causes").items()},
        rules=rules,
        latency=latency,
        to_nf=to_nf,
        control=_optional(tm, "/squall/control"),
        poll_s=time.monotonic() - t0,
        cgroups=by_name(_optional(tm, "/squall/cgroups") or {}),
        scale=scale,
        scaler_states=_scaler_states(tm, scale),
        scale_events=sorted(
            (
                v
                for v in (_optional(tm, "/squall/scale_events") or {}).values()
                if isinstance(v, dict)
            ),
            key=lambda e: int(e.get("seq", 0)),
        ),
        msgs=_optional(tm, "/squall/msgs"),
        captures=_optional(tm, "/squall/captures"),
        gen=_optional(tm, "/squall/gen"),
    )


# ------------------------------------------------------------------- events


@dataclass
class Event:
    time: float
    kind: str  # start|exit|restart|scale|config|manager
    what: str
    service: str = ""
    instance: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "kind": self.kind,
            "what": self.what,
            "service": self.service,
            "instance": self.instance,
        }


def _live(state: str) -> bool:
    return state in LIVE_STATES


def shown_state(nf: dict[str, Any], scaler_state: str | None = None) -> str:
    """The dashboard's state of an NF: the manager's, or "blocked" for a live
    instance of a scaled service that the scaler told to block (its state
    blocked, or draining while its last flows end)."""
    state = str(nf.get("state", ""))
    if _live(state) and scaler_state in ("blocked", "draining"):
        return "blocked"
    return state


def ring_full(nf: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Since the last poll the NF waited on its full tx ring, or packets for
    it were dropped because its rx ring was full (shown as "ring full", not a
    state: the NF runs, it is behind)."""
    return (
        old is not None
        and old.get("pid") == nf.get("pid")
        and (
            _n(nf, "tx_full_spins") > _n(old, "tx_full_spins")
            or _n(nf, "ring_full_drops") > _n(old, "ring_full_drops")
        )
    )


def _config_events(prev: Snapshot, cur: Snapshot, now: float) -> list[Event]:
    """Services, chains and rules that changed (apply, squallctl service or
    chain or rule edits), and each counted apply or config swap."""
    out: list[Event] = []

    def services(snap: Snapshot) -> set[str]:
        return {str(nf.get("service", "")) for nf in snap.nfs.values()}

    old_svcs, new_svcs = services(prev), services(cur)
    for svc in sorted(new_svcs - old_svcs):
        out.append(Event(now, "config", f"service {svc} added", svc))
    for svc in sorted(old_svcs - new_svcs):
        out.append(Event(now, "config", f"service {svc} removed", svc))
    for name in sorted(set(cur.chains) - set(prev.chains)):
        out.append(Event(now, "config", f"chain {name} added: {cur.chains[name].get('hops', '')}"))
    for name in sorted(set(prev.chains) - set(cur.chains)):
        out.append(Event(now, "config", f"chain {name} removed"))
    for name in sorted(set(cur.chains) & set(prev.chains)):
        hops, ohops = cur.chains[name].get("hops", ""), prev.chains[name].get("hops", "")
        if hops != ohops:
            out.append(Event(now, "config", f"chain {name}: hops {ohops} -> {hops}"))

    def rule_keys(snap: Snapshot) -> list[tuple[str, ...]]:
        keys = ("in_port", "dst_mac", "chain", "out_port", "assign")
        return [tuple(str(r.get(k, "")) for k in keys) for r in snap.rules]

    if rule_keys(prev) != rule_keys(cur):
        out.append(Event(now, "config", f"rules changed: {len(prev.rules)} -> {len(cur.rules)}"))
    if cur.control is not None and prev.control is not None:
        for k in ("applies", "config_swaps"):
            if cur.control.get(k, 0) != prev.control.get(k, 0):
                out.append(
                    Event(
                        now,
                        "config",
                        f"config change applied ({k} {prev.control.get(k, 0)} -> "
                        f"{cur.control.get(k, 0)})",
                    )
                )
    return out


def diff_events(prev: Snapshot | None, cur: Snapshot) -> list[Event]:
    """What changed between two snapshots, as events."""
    now = cur.time
    out: list[Event] = []
    if prev is None or prev.pid != cur.pid:
        out.append(Event(now, "manager", f"manager up: pid {cur.pid}, {len(cur.nfs):,} NFs"))
        prev_nfs: dict[str, dict[str, Any]] = {}
    else:
        prev_nfs = prev.nfs
    first = prev is None or prev.pid != cur.pid
    wake_seen: set[str] = set()
    for key, nf in cur.nfs.items():
        svc, inst = str(nf.get("service", "")), int(nf.get("instance", 0))
        state, pid = str(nf.get("state", "")), int(nf.get("pid", 0))
        old = prev_nfs.get(key)
        if old is None:
            if not first and _live(state):
                out.append(Event(now, "start", f"{key} started (pid {pid})", svc, inst))
            continue
        ostate, opid = str(old.get("state", "")), int(old.get("pid", 0))
        restarts, orestarts = int(nf.get("restarts", 0)), int(old.get("restarts", 0))
        if (opid and pid and pid != opid) or restarts > orestarts:
            out.append(Event(now, "restart", f"{key} restarted: pid {opid} -> {pid}", svc, inst))
        elif _live(ostate) and not _live(state):
            why = nf.get("exit_reason")
            out.append(
                Event(
                    now,
                    "exit",
                    f"{key} {state} (pid {opid}{', ' + str(why) if why else ''})",
                    svc,
                    inst,
                )
            )
        elif not _live(ostate) and _live(state):
            out.append(Event(now, "start", f"{key} started (pid {pid})", svc, inst))
        if svc not in wake_seen:
            wake_seen.add(svc)
            wp = (nf.get("wake_policy"), nf.get("wake_thresh_pkts"), nf.get("wake_timeout_us"))
            owp = (old.get("wake_policy"), old.get("wake_thresh_pkts"), old.get("wake_timeout_us"))
            if wp != owp and None not in wp:
                out.append(
                    Event(
                        now,
                        "config",
                        f"{svc}: wake policy {wp[0]} {wp[1]} pkts / {wp[2]} us "
                        f"(was {owp[0]} {owp[1]} / {owp[2]})",
                        svc,
                    )
                )
    if prev is not None and not first:
        for svc, pool in cur.pools.items():
            old_pool = prev.pools.get(svc, {})
            if pool.get("pooled") and pool.get("started", 0) != old_pool.get("started", 0):
                out.append(
                    Event(
                        now,
                        "scale",
                        f"{svc}: pool {old_pool.get('started', 0)} -> {pool.get('started', 0)} NFs",
                        svc,
                    )
                )
        # the scaler's own decisions, each once (by its sequence number)
        seen = max((int(e.get("seq", 0)) for e in prev.scale_events), default=-1)
        for e in cur.scale_events:
            if int(e.get("seq", 0)) > seen:
                svc = str(e.get("service", ""))
                out.append(
                    Event(
                        now,
                        "scale",
                        f"{svc}: {e.get('reason', '')}: {e.get('from', 0)} -> "
                        f"{e.get('to', 0)} instances",
                        svc,
                    )
                )
        out += _config_events(prev, cur, now)
    return out


# -------------------------------------------------------------------- poller


def _rate(cur: float, old: float, dt: float) -> float:
    return max(0.0, (cur - old) / dt) if dt > 0 else 0.0


@dataclass
class State:
    """What the poller publishes: the latest snapshot and what follows from it."""

    seq: int = 0
    up: bool = False
    error: str = ""
    snap: Snapshot | None = None
    prev: Snapshot | None = None
    polls: int = 0
    poll_errors: int = 0
    events: deque[Event] = field(default_factory=lambda: deque(maxlen=MAX_EVENTS))
    events_total: dict[str, int] = field(default_factory=dict)


class Poller:
    """Reads the manager every interval; reconnects when it goes away.

    With many NFs a poll can take longer than the interval: the poller then
    waits as long as the poll took, so it never keeps the manager's telemetry
    thread busy more than half the time.
    """

    def __init__(
        self, name: str | None = None, path: str | None = None, interval_s: float = 1.0
    ) -> None:
        self.name, self.path, self.interval_s = name, path, interval_s
        self.state = State()
        self.cond = threading.Condition()
        self._tm: Telemetry | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="squall-poller", daemon=True)
        self._cache: dict[tuple[int, str, bool], bytes] = {}
        self.nf_detail = True

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():  # (a poller polled by hand was never started)
            self._thread.join(timeout=10)
        if self._tm is not None:
            self._tm.close()

    def poll_once(self) -> None:
        try:
            if self._tm is None:
                self._tm = Telemetry.connect(name=self.name, path=self.path)
            snap = read_snapshot(self._tm)
        except TelemetryError as e:
            if self._tm is not None:
                self._tm.close()
                self._tm = None
            with self.cond:
                st = self.state
                st.poll_errors += 1
                st.polls += 1
                if st.up:
                    self._add_events([Event(time.time(), "manager", f"manager down: {e}")])
                if str(e) != st.error:  # (once per cause, not once per poll)
                    print(f"squallctl serve: poll failed: {e}", file=sys.stderr, flush=True)
                st.up, st.error = False, str(e)
                st.seq += 1
                self.cond.notify_all()
            return
        with self.cond:
            st = self.state
            self._add_events(diff_events(st.snap, snap))
            st.prev, st.snap = st.snap, snap
            if st.prev is not None and st.prev.pid != snap.pid:
                st.prev = None  # a new manager: rates restart
            st.up, st.error = True, ""
            st.polls += 1
            st.seq += 1
            self._cache.clear()
            self.cond.notify_all()

    def _add_events(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.state.events.append(ev)
            self.state.events_total[ev.kind] = self.state.events_total.get(ev.kind, 0) + 1

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.poll_once()
            took = time.monotonic() - t0
            self._stop.wait(max(self.interval_s - took, took, 0.05))

    def wait_next(self, seq: int, timeout_s: float) -> int:
        """Block until a snapshot newer than seq (or timeout); return the current seq."""
        with self.cond:
            self.cond.wait_for(lambda: self.state.seq != seq, timeout=timeout_s)
            return self.state.seq

    def exposition(self, accept: str | None, gzipped: bool = False) -> tuple[bytes, str]:
        """/metrics and its content type, rendered (and gzipped) once per snapshot."""
        encoder, content_type = choose_encoder(accept or "")
        with self.cond:
            seq = self.state.seq
            body = self._cache.get((seq, content_type, gzipped))
        if body is None:
            plain = self._cache.get((seq, content_type, False))
            if plain is None:
                registry = CollectorRegistry(auto_describe=False)
                registry.register(SquallCollector(self))
                plain = encoder(registry)
            # Level 1: 8 MB of 10,000 NFs' text shrinks ~15x in a fraction of the render.
            body = gzip.compress(plain, compresslevel=1) if gzipped else plain
            with self.cond:
                if self.state.seq == seq:
                    self._cache[(seq, content_type, False)] = plain
                    self._cache[(seq, content_type, gzipped)] = body
        return body, content_type


# ------------------------------------------------------------------- metrics


# A table's telemetry key, metric name, help, scale, and "counter" or "g" (gauge).
MetricSpec = tuple[str, str, str, float, str]

# /squall/scale per service
SCALE_METRICS: list[MetricSpec] = [
    ("instances", "squall_scale_instances", "Instances that take packets", 1, "g"),
    ("running", "squall_scale_running_nfs", "Instances running (not blocked)", 1, "g"),
    ("blocked", "squall_scale_blocked_nfs", "Instances told to block", 1, "g"),
    ("starting", "squall_scale_starting_nfs", "Instances starting", 1, "g"),
    ("min", "squall_scale_min_instances", "scale.min", 1, "g"),
    ("max", "squall_scale_max_instances", "scale.max", 1, "g"),
    ("load_pct", "squall_scale_load_ratio", "The service's load at the last look", 0.01, "g"),
    ("queue_max", "squall_scale_queue_max_pkts", "Deepest rx ring at the last look", 1, "g"),
    ("decisions", "squall_scale_decisions", "Scaling decisions", 1, "counter"),
    ("spawns", "squall_scale_spawns", "Instances started by the scaler", 1, "counter"),
    ("reruns", "squall_scale_reruns", "Blocked instances told to run", 1, "counter"),
    ("blocks", "squall_scale_blocks", "Instances told to block", 1, "counter"),
    ("spawn_failed", "squall_scale_spawn_failures", "Starts that failed", 1, "counter"),
    ("at_max", "squall_scale_at_max", "Looks that wanted more than scale.max", 1, "counter"),
    ("core_full", "squall_scale_core_full", "Looks held back: NF core full", 1, "counter"),
]
SCALE_TOTALS: list[MetricSpec] = [
    ("events", "squall_scale_events", "Scaling decisions logged", 1, "counter"),
    ("nf_core_busy_pct", "squall_nf_core_busy_ratio", "NF core busy (/proc/stat)", 0.01, "g"),
    ("nf_core_work_pct", "squall_nf_core_work_ratio", "NF core in NF handlers", 0.01, "g"),
    ("scale_out_us_p50", "squall_scale_out_p50_seconds", "Median scale-out time", 1e-6, "g"),
    ("rerun_us_p50", "squall_scale_rerun_p50_seconds", "Median rerun time", 1e-6, "g"),
]
MSG_METRICS: list[MetricSpec] = [
    (key, f"squall_msgs_{key}", doc, 1, "counter")
    for key, doc in (
        ("sent", "Messages the manager sent to NFs"),
        ("received", "Messages the manager received from NFs"),
        ("full", "Messages not sent: the NF's ring was full"),
        ("bad", "Messages from NFs that did not parse"),
        ("undelivered", "Messages to NFs that were gone"),
    )
]

GEN_METRICS: list[MetricSpec] = [
    ("rate_pps", "squall_generator_rate_packets_per_second", "The generator's rate", 1, "g"),
    ("sent_pkts", "squall_generator_sent_packets", "Packets the generator made", 1, "counter"),
    ("sent_bytes", "squall_generator_sent_bytes", "Bytes the generator made", 1, "counter"),
    ("alloc_fail", "squall_generator_alloc_failures", "Packets not made: no mbuf", 1, "counter"),
    ("lag_pkts", "squall_generator_lag_packets", "Packets behind its schedule now", 1, "g"),
    ("conns_started", "squall_generator_connections", "TCP connections it began", 1, "counter"),
]
ATTACH_METRICS: list[MetricSpec] = [
    (
        "attach_granted",
        "squall_attach_granted",
        "NFs started by hand given the region",
        1,
        "counter",
    ),
    ("attach_refused", "squall_attach_refused", "NFs started by hand refused (uid)", 1, "counter"),
]
IDLE_METRICS: list[MetricSpec] = [
    ("sleeps", "squall_manager_sleeps", "Times the manager's loop slept, idle", 1, "counter"),
    ("slept_us", "squall_manager_slept_seconds", "Time the manager's loop slept", 1e-6, "counter"),
    (
        "sleep_max_us",
        "squall_manager_idle_sleep_max_seconds",
        "The longest sleep between polls (0: the manager polls without end)",
        1e-6,
        "g",
    ),
    (
        "intr_ports",
        "squall_manager_rx_interrupt_ports",
        "Ports whose rx interrupt wakes the idle manager",
        1,
        "g",
    ),
    (
        "sock_ports",
        "squall_manager_rx_socket_ports",
        "Ports whose socket (af_xdp, af_packet) wakes the idle manager",
        1,
        "g",
    ),
    (
        "core_yields",
        "squall_manager_core_yields",
        "Times the manager gave its core to NFs pinned to it that held packets",
        1,
        "counter",
    ),
    (
        "core_yields_deferred",
        "squall_manager_core_yields_deferred",
        "Rounds that moved packets after which the manager kept its core from NFs holding "
        "some (manager.core_yield_rounds)",
        1,
        "counter",
    ),
    (
        "load_pm",
        "squall_manager_load_ratio",
        "Share of the manager's awake time in rounds that moved packets (last 10 ms)",
        1e-3,
        "g",
    ),
    (
        "after_now_us",
        "squall_manager_idle_after_seconds",
        "How long nothing must move before the manager sleeps, now (idle_after_load stretches it)",
        1e-6,
        "g",
    ),
]
CONFIG_METRICS: list[MetricSpec] = [
    ("applies", "squall_config_applies", "Configs applied while running", 1, "counter"),
    ("changes", "squall_config_changes", "Changes made by applied configs", 1, "counter"),
]
CAPTURE_POOL_METRICS: list[MetricSpec] = [
    ("pool_mbufs", "squall_capture_pool_mbufs", "mbufs of the captures' copy pool", 1, "g"),
    ("pool_in_use", "squall_capture_pool_in_use_mbufs", "copies not yet written", 1, "g"),
]
CAPTURE_COUNTERS = [
    ("seen_pkts", "squall_capture_seen_packets", "Packets that passed the capture's point"),
    ("matched_pkts", "squall_capture_matched_packets", "Packets its filter took"),
    ("written_pkts", "squall_capture_written_packets", "Copies written to its file"),
    ("written_bytes", "squall_capture_written_bytes", "Bytes written to its file"),
    ("dropped_pkts", "squall_capture_dropped_packets", "Copies lost (never the traffic)"),
]

# /squall/cgroups key, metric, help, scale, type; a limit of 0 (none) is left out
CGROUP_LIMITS = {"cpu_max_pct", "cpu_weight", "memory_max_mb", "pids_max"}
CGROUP_METRICS: list[MetricSpec] = [
    ("cpu_max_pct", "squall_cgroup_cpu_max_cpus", "cpu.max: CPUs its NFs may use", 0.01, "g"),
    ("cpu_weight", "squall_cgroup_cpu_weight", "cpu.weight (0: the default)", 1, "g"),
    ("memory_max_mb", "squall_cgroup_memory_max_bytes", "memory.max", 1 << 20, "g"),
    ("pids_max", "squall_cgroup_pids_max", "pids.max", 1, "g"),
    (
        "cpu_throttled",
        "squall_cgroup_cpu_throttled_periods",
        "Periods stopped at cpu.max",
        1,
        "counter",
    ),
    (
        "cpu_throttled_us",
        "squall_cgroup_cpu_throttled_seconds",
        "Time stopped at cpu.max",
        1e-6,
        "counter",
    ),
    ("memory_bytes", "squall_cgroup_memory_bytes", "Memory charged now", 1, "g"),
    (
        "memory_max_hits",
        "squall_cgroup_memory_max_events",
        "Charges that met memory.max",
        1,
        "counter",
    ),
    ("oom_kills", "squall_cgroup_oom_kills", "NFs the OOM killer ended", 1, "counter"),
    ("pids", "squall_cgroup_pids", "Processes and threads now", 1, "g"),
    (
        "pids_max_hits",
        "squall_cgroup_pids_max_events",
        "Forks and threads refused at pids.max",
        1,
        "counter",
    ),
]


def _scalars(d: dict[str, Any] | None, specs: Iterable[MetricSpec]) -> Iterator[Metric]:
    """One unlabelled metric per spec whose key d has."""
    for key, name, doc, scale, kind in specs:
        if d is not None and key in d:
            m = (_counter if kind == "counter" else _gauge)(name, doc)
            m.add_metric([], _n(d, key) * scale)
            yield m


def _per_service(
    rows: dict[str, dict[str, Any]], specs: Iterable[MetricSpec], skip_zero: Iterable[str] = ()
) -> Iterator[Metric]:
    """One metric per spec, a sample per service row that has its key (and,
    for a key in skip_zero, a value other than 0: a limit not set)."""
    skip = set(skip_zero)
    for key, name, doc, scale, kind in specs:
        m = (_counter if kind == "counter" else _gauge)(name, doc, ["service"])
        for svc, row in sorted(rows.items()):
            if key in row and (key not in skip or row[key]):
                m.add_metric([svc], _n(row, key) * scale)
        yield m


def _counter(name: str, doc: str, labels: list[str] | None = None) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _n(d: dict[str, Any], key: str) -> float:
    v = d.get(key, 0)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


# Port counters: telemetry key -> (metric name without _total, help).
PORT_COUNTERS = {
    "rx_pkts": ("squall_port_received_packets", "Packets received on the port"),
    "rx_bytes": ("squall_port_received_bytes", "Bytes received on the port"),
    "tx_pkts": ("squall_port_transmitted_packets", "Packets sent out of the port"),
    "tx_bytes": ("squall_port_transmitted_bytes", "Bytes sent out of the port"),
    "rx_eth_missed": (
        "squall_port_rx_missed_packets",
        "Packets the port dropped: rx queue full (af_packet: its kernel ring full)",
    ),
    "rx_eth_errors": ("squall_port_rx_errors", "Erroneous packets the NIC received"),
    "rx_nombuf": ("squall_port_rx_nombuf", "rx mbuf allocation failures"),
    "tx_eth_errors": ("squall_port_tx_errors", "Packets the NIC failed to send"),
    "rx_held": (
        "squall_port_rx_held_rounds",
        "Rounds rx left the port unread: a first hop had no room (rx_backpressure)",
    ),
}
NF_COUNTERS = {
    "rx_pkts": ("squall_nf_received_packets", "Packets the NF took from its rx ring"),
    "tx_pkts": ("squall_nf_transmitted_packets", "Packets the NF handed back with a verdict"),
    "drop_verdicts": ("squall_nf_drop_verdicts", "Packets the NF gave a drop verdict"),
    "sleeps": ("squall_nf_sleeps", "Times the NF went to sleep on its futex"),
    "ring_full_drops": (
        "squall_nf_ring_full_dropped_packets",
        "Packets dropped because the NF's rx ring was full",
    ),
    "tx_full_spins": ("squall_nf_tx_full_spins", "Times the NF waited on a full tx ring"),
    "handler_cycles": ("squall_nf_handler_cycles", "TSC cycles spent in the NF's handler"),
    "given_pkts": ("squall_nf_given_packets", "Packets the manager put on the NF's rx ring"),
    "direct_rx_pkts": (
        "squall_nf_direct_received_packets",
        "Packets the NF took from its direct chain's previous hop",
    ),
    "direct_tx_pkts": (
        "squall_nf_direct_handed_packets",
        "Packets the NF handed straight to its direct chain's next hop",
    ),
    "direct_full_pkts": (
        "squall_nf_direct_full_packets",
        "Packets the next hop's full ring sent the manager's way instead",
    ),
    "direct_wakes": ("squall_nf_direct_wakes", "Times the NF woke its direct chain's next hop"),
}
# The rest of an NF's counters: summed per service only, so 10,000 NFs do
# not multiply them (squallctl nfs --json has them per NF).
SERVICE_COUNTERS = {
    "bursts": ("squall_service_bursts", "Bursts the service's NFs handled"),
    "sleep_cancels": (
        "squall_service_sleep_cancels",
        "Sleeps the service's NFs cancelled: packets came as they went to sleep",
    ),
    "flows_cleaned": ("squall_service_flows_cleaned", "Flows the service's NFs cleaned up"),
    "closes_cleaned": (
        "squall_service_closes_cleaned",
        "Flow closes the service's NFs cleaned up",
    ),
    "budget_yields": (
        "squall_service_budget_yields",
        "Times the service's NFs yielded at their batch budget",
    ),
    "spin_yields": (
        "squall_service_spin_yields",
        "Times the service's NFs yielded while spinning before sleep",
    ),
    "held_pkts": (
        "squall_service_held_packets",
        "Packets the manager held for the service's NFs (ring full)",
    ),
    "bad_descs": (
        "squall_service_bad_descriptors",
        "Descriptors the service's NFs handed back that were not theirs to give",
    ),
    "watchdog_kills": (
        "squall_service_watchdog_kills",
        "The service's NFs killed by the watchdog (packets held, no progress)",
    ),
    "copied_in_pkts": (
        "squall_service_copied_in_packets",
        "Packets copied into the service's isolated NFs' private regions",
    ),
    "copied_out_pkts": (
        "squall_service_copied_out_packets",
        "Packets copied back out of the service's isolated NFs' private regions",
    ),
    "bad_lengths": (
        "squall_service_bad_lengths",
        "Packets an isolated NF handed back with lengths that made no sense",
    ),
}
WAKE_REASONS = {
    "wakes_by_thresh": "threshold",
    "wakes_by_timeout": "timeout",
    "wakes_by_urgent": "urgent",
}
POOL_GAUGES = ("size", "started", "idle", "waiting", "waiting_max")
POOL_COUNTERS = {
    "assigned": "Flows handed an NF from the pool",
    "retired": "Pool NFs retired after their flow",
    "empty": "Flows that found the pool empty",
    "backlogged": "Flows held back by the NF core's backlog",
    "waited": "Packets that waited in the fallback queue",
    "wait_dropped": "Packets dropped: the fallback queue was full",
}
FLOW_COUNTERS = {
    "flows_created": "squall_flows_created",
    "flows_closed": "squall_flows_closed",
    "flows_idle_expired": "squall_flows_idle_expired",
    "flows_half_open_expired": "squall_flows_half_open_expired",
    "flows_config_ended": "squall_flows_config_ended",
    "flows_ended": "squall_flows_ended",
    "handoffs": "squall_flow_handoffs",
    "flows_rekeyed": "squall_flows_rekeyed",
    "rekeys_refused": "squall_flow_rekeys_refused",
    "rekeys_lost": "squall_flow_rekeys_lost",
    "setup_count": "squall_flow_setups",
}


class SquallCollector(Collector):
    """Prometheus metrics of the poller's latest snapshot."""

    def __init__(self, poller: Poller) -> None:
        self.poller = poller

    def collect(self) -> Iterator[Metric]:
        with self.poller.cond:
            st = self.poller.state
            snap, up, polls, errors = st.snap, st.up, st.polls, st.poll_errors
            events_total = dict(st.events_total)
        g = _gauge("squall_up", "1 if the last poll of the manager's telemetry succeeded")
        g.add_metric([], 1 if up else 0)
        yield g
        c = _counter("squall_exporter_polls", "Polls of the manager's telemetry")
        c.add_metric([], polls)
        yield c
        c = _counter("squall_exporter_poll_errors", "Polls that failed: manager down or bad reply")
        c.add_metric([], errors)
        yield c
        c = _counter("squall_exporter_events", "Events derived from snapshots", ["kind"])
        for kind, n in sorted(events_total.items()):
            c.add_metric([kind], n)
        yield c
        if snap is None or not up:
            return
        g = _gauge("squall_exporter_poll_duration_seconds", "Time the last poll took")
        g.add_metric([], snap.poll_s)
        yield g
        g = _gauge("squall_exporter_snapshot_timestamp_seconds", "When the last poll ended")
        g.add_metric([], snap.time)
        yield g
        yield from self._manager(snap)
        yield from self._ports(snap)
        yield from self._chains(snap)
        yield from self._nfs(snap, self.poller.nf_detail)
        yield from self._flows_pools(snap)
        yield from self._cgroups(snap)
        yield from self._scaler(snap)
        yield from self._msgs(snap)
        yield from self._captures(snap)
        yield from self._gen(snap)

    def _idle(self, idle: dict[str, Any] | None) -> Iterator[Metric]:
        """The manager's sleep when idle (/squall/stats idle, mgr/idle.h)."""
        if not idle:
            return
        yield from _scalars(idle, IDLE_METRICS)
        c = _counter("squall_manager_wakes", "What ended each of the manager's sleeps", ["reason"])
        for reason in ("nf", "intr", "sock", "timer"):
            c.add_metric([reason], _n(idle, f"wakes_by_{reason}"))
        yield c

    def _manager(self, snap: Snapshot) -> Iterator[Metric]:
        s = snap.stats
        for key, name, doc in (
            ("rx_pkts", "squall_received_packets", "Packets the manager received on every port"),
            ("tx_pkts", "squall_transmitted_packets", "Packets the manager sent out of a port"),
        ):
            c = _counter(name, doc)
            c.add_metric([], _n(s, key))
            yield c
        c = _counter("squall_dropped_packets", "Packets dropped, by cause", ["cause"])
        for cause, n in sorted((s.get("drops") or {}).items()):
            c.add_metric([cause], n)
        yield c
        c = _counter(
            "squall_region_corrupt",
            "Shared state an NF rewrote, found and repaired by the manager, by field",
            ["field"],
        )
        for field_, n in sorted((s.get("region_corrupt") or {}).items()):
            c.add_metric([field_], n)
        yield c
        if "headers_restored" in s:
            c = _counter(
                "squall_headers_restored",
                "mbuf header fields an NF rewrote, restored by the manager before use, by field",
                ["field"],
            )
            for field_, n in sorted((s.get("headers_restored") or {}).items()):
                c.add_metric([field_], n)
            yield c
        yield from _scalars(s, ATTACH_METRICS)
        yield from _scalars(snap.control, CONFIG_METRICS)
        yield from self._idle(s.get("idle"))
        info = _gauge("squall_drop_cause_info", "What each drop cause means", ["cause", "what"])
        for cause, what in sorted(snap.drop_causes.items()):
            info.add_metric([cause, what], 1)
        yield info
        for key, name, doc in (
            ("mbufs_in_use", "squall_mbufs_in_use", "mbufs out of the pool now"),
            ("mbufs_total", "squall_mbufs", "mbufs in the pool"),
            ("mbufs_port_reserved", "squall_mbufs_port_reserved", "mbufs reserved for port rx"),
            ("nfs_live", "squall_nfs_live", "NF processes running"),
            ("nfs_total", "squall_nfs", "NF slots configured"),
            ("nf_ctl_bytes", "squall_nf_control_bytes", "Region bytes of NF control blocks"),
            ("nf_rings_bytes", "squall_nf_rings_bytes", "Region bytes of NF rings"),
            ("adaptive_wakes_per_s", "squall_adaptive_wakes_per_second", "Adaptive wake rate"),
            ("core_wakes_per_s", "squall_core_wakes_budget_per_second", "NF core wake budget"),
        ):
            if key in s:
                g = _gauge(name, doc)
                g.add_metric([], _n(s, key))
                yield g
        g = _gauge("squall_manager_info", "The manager this exporter reads", ["pid"])
        g.add_metric([str(snap.pid)], 1)
        yield g

    def _ports(self, snap: Snapshot) -> Iterator[Metric]:
        for key, (name, doc) in PORT_COUNTERS.items():
            c = _counter(name, doc, ["port"])
            for port, p in snap.ports.items():
                c.add_metric([port], _n(p, key))
            yield c

    def _chains(self, snap: Snapshot) -> Iterator[Metric]:
        for key, name, doc in (
            ("rx_pkts", "squall_chain_received_packets", "Packets that entered the chain"),
            ("tx_pkts", "squall_chain_transmitted_packets", "Packets that left the chain"),
            ("visits_mismatch", "squall_chain_visits_mismatch", "Packets that skipped a hop"),
        ):
            c = _counter(name, doc, ["chain"])
            for chain, ch in snap.chains.items():
                c.add_metric([chain], _n(ch, key))
            yield c
        hop = _gauge(
            "squall_chain_hop_info",
            "The services of each chain, by hop",
            ["chain", "hop", "service"],
        )
        for chain, ch in snap.chains.items():
            for i, svc in enumerate(h for h in str(ch.get("hops", "")).split(",") if h):
                hop.add_metric([chain, str(i), svc], 1)
        yield hop
        rule = _gauge(
            "squall_rule_info",
            "The rules: in port and destination MAC to a chain and an out port",
            ["rule", "port", "dst_mac", "chain", "out_port", "assign"],
        )
        for r in snap.rules:
            rule.add_metric(
                [
                    str(r.get("id", "")),
                    str(r.get("in_port", "")),
                    str(r.get("dst_mac", "")),
                    str(r.get("chain", "")),
                    str(r.get("out_port", "")),
                    str(r.get("assign", "")),
                ],
                1,
            )
        yield rule
        for name, doc, hists in (
            (
                "squall_chain_latency_seconds",
                "Time from rx to tx of the packets that left the chain",
                snap.latency,
            ),
            (
                "squall_chain_first_nf_latency_seconds",
                "Time from rx to the chain's first NF handler (includes its wake-up)",
                snap.to_nf,
            ),
        ):
            h = HistogramMetricFamily(name, doc, labels=["chain"])
            for chain, hist in hists.items():
                h.add_metric([chain], hist.cumulative(LATENCY_BOUNDS_S), hist.sum_s)
            yield h

    def _nfs(self, snap: Snapshot, detail: bool) -> Iterator[Metric]:
        svc_state: dict[tuple[str, str], int] = {}
        svc_sum: dict[str, dict[str, float]] = {}
        for nf in snap.nfs.values():
            svc = str(nf.get("service", ""))
            key = (svc, str(nf.get("state", "")))
            svc_state[key] = svc_state.get(key, 0) + 1
            agg = svc_sum.setdefault(svc, {})
            for k in (*NF_COUNTERS, *SERVICE_COUNTERS, *WAKE_REASONS, "wakes", "restarts"):
                agg[k] = agg.get(k, 0.0) + _n(nf, k)
        g = _gauge("squall_service_nfs", "NFs of the service, by state", ["service", "state"])
        for (svc, state), n in sorted(svc_state.items()):
            g.add_metric([svc, state], n)
        yield g
        for ckey, (name, doc) in NF_COUNTERS.items():
            c = _counter(
                name.replace("squall_nf_", "squall_service_"),
                doc.replace("the NF", "the service's NFs"),
                ["service"],
            )
            for svc, agg in sorted(svc_sum.items()):
                c.add_metric([svc], agg[ckey])
            yield c
        for ckey, (name, doc) in SERVICE_COUNTERS.items():
            c = _counter(name, doc, ["service"])
            for svc, agg in sorted(svc_sum.items()):
                c.add_metric([svc], agg[ckey])
            yield c
        hz = _n(snap.stats, "tsc_hz")
        if hz > 0:
            c = _counter(
                "squall_service_handler_seconds",
                "Time the service's NFs spent in their handlers",
                ["service"],
            )
            for svc, agg in sorted(svc_sum.items()):
                c.add_metric([svc], agg["handler_cycles"] / hz)
            yield c
        c = _counter(
            "squall_service_wakes",
            "Wake-ups of the service's NFs, by reason",
            ["service", "reason"],
        )
        for svc, agg in sorted(svc_sum.items()):
            for k, reason in WAKE_REASONS.items():
                c.add_metric([svc, reason], agg[k])
        yield c
        if not detail:
            return
        nfs = sorted(
            snap.nfs.values(), key=lambda n: (str(n.get("service", "")), int(n.get("instance", 0)))
        )
        # (not "instance": Prometheus's own label for the scraped target)
        labels = ["service", "nf_instance"]

        def lv(nf: dict[str, Any]) -> list[str]:
            return [str(nf.get("service", "")), str(nf.get("instance", 0))]

        g = _gauge("squall_nf_up", "1 if the NF process is running", labels)
        for nf in nfs:
            g.add_metric(lv(nf), 1 if _live(str(nf.get("state", ""))) else 0)
        yield g
        for ckey, (name, doc) in NF_COUNTERS.items():
            c = _counter(name, doc, labels)
            for nf in nfs:
                c.add_metric(lv(nf), _n(nf, ckey))
            yield c
        c = _counter(
            "squall_nf_wakes", "Wake-ups of the NF by the manager, by reason", [*labels, "reason"]
        )
        for nf in nfs:
            base = lv(nf)
            for k, reason in WAKE_REASONS.items():
                c.add_metric([*base, reason], _n(nf, k))
        yield c
        g = _gauge("squall_nf_rx_ring_packets", "Packets waiting in the NF's rx ring", labels)
        for nf in nfs:
            g.add_metric(lv(nf), _n(nf, "rx_ring_count"))
        yield g
        if any("restarts" in nf for nf in nfs):
            c = _counter("squall_nf_restarts", "Times the NF was restarted", labels)
            for nf in nfs:
                c.add_metric(lv(nf), _n(nf, "restarts"))
            yield c
        c = _counter(
            "squall_nf_app", "Counters the NF defined itself (sq_nf_counter)", [*labels, "counter"]
        )
        for nf in nfs:
            base = lv(nf)
            for cname, v in sorted((nf.get("counters") or {}).items()):
                c.add_metric([*base, cname], float(v))
        yield c

    def _flows_pools(self, snap: Snapshot) -> Iterator[Metric]:
        f = snap.flows
        g = _gauge("squall_flows_active", "Flows in the flow table now")
        g.add_metric([], _n(f, "flows_active"))
        yield g
        for key, name in FLOW_COUNTERS.items():
            if key in f:
                c = _counter(name, key.replace("_", " "))
                c.add_metric([], _n(f, key))
                yield c
        for key, name, doc in (
            ("setup_ns_p50", "squall_flow_setup_p50_seconds", "Median flow setup time"),
            ("setup_ns_p99", "squall_flow_setup_p99_seconds", "99th percentile flow setup time"),
            ("setup_ns_mean", "squall_flow_setup_mean_seconds", "Mean flow setup time"),
        ):
            if key in f:
                g = _gauge(name, doc + ": first packet to its enqueue on a new NF")
                g.add_metric([], _n(f, key) / 1e9)
                yield g
        for key in POOL_GAUGES:
            g = _gauge(f"squall_pool_{key}_nfs", f"Per-flow pool: {key} NFs", ["service"])
            for svc, p in snap.pools.items():
                if p.get("pooled"):
                    g.add_metric([svc], _n(p, key))
            yield g
        for key, doc in POOL_COUNTERS.items():
            c = _counter(f"squall_pool_{key}", doc, ["service"])
            for svc, p in snap.pools.items():
                if p.get("pooled"):
                    c.add_metric([svc], _n(p, key))
            yield c

    def _scaler(self, snap: Snapshot) -> Iterator[Metric]:
        """Scaled services (seed 003): instances by state, load, decisions."""
        if snap.scale is None:
            return
        yield from _per_service(by_name(snap.scale), SCALE_METRICS)
        yield from _scalars(snap.scale, SCALE_TOTALS)

    def _msgs(self, snap: Snapshot) -> Iterator[Metric]:
        """Messages between the manager and its NFs (seed 003 section IV.B)."""
        yield from _scalars(snap.msgs, MSG_METRICS)

    def _gen(self, snap: Snapshot) -> Iterator[Metric]:
        """The manager's traffic generator (manager config generator:)."""
        yield from _scalars(snap.gen, GEN_METRICS)

    def _captures(self, snap: Snapshot) -> Iterator[Metric]:
        """Captures (squallctl capture): what each saw, copied, wrote and lost."""
        if snap.captures is None:
            return
        caps = [v for v in snap.captures.values() if isinstance(v, dict)]
        labels = ["capture", "point", "name"]

        def lv(c: dict[str, Any]) -> list[str]:
            return [str(c.get("id", "")), str(c.get("point", "")), str(c.get("name", ""))]

        g = _gauge("squall_capture_running", "1 while the capture runs", labels)
        for c in caps:
            g.add_metric(lv(c), 1 if c.get("state") == "running" else 0)
        yield g
        for key, name, doc in CAPTURE_COUNTERS:
            m = _counter(name, doc, labels)
            for c in caps:
                m.add_metric(lv(c), _n(c, key))
            yield m
        yield from _scalars(snap.captures, CAPTURE_POOL_METRICS)

    def _cgroups(self, snap: Snapshot) -> Iterator[Metric]:
        """Services with cgroup limits: the limits and the kernel's counts."""
        yield from _per_service(snap.cgroups, CGROUP_METRICS, skip_zero=CGROUP_LIMITS)


# ------------------------------------------------------------- web summaries


def summary(poller: Poller, max_events: int = 200) -> dict[str, Any]:
    """What the page shows, aggregated so its size does not grow with the NF count."""
    with poller.cond:
        st = poller.state
        snap, prev, up, error, seq = st.snap, st.prev, st.up, st.error, st.seq
        events = [e.as_dict() for e in list(st.events)[-max_events:]]
    out: dict[str, Any] = {"seq": seq, "up": up, "error": error, "events": events}
    if snap is None:
        return out
    dt = snap.time - prev.time if prev is not None else 0.0
    p = prev
    s, ps = snap.stats, (p.stats if p else {})
    out.update(
        time=snap.time,
        pid=snap.pid,
        poll_s=snap.poll_s,
        totals={
            "rx_pkts": _n(s, "rx_pkts"),
            "tx_pkts": _n(s, "tx_pkts"),
            "drop_pkts": _n(s, "drop_pkts"),
            "rx_pps": _rate(_n(s, "rx_pkts"), _n(ps, "rx_pkts"), dt),
            "tx_pps": _rate(_n(s, "tx_pkts"), _n(ps, "tx_pkts"), dt),
            "drop_pps": _rate(_n(s, "drop_pkts"), _n(ps, "drop_pkts"), dt),
            "mbufs_in_use": _n(s, "mbufs_in_use"),
            "mbufs_total": _n(s, "mbufs_total"),
            "nfs_live": _n(s, "nfs_live"),
            "nfs_total": _n(s, "nfs_total"),
        },
    )
    drops, pdrops = s.get("drops") or {}, ps.get("drops") or {}
    out["drops"] = [
        {
            "cause": c,
            "what": snap.drop_causes.get(c, c),
            "pkts": _n(drops, c),
            "pps": _rate(_n(drops, c), _n(pdrops, c), dt),
        }
        for c in sorted(set(drops) | set(snap.drop_causes))
    ]
    out["ports"] = [
        {
            "name": name,
            "id": _n(pt, "id"),
            "rx_pkts": _n(pt, "rx_pkts"),
            "tx_pkts": _n(pt, "tx_pkts"),
            "rx_pps": _rate(
                _n(pt, "rx_pkts"), _n(p.ports.get(name, {}), "rx_pkts") if p else 0, dt
            ),
            "tx_pps": _rate(
                _n(pt, "tx_pkts"), _n(p.ports.get(name, {}), "tx_pkts") if p else 0, dt
            ),
            "rx_missed": _n(pt, "rx_eth_missed"),
        }
        for name, pt in sorted(snap.ports.items(), key=lambda kv: _n(kv[1], "id"))
    ]
    services: dict[str, dict[str, Any]] = {}
    for key, nf in snap.nfs.items():
        svc = str(nf.get("service", ""))
        agg = services.setdefault(
            svc,
            {"name": svc, "states": {}, "nfs": 0, "rx_pps": 0.0, "tx_pps": 0.0, "wakes_ps": 0.0},
        )
        old = p.nfs.get(key) if p else None
        state = shown_state(nf, snap.scaler_states.get(key))
        agg["states"][state] = agg["states"].get(state, 0) + 1
        agg["nfs"] += 1
        if old is not None and old.get("pid") == nf.get("pid"):
            agg["rx_pps"] += _rate(_n(nf, "rx_pkts"), _n(old, "rx_pkts"), dt)
            agg["tx_pps"] += _rate(_n(nf, "tx_pkts"), _n(old, "tx_pkts"), dt)
            agg["wakes_ps"] += _rate(_n(nf, "wakes"), _n(old, "wakes"), dt)
    out["services"] = sorted(services.values(), key=lambda a: str(a["name"]))
    chains = []
    for name, ch in sorted(snap.chains.items(), key=lambda kv: _n(kv[1], "id")):
        pc = p.chains.get(name, {}) if p else {}
        hist = snap.latency.get(name)
        chains.append(
            {
                "name": name,
                "hops": [h for h in str(ch.get("hops", "")).split(",") if h],
                "rx_pkts": _n(ch, "rx_pkts"),
                "tx_pkts": _n(ch, "tx_pkts"),
                "rx_pps": _rate(_n(ch, "rx_pkts"), _n(pc, "rx_pkts"), dt),
                "tx_pps": _rate(_n(ch, "tx_pkts"), _n(pc, "tx_pkts"), dt),
                "p50_us": _n(ch, "lat_p50_ns") / 1e3,
                "p99_us": _n(ch, "lat_p99_ns") / 1e3,
                "p999_us": _n(ch, "lat_p999_ns") / 1e3,
                "hist": [[u * 1e6, n] for u, n in hist.fine()] if hist else [],
            }
        )
    out["chains"] = chains
    out["rules"] = rule_rates(snap.rules, out["ports"], out["services"], chains)
    out["flows"] = snap.flows
    out["pools"] = [dict(v, name=k) for k, v in sorted(snap.pools.items()) if v.get("pooled")]
    return out


def rule_rates(
    rules: list[dict[str, Any]],
    ports: list[dict[str, Any]],
    services: list[dict[str, Any]],
    chains: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Each rule (a direction through its chain) with its own rates: the
    manager counts packets per port, chain and NF, not per rule, so a rule's
    rx_pps is its in port's rx rate and its tx_pps its out port's tx rate
    when no other rule reads (sends to) that port, else None. hop_rx_pps:
    for each hop, the share of the service's rx rate in proportion to the
    rx rates of the rules whose chains pass through it (None when one of
    those is unknown); one-way traffic gives the other direction 0."""
    rx = {str(p["name"]): float(p["rx_pps"]) for p in ports}
    tx = {str(p["name"]): float(p["tx_pps"]) for p in ports}
    ins = [str(r.get("in_port", "")) for r in rules]
    outs = [str(r.get("out_port", "")) for r in rules]
    hops = {str(c["name"]): list(c["hops"]) for c in chains}
    svc_rx = {str(v["name"]): float(v["rx_pps"]) for v in services}
    out = []
    for r, i, o in zip(rules, ins, outs, strict=True):
        out.append(
            dict(
                r,
                rx_pps=rx[i] if ins.count(i) == 1 and i in rx else None,
                tx_pps=tx[o] if outs.count(o) == 1 and o in tx else None,
            )
        )
    for r in out:
        shares: list[float | None] = []
        for svc in hops.get(str(r.get("chain", "")), []):
            through = [q["rx_pps"] for q in out if svc in hops.get(str(q.get("chain", "")), [])]
            if r["rx_pps"] is None or None in through:
                shares.append(None)
            else:
                total = sum(float(t) for t in through)
                shares.append(svc_rx.get(svc, 0.0) * r["rx_pps"] / total if total > 0 else 0.0)
        r["hop_rx_pps"] = shares
    return out


def nf_rows(poller: Poller, query: dict[str, list[str]]) -> dict[str, Any]:
    """/api/nfs?q=&service=&state=&sort=&page=&per_page=: NFs, filtered and paged.

    q: a part of the NF's name ("fwd#1") or its pid; state: the shown state
    (shown_state); sort: id (default), name, or busiest first by rx_pps,
    wakes_ps, rx_pkts or ring (ties by id); page counts from 0."""

    def arg(k: str, default: str = "") -> str:
        return query.get(k, [default])[0]

    with poller.cond:
        snap, prev = poller.state.snap, poller.state.prev
    if snap is None:
        return {"total": 0, "page": 0, "rows": []}
    dt = snap.time - prev.time if prev is not None else 0.0
    q, svc, state = arg("q").lower(), arg("service"), arg("state")
    rows = []
    for key, nf in snap.nfs.items():
        if svc and nf.get("service") != svc:
            continue
        old = prev.nfs.get(key) if prev else None
        shown = shown_state(nf, snap.scaler_states.get(key))
        if state and shown != state:
            continue
        if q and q not in key.lower() and q not in str(nf.get("pid", "")):
            continue
        same = old is not None and old.get("pid") == nf.get("pid")
        rows.append(
            {
                "name": key,
                "id": _n(nf, "id"),
                "service": nf.get("service", ""),
                "instance": _n(nf, "instance"),
                "pid": _n(nf, "pid"),
                "state": shown,
                "scaler_state": snap.scaler_states.get(key, ""),
                "ring_full": ring_full(nf, old),
                "mode": nf.get("mode", ""),
                "rx_pkts": _n(nf, "rx_pkts"),
                "tx_pkts": _n(nf, "tx_pkts"),
                "rx_pps": _rate(_n(nf, "rx_pkts"), _n(old, "rx_pkts"), dt) if same and old else 0,
                "wakes": _n(nf, "wakes"),
                "wakes_ps": _rate(_n(nf, "wakes"), _n(old, "wakes"), dt) if same and old else 0,
                "ring": _n(nf, "rx_ring_count"),
                "restarts": _n(nf, "restarts"),
            }
        )
    sort = arg("sort", "id")
    if sort in ("rx_pps", "wakes_ps", "rx_pkts", "ring"):
        rows.sort(key=lambda r: (-float(r[sort]), float(r["id"])))
    elif sort == "name":
        rows.sort(key=lambda r: (str(r["service"]), float(r["instance"])))
    else:
        rows.sort(key=lambda r: float(r["id"]))
    per_page = max(1, min(NF_PAGE_MAX, int(arg("per_page", "50") or 50)))
    page = max(0, int(arg("page", "0") or 0))
    return {
        "total": len(rows),
        "page": page,
        "per_page": per_page,
        "rows": rows[page * per_page : (page + 1) * per_page],
    }


# --------------------------------------------------------------------- HTTP

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "vendor/uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "vendor/uPlot.min.css": "text/css; charset=utf-8",
}


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(
        self,
        body: bytes,
        ctype: str,
        status: HTTPStatus = HTTPStatus.OK,
        encoding: str | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: Any) -> None:
        self._send(json.dumps(value, separators=(",", ":")).encode(), "application/json")

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        poller = self.server.poller
        path = url.path
        if path == "/metrics":
            gz = "gzip" in (self.headers.get("Accept-Encoding") or "")
            body, ctype = poller.exposition(self.headers.get("Accept"), gz)
            self._send(body, ctype, encoding="gzip" if gz else None)
        elif path == "/api/summary":
            self._json(summary(poller))
        elif path == "/api/events":
            with poller.cond:
                self._json([e.as_dict() for e in poller.state.events])
        elif path == "/api/nfs":
            try:
                self._json(nf_rows(poller, parse_qs(url.query)))
            except ValueError:
                self._send(b"bad page number\n", "text/plain", HTTPStatus.BAD_REQUEST)
        elif path == "/api/stream":
            self._stream()
        elif path in ("/", "/index.html") or path.removeprefix("/static/") in STATIC:
            name = "index.html" if path in ("/", "/index.html") else path.removeprefix("/static/")
            self._send((WEB_DIR / name).read_bytes(), STATIC[name])
        else:
            self._send(b"not found\n", "text/plain", HTTPStatus.NOT_FOUND)

    def _stream(self) -> None:
        """Server-sent events: one "summary" per snapshot until the client leaves."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        poller, seq = self.server.poller, -1
        try:
            while not self.server.stopping.is_set():
                new = poller.wait_next(seq, 15.0)
                if new == seq:
                    self.wfile.write(b": keepalive\n\n")
                else:
                    seq = new
                    data = json.dumps(summary(poller), separators=(",", ":"))
                    self.wfile.write(f"event: summary\ndata: {data}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], poller: Poller, verbose: bool = False) -> None:
        super().__init__(addr, Handler)
        self.poller = poller
        self.verbose = verbose
        self.stopping = threading.Event()


def serve(
    name: str | None,
    path: str | None,
    listen: tuple[str, int],
    interval_s: float = 1.0,
    nf_detail: bool = True,
    verbose: bool = False,
) -> int:
    """Run the exporter until interrupted."""
    poller = Poller(name=name, path=path, interval_s=interval_s)
    poller.nf_detail = nf_detail
    try:
        server = Server(listen, poller, verbose)
    except OSError as e:
        print(
            f"squallctl serve: cannot listen on {listen[0]}:{listen[1]}: {e.strerror}",
            file=sys.stderr,
        )
        return 1
    poller.start()
    host, port = str(server.server_address[0]), int(server.server_address[1])
    print(
        f"squallctl serve: manager {name or path}: dashboard http://{host}:{port}/ "
        f"metrics http://{host}:{port}/metrics",
        flush=True,
    )
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping.set()
        server.server_close()
        poller.stop()
    return 0


# --------------------------------------------------------------- squallctl

# (``squallctl serve``'s arguments live in squall.serve_cli: squallctl builds
# its parser without importing this module and prometheus_client)
add_parser = serve_cli.add_parser


def run_serve(args: argparse.Namespace, name: str | None) -> int:
    """``squallctl serve``: the manager need not be running yet."""
    return serve(
        name=None if args.socket is not None else name,
        path=args.socket,
        listen=args.listen,
        interval_s=max(0.1, args.interval),
        nf_detail=not args.no_nf_metrics,
        verbose=args.verbose,
    )
