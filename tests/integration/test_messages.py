"""Per-instance message rings (mgr/msg.c, seed 003 §IV.B): a message sent to one
instance reaches that instance and no other, an NF's answer comes back marked
with the NF that sent it, a full ring refuses rather than overwrites, an NF that
lies about its ring counts is counted and harms nobody else, and the scaler's
BLOCK and RERUN let a poll-mode instance sleep while it is scaled in.

The NF is tests/nfs/msgecho: it answers each user message (type T, data D) with
type T + 1 and data "i<instance>:D", and counts what it took."""

from __future__ import annotations

import os
import signal
from typing import Any

from conftest import BUILD, Manager
from test_apply import squallctl

MSGECHO = BUILD / "tests" / "nfs" / "squall-nf-msgecho"
TIMEOUT_S = 10.0


def echo_config(mgr: Manager, services: list[dict[str, Any]]) -> dict[str, Any]:
    return mgr.config(
        ports=[
            {"name": "g", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=services,
        chains=[{"name": "c", "services": [services[0]["name"]]}],
        rules=[{"in_port": "g", "chain": "c", "out_port": "out"}],
    )


def msgs(mgr: Manager) -> dict[str, Any]:
    return mgr.query("/squall/msgs")


def from_nfs(mgr: Manager) -> list[dict[str, Any]]:
    entries = [v for v in msgs(mgr).values() if isinstance(v, dict) and "dir" in v]
    return sorted((e for e in entries if e["dir"] == "from_nf"), key=lambda e: e["seq"])


def counters(mgr: Manager, service: str) -> dict[int, dict[str, int]]:
    """instance -> its NF-defined counters."""
    return {
        int(nf["instance"]): nf["counters"] for nf in mgr.nfs().values() if nf["service"] == service
    }


def send(mgr: Manager, service: str, instance: int, mtype: int, data: bytes) -> dict[str, Any]:
    return mgr.query(f"/squall/msg_send,{service},{instance},{mtype},{data.hex()}")


def test_a_message_reaches_its_instance_and_no_other(mgr: Manager) -> None:
    mgr.start(echo_config(mgr, [{"name": "e", "exec": str(MSGECHO), "instances": 3}]))
    nf_ids = {int(nf["instance"]): int(nf["id"]) for nf in mgr.nfs().values()}

    # One to each: every NF is asleep (no traffic), so the message wakes it.
    for i in range(3):
        r = send(mgr, "e", i, 400 + i, f"to{i}".encode())
        assert r.get("nf") == nf_ids[i], r
    mgr.wait_for(lambda: msgs(mgr)["received"] >= 3, TIMEOUT_S, "3 answers")
    got = from_nfs(mgr)
    assert len(got) == 3, got
    for e in got:
        i = int(e["instance"])
        assert e["nf"] == nf_ids[i] and e["type"] == 400 + i + 1, e
        assert bytes.fromhex(e["data"]) == f"i{i}:to{i}".encode(), e

    # Two more to instance 1 alone, through squallctl.
    for k in range(2):
        r = squallctl(mgr, "msg", "e", "1", "500", f"again{k}")
        assert r.returncode == 0, r.stderr
    mgr.wait_for(lambda: msgs(mgr)["received"] >= 5, TIMEOUT_S, "5 answers")
    c = counters(mgr, "e")
    assert [c[i]["user_msgs"] for i in range(3)] == [1, 3, 1], c
    later = from_nfs(mgr)[3:]
    assert [bytes.fromhex(e["data"]) for e in later] == [b"i1:again0", b"i1:again1"], later
    assert all(e["instance"] == 1 for e in later), later
    m = msgs(mgr)
    assert (m["sent"], m["received"], m["bad"], m["full"]) == (5, 5, 0, 0), m
    r = squallctl(mgr, "msgs")
    assert r.returncode == 0 and "i1:again1" in r.stdout, r.stdout

    # Refused: a system type, no such instance, data too long.
    for bad in ("e,0,2,", "e,3,400", "e,0,400," + "00" * 57, "nope,0,400"):
        mgr.query_error(f"/squall/msg_send,{bad}")
    mgr.finish()


def test_a_full_ring_refuses_and_loses_nothing_it_took(mgr: Manager) -> None:
    """An NF that sends 6 at once, before the manager takes any: 4 fit, 2 are
    refused to the NF (it counts them), the 4 arrive in order."""
    mgr.start(echo_config(mgr, [{"name": "e", "exec": str(MSGECHO), "args": ["--hello", "6"]}]))
    mgr.wait_for(lambda: msgs(mgr)["received"] >= 4, TIMEOUT_S, "4 hellos")
    got = from_nfs(mgr)
    assert [bytes.fromhex(e["data"]) for e in got] == [f"hello{k}".encode() for k in range(4)]
    assert counters(mgr, "e")[0]["send_refused"] == 2
    nf = next(iter(mgr.nfs().values()))
    assert nf["msgs_unsent"] == 2, nf
    mgr.finish()


def test_an_nf_that_lies_about_its_rings_harms_nobody_else(mgr: Manager) -> None:
    mgr.start(
        echo_config(
            mgr,
            [
                {"name": "ok", "exec": str(MSGECHO)},
                {"name": "head", "exec": str(MSGECHO), "args": ["--lie", "out_head"]},
                {"name": "tail", "exec": str(MSGECHO), "args": ["--lie", "in_tail"]},
            ],
        )
    )
    ids = {nf["service"]: int(nf["id"]) for nf in mgr.nfs().values()}
    # out_head: 1,000 "messages" that are none; counted, none taken.
    mgr.wait_for(
        lambda: msgs(mgr).get(f"nf{ids['head']}", {}).get("bad", 0) >= 1, TIMEOUT_S, "the lie"
    )
    # in_tail: the manager will not write past what it knows is free.
    assert "corrupt" in mgr.query_error("/squall/msg_send,tail,0,400,01")
    assert send(mgr, "ok", 0, 400, b"x").get("nf") == ids["ok"]
    mgr.wait_for(lambda: msgs(mgr)["received"] >= 1, TIMEOUT_S, "ok's answer")
    got = from_nfs(mgr)
    assert [(e["nf"], bytes.fromhex(e["data"])) for e in got] == [(ids["ok"], b"i0:x")], got
    m = msgs(mgr)
    assert m["bad"] == 2 and m[f"nf{ids['tail']}"]["bad"] == 1, m
    assert counters(mgr, "head")[0]["user_msgs"] == 0
    assert counters(mgr, "tail")[0]["user_msgs"] == 0
    mgr.finish()


def test_a_poll_mode_instance_sleeps_while_scaled_in(mgr: Manager) -> None:
    """The scaler's BLOCK puts a poll-mode instance to sleep when it is idle,
    its RERUN puts it back to polling; each instance acknowledges."""
    cfg = echo_config(
        mgr,
        [
            {
                "name": "p",
                "exec": str(MSGECHO),
                "mode": "poll",
                "scale": {"min": 1, "max": 2},
            }
        ],
    )
    cfg["generator"] = {"port": "g", "rate_pps": 2000, "flows": 8}
    mgr.start(cfg)

    def inst(i: int) -> dict[str, Any]:
        reply: dict[str, Any] = mgr.query("/squall/scale_nfs,p")[f"i{i}"]
        return reply

    assert squallctl(mgr, "scale", "p", "2").returncode == 0
    mgr.wait_for(lambda: "i1" in mgr.query("/squall/scale_nfs,p"), TIMEOUT_S, "instance 1")
    mgr.wait_for(lambda: inst(1)["state"] == "running", TIMEOUT_S, "instance 1 running")

    assert squallctl(mgr, "scale", "p", "1").returncode == 0
    mgr.wait_for(lambda: inst(1)["acked"] == "blocked", TIMEOUT_S, "instance 1 took BLOCK")
    nf1 = [nf for nf in mgr.nfs().values() if nf["service"] == "p" and nf["instance"] == 1][0]
    mgr.wait_for(
        lambda: mgr.nfs()[nf1["name"].replace("/", "#")]["state"] == "asleep",
        TIMEOUT_S,
        "the blocked poll-mode instance asleep",
    )

    assert squallctl(mgr, "scale", "p", "2").returncode == 0
    mgr.wait_for(lambda: inst(1)["acked"] == "running", TIMEOUT_S, "instance 1 took RERUN")
    mgr.wait_for(
        lambda: mgr.nfs()[nf1["name"].replace("/", "#")]["state"] == "awake",
        TIMEOUT_S,
        "the rerun instance polling again",
    )
    c = counters(mgr, "p")
    assert (c[1]["blocks"], c[1]["reruns"], c[1]["blocked_wrong"]) == (1, 1, 0), c
    assert (c[0]["blocks"], c[0]["reruns"]) == (0, 0), c  # never scaled in: told nothing

    assert mgr.query("/squall/gen_rate,0")["rate_pps"] == 0
    mgr.wait_accounted(int(mgr.query("/squall/gen")["sent_pkts"]))
    assert mgr.stats()["drop_pkts"] == 0, mgr.stats()["drops"]
    mgr.finish()


def test_an_instance_killed_while_blocked_loses_no_mbuf_and_is_told_again(
    mgr: Manager,
) -> None:
    """Scaled in under traffic (its flows draining), then killed: every packet
    it held is reclaimed and counted, its restarted process is blocked too,
    and learns it from a BLOCK sent before it attached."""
    cfg = echo_config(mgr, [{"name": "p", "exec": str(MSGECHO), "scale": {"min": 1, "max": 3}}])
    # short TCP connections: new flows keep coming, so new instances get some
    cfg["generator"] = {
        "port": "g",
        "rate_pps": 5000,
        "flows": 16,
        "tcp_flow_pkts": 10,
        "tcp_start": "staggered",
    }
    mgr.start(cfg)

    def inst(i: int) -> dict[str, Any]:
        reply: dict[str, Any] = mgr.query("/squall/scale_nfs,p")
        return reply.get(f"i{i}", {})

    assert squallctl(mgr, "scale", "p", "3").returncode == 0
    mgr.wait_for(lambda: inst(2).get("state") == "running", TIMEOUT_S, "instance 2 running")
    mgr.wait_for(lambda: inst(2)["rx_pkts"] > 0, TIMEOUT_S, "instance 2 has packets")
    assert squallctl(mgr, "scale", "p", "1").returncode == 0
    mgr.wait_for(lambda: inst(2).get("acked") == "blocked", TIMEOUT_S, "instance 2 blocked")
    pid = int(inst(2)["pid"])
    os.kill(pid, signal.SIGKILL)
    mgr.wait_for(
        lambda: inst(2).get("pid", 0) not in (0, pid) and inst(2).get("acked") == "blocked",
        TIMEOUT_S,
        "instance 2 restarted and told it is blocked",
    )
    assert mgr.query("/squall/scale")["p"]["running"] == 1
    nf2 = [nf for nf in mgr.nfs().values() if nf["service"] == "p" and nf["instance"] == 2][0]
    # (the slot's counters go on across a restart: the second BLOCK is the new process's)
    assert nf2["restarts"] == 1 and nf2["counters"]["blocks"] == 2, nf2

    assert mgr.query("/squall/gen_rate,0")["rate_pps"] == 0
    mgr.wait_accounted(int(mgr.query("/squall/gen")["sent_pkts"]))
    drops = mgr.stats()["drops"]
    # held when it died, or of its flows while it was down: nothing else
    assert sum(drops.values()) == drops["nf_died"] + drops["no_nf"], drops
    mgr.finish()  # every mbuf home
