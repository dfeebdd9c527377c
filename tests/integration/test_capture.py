"""squallctl capture: pcapng of every point of a chain of three NFs, read back with tshark.

A known pcap goes in through net_pcap reading a FIFO: the manager opens it at
start and gets the pcap header, and the frames follow only once the captures
run (until then the manager's rx waits in its read); nothing else can arrive.
The chain is monitor -> fwd (rewrites both MACs) -> noop, out to a pcap
file. Each hop's capture must hold exactly the frames at that hop, byte for
byte: the input frames up to fwd's receive side, the rewritten ones after it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pcaps
from conftest import REPO, Manager
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption
from scapy.layers.l2 import Ether
from scapy.packet import Raw

N_PKTS = 1000
DST2 = "02:00:00:00:00:02"
SRC2 = "02:00:00:00:00:03"
HOPS = ("mon", "fwd", "nop")
# A classic pcap header as scapy writes it: microseconds, snaplen 65535, Ethernet.
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
WAIT_S = 60.0


def squallctl(name: str, *args: str, **kw: Any) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.Popen(
        [sys.executable, "-m", "squall.ctl", "--name", name, *args], env=env, **kw
    )


class Feed:
    """The input port's pcap, written into a FIFO: the header as soon as the
    manager opens it (at start, in a thread: the open blocks until then), the
    frames when the test says."""

    def __init__(self, tmp: Path) -> None:
        self.fifo = tmp / "in.fifo"
        os.mkfifo(self.fifo)
        self.pcap = tmp / "in.pcap"
        self._f: Any = None
        self._opened = threading.Thread(target=self._open, daemon=True)
        self._opened.start()

    def _open(self) -> None:
        self._f = open(self.fifo, "wb", buffering=0)  # noqa: SIM115
        self._f.write(PCAP_HEADER)

    def send(self, frames: Sequence[bytes]) -> list[bytes]:
        """Write frames as a pcap (the known pcap), then close: EOF. @return the
        frames as read back from that pcap."""
        pcaps.write_pcap(self.pcap, frames)
        self._opened.join(WAIT_S)
        assert self._f is not None, "the manager never opened its input FIFO"
        data = self.pcap.read_bytes()
        self._f.write(data[24:])
        self._f.close()
        return pcaps.read_pcap(self.pcap)


def chain_config(mgr: Manager, feed: Feed, out_pcap: Path, slots: int = 1024) -> dict[str, Any]:
    return mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={feed.fifo}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[
            {"name": "mon", "exec": "squall-nf-monitor", "ring_slots": slots},
            {
                "name": "fwd",
                "exec": "squall-nf-fwd",
                "args": ["--dst-mac", DST2, "--src-mac", SRC2],
                "ring_slots": slots,
            },
            {"name": "nop", "exec": "squall-nf-noop", "ring_slots": slots},
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


def test_capture_every_hop_byte_identical(mgr: Manager, tmp_path: Path) -> None:
    # 9 points x 800 copies fit the capture pool (8,191 mbufs) at once: with
    # 1,000 each they fit only if the writers free some during the burst
    n = 800
    frames = pcaps.good_frames(n, [pcaps.mac(1)])
    feed = Feed(tmp_path)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(chain_config(mgr, feed, out_pcap))

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
                str(n),
                "-w",
                str(path),
                stderr=subprocess.PIPE,
            )
        )
        # One at a time: DPDK telemetry's listen backlog is 1 (a burst of
        # connects gets EAGAIN).
        wait_running(mgr, i + 1)

    assert feed.send(frames) == frames  # the known pcap
    mgr.wait_port_tx("out", n)
    for p in procs:
        _, err = p.communicate(timeout=WAIT_S)
        assert p.returncode == 0, err.decode()
        assert f"{n:,} packets written".encode() in err, err.decode()

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
        assert c["seen_pkts"] == c["copied_pkts"] == c["written_pkts"] == n, c
        assert c["dropped_pkts"] == 0, c
    # and so says the exporter (squallctl serve), one series per capture
    written = exposition_values(mgr, "squall_capture_written_packets_total")
    assert len(written) == len(points) and set(written.values()) == {n}, written
    assert set(exposition_values(mgr, "squall_capture_dropped_packets_total").values()) == {0}
    end_clean(mgr)


def exposition_values(mgr: Manager, metric: str) -> dict[str, float]:
    """A metric's samples (labels -> value) in one poll of the exporter."""
    from squall import exporter

    poller = exporter.Poller(name=mgr.name, interval_s=1.0)
    poller.poll_once()
    body, _ = poller.exposition("text/plain")
    return {
        line.split("{", 1)[1].rsplit("}", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in body.decode().splitlines()
        if line.startswith(metric + "{")
    }


def test_capture_filter_and_live_pipe(mgr: Manager, tmp_path: Path) -> None:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    feed = Feed(tmp_path)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(chain_config(mgr, feed, out_pcap))
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
    feed.send(frames)
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


def header_byte_frames(n: int) -> list[bytes]:
    """TCP (SYN, SYN-ACK, ACK, PSH-ACK), ICMP echo and reply and UDP 53, with and
    without DF and IPv4 options (IHL 5 or 6): frames whose match turns on a
    byte past the IPv4 header, found by its length (ldxb, then ldb [x + k])."""
    frames = []
    for i in range(n):
        l4 = [
            TCP(sport=40000 + i, dport=80, flags="S"),
            TCP(sport=80, dport=40000 + i, flags="SA"),
            TCP(sport=40000 + i, dport=80, flags="A"),
            TCP(sport=40000 + i, dport=80, flags="PA"),
            ICMP(type="echo-request", id=i),
            ICMP(type="echo-reply", id=i),
            UDP(sport=40000 + i, dport=53),
        ][i % 7]
        ip = IP(src="10.0.0.1", dst="10.0.0.2", flags="DF" if i % 2 else 0)
        if (i // 7) % 3 == 2:
            ip.options = [IPOption(b"\x01\x01\x01\x01")]  # NOPs: IHL 6
        tag = struct.pack("!4sI", b"SQLL", i)
        frames.append(bytes(Ether(src=pcaps.SRC_MAC, dst=pcaps.mac(1)) / ip / l4 / Raw(tag)))
    return frames


def tcpdump_frames(pcap: Path, flt: str, tmp: Path) -> list[bytes]:
    """The frames of a pcap that tcpdump's (libpcap's) own filter takes."""
    out = tmp / "tcpdump.pcap"
    r = subprocess.run(
        ["tcpdump", "-r", str(pcap), "-w", str(out), flt], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    return pcaps.read_pcap(out)


def test_capture_filter_reads_bytes_past_the_ip_header(mgr: Manager, tmp_path: Path) -> None:
    """docs/capture.md's tcp[13] & 2 != 0 and its kin read a byte at an offset
    that depends on the IPv4 header's length: each capture holds exactly what
    tcpdump's filter takes from the same frames, at a port and at hops. (DPDK
    22.11's cBPF conversion indexed such loads by A, not X, and its JIT
    encoded jset #2 wrong: mgr/capfilter.c.)"""
    n = 700
    frames = header_byte_frames(n)
    feed = Feed(tmp_path)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(chain_config(mgr, feed, out_pcap))
    # (filter, squallctl options, whether the frames there are fwd's rewritten ones)
    caps = [
        ("tcp[tcpflags] & tcp-syn != 0", ["--port", "in"], False),
        ("tcp[13] & 2 != 0", ["--chain", "c", "--hop", "2", "--dir", "out"], True),
        ("icmp[icmptype] == icmp-echo", ["--chain", "c", "--hop", "0"], False),
        ("icmp[0] == 8", ["--port", "out", "--dir", "tx"], True),
    ]
    procs = []
    for i, (flt, opts, _) in enumerate(caps):
        path = tmp_path / f"cap{i}.pcapng"
        procs.append(
            squallctl(
                mgr.name, "capture", *opts, "-f", flt, "-w", str(path), stderr=subprocess.PIPE
            )
        )
        wait_running(mgr, i + 1)
    assert feed.send(frames) == frames
    mgr.wait_port_tx("out", n)
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        _, err = p.communicate(timeout=WAIT_S)
        assert p.returncode == 130, err.decode()

    by_filter = {c["filter"]: c for c in captures(mgr).values()}
    for i, (flt, _, after_fwd) in enumerate(caps):
        want = tcpdump_frames(feed.pcap, flt, tmp_path)
        assert 0 < len(want) < n, (flt, len(want))
        if after_fwd:
            want = [rewritten(f) for f in want]
        got = tshark_frames(tmp_path / f"cap{i}.pcapng", tmp_path)
        assert len(got) == len(want), (flt, len(got), len(want))
        assert got == want, flt
        c = by_filter[flt]
        assert c["seen_pkts"] == n and c["matched_pkts"] == len(want), c
        assert c["written_pkts"] == len(want) and c["dropped_pkts"] == 0, c
    end_clean(mgr)


def test_capture_overrun_drops_copies_not_traffic(mgr: Manager, tmp_path: Path) -> None:
    """A reader that does not read: the pipe, the FIFO and the writer's buffer
    fill (well under 1.5 MB), then the 64-slot ring: copies are dropped and
    counted, and every packet still goes through."""
    n = 3000
    frames = pcaps.good_frames(n, [pcaps.mac(1)], seed=3, min_bytes=1000)
    feed = Feed(tmp_path)
    out_pcap = tmp_path / "out.pcap"
    # Rings larger than the run: the pcap port delivers all n at once, and
    # the hops' core may run late (a CI run lost 217 at a 1,024-slot ring);
    # what is under test is the capture's 64-slot ring, not the hops'.
    mgr.start(chain_config(mgr, feed, out_pcap, slots=4096))
    # (a FIFO stops every port while empty: the manager says so at start)
    assert f"port in: rx_pcap {feed.fifo} is a FIFO" in mgr.stderr_path.read_text()
    stuck = squallctl(
        mgr.name, "--json", "capture", "--chain", "c", "--hop", "1", "--ring", "64", "-w", "-",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_running(mgr, 1)
    feed.send(frames)
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
    assert st["rx_pkts"] == st["tx_pkts"] == n and st["drop_pkts"] == 0, (st, mgr.ports())
    assert pcaps.read_pcap(out_pcap) == [rewritten(f) for f in frames]
    end_clean(mgr)


def test_capture_holds_what_a_full_ring_took(mgr: Manager, tmp_path: Path) -> None:
    """A slow NF behind a 64-slot ring: the manager drops what the ring refuses
    (nf_ring_full), and the capture of what the NF receives holds exactly what
    it got, not what was offered (the copy is made before the enqueue and kept
    only for the packets the ring took)."""
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)], seed=5)
    feed = Feed(tmp_path)
    out_pcap = tmp_path / "out.pcap"
    mgr.start(
        mgr.config(
            ports=[
                {"name": "in", "devargs": f"net_pcap0,rx_pcap={feed.fifo}"},
                {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
            ],
            services=[
                {
                    "name": "slow",
                    "exec": "squall-nf-cost",
                    "args": ["--cycles", "200000"],
                    "ring_slots": 64,
                }
            ],
            chains=[{"name": "c", "services": ["slow"]}],
            rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        )
    )
    paths = {d: tmp_path / f"hop0-{d}.pcapng" for d in ("in", "out")}
    procs = []
    for i, (d, path) in enumerate(paths.items()):
        procs.append(
            squallctl(
                mgr.name,
                "capture",
                "--chain",
                "c",
                "--hop",
                "0",
                "--dir",
                d,
                "-w",
                str(path),
                stderr=subprocess.PIPE,
            )  # fmt: skip
        )
        wait_running(mgr, i + 1)
    feed.send(frames)
    mgr.wait_accounted(N_PKTS)
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        _, err = p.communicate(timeout=WAIT_S)
        assert p.returncode == 130, err.decode()
    st = mgr.stats()
    full = st["drops"]["nf_ring_full"]
    assert 0 < full < N_PKTS, st  # the case under test happened
    out = pcaps.read_pcap(out_pcap)
    assert len(out) == N_PKTS - full
    assert tshark_frames(paths["in"], tmp_path) == out  # what the NF got, exactly
    assert tshark_frames(paths["out"], tmp_path) == out
    caps = captures(mgr)
    c_in = next(c for c in caps.values() if c["point"] == "nf_in")
    assert c_in["seen_pkts"] == N_PKTS and c_in["refused_pkts"] == full, c_in
    assert c_in["written_pkts"] == N_PKTS - full and c_in["dropped_pkts"] == 0, c_in
    mgr.wait_for(lambda: mgr.query("/squall/captures")["pool_in_use"] == 0, 10, "every copy home")
    ex = mgr.finish()
    assert ex["stats"]["drop_pkts"] == full


def test_capture_arguments() -> None:
    """squallctl capture's selection maps to the manager's keys; bad ones are refused."""
    sys.path.insert(0, str(REPO / "python"))
    from squall.capture import start_params
    from squall.ctl import build_parser

    def params(*argv: str) -> str:
        return start_params(build_parser().parse_args(["capture", *argv, "-w", "x"]))

    assert params("--port", "in") == "point=port_rx,port=in"
    assert params("--port", "out", "--dir", "tx", "-c", "5") == "point=port_tx,port=out,count=5"
    assert params("--chain", "c", "--hop", "2", "--dir", "out", "-d", "1.5") == (
        "point=nf_out,chain=c,hop=2,duration_ms=1500"
    )
    assert params("--service", "fw") == "point=nf_in,service=fw"
    assert params("--nf", "7", "--ring", "64", "-s", "96") == "point=nf_in,nf=7,snaplen=96,ring=64"
    for bad in (
        ["--chain", "c"],  # no hop
        ["--port", "in", "--dir", "in"],
        ["--nf", "1", "--dir", "rx"],
        ["--service", "s", "--hop", "1"],
        ["--port", "a,b"],
        ["--port", "in", "-c", "0"],
    ):
        try:
            params(*bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted: {bad}")
