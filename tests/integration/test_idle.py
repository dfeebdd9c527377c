"""The manager sleeps when it has nothing to do (mgr/idle.h, issue 17): idle,
it takes little of its core, and the first packet after an idle period
still arrives, woken by the port's rx interrupt where the PMD has one
(net_tap) or by its timed sleep where it has none (net_af_packet on veth).
Counts only: the packets sent one by one after idle gaps all come out."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pcaps
import pytest
from conftest import Manager

ETH_P_ALL = 0x0003
N_PKTS = 40
GAP_S = 0.02  # more than the longest sleep (1 ms): each packet finds the manager asleep
IDLE_S = 2.0


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def quiet(dev: str) -> None:
    """No IPv6 on a test device: no router solicitations in the counts."""
    Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1\n")


@pytest.fixture
def veths(mgr: Manager) -> Iterator[tuple[str, str, str, str]]:
    """Two veth pairs in the root namespace: (a0, a1, b0, b1). The manager
    takes a1 and b1; the test sends on a0 and listens on b0."""
    tag = mgr.name[1:7]  # the random hex, not the test name's slug
    a0, a1, b0, b1 = (f"sqi{tag}{x}" for x in ("a0", "a1", "b0", "b1"))
    names = [a0, b0]
    try:
        for x0, x1 in ((a0, a1), (b0, b1)):
            ip("link", "add", x0, "type", "veth", "peer", "name", x1)
            for dev in (x0, x1):
                quiet(dev)
                ip("link", "set", dev, "up")
        yield a0, a1, b0, b1
    finally:
        for dev in names:
            subprocess.run(["ip", "link", "del", dev], capture_output=True, timeout=10)


def manager_cpu_s(pid: int) -> float:
    """CPU time of every thread of pid so far (schedstat: nanoseconds)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def idle_cpu_share(mgr: Manager) -> float:
    assert mgr.proc is not None
    pid = mgr.proc.pid
    t0, c0 = time.monotonic(), manager_cpu_s(pid)
    time.sleep(IDLE_S)
    return (manager_cpu_s(pid) - c0) / (time.monotonic() - t0)


def send_after_gaps(send_dev: str, recv_dev: str, frames: list[bytes]) -> int:
    """Each frame sent alone, after a gap; @return how many of them came out
    on recv_dev (matched byte for byte)."""
    want = set(frames)
    got = 0
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    try:
        rx.bind((recv_dev, 0))
        tx.bind((send_dev, 0))
        for f in frames:
            time.sleep(GAP_S)
            tx.send(f)
        deadline = time.monotonic() + 5
        while got < len(frames) and time.monotonic() < deadline:
            if not select.select([rx], [], [], 0.2)[0]:
                continue
            if rx.recv(65535) in want:
                got += 1
    finally:
        rx.close()
        tx.close()
    return got


def bump_config(mgr: Manager, ports: list[dict[str, Any]], **manager: Any) -> dict[str, Any]:
    return mgr.config(
        ports=ports,
        services=[{"name": "f", "exec": "squall-nf-fwd"}],
        chains=[{"name": "c", "services": ["f"]}],
        rules=[{"in_port": ports[0]["name"], "chain": "c", "out_port": ports[1]["name"]}],
        **manager,
    )


def test_an_idle_manager_sleeps_and_wakes_on_the_rx_interrupt(mgr: Manager) -> None:
    """net_tap has rx interrupts: the idle manager waits for one."""
    tag = mgr.name[1:7]  # the random hex, not the test name's slug
    t0, t1 = f"sqt{tag}0", f"sqt{tag}1"
    ports = [
        {"name": "a", "devargs": f"net_tap0,iface={t0}"},
        {"name": "b", "devargs": f"net_tap1,iface={t1}"},
    ]
    mgr.start(bump_config(mgr, ports))
    for dev in (t0, t1):
        quiet(dev)
        ip("link", "set", dev, "up")
    idle = mgr.stats()["idle"]
    assert idle["intr_ports"] == 2, idle
    share = idle_cpu_share(mgr)
    assert share < 0.2, f"idle manager used {share:.0%} of a core"
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(7)], seed=11)
    assert send_after_gaps(t0, t1, frames) == N_PKTS
    idle = mgr.stats()["idle"]
    assert idle["sleeps"] > 0 and idle["wakes_by_intr"] >= N_PKTS // 2, idle
    assert mgr.ports()["a"]["rx_pkts"] >= N_PKTS
    # net_tap keeps mbufs in its rx queues while it runs: the rest are home.
    mgr.wait_for(
        lambda: mgr.stats()["mbufs_in_use"] == mgr.stats()["mbufs_port_reserved"],
        10,
        "every mbuf but the tap queues' home",
    )
    mgr.finish(live_mbufs=False)


@pytest.mark.parametrize("idle_after_load", [False, True])
def test_an_idle_manager_sleeps_and_wakes_on_its_ports_sockets(
    mgr: Manager, veths: tuple[str, str, str, str], idle_after_load: bool
) -> None:
    """net_af_packet (and net_af_xdp, which the idle benchmark runs) has no
    rx interrupt in DPDK 22.11, but reads a socket the kernel marks readable
    when a frame waits: the idle manager waits in epoll on both ports'
    sockets (mgr/ports.c finds them, mgr/idle.c waits), wakes for a frame,
    and loses none; with nothing to read it wakes only for its timers.
    idle_after_load (the wait before a sleep stretched by load) changes
    none of that: a manager with no load waits no longer."""
    a0, a1, b0, b1 = veths
    ports = [
        {"name": "a", "devargs": f"net_af_packet0,iface={a1}"},
        {"name": "b", "devargs": f"net_af_packet1,iface={b1}"},
    ]
    mgr.start(bump_config(mgr, ports, idle_after_load=idle_after_load))
    idle = mgr.stats()["idle"]
    assert idle["intr_ports"] == 0 and idle["sock_ports"] == 2, idle
    share = idle_cpu_share(mgr)
    assert share < 0.2, f"idle manager used {share:.0%} of a core"
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(7)], seed=12)
    assert send_after_gaps(a0, b0, frames) == N_PKTS
    idle = mgr.stats()["idle"]
    assert idle["sleeps"] > 0 and idle["wakes_by_sock"] >= N_PKTS // 2, idle
    assert idle["wakes_by_timer"] > 0, idle  # (the control period's)
    mgr.finish()


def test_with_sleep_off_the_manager_polls(mgr: Manager, veths: tuple[str, str, str, str]) -> None:
    """The control: idle_sleep_max_us 0 keeps the old busy poll (a core)."""
    a0, a1, b0, b1 = veths
    ports = [
        {"name": "a", "devargs": f"net_af_packet0,iface={a1}"},
        {"name": "b", "devargs": f"net_af_packet1,iface={b1}"},
    ]
    mgr.start(bump_config(mgr, ports, idle_sleep_max_us=0))
    share = idle_cpu_share(mgr)
    assert share > 0.5, f"a polling manager used only {share:.0%} of a core"
    assert mgr.stats()["idle"]["sleeps"] == 0
    frames = pcaps.good_frames(N_PKTS // 4, [pcaps.mac(7)], seed=13)
    assert send_after_gaps(a0, b0, frames) == len(frames)
    mgr.finish()


@pytest.mark.parametrize("kind", ["af_packet", "af_packet_rx_desc", "af_xdp"])
def test_kernel_ring_drops_are_counted(
    mgr: Manager, veths: tuple[str, str, str, str], kind: str
) -> None:
    """A frame the kernel drops because a port's ring is full never reaches
    DPDK, whose PMDs (22.11) do not count it (af_packet: none; af_xdp: only a
    fill ring found empty): the manager reads the socket's PACKET_STATISTICS
    or XDP_STATISTICS (rx ring full) into the port's rx_eth_missed. With the
    manager stopped, 2,000 frames meet a ring of 512 (af_packet_rx_desc:
    768, the port's rx_desc, which af_packet gets as its framecnt): the
    port's rx_pkts and rx_eth_missed account for every one, and the ring held
    its size."""
    a0, a1, b0, b1 = veths
    ring = 768 if kind == "af_packet_rx_desc" else 512
    if kind == "af_packet":
        ports = [
            {"name": "a", "devargs": f"net_af_packet0,iface={a1},framecnt=512"},
            {"name": "b", "devargs": f"net_af_packet1,iface={b1}"},
        ]
    elif kind == "af_packet_rx_desc":
        ports = [
            {"name": "a", "devargs": f"net_af_packet0,iface={a1}", "rx_desc": ring},
            {"name": "b", "devargs": f"net_af_packet1,iface={b1}"},
        ]
    else:
        ports = [
            {"name": "a", "devargs": f"net_af_xdp0,iface={a1},busy_budget=0", "rx_desc": 512},
            # (one af_xdp port: each registers the whole mbuf pool as its
            # umem, pinned pages counted against a root shell's 8 MiB memlock
            # when the region is not on hugepages)
            {"name": "b", "devargs": f"net_af_packet1,iface={b1}"},
        ]
    mgr.start(bump_config(mgr, ports))
    assert mgr.stats()["idle"]["sock_ports"] == 2
    assert mgr.proc is not None
    frames = pcaps.good_frames(2000, [pcaps.mac(7)], seed=13)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    os.kill(mgr.proc.pid, signal.SIGSTOP)
    try:
        tx.bind((a0, 0))
        for i, f in enumerate(frames):
            tx.send(f)
            if i % 50 == 49:  # (the kernel's backlog, 1,000, drains meanwhile)
                time.sleep(0.002)
    finally:
        tx.close()
        os.kill(mgr.proc.pid, signal.SIGCONT)

    def accounted() -> bool:
        a = mgr.ports()["a"]
        return a["rx_pkts"] + a["rx_eth_missed"] >= len(frames)

    mgr.wait_for(accounted, 10, "every frame received or counted missed")
    a = mgr.ports()["a"]
    assert a["rx_pkts"] + a["rx_eth_missed"] == len(frames), a
    assert a["rx_eth_missed"] >= len(frames) - ring - 8, a  # the ring held its size
    if kind != "af_xdp":
        # and no less: every af_packet frame holds one (a ring left at
        # af_packet's default 512 would miss 1,488 of 2,000, not 1,232)
        assert a["rx_eth_missed"] <= len(frames) - ring, a
        mgr.finish()
        return
    # af_xdp keeps its fill ring's mbufs while it runs: the rest are home.
    mgr.wait_for(
        lambda: mgr.stats()["mbufs_in_use"] == mgr.stats()["mbufs_port_reserved"],
        10,
        "every mbuf but the fill ring's home",
    )
    mgr.finish(live_mbufs=False, fill_ring_kept=True)
