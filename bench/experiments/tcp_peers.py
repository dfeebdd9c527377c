"""Real TCP through Squall and its peers on the same two veth ends: iperf3
throughput and wrk HTTP requests/s between ns client and ns server, reported
as ratios to Squall. Issue 5 "peers in the same run"; seed 000 §6 setups."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from squall.bench import netns, profile, targets
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread
from squall.bench.manager import BenchError
from squall.bench.paths import BUILD

# af_xdp's preferred busy polling (its default busy_budget, 64) makes every
# empty rx poll a recvfrom(); off, the manager polls its rings alone and, idle,
# sleeps: measured best here on iperf3 and wrk (issue 17; see the variants).
XDP_TUNED = ",busy_budget=0"
# Every packet through all three NFs: the L3 forwarder last, whose routes
# send the hosts' packets out (sq_out ends the chain: with it in the middle,
# as before 2026-11-28, the packets left there and the L2 forwarder got none).
CHAIN3 = ["firewall", "fwd", "l3fwd"]
# What examples/demo.yaml runs, chosen by this experiment's variants (issue
# 17): af_xdp ports with rx rings of 4,096 (a 1,024 ring overflows while the
# core it is read on runs something else; counted in rx_eth_missed), the NFs
# on the manager's own core (core 0, which it yields to them while they hold
# packets), the manager asleep when idle. The other core is left to the
# hosts' TCP stacks, as OVS-DPDK's one PMD core leaves it. The manager gives
# the NFs its core after up to 4 rounds that moved packets (core_yield_rounds;
# -yield1: after every round): on veth a round is mostly its transmit, and
# what arrives meanwhile then rides with the NFs' next turn.
BASE: dict[str, Any] = {
    "port_kind": "af_xdp",
    "xdp_args": XDP_TUNED,
    "rx_desc": 4096,
    "manager": {"nf_core": 0, "core_yield_rounds": 4},
}


def _variant(kinds: list[str], **change: Any) -> dict[str, Any]:
    """BASE with the chain `kinds` and `change` over it (manager keys merged)."""
    kw = {**BASE, "kinds": kinds, **change}
    kw["manager"] = {**BASE["manager"], **change.get("manager", {})}
    return kw


LOAD = {"idle_after_load": True}

# name -> Squall's keyword arguments (targets.Squall): "squall" is the
# default a user gets (examples/demo.yaml), the rest one change each from it.
SQUALL_SYSTEMS: dict[str, dict[str, Any]] = {
    "squall": _variant(["fwd"]),
    "squall-nf-core1": _variant(["fwd"], manager={"nf_core": 1}),
    "squall-nice-10": _variant(["fwd"], manager={"nice": -10}),
    "squall-yield1": _variant(["fwd"], manager={"core_yield_rounds": 1}),
    "squall-rx1024": _variant(["fwd"], rx_desc=1024),
    "squall-poll": _variant(["fwd"], manager={"idle_sleep_max_us": 0}),
    "squall-busypoll": _variant(["fwd"], xdp_args=""),
    "squall-af_packet": _variant(["fwd"], port_kind="af_packet"),
    # A chain's gaps under heavy traffic are not idleness: the manager
    # sleeps only after idle_after_us stretched by its load (docs/config.md
    # idle_after_load; examples/direct.yaml). -idle-fixed: after 100 us flat.
    "squall-chain3": _variant(CHAIN3, direct=True, manager=LOAD),
    "squall-chain3-idle-fixed": _variant(CHAIN3, direct=True),
    "squall-chain3-yield1": _variant(CHAIN3, direct=True, manager={**LOAD, "core_yield_rounds": 1}),
    "squall-chain3-mgr": _variant(CHAIN3, manager=LOAD),
    "squall-chain3-nice-10": _variant(CHAIN3, direct=True, manager={**LOAD, "nice": -10}),
    "squall-chain3-nf-core1": _variant(CHAIN3, direct=True, manager={**LOAD, "nf_core": 1}),
    # The hops' nice before 2026-11-27, counted forward from the first hop
    # (0, -2, -4: the later hops above the manager), for the chain's order now
    # (4, 2, 0: none above the manager, its transmit the chain's last stage).
    "squall-chain3-hops-above": _variant(
        CHAIN3, direct=True, manager=LOAD, service_keys={"nice": -4}
    ),
}
TOOLS = ["iperf3", "wrk", "ping", "ss"]
# The systems that forward with DPDK on core 0 (profiled: see profile.py),
# by name prefix -> the comms of their processes on that core.
FWD_COMMS = {
    "squall": r"^squall-",
    "ovs-dpdk": r"^(pmd|ovs-vswitchd)",
    "testpmd-io": r"^(rte-worker|lcore-worker|dpdk-testpmd)",
}
PROFILE_CPU = 0
# The hand-over floor: a token round 4 processes on core 0 (the manager and a
# 3-NF chain), each spinning with sched_yield() until it holds it.
SWITCH_RING = BUILD / "bench" / "switch_ring"
YIELD_RING = ["yield", "4", "100000", str(PROFILE_CPU)]


def _slug(name: str) -> str:
    return name.replace("-", "_")


class StartFailed(Exception):
    pass


@dataclass(frozen=True)
class Traffic:
    """What runs through each system (the run's parameters)."""

    iperf_s: float
    wrk_s: float
    conns: int
    body: int
    profile_s: float  # 0: no profile


def measure(
    ctx: Context, sname: str, system: targets.System, rep: int, tr: Traffic
) -> dict[str, float]:
    """Fresh namespaces and servers, the system joined, one run of iperf3
    and one of wrk (repetition rep), in the first repetition of a DPDK
    system also a profiled iperf3 (core_split); everything stopped again."""
    if rep == 0:
        ctx.command(["scripts/netns.sh", "up"], what="namespaces")
    netns.netns("up")
    servers: list[netns.Background] = []
    r: dict[str, float] = {}
    try:
        servers.append(netns.start_iperf3_server(ctx.workdir))
        http, http_name = netns.start_http_server(ctx.workdir, tr.body)
        servers.append(http)
        ctx.params["http_server"] = http_name
        t0 = time.monotonic()
        try:
            system.start()
            ping_s = netns.wait_path()
        except Exception as e:  # noqa: BLE001 - PeerError, BenchError: reported as why
            raise StartFailed(str(e)) from e
        if rep == 0 and isinstance(system, targets.Squall) and system.manager is not None:
            ctx.command(system.manager.command, what="squall-mgr", label=sname,
                        config=system.manager.config_text)  # fmt: skip
        ctx.sample("start", system=sname, start_s=round(time.monotonic() - t0, 3),
                   first_ping_s=round(ping_s, 3))  # fmt: skip
        ip, cmd = netns.iperf3(tr.iperf_s)
        ctx.command(cmd, what="iperf3", system=sname)
        w, cmd = netns.wrk(tr.wrk_s, tr.conns)
        ctx.command(cmd, what="wrk", system=sname)
        ctx.sample("tcp", system=sname, rep=rep, iperf3=ip, wrk=w)
        r = {"gbps": ip["gbps"], "retransmits": ip["retransmits"], "rps": w["rps"],
             "p99_us": w["p99_us"]}  # fmt: skip
        ctx.log(
            f"{sname} rep {rep}: iperf3 {ip['gbps']:.2f} Gbit/s "
            f"({ip['retransmits']} retransmits), wrk {w['rps']:,.0f} req/s, "
            f"p99 {w['p99_us']:.0f} us"
        )
        if rep == 0 and tr.profile_s > 0 and (fwd := _fwd_comms(sname)) is not None:
            r.update(core_split(ctx, sname, fwd, tr.profile_s))
            r.update(wrk_switches(ctx, sname, system, tr.profile_s, tr.conns))
    finally:
        system.stop()  # idempotent, also after a failed or interrupted start
        for srv in servers:
            srv.stop()
    return r


def _fwd_comms(sname: str) -> str | None:
    return next((v for k, v in FWD_COMMS.items() if sname.startswith(k)), None)


def _during(
    traffic: Callable[[], dict[str, Any]], measure: Callable[[], list[str]]
) -> tuple[dict[str, Any], list[str]]:
    """traffic() in a thread, measure() from 0.5 s into it: traffic's
    result and measure's command (traffic's error raised here)."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["result"] = traffic()
        except BenchError as e:
            done["error"] = e

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    cmd = measure()
    t.join()
    if "error" in done:
        raise done["error"]
    return done["result"], cmd


def core_split(ctx: Context, sname: str, fwd: str, seconds: float) -> dict[str, float]:
    """An iperf3 of seconds + 1 with core 0 sampled for seconds from 0.5 s
    in: the shares of its time (profile.shares) as core0_<share>_pct."""
    prof = profile.CoreProfile(PROFILE_CPU, ctx.workdir, name=sname)
    ip, cmd = _during(lambda: netns.iperf3(seconds + 1.0)[0], lambda: prof.record(seconds))
    ctx.command(cmd, what="perf", system=sname)
    split = prof.split(fwd)
    counts = {"switches_per_s": prof.switches_per_s, "wakeups_per_s": prof.wakeups_per_s}
    ctx.sample("profile", system=sname, cpu=PROFILE_CPU, gbps=ip["gbps"], **split,
               **counts)  # fmt: skip
    ctx.log(
        f"{sname} core {PROFILE_CPU}: "
        + ", ".join(f"{k} {v}%" for k, v in split.items())
        + f", {prof.switches_per_s} switches/s, {prof.wakeups_per_s} wakeups/s"
    )
    r: dict[str, float] = {f"core0_{k}_pct": v for k, v in split.items()}
    r.update({f"core0_{k}": v for k, v in counts.items() if v is not None})
    return r


def core_yields(system: targets.System) -> tuple[int, int] | None:
    """Squall's: (sched_yields so far of its manager and NFs on the shared
    core, packets its chain's first hop took), from telemetry; None for a
    peer."""
    mgr = system.manager if isinstance(system, targets.Squall) else None
    if mgr is None:
        return None
    nfs = mgr.nfs().values()
    yields = int(mgr.stats()["idle"]["core_yields"]) + sum(int(n["spin_yields"]) for n in nfs)
    chain = next(iter(mgr.chains().values()))
    return yields, int(chain["rx_pkts"])


def wrk_switches(
    ctx: Context, sname: str, system: targets.System, seconds: float, conns: int
) -> dict[str, float]:
    """A wrk of seconds + 1 with core 0's context switches counted for
    seconds from 0.5 s in: per second, and per request (wrk's rate). A
    forwarder of several processes on one core pays a task switch per hop
    per burst, and request/response traffic comes in small bursts. For
    Squall also the sched_yields its manager and NFs made over the wrk, per
    packet into the chain (core0_wrk_yields_per_pkt): a hop hands the core
    on with one."""
    prof = profile.CoreProfile(PROFILE_CPU, ctx.workdir, name=sname)
    y0 = core_yields(system)
    w, cmd = _during(
        lambda: netns.wrk(seconds + 1.0, conns)[0], lambda: prof.count_switches(seconds)
    )
    y1 = core_yields(system)
    ctx.command(cmd, what="perf stat", system=sname)
    if prof.switches_per_s is None:
        return {}
    rps = w["rps"]
    per_req = round(prof.switches_per_s / rps, 2) if rps else None
    ctx.sample("wrk_switches", system=sname, cpu=PROFILE_CPU, rps=rps,
               switches_per_s=prof.switches_per_s, switches_per_req=per_req)  # fmt: skip
    ctx.log(f"{sname} core {PROFILE_CPU} under wrk: {prof.switches_per_s} switches/s, "
            f"{per_req} a request")  # fmt: skip
    r = {"core0_wrk_switches_per_s": float(prof.switches_per_s)}
    if per_req is not None:
        r["core0_wrk_switches_per_req"] = per_req
    if y0 is not None and y1 is not None and y1[1] > y0[1]:
        r["core0_wrk_yields_per_pkt"] = round((y1[0] - y0[0]) / (y1[1] - y0[1]), 2)
        ctx.log(f"{sname} under wrk: {r['core0_wrk_yields_per_pkt']} yields a packet")
    return r


def measure_twice(
    ctx: Context, sname: str, system: targets.System, rep: int, tr: Traffic
) -> dict[str, float] | None:
    """measure(), once more if the first attempt fails; None (and the system
    in ctx.unavailable with why) if it cannot start or fails twice."""
    for attempt in (1, 2):
        try:
            return measure(ctx, sname, system, rep, tr)
        except StartFailed as e:
            ctx.unavailable[sname] = f"start failed: {e}"
            ctx.log(f"{sname}: start failed: {e}")
            return None
        except BenchError as e:
            # Most often another user of the namespaces: netns.sh up kills
            # what runs in them.
            ctx.note(f"{sname}, rep {rep}, attempt {attempt}: {e}")
            ctx.log(f"{sname}: attempt {attempt} failed: {e}")
            if attempt == 2:
                ctx.unavailable[sname] = f"measurement failed twice: {e}"
    return None


def yield_hop_ns(ctx: Context) -> float | None:
    """What one hand-over of core 0 by sched_yield costs here (switch_ring
    yield: the syscall, the switch, and the yields of tasks picked without
    work), measured before the systems run; None if it cannot run."""
    cmd = [str(SWITCH_RING), *YIELD_RING]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)
        ns = float(json.loads(out.stdout)["ns_per_hop"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        ctx.unavailable["yield_hop"] = f"{' '.join(cmd)}: {e}"
        return None
    ctx.command(cmd, what="switch_ring yield")
    ctx.log(f"a yield hand-over of core {PROFILE_CPU}: {ns:.0f} ns")
    return ns


def run(ctx: Context) -> None:
    iperf_s = ctx.param("iperf_s", 5.0, 1.0)
    wrk_s = ctx.param("wrk_s", 5.0, 1.0)
    conns = ctx.param("wrk_connections", 16)
    body = ctx.param("http_body_bytes", 1024)
    profile_s = ctx.param("profile_s", 2.0, 1.0)
    if profile_s > 0 and (why := profile.unavailable()) is not None:
        ctx.unavailable["profile"] = why
        profile_s = 0.0
    tr = Traffic(iperf_s, wrk_s, conns, body, profile_s)
    hop_ns = yield_hop_ns(ctx) if profile_s > 0 else None
    if hop_ns is not None:
        ctx.summary["ns_per_yield_hop_core0"] = rounded(hop_ns, 0)
    peers, why_no_peers = targets.peers()
    if why_no_peers:
        ctx.unavailable["peers"] = why_no_peers
    by_name: dict[str, Any] = {}
    for sname, kw in SQUALL_SYSTEMS.items():
        by_name[sname] = targets.Squall(ctx.workdir, ctx.manager_name(), name=sname, **kw)
    for p in peers:
        by_name[p.name] = p
    default = (
        ["squall", "squall-chain3", *[p.name for p in peers]]
        if ctx.quick
        else [*SQUALL_SYSTEMS, *[p.name for p in peers]]
    )
    wanted = ctx.systems or default
    ctx.params["systems"] = wanted
    unknown = [s for s in wanted if s not in by_name]
    if unknown:
        raise BenchError(f"unknown systems {', '.join(unknown)}: known {', '.join(by_name)}")
    if "squall" not in wanted:
        wanted = ["squall", *wanted]  # the reference of every ratio
    missing = netns.missing_tools(TOOLS)
    if missing:
        raise BenchError(f"missing tools: {', '.join(missing)} (scripts/setup.sh installs them)")

    runnable = []
    for sname in wanted:
        why = by_name[sname].unavailable()
        if why is not None:
            ctx.unavailable[sname] = why
            ctx.log(f"{sname}: not run: {why}")
        else:
            runnable.append(sname)
    # Repetitions interleaved (each system once per round): a drift of the
    # VM's speed over the run falls on every system alike, not on whichever
    # ran last.
    res: dict[str, dict[str, list[float]]] = {}
    try:
        for rep in range(ctx.reps):
            for sname in [n for n in runnable if n not in ctx.unavailable]:
                r = measure_twice(ctx, sname, by_name[sname], rep, tr)
                if r is None:
                    res.pop(sname, None)  # no mix of some repetitions and not others
                    continue
                for key, v in r.items():
                    res.setdefault(sname, {}).setdefault(key, []).append(v)
    finally:
        netns.netns("down")

    if "squall" not in res:
        raise BenchError(f"squall did not run: {ctx.unavailable.get('squall', '?')}")
    sq_gbps = spread(res["squall"]["gbps"])["median"]
    sq_rps = spread(res["squall"]["rps"])["median"]
    for sname, r in res.items():
        s = _slug(sname)
        g = spread(r["gbps"])["median"]
        q = spread(r["rps"])["median"]
        ctx.summary[f"gbps_iperf3_{s}"] = rounded(g)
        ctx.summary[f"rps_wrk_{s}"] = rounded(q, 0)
        ctx.summary[f"p99_us_wrk_{s}"] = rounded(spread(r["p99_us"])["median"], 1)
        for share in profile.SHARES:
            if (v := r.get(f"core0_{share}_pct")) is not None:
                ctx.summary[f"core0_{share}_pct_{s}"] = v[0]
        for count in (
            "switches_per_s",
            "wakeups_per_s",
            "wrk_switches_per_s",
            "wrk_switches_per_req",
            "wrk_yields_per_pkt",
        ):
            if (v := r.get(f"core0_{count}")) is not None:
                ctx.summary[f"core0_{count}_{s}"] = v[0]
        # Core 0's switches at the floor's price: its share spent handing over.
        for count, pct in (
            ("switches_per_s", "switch_pct"),
            ("wrk_switches_per_s", "wrk_switch_pct"),
        ):
            if hop_ns is not None and (v := r.get(f"core0_{count}")) is not None:
                ctx.summary[f"core0_{pct}_{s}"] = rounded(v[0] * hop_ns / 1e7, 1)
        if sname != "squall":
            ctx.summary[f"ratio_iperf3_{s}_vs_squall"] = rounded(g / sq_gbps) if sq_gbps else None
            ctx.summary[f"ratio_wrk_{s}_vs_squall"] = rounded(q / sq_rps) if sq_rps else None
    # Issue 17's figures: Squall over its peers (the 1-NF and 3-NF chains);
    # and each DPDK system over testpmd's io forwarding, the least a DPDK
    # forwarder does on these ports (peers/testpmd.py), and that over the
    # kernel's chain.
    for mine, peer in (
        ("squall", "ovs-dpdk"),
        ("squall-chain3", "ovs-dpdk"),
        ("squall-chain3", "kernel-nft-chain"),
        ("squall-chain3", "squall-chain3-hops-above"),
        ("squall-chain3", "squall-chain3-idle-fixed"),
        ("squall-chain3", "squall-chain3-yield1"),
        ("squall", "squall-yield1"),
        ("squall-chain3-idle-fixed", "ovs-dpdk"),
        ("squall", "kernel-bridge"),
        ("squall", "testpmd-io"),
        ("squall-chain3", "testpmd-io"),
        ("ovs-dpdk", "testpmd-io"),
        ("testpmd-io", "kernel-nft-chain"),
    ):
        if mine not in res or peer not in res:
            continue
        a, b = _slug(mine), _slug(peer)
        for tool, key in (("iperf3", "gbps"), ("wrk", "rps")):
            num, den = spread(res[mine][key])["median"], spread(res[peer][key])["median"]
            ctx.summary[f"ratio_{tool}_{a}_vs_{b}"] = rounded(num / den) if den else None
            # Paired by round (the two ran minutes apart, in the same VM
            # weather): in how many rounds mine carried more. A ratio of
            # medians near 1.0 is a verdict only if this agrees with it.
            rounds = zip(res[mine][key], res[peer][key], strict=True)
            ctx.summary[f"reps_won_{tool}_{a}_vs_{b}"] = sum(x > y for x, y in rounds)
        ctx.summary[f"ratio_p99_wrk_{a}_vs_{b}"] = rounded(
            spread(res[mine]["p99_us"])["median"] / spread(res[peer]["p99_us"])["median"]
        )

    names = list(res)
    for key, unit, fid, title in (
        ("gbps", "TCP throughput (Gbit/s)", "iperf3", f"iperf3, 1 TCP stream, {iperf_s:g} s"),
        ("rps", "HTTP requests/s", "wrk", f"wrk, {conns} connections, {body} B bodies"),
    ):
        sp = [spread(res[n][key]) for n in names]
        ctx.figure(
            Figure(
                fid,
                f"Squall and peers between two namespaces: {title}",
                "system",
                unit,
                [
                    Series(
                        "median (min..max)",
                        names,
                        [s["median"] for s in sp],
                        [s["min"] for s in sp],
                        [s["max"] for s in sp],
                        "o",
                    )
                ],  # fmt: skip
                xscale="category",
                caption="Same veth ends (sq-c1, sq-s1), same traffic; repetitions interleaved.",
            )
        )
    ctx.note(
        "squall: af_xdp ports (busy_budget=0), one squall-nf-fwd in sleep mode, the manager "
        "asleep when idle (idle_sleep_max_us 1000, the default), giving the NFs its core after "
        "up to 4 rounds that moved packets (core_yield_rounds 4; squall-yield1, "
        "squall-chain3-yield1: after every round, the default and as before 2026-11-28); "
        "squall-poll: the same with the manager's busy poll (idle_sleep_max_us 0: Squall "
        "before issue 17); "
        "squall-busypoll: af_xdp's default preferred busy polling (busy_budget 64); "
        "squall-af_packet: af_packet ports (rings of 4,096 frames, the rx_desc; 512 before "
        "2026-11-28, when af_packet ignored it); squall-chain3: firewall, L2 forwarder, L3 "
        "forwarder (routes by the two hosts' addresses out of their ports) as a direct chain "
        "(NF to NF), all three on every packet, the manager's idle_after_load on (its "
        "idle_after_us stretched by its load: a gap in heavy traffic is not idleness); "
        "squall-chain3-idle-fixed: the same with idle_after_load off (the default: a "
        "sleep after 100 us with nothing moved, as before 2026-11-28); "
        "squall-chain3-mgr: the same chain through the manager at every hop; squall-nf-core1: "
        "the NF on core 1; squall-nice-10, squall-chain3-nice-10: manager.nice -10 (the "
        "manager's lcore and the NFs on its core above the other tasks of its scheduling "
        "group; the default is 0); squall-chain3-hops-above: the chain's hops at nice 0, -2, "
        "-4 (hop_nice_step counted forward from the first hop, as before 2026-11-27: the "
        "later hops above the manager on its core) where squall-chain3 has 4, 2, 0 (none "
        "above the manager, whose transmit is the chain's last stage). "
        "The manager and the NFs run on core 0 (the NFs get "
        "the core when the manager yields it), as OVS-DPDK's PMD and testpmd's forwarding "
        "lcore do; iperf3, "
        "wrk and the servers share both cores with them. testpmd-io: DPDK's testpmd in io mode "
        "on the same af_xdp ports (busy_budget=0, 4,096 rx descriptors), forwarding on core 0: "
        "the least a DPDK forwarder does. core0_*_pct: a 3 s iperf3 in each DPDK system's "
        "first repetition with core 0 sampled by perf for 2 s: its share in the ports' "
        "transmit calls (the kernel delivering into the hosts: their TCP), the forwarder's "
        "own, idle, other; core0_switches_per_s, core0_wakeups_per_s: the core's context "
        "switches and the tasks woken onto it over the same 2 s (perf stat); "
        "core0_wrk_switches_per_s, core0_wrk_switches_per_req: core 0's context switches "
        "over 2 s of a 3 s wrk in the same repetition, per second and per request; "
        "core0_wrk_yields_per_pkt (Squall): the sched_yields of its manager and NFs over that "
        "wrk per packet into the chain, the hand-overs of core 0 a packet costs (a 3-process "
        "chain needs about 4: manager, three hops, manager). ns_per_yield_hop_core0: before the "
        "systems run, a token round 4 processes on core 0 that spin with sched_yield until "
        "they hold it (bench/switch_ring yield), per hand-over; core0_switch_pct (under "
        "iperf3) and core0_wrk_switch_pct (under wrk): each system's core-0 switches a second "
        "at that price, the share of core 0 its hand-overs take."
    )


EXPERIMENT = Experiment(
    name="tcp_peers",
    title="Real TCP between namespaces: Squall and its peers (iperf3, wrk)",
    seed="issue 5 peers; seed 000 §6 setups",
    about=(
        "scripts/netns.sh makes ns client (10.77.0.1) and ns server (10.77.0.2), joined only "
        "through sq-c1 and sq-s1 in the root namespace. Each system in turn joins those two "
        "ends: Squall (squall-mgr with af_xdp ports and a 1-NF chain, and variants one change "
        "each from it; a 3-NF chain direct and through the manager), then the peers of "
        "squall.bench.peers (a Linux bridge, a chain of 3 nftables namespaces, Open vSwitch "
        "with DPDK, testpmd in io mode); one that cannot run here is listed with the exact "
        "reason. Through each: iperf3 (one TCP stream, 5 s) and wrk (16 connections, 5 s) "
        "against nginx with one worker serving 1 KiB; 3 repetitions, interleaved (each "
        "system once a round); ratio_X_vs_squall are peer / Squall, "
        "ratio_T_squall_vs_P (issue 17's) Squall / peer."
    ),
    run=run,
    summary_keys=("gbps_iperf3_squall", "rps_wrk_squall"),
    targets={
        "ratio_iperf3_squall_vs_ovs_dpdk": ">= 1.0",
        "ratio_wrk_squall_vs_ovs_dpdk": ">= 1.0",
        "ratio_iperf3_squall_chain3_vs_ovs_dpdk": ">= 1.0",
        "ratio_wrk_squall_chain3_vs_ovs_dpdk": ">= 1.0",
        "ratio_p99_wrk_squall_vs_ovs_dpdk": "<= 1.0",
        "ratio_iperf3_squall_chain3_vs_kernel_nft_chain": ">= 1.0",
    },
    needs_root=True,
    needs_generator=False,
    uses_systems=True,
    full_minutes=6,
)
