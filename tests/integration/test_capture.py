"""squallctl capture: pcapng of every point of a chain of three NFs, read back with tshark.

A known pcap goes in through a veth pair of the test's own (net_af_packet on
one end, the frames sent on the other, in batches that wait for the manager,
so no frame is lost in the kernel); the chain is monitor -> fwd (rewrites
both MACs) -> noop, out to a pcap file. Each hop's capture must hold exactly
the frames at that hop, byte for byte: the input frames up to fwd's
receive side, the rewritten ones after it.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pcaps
import pytest
from conftest import REPO, Manager
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

N_PKTS = 1000
DST2 = "02:00:00:00:00:02"
SRC2 = "02:00:00:00:00:03"
HOPS = ("mon", "fwd", "nop")
BATCH = 100
WAIT_S = 60.0


def squallctl(name: str, *args: str, **kw: Any) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.Popen(
        [sys.executable, "-m", "squall.ctl", "--name", name, *args], env=env, **kw
    )


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def veth() -> Iterator[tuple[str, str]]:
    """A veth pair of this test's own in the root namespace, quiet: no IPv6
    (no router solicitations or neighbour discovery), no address, no offloads."""
    tag = secrets.token_hex(3)
    a, b = f"sqc{tag}a", f"sqc{tag}b"
    _ip("link", "add", a, "type", "veth", "peer", "name", b)
    try:
        for dev in (a, b):
            Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1")
            _ip("link", "set", dev, "up")
        yield a, b
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True)


def send_frames(mgr: Manager, dev: str, port: str, frames: Sequence[bytes]) -> None:
    """Send frames into dev's peer, BATCH at a time, each batch once the manager
    has received the last (a bounded wait): the kernel's rx ring never overflows."""
    base = mgr.ports()[port]["rx_pkts"]
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((dev, 0))
        for i in range(0, len(frames), BATCH):
            for f in frames[i : i + BATCH]:
                s.send(f)
            want = base + min(i + BATCH, len(frames))
            mgr.wait_for(
                lambda want=want: mgr.ports()[port]["rx_pkts"] >= want,
                WAIT_S,
                f"port {port} rx_pkts >= {want}",
            )


def chain_config(mgr: Manager, dev: str, out_pcap: Path) -> dict[str, Any]:
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_af_packet0,iface={dev}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[
            {"name": "mon", "exec": "squall-nf-monitor", "ring_slots": 1024},
            {
                "name": "fwd",
                "exec": "squall-nf-fwd",
                "args": ["--dst-mac", DST2, "--src-mac", SRC2],
                "ring_slots": 1024,
            },
            {"name": "nop", "exec": "squall-nf-noop", "ring_slots": 1024},
        ],
        chains=[{"name": "c", "services": list(HOPS)}],
        rules=[{"in_port": "in", "dst_mac": pcaps.mac(1), "chain": "c", "out_port": "out"}],
    )


def rewritten(frame: bytes) -> bytes:
    return bytes.fromhex(DST2.replace(":", "")) + bytes.fromhex(SRC2.replace(":", "")) + frame[12:]


def tshark_frames(path: Path, tmp: Path) -> list[bytes]:
    """The frames of a pcapng as tshark (Debian's) reads them, via a pcap it writes."""
    out = tmp / (path.name + ".pcap")
    r = subprocess.run(
        ["tshark", "-r", str(path), "-F", "pcap", "-w", str(out)], capture_output=True, text=True
    )
    assert r.returncode == 0, f"tshark cannot read {path}: {r.stderr}"
    return pcaps.read_pcap(out)


def tshark_field(path: Path, field: str) -> list[str]:
    r = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", field],
        capture_output=True,
        text=True,
        check=True,
    )
    return r.stdout.split()


def captures(mgr: Manager) -> dict[str, Any]:
    return {k: v for k, v in mgr.query("/squall/captures").items() if isinstance(v, dict)}


def wait_running(mgr: Manager, n: int) -> None:
    mgr.wait_for(
        lambda: sum(c["state"] == "running" for c in captures(mgr).values()) == n,
        WAIT_S,
        f"{n} captures running",
    )


def end_clean(mgr: Manager) -> dict[str, Any]:
    """Every copy back in the capture pool, then every mbuf home (conftest)."""
    mgr.wait_for(
        lambda: mgr.query("/squall/captures")["pool_in_use"] == 0,
        10,
        "capture pool: every copy home",
    )
    ex = mgr.finish()
    st = ex["stats"]
    assert st["rx_pkts"] == st["tx_pkts"], st  # captures never cost traffic
    assert st["drop_pkts"] == 0, st
    return ex


def test_capture_every_hop_byte_identical(
    mgr: Manager, tmp_path: Path, veth: tuple[str, str]
) -> None:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    pcaps.write_pcap(tmp_path / "in.pcap", frames)
    frames = pcaps.read_pcap(tmp_path / "in.pcap")  # the known pcap, as sent
    out_pcap = tmp_path / "out.pcap"
    mgr.start(chain_config(mgr, veth[0], out_pcap))

    # (squallctl options, interface name suffix, the frames that point must hold)
    after = [rewritten(f) for f in frames]
    points: list[tuple[list[str], str, list[bytes]]] = [
        (["--port", "in"], "port:in:rx", frames),
        (["--port", "out", "--dir", "tx"], "port:out:tx", after),
    ]
    for hop in range(3):
        for d in ("in", "out"):
            # fwd (hop 1) receives the input and returns it rewritten.
            want = frames if hop == 0 or (hop == 1 and d == "in") else after
            points.append(
                (["--chain", "c", "--hop", str(hop), "--dir", d], f"chain:c:hop{hop}:{d}", want)
            )
    points.append((["--nf", "1", "--dir", "out"], "nf:1:fwd#0:out", after))
    procs = []
    for i, (opts, _, _) in enumerate(points):
        path = tmp_path / f"cap{i}.pcapng"
        procs.append(
            squallctl(
                mgr.name,
                "capture",
                *opts,
                "-c",
                str(N_PKTS),
                "-w",
                str(path),
                stderr=subprocess.PIPE,
            )
        )
        # One at a time: DPDK telemetry's listen backlog is 1 (a burst of
        # connects gets EAGAIN).
        wait_running(mgr, i + 1)

    send_frames(mgr, veth[1], "in", frames)
    mgr.wait_port_tx("out", N_PKTS)
    for p in procs:
        _, err = p.communicate(timeout=WAIT_S)
        assert p.returncode == 0, err.decode()
        assert b"1,000 packets written" in err, err.decode()

    for i, (_, name, want) in enumerate(points):
        path = tmp_path / f"cap{i}.pcapng"
        got = tshark_frames(path, tmp_path)
        assert len(got) == len(want), (name, len(got))
        assert got == want, f"{name}: the capture differs from the frames at that point"
        # The interface block names the point (tshark shows it per frame).
        assert set(tshark_field(path, "frame.interface_name")) == {f"{mgr.name}:{name}"}
    assert pcaps.read_pcap(out_pcap) == after

    for c in captures(mgr).values():
        assert c["state"] == "done" and c["end_reason"] == "count reached", c
        assert c["seen_pkts"] == c["copied_pkts"] == c["written_pkts"] == N_PKTS, c
        assert c["dropped_pkts"] == 0, c
    end_clean(mgr)


def test_capture_filter_and_live_pipe(mgr: Manager, tmp_path: Path, veth: tuple[str, str]) -> None:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    out_pcap = tmp_path / "out.pcap"
    mgr.start(chain_config(mgr, veth[0], out_pcap))
    flt = "udp port 53"
    want = [
        f for f in frames if UDP in Ether(f) and 53 in (Ether(f)[UDP].sport, Ether(f)[UDP].dport)
    ]
    assert 0 < len(want) < N_PKTS

    # To a file, ended by Ctrl-C once the traffic is over: only matches in it.
    cap = tmp_path / "filtered.pcapng"
    to_file = squallctl(
        mgr.name, "capture", "--chain", "c", "--hop", "2", "-f", flt, "-w", str(cap),
        stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_running(mgr, 1)
    # Live: -w - into tshark, which prints each frame as it comes.
    live = squallctl(
        mgr.name, "capture", "--port", "in", "-f", flt, "-w", "-",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    tshark = subprocess.Popen(
        ["tshark", "-l", "-r", "-", "-T", "fields", "-e", "frame.len"],
        stdin=live.stdout,
        stdout=subprocess.PIPE,
        bufsize=0,  # unbuffered: select() then sees every line
        stderr=subprocess.DEVNULL,
    )
    assert live.stdout is not None and tshark.stdout is not None
    live.stdout.close()
    wait_running(mgr, 2)
    send_frames(mgr, veth[1], "in", frames)
    mgr.wait_port_tx("out", N_PKTS)

    # tshark has every match while the capture still runs: the stream is live.
    lens: list[int] = []
    deadline = time.monotonic() + WAIT_S
    while len(lens) < len(want) and time.monotonic() < deadline:
        if select.select([tshark.stdout], [], [], 1.0)[0]:
            line = tshark.stdout.readline()
            if not line:
                break
            lens.append(int(line))
    assert lens == [len(f) for f in want]
    assert live.poll() is None and to_file.poll() is None

    for p in (to_file, live):
        p.send_signal(signal.SIGINT)
    for p in (to_file, live):
        _, err = p.communicate(timeout=WAIT_S)
        assert p.returncode == 130, err.decode()  # Ctrl-C, and a complete file
    assert tshark.wait(timeout=WAIT_S) == 0
    assert tshark_frames(cap, tmp_path) == [rewritten(f) for f in want]  # after fwd
    for c in captures(mgr).values():
        assert c["filter"] == flt and c["end_reason"] == "stopped", c
        assert c["seen_pkts"] == N_PKTS and c["matched_pkts"] == len(want), c
        assert c["written_pkts"] == len(want) and c["dropped_pkts"] == 0, c
    end_clean(mgr)


def test_capture_overrun_drops_copies_not_traffic(
    mgr: Manager, tmp_path: Path, veth: tuple[str, str]
) -> None:
    """A reader that does not read: the pipe, the FIFO and the writer's buffer
    fill (well under 1.5 MB), then the 64-slot ring: copies are dropped and
    counted, and every packet still goes through."""
    n = 3000
    frames = pcaps.good_frames(n, [pcaps.mac(1)], seed=3, min_bytes=1000)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(chain_config(mgr, veth[0], out_pcap))
    stuck = squallctl(
        mgr.name, "--json", "capture", "--chain", "c", "--hop", "1", "--ring", "64", "-w", "-",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_running(mgr, 1)
    send_frames(mgr, veth[1], "in", frames)
    mgr.wait_port_tx("out", n)
    (cap_id,) = captures(mgr)
    mgr.query(f"/squall/capture_stop,{cap_id}")
    data, err = stuck.communicate(timeout=WAIT_S)  # now read it all
    assert stuck.returncode == 0, err.decode()
    path = tmp_path / "overrun.pcapng"
    path.write_bytes(data)
    got = tshark_frames(path, tmp_path)

    c = captures(mgr)[cap_id]
    summary = json.loads(err.decode().splitlines()[-1])
    assert summary["dropped_pkts"] == c["dropped_pkts"], (summary, c)
    assert c["seen_pkts"] == n, c
    assert c["drop_ring_full_pkts"] > 0, c  # the case under test happened
    assert c["written_pkts"] + c["dropped_pkts"] == n, c
    assert len(got) == c["written_pkts"], c
    # What was written is what the hop saw, in order, minus the lost copies.
    it = iter(frames)
    assert all(any(f == g for g in it) for f in got)
    st = mgr.stats()
    assert st["rx_pkts"] == st["tx_pkts"] == n and st["drop_pkts"] == 0, st
    assert pcaps.read_pcap(out_pcap) == [rewritten(f) for f in frames]
    end_clean(mgr)
