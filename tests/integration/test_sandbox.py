"""The strict NF sandbox (issue 16; mgr/sandbox.c, mgr/spawn.c): a hostile NF
(tests/nfs/hostile.c) of a `sandbox: strict` service tries, each as its own
case, to open a network socket, fork, ptrace or kill another NF, become
root, mount, and allocate without bound. Each try fails or ends the NF
(SIGSYS, counted as its exit reason), the manager keeps running, the other
chain's packets come out byte-identical, and every mbuf is home. The same
tries without the sandbox succeed: the cases can fail."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pcaps
import pytest
from conftest import BUILD, Manager

HOSTILE = BUILD / "tests" / "nfs" / "squall-nf-hostile"
N_PKTS = 300
N_BAD = 20
SIGSYS = int(signal.SIGSYS)
# how the hostile NF's report of a try begins (not "spin: spinning")
SAID = ("succeeded", "failed", "stopped", "outside the region", "in the region", "listed")


def start(
    mgr: Manager,
    tmp_path: Path,
    attempt: str,
    good_exec: str = "squall-nf-fwd",
    tty: int | None = None,
    next_hop: dict[str, object] | None = None,
    **service: object,
) -> list[bytes]:
    """A good chain (good_exec, fwd) and a bad one (the hostile NF trying
    attempt, with service's keys, then next_hop's service if given); the
    hostile NF's snoop looks for the good chain's MACs. tty: the manager's
    terminal (Manager.start)."""
    good = pcaps.good_frames(N_PKTS, [pcaps.mac(1)], seed=7)
    bad = pcaps.good_frames(N_BAD, [pcaps.mac(2)], seed=8)
    good_in = pcaps.write_pcap(tmp_path / "good_in.pcap", good)
    bad_in = pcaps.write_pcap(tmp_path / "bad_in.pcap", bad)
    cfg = mgr.config(
        ports=[
            {"name": "good_in", "devargs": f"net_pcap0,rx_pcap={good_in}"},
            {"name": "good_out", "devargs": f"net_pcap1,tx_pcap={tmp_path / 'good_out.pcap'}"},
            {"name": "bad_in", "devargs": f"net_pcap2,rx_pcap={bad_in}"},
            {"name": "bad_out", "devargs": f"net_pcap3,tx_pcap={tmp_path / 'bad_out.pcap'}"},
        ],
        services=[
            {"name": "fwd", "exec": good_exec},
            {
                "name": "bad",
                "exec": str(HOSTILE),
                "args": ["--try", attempt]
                + (["--marker", good[0][:12].hex()] if attempt == "snoop" else []),
                "restart": "never",
                **service,
            },
        ]
        + ([next_hop] if next_hop else []),
        chains=[
            {"name": "good", "services": ["fwd"]},
            {"name": "bad", "services": ["bad"] + ([str(next_hop["name"])] if next_hop else [])},
        ],
        rules=[
            {"in_port": "good_in", "chain": "good", "out_port": "good_out"},
            {"in_port": "bad_in", "chain": "bad", "out_port": "bad_out"},
        ],
    )
    # The hostile NF tries at its first burst, which the pcap port brings at
    # once: it may be gone before all NFs were seen live.
    mgr.start(cfg, want_nfs=1, tty=tty)
    return good


def alive(nf: dict) -> bool:
    return nf["state"] not in ("dead", "exited", "free")


def outcome(mgr: Manager, attempt: str) -> str:
    """What the hostile NF said of its try, or its exit reason if it died."""

    def said() -> str | None:
        for line in mgr.stderr_path.read_text().splitlines():
            tail = line.split(f"squall-nf-hostile: {attempt}: ", 1)
            if len(tail) == 2 and tail[1].startswith(SAID):
                return tail[1]
        return None

    mgr.wait_for(
        lambda: said() is not None or not alive(mgr.nfs()["bad#0"]), 30, "the hostile NF tried"
    )
    got = said()
    if got is not None:
        return got
    mgr.wait_for(lambda: mgr.nfs()["bad#0"]["exit_reason"] != "", 10, "its exit reason")
    return str(mgr.nfs()["bad#0"]["exit_reason"])


def finish_clean(mgr: Manager, tmp_path: Path, good: list[bytes]) -> None:
    """The other chain is untouched: every packet out, bytes in == bytes out,
    the manager alive, every mbuf home (finish)."""
    mgr.wait_for(
        lambda: mgr.ports()["good_out"]["tx_pkts"] == N_PKTS, 30, "the good chain's packets out"
    )
    assert mgr.is_running(), mgr.log_tail()
    mgr.finish()
    assert pcaps.read_pcap(tmp_path / "good_out.pcap") == good


@pytest.mark.parametrize("attempt", ["socket", "fork", "ptrace", "setuid", "mount"])
def test_a_forbidden_system_call_ends_the_nf(mgr: Manager, tmp_path: Path, attempt: str) -> None:
    good = start(mgr, tmp_path, attempt, sandbox="strict")
    victim = int(mgr.nfs()["fwd#0"]["pid"])
    got = outcome(mgr, attempt)
    assert got.startswith(f"signal {SIGSYS}"), got
    assert alive(mgr.nfs()["fwd#0"]) and int(mgr.nfs()["fwd#0"]["pid"]) == victim
    finish_clean(mgr, tmp_path, good)


UIDS_FIRST, UIDS_SPAN = 0x5A000000, 1 << 20  # mgr/uids.h


def uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))


def uid_range(uid: int) -> int:
    """Which manager's range a uid is in (mgr/uids.h)."""
    assert UIDS_FIRST <= uid < UIDS_FIRST + 64 * UIDS_SPAN, hex(uid)
    return (uid - UIDS_FIRST) // UIDS_SPAN


@pytest.mark.parametrize("sandbox", ["none", "strict"])
def test_another_nf_cannot_be_signalled(mgr: Manager, tmp_path: Path, sandbox: str) -> None:
    """kill is allowed (an NF may signal itself); another NF's uid is not its
    own, in every mode: each NF's uid is its range's base + its slot id."""
    good = start(mgr, tmp_path, "kill", sandbox=sandbox)
    victim = int(mgr.nfs()["fwd#0"]["pid"])
    assert outcome(mgr, "kill") == "failed: Operation not permitted"
    assert alive(mgr.nfs()["fwd#0"]) and int(mgr.nfs()["fwd#0"]["pid"]) == victim
    nfs = mgr.nfs()
    uids = {n: uid_of(int(nf["pid"])) for n, nf in nfs.items()}
    assert uids == {n: int(nf["uid"]) for n, nf in nfs.items()}, uids
    base = uids["fwd#0"] - int(nfs["fwd#0"]["id"])
    assert uids["bad#0"] == base + int(nfs["bad#0"]["id"]) and uid_range(base) >= 0
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("attempt", ["kill", "region", "threads"])
def test_the_isolated_allow_list_kills_what_strict_lets_by(
    mgr: Manager, tmp_path: Path, attempt: str
) -> None:
    """An isolated NF's filter is an allow list: a directory scan (kill's and
    region's search for a target) or a thread is no call the NF loop makes,
    and kills it, where strict's deny list lets them run (and they fail on
    the uid or find nothing: test_another_nf_cannot_be_signalled). (Not in
    the ASan subset: a sanitizer build gives isolated NFs the deny list.)"""
    good = start(mgr, tmp_path, attempt, sandbox="isolated", ring_slots=256)
    assert outcome(mgr, attempt).startswith(f"signal {SIGSYS}")
    finish_clean(mgr, tmp_path, good)


def test_memory_is_bounded(mgr: Manager, tmp_path: Path) -> None:
    good = start(mgr, tmp_path, "alloc", sandbox="strict", memory_mb=128)
    got = outcome(mgr, "alloc")
    assert got.startswith("stopped at") and int(got.split()[2]) <= 128, got
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("attempt", ["socket", "fork"])
def test_without_the_sandbox_the_tries_succeed(mgr: Manager, tmp_path: Path, attempt: str) -> None:
    """The control: the same NF and tries, sandbox none: the cases above
    would catch a sandbox that did nothing."""
    start(mgr, tmp_path, attempt)
    victim = int(mgr.nfs()["fwd#0"]["pid"])
    assert outcome(mgr, attempt) == "succeeded"
    os.kill(victim, 0)  # still there
    mgr.finish()


def test_real_nfs_run_unchanged_in_the_sandbox(mgr: Manager, tmp_path: Path) -> None:
    """The deny list lets real NFs be: the firewall and the DPI NF (Vectorscan)
    under `sandbox: strict` forward every packet, byte for byte."""
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)], seed=9)
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    rules = Path(__file__).resolve().parents[2] / "examples" / "dpi.rules"
    strict = {"sandbox": "strict", "memory_mb": 256, "restart": "never"}
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[
            {"name": "fw", "exec": "squall-nf-firewall", "args": ["--non-ipv4=allow"], **strict},
            {"name": "dpi", "exec": "squall-nf-dpi", "args": ["--rules", str(rules)], **strict},
        ],
        chains=[{"name": "c", "services": ["fw", "dpi"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    nfs = mgr.nfs()
    uids = {
        name: int(
            next(
                line.split()[1]
                for line in Path(f"/proc/{int(nf['pid'])}/status").read_text().splitlines()
                if line.startswith("Uid:")
            )
        )
        for name, nf in nfs.items()
    }
    assert uids == {n: int(nf["uid"]) for n, nf in nfs.items()}, uids
    assert len(set(uids.values())) == len(uids) and all(uid_range(u) >= 0 for u in uids.values())
    assert all(alive(nf) and nf["restarts"] == 0 for nf in nfs.values()), nfs
    mgr.finish()
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames


def test_the_mbuf_pool_s_own_state_is_out_of_reach(mgr: Manager, tmp_path: Path) -> None:
    """Issue 20: the mempool's header, caches and free ring are in the manager's
    own memory, only the mbufs in the region. An NF (no sandbox needed) that
    follows a packet's pool pointer to scribble over the free ring finds
    nothing mapped there and dies; the manager allocates on, correctly."""
    good = start(mgr, tmp_path, "pool")
    assert outcome(mgr, "pool") == "outside the region"
    mgr.wait_for(lambda: not alive(mgr.nfs()["bad#0"]), 30, "the NF gone")
    assert mgr.nfs()["bad#0"]["exit_reason"].startswith(f"signal {int(signal.SIGSEGV)}")
    finish_clean(mgr, tmp_path, good)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def shipped_nfs(tmp_path: Path) -> dict[str, list[str]]:
    """Every NF Squall ships, with arguments that let traffic through it."""
    ct_rules = tmp_path / "ct.rules"
    ct_rules.write_text("bind out web\nallow web in proto=udp\nallow web in proto=tcp\n")
    return {
        "fwd": [],
        "monitor": [],
        "l3fwd": ["--route", "0.0.0.0/0=next"],
        "firewall": ["--non-ipv4=allow", "--rule=deny,proto=udp,dport=53"],
        "conntrack": ["--rules", str(ct_rules)],
        "nat": ["--snat", "10.0.0.0/16=10.9.0.1:20000-29999"],
        "lb": ["--vip", "tcp:10.1.0.5:80", "--backend", "10.2.0.1:8081"],
        "dpi": ["--rules", str(EXAMPLES / "dpi.rules")],
        "aes": ["--key-file", str(EXAMPLES / "aes.key")],
        "sig": [],
        "noop": [],
        "cost": ["--cycles", "1000"],
    }


def run_each_nf(mgr: Manager, tmp_path: Path, sandbox: str, frames: list[bytes]) -> dict:
    """Every shipped NF in a chain of its own, chosen by destination MAC, under
    sandbox; returns the frames out and each NF's counters."""
    nfs = shipped_nfs(tmp_path)
    in_pcap = pcaps.write_pcap(tmp_path / "each_in.pcap", frames)
    out_pcap = tmp_path / f"each_out_{sandbox}.pcap"
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, out_pcap),
        services=[
            {
                "name": n,
                "exec": f"squall-nf-{n}",
                "args": a,
                "sandbox": sandbox,
                "ring_slots": 256,
                # one polling NF: its loop's calls (sched_yield) are on the list too
                "mode": "poll" if n == "noop" else "sleep",
            }
            for n, a in nfs.items()
        ],
        chains=[{"name": n, "services": [n]} for n in nfs],
        rules=[
            {"in_port": "in", "dst_mac": pcaps.mac(i + 1), "chain": n, "out_port": "out"}
            for i, n in enumerate(nfs)
        ],
    )
    mgr.start(cfg)
    mgr.wait_accounted(len(frames))
    got = mgr.nfs()
    assert all(alive(nf) and nf["restarts"] == 0 for nf in got.values()), got
    mgr.finish()
    return {
        "out": sorted(pcaps.read_pcap(out_pcap)),
        "nfs": {k: (v["rx_pkts"], v["tx_pkts"], v["counters"]) for k, v in got.items()},
    }


def test_every_shipped_nf_runs_isolated_under_the_allow_list(mgr: Manager, tmp_path: Path) -> None:
    """The isolated filter is an allow list (mgr/sandbox.c): each NF Squall
    ships, isolated, forwards exactly what it forwards in shared mode, byte
    for byte, with the same counters, and none is killed by the filter."""
    n_nfs = len(shipped_nfs(tmp_path))
    frames = pcaps.good_frames(N_PKTS * 4, [pcaps.mac(i + 1) for i in range(n_nfs)], seed=5)
    shared = run_each_nf(mgr, tmp_path, "none", frames)
    isolated = run_each_nf(mgr, tmp_path, "isolated", frames)
    assert len(isolated["out"]) > len(frames) // 2, "most packets through"
    for name, (rx, _tx, _c) in isolated["nfs"].items():
        assert rx == len(frames) // n_nfs, (name, rx)
    assert isolated["nfs"] == shared["nfs"]
    assert isolated["out"] == shared["out"]
