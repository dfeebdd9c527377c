#!/usr/bin/env python3
"""Dataplane benchmark (issue 2): 64 B packets from a synthetic source through
chains of 1, 2 and 3 NFs in poll and sleep mode, next to the limit measured in
the same run: the manager -> no-op -> manager ring round trip (bench/ring_limit),
and the floor of any 1-NF chain from this source: port -> ring -> no-op process
-> ring -> port with real mbufs and nothing else (bench/chain_floor). Also: an
idle NF's private memory, and NF start-to-ready time over 100 starts.

Manager on core 0, NFs on core 1. Writes results/dataplane/<time>.json and a
PNG. The published result (docs/results/dataplane.*) comes from the harness,
which runs these same measurements: `squall-bench run dataplane`, then
`squall-bench report --publish dataplane`.

    .venv/bin/python bench/dataplane.py [--quick] [--seconds S] [--reps N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from squall.api import ControlApi  # noqa: E402
from squall.telemetry import Telemetry, TelemetryError  # noqa: E402

MGR = ROOT / "build" / "mgr" / "squall-mgr"
RING_LIMIT = ROOT / "build" / "bench" / "ring_limit"
CHAIN_FLOOR = ROOT / "build" / "bench" / "chain_floor"
TESTPMD = "dpdk-testpmd"
TARGETS = {
    "ratio_1nf_sleep_vs_limit": ">= 0.70",
    "nf_private_kb": "<= 256",
    "nf_start_ms_p50": "<= 5",
}


def machine_facts() -> dict[str, Any]:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    dpdk = subprocess.run(
        ["pkg-config", "--modversion", "libdpdk"], capture_output=True, text=True
    ).stdout.strip()
    huge = Path("/proc/sys/vm/nr_hugepages").read_text().strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "dpdk": dpdk,
        "hugepages_2m": int(huge),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def config_yaml(
    name: str, mode: str, services: list[str], instances: int = 1, traffic: bool = True
) -> str:
    src = "net_null0,size=64,copy=0" if traffic else "net_null0,no-rx=1"
    svc = "\n".join(
        f"  - {{name: s{i}, exec: squall-nf-{s}, mode: {mode}, instances: {instances}}}"
        for i, s in enumerate(services)
    )
    hops = ", ".join(f"s{i}" for i in range(len(services)))
    mgr = f"name: {name}, region_mb: 256, mbufs: 16383, stats_interval_ms: 0, nf_core: 1"
    return f"""manager: {{{mgr}}}
ports:
  - {{name: in, devargs: "{src}"}}
  - {{name: out, devargs: "net_null1,no-rx=1"}}
services:
{svc}
chains:
  - {{name: c, services: [{hops}]}}
rules:
  - {{in_port: in, chain: c, out_port: out}}
"""


class Manager:
    """squall-mgr running one config, with a telemetry connection."""

    def __init__(self, name: str, yaml: str, tmp: Path) -> None:
        self.name = name
        cfg = tmp / f"{name}.yaml"
        cfg.write_text(yaml)
        self.cmd = [str(MGR), "-q", str(cfg)]
        self.log = tmp / f"{name}.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=log)
        try:
            self.api = self._connect()
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise

    def _connect(self) -> ControlApi:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.log.read_text()
                raise RuntimeError(f"squall-mgr exited {self.proc.returncode}: {err}")
            try:
                tm = Telemetry.connect(name=self.name)
                api = ControlApi(tm)
                st = tm.query("/squall/stats")
                if st["nfs_total"] > 0 and st["nfs_live"] == st["nfs_total"]:
                    return api
                tm.close()
            except TelemetryError:
                pass
            time.sleep(0.05)
        raise RuntimeError("squall-mgr did not come up in 60 s")

    def stop(self) -> int:
        self.api.tm.close()
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def out_tx(api: ControlApi) -> int:
    return next(p.tx_pkts for p in api.ports() if p.name == "out")


def run_chain(tmp: Path, mode: str, n_nfs: int, seconds: float, warm_s: float) -> dict[str, Any]:
    name = f"bench-{mode}{n_nfs}"
    m = Manager(name, config_yaml(name, mode, ["fwd"] * n_nfs), tmp)
    try:
        time.sleep(warm_s)
        t0, p0 = time.monotonic(), out_tx(m.api)
        time.sleep(seconds)
        t1, p1 = time.monotonic(), out_tx(m.api)
        st = m.api.stats()
        drops = st.drops
    finally:
        rc = m.stop()
    return {
        "mode": mode,
        "nfs": n_nfs,
        "mpps": (p1 - p0) / (t1 - t0) / 1e6,
        "drops": drops,
        "exit": rc,
        "command": shlex.join(m.cmd),
    }


def run_tool(cmd: list[str], seconds: float) -> str:
    """Run a bench tool to its end, bounded: a tool whose no-op child spins on
    a full ring after the parent stopped could hang, so it runs in its own
    process group, all of which is killed after a timeout or on Ctrl-C."""
    timeout = seconds + 30
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"{shlex.join(cmd)}: no result after {timeout:g} s") from None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0 or not out.startswith("mpps"):
        raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}: {err.strip()}")
    return out


def ring_limit(seconds: float, touch: bool) -> tuple[float, str]:
    """The issue's limit: pointers manager -> no-op -> manager, nothing else."""
    cmd = [str(RING_LIMIT), str(seconds), "0", "1", "32", "1024", "1" if touch else "0"]
    return float(run_tool(cmd, seconds).split()[1]), shlex.join(cmd)


def chain_floor(seconds: float, touch: bool) -> tuple[float, str]:
    """The floor of a 1-NF chain from this source: net_null rx -> ring -> no-op
    process -> ring -> net_null tx with real mbufs, no parse, rule or counter.
    squall-mgr does all of it and more, so its 1-NF chain stays under it."""
    cmd = [str(CHAIN_FLOOR), str(seconds), "0", "1", "1" if touch else "0"]
    out = run_tool(cmd, seconds).split()
    if int(out[3]) != 0:  # the child's count must match: the memory is shared
        raise RuntimeError(f"{shlex.join(cmd)}: {out[3]} packets unaccounted for")
    return float(out[1]), shlex.join(cmd)


def testpmd_io(seconds: float) -> tuple[float | None, str]:
    """The manager core's own ceiling: DPDK's testpmd in io mode (receive a
    burst, send it on, nothing else) from the same net_null source to the same
    sink, forwarding on core 0. Whatever parses, steers or hands packets to an
    NF on that core moves fewer. Median Tx-pps of port 1 over its 1 s reports."""
    cmd = [
        TESTPMD, "-l", "1,0", "--main-lcore", "1", "--no-pci", "--in-memory",
        "--vdev", "net_null0,size=64,copy=0", "--vdev", "net_null1,no-rx=1",
        "--", "--forward-mode=io", "--nb-cores=1", "--stats-period=1",
    ]  # fmt: skip
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except FileNotFoundError:
        return None, shlex.join(cmd)
    try:
        time.sleep(seconds + 2.0)  # the first report covers start-up
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    except BaseException:  # a hang, Ctrl-C: nothing of it may outlive the run
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    rates, port = [], None
    for line in out.splitlines():
        if "NIC statistics for port" in line:
            port = line.split("port")[1].split()[0]
        elif line.strip().startswith("Tx-pps:") and port == "1":
            rates.append(int(line.split()[1]))
    rates = [r for r in rates if r > 0][1:]  # skip the start-up report
    return (statistics.median(rates) / 1e6 if rates else None), shlex.join(cmd)


def private_kb(pid: int) -> int:
    kb = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            kb += int(line.split()[1])
    return kb


def idle_nf_memory(tmp: Path, samples: int = 3) -> dict[str, Any]:
    """An idle NF's private memory: the median of a few NFs, each alone under
    a manager of its own (a lone NF shares no library page with a sibling;
    one run here counted 208 KB where six others counted 144-152)."""
    name = "bench-mem"
    kbs = []
    for _ in range(samples):
        m = Manager(name, config_yaml(name, "sleep", ["noop"], traffic=False), tmp)
        try:
            time.sleep(0.5)
            nf = m.api.nfs()[0]
            kbs.append(private_kb(nf.pid))
        finally:
            m.stop()
    return {"nf_private_kb": int(statistics.median(kbs)), "samples_kb": kbs, "pid_state": nf.state}


def nf_start_times(tmp: Path, n: int) -> list[float]:
    name = "bench-start"
    m = Manager(name, config_yaml(name, "sleep", ["noop"], instances=n, traffic=False), tmp)
    try:
        starts = [nf["start_us"] / 1000.0 for nf in m.api.nfs_dict().values()]
    finally:
        m.stop()
    return starts


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for mode, marker in (("poll", "o"), ("sleep", "s")):
        pts = [r for r in results["chains"] if r["mode"] == mode]
        xs = sorted({r["nfs"] for r in pts})
        ys = [statistics.median(r["mpps"] for r in pts if r["nfs"] == x) for x in xs]
        ax.plot(xs, ys, marker=marker, label=f"Squall, {mode} mode")
    ax.axhline(
        results["summary"]["mpps_limit_ring_rtt"],
        color="gray",
        linestyle="--",
        label="limit: ring round trip, no-op",
    )
    if "mpps_testpmd_io_core0" in results["summary"]:
        ax.axhline(
            results["summary"]["mpps_testpmd_io_core0"],
            color="gray",
            linestyle=":",
            label="testpmd io on core 0, no NF",
        )
    ax.set_xlabel("NFs in the chain")
    ax.set_ylabel("throughput (Mpps, 64 B)")
    ax.set_xticks([1, 2, 3])
    ax.set_ylim(bottom=0)
    ax.set_title("manager on core 0, NFs on core 1")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def summarize(results: dict[str, Any], nf_private_kb: int, starts: list[float]) -> dict[str, float]:
    """The named figures (DESIGN §10) from one run's samples: results has
    "chains" ({mode, nfs, mpps}), "limit" and "floor" ({touch, mpps}) and
    "testpmd" ({mpps}) lists."""

    def med(rows: list[dict[str, Any]], **match: Any) -> float:
        return statistics.median(
            float(r["mpps"]) for r in rows if all(r[k] == v for k, v in match.items())
        )

    chains = results["chains"]
    sleep1 = med(chains, mode="sleep", nfs=1)
    limit, limit_touch = med(results["limit"], touch=False), med(results["limit"], touch=True)
    s: dict[str, float] = {
        "mpps_limit_ring_rtt": round(limit, 3),
        "mpps_limit_ring_rtt_touch": round(limit_touch, 3),
    }
    for mode in ("poll", "sleep"):
        for n in (1, 2, 3):
            s[f"mpps_{n}nf_{mode}"] = round(med(chains, mode=mode, nfs=n), 3)
    s["ratio_1nf_sleep_vs_limit"] = round(sleep1 / limit, 3)
    s["ratio_1nf_sleep_vs_limit_touch"] = round(sleep1 / limit_touch, 3)
    s["ratio_1nf_sleep_vs_1nf_poll"] = round(sleep1 / med(chains, mode="poll", nfs=1), 3)
    if results["floor"]:
        floor, floor_touch = med(results["floor"], touch=False), med(results["floor"], touch=True)
        s["mpps_floor_1nf"] = round(floor, 3)
        s["mpps_floor_1nf_touch"] = round(floor_touch, 3)
        s["ratio_floor_1nf_vs_limit"] = round(floor / limit, 3)
        s["ratio_1nf_sleep_vs_floor_touch"] = round(sleep1 / floor_touch, 3)
    if results["testpmd"]:
        tp = med(results["testpmd"])
        s["mpps_testpmd_io_core0"] = round(tp, 3)
        s["ratio_testpmd_io_vs_limit"] = round(tp / limit, 3)
        s["ratio_1nf_sleep_vs_testpmd_io"] = round(sleep1 / tp, 3)
    s["nf_private_kb"] = nf_private_kb
    s["nf_start_ms_p50"] = round(statistics.median(starts), 3)
    s["nf_start_ms_max"] = round(max(starts), 3)
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 rep, 1 s points, 20 starts")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per point")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per point")
    ap.add_argument("--starts", type=int, default=100, help="NF starts to time")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.reps, args.starts = 1.0, 1, 20
    for binary in (MGR, RING_LIMIT, CHAIN_FLOOR):
        if not binary.exists():
            print(f"dataplane: {binary} missing: run `make build`", file=sys.stderr)
            return 2

    command = shlex.join([sys.executable, *sys.argv])
    print(f"command: {command}")
    facts = machine_facts()
    print(f"machine: {facts}")
    results: dict[str, Any] = {
        "command": command,
        "machine": facts,
        "chains": [],
        "limit": [],
        "floor": [],
        "testpmd": [],
    }
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for rep in range(args.reps):
            for touch in (False, True):
                mpps, cmd = ring_limit(args.seconds, touch)
                results["limit"].append({"mpps": mpps, "touch": touch, "command": cmd})
                what = "ring round trip + verdict" if touch else "ring round trip, bare"
                print(f"rep {rep}: limit ({what:25}) {mpps:7.2f} Mpps")
                mpps, cmd = chain_floor(args.seconds, touch)
                results["floor"].append({"mpps": mpps, "touch": touch, "command": cmd})
                what = "no-op reads, writes meta" if touch else "no-op, untouched"
                print(f"rep {rep}: floor ({what:25}) {mpps:7.2f} Mpps")
            tp, cmd = testpmd_io(args.seconds)
            if tp is not None:
                results["testpmd"].append({"mpps": tp, "command": cmd})
                print(f"rep {rep}: testpmd io, core 0         {tp:7.2f} Mpps")
            for mode in ("poll", "sleep"):
                for n in (1, 2, 3):
                    r = run_chain(tmp, mode, n, args.seconds, warm_s=0.5)
                    results["chains"].append(r)
                    print(f"rep {rep}: {mode:5} {n} NF            {r['mpps']:7.2f} Mpps")
        mem = idle_nf_memory(tmp)
        starts = nf_start_times(tmp, args.starts)
    facts["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]

    summary = summarize(results, mem["nf_private_kb"], starts)
    results["nf_start_ms"] = starts
    results["summary"] = summary
    results["targets"] = TARGETS
    results["notes"] = (
        "limit = bench/ring_limit: pointers manager -> no-op process -> manager through two "
        "rte_rings in shared memory, cores 0 and 1, bursts of 32; '_touch' also writes a "
        "verdict word in each 256 B object on the NF side and reads it on the manager side, "
        "as libsquall and squall-mgr do. Chains: net_null 64 B source, chains of squall-nf-fwd. "
        "testpmd io = dpdk-testpmd forwarding net_null0 -> net_null1 on core 0 with no NF and "
        "no parsing: the most any program moves through that core from that source. "
        "floor = bench/chain_floor: net_null rx -> ring -> no-op process -> ring -> net_null tx "
        "with real mbufs and nothing else; '_touch': the no-op reads data_len and writes a "
        "verdict in the metadata line, which the parent reads, the least any NF does."
    )

    stamp = time.strftime("%Y%m%dT%H%M%S")
    out_dir = ROOT / "results" / "dataplane"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{stamp}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    plot(results, out_dir / f"{stamp}.png")
    print("summary:")
    for k, v in summary.items():
        target = TARGETS.get(k, "")
        print(f"  {k:30} {v:>10}  {('target ' + target) if target else ''}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
