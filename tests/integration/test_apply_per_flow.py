"""Run-time changes of per-flow services (issue 14, mgr/control.c and
mgr/director.c): a pool grows and shrinks while its NFs hold flows, a chain
removed while flows are in it drains (its flows finish on their NFs, then it
goes), a per-flow service is added, and apply --end-flows ends flows instead.
The manager's generator opens TCP connections (SYN, data, FIN both ways) that
each take one NF per hop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from conftest import Manager
from squall import control
from squall.bench.config import to_yaml
from test_apply import get_config

MAX_INSTANCES = 8


def pf_config(
    mgr: Manager,
    services: dict[str, int],
    chain: tuple[str, list[str]],
    flows: int,
    conn_pkts: int,
    pool_idle: int = 2,
) -> dict[str, Any]:
    """Generator port g -> one per-flow chain -> port out; services are sig
    NFs (each counts what it sees) with the instances given."""
    cfg = mgr.config(
        ports=[
            {"name": "g", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {
                "name": name,
                "exec": "squall-nf-sig",
                "instances": n,
                "max_instances": MAX_INSTANCES,
                "pool_idle": min(pool_idle, n),
                "ring_slots": 1024,
            }
            for name, n in services.items()
        ],
        chains=[{"name": chain[0], "services": chain[1]}],
        rules=[{"in_port": "g", "chain": chain[0], "out_port": "out", "assign": "per-flow"}],
        flow_linger_ms=0,
        flow_idle_timeout_ms=120000,
        flow_half_open_timeout_ms=120000,
        mbufs=8191,
    )
    cfg["generator"] = {"port": "g", "rate_pps": 0, "flows": flows, "tcp_flow_pkts": conn_pkts}
    return cfg


def start(mgr: Manager, cfg: dict[str, Any]) -> None:
    # a pool starts its idle target, not every instance
    mgr.start(cfg, want_nfs=sum(min(s["pool_idle"], s["instances"]) for s in cfg["services"]))


def apply(mgr: Manager, tmp_path: Path, name: str, cfg: dict[str, Any], **kw: bool) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(to_yaml(cfg))
    assert mgr._tm is not None
    res = control.apply_file(mgr._tm, path, **kw)
    assert res.applied, (name, res)


def rx_of(mgr: Manager, service: str) -> dict[str, int]:
    """rx_pkts of each running NF of a service, by name."""
    return {
        k: int(v["rx_pkts"])
        for k, v in mgr.nfs().items()
        if v["service"] == service and int(v["pid"]) > 0
    }


def drops(mgr: Manager) -> dict[str, int]:
    return {k: v for k, v in mgr.stats()["drops"].items() if v}


def settle(mgr: Manager) -> tuple[int, dict[str, int]]:
    """Pause the generator; once every packet is out or counted, what was
    sent and the drops."""
    assert mgr.query("/squall/gen_rate,0")["rate_pps"] == 0
    sent = int(mgr.query("/squall/gen")["sent_pkts"])
    mgr.wait_accounted(sent)
    return sent, drops(mgr)


def test_a_per_flow_pool_grows_and_shrinks_under_its_flows(mgr: Manager, tmp_path: Path) -> None:
    # 4 connections of 10,000 packets at 2,000 pps: each lasts 20 s, longer
    # than the test, so every flow stays on its NF throughout.
    base = {"flows": 4, "conn_pkts": 10000, "pool_idle": 4}
    start(mgr, pf_config(mgr, {"pf": 4}, ("c", ["pf"]), **base))
    mgr.query("/squall/gen_rate,2000")
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_active"] == 4, 20, "4 flows")
    mgr.wait_for(lambda: mgr.query("/squall/pools")["pf"]["idle"] == 0, 10, "every NF busy")
    busy = sorted(rx_of(mgr, "pf"))
    assert busy == ["pf#0", "pf#1", "pf#2", "pf#3"], busy

    # Grow to 8: the pool refills to its idle target with new instances; the
    # four flows stay where they are and lose nothing.
    apply(mgr, tmp_path, "grow", pf_config(mgr, {"pf": 8}, ("c", ["pf"]), **base))
    mgr.wait_for(lambda: mgr.query("/squall/pools")["pf"]["idle"] == 4, 20, "4 new idle NFs")
    assert mgr.query("/squall/pools")["pf"]["size"] == 8
    before = rx_of(mgr, "pf")
    mgr.wait_for(lambda: all(rx_of(mgr, "pf")[k] > before[k] for k in busy), 10, "the flows go on")
    assert all(rx_of(mgr, "pf")[f"pf#{i}"] == 0 for i in range(4, 8)), "no new flow came"
    assert drops(mgr) == {}, "growing the pool lost packets"

    # Shrink to 3: the idle instances stop; pf#3 holds a flow, so it stays
    # until that flow ends (it does not, here), and its flow loses nothing.
    apply(mgr, tmp_path, "shrink", pf_config(mgr, {"pf": 3}, ("c", ["pf"]), **base))
    mgr.wait_for(lambda: sorted(rx_of(mgr, "pf")) == busy, 20, "the 4 idle NFs stopped")
    pools = mgr.query("/squall/pools")["pf"]
    assert pools["retired"] == 4 and pools["size"] == 3 and pools["idle"] == 0, pools
    before = rx_of(mgr, "pf")
    mgr.wait_for(lambda: all(rx_of(mgr, "pf")[k] > before[k] for k in busy), 10, "the flows go on")
    assert drops(mgr) == {}, "shrinking under live flows lost packets"
    assert mgr.query("/squall/flows")["flows_config_ended"] == 0

    # Shrink to 1 with end_flows: the flows of pf#1..3 end now, those NFs
    # stop, and the rest of their connections are strays; pf#0's goes on.
    apply(mgr, tmp_path, "end", pf_config(mgr, {"pf": 1}, ("c", ["pf"]), **base), end_flows=True)
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_config_ended"] == 3, 20, "3 flows ended")
    mgr.wait_for(lambda: sorted(rx_of(mgr, "pf")) == ["pf#0"], 20, "pf#1..3 stopped")
    assert mgr.query("/squall/pools")["pf"]["retired"] == 7
    before = rx_of(mgr, "pf")
    mgr.wait_for(lambda: rx_of(mgr, "pf")["pf#0"] > before["pf#0"], 10, "pf#0's flow goes on")

    sent, dropped = settle(mgr)
    assert set(dropped) <= {"stray", "config_changed"}, dropped
    assert dropped.get("stray", 0) > 0, "the ended flows' packets came on as strays"
    assert mgr.ports()["out"]["tx_pkts"] + sum(dropped.values()) == sent
    assert yaml.safe_load(get_config(mgr))["services"][0]["instances"] == 1
    mgr.finish()


def test_a_removed_chain_drains_its_flows_then_goes(mgr: Manager, tmp_path: Path) -> None:
    # 2 connections at a time of 3,000 packets at 2,000 pps: 3 s each. The
    # apply swaps chain c1 [pf] for a new service and chain, c2 [pf2], while
    # the first two connections are under way: they finish on pf, the next
    # ones go to pf2, and nothing is lost.
    base = {"flows": 2, "conn_pkts": 3000}
    start(mgr, pf_config(mgr, {"pf": 2}, ("c1", ["pf"]), **base))
    mgr.query("/squall/gen_rate,2000")
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_active"] == 2, 20, "2 flows")
    first = sorted(rx_of(mgr, "pf"))
    assert first == ["pf#0", "pf#1"], first

    apply(mgr, tmp_path, "swap", pf_config(mgr, {"pf2": 2}, ("c2", ["pf2"]), **base))
    draining = mgr.query("/squall/control")["draining"]
    assert draining == {"c1": 2}, draining
    text = get_config(mgr)
    # (by name: the manager's own name, hex of the test's, may hold "c1")
    running = yaml.safe_load(text)
    assert [c["name"] for c in running["chains"]] == ["c2"], text
    assert [s["name"] for s in running["services"]] == ["pf2"], text
    before = rx_of(mgr, "pf")
    mgr.wait_for(
        lambda: all(rx_of(mgr, "pf").get(k, 0) > before[k] for k in first) or not rx_of(mgr, "pf"),
        10,
        "the draining flows go on",
    )
    mgr.wait_for(lambda: mgr.query("/squall/control")["drained_chains"] == 1, 30, "c1 drained")
    assert mgr.query("/squall/control")["draining"] == {}
    mgr.wait_for(lambda: rx_of(mgr, "pf") == {}, 20, "pf's NFs stopped")
    mgr.wait_for(lambda: sum(rx_of(mgr, "pf2").values()) > 0, 20, "new flows on pf2")

    sent, dropped = settle(mgr)
    assert dropped == {}, "a flow lost packets across the change"
    assert mgr.ports()["out"]["tx_pkts"] == sent
    flows = mgr.query("/squall/flows")
    assert flows["flows_config_ended"] == 0 and flows["flows_closed"] >= 2, flows
    assert "name: pf\n" not in get_config(mgr)
    mgr.finish()


def test_end_flows_ends_a_removed_chains_flows_at_once(mgr: Manager, tmp_path: Path) -> None:
    base = {"flows": 2, "conn_pkts": 10000}
    start(mgr, pf_config(mgr, {"pf": 2}, ("c1", ["pf"]), **base))
    mgr.query("/squall/gen_rate,2000")
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_active"] == 2, 20, "2 flows")

    apply(
        mgr,
        tmp_path,
        "swap",
        pf_config(mgr, {"pf2": 2}, ("c2", ["pf2"]), **base),
        end_flows=True,
    )
    assert mgr.query("/squall/control")["draining"] == {}
    mgr.wait_for(lambda: mgr.query("/squall/flows")["flows_config_ended"] == 2, 20, "2 flows ended")
    mgr.wait_for(lambda: rx_of(mgr, "pf") == {}, 20, "pf's NFs stopped")
    sent, dropped = settle(mgr)
    assert set(dropped) <= {"stray", "config_changed"}, dropped
    assert dropped.get("stray", 0) > 0, "the ended flows' packets came on as strays"
    assert mgr.ports()["out"]["tx_pkts"] + sum(dropped.values()) == sent
    mgr.finish()
