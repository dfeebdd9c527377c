"""Direct chains (mgr/lane.h, issue 17): each NF hands its NEXT packets
straight to the next hop's NF of its lane. The manager still counts every
packet into and out of the chain, the packets are the same bytes, every
mbuf comes home, a lane fails and comes back as one, and no untrusted
(isolated) NF is ever part of one."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pcaps
import pytest
import yaml
from conftest import Manager, pid_is_alive
from squall.bench.config import to_yaml

N_PKTS = 1000
HOPS = ("s1", "s2", "s3")


def pcap_config(mgr: Manager, in_pcap: Path, out_pcap: Path, direct: bool) -> dict[str, Any]:
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[{"name": s, "exec": "squall-nf-sig", "ring_slots": 1024} for s in HOPS],
        chains=[{"name": "c", "services": list(HOPS), "direct": direct}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )


@pytest.mark.parametrize("direct", [True, False])
def test_a_direct_chain_carries_every_packet_unchanged(
    mgr: Manager, tmp_path: Path, direct: bool
) -> None:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(pcap_config(mgr, in_pcap, out_pcap, direct))
    mgr.wait_port_tx("out", N_PKTS, timeout_s=30)
    ex = mgr.finish()

    assert pcaps.read_pcap(out_pcap) == frames, "out.pcap differs from in.pcap"
    st = ex["stats"]
    assert st["rx_pkts"] == st["tx_pkts"] == N_PKTS and st["drop_pkts"] == 0, st
    nfs = ex["nfs"]
    want_sum = pcaps.sig_sum(frames)
    for s in HOPS:
        nf = nfs[f"{s}#0"]
        assert nf["rx_pkts"] == N_PKTS, nf
        assert nf["counters"]["sig_pkts"] == N_PKTS and nf["counters"]["sig_sum"] == want_sum, nf
        assert nf["counters"]["sig_revisit"] == 0 and nf["counters"]["sig_mismatch"] == 0, nf
        assert nf["direct"] == int(direct), nf
    chain = ex["chains"]["c"]
    assert chain["rx_pkts"] == chain["tx_pkts"] == N_PKTS, chain
    assert chain["visits_mismatch"] == 0 and chain["lat_count"] == N_PKTS, chain
    s1, s2, s3 = (nfs[f"{s}#0"] for s in HOPS)
    if not direct:
        assert all(nf["given_pkts"] == N_PKTS for nf in (s1, s2, s3)), nfs
        assert all(nf["direct_tx_pkts"] == nf["direct_rx_pkts"] == 0 for nf in (s1, s2, s3))
        return
    # The manager gave the first hop everything; each hop handed the next
    # what its ring took, and the manager the rest (counted as full).
    assert s1["given_pkts"] == N_PKTS, s1
    assert s1["direct_tx_pkts"] + s1["direct_full_pkts"] == N_PKTS, s1
    assert s2["direct_rx_pkts"] == s1["direct_tx_pkts"] > 0, (s1, s2)
    assert s2["given_pkts"] == s1["direct_full_pkts"], (s1, s2)
    assert s2["direct_tx_pkts"] + s2["direct_full_pkts"] == N_PKTS, s2
    assert s3["direct_rx_pkts"] == s2["direct_tx_pkts"] > 0, (s2, s3)
    assert s3["given_pkts"] == s2["direct_full_pkts"], (s2, s3)
    # Only the last hop hands packets back to the manager, but for those
    # its ring turned away.
    assert s3["tx_pkts"] + s1["direct_full_pkts"] + s2["direct_full_pkts"] == N_PKTS


def gen_config(mgr: Manager, instances: int, **extra: Any) -> dict[str, Any]:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {"name": s, "exec": "squall-nf-sig", "instances": instances, **extra} for s in HOPS
        ],
        chains=[{"name": "c", "services": list(HOPS), "direct": True}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 50000, "flows": 256}
    return cfg


def test_each_lane_keeps_its_flows(mgr: Manager) -> None:
    """Lane i is instance i of every hop: rss picks the first, the lane the
    rest, so every hop of a lane sees the same packets and no flow mixes."""
    # 4,096 slots: 9 NFs share a core, and a 1,024-slot ring covers only
    # ~40 ms of a lane's packets when that core stalls
    mgr.start(gen_config(mgr, instances=3, ring_slots=4096))
    sent = mgr.gen_send(20000)
    mgr.wait_accounted(sent)
    ex = mgr.finish()
    st = ex["stats"]
    assert st["tx_pkts"] == sent and st["drop_pkts"] == 0, st
    nfs = ex["nfs"]
    for i in range(3):
        lane = [nfs[f"{s}#{i}"] for s in HOPS]
        assert lane[0]["rx_pkts"] > 0, lane
        assert all(nf["rx_pkts"] == lane[0]["rx_pkts"] for nf in lane), lane
        assert all(nf["counters"]["sig_sum"] == lane[0]["counters"]["sig_sum"] for nf in lane), lane
        assert all(nf["given_pkts"] == 0 for nf in lane[1:]), lane
        assert lane[1]["direct_rx_pkts"] == lane[0]["direct_tx_pkts"], lane
    assert sum(nfs[f"s1#{i}"]["rx_pkts"] for i in range(3)) == sent


def test_a_lane_fails_and_comes_back_as_one(mgr: Manager) -> None:
    """Killing the middle NF of a lane under traffic takes its whole lane
    down (its NFs hold each other's packets) and brings it back; the other
    lane runs on; every packet is out or counted under nf_died/no_nf."""
    mgr.start(gen_config(mgr, instances=2))
    mgr.wait_for(lambda: mgr.chains()["c"]["tx_pkts"] > 5000, 30, "traffic through the chain")
    before = mgr.nfs()
    victim = before["s2#0"]["pid"]
    assert pid_is_alive(victim)
    os.kill(victim, signal.SIGKILL)

    def lane_back() -> bool:
        nfs = mgr.nfs()
        return all(
            nfs[f"{s}#0"]["restarts"] == 1
            and nfs[f"{s}#0"]["pid"] not in (0, before[f"{s}#0"]["pid"])
            and nfs[f"{s}#0"]["rx_pkts"] > before[f"{s}#0"]["rx_pkts"]
            for s in HOPS
        )

    mgr.wait_for(lane_back, 20, "every NF of lane 0 restarted and taking packets again")
    nfs = mgr.nfs()
    assert nfs["s2#0"]["exit_reason"] == "signal 9 (KILL)", nfs["s2#0"]
    assert all(nfs[f"{s}#1"]["restarts"] == 0 for s in HOPS), nfs
    mgr.query("/squall/gen_rate,0")
    ex = mgr.finish()
    drops = {k: v for k, v in ex["stats"]["drops"].items() if v}
    assert set(drops) <= {"nf_died", "no_nf"}, drops


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sandbox": "isolated"}, "is isolated: an untrusted NF never hands packets to another"),
        ({"instances": 2}, "every hop of a direct chain has the same count"),
        ({"scale": {}}, "scales: a direct chain's lanes are fixed"),
    ],
)
def test_direct_chain_config_errors(mgr: Manager, change: dict[str, Any], message: str) -> None:
    cfg = gen_config(mgr, instances=1)
    cfg["services"][1].update(change)
    r = mgr.run_to_exit(cfg, "--check")
    assert r.returncode == 2, r.stderr
    assert "chains[0].direct: " in r.stderr and message in r.stderr, r.stderr


def test_a_direct_chain_is_refused_a_per_flow_rule_and_a_second_chain(mgr: Manager) -> None:
    cfg = gen_config(mgr, instances=1)
    cfg["rules"][0]["assign"] = "per-flow"
    r = mgr.run_to_exit(cfg, "--check")
    assert r.returncode == 2 and 'rules[0].assign: chain "c" is direct' in r.stderr, r.stderr
    cfg = gen_config(mgr, instances=1)
    cfg["chains"].append({"name": "d", "services": ["s3"]})
    r = mgr.run_to_exit(cfg, "--check")
    assert (
        r.returncode == 2 and 'chains[0].direct: service "s3" is also in chain "d"' in r.stderr
    ), r.stderr


def test_a_direct_chain_round_trips_and_is_refused_changes_while_running(
    mgr: Manager, tmp_path: Path
) -> None:
    """get config writes `direct: true` back, apply of it changes nothing;
    a change to a direct chain or its services' instances is refused whole
    (exit 2) and the lanes go on carrying."""
    from test_apply import get_config, squallctl

    mgr.start(gen_config(mgr, instances=2))
    text = get_config(mgr)
    assert "direct: true" in text, text
    same = tmp_path / "same.yaml"
    same.write_text(text)
    r = squallctl(mgr, "apply", str(same))
    assert r.returncode == 0 and r.stdout.strip() == "no change", (r.stdout, r.stderr)
    undirected = yaml.safe_load(text)
    undirected["chains"][0]["direct"] = False
    # Every hop shrunk alike, so the file is valid on its own and only the
    # running lanes refuse it.
    shrunk = yaml.safe_load(text)
    for svc in shrunk["services"]:
        svc.update(instances=1, max_instances=1, pool_idle=1)
    for i, cfg in enumerate((undirected, shrunk)):
        changed = tmp_path / f"changed{i}.yaml"
        changed.write_text(to_yaml(cfg))
        r = squallctl(mgr, "apply", str(changed))
        assert r.returncode == 2, (i, r.stdout, r.stderr)
        assert 'chain "c" is direct' in r.stderr, r.stderr
    assert get_config(mgr) == text
    tx = mgr.chains()["c"]["tx_pkts"]
    mgr.wait_for(lambda: mgr.chains()["c"]["tx_pkts"] > tx + 1000, 15, "the lanes still carry")
    mgr.query("/squall/gen_rate,0")
    mgr.finish()


def test_a_capture_at_a_direct_hop_sees_every_packet(mgr: Manager, tmp_path: Path) -> None:
    """A capture of what hop 1 receives turns hop 0's hand-over off while it
    runs: the manager carries those packets and copies each one (tshark reads
    them, byte for byte); hop 1 still hands its own to hop 2 directly."""
    from test_capture import Feed, end_clean, squallctl, tshark_frames, wait_running

    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    feed = Feed(tmp_path)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(pcap_config(mgr, feed.fifo, out_pcap, direct=True))
    path = tmp_path / "hop1.pcapng"
    cap = squallctl(
        mgr.name,
        "capture",
        *("--chain", "c", "--hop", "1", "--dir", "in", "-c", str(N_PKTS), "-w", str(path)),
        stderr=subprocess.PIPE,
    )
    wait_running(mgr, 1)
    assert mgr.nfs()["s1#0"]["direct"] == 1
    assert feed.send(frames) == frames
    mgr.wait_port_tx("out", N_PKTS)
    _, err = cap.communicate(timeout=30)
    assert cap.returncode == 0, err.decode()
    assert tshark_frames(path, tmp_path) == frames
    nfs = mgr.nfs()
    s1, s2, s3 = (nfs[f"{s}#0"] for s in HOPS)
    assert s1["direct_tx_pkts"] == 0 and s2["given_pkts"] == N_PKTS, (s1, s2)
    assert s2["direct_tx_pkts"] + s2["direct_full_pkts"] == N_PKTS, s2
    assert s3["direct_rx_pkts"] == s2["direct_tx_pkts"] > 0, s3
    ex = end_clean(mgr)
    assert pcaps.read_pcap(out_pcap) == frames
    assert ex["chains"]["c"]["tx_pkts"] == N_PKTS


def nf_metric(text: str, name: str, service: str) -> float | None:
    """NF instance 0 of service's sample of name, whatever the label order."""
    for line in text.splitlines():
        if line.startswith(name + "{") and f'service="{service}"' in line:
            if 'nf_instance="0"' in line:
                return float(line.rsplit(" ", 1)[1])
    return None


def test_direct_counters_and_the_idle_manager_are_exported(mgr: Manager) -> None:
    """squallctl serve's /metrics (promtool-clean) carries each NF's direct
    counts and the manager's sleeps, equal to telemetry's."""
    from test_exporter import Exporter, metric_value, promtool_accepts

    mgr.start(gen_config(mgr, instances=1))
    mgr.gen_send(5000)
    mgr.wait_accounted(int(mgr.query("/squall/gen")["sent_pkts"]))
    ex = Exporter(mgr.name, mgr.workdir)
    try:
        nfs = mgr.nfs()

        def exported() -> bool:
            text = ex.metrics()
            got = nf_metric(text, "squall_nf_direct_handed_packets_total", "s1")
            return got == nfs["s1#0"]["direct_tx_pkts"] > 0

        mgr.wait_for(exported, 20, "s1's direct count exported")
        text = ex.up_metrics()
        promtool_accepts(text)
        assert nf_metric(text, "squall_nf_direct_received_packets_total", "s3") == float(
            nfs["s3#0"]["direct_rx_pkts"]
        )
        idle = mgr.stats()["idle"]
        sleeps = metric_value(text, "squall_manager_sleeps_total")
        assert sleeps is not None and 0 < sleeps <= idle["sleeps"], (sleeps, idle)
        assert metric_value(text, "squall_manager_idle_sleep_max_seconds") == 0.001
    finally:
        ex.stop()
    mgr.finish()
