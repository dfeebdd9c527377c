"""What no NF reaches, whatever its sandbox (docs/nf-api.md "Threat model"):
the manager's descriptors, the operator's terminal, another NF's memory or
process (of this manager or another's), the manager's control flow through
an mbuf header, or its sibling NFs through the region header.

A hostile NF (tests/nfs/hostile.c) tries each in `sandbox: none`, `strict`
and `isolated`; each try fails or ends the NF, the manager keeps running,
the other chain's packets come out byte-identical, and every mbuf is home
(finish_clean). Each case fails on a manager without the defence it names:
the spawner's descriptor and session hygiene (mgr/spawn.c), per-manager uid
ranges (mgr/uids.c), the guard's restore of ol_flags and priv_size
(mgr/guard.h), libsquall's own copy of the manager's pid (lib/nf.c)."""

from __future__ import annotations

import os
import pty
import select
import signal
from pathlib import Path

import pytest
from conftest import Manager
from test_sandbox import alive, finish_clean, outcome, start, uid_of, uid_range

MODES = ["none", "strict", "isolated"]
SIGSYS = int(signal.SIGSYS)


def service(sandbox: str) -> dict[str, object]:
    return (
        {"sandbox": sandbox, "ring_slots": 256} if sandbox == "isolated" else {"sandbox": sandbox}
    )


@pytest.mark.parametrize("sandbox", MODES)
def test_an_nf_holds_no_descriptor_of_the_manager(
    mgr: Manager, tmp_path: Path, sandbox: str
) -> None:
    """stdin /dev/null, stdout and stderr a pipe the manager reads, nothing
    else (its region's descriptor is closed once mapped): seen by the NF
    itself and from outside, in /proc/<pid>/fd. Before: the EAL's memory
    files, the telemetry socket, the pcap files, every pipe of the manager."""
    good = start(mgr, tmp_path, "fds", **service(sandbox))
    assert outcome(mgr, "fds") == "listed: 0:chr 1:fifo 2:fifo"
    pid = int(mgr.nfs()["fwd#0"]["pid"])
    fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    assert set(fds) == {0, 1, 2} and fds[0] == "/dev/null", fds
    assert fds[1] == fds[2] and fds[1].startswith("pipe:"), fds
    # its own pipe: no other NF writes into it
    other = int(mgr.nfs()["bad#0"]["pid"]) if alive(mgr.nfs()["bad#0"]) else 0
    if other:
        assert os.readlink(f"/proc/{other}/fd/2") != fds[2]
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("sandbox", MODES)
def test_an_nf_finds_no_socket_to_accept_on(mgr: Manager, tmp_path: Path, sandbox: str) -> None:
    """The telemetry listener (and an af_packet port's socket) stayed open in
    NFs: one accepted and answered the operator's queries."""
    good = start(mgr, tmp_path, "accept", **service(sandbox))
    assert outcome(mgr, "accept") == "failed: no socket among 3 descriptors"
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("sandbox", MODES)
def test_an_nf_cannot_type_into_the_operators_terminal(
    mgr: Manager, tmp_path: Path, sandbox: str
) -> None:
    """The manager runs on a terminal (its controlling one); an NF tries
    TIOCSTI on every descriptor it has and on /dev/tty. It has no terminal
    and no session with one (setsid), and the strict and isolated filters
    kill it at the call. Nothing reaches the terminal's input."""
    master, slave = pty.openpty()
    try:
        good = start(mgr, tmp_path, "tiocsti", tty=slave, **service(sandbox))
        got = outcome(mgr, "tiocsti")
        if sandbox == "none":
            assert got.startswith("failed:"), got
        else:
            assert got.startswith(f"signal {SIGSYS}"), got
        finish_clean(mgr, tmp_path, good)
        typed = b""
        while select.select([master], [], [], 0)[0]:
            typed += os.read(master, 4096)
        assert b"#" not in typed, typed
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize("sandbox", ["none", "strict"])
@pytest.mark.parametrize("attempt", ["procmem", "kill"])
def test_an_nf_cannot_reach_another_managers_nf(
    mgr: Manager, mgr2: Manager, tmp_path: Path, sandbox: str, attempt: str
) -> None:
    """Two managers: the first runs fwd, the second a hostile NF (and noop,
    so that the only squall-nf-fwd it finds is the other manager's). Their
    NFs' uids are in different ranges, so neither kill nor /proc/<pid>/mem
    reaches across. Before: slot 4 of one manager had slot 4's uid in
    every manager, and nf_user's uid was every default NF's."""
    victim_good = start(mgr2, tmp_path / "second", "fds", **service(sandbox))
    victim = int(mgr2.nfs()["fwd#0"]["pid"])
    good = start(mgr, tmp_path, attempt, good_exec="squall-nf-noop", **service(sandbox))
    got = outcome(mgr, attempt)
    expect = "Operation not permitted" if attempt == "kill" else "Permission denied"
    assert got == f"failed: {expect}", got
    assert uid_range(uid_of(victim)) != uid_range(uid_of(int(mgr.nfs()["bad#0"]["pid"])))
    assert alive(mgr2.nfs()["fwd#0"]) and int(mgr2.nfs()["fwd#0"]["pid"]) == victim
    finish_clean(mgr, tmp_path, good)
    finish_clean(mgr2, tmp_path / "second", victim_good)


@pytest.mark.parametrize("sandbox", ["none", "strict"])
def test_an_nf_cannot_read_a_sibling_nfs_memory(mgr: Manager, tmp_path: Path, sandbox: str) -> None:
    """/proc/<pid>/mem of another NF of the same manager: its own uid each."""
    good = start(mgr, tmp_path, "procmem", **service(sandbox))
    assert outcome(mgr, "procmem") == "failed: Permission denied"
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("sandbox", ["none", "strict"])
def test_a_forged_manager_pid_stops_no_nf(mgr: Manager, tmp_path: Path, sandbox: str) -> None:
    """The hostile NF writes a pid that is no process into the region
    header's manager pid, again and again for 4 s: longer than an NF's
    liveness check period (at most 3 s). The other NF keeps its own copy of
    the manager's pid and runs on; the manager counts and repairs the
    header. Before: every other NF believed the manager gone and exited."""
    good = start(mgr, tmp_path, "mgrpid", **service(sandbox))
    victim = int(mgr.nfs()["fwd#0"]["pid"])
    assert outcome(mgr, "mgrpid").startswith("succeeded: rewrote it"), mgr.log_tail()
    nf = mgr.nfs()["fwd#0"]
    assert alive(nf) and int(nf["pid"]) == victim and nf["restarts"] == 0, nf
    assert mgr.stats()["region_corrupt"]["header"] > 0
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("sandbox", ["none", "strict"])
@pytest.mark.parametrize("attempt", ["extbuf", "indirect"])
def test_a_forged_buffer_header_is_restored_before_the_free(
    mgr: Manager, tmp_path: Path, sandbox: str, attempt: str
) -> None:
    """A packet handed back marked EXTERNAL with a fake shared info (a free
    would call its callback, at 0x10, as root), or INDIRECT with a priv_size
    that points its detach at the mbuf before it (a double free): the guard
    restores ol_flags and priv_size at the take, counts it, and the free is
    an ordinary one. Before: the manager died of SIGSEGV, or freed another
    packet's mbuf."""
    good = start(mgr, tmp_path, attempt, **service(sandbox))
    assert outcome(mgr, attempt) == "succeeded: handed back"
    field = "ol_flags" if attempt == "extbuf" else "priv_size"
    mgr.wait_for(lambda: mgr.stats()["headers_restored"][field] > 0, 30, f"{field} restored")
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("sandbox", ["none", "strict"])
def test_the_region_holds_no_allocator_record_to_forge(
    mgr: Manager, tmp_path: Path, sandbox: str
) -> None:
    """The hostile NF writes 0xff over the 128 bytes before its tx ring and
    leaves. With DPDK's malloc heap in the region they were the ring's
    element header, which the manager's free of the ring at stop reads (an
    audit forged its heap pointer to a held lock and the stop hung). The
    region's pieces are now carved with their records in the manager's
    memory (mgr/carve.h): nothing reads those bytes; the manager stops as
    always, every mbuf home, the other chain untouched. (A guard against
    the class coming back: 0xff alone did not make the old free fail.)"""
    good = start(mgr, tmp_path, "allocmeta", restart="never", **service(sandbox))
    # (it leaves at once: its line comes with its log, after its exit)
    mgr.wait_for(
        lambda: "allocmeta: succeeded" in mgr.stderr_path.read_text(), 30, "the NF scribbled"
    )
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("sandbox", MODES)
def test_memory_mb_bounds_shared_mappings(mgr: Manager, tmp_path: Path, sandbox: str) -> None:
    """memory_mb is RLIMIT_DATA, which shared anonymous memory escapes: the
    service's memory cgroup (memory_mb + 32 MiB per instance, from
    memory_mb alone) ends the NF that maps more (the OOM killer's SIGKILL).
    Before: 1 GiB mapped and touched under memory_mb: 64."""
    good = start(mgr, tmp_path, "shmalloc", memory_mb=64, **service(sandbox))
    got = outcome(mgr, "shmalloc")
    assert got.startswith(f"signal {int(signal.SIGKILL)}"), got
    finish_clean(mgr, tmp_path, good)


@pytest.mark.parametrize("sandbox", MODES)
def test_memory_mb_leaves_no_huge_pages_of_its_own(
    mgr: Manager, tmp_path: Path, sandbox: str
) -> None:
    """Huge pages an NF maps itself count in no memory limit where the
    cgroup has no hugetlb controller: with memory_mb (and in every strict or
    isolated NF) MAP_HUGETLB fails (the isolated allow list kills it)."""
    good = start(mgr, tmp_path, "hugealloc", memory_mb=64, **service(sandbox))
    got = outcome(mgr, "hugealloc")
    if sandbox == "isolated":
        assert got.startswith(f"signal {SIGSYS}"), got
    else:
        assert got == "failed: Operation not permitted", got
    finish_clean(mgr, tmp_path, good)


ISO = {"sandbox": "isolated", "ring_slots": 256}


@pytest.mark.parametrize("granted", [False, True])
def test_an_isolated_nf_sends_out_only_where_granted(
    mgr: Manager, tmp_path: Path, granted: bool
) -> None:
    """An isolated NF's OUT verdict names the other chain's egress port: not
    granted (no out_ports: none for an isolated service), each such packet
    is a verdict_denied drop and the other chain's output is untouched; with
    out_ports naming the port (the control), they go out there."""
    extra = {"out_ports": ["good_out"]} if granted else {}
    good = start(mgr, tmp_path, "outport", **ISO, **extra)
    assert outcome(mgr, "outport") == "succeeded: every packet"
    n_bad = 20  # test_sandbox's N_BAD
    if granted:
        mgr.wait_for(lambda: mgr.ports()["good_out"]["tx_pkts"] == len(good) + n_bad, 30, "all out")
        mgr.finish()
        return
    mgr.wait_for(lambda: mgr.stats()["drops"].get("verdict_denied", 0) == n_bad, 30, "denied")
    assert mgr.ports()["bad_out"]["tx_pkts"] == 0
    finish_clean(mgr, tmp_path, good)


def test_what_an_isolated_nf_says_of_a_header_is_not_taken(mgr: Manager, tmp_path: Path) -> None:
    """An isolated NF hands every packet back saying it is ARP with header
    lengths 0; the manager parses each again before the next hop, so the
    firewall after it judges IPv4 (allowed, no not_ip). Before: every packet
    reached the firewall as non-IP, past its IPv4 rules."""
    good = start(
        mgr,
        tmp_path,
        "decoy",
        **ISO,
        next_hop={"name": "fw", "exec": "squall-nf-firewall", "args": ["--non-ip=allow"]},
    )
    assert outcome(mgr, "decoy") == "succeeded: every packet"
    mgr.wait_for(lambda: mgr.ports()["bad_out"]["tx_pkts"] == 20, 30, "the bad chain's out")
    counters = mgr.nfs()["fw#0"]["counters"]
    assert counters["not_ip"] == 0 and counters["allowed"] == 20, counters
    finish_clean(mgr, tmp_path, good)


def test_a_frame_an_isolated_nf_breaks_goes_no_further(mgr: Manager, tmp_path: Path) -> None:
    """10 bytes is no Ethernet frame: the parse after the isolated hop drops
    each such packet (parse), as rx would, instead of sending it on."""
    good = start(mgr, tmp_path, "truncate", **ISO)
    assert outcome(mgr, "truncate") == "succeeded: every packet"
    mgr.wait_for(lambda: mgr.stats()["drops"].get("parse", 0) == 20, 30, "parse drops")
    assert mgr.ports()["bad_out"]["tx_pkts"] == 0
    finish_clean(mgr, tmp_path, good)
