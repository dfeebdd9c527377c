"""Client for the DPDK telemetry v2 socket that squall-mgr serves its commands on.

The manager runs EAL with the file prefix ``squall-<name>``, so its socket is
``<runtime dir>/dpdk/squall-<name>/dpdk_telemetry.v2``. Protocol (DPDK
``lib/telemetry``): a SOCK_SEQPACKET Unix socket; on connect the server sends a
JSON greeting holding ``max_output_len``; each command string sent gets exactly
one JSON reply ``{"<command>": <value>}``.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

SOCKET_NAME = "dpdk_telemetry.v2"
FILE_PREFIX = "squall-"
DEFAULT_TIMEOUT_S = 5.0
# Replies are at most max_output_len bytes; read with room to spare so a
# SOCK_SEQPACKET record is never truncated.
MIN_RECV_BYTES = 1 << 16


class TelemetryError(Exception):
    """The manager cannot be reached or answered something unusable."""


class NotRunningError(TelemetryError):
    """No manager is listening on the socket."""


def dpdk_runtime_dir() -> Path:
    """The DPDK runtime directory, chosen the way EAL chooses it."""
    run_dir = os.environ.get("RUNTIME_DIRECTORY")
    if not run_dir:
        run_dir = "/var/run" if os.getuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    return Path(run_dir) / "dpdk"


def socket_path(name: str) -> Path:
    """Telemetry socket of the manager whose config says ``manager: {name: NAME}``."""
    return dpdk_runtime_dir() / f"{FILE_PREFIX}{name}" / SOCKET_NAME


def list_managers() -> list[str]:
    """Names of managers that have a telemetry socket (running or stale)."""
    root = dpdk_runtime_dir()
    if not root.is_dir():
        return []
    return sorted(
        p.parent.name.removeprefix(FILE_PREFIX) for p in root.glob(f"{FILE_PREFIX}*/{SOCKET_NAME}")
    )


@dataclass
class Greeting:
    version: str
    pid: int
    max_output_len: int


class Telemetry:
    """One connection to a manager's telemetry socket.

    >>> with Telemetry.connect(name="demo") as tm:
    ...     tm.query("/squall/stats")["rx_pkts"]
    """

    def __init__(self, sock: socket.socket, path: Path, greeting: Greeting) -> None:
        self._sock = sock
        self.path = path
        self.greeting = greeting

    @classmethod
    def connect(
        cls,
        name: str | None = None,
        path: str | os.PathLike[str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> Telemetry:
        """Connect by manager name or by socket path (exactly one of the two).

        Raises NotRunningError when nothing listens there, TelemetryError when
        the peer does not speak telemetry v2.
        """
        if (name is None) == (path is None):
            raise ValueError("give exactly one of name or path")
        sock_path = Path(path) if path is not None else socket_path(str(name))
        who = f"squall-mgr {name!r}" if name is not None else "squall-mgr"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(sock_path))
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            raise NotRunningError(
                f"{who} is not running: cannot connect to {sock_path} ({e.strerror})"
            ) from e
        except OSError as e:
            sock.close()
            raise TelemetryError(f"cannot connect to {sock_path}: {e}") from e
        try:
            raw = _recv_json(sock, MIN_RECV_BYTES, sock_path)
        except TelemetryError:
            sock.close()
            raise
        if not isinstance(raw, dict) or "max_output_len" not in raw:
            sock.close()
            raise TelemetryError(f"{sock_path}: not a DPDK telemetry v2 greeting: {raw!r}")
        greeting = Greeting(
            version=str(raw.get("version", "")),
            pid=int(raw.get("pid", 0)),
            max_output_len=int(raw["max_output_len"]),
        )
        return cls(sock, sock_path, greeting)

    def query_raw(self, cmd: str) -> Any:
        """Send one command (``/squall/stats`` or ``/cmd,param``); return its value.

        Unknown commands come back as None (DPDK answers ``{"<cmd>": null}``);
        squall commands that refuse answer ``{"error": "why"}``.
        """
        if not cmd.startswith("/"):
            raise ValueError(f"telemetry commands start with '/': {cmd!r}")
        try:
            self._sock.send(cmd.encode())
        except OSError as e:
            raise NotRunningError(f"{self.path}: manager went away ({e})") from e
        reply = _recv_json(
            self._sock, max(MIN_RECV_BYTES, 2 * self.greeting.max_output_len), self.path
        )
        if not isinstance(reply, dict) or len(reply) != 1:
            raise TelemetryError(f"{self.path}: unexpected reply to {cmd}: {reply!r}")
        return next(iter(reply.values()))

    def query(self, cmd: str) -> dict[str, Any]:
        """Like query_raw(), for commands whose value is a JSON object."""
        value = self.query_raw(cmd)
        if value is None:
            raise TelemetryError(f"{self.path}: unknown command {cmd}")
        if isinstance(value, dict) and set(value) == {"error"}:
            raise TelemetryError(f"{self.path}: {cmd}: {value['error']}")
        if not isinstance(value, dict):
            raise TelemetryError(f"{self.path}: {cmd} returned {type(value).__name__}, not object")
        return value

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _recv_json(sock: socket.socket, bufsize: int, path: Path) -> Any:
    try:
        data = sock.recv(bufsize)
    except TimeoutError as e:
        raise TelemetryError(f"{path}: no reply within {sock.gettimeout()} s") from e
    except OSError as e:
        raise NotRunningError(f"{path}: manager went away ({e})") from e
    if not data:
        raise NotRunningError(f"{path}: manager closed the connection")
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise TelemetryError(f"{path}: reply is not JSON ({e}): {data[:200]!r}") from e


def query(cmd: str, name: str | None = None, path: str | os.PathLike[str] | None = None) -> Any:
    """One-shot: connect, run one command, close."""
    with Telemetry.connect(name=name, path=path) as tm:
        return tm.query_raw(cmd)
