"""Dynamic scaling (mgr/scaler.c, DESIGN §7, seed 003): a service with a scale:
policy runs as many instances as its load needs, reruns blocked instances before
it spawns new ones, blocks them again when the load falls, and never moves a
live flow to another instance.

The NF is tests/nfs/flowseen: it waits --wait-ns per packet asleep (so one
instance has a known capacity however few cores the machine has) and writes,
at its stop, every flow it saw; no flow may appear in two instances' files.
The traffic is the manager's generator in TCP mode: short connections, so new
flows keep coming and a new instance gets some."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml
from conftest import BUILD, REPO, Manager, nf_can_reach
from test_apply import squallctl

FLOWSEEN = BUILD / "tests" / "nfs" / "squall-nf-flowseen"
WAIT_NS = 20000  # one instance: at most 50,000 packets/s
HIGH_PPS = 120000  # needs three instances at the default watermarks
LOW_PPS = 5000  # one is plenty
CONN_PKTS = 10
SCALE_TIMEOUT_S = 20.0


def flows_dir(out: Path) -> Path:
    out.mkdir(mode=0o777, exist_ok=True)
    out.chmod(0o777)  # the NFs run as manager.nf_user
    nf_can_reach(out)
    return out


def scaled_config(
    mgr: Manager, out: Path, exec_path: Path = FLOWSEEN, nf_args: tuple[str, ...] | None = None
) -> dict[str, Any]:
    flows_dir(out)
    if nf_args is None:
        nf_args = ("--wait-ns", str(WAIT_NS))
    cfg = mgr.config(
        ports=[
            {"name": "g", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {
                "name": "s",
                "exec": str(exec_path),
                "args": ["--out", str(out), *nf_args],
                "scale": {"min": 1, "max": 4},
            }
        ],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[{"in_port": "g", "chain": "c", "out_port": "out"}],
        mbufs=8191,
        flow_linger_ms=50,
    )
    cfg["generator"] = {
        "port": "g",
        "rate_pps": 0,
        "flows": 32,
        "tcp_flow_pkts": CONN_PKTS,
        "tcp_start": "staggered",
    }
    return cfg


def scale_of(mgr: Manager, service: str = "s") -> dict[str, Any]:
    reply: dict[str, Any] = mgr.query("/squall/scale")[service]
    return reply


def events(mgr: Manager) -> list[dict[str, Any]]:
    reply = mgr.query("/squall/scale_events")
    return sorted((v for v in reply.values() if isinstance(v, dict)), key=lambda e: e["seq"])


def wait_running(mgr: Manager, pred: Any, what: str, service: str = "s") -> dict[str, Any]:
    mgr.wait_for(lambda: pred(scale_of(mgr, service)["running"]), SCALE_TIMEOUT_S, what)
    return scale_of(mgr, service)


def ring_full(mgr: Manager, service: str) -> int:
    """nf_ring_full drops at the rings of a service's instances."""
    return sum(int(nf["ring_full_drops"]) for nf in mgr.nfs().values() if nf["service"] == service)


def sent(mgr: Manager) -> int:
    return int(mgr.query("/squall/gen")["sent_pkts"])


def wait_sent(mgr: Manager, more: int, what: str) -> None:
    """Until the generator sent `more` packets (bounded)."""
    until = sent(mgr) + more
    mgr.wait_for(lambda: sent(mgr) >= until, SCALE_TIMEOUT_S, what)


def set_rate(mgr: Manager, pps: int) -> None:
    assert mgr.query(f"/squall/gen_rate,{pps}")["rate_pps"] == pps


def stop_traffic(mgr: Manager) -> None:
    set_rate(mgr, 0)
    sent = int(mgr.query("/squall/gen")["sent_pkts"])
    mgr.wait_accounted(sent)


def flows_by_instance(out: Path) -> dict[str, set[str]]:
    """flow -> the files (instance.pid) that saw it."""
    seen: dict[str, set[str]] = defaultdict(set)
    for f in sorted(out.glob("flows.*")):
        for line in f.read_text().splitlines():
            assert not line.startswith("#"), f"{f}: {line}"
            seen[line.split()[0]].add(f.name)
    return seen


def assert_no_flow_moved(out: Path, min_instances: int) -> int:
    seen = flows_by_instance(out)
    moved = {flow: files for flow, files in seen.items() if len(files) > 1}
    assert not moved, f"{len(moved)} flows seen by two instances, e.g. {list(moved.items())[:3]}"
    files = {f for fs in seen.values() for f in fs}
    assert len(files) >= min_instances, f"flows only on {sorted(files)}"
    return len(seen)


def test_a_rate_step_scales_out_then_in_and_reruns_before_it_spawns(
    mgr: Manager, tmp_path: Path
) -> None:
    out = tmp_path / "flows"
    mgr.start(scaled_config(mgr, out))
    assert scale_of(mgr)["running"] == 1

    # Out: the load of 2.4 instances, on one.
    set_rate(mgr, HIGH_PPS)
    st = wait_running(mgr, lambda n: n >= 3, f"3 or more instances at {HIGH_PPS} pps")
    assert st["spawns"] >= 2 and st["reruns"] == 0, st
    spawned = st["spawns"]
    first = events(mgr)[0]
    assert first["reason"].startswith("overload") and first["spawned"] >= 1, first

    # In: one is enough; no packet lost on the way (blocked instances keep
    # their flows until they end).
    set_rate(mgr, LOW_PPS)
    drops_before = mgr.stats()["drop_pkts"]
    st = wait_running(mgr, lambda n: n == 1, f"one instance at {LOW_PPS} pps")
    assert st["blocks"] >= 2 and st["blocked"] >= 2, st
    assert mgr.stats()["drop_pkts"] == drops_before, mgr.stats()["drops"]
    blocked = st["blocked"]
    seq_low = events(mgr)[-1]["seq"]

    # Out again: the blocked instances run again before anything is spawned.
    set_rate(mgr, HIGH_PPS)
    st = wait_running(mgr, lambda n: n >= 3, f"3 or more instances again at {HIGH_PPS} pps")
    again = [e for e in events(mgr) if e["seq"] > seq_low and e["to"] > e["from"]]
    assert again, events(mgr)
    e = again[0]
    grown = e["to"] - e["from"]
    assert e["rerun"] == min(blocked, grown), e
    assert e["spawned"] == grown - e["rerun"], e
    assert st["spawns"] == spawned + sum(x["spawned"] for x in again), st
    assert st["reruns"] >= min(blocked, 2), st
    assert mgr.query("/squall/scale")["rerun_samples"] >= 1

    stop_traffic(mgr)
    mgr.finish()
    flows = assert_no_flow_moved(out, min_instances=3)
    assert flows > 1000, flows


def test_scale_by_hand_and_a_flood_of_commands_move_no_flow(mgr: Manager, tmp_path: Path) -> None:
    out = tmp_path / "flows"
    mgr.start(scaled_config(mgr, out))
    set_rate(mgr, 20000)

    r = squallctl(mgr, "scale", "s", "3")
    assert r.returncode == 0, r.stderr
    st = wait_running(mgr, lambda n: n == 3, "3 instances by hand")
    assert st["target"] == 3 and st["spawns"] == 2, st
    r = squallctl(mgr, "scale", "s", "1")
    assert r.returncode == 0, r.stderr
    st = wait_running(mgr, lambda n: n == 1, "1 instance by hand")
    assert st["blocks"] == 2, st
    r = squallctl(mgr, "scale", "s", "2")
    assert r.returncode == 0, r.stderr
    st = wait_running(mgr, lambda n: n == 2, "2 instances by hand")
    assert st["reruns"] == 1 and st["spawns"] == 2, st  # the blocked one ran again

    # Hundreds of changes under traffic: each flow stays where it began.
    for i in range(300):
        mgr.query(f"/squall/scale_set,s,{1 + i % 4}")
    st = wait_running(mgr, lambda n: n == 4, "the last command's 4 instances")
    r = squallctl(mgr, "scale", "s", "auto")
    assert r.returncode == 0 and "auto" in r.stdout, r.stdout + r.stderr
    assert scale_of(mgr)["target"] == "auto"

    r = squallctl(mgr, "scale")
    assert r.returncode == 0 and "decisions" in r.stdout, r.stdout + r.stderr
    r = squallctl(mgr, "scale", "s")
    assert r.returncode == 0 and "running" in r.stdout, r.stdout + r.stderr
    r = squallctl(mgr, "scale", "s", "99")
    assert r.returncode == 2 and "scale.max" in r.stderr, r.stderr
    r = squallctl(mgr, "scale", "nope", "2")
    assert r.returncode == 2, r.stderr

    stop_traffic(mgr)
    mgr.finish()
    assert_no_flow_moved(out, min_instances=4)


def test_a_spawn_that_fails_is_counted_and_retried_and_the_service_runs_on(
    mgr: Manager, tmp_path: Path
) -> None:
    """The NF's binary is gone after the start: each try to scale out fails,
    is counted and retried later; the running instance keeps the traffic."""
    nf = tmp_path / "bin" / "squall-nf-flowseen"
    nf.parent.mkdir()
    nf.write_text(f'#!/bin/sh\nexec {FLOWSEEN} "$@"\n')  # (a copy would lose its RPATH)
    nf.chmod(0o755)
    nf_can_reach(nf.parent)
    nf.parent.chmod(0o755)
    out = tmp_path / "flows"
    mgr.start(scaled_config(mgr, out, exec_path=nf))
    nf.unlink()
    set_rate(mgr, 10000)
    r = squallctl(mgr, "scale", "s", "3")
    assert r.returncode == 0, r.stderr
    mgr.wait_for(lambda: scale_of(mgr)["spawn_failed"] >= 2, SCALE_TIMEOUT_S, "two failed spawns")
    st = scale_of(mgr)
    assert st["running"] == 1 and st["instances"] == 1, st
    assert any(e["failed"] for e in events(mgr)), events(mgr)
    assert mgr.stats()["drop_pkts"] == 0, mgr.stats()["drops"]
    assert mgr.stats()["nfs_live"] == 1

    stop_traffic(mgr)
    mgr.finish()


def test_scale_is_refused_where_it_cannot_work(mgr: Manager, tmp_path: Path) -> None:
    """per-flow services (a pool, one NF per flow) cannot scale, nor can a
    service start outside its limits: config errors naming the line. (Poll mode
    can: test_messages.py.)"""
    base = scaled_config(mgr, tmp_path / "flows")
    cfg = dict(base, rules=[dict(base["rules"][0], assign="per-flow")])
    r = mgr.run_to_exit(cfg, "--check")
    assert r.returncode == 2 and "per-flow" in r.stderr, r.stderr
    cfg = dict(base, services=[dict(base["services"][0], instances=7)])
    r = mgr.run_to_exit(cfg, "--check")
    assert r.returncode == 2 and "instances" in r.stderr, r.stderr


STALL_US = 40000  # every STALL_EVERY_MS, the instance takes no packet for this long
STALL_EVERY_MS = 200
STALL_PPS = 40000  # 1,600 packets a stall: one instance's 1,024-slot ring overflows, two do not


def test_a_ring_that_overflows_at_a_low_handler_time_scales_out_and_stays_out(
    mgr: Manager, tmp_path: Path
) -> None:
    """The instance stops 40 ms every 200 ms outside its packet handler (what a
    core shared with other tasks does to an NF: it runs late), so its ring
    overflows at 40 kpps while its handler time reads a few percent. The rate
    that overflowed it counts as its capacity: the service scales out
    (overload_drops), does not go back to one instance while the rate holds
    (that one would overflow again), and scales in once the rate falls. The
    queue signal is off here (queue_high_pkts = ring_slots): the drops alone."""
    out = tmp_path / "flows"
    stall = ("--stall-us", str(STALL_US), "--stall-every-ms", str(STALL_EVERY_MS))
    cfg = scaled_config(mgr, out, nf_args=stall)
    cfg["services"][0]["ring_slots"] = 1024
    cfg["services"][0]["scale"]["queue_high_pkts"] = 1024
    mgr.start(cfg)

    set_rate(mgr, STALL_PPS)
    st = wait_running(mgr, lambda n: n >= 2, f"2 or more instances at {STALL_PPS} pps")
    # (a stall that lands in the handler, or a busy core, can make the
    # handler time high for a look too: overload_load is no error)
    out_events = [e for e in events(mgr) if e["to"] > e["from"]]
    assert out_events and out_events[0]["reason"].startswith("overload"), events(mgr)
    assert st["overflow_pps"] > 0 and st["overflows"] >= 1, st

    # The rate holds for ~25 stalls: never back to the one instance that
    # overflowed (no flapping), few drops.
    seq = events(mgr)[-1]["seq"]
    drops0, sent0 = ring_full(mgr, "s"), sent(mgr)
    wait_sent(mgr, 5 * STALL_PPS, "5 s of traffic")
    later = [e for e in events(mgr) if e["seq"] > seq]
    assert all(e["to"] >= 2 for e in later), "\n".join(map(str, events(mgr)))
    assert scale_of(mgr)["running"] >= 2
    held_drops = ring_full(mgr, "s") - drops0
    assert held_drops * 50 < sent(mgr) - sent0, (held_drops, sent(mgr) - sent0)

    set_rate(mgr, LOW_PPS)
    st = wait_running(mgr, lambda n: n == 1, f"one instance at {LOW_PPS} pps")
    assert any(e["reason"] == "underload" for e in events(mgr)), events(mgr)

    stop_traffic(mgr)
    mgr.finish()
    assert_no_flow_moved(out, min_instances=2)


EXAMPLE = REPO / "examples" / "scaling.yaml"
EXAMPLE_HIGH_PPS = 80000  # the example's own "raise its rate": more than one instance carries
EXAMPLE_LOW_PPS = 5000


def example_config(mgr: Manager, out: Path) -> dict[str, Any]:
    """examples/scaling.yaml under this test's manager, its scaled aes
    replaced by flowseen with the same wait per packet (so the flows each
    instance saw are on record) and the same scale policy."""
    ex = yaml.safe_load(EXAMPLE.read_text())
    manager = {k: v for k, v in ex["manager"].items() if k != "name"}
    services = []
    for svc in ex["services"]:
        if "scale" in svc:
            wait_ns = svc["args"][svc["args"].index("--wait-ns") + 1]
            svc = dict(svc, exec=str(FLOWSEEN), args=["--out", str(out), "--wait-ns", wait_ns])
        services.append(svc)
    cfg = mgr.config(
        ports=ex["ports"],
        services=services,
        chains=ex["chains"],
        rules=ex["rules"],
        **{**manager, "region_mb": 128, "flow_linger_ms": 50},
    )
    cfg["generator"] = ex["generator"]
    return cfg


def test_the_scaling_example_scales_out_and_back_in(mgr: Manager, tmp_path: Path) -> None:
    """examples/scaling.yaml as its comments run it: from its start rate up to
    EXAMPLE_HIGH_PPS, aes grows past one instance; back down, it shrinks to
    one; no flow is seen by two instances. At the high rate the full rings lose
    fewer packets than one instance would by its capacity alone (1 - 50,000 /
    EXAMPLE_HIGH_PPS of them: a new instance takes a few ms to start)."""
    out = flows_dir(tmp_path / "flows")
    cfg = example_config(mgr, out)
    scaled = next(s["name"] for s in cfg["services"] if "scale" in s)
    wait_ns = int(next(s for s in cfg["services"] if "scale" in s)["args"][-1])
    mgr.start(cfg)
    assert scale_of(mgr, scaled)["running"] == 1

    full0, sent0 = ring_full(mgr, scaled), sent(mgr)
    set_rate(mgr, EXAMPLE_HIGH_PPS)
    wait_running(mgr, lambda n: n > 1, f"more than one instance at {EXAMPLE_HIGH_PPS}", scaled)
    wait_sent(mgr, 2 * EXAMPLE_HIGH_PPS, "2 s at the high rate")
    assert scale_of(mgr, scaled)["running"] > 1
    assert any(e["reason"].startswith("overload") for e in events(mgr)), events(mgr)
    lost, offered = ring_full(mgr, scaled) - full0, sent(mgr) - sent0
    one_loses = 1 - 1e9 / wait_ns / EXAMPLE_HIGH_PPS
    assert lost < offered * one_loses, (lost, offered, events(mgr), scale_of(mgr, scaled))

    set_rate(mgr, EXAMPLE_LOW_PPS)
    wait_running(mgr, lambda n: n == 1, f"one instance at {EXAMPLE_LOW_PPS}", scaled)
    assert any(e["reason"] == "underload" for e in events(mgr)), events(mgr)

    stop_traffic(mgr)
    mgr.finish()
    flows = assert_no_flow_moved(out, min_instances=2)
    assert flows > 1000, flows
