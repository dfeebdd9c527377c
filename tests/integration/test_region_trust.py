"""What the manager trusts stays its own: an NF (or anyone) that rewrites
shared state hurts at most itself, and the manager's files cannot be turned
against it.

- A manager killed by SIGKILL leaves no hugepage behind once its NFs are gone
  (the region is an unlinked file held by its mappers, not a named file).
- --exit-stats never writes through a symlink planted at its path.
- Two processes cannot attach to one NF slot.
- A hostile NF (tests/nfs/badregion.c) that rewrites shared state the manager
  used as an index, address, size or decision costs the manager nothing: it
  keeps running, another chain's packets flow, the rewrite is counted under
  stats region_corrupt, and every mbuf is home at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pcaps
import pytest
from conftest import BUILD, NF_DIR, Manager, pid_is_alive

N_PKTS = 50


def one_fwd_chain(mgr: Manager, tmp_path: Path) -> dict:
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", pcaps.good_frames(N_PKTS, [pcaps.mac(1)]))
    return mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[{"name": "fwd", "exec": "squall-nf-fwd"}],
        chains=[{"name": "c", "services": ["fwd"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )


def test_exit_stats_replaces_a_symlink_instead_of_following_it(
    mgr: Manager, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    mgr.exit_stats_path.symlink_to(victim)
    mgr.start(one_fwd_chain(mgr, tmp_path))
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    ex = mgr.finish()
    assert victim.read_text() == "precious\n"
    assert not mgr.exit_stats_path.is_symlink()
    assert ex["stats"]["tx_pkts"] == N_PKTS
    assert json.loads(mgr.exit_stats_path.read_text())["stats"]["tx_pkts"] == N_PKTS
    assert [p.name for p in tmp_path.glob("exit.json.*")] == []  # no temp file left


def region_of(mgr: Manager) -> str:
    """The path a hand-started NF attaches with (--sq-region)."""
    return f"/dev/shm/squall-{mgr.name}.region"


def test_a_second_process_cannot_attach_to_a_taken_slot(mgr: Manager, tmp_path: Path) -> None:
    mgr.start(one_fwd_chain(mgr, tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUALL_")}
    r = subprocess.run(
        [str(NF_DIR / "squall-nf-fwd"), "--sq-region", region_of(mgr), "--sq-id", "0"],
        capture_output=True,
        text=True,
        timeout=20,
        env=env,
    )
    assert r.returncode != 0
    assert "already attached by pid" in r.stderr, r.stderr
    # The slot's owner still gets every packet.
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    assert mgr.nfs()["fwd#0"]["rx_pkts"] == N_PKTS
    mgr.finish()


def hugepages_free() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("HugePages_Free:"):
            return int(line.split()[1])
    raise AssertionError("no HugePages_Free in /proc/meminfo")


def processes_mapping(needle: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "maps").read_text():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def test_a_killed_manager_leaves_no_hugepage_behind(mgr: Manager, tmp_path: Path) -> None:
    before = hugepages_free()
    cfg = one_fwd_chain(mgr, tmp_path)
    cfg["services"] = [
        {"name": "fwd", "exec": "squall-nf-fwd", "instances": 2},
        {"name": "poll", "exec": "squall-nf-fwd", "mode": "poll"},
    ]
    cfg["chains"] = [{"name": "c", "services": ["fwd", "poll"]}]
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    nf_pids = {nf["pid"] for nf in mgr.nfs().values()}
    assert len(nf_pids) == 3
    region = f"squall-{mgr.name}.region"
    assert processes_mapping(region), "the region is mapped under its name"
    assert hugepages_free() <= before - 64 // 2, "the region took its hugepages"

    assert mgr.proc is not None
    mgr.proc.send_signal(signal.SIGKILL)
    mgr.proc.wait(timeout=10)
    # NFs go with their manager (PR_SET_PDEATHSIG, or their liveness check).
    deadline = time.monotonic() + 10
    while any(pid_is_alive(p) for p in nf_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_is_alive(p) for p in nf_pids), "NFs outlived their manager"
    # Nobody holds the region: the kernel freed it, with no file to remove.
    assert processes_mapping(region) == []
    deadline = time.monotonic() + 10
    while hugepages_free() < before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hugepages_free() >= before, "hugepages still held after the manager died"
    # What is left by name is a dangling symlink into the dead manager's /proc.
    link = Path("/dev/shm") / region
    assert link.is_symlink() and not link.exists()
    link.unlink()
    # and its attach socket, which no one answers (the next manager of the
    # name replaces it)
    sock_path = Path(f"/run/squall/squall-{mgr.name}.attach")
    assert sock_path.is_socket()
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        with pytest.raises(ConnectionRefusedError):
            s.connect(str(sock_path))
    sock_path.unlink()


BADREGION = BUILD / "tests" / "nfs" / "squall-nf-badregion"

# (what the hostile NF rewrites, the region_corrupt key that counts it, whether
# the hostile NF's own chain still carries its packets)
TRUST_CASES = [
    ("tx_ready_off", "tx_ready_off", True),
    ("core_group", "core_group", True),
    ("service", "service", True),
    ("mgr_state", "mgr_state", True),
    # its rx ring's positions past each other: killed, as for tx (mgr/nfring.h)
    ("rx_ring", "ring", False),
    ("tx_ring", "ring", False),  # killed: its packets are counted nf_died
    # its rx ring's producer tail moved: rewritten from the manager's own
    # position (a multi-producer enqueue would have waited for it forever);
    # the NF's own dequeue may read the lie first and break its ring (None:
    # its packets out or counted, either way)
    ("rx_tail", "ring", None),
]


@pytest.mark.parametrize(("what", "key", "bad_flows"), TRUST_CASES, ids=[c[0] for c in TRUST_CASES])
def test_a_hostile_nf_costs_the_manager_nothing(
    mgr: Manager, tmp_path: Path, what: str, key: str, bad_flows: bool | None
) -> None:
    frames = pcaps.good_frames(2 * N_PKTS, [pcaps.mac(1), pcaps.mac(2)])
    n_bad = sum(1 for f in frames if f[:6] == bytes.fromhex("020000000001"))
    n_good = len(frames) - n_bad
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[
            # restart: never: a killed hostile NF stays dead (the counts below)
            {
                "name": "bad",
                "exec": str(BADREGION),
                "args": ["--corrupt", what],
                "restart": "never",
            },
            {"name": "good", "exec": "squall-nf-fwd"},
        ],
        chains=[
            {"name": "badc", "services": ["bad"]},
            {"name": "goodc", "services": ["good"]},
        ],
        rules=[
            {"in_port": "in", "dst_mac": pcaps.mac(1), "chain": "badc", "out_port": "out"},
            {"in_port": "in", "dst_mac": pcaps.mac(2), "chain": "goodc", "out_port": "out"},
        ],
    )
    # The tx_ring NF is killed as soon as traffic flows: one may be all start sees.
    mgr.start(cfg, want_nfs=2 if bad_flows else 1)
    mgr.wait_for(
        lambda: mgr.stats()["region_corrupt"][key] >= 1, 30, f"region_corrupt {key} counted"
    )
    mgr.wait_for(
        lambda: mgr.chains()["goodc"]["tx_pkts"] == n_good, 30, "the good chain's packets out"
    )
    want_bad = n_bad if bad_flows else 0
    mgr.wait_for(
        lambda: mgr.stats()["tx_pkts"] + mgr.stats()["drop_pkts"] == len(frames),
        30,
        "every packet out or dropped",
    )
    assert mgr.is_running(), mgr.log_tail()
    ex = mgr.finish()  # exit 0, every mbuf home
    st = ex["stats"]
    assert ex["chains"]["goodc"]["tx_pkts"] == n_good
    if bad_flows is not None:
        assert ex["chains"]["badc"]["tx_pkts"] == want_bad, st
    if bad_flows is False:
        # Held by the NF when it was killed, or sent after (no NF left to
        # take them): which, depends on when the kill lands in the replay.
        drops = st["drops"]
        assert drops["nf_died"] >= 1 and drops["nf_died"] + drops["no_nf"] == n_bad, drops
    assert st["region_corrupt"][key] >= 1, st
    # Names come from the manager's config, never from the NF's control block.
    assert {nf["service"] for nf in ex["nfs"].values()} == {"bad", "good"}


def test_a_forged_woken_count_holds_back_no_flow(mgr: Manager) -> None:
    """The header's count of a core's NFs woken and not yet running gates new
    per-flow flows (pool_backlog_max). An NF that sets it to 2^30 at its first
    burst must not hold back the flows after it: the manager bounds the count
    by its own record of the NFs it woke (mgr/director.c backlog_full)."""
    from test_per_flow import gen_per_flow_config, wait_flows_gone

    cfg = gen_per_flow_config(mgr, instances=4, pool_backlog_max=1)
    svc = cfg["services"][0]
    svc.update(exec=str(BADREGION), args=["--corrupt", "woken"], restart="never")
    mgr.start(cfg)
    # 4 ms between connections: a woken NF that runs late holds back the next
    # SYN, and at 1,000 pps a stall of ~10 ms of the NFs' core held back three
    mgr.query("/squall/gen_rate,250")
    sent = mgr.gen_send(40)  # connections of 4 packets, one after the other
    mgr.wait_accounted(sent)
    flows = wait_flows_gone(mgr, mgr.query("/squall/flows")["flows_created"])
    # Most connections got their NFs, some may be held back while a woken NF
    # really waited to run; with the forged count all but the first are.
    conns = sent // 4
    pool = mgr.query("/squall/pools")["s"]
    assert flows["flows_created"] >= max(conns // 2, 2), (flows, pool)
    assert pool["backlogged"] <= conns // 4, pool
    mgr.finish()


HOSTILE = BUILD / "tests" / "nfs" / "squall-nf-hostile"


def test_an_nf_cannot_claim_another_flows_tuple(mgr: Manager) -> None:
    """A per-flow NF that rewrites its packets to the neighbouring flow's tuple
    and returns them sq_rekeyed() (what a NAT does with its translation) must
    not get that flow's packets: a second key that is already a flow's key is
    refused (mgr/director.c add_alias), counted, and each flow's packets stay
    with its own NF."""
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "s", "exec": str(HOSTILE), "args": ["--try", "rekey"], "instances": 4}],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out", "assign": "per-flow"}],
    )
    # Two UDP flows in turn (10.1.0.0:1024 and 10.1.0.1:1025 to 10.2.0.1:9):
    # each NF claims the other's tuple from its second packet on.
    cfg["generator"] = {"port": "gen", "rate_pps": 0, "flows": 2}
    mgr.start(cfg)
    mgr.query("/squall/gen_rate,2000")
    sent = mgr.gen_send(200)
    mgr.wait_accounted(sent)
    # every claim after each NF's first packet, each refused (the director
    # takes the claims every poll period)
    mgr.wait_for(
        lambda: mgr.query("/squall/flows")["rekeys_refused"] >= sent - 2, 10, "claims refused"
    )
    flows = mgr.query("/squall/flows")
    assert flows["flows_created"] == 2, flows
    assert flows["flows_rekeyed"] == 0, flows
    assert flows["rekeys_refused"] == sent - 2, flows
    assert flows["rekeys_lost"] == 0, flows
    busy = sorted(nf["rx_pkts"] for nf in mgr.nfs().values() if nf["rx_pkts"] > 0)
    assert busy == [sent // 2, sent - sent // 2], busy
    st = mgr.stats()
    assert st["tx_pkts"] == sent and st["drop_pkts"] == 0, st["drops"]
    mgr.finish()


def test_an_nf_cannot_claim_a_connection_before_it_opens(mgr: Manager) -> None:
    """A per-flow NF that rekeys its flow to the tuple the client's next
    connection will use (the source port one up) must not be handed that
    connection: a SYN opens a flow of its own and never matches a second
    key (mgr/director.c lookup_flow)."""
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {"name": "s", "exec": str(HOSTILE), "args": ["--try", "claimnext"], "instances": 4}
        ],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out", "assign": "per-flow"}],
        flow_linger_ms=0,  # (a closed connection's NF back in the pool at once)
    )
    # two connections at a time, the second half a connection behind: SYN,
    # 7 data segments, FIN, FIN back; the next connection's client port is
    # this one's plus one, and it opens while this one is still open
    cfg["generator"] = {
        "port": "gen",
        "rate_pps": 0,
        "flows": 2,
        "tcp_flow_pkts": 10,
        "tcp_start": "staggered",
    }
    mgr.start(cfg)
    mgr.query("/squall/gen_rate,2000")
    sent = mgr.gen_send(200)
    mgr.wait_accounted(sent)
    gen = mgr.query("/squall/gen")
    flows = mgr.query("/squall/flows")
    # every connection its own flow: no SYN was steered by another's claim
    drops = mgr.stats()["drops"]
    # every connection's SYN opened a flow of its own, or found the pool
    # empty (an NF not back yet from the last flow): none was steered by a
    # claim into another's
    assert flows["flows_created"] + drops["pool_empty"] == gen["conns_started"], (
        flows,
        gen,
        drops,
    )
    assert flows["flows_created"] > 1, (flows, gen, drops)
    assert flows["flows_rekeyed"] >= 1, flows
    mgr.finish()
