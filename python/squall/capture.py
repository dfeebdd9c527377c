"""squallctl capture: pcapng of the packets at a port or an NF hop of a running squall-mgr.

How the bytes travel: squallctl makes a FIFO in a private temporary directory,
opens its read end, and asks the manager (``/squall/capture_start,...,path=FIFO``)
to write pcapng into it; squallctl copies what arrives to FILE or stdout as it
comes, so ``squallctl capture ... -w - | tshark -r -`` is live. DPDK telemetry
is one request, one reply: it cannot carry a stream, and passing a file
descriptor would need a socket of the manager's own. A FIFO needs nothing
new in the manager (it writes a path, which also lets dpdk-telemetry.py users
capture to a file) and the stream ends with the manager's close: EOF means
the pcapng is complete.

The capture ends after ``-c`` packets, after ``-d`` seconds, or on Ctrl-C
(squallctl asks the manager to stop and still reads to the end, so the file
is complete); if squallctl dies, the manager's next write fails and the
capture ends there.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from squall.exit import Exit
from squall.telemetry import NotRunningError, Telemetry, TelemetryError

CHUNK_BYTES = 1 << 16
RETRIES = 50
RETRY_S = 0.1


def add_parser(sub: Any) -> argparse.ArgumentParser:
    helptext = "write pcapng of the packets at a port or an NF hop (see --help)"
    p: argparse.ArgumentParser = sub.add_parser(
        "capture",
        help=helptext,
        description=(
            "Capture copies of the packets at one point of a running squall-mgr and write "
            "them as pcapng (Wireshark, tshark). Pick one point: --port (rx: frames the "
            "port received; tx: frames given to it to send), --chain and --hop (in: the "
            "packets the NFs at that hop receive; out: what they return), --service, or "
            "--nf (one instance). The manager makes the copies into a pool of its own; "
            "when the capture cannot keep up it loses copies (counted, reported at the "
            "end), never traffic. Ends after -c packets, -d seconds or Ctrl-C; the file "
            "is complete in every case."
        ),
        epilog=(
            "Examples: squallctl capture --port in -c 100 -w in.pcapng; "
            "squallctl capture --chain web --hop 1 --dir out -f 'tcp port 80' -w - | tshark -r -"
        ),
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", metavar="NAME", help="a port, by its config name (or index)")
    where.add_argument("--chain", metavar="NAME", help="a chain; give --hop too")
    where.add_argument("--service", metavar="NAME", help="every NF of a service")
    where.add_argument("--nf", metavar="ID", type=int, help="one NF instance, by id")
    p.add_argument(
        "--hop", metavar="N", type=int, help="with --chain: the hop, 0 = the chain's first NF"
    )
    p.add_argument(
        "--dir",
        choices=("rx", "tx", "in", "out"),
        help="with --port: rx (default) or tx; with a hop, service or nf: in (default: "
        "what the NF receives) or out (what it returns)",
    )
    p.add_argument(
        "-f", "--filter", metavar="BPF", help="libpcap filter expression, e.g. 'udp port 53'"
    )
    p.add_argument("-c", "--count", metavar="N", type=int, help="stop after N packets")
    p.add_argument("-d", "--duration", metavar="SECONDS", type=float, help="stop after SECONDS")
    p.add_argument(
        "-s",
        "--snaplen",
        metavar="BYTES",
        type=int,
        help="keep at most BYTES of each packet (default: all)",
    )
    p.add_argument(
        "--ring",
        metavar="SLOTS",
        type=int,
        help="copies queued for the writer, a power of 2 (default 4096); beyond, copies "
        "are dropped and counted",
    )
    p.add_argument(
        "--writer",
        choices=["idle", "share"],
        help="share (the manager's default): the writer takes up to a tenth of the NFs' "
        "core, keeping more copies at the NFs' expense; idle: it runs only when the NFs "
        "leave its core idle, so the capture never costs traffic but drops copies under "
        "load",
    )
    p.add_argument(
        "-w",
        "--write",
        metavar="FILE",
        required=True,
        help="pcapng output file, or - for stdout (e.g. | tshark -r -)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def start_params(args: argparse.Namespace) -> str:
    """The key=value list of /squall/capture_start, without path=; filter= last."""
    kv: list[str] = []
    if args.port is not None:
        d = args.dir or "rx"
        if d not in ("rx", "tx"):
            raise ValueError("--port takes --dir rx or tx")
        kv += [f"point=port_{d}", f"port={args.port}"]
        if args.hop is not None:
            raise ValueError("--hop goes with --chain")
    else:
        d = args.dir or "in"
        if d not in ("in", "out"):
            raise ValueError("--chain, --service and --nf take --dir in or out")
        kv.append(f"point=nf_{d}")
        if args.chain is not None:
            if args.hop is None:
                raise ValueError("--chain needs --hop N (0 = the chain's first NF)")
            kv += [f"chain={args.chain}", f"hop={args.hop}"]
        elif args.hop is not None:
            raise ValueError("--hop goes with --chain")
        elif args.service is not None:
            kv.append(f"service={args.service}")
        else:
            kv.append(f"nf={args.nf}")
    for name in ("port", "chain", "service"):
        v = getattr(args, name)
        if v is not None and ("," in v or "=" in v):
            raise ValueError(f"--{name}: no ',' or '=' in a name")
    if args.count is not None:
        if args.count <= 0:
            raise ValueError("-c: expected packets > 0")
        kv.append(f"count={args.count}")
    if args.duration is not None:
        if args.duration <= 0:
            raise ValueError("-d: expected seconds > 0")
        kv.append(f"duration_ms={max(1, round(args.duration * 1000))}")
    if args.snaplen is not None:
        kv.append(f"snaplen={args.snaplen}")
    if args.ring is not None:
        kv.append(f"ring={args.ring}")
    if args.writer is not None:
        kv.append(f"writer={args.writer}")
    return ",".join(kv)


def _query(path: Path, cmd: str) -> Any:
    # A fresh connection per command: the capture may outlast an idle one.
    # DPDK telemetry's listen backlog is 1: when several clients connect at
    # once (captures ending together), retry a refused connect a while.
    for _ in range(RETRIES):
        try:
            with Telemetry.connect(path=path) as tm:
                return tm.query_raw(cmd)
        except NotRunningError:
            raise
        except TelemetryError:
            time.sleep(RETRY_S)
    with Telemetry.connect(path=path) as tm:
        return tm.query_raw(cmd)


def _summary(status: dict[str, Any]) -> str:
    s = (
        f"squallctl: capture {status.get('id')} ({status.get('name')}): "
        f"{status.get('written_pkts', 0):,} packets written; "
        f"{status.get('seen_pkts', 0):,} seen at the point"
    )
    if status.get("filter"):
        s += f", {status.get('matched_pkts', 0):,} matched the filter"
    s += (
        f"; copies dropped: {status.get('dropped_pkts', 0):,} "
        f"(ring full {status.get('drop_ring_full_pkts', 0):,}, "
        f"pool empty {status.get('drop_pool_empty_pkts', 0):,}); "
        f"ended: {status.get('end_reason') or status.get('state')}"
    )
    return s


def run(args: argparse.Namespace, tm: Telemetry) -> Exit:
    try:
        params = start_params(args)
    except ValueError as e:
        print(f"squallctl capture: {e}", file=sys.stderr)
        return Exit.USAGE
    tel_path = tm.path
    with tempfile.TemporaryDirectory(prefix="squallctl-capture-") as tmp:
        fifo = Path(tmp) / "capture.pcapng"
        os.mkfifo(fifo, 0o600)
        # Read end first, non-blocking (a blocking open would wait for the
        # writer); the manager opens its end before it replies.
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            cmd = f"/squall/capture_start,{params},path={fifo}"
            if args.filter:
                cmd += f",filter={args.filter}"
            reply = tm.query_raw(cmd)
            if reply is None:
                print("squallctl: this squall-mgr has no capture commands", file=sys.stderr)
                return Exit.FAILED
            if isinstance(reply, dict) and "error" in reply:
                print(f"squallctl capture: {reply['error']}", file=sys.stderr)
                return Exit.FAILED
            cap_id = int(reply["id"])
            # Free the connection: DPDK telemetry serves few at once, and a
            # capture may run for hours.
            tm.close()
            if not args.quiet:
                print(f"squallctl: capture {cap_id}: {reply.get('name')}", file=sys.stderr)
            fcntl.fcntl(rfd, fcntl.F_SETFL, fcntl.fcntl(rfd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            interrupted = _relay(rfd, args.write, tel_path, cap_id)
        finally:
            os.close(rfd)
    status: dict[str, Any] = {}
    with contextlib.suppress(TelemetryError):
        caps = _query(tel_path, "/squall/captures")
        if isinstance(caps, dict):
            status = caps.get(str(cap_id), {}) or {}
    if not args.quiet and status:
        if getattr(args, "json", False):
            print(json.dumps(status, sort_keys=True), file=sys.stderr)
        else:
            print(_summary(status), file=sys.stderr)
    return Exit.INTERRUPTED if interrupted else Exit.OK


def _open_out(where: str) -> IO[bytes]:
    if where == "-":
        return os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    return open(where, "wb", buffering=0)  # noqa: SIM115 (closed by the caller)


def _relay(rfd: int, where: str, tel_path: Path, cap_id: int) -> bool:
    """Copy the FIFO to the output until EOF. @return whether Ctrl-C ended it."""
    stop_sent = False
    out: IO[bytes] | None = _open_out(where)

    def stop() -> None:
        nonlocal stop_sent
        if not stop_sent:
            stop_sent = True
            with contextlib.suppress(TelemetryError):
                _query(tel_path, f"/squall/capture_stop,{cap_id}")

    def on_sigint(sig: int, frame: Any) -> None:
        # Ctrl-C: the manager ends the capture and closes the FIFO; reads
        # and writes go on (PEP 475 retries them) up to EOF, so the file is
        # complete. A second Ctrl-C kills.
        stop()
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        while True:
            data = os.read(rfd, CHUNK_BYTES)
            if not data:
                return stop_sent
            if out is None:
                continue  # the reader went away: drain until the manager closes
            try:
                out.write(data)
            except BrokenPipeError:
                # "| head" or tshark -c: stop the capture, not an error.
                with contextlib.suppress(OSError):
                    out.close()
                out = None
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                stop()
    finally:
        signal.signal(signal.SIGINT, old)
        if out is not None:
            with contextlib.suppress(OSError):
                out.close()
