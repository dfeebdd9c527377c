"""NF priorities (issue 3): SCHED_RR and nice are really applied, and the
chain-position-aware mode gives later hops higher priority (seed 000 Fig 8)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from conftest import Manager
from squall import control
from squall.bench.config import to_yaml


def chain_config(mgr: Manager, services: list[dict], **manager: object) -> dict:
    return mgr.config(
        ports=[
            {"name": "in", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=services,
        chains=[{"name": "c", "services": [s["name"] for s in services]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        **manager,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs root")
def test_service_priority_and_nice_are_applied(mgr: Manager) -> None:
    mgr.start(
        chain_config(
            mgr,
            [
                {"name": "rt", "exec": "squall-nf-fwd", "priority": 7},
                {"name": "nice", "exec": "squall-nf-fwd", "nice": 5, "sched_batch": True},
                {"name": "plain", "exec": "squall-nf-fwd"},
                {"name": "other", "exec": "squall-nf-fwd", "sched_batch": False},
            ],
        )
    )
    nfs = {nf["service"]: nf for nf in mgr.nfs().values()}
    rt, nice, plain = nfs["rt"]["pid"], nfs["nice"]["pid"], nfs["plain"]["pid"]
    assert os.sched_getscheduler(rt) == os.SCHED_RR
    assert os.sched_getparam(rt).sched_priority == 7
    assert nfs["rt"]["sched_priority"] == 7
    # What the NF is told (it then never spins): only the SCHED_RR one.
    assert [nfs[s]["realtime"] for s in ("rt", "nice", "plain")] == [1, 0, 0], nfs
    # sched_batch true: SCHED_BATCH, nice kept. auto, with the NFs not
    # pinned (their wakers on other cores): SCHED_OTHER, as with false.
    assert os.sched_getscheduler(nice) == os.SCHED_BATCH
    assert os.getpriority(os.PRIO_PROCESS, nice) == 5
    assert os.sched_getscheduler(plain) == os.SCHED_OTHER
    assert os.getpriority(os.PRIO_PROCESS, plain) == 0
    assert os.sched_getscheduler(nfs["other"]["pid"]) == os.SCHED_OTHER
    assert [nfs[s]["sched_batch"] for s in ("rt", "nice", "plain", "other")] == [0, 1, 0, 0]
    mgr.finish()


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs root")
def test_chain_aware_priorities_rise_along_the_chain(mgr: Manager) -> None:
    services = [{"name": f"h{i}", "exec": "squall-nf-fwd"} for i in range(3)]
    cfg = chain_config(mgr, services, chain_priority=10)
    # A steady rate, at which NFs of a chain sharing a core spin and yield to
    # each other (test_shared_core); real-time NFs must not spin at all.
    cfg["generator"] = {"port": "in", "rate_pps": 200000, "flows": 64}
    mgr.start(cfg)
    sent = mgr.gen_send(100000)
    mgr.wait_accounted(sent)
    nfs = {nf["service"]: nf for nf in mgr.nfs().values()}
    for hop in range(3):
        nf = nfs[f"h{hop}"]
        assert os.sched_getscheduler(nf["pid"]) == os.SCHED_RR
        assert os.sched_getparam(nf["pid"]).sched_priority == 10 + hop
        assert nf["realtime"] == 1 and nf["spin_yields"] == 0, nf
        assert nf["rx_pkts"] > 0, nf
    mgr.finish()


def flow_priority_config(mgr: Manager, **manager: object) -> dict:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "s", "exec": "squall-nf-fwd", "instances": 2, "sched_batch": True}],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[
            {
                "in_port": "gen",
                "chain": "c",
                "out_port": "out",
                "assign": "per-flow",
                "nf_priority": 20,
            }
        ],
        flow_idle_timeout_ms=300,
        **manager,
    )
    return cfg


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs root")
def test_a_rules_flow_priority_lasts_as_long_as_the_flow(mgr: Manager) -> None:
    # seed 000 Fig 7: a per-flow rule raises its flow's NF to SCHED_RR 20
    # while the flow lasts; then the NF goes back to its own priority, here
    # chain_priority's (5 + hop 0), not to the service's (none).
    cfg = flow_priority_config(mgr, chain_priority=5)
    # One long TCP connection: it is still open when the generator pauses,
    # and ends by the idle timeout.
    cfg["generator"] = {"port": "gen", "rate_pps": 2000, "flows": 1, "tcp_flow_pkts": 10000}
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] >= 100, 10, "the flow carries packets")
    nf = next(nf for nf in mgr.nfs().values() if nf["rx_pkts"] > 0)
    assert os.sched_getscheduler(nf["pid"]) == os.SCHED_RR
    assert os.sched_getparam(nf["pid"]).sched_priority == 20
    assert mgr.nfs()[f"s#{nf['instance']}"]["sched_priority"] == 20
    sent = mgr.gen_send(0)
    mgr.wait_accounted(sent)
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_ended"] == 1, 10, "the flow ended")
    assert os.sched_getparam(nf["pid"]).sched_priority == 5
    assert mgr.nfs()[f"s#{nf['instance']}"]["sched_priority"] == 5
    mgr.finish()


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs root")
def test_after_its_flows_priority_an_nf_is_back_to_sched_batch(mgr: Manager) -> None:
    # As above with no priority of its own: the NF goes back to its
    # service's normal policy, SCHED_BATCH (sched_batch true), not SCHED_OTHER.
    cfg = flow_priority_config(mgr)
    cfg["generator"] = {"port": "gen", "rate_pps": 2000, "flows": 1, "tcp_flow_pkts": 10000}
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] >= 100, 10, "the flow carries packets")
    nf = next(nf for nf in mgr.nfs().values() if nf["rx_pkts"] > 0)
    assert os.sched_getscheduler(nf["pid"]) == os.SCHED_RR
    sent = mgr.gen_send(0)
    mgr.wait_accounted(sent)
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_ended"] == 1, 10, "the flow ended")
    assert os.sched_getscheduler(nf["pid"]) == os.SCHED_BATCH
    after = mgr.nfs()[f"s#{nf['instance']}"]
    assert after["sched_priority"] == 0 and after["sched_batch"] == 1, after
    mgr.finish()


def direct_chain_config(mgr: Manager, nf_core: int) -> dict:
    services = [{"name": f"h{i}", "exec": "squall-nf-fwd"} for i in range(3)]
    cfg = chain_config(mgr, services, nf_core=nf_core)
    cfg["chains"][0]["direct"] = True
    return cfg


def policies(mgr: Manager) -> list[int]:
    nfs = {nf["service"]: nf for nf in mgr.nfs().values()}
    got = [os.sched_getscheduler(nfs[f"h{i}"]["pid"]) for i in range(3)]
    assert [nfs[f"h{i}"]["sched_batch"] for i in range(3)] == [
        int(p == os.SCHED_BATCH) for p in got
    ], nfs
    return got


def test_sched_batch_auto_where_the_wakers_share_the_core(mgr: Manager) -> None:
    # sched_batch auto (the default), a direct chain on core 1, the manager on
    # core 0: hop 0 is woken by the manager from another core and keeps
    # SCHED_OTHER (it must take its core at once); hops 1 and 2 are woken
    # only by the hop before them on their own core: SCHED_BATCH.
    mgr.start(direct_chain_config(mgr, nf_core=1))
    assert policies(mgr) == [os.SCHED_OTHER, os.SCHED_BATCH, os.SCHED_BATCH]
    mgr.finish()


def test_sched_batch_auto_on_the_managers_own_core(mgr: Manager) -> None:
    # The NFs on the manager's core (its one lcore, core 0): every waker
    # shares the core, so every hop runs SCHED_BATCH.
    mgr.start(direct_chain_config(mgr, nf_core=0))
    assert policies(mgr) == [os.SCHED_BATCH] * 3
    mgr.finish()


def _apply(mgr: Manager, cfg: dict, path: Path) -> None:
    """squallctl apply of cfg, written to path, to the running manager."""
    path.write_text(to_yaml(cfg))
    assert mgr._tm is not None
    res = control.apply_file(mgr._tm, path)
    assert res.applied, res


def _nice(tid: int) -> int:
    """A thread's nice, from /proc (os.getpriority reads one thread too)."""
    return os.getpriority(os.PRIO_PROCESS, tid)


@pytest.mark.skipif(os.geteuid() != 0, reason="a negative nice needs root")
def test_manager_runs_above_its_nfs(mgr: Manager, tmp_path: Path) -> None:
    """manager.nice (-10 here; 0 by default) on the manager's lcore alone:
    its NFs keep their own, also one the manager starts again from that
    lcore after a crash (it would inherit the lcore's -10); a new config
    changes it live."""
    cfg = chain_config(mgr, [{"name": "plain", "exec": "squall-nf-fwd"}])
    cfg["manager"]["nice"] = -10
    mgr.start(cfg)
    assert mgr.proc is not None
    pid = mgr.proc.pid  # the main lcore is the process's first thread
    mgr.wait_for(lambda: _nice(pid) == -10, 10, "the manager's lcore at nice -10")
    others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    assert others and all(_nice(t) == 0 for t in others), "DPDK's threads keep nice 0"
    nf = next(iter(mgr.nfs().values()))
    assert _nice(nf["pid"]) == 0 and nf["nice_plus_20"] == 20, nf

    os.kill(nf["pid"], signal.SIGKILL)
    mgr.wait_for(
        lambda: (
            next(iter(mgr.nfs().values()))["restarts"] >= 1
            and next(iter(mgr.nfs().values()))["pid"] not in (0, nf["pid"])
        ),
        10,
        "the NF started again",
    )
    again = next(iter(mgr.nfs().values()))
    assert _nice(again["pid"]) == 0 and again["nice_plus_20"] == 20, again

    cfg["manager"]["nice"] = 3
    _apply(mgr, cfg, tmp_path / "nice3.yaml")
    mgr.wait_for(lambda: _nice(pid) == 3, 10, "the manager's lcore at nice 3")
    assert _nice(again["pid"]) == 0
    mgr.finish()


@pytest.mark.skipif(os.geteuid() != 0, reason="a negative nice needs root")
def test_nfs_on_the_managers_core_share_its_nice(mgr: Manager, tmp_path: Path) -> None:
    """NFs pinned to the manager's core run at manager.nice on top of their
    services' nice (the manager's tasks above the host's there, among
    themselves as configured); a new manager.nice moves them too."""
    cfg = chain_config(
        mgr,
        [
            {"name": "plain", "exec": "squall-nf-fwd"},
            {"name": "nicer", "exec": "squall-nf-fwd", "nice": 5},
        ],
        nf_core=0,  # the manager's one lcore is core 0
    )
    cfg["manager"]["nice"] = -10
    mgr.start(cfg)
    nfs = {nf["service"]: nf for nf in mgr.nfs().values()}
    assert _nice(nfs["plain"]["pid"]) == -10 and nfs["plain"]["nice_plus_20"] == 10, nfs
    assert _nice(nfs["nicer"]["pid"]) == -5 and nfs["nicer"]["nice_plus_20"] == 15, nfs

    cfg["manager"]["nice"] = 0
    _apply(mgr, cfg, tmp_path / "nice0.yaml")
    mgr.wait_for(
        lambda: (_nice(nfs["plain"]["pid"]), _nice(nfs["nicer"]["pid"])) == (0, 5),
        10,
        "the NFs on its core at their services' nice",
    )
    assert mgr.proc is not None and _nice(mgr.proc.pid) == 0
    after = {nf["service"]: nf["nice_plus_20"] for nf in mgr.nfs().values()}
    assert after == {"plain": 20, "nicer": 25}, after
    mgr.finish()


@pytest.mark.skipif(os.geteuid() != 0, reason="a negative nice needs root")
@pytest.mark.parametrize(
    ("nf_core", "step", "want"),
    [
        # Off the manager's core the default step is 0: every hop at its
        # service's nice, so awake hops share the core in equal turns.
        (None, None, {"a": 1, "b": 0, "c": 0, "d": 0}),
        # A step asked for: hop i at its service's nice - 2i (a later hop first).
        (None, 2, {"a": 1, "b": -2, "c": -4, "d": -6}),
        # On the manager's core (default step 2) the manager transmits after
        # the last hop: the steps count back from it, the last hop level
        # with it, none more than 4 below it (a's 6 is 4, plus its service's 1).
        (0, None, {"a": 5, "b": 4, "c": 2, "d": 0}),
    ],
)
def test_direct_chain_hops_rank_downstream_first(
    mgr: Manager, nf_core: int | None, step: int | None, want: dict[str, int]
) -> None:
    """A direct chain's hop_nice_step (by default 2 on the manager's core, 0
    elsewhere): each hop a step above the one before it, and on the
    manager's core none above the manager and none more than 4 below it."""
    services = [
        {"name": "a", "exec": "squall-nf-fwd", "nice": 1},
        {"name": "b", "exec": "squall-nf-fwd"},
        {"name": "c", "exec": "squall-nf-fwd"},
        {"name": "d", "exec": "squall-nf-fwd"},
    ]
    cfg = chain_config(mgr, services, **({} if nf_core is None else {"nf_core": nf_core}))
    cfg["chains"][0]["direct"] = True
    if step is not None:
        cfg["chains"][0]["hop_nice_step"] = step
    mgr.start(cfg)
    nfs = {nf["service"]: nf for nf in mgr.nfs().values()}
    assert {s: _nice(nf["pid"]) for s, nf in nfs.items()} == want, nfs
    assert {s: nf["nice_plus_20"] - 20 for s, nf in nfs.items()} == want, nfs
    mgr.finish()
