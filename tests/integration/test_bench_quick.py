"""squall-bench (issue 5): every experiment runs in --quick mode and writes
its result (summary names, figures, commands, machine facts, PNGs) without
leaving anything behind, and the report renders and publishes them. No
performance number is asserted: benchmarks are not tests.

Also the rate search on a synthetic system under test, whose NDR and PDR are
known exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import BUILD, MGR_BIN, REGION_DIRS, REPO, processes_mentioning
from squall.bench import cores, profile, registry
from squall.bench.search import NDR, PDR, Phase, RateSearch, Trial

EXPERIMENTS = registry.all_experiments()
RUN_TIMEOUT_S = 240  # --quick aims at 20 s; a loaded machine gets room


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-results")


def bench(*args: str, results: Path, docs: Path | None = None) -> subprocess.Popen[str]:
    pythonpath = os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "SQUALL_RESULTS_DIR": str(results), "PYTHONPATH": pythonpath}
    if docs is not None:
        env["SQUALL_DOCS_RESULTS_DIR"] = str(docs)
    return subprocess.Popen(
        [sys.executable, "-m", "squall.bench.cli", *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: a timeout stops all it started
    )


def finish(proc: subprocess.Popen[str], timeout_s: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # SIGTERM first: squall-bench and squall-mgr clean up after themselves.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        pytest.fail(f"squall-bench still running after {timeout_s} s\n{err[-3000:]}")
    return proc.returncode, out, err


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiment_runs_quick(name: str, results_dir: Path) -> None:
    exp = EXPERIMENTS[name]
    why = exp.unavailable()
    if why is not None:
        pytest.skip(f"{name}: {why}")
    if not MGR_BIN.is_file():
        pytest.fail(f"{MGR_BIN} not found: make build", pytrace=False)
    proc = bench("run", name, "--quick", results=results_dir)
    rc, out, err = finish(proc, RUN_TIMEOUT_S)
    assert rc == 0, f"squall-bench run {name} --quick exited {rc}\n{out}\n{err[-4000:]}"

    runs = sorted((results_dir / name).glob("*.json"))
    assert len(runs) == 1, runs
    res: dict[str, Any] = json.loads(runs[0].read_text())
    assert res["experiment"] == name and res["quick"] is True and res["error"] is None, res["error"]
    missing = [k for k in exp.summary_keys if k not in res["summary"]]
    assert not missing, f"summary misses {missing}: {res['summary']}"
    assert all(k in res["targets"] for k in exp.targets)
    for fact in ("cpu", "cores", "kernel", "dpdk", "hugepages_total", "loadavg_before"):
        assert res["machine"].get(fact) is not None, fact
    assert len(res["machine"]["loadavg_after"]) == 3
    assert res["commands"] and res["samples"], "no commands or no raw samples recorded"
    assert res["figures"], "no figure"
    for fig in res["figures"]:
        assert fig["xlabel"] and fig["ylabel"], fig["id"]
        png = runs[0].with_name(f"{runs[0].stem}-{fig['id']}.png")
        assert png.stat().st_size > 1000, png
    # Every manager it started has stopped, with every mbuf home (exit 0), and
    # left nothing behind.
    assert all(s.get("exit_code", 0) in (0, None) for s in res["samples"]), [
        s.get("exit_code") for s in res["samples"]
    ]
    # A rate search's every trial read the cores' distance at both ends, and
    # the run says what the gate did (cores.py).
    trials = [t for s in res["samples"] if s["kind"] == "rate_search" for t in s["trials"]]
    if trials:
        assert all(len(t["extra"]["core_rtt_ns"]) == 2 for t in trials), trials[0]
        assert res["summary"]["core_rtt_ns_best"] > 0, res["summary"]
        assert "trials_core_far_redone" in res["summary"]
    token = f"sqb{proc.pid % 100000}-"
    assert not processes_mentioning(token), f"processes of {token}* left behind"
    left = [p for d in REGION_DIRS for p in d.glob(f"squall-{token}*")]
    assert not left, left


def test_report_and_publish(results_dir: Path, tmp_path: Path) -> None:
    ran = sorted(d.name for d in results_dir.iterdir() if d.is_dir())
    if not ran:
        pytest.skip("no experiment ran")
    docs = tmp_path / "docs-results"
    rc, out, err = finish(
        bench("report", "--publish", "--include-quick", results=results_dir, docs=docs), 120
    )
    assert rc == 0, f"{out}\n{err}"
    page = (results_dir / "report.md").read_text()
    readme = (docs / "README.md").read_text()
    for name in ran:
        assert f"## `{name}`" in page and f"## `{name}`" in readme, name
        assert (docs / f"{name}.json").is_file()
        pngs = list(docs.glob(f"{name}-*.png"))
        assert pngs and all(f"({p.name})" in readme for p in pngs), name
    assert "Quick run" in page  # a quick run is labelled as one


def test_list_names_every_experiment() -> None:
    rc, out, err = finish(bench("list", "--json", results=Path("/nonexistent")), 60)
    assert rc == 0, err
    assert sorted(e["name"] for e in json.loads(out)) == sorted(EXPERIMENTS)


def test_unknown_experiment_is_a_usage_error(tmp_path: Path) -> None:
    rc, _, err = finish(bench("run", "no_such_experiment", results=tmp_path), 60)
    assert rc == 2 and "no experiment" in err


# ------------------------------------------------------------------ rate search


def synthetic(capacity_pps: float, source_max_pps: float = 1e12) -> Callable[[float, float], Trial]:
    """A system under test that forwards up to capacity and drops the excess,
    fed by a source that cannot offer more than source_max_pps."""

    def measure(rate: float, duration: float) -> Trial:
        offered = source_max_pps if rate == float("inf") else min(rate, source_max_pps)
        sent = round(offered * duration)
        drops = round(sent * (offered - capacity_pps) / offered) if offered > capacity_pps else 0
        return Trial(rate, duration, duration, sent, drops, sent - drops)

    return measure


PHASES = [Phase(0.5, 0.1), Phase(1.0, 0.03), Phase(3.0, 0.01)]


@pytest.mark.parametrize("capacity", [5e4, 2e6, 9e6])
def test_search_finds_ndr_and_pdr(capacity: float) -> None:
    res = RateSearch(synthetic(capacity), PHASES).run()
    # NDR = capacity; PDR = the rate losing 0.5%: capacity / 0.995.
    assert capacity * 0.99 <= res.rates_pps[NDR] <= capacity
    assert capacity * 0.99 <= res.rates_pps[PDR] <= capacity / (1 - PDR)
    assert res.rates_pps[NDR] <= res.rates_pps[PDR]
    # The rates reported were held in a final (longest) trial.
    finals = {t.rate_pps for t in res.trials if t.duration_s == PHASES[-1].duration_s}
    assert res.rates_pps[NDR] in finals and res.rates_pps[PDR] in finals
    assert not res.out_of_trials and len(res.trials) < 40


def test_search_counts_a_source_that_cannot_keep_up_as_failure() -> None:
    # The source tops out at 1 Mpps: no rate above it passes, loss or not.
    res = RateSearch(synthetic(5e6, source_max_pps=1e6), PHASES).run()
    assert 0.99e6 <= res.rates_pps[PDR] <= 1e6
    assert res.mrr_pps == pytest.approx(1e6)


def test_search_out_of_trials_reports_a_lower_bound() -> None:
    res = RateSearch(synthetic(2e6), PHASES, max_trials=6).run()
    assert res.out_of_trials
    assert all(r <= 2e6 / (1 - PDR) for r in res.rates_pps.values())


def gate_on(readings: list[float], retries: int = 2, wait_s: float = 0.6) -> cores.CoreGate:
    it = iter(readings)
    return cores.CoreGate(probe=lambda: next(it), wait_s=wait_s, retries=retries, calibrate=0)


def counted_trials() -> tuple[list[float], Callable[[float, float], Trial]]:
    ran: list[float] = []

    def trial(rate: float, duration: float) -> Trial:
        ran.append(rate)
        return Trial(rate, duration, duration, 100, 0, 100)

    return ran, trial


def test_core_gate_redoes_a_trial_whose_cores_moved_apart() -> None:
    """A trial with the cores far at its end is run again; near at both ends,
    it counts at once; the record says what the cores read."""
    ran, trial = counted_trials()
    gate = gate_on([60, 340, 61, 58, 59, 57])
    t = gate.gated(trial)(1e6, 0.5)
    assert ran == [1e6, 1e6], "the trial that ended far is redone once"
    assert t.extra["core_rtt_ns"] == [61, 58] and t.extra["core_far_redone"] == 1
    t = gate.gated(trial)(2e6, 0.5)
    assert ran[2:] == [2e6] and "core_far_redone" not in t.extra
    assert gate.summary() == {
        "core_rtt_ns_best": 57,
        "core_rtt_ns_median": 59.5,
        "trials_core_far_redone": 1,
        "trials_core_far_kept": 0,
        "core_wait_s": 0,
    }


def test_core_gate_waits_for_near_cores_then_gives_up_bounded() -> None:
    """Far before a trial: the gate waits (reading again) for near cores, at
    most wait_s; still far after retries, the trial is kept and counted."""
    ran, trial = counted_trials()
    gate = gate_on([55, 330, 56, 58], retries=2)
    gate.read()  # the run's fastest so far: 55
    t = gate.gated(trial)(1e6, 0.5)
    assert ran == [1e6] and t.extra["core_rtt_ns"] == [56, 58]
    assert gate.waited_s > 0 and gate.redone == 0
    far = gate_on([50] + [400] * 40, retries=1, wait_s=0.3)
    far.read()
    t = far.gated(trial)(3e6, 0.5)
    assert ran[1:] == [3e6, 3e6], "one retry, then kept"
    assert far.far_kept() == 1 and far.redone == 1 and t.extra["core_rtt_ns"] == [400, 400]


def test_core_gate_counts_trials_that_passed_before_a_nearer_reading() -> None:
    """A run that began far takes the far round trip for near; once a nearer
    one comes, the trials that counted far are reported, not hidden."""
    ran, trial = counted_trials()
    gate = gate_on([330, 335, 340, 60, 58, 59])
    t = gate.gated(trial)(1e6, 0.5)
    assert t.extra["core_rtt_ns"] == [330, 335] and gate.far_kept() == 0
    gate.gated(trial)(2e6, 0.5)
    assert ran == [1e6, 2e6, 2e6], "the second trial, far by the new fastest, is redone"
    assert gate.far_kept() == 1 and gate.summary()["trials_core_far_kept"] == 1


def test_core_gate_reads_on_when_a_run_starts_far(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calibration whose fastest is above SUSPECT_NS reads on (bounded) for a
    nearer round trip before the first trial."""
    monkeypatch.setattr(cores, "WAIT_STEP_S", 0.0)
    it = iter([330.0] * 5 + [57.0] + [58.0] * 10)
    gate = cores.CoreGate(probe=lambda: next(it), calibrate=2)
    ran, trial = counted_trials()
    t = gate.gated(trial)(1e6, 0.5)
    assert gate.best_ns == 57 and t.extra["core_rtt_ns"] == [58, 58] and len(gate.readings) == 8


def test_core_gate_stops_itself_not_the_run_when_its_probe_fails() -> None:
    """A probe that fails (core_rtt gone, killed, its peer never answering)
    leaves the trials running ungated and says why."""
    readings = iter([60.0, 62.0])

    def probe() -> float:
        try:
            return next(readings)
        except StopIteration:
            raise RuntimeError("core_rtt: no answer from core 1 within 1 s") from None

    ran, trial = counted_trials()
    gate = cores.CoreGate(probe=probe, calibrate=0, wait_s=0.3)
    assert gate.gated(trial)(1e6, 0.5).extra["core_rtt_ns"] == [60, 62]
    t = gate.gated(trial)(2e6, 0.5)
    assert ran == [1e6, 2e6] and t.extra["core_rtt_ns"] == [60, 60]
    assert gate.broken is not None and "no answer from core 1" in gate.broken
    assert gate.redone == 0 and gate.far_kept() == 0


def test_core_rtt_reads_the_round_trip_between_two_cores() -> None:
    """bench/core_rtt: a positive round trip between cpu0 and cpu1, taken at
    real-time priority (root); the same core twice is a usage error."""
    tool = BUILD / "bench" / "core_rtt"
    r = subprocess.run([str(tool), "0", "1", "500", "3"], capture_output=True, text=True,
                       timeout=30, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["cores"] == [0, 1] and out["iters"] == 500 and out["blocks"] == 3, out
    assert 0 < out["rtt_ns"] <= out["max_ns"] and out["fifo"] is (os.geteuid() == 0), out
    bad = subprocess.run([str(tool), "1", "1"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "two different CPU numbers" in bad.stderr, bad


# perf report's --stdio lines as perf 6.x prints them (a Squall 1-NF run).
PERF_COMMS = """\
# Overhead  Command
# ........  ...............
#
    94.13%  squall-mgr
     2.85%  iperf3
     2.39%  squall-nf-fwd
     0.25%  swapper
     0.22%  ksoftirqd/0
"""
PERF_CHILDREN = """\
# Children      Self  Symbol
    86.82%     0.56%  [k] do_syscall_64
    84.84%     0.15%  [k] xsk_sendmsg
     1.73%     0.01%  [k] __x64_sys_sched_yield
     1.04%     1.04%  [.] nf_poll_once
"""


def test_core_profile_splits_perf_samples() -> None:
    comms = profile.parse_comms(PERF_COMMS)
    assert comms == {"squall-mgr": 94.13, "iperf3": 2.85, "squall-nf-fwd": 2.39,
                     "swapper": 0.25, "ksoftirqd/0": 0.22}  # fmt: skip
    children = profile.parse_children(PERF_CHILDREN)
    assert children["xsk_sendmsg"] == 84.84 and children["nf_poll_once"] == 1.04
    got = profile.shares(comms, children, r"^squall-")
    assert set(got) == set(profile.SHARES)
    assert got == {"kernel_tx": 84.8, "fwd_own": 11.7, "idle": 0.2, "other": 3.2}
    assert abs(sum(got.values()) - 100) < 0.5
    # af_packet's transmit counts the same; with neither, there is none.
    assert profile.shares(comms, {"packet_sendmsg": 80.0}, r"^squall-")["kernel_tx"] == 80
    assert profile.shares(comms, {}, r"^squall-")["kernel_tx"] == 0


# perf stat -x, as perf 6.x prints it on stderr: value,unit,event,time,%,...
PERF_STAT = """83326,,context-switches,2002070422,100.00,,
16263,,sched:sched_wakeup,2002070142,100.00,,
<not counted>,,cycles,0,0.00,,
"""


def test_core_profile_reads_perf_stat_counts() -> None:
    got = profile.parse_stat(PERF_STAT)
    assert got == {"context-switches": 83326, "sched:sched_wakeup": 16263}
    assert set(profile.STAT_EVENTS) <= set(got)
    assert profile.parse_stat("event syntax error: 'x'\n") == {}


@pytest.mark.parametrize("mode", ["proc", "thread", "yield"])
def test_switch_ring_passes_its_token_round(mode: str) -> None:
    """bench/switch_ring, the hand-over floor (switch_cost, tcp_peers): the
    token goes round 3 tasks on one core the hops asked, by futex wakes or
    (yield) by tasks spinning with sched_yield, and the cost is reported."""
    ring = BUILD / "bench" / "switch_ring"
    r = subprocess.run(
        [str(ring), mode, "3", "300", "0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mode"] == mode and out["n"] == 3 and out["hops"] == 300, out
    assert out["ns_per_hop"] > 0, out
    bad = subprocess.run([str(ring), "spin", "3", "300", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "proc|thread|yield" in bad.stderr, bad
