"""Issue 20 soak: one squall-mgr for an hour under mixed traffic, NF kills and
per-flow churn. Does anything grow that should stay flat (the manager's RSS,
its fds, mbufs in use, the flow table, the pools), and is every mbuf home at
the end? A benchmark, not a test: it takes an hour (duration_s)."""

from __future__ import annotations

import copy
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from squall import control
from squall.bench import config, netns, targets
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded
from squall.bench.manager import BenchError, Manager
from squall.telemetry import Telemetry

TOOLS = ["iperf3", "wrk", "ab", "ping", "ss"]
# Namespaces of its own, so the tests' `client`/`server` stay free for the
# hour; --quick (which the test suite runs) takes another set, so the suite
# can run beside a full soak.
HOSTS = {False: netns.SOAK, True: netns.SOAK_QUICK}

# Port indexes, in make_cfg's order.
CLIENT, SERVER, GEN_UDP, GEN_TCP, OUT = range(5)


def make_cfg(
    name: str,
    hosts: netns.Hosts,
    tcp_pool: int,
    gen_pool: int,
    gen_conns: int,
    tcp_run_s: float,
) -> dict[str, Any]:
    """Three kinds of traffic through one manager:
    - real TCP between the soak's namespaces through `pf`, a per-flow pool of
      squall-nf-fwd (an NF per connection, both directions);
    - the generator's UDP through a shared chain firewall -> l3fwd to a sink;
    - the generator's short TCP connections (4 packets) through `gp`, a
      per-flow pool of squall-nf-noop: flow table and pool churn.
    Killed pool NFs are replaced: the director starts fresh instances (up to
    `instances`) to keep pool_idle ready."""
    pf = config.Service(
        "pf", "squall-nf-fwd", instances=tcp_pool, pool_idle=4, ring_slots=256, spin_us=0
    )
    gp = config.Service(
        "gp", "squall-nf-noop", instances=gen_pool, pool_idle=16, ring_slots=64, spin_us=0
    )
    fw = config.nf_service("firewall", "fw")
    l3 = config.nf_service("l3fwd", "l3", out=OUT)
    cfg = config.manager_config(
        name,
        ports=[
            {"name": "client", "devargs": f"net_af_packet0,iface={hosts.client_end}"},
            {"name": "server", "devargs": f"net_af_packet1,iface={hosts.server_end}"},
            {"name": "gudp", "devargs": "net_null0,no-rx=1"},
            {"name": "gtcp", "devargs": "net_null1,no-rx=1"},
            {"name": "out", "devargs": "net_null2,no-rx=1"},
        ],
        services=[pf, gp, fw, l3],
        chains=[
            {"name": "tcp", "services": ["pf"]},
            {"name": "churn", "services": ["gp"]},
            {"name": "udp", "services": ["fw", "l3"]},
        ],
        rules=[
            {"in_port": "client", "chain": "tcp", "out_port": "server", "assign": "per-flow"},
            {"in_port": "server", "chain": "tcp", "out_port": "client", "assign": "per-flow"},
            {"in_port": "gtcp", "chain": "churn", "out_port": "out", "assign": "per-flow"},
            {"in_port": "gudp", "chain": "udp", "out_port": "out"},
        ],
        region_mb=512,
        mbufs=32767,
        # A TCP flow that idles out is gone: its next packet, not a SYN, is a
        # stray. iperf3's control connection is silent for the whole test, so
        # the timeout outlasts a run. (A connection whose NF was killed is lost
        # either way: the NF's state died with it.)
        flow_idle_timeout_ms=int((tcp_run_s + 20) * 1000),
        # The churn's NFs go back to their pool at each connection's close.
        flow_linger_ms=0,
        max_flows=65536,
    )
    cfg["generator"] = [
        config.generator([64, 570, 1518], flows=1024, rate_pps=0, port="gudp"),
        {**config.generator([64], flows=gen_conns, rate_pps=0, port="gtcp"), "tcp_flow_pkts": 4},
    ]
    return cfg


class TcpLoad:
    """Real TCP in the soak's namespaces, in turns until stopped: iperf3 (one
    long bulk flow), wrk (keep-alive connections), ab (a new connection per
    request: per-flow churn through real TCP). A run that fails (its flow's NF
    was killed and the tool gave up) is counted, not fatal."""

    def __init__(self, ctx: Context, hosts: netns.Hosts, run_s: float) -> None:
        self.ctx = ctx
        self.hosts = hosts
        self.run_s = run_s
        self.iperf3_server = netns.start_iperf3_server(ctx.workdir, hosts)
        self.ok: dict[str, int] = {"iperf3": 0, "wrk": 0, "ab": 0}
        self.failed: dict[str, int] = {"iperf3": 0, "wrk": 0, "ab": 0}
        self.errors: list[str] = []
        self.bytes_gb = 0.0
        self.requests = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        # The longest run: a tool's own timeout (run_s + 30 s, netns.py).
        self._thread.join(timeout=self.run_s + 60)
        self.iperf3_server.stop()

    def _restart_iperf3_server(self) -> None:
        """After a failed run: the server may still hold the dead test (it
        then answers "busy" to every client)."""
        self.iperf3_server.stop()
        try:
            self.iperf3_server = netns.start_iperf3_server(self.ctx.workdir, self.hosts)
        except BenchError as e:
            if len(self.errors) < 20:
                self.errors.append(f"iperf3 server restart: {e}")

    def _one(self, tool: str) -> None:
        ok = False
        try:
            if tool == "iperf3":
                r, _ = netns.iperf3(self.run_s, hosts=self.hosts)
                self.bytes_gb += r["gbps"] * r["seconds"] / 8
            elif tool == "wrk":
                r, _ = netns.wrk(self.run_s, 8, hosts=self.hosts)
                self.requests += int(r["rps"] * self.run_s)
            else:
                r, _ = netns.ab(300, 4, timeout_s=self.run_s + 30, hosts=self.hosts)
                self.requests += int(r["complete"])
            self.ok[tool] += 1
            ok = True
        except (BenchError, OSError, ValueError, KeyError) as e:
            self.failed[tool] += 1
            if len(self.errors) < 20:
                self.errors.append(f"{tool}: {str(e)[:200]}")
        except Exception as e:  # noqa: BLE001 - a timeout of a hung tool, etc.: counted
            self.failed[tool] += 1
            if len(self.errors) < 20:
                self.errors.append(f"{tool}: {type(e).__name__}: {str(e)[:200]}")
        if not ok and tool == "iperf3" and not self._stop.is_set():
            self._restart_iperf3_server()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for tool in ("iperf3", "wrk", "ab"):
                if self._stop.is_set():
                    return
                self._one(tool)


def read_proc(pid: int) -> dict[str, int]:
    """The manager's resident memory (kB), open fds and threads."""
    out = {"rss_kb": 0, "fds": 0, "threads": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_kb"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


def take_sample(m: Manager, t0: float) -> dict[str, Any]:
    assert m.proc is not None
    st = m.stats()
    fl = m.query("/squall/flows")
    pools = m.query("/squall/pools")
    return {
        "t_run_s": round(time.monotonic() - t0, 1),
        **read_proc(m.proc.pid),
        "mbufs_in_use": int(st["mbufs_in_use"]),
        "nfs_live": int(st["nfs_live"]),
        "rx_pkts": int(st["rx_pkts"]),
        "drop_pkts": int(st["drop_pkts"]),
        "flows_active": int(fl["flows_active"]),
        "flows_created": int(fl["flows_created"]),
        "pools": {
            s: {k: int(p.get(k, 0)) for k in ("started", "idle", "assigned", "size")}
            for s, p in pools.items()
            if isinstance(p, dict) and p.get("pooled")
        },
    }


def with_extra_hop(cfg: dict[str, Any]) -> dict[str, Any]:
    """cfg with a service `xtra` (a no-op NF) as a third hop of the udp chain."""
    out = copy.deepcopy(cfg)
    out["services"].append(config.Service("xtra", "squall-nf-noop", ring_slots=1024).to_dict())
    for chain in out["chains"]:
        if chain["name"] == "udp":
            chain["services"] = [*chain["services"], "xtra"]
    return out


def apply_one(m: Manager, path: Path) -> dict[str, Any]:
    """squallctl apply's call: the time it took and whether the manager took it."""
    t = time.monotonic()
    with Telemetry.connect(name=m.name) as tm:
        try:
            res = control.apply_file(tm, path)
            ok, why = res.applied, ""
        except control.ApplyError as e:
            ok, why = False, str(e)
    return {"ok": ok, "ms": round((time.monotonic() - t) * 1000, 2), "error": why}


def kill_one(m: Manager, services: list[str], rng: random.Random) -> dict[str, Any] | None:
    """SIGKILL a random live NF of one of `services`; what was killed, or None."""
    victims = [
        (key, int(nf["pid"]))
        for key, nf in m.nfs().items()
        if key.split("#")[0] in services and int(nf.get("pid", 0)) > 0 and nf.get("state") != "dead"
    ]
    rng.shuffle(victims)
    for key, pid in victims:
        try:
            if b"squall-nf" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue  # gone meanwhile, its pid reused
            os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
        return {"nf": key, "pid": pid}
    return None


def run(ctx: Context) -> None:
    duration_s = ctx.param("duration_s", 3600.0, 30.0)
    sample_s = ctx.param("sample_s", 5.0, 2.0)
    warmup_s = ctx.param("warmup_s", 60.0, 6.0)
    kill_every_s = ctx.param("kill_every_s", 20.0, 5.0)
    # Per-flow pools by default: the director replaces a killed pool NF. A
    # shared service's killed NF stays dead until NFs have restart policies;
    # then add fw,l3 here.
    kill_services = ctx.param("kill_services", ["pf", "gp", "fw", "l3"])
    # Live changes: every apply_every_s the udp chain gains a third hop, a
    # service added for it (its NF started), or loses both again (the NF
    # drained and stopped, its id kept for the next add).
    apply_every_s = ctx.param("apply_every_s", 30.0, 5.0)
    udp_pps = ctx.param("udp_rate_pps", 20_000)
    churn_pps = ctx.param("churn_rate_pps", 4_000)  # 4 packets a connection: 1,000 flows/s
    churn_conns = ctx.param("churn_conns", 16)
    tcp_pool = ctx.param("tcp_pool", 512)
    gen_pool = ctx.param("churn_pool", 512)
    tcp_run_s = ctx.param("tcp_run_s", 10.0, 3.0)
    seed = ctx.param("seed", 1)
    targets.require_netns(TOOLS)
    rng = random.Random(seed)

    hosts = HOSTS[ctx.quick]
    ctx.params["namespaces"] = [hosts.client_ns, hosts.server_ns]
    cfg = make_cfg(ctx.manager_name(), hosts, tcp_pool, gen_pool, churn_conns, tcp_run_s)
    applied_cfgs = [
        Path(ctx.workdir) / "soak-apply-0.yaml",
        Path(ctx.workdir) / "soak-apply-1.yaml",
    ]
    applied_cfgs[0].write_text(config.to_yaml(cfg))
    applied_cfgs[1].write_text(config.to_yaml(with_extra_hop(cfg)))
    applies: list[dict[str, Any]] = []
    ctx.command(["scripts/netns.sh", "up"], what="namespaces", env=hosts.env_vars())
    netns.netns("up", hosts)
    servers: list[netns.Background] = []
    load: TcpLoad | None = None
    samples: list[dict[str, Any]] = []
    kills: list[dict[str, Any]] = []
    try:
        http, http_name = netns.start_http_server(ctx.workdir, 1024, hosts)
        servers.append(http)
        ctx.params["http_server"] = http_name
        with ctx.manager(cfg, label="soak") as m:
            netns.wait_path(hosts=hosts)
            m.query(f"/squall/gen_rate,{udp_pps},gudp")
            m.query(f"/squall/gen_rate,{churn_pps},gtcp")
            load = TcpLoad(ctx, hosts, tcp_run_s)
            load.start()
            t0 = time.monotonic()
            next_kill = t0 + kill_every_s
            next_apply = t0 + apply_every_s
            next_log = t0
            while True:
                now = time.monotonic()
                if now - t0 >= duration_s:
                    break
                s = take_sample(m, t0)
                samples.append(s)
                ctx.sample("soak", **s)
                if now >= next_kill:
                    k = kill_one(m, kill_services, rng)
                    if k is not None:
                        k["t_run_s"] = round(now - t0, 1)
                        kills.append(k)
                        ctx.sample("kill", **k)
                    next_kill += kill_every_s
                if now >= next_apply:
                    a = apply_one(m, applied_cfgs[(len(applies) + 1) % 2])
                    a["t_run_s"] = round(now - t0, 1)
                    applies.append(a)
                    ctx.sample("apply", **a)
                    next_apply += apply_every_s
                if now >= next_log:
                    ctx.log(
                        f"{s['t_run_s']:7.0f} s: rss {s['rss_kb'] / 1024:.1f} MiB, fds "
                        f"{s['fds']}, mbufs {s['mbufs_in_use']}, flows {s['flows_active']} "
                        f"(created {s['flows_created']}), NFs {s['nfs_live']}, kills "
                        f"{len(kills)}, applies {len(applies)}, tcp ok "
                        f"{sum(load.ok.values())} failed {sum(load.failed.values())}"
                    )
                    next_log += 60.0
                time.sleep(max(0.0, sample_s - (time.monotonic() - now)))
            # The end: traffic off, every mbuf home, a clean stop.
            load.stop()
            m.query("/squall/gen_rate,0,gudp")
            m.query("/squall/gen_rate,0,gtcp")
            idle = m.wait_idle(10.0)
            end = take_sample(m, t0)
            end["idle"] = idle
            ctx.sample("end", **end)
            rc = m.stop()
            exit_stats = m.exit_stats or {}
            ctx.sample(
                "exit", exit_code=rc, mbufs_in_use=exit_stats.get("stats", {}).get("mbufs_in_use")
            )
    finally:
        if load is not None:
            load.stop()
        for srv in servers:
            srv.stop()
        netns.netns("down", hosts)
    summarize(ctx, samples, end, rc, exit_stats, kills, load, warmup_s)
    ctx.summary["soak_applies"] = len(applies)
    ctx.summary["soak_apply_failures"] = sum(1 for a in applies if not a["ok"])
    figures(ctx, samples, kills)


def summarize(
    ctx: Context,
    samples: list[dict[str, Any]],
    end: dict[str, Any],
    rc: int,
    exit_stats: dict[str, Any],
    kills: list[dict[str, Any]],
    load: TcpLoad | None,
    warmup_s: float,
) -> None:
    if not samples:
        raise BenchError("no samples: the soak did not run")
    # "Start" is the first sample after the warm-up: the flow table, the
    # pools and the telemetry buffers have been touched once by then.
    start = next((s for s in samples if s["t_run_s"] >= warmup_s), samples[0])
    last = samples[-1]
    st = exit_stats.get("stats", {})
    su = ctx.summary
    su["soak_duration_s"] = last["t_run_s"]
    su["soak_exit_code"] = rc
    su["soak_leaked_mbufs"] = int(st.get("mbufs_in_use", -1)) if st else -1
    su["soak_mbufs_in_use_end_live"] = end["mbufs_in_use"]
    su["soak_mbufs_in_use_max"] = max(s["mbufs_in_use"] for s in samples)
    su["ratio_mgr_rss_end_vs_start"] = rounded(last["rss_kb"] / start["rss_kb"], 3)
    su["soak_mgr_rss_mib_start"] = rounded(start["rss_kb"] / 1024, 1)
    su["soak_mgr_rss_mib_end"] = rounded(last["rss_kb"] / 1024, 1)
    su["soak_mgr_rss_mib_max"] = rounded(max(s["rss_kb"] for s in samples) / 1024, 1)
    su["soak_fds_end_minus_start"] = last["fds"] - start["fds"]
    su["soak_threads_end_minus_start"] = last["threads"] - start["threads"]
    su["soak_flows_created"] = last["flows_created"]
    su["soak_flows_active_end"] = end["flows_active"]
    su["soak_nf_kills"] = len(kills)
    su["soak_nfs_live_start"] = start["nfs_live"]
    su["soak_nfs_live_end"] = last["nfs_live"]
    su["soak_rx_pkts"] = last["rx_pkts"]
    su["soak_drop_pkts"] = last["drop_pkts"]
    if st:
        su["soak_exit_rx_minus_tx_minus_drops"] = (
            int(st["rx_pkts"]) - int(st["tx_pkts"]) - int(st["drop_pkts"])
        )
        su["soak_drops_by_cause"] = {k: v for k, v in st.get("drops", {}).items() if v}
    if load is not None:
        su["soak_tcp_runs_ok"] = sum(load.ok.values())
        su["soak_tcp_runs_failed"] = sum(load.failed.values())
        su["soak_tcp_requests"] = load.requests
        su["soak_tcp_iperf3_gb"] = rounded(load.bytes_gb, 2)
        for tool in load.ok:
            su[f"soak_tcp_{tool}_ok"] = load.ok[tool]
            su[f"soak_tcp_{tool}_failed"] = load.failed[tool]
        if load.errors:
            ctx.note("TCP runs that failed (first 20): " + "; ".join(load.errors))
    ctx.note(
        f"Start values are the first sample after {warmup_s:g} s of traffic; end values the "
        "last sample with traffic on. soak_leaked_mbufs is the manager's mbufs_in_use in its "
        "exit stats (after the NFs stopped); -1 if it wrote none."
    )


def figures(ctx: Context, samples: list[dict[str, Any]], kills: list[dict[str, Any]]) -> None:
    t = [s["t_run_s"] / 60 for s in samples]
    caption = (
        f"Sampled every {ctx.params['sample_s']:g} s; {len(kills)} NFs killed (SIGKILL, every "
        f"{ctx.params['kill_every_s']:g} s, of {', '.join(ctx.params['kill_services'])})."
    )

    def fig(fid: str, title: str, ylabel: str, series: list[Series], **kw: Any) -> None:
        ctx.figure(Figure(fid, title, "time (min)", ylabel, series, caption=caption, **kw))

    def line(label: str, ys: list[float], n: int, **kw: Any) -> Series:
        return Series(label, t, ys, style=kw.pop("style", "-"), color=f"C{n}", **kw)

    fig(
        "memory",
        "Soak: the manager's resident memory and open fds",
        "VmRSS (MiB)",
        [
            line("squall-mgr VmRSS (MiB)", [s["rss_kb"] / 1024 for s in samples], 0),
            line("squall-mgr open fds", [s["fds"] for s in samples], 1, axis="right"),
        ],
        ylabel2="open fds",
    )
    fig(
        "mbufs",
        "Soak: mbufs in use",
        "mbufs",
        [line("mbufs in use", [s["mbufs_in_use"] for s in samples], 0)],
    )
    pools = sorted({p for s in samples for p in s["pools"]})

    def pool(p: str, key: str) -> list[float]:
        return [s["pools"].get(p, {}).get(key, 0) for s in samples]

    # New flows per second between samples (flows_created is a running count).
    rate = [0.0] + [
        (b["flows_created"] - a["flows_created"]) / max(b["t_run_s"] - a["t_run_s"], 1e-3)
        for a, b in zip(samples, samples[1:], strict=False)
    ]
    fig(
        "flows",
        "Soak: flow table and per-flow pools",
        "flows active / idle pool NFs",
        [line("flows active", [s["flows_active"] for s in samples], 0)]
        + [line(f"pool {p}: idle NFs", pool(p, "idle"), 1 + i) for i, p in enumerate(pools)]
        + [line("new flows per second", rate, 1 + len(pools), style=":", axis="right")],
        ylabel2="new flows per second",
    )
    fig(
        "nfs",
        "Soak: NFs live and pool NFs started (killed ones are replaced)",
        "NFs",
        [line("NFs live", [s["nfs_live"] for s in samples], 0)]
        + [line(f"pool {p}: NFs started", pool(p, "started"), 1 + i) for i, p in enumerate(pools)],
    )


EXPERIMENT = Experiment(
    name="soak",
    title="Soak: an hour of mixed traffic with NF kills and per-flow churn",
    seed="issue 20 (habits: soak)",
    about=(
        "One squall-mgr for duration_s (default 3600 s) in namespaces of its own "
        "(sqsoak-c 10.78.0.1 and sqsoak-s 10.78.0.2, scripts/netns.sh's SQUALL_NETNS_* set), "
        "carrying at once: real TCP between them (iperf3, wrk with keep-alive connections, ab "
        "with a connection per request, in turns) through a per-flow pool of squall-nf-fwd; "
        "the generator's UDP (64/570/1518 B, 20,000 packets/s) through a shared firewall -> "
        "l3fwd chain; the generator's short TCP connections (4 packets, 1,000 a second) "
        "through a per-flow pool of squall-nf-noop. Every kill_every_s (20 s) a random live "
        "NF of the per-flow pools is killed with SIGKILL (the director starts replacements). "
        "Every 5 s: the manager's VmRSS, open fds and threads (/proc), mbufs in use, NFs "
        "live, flows active and created, and each pool's idle, assigned and started NFs. At "
        "the end the traffic stops and the manager exits; its exit stats give the mbufs not "
        "home. Targets: no mbuf lost, RSS at the end within 5% of the start (after a warm-up), "
        "no fd gained."
    ),
    run=run,
    summary_keys=(
        "soak_leaked_mbufs",
        "ratio_mgr_rss_end_vs_start",
        "soak_fds_end_minus_start",
        "soak_nf_kills",
        "soak_flows_created",
    ),
    targets={
        "soak_leaked_mbufs": "== 0",
        "ratio_mgr_rss_end_vs_start": "<= 1.05",
        "soak_fds_end_minus_start": "<= 0",
    },
    needs_root=True,
    full_minutes=62,
)
