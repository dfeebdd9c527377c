"""Issue 18: a stateful firewall, and one with SNAT, on real TCP between the
test namespaces: Squall's conntrack (and conntrack -> nat) against the Linux
kernel's nftables ct state (and masquerade) and OVS-DPDK's ct() (and
ct(nat)) flows, one after another on the same two veth ends. Connections per
second with a new connection per request (ab, as seed 000 §6.2 used it) and
iperf3 throughput; ratios are Squall over the peer."""

from __future__ import annotations

import subprocess
from collections import Counter
from typing import Any

from squall.bench import config, netns, targets
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.manager import BenchError

TOOLS = ["iperf3", "ab", "ping", "ss"]
# Security groups equal to the peers' rulesets (squall.bench.peers):
# new connections from the client to the allowed ports and ICMP echo.
SG_RULES = "bind server web\n{allow}allow web in proto=icmp port=8\n"
SNAT_TABLE_SLOTS = 262_144  # room for every tuple the client's ports give, twice
# The ratios: Squall's system, the peer's, the figure's name part.
PAIRS = [
    ("squall-ct", "kernel-nft-ct", "conntrack_vs_nftables"),
    ("squall-ct", "ovs-ct", "conntrack_vs_ovs_ct"),
    ("squall-ct-nat", "kernel-nft-ct-nat", "conntrack_nat_vs_nftables_masquerade"),
    ("squall-ct-nat", "ovs-ct-nat", "conntrack_nat_vs_ovs_ct_nat"),
]
# A port no rule allows: a new connection to it must be dropped (the client
# times out), not refused by the server (it passed) nor accepted.
BLOCKED_PORT = 22
PROBE = (
    "import socket,sys\n"
    "s=socket.socket(); s.settimeout(1.5)\n"
    "try:\n"
    "    s.connect((sys.argv[1], int(sys.argv[2]))); print('connected')\n"
    "except socket.timeout: print('dropped')\n"
    "except ConnectionRefusedError: print('refused')\n"
)


def _slug(name: str) -> str:
    return name.replace("-", "_")


def squall_systems(ctx: Context, port_kind: str) -> list[targets.Squall]:
    from squall.bench.peers import ALLOWED_TCP_PORTS, SNAT_IP

    rules = ctx.workdir / "ct-peers-sg.rules"
    allow = "".join(f"allow web in proto=tcp port={p}\n" for p in ALLOWED_TCP_PORTS)
    rules.write_text(SG_RULES.format(allow=allow))
    rules.chmod(0o644)
    ct = config.Service("ct", "squall-nf-conntrack", ["--rules", str(rules)])
    nat = config.Service(
        "nat",
        "squall-nf-nat",
        [f"--snat=10.77.0.1/32={SNAT_IP}", f"--table-size={SNAT_TABLE_SLOTS}"],
    )
    return [
        targets.Squall(
            ctx.workdir, ctx.manager_name(), name="squall-ct", port_kind=port_kind, services=[ct]
        ),  # fmt: skip
        targets.Squall(
            ctx.workdir,
            ctx.manager_name(),
            name="squall-ct-nat",
            port_kind=port_kind,
            services=[ct, nat],
            reverse_return=True,
            snat_neighbour=True,
        ),  # fmt: skip
    ]


def probe(port: int) -> str:
    """What a new connection from client to server:port meets."""
    cmd = netns.in_ns(netns.CLIENT_NS, ["python3", "-c", PROBE, netns.SERVER_IP, str(port)])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    return r.stdout.strip() or f"error: {r.stderr.strip()[-200:]}"


def server_peers() -> dict[str, int]:
    """The addresses the server's closed connections (TIME_WAIT) came from:
    the client's own, or the SNAT address."""
    cmd = netns.in_ns(netns.SERVER_NS, ["ss", "-Htn", "state", "time-wait"])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    peers: Counter[str] = Counter()
    for line in r.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 4:
            peers[cols[-1].rsplit(":", 1)[0]] += 1
    return dict(peers)


def records(system: Any) -> dict[str, Any]:
    """What the system's own counters say it did (NF counters, nft rule
    counters, OpenFlow flow packet counts)."""
    try:
        if isinstance(system, targets.Squall) and system.manager is not None:
            out: dict[str, Any] = {}
            for name, nf in system.manager.nfs().items():
                out[name] = dict(nf.get("counters") or {})
            out["drops"] = {k: v for k, v in system.manager.stats()["drops"].items() if v}
            return out
        if hasattr(system, "counters"):
            return dict(system.counters())
        if hasattr(system, "flow_stats"):
            return dict(system.flow_stats())
    except Exception as e:  # noqa: BLE001 - records are extra; the run goes on
        return {"error": f"{type(e).__name__}: {e}"}
    return {}


def client_timestamps() -> list[str]:
    """The client's TCP timestamps without a per-connection offset, for every
    system alike. ab reuses a client port within a second; with Linux's
    random offsets the new connection's timestamps may be older than those
    the server's TIME_WAIT socket for that port pair keeps, and the server
    answers its SYN with an ACK for the old connection (PAWS). Through the
    kernel's tracker and Squall's the client sees that ACK, resets, and its
    next SYN gets through; OVS's userspace tracker drops it as out of window
    (conntrack_tcp_seq_chk_failed), and the connection stalls until ab's
    timeout."""
    cmd = netns.in_ns(netns.CLIENT_NS, ["sysctl", "-qw", "net.ipv4.tcp_timestamps=2"])
    subprocess.run(cmd, check=True, timeout=10)
    return cmd


class StartFailed(Exception):
    pass


def measure(
    ctx: Context, sname: str, system: Any, requests: int, conc: int, iperf_s: float, body: int
) -> dict[str, list[float]]:
    ctx.command(["scripts/netns.sh", "up"], what="namespaces")
    netns.netns("up")
    ctx.command(client_timestamps(), what="client TCP timestamps")
    servers: list[netns.Background] = []
    r: dict[str, list[float]] = {}
    try:
        servers.append(netns.start_iperf3_server(ctx.workdir))
        http, http_name = netns.start_http_server(ctx.workdir, body)
        servers.append(http)
        ctx.params["http_server"] = http_name
        try:
            system.start()
            ping_s = netns.wait_path()
        except Exception as e:  # noqa: BLE001 - PeerError, BenchError: reported as why
            raise StartFailed(str(e)) from e
        if isinstance(system, targets.Squall) and system.manager is not None:
            ctx.command(system.manager.command, what="squall-mgr", label=sname,
                        config=system.manager.config_text)  # fmt: skip
        blocked = probe(BLOCKED_PORT)
        ctx.sample("start", system=sname, first_ping_s=round(ping_s, 3),
                   describe=getattr(system, "describe", lambda: sname)(),
                   blocked_port=BLOCKED_PORT, blocked_port_meets=blocked)  # fmt: skip
        if blocked != "dropped":
            raise BenchError(
                f"{sname}: a new connection to port {BLOCKED_PORT} was {blocked}, not dropped: "
                "the system does not filter as the others do"
            )
        for rep in range(ctx.reps):
            prep = getattr(system, "between_reps", None)
            done = prep() if prep is not None and rep > 0 else None
            if done:
                ctx.note(f"{sname} before rep {rep}: {done}")
            a, cmd = netns.ab(requests, conc)
            ctx.command(cmd, what="ab", system=sname)
            seen = server_peers()
            ip, cmd = netns.iperf3(iperf_s)
            ctx.command(cmd, what="iperf3", system=sname)
            ctx.sample("tcp", system=sname, rep=rep, ab=a, iperf3=ip, server_saw=seen)
            if a["failed"]:
                ctx.note(f"{sname} rep {rep}: ab had {a['failed']} failed requests")
            r.setdefault("cps", []).append(a["rps"])
            r.setdefault("p99_us", []).append(a["p99_us"])
            r.setdefault("gbps", []).append(ip["gbps"])
            r.setdefault("retransmits", []).append(ip["retransmits"])
            ctx.log(
                f"{sname} rep {rep}: ab {a['rps']:,.0f} connections/s "
                f"({a['complete']} complete, {a['failed']} failed, p99 {a['p99_us']:.0f} us), "
                f"iperf3 {ip['gbps']:.2f} Gbit/s ({ip['retransmits']} retransmits); "
                f"server saw {seen}"
            )
        rec = records(system)
        if hasattr(system, "nat_exhausted"):
            rec["nat_refused_log_lines"] = system.nat_exhausted()
        ctx.sample("counters", system=sname, counters=rec)
        ctx.log(f"{sname} counters: {rec}")
    finally:
        try:
            system.stop()
        finally:
            for srv in servers:
                srv.stop()
    return r


def run(ctx: Context) -> None:
    requests = ctx.param("ab_requests", 20_000, 1_000)
    conc = ctx.param("ab_concurrency", 16)
    iperf_s = ctx.param("iperf_s", 5.0, 1.0)
    body = ctx.param("http_body_bytes", 1024)
    port_kind = ctx.param("port_kind", "af_xdp")
    missing = netns.missing_tools(TOOLS)
    if missing:
        raise BenchError(f"missing tools: {', '.join(missing)} (scripts/setup.sh installs them)")
    targets.require_netns(TOOLS)
    systems: dict[str, Any] = {s.name: s for s in squall_systems(ctx, port_kind)}
    try:
        from squall.bench.peers import stateful_peers

        for p in stateful_peers():
            systems[p.name] = p
    except Exception as e:  # noqa: BLE001 - no peers: Squall's own runs still count
        ctx.unavailable["peers"] = f"squall.bench.peers not importable: {type(e).__name__}: {e}"
    # --quick: both of Squall's and the firewall peers (test_peers covers the
    # peers' SNAT variants), so the suite's run stays short.
    quick = ["squall-ct", "squall-ct-nat", "kernel-nft-ct", "ovs-ct"]
    wanted = ctx.systems or ([s for s in quick if s in systems] if ctx.quick else list(systems))
    unknown = [s for s in wanted if s not in systems]
    if unknown:
        raise BenchError(f"unknown systems {', '.join(unknown)}: known {', '.join(systems)}")
    ctx.params["systems"] = wanted

    res: dict[str, dict[str, list[float]]] = {}
    try:
        for sname in wanted:
            system = systems[sname]
            why = system.unavailable()
            if why is not None:
                ctx.unavailable[sname] = why
                ctx.log(f"{sname}: not run: {why}")
                continue
            for attempt in (1, 2):
                try:
                    res[sname] = measure(ctx, sname, system, requests, conc, iperf_s, body)
                    break
                except StartFailed as e:
                    ctx.unavailable[sname] = f"start failed: {e}"
                    ctx.log(f"{sname}: start failed: {e}")
                    break
                except BenchError as e:
                    ctx.note(f"{sname}, attempt {attempt}: {e}")
                    ctx.log(f"{sname}: attempt {attempt} failed: {e}")
                    if attempt == 2:
                        ctx.unavailable[sname] = f"measurement failed twice: {e}"
    finally:
        netns.netns("down")

    summarize(ctx, res)
    figures(ctx, res, requests, conc, iperf_s, body)
    ctx.note(
        "squall-ct: squall-mgr (af_xdp ports, else af_packet; manager polling core 0) with "
        "one squall-nf-conntrack (sleep mode, core 1) whose security group allows new "
        "connections from the client to the allowed ports and ICMP echo; squall-ct-nat: "
        "conntrack -> nat (SNAT of the client to 10.77.0.254) out, nat -> conntrack back. "
        "kernel-nft-ct(-nat): namespace sqct routes between the ends (proxy ARP) with an "
        "nftables forward chain: ct state established,related accept, invalid drop, new to "
        "the allowed ports accept, the rest dropped (and masquerade out of sq-s1). "
        "ovs-ct(-nat): ovs-vswitchd (DPDK, userspace datapath, PMD on core 0) with "
        "ct(zone=1) / ct(commit,zone=1) flows (and ct(nat), nat(src=10.77.0.254:1024-65535)). "
        "Before measuring, each system must drop a new connection to port 22 (samples "
        "'start')."
    )
    ctx.note(
        "ovs-ct-nat's connection table is flushed before each repetition after the first "
        "(no connection is open then): OVS's userspace NAT refuses new connections "
        "('Unable to NAT due to tuple space exhaustion', counted in its counters sample as "
        "nat_refused_log_lines) once the earlier repetitions' closed connections fill it "
        "and the client reuses its ports (measured while building this bench: repetitions "
        "after the first ran at about 1,600 connections/s, SYNs waiting on retransmission). "
        "The kernel and Squall run all repetitions on one table."
    )
    ctx.note(
        "The client's TCP timestamps have no per-connection offset (tcp_timestamps=2 in ns "
        "client, for every system): with them, a reused client port's SYN can be older "
        "than the server's TIME_WAIT socket remembers, the server answers with an ACK for "
        "the old connection, and OVS's tracker drops that ACK, so the client never resets "
        "and the connection stalls (measured while building this bench: ab timed out)."
    )
    ctx.note(
        "The server reaches 10.77.0.254 at the client's MAC (a static neighbour) for Squall "
        "and OVS, which carry frames at L2; the kernel owns the address on its router. The "
        "server's TIME_WAIT sockets after ab show which address it saw (samples 'tcp', "
        "server_saw)."
    )


def summarize(ctx: Context, res: dict[str, dict[str, list[float]]]) -> None:
    med: dict[str, dict[str, float]] = {}
    for sname, r in res.items():
        s = _slug(sname)
        med[sname] = {k: spread(v)["median"] for k, v in r.items()}
        ctx.summary[f"cps_ab_{s}"] = rounded(med[sname]["cps"], 0)
        ctx.summary[f"p99_us_ab_{s}"] = rounded(med[sname]["p99_us"], 0)
        ctx.summary[f"gbps_iperf3_{s}"] = rounded(med[sname]["gbps"])
        ctx.summary[f"retransmits_iperf3_{s}"] = rounded(med[sname]["retransmits"], 0)
    for mine, peer, what in PAIRS:
        if mine in med and peer in med:
            if med[peer]["cps"] > 0:
                ctx.summary[f"ratio_{what}"] = rounded(med[mine]["cps"] / med[peer]["cps"])
            if med[peer]["gbps"] > 0:
                ctx.summary[f"ratio_iperf3_{what}"] = rounded(med[mine]["gbps"] / med[peer]["gbps"])


def figures(
    ctx: Context,
    res: dict[str, dict[str, list[float]]],
    requests: int,
    conc: int,
    iperf_s: float,
    body: int,
) -> None:
    names = list(res)
    for key, unit, fid, title in (
        ("cps", "connections per second", "cps",
         f"ab, a new connection per request, {conc} at once, {body} B bodies"),
        ("gbps", "TCP throughput (Gbit/s)", "iperf3", f"iperf3, 1 TCP stream, {iperf_s:g} s"),
    ):  # fmt: skip
        series = []
        for i, (label, group) in enumerate(
            (("stateful firewall", [n for n in names if not n.endswith("-nat")]),
             ("stateful firewall + SNAT", [n for n in names if n.endswith("-nat")]))
        ):  # fmt: skip
            if not group:
                continue
            sp = [spread(res[n][key]) for n in group]
            series.append(
                Series(
                    label,
                    group,
                    [s["median"] for s in sp],
                    [s["min"] for s in sp],
                    [s["max"] for s in sp],
                    "o",
                    color=f"C{i}",
                )  # fmt: skip
            )
        ctx.figure(
            Figure(
                fid,
                f"Stateful firewall on real TCP, Squall and peers: {title}",
                "system",
                unit,
                series,
                xscale="category",
                caption="Same veth ends (sq-c1, sq-s1), same rules; systems one after another; "
                "median with min..max over repetitions.",
            )
        )


EXPERIMENT = Experiment(
    name="ct_peers",
    title="Stateful firewall (and SNAT) on real TCP: Squall's conntrack, nftables, OVS ct()",
    seed="issue 18 benchmarks: ratio_conntrack_vs_nftables, ratio_conntrack_vs_ovs_ct",
    about=(
        "scripts/netns.sh's ns client (10.77.0.1) and ns server (10.77.0.2), joined only "
        "through sq-c1 and sq-s1. Each system in turn joins the two ends and lets new "
        "connections from the client to ports 5201 (iperf3) and 8080 (nginx, one worker, 1 "
        "KiB) and ICMP echo through, with their established and related packets, and drops "
        "the rest: squall-ct (squall-nf-conntrack with a security group), kernel-nft-ct (an "
        "nftables ct state forward chain on a router namespace), ovs-ct (OVS-DPDK, ct() "
        "flows); then the same with SNAT of the client: squall-ct-nat (conntrack -> nat), "
        "kernel-nft-ct-nat (+ masquerade), ovs-ct-nat (ct(nat)). Through each: ab with a "
        "new connection per request (20,000 requests, 16 at once: connections per second) "
        "and iperf3 (one TCP stream, 5 s); 3 repetitions. ratio_conntrack_vs_nftables and "
        "ratio_conntrack_vs_ovs_ct: Squall's connections per second over the peer's."
    ),
    run=run,
    summary_keys=("cps_ab_squall_ct", "gbps_iperf3_squall_ct"),
    needs_root=True,
    needs_generator=False,
    uses_systems=True,
    full_minutes=6,
)
