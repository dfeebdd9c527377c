"""The control plane above every NF (mgr/ctlprio.h): the threads that
answer telemetry and apply run SCHED_FIFO 99, one above the highest
priority an NF may have (98), so an NF that spins at SCHED_RR on their core
cannot take it from them; with control_realtime false they keep the normal
scheduler at nice -20. Reply times under such load are a benchmark's
(squall-bench run telemetry_load); here the policy and that every query is
answered."""

from __future__ import annotations

import os
from pathlib import Path

import pcaps
import pytest
from conftest import Manager

QUERIES = 200


def threads(pid: int) -> dict[int, str]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            pass
    return out


def spinning_config(mgr: Manager, tmp_path: Path, **manager: object) -> dict:
    """A poll-mode NF at SCHED_RR 98 on the NFs' core (core 1, where DPDK
    puts the control threads: not the manager's lcore), spinning on its
    empty ring, never yielding."""
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", pcaps.good_frames(8, [pcaps.mac(1)]))
    return mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[{"name": "spin", "exec": "squall-nf-noop", "mode": "poll", "priority": 98}],
        chains=[{"name": "c", "services": ["spin"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        **manager,
    )


def test_telemetry_threads_rank_above_every_nf(mgr: Manager, tmp_path: Path) -> None:
    mgr.start(spinning_config(mgr, tmp_path))
    assert mgr.proc is not None
    tel = [t for t, comm in threads(mgr.proc.pid).items() if comm.startswith("telemetry")]
    # the listener, and the thread of this test's own connection
    assert len(tel) >= 2, threads(mgr.proc.pid)
    for t in tel:
        assert os.sched_getscheduler(t) == os.SCHED_FIFO, (t, threads(mgr.proc.pid))
        assert os.sched_getparam(t).sched_priority == 99
    nf = mgr.nfs()["spin#0"]
    assert os.sched_getscheduler(nf["pid"]) == os.SCHED_RR
    assert os.sched_getparam(nf["pid"]).sched_priority == 98
    # with the NF spinning at 98 on their core, every query has its answer
    for _ in range(QUERIES):
        assert "rx_pkts" in mgr.stats()
    mgr.finish()


def test_control_realtime_false_keeps_the_normal_scheduler(mgr: Manager, tmp_path: Path) -> None:
    cfg = spinning_config(mgr, tmp_path)
    cfg["manager"]["control_realtime"] = False
    cfg["services"][0]["priority"] = 0
    mgr.start(cfg)
    assert mgr.proc is not None
    tel = [t for t, comm in threads(mgr.proc.pid).items() if comm.startswith("telemetry")]
    assert tel
    for t in tel:
        assert os.sched_getscheduler(t) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, t) == -20
    mgr.finish()


@pytest.mark.parametrize("where", ["service", "rule"])
def test_no_nf_may_rank_with_the_control_threads(mgr: Manager, tmp_path: Path, where: str) -> None:
    cfg = spinning_config(mgr, tmp_path)
    if where == "service":
        cfg["services"][0]["priority"] = 99
    else:
        cfg["services"][0]["priority"] = 0
        cfg["rules"][0]["nf_priority"] = 99
    r = mgr.run_to_exit(cfg, "--check")
    assert r.returncode == 2, r.stderr
    assert "priority" in r.stderr and "98" in r.stderr, r.stderr
