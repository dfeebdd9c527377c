"""``squallctl serve``'s arguments, apart from the exporter itself: squallctl
builds its whole parser for every command, and ``squallctl apply`` should not
pay for importing prometheus_client and the HTTP server (a Python process per
apply, on a host whose cores also carry the data path)."""

from __future__ import annotations

import argparse
from typing import Any

DEFAULT_LISTEN = "127.0.0.1:9470"


def parse_listen(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {s!r}")
    return host.strip("[]"), int(port)


def add_parser(sub: Any) -> None:
    """Register ``squallctl serve`` on squallctl's subcommands."""
    p = sub.add_parser(
        "serve",
        help="Prometheus exporter and live dashboard over HTTP",
        description="Serve Prometheus metrics (/metrics) and a live dashboard (/) for a "
        "manager, read from its telemetry socket every interval. Keeps running while the "
        "manager restarts (squall_up 0, then reconnects).",
    )
    p.add_argument(
        "--listen",
        type=parse_listen,
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address to serve on (default {DEFAULT_LISTEN})",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="poll the manager this often (default 1; a slower poll waits as long as it took)",
    )
    p.add_argument(
        "--no-nf-metrics",
        action="store_true",
        help="per-service metrics only, no per-NF series (for very many NFs)",
    )
    p.add_argument("--verbose", action="store_true", help="log every HTTP request")
    p.set_defaults(fn=None, serve=True)
