"""manager.rx_backpressure (issue 17; NFVnice's backpressure to the port): rx
takes from a port no more than the first NF its rules feed has room for, so
what arrives waits in the port, not dropped at a full NF ring.

A slow NF (squall-nf-cost) behind a 64-slot ring: a pcap port, read as fast
as rx polls, overflows the ring without backpressure and loses nothing with
it (a file waits forever); the generator's port holds what is due up to its
rx_desc, as a NIC would, and counts the rest as missed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pcaps
from conftest import Manager
from squall import control
from squall.bench.config import to_yaml

N_PKTS = 3000
# ~20 us a packet at 3 GHz: ~50 kpps, far below what a pcap port delivers
SLOW_NF = {"name": "slow", "exec": "squall-nf-cost", "args": ["--cycles", "60000"]}
SLOTS = 64


def pcap_config(mgr: Manager, tmp_path: Path, frames: list[bytes], on: bool) -> dict[str, Any]:
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={tmp_path / 'out.pcap'}"},
        ],
        services=[{**SLOW_NF, "ring_slots": SLOTS}],
        chains=[{"name": "c", "services": ["slow"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        rx_backpressure=on,
        # a burst larger than the ring: rx takes what fits, not a burst
        rx_burst=128,
    )


def replay(mgr: Manager, tmp_path: Path, on: bool) -> tuple[dict[str, Any], list[bytes]]:
    frames = pcaps.good_frames(N_PKTS, seed=7)
    mgr.start(pcap_config(mgr, tmp_path, frames, on))
    mgr.wait_accounted(N_PKTS, timeout_s=60)
    ports = mgr.ports()
    ex = mgr.finish()
    ex["ports_live"] = ports
    return ex, frames


def test_pcap_replay_through_a_slow_nf_loses_nothing(mgr: Manager, tmp_path: Path) -> None:
    ex, frames = replay(mgr, tmp_path, on=True)
    st = ex["stats"]
    assert st["drop_pkts"] == 0, st["drops"]
    assert st["rx_pkts"] == st["tx_pkts"] == N_PKTS, st
    # every frame out, byte for byte, in order
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames
    held = ex["ports_live"]["in"]["rx_held"]
    assert held > 0, ex["ports_live"]["in"]
    assert ex["ports_live"]["out"]["rx_held"] == 0  # its rules feed nothing


def test_without_it_the_ring_overflows(mgr: Manager, tmp_path: Path) -> None:
    """The same replay, rx_backpressure off (the default): the case above
    is not lossless by luck."""
    ex, _ = replay(mgr, tmp_path, on=False)
    st = ex["stats"]
    assert st["drops"]["nf_ring_full"] > 0, st["drops"]
    assert st["drop_pkts"] == st["drops"]["nf_ring_full"], st["drops"]
    assert st["tx_pkts"] + st["drop_pkts"] == N_PKTS, st
    assert ex["ports_live"]["in"]["rx_held"] == 0


def gen_config(mgr: Manager, on: bool) -> dict[str, Any]:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1", "rx_desc": 512},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{**SLOW_NF, "ring_slots": SLOTS}],
        chains=[{"name": "c", "services": ["slow"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
        rx_backpressure=on,
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 500_000, "sizes": [64], "flows": 16}
    return cfg


def test_generator_port_holds_its_descriptors_and_counts_the_rest_missed(
    mgr: Manager,
) -> None:
    mgr.start(gen_config(mgr, on=True))
    sent = mgr.gen_send(100_000)
    gen = mgr.query("/squall/gen")
    missed = int(gen["missed_pkts"])
    # offered 10x what the NF takes: most of it missed at the port
    assert missed > sent // 2, gen
    mgr.wait_accounted(sent - missed)
    st = mgr.stats()
    assert st["drop_pkts"] == 0, st["drops"]
    port = mgr.ports()["gen"]
    assert port["rx_eth_missed"] == missed, port
    assert port["rx_held"] > 0, port
    # what was not missed was received, and went out
    assert port["rx_pkts"] == st["tx_pkts"] == sent - missed, (port, st)
    mgr.finish()


def test_turned_on_while_running(mgr: Manager, tmp_path: Path) -> None:
    """A manager key read every round: squallctl apply turns it on."""
    mgr.start(gen_config(mgr, on=False))
    sent = mgr.gen_send(20_000)
    mgr.wait_accounted(sent)
    before = mgr.stats()["drops"]["nf_ring_full"]
    assert before > 0
    path = tmp_path / "on.yaml"
    path.write_text(to_yaml(gen_config(mgr, on=True)))
    assert mgr._tm is not None
    res = control.apply_file(mgr._tm, path)
    assert res.applied, res
    mgr.query("/squall/gen_rate,500000")
    sent2 = mgr.gen_send(sent + 50_000)
    missed = int(mgr.query("/squall/gen")["missed_pkts"])
    assert missed > 0
    mgr.wait_accounted(sent2 - missed)
    st = mgr.stats()
    assert st["drops"]["nf_ring_full"] == before, st["drops"]
    assert mgr.ports()["gen"]["rx_held"] > 0
    mgr.finish()
