"""Telemetry commands while the manager shuts down: every reply is a
consistent answer or {"error": ...}, never a crash (the commands read NF,
generator and flow state that teardown frees)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

from conftest import Manager
from squall.telemetry import Telemetry, TelemetryError

COMMANDS = [
    "/squall/wake,f,min",
    "/squall/nfs",
    "/squall/wake,f,fixed",
    "/squall/stats",
    "/squall/gen",
    "/squall/ports",
    "/squall/pools",
]
ROUNDS = 6


def hammer(name: str, stop: threading.Event, errors: list[str]) -> None:
    """Query in a loop until the manager is gone (or stop)."""
    try:
        tm = Telemetry.connect(name=name)
    except (TelemetryError, OSError):
        return
    i = 0
    try:
        while not stop.is_set():
            try:
                reply = tm.query(COMMANDS[i % len(COMMANDS)])
            except (TelemetryError, OSError, ValueError):
                return  # the manager closed the socket: it is going away
            if not isinstance(reply, dict):
                errors.append(f"{COMMANDS[i % len(COMMANDS)]}: {reply!r}")
            i += 1
    finally:
        tm.close()


def test_telemetry_during_shutdown_never_crashes(mgr: Manager) -> None:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "f", "exec": "squall-nf-fwd", "instances": 40}],
        chains=[{"name": "c", "services": ["f"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 100000, "flows": 64}
    for _round in range(ROUNDS):
        mgr.start(cfg)
        stop = threading.Event()
        errors: list[str] = []
        threads = [threading.Thread(target=hammer, args=(mgr.name, stop, errors)) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        assert mgr.proc is not None
        mgr.proc.send_signal(signal.SIGTERM)
        try:
            rc = mgr.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            mgr.proc.kill()
            raise
        stop.set()
        for t in threads:
            t.join(10)
        mgr._tm = None
        log = mgr.stderr_path.read_text(errors="replace")
        assert rc == 0, f"exit {rc}\n{log[-3000:]}"
        assert "Segmentation" not in log and "Aborted" not in log, log[-3000:]
        assert not errors, errors[:5]
