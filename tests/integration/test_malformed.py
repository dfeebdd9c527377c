"""Malformed frames mixed with good ones: the manager survives, good frames go
out unchanged and in order, and each malformed one is either forwarded or
counted under a drop cause."""

from __future__ import annotations

from pathlib import Path

import pcaps
import pytest
from conftest import Manager

N_GOOD = 300
EVERY = 10  # a malformed frame after every EVERY good ones
ALLOWED_CAUSES = {"parse", "oversize"}


def _is_subsequence(sub: list[bytes], seq: list[bytes]) -> bool:
    it = iter(seq)
    return all(any(x == y for y in it) for x in sub)


def test_malformed_frames_are_forwarded_or_counted(mgr: Manager, tmp_path: Path) -> None:
    good = pcaps.good_frames(N_GOOD, [pcaps.mac(1)], seed=4)
    bad_kinds = pcaps.malformed_frames(pcaps.mac(1)) + [pcaps.jumbo(pcaps.mac(1), size=9600)]
    frames: list[bytes] = []
    bad: list[bytes] = []
    for i, f in enumerate(good):
        frames.append(f)
        if i % EVERY == EVERY - 1:
            b = bad_kinds[(i // EVERY) % len(bad_kinds)]
            frames.append(b)
            bad.append(b)
    assert {len(b) for b in bad} == {len(b) for b in bad_kinds}  # every kind occurs

    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[
            {"name": "n", "exec": "squall-nf-noop", "mode": "sleep"},
            {"name": "f", "exec": "squall-nf-fwd", "mode": "sleep"},
        ],
        chains=[{"name": "c", "services": ["n", "f"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)

    def all_accounted() -> bool:
        st = mgr.stats()
        return bool(st["rx_pkts"] == len(frames) and st["tx_pkts"] + st["drop_pkts"] == len(frames))

    mgr.wait_for(all_accounted, 30, f"rx_pkts == {len(frames)} == tx_pkts + drop_pkts")
    assert mgr.is_running(), "the manager died on malformed input"
    ex = mgr.finish()

    out = pcaps.read_pcap(out_pcap)
    good_set = set(good)
    assert [f for f in out if f in good_set] == good, "good frames lost, changed or reordered"
    assert _is_subsequence(out, frames), "out has frames that were not sent, or reordered"
    forwarded_bad = len(out) - N_GOOD

    st = ex["stats"]
    assert st["rx_pkts"] == len(frames), st
    assert st["tx_pkts"] == len(out), st
    assert st["rx_pkts"] == st["tx_pkts"] + st["drop_pkts"], st
    counted = {cause: n for cause, n in st["drops"].items() if n}
    assert set(counted) <= ALLOWED_CAUSES, counted
    assert forwarded_bad + sum(counted.values()) == len(bad), (forwarded_bad, counted)
    # The cases under test happened: bad IPv4 headers and the 9600 B frame.
    assert counted.get("parse", 0) > 0 and counted.get("oversize", 0) > 0, counted


BAD_IPV4 = {
    "truncated_ipv4": pcaps.truncated_ipv4,
    "eth_only_ipv4_type": pcaps.eth_only,
    "ihl_below_5": pcaps.bad_ihl,
    "ihl_past_end": pcaps.ihl_past_end,
}


@pytest.mark.parametrize("kind", sorted(BAD_IPV4))
def test_each_bad_ipv4_header_is_a_parse_drop(mgr: Manager, tmp_path: Path, kind: str) -> None:
    good = pcaps.good_frames(3, [pcaps.mac(1)], seed=5)
    frames = [good[0], BAD_IPV4[kind](pcaps.mac(1)), good[1], good[2]]
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[{"name": "f", "exec": "squall-nf-fwd"}],
        chains=[{"name": "c", "services": ["f"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
    )
    mgr.start(cfg)
    mgr.wait_for(lambda: mgr.stats()["rx_pkts"] == 4, 30, "all 4 frames received")
    mgr.wait_port_tx("out", 3)
    ex = mgr.finish()
    assert ex["stats"]["drops"]["parse"] == 1, ex["stats"]
    assert pcaps.read_pcap(out_pcap) == list(good)
