"""squallctl: look at a running squall-mgr through its telemetry socket."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from squall import exporter
from squall.api import ControlApi, Nf, Port, Stats
from squall.exit import Exit
from squall.telemetry import (
    NotRunningError,
    Telemetry,
    TelemetryError,
    list_managers,
    socket_path,
)

DEFAULT_NAME = "squall"  # squall-mgr's default manager name

Command = Callable[[argparse.Namespace, ControlApi], Exit]


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _stats_table(st: Stats, causes: dict[str, str]) -> Table:
    table = Table("counter", "value", title="manager", title_justify="left")
    table.add_row("rx_pkts", f"{st.rx_pkts:,}")
    table.add_row("tx_pkts", f"{st.tx_pkts:,}")
    table.add_row("drop_pkts", f"{st.drop_pkts:,}")
    table.add_row("mbufs in use", f"{st.mbufs_in_use:,} / {st.mbufs_total:,}")
    table.add_row("nfs live", f"{st.nfs_live:,}")
    for cause, n in sorted(st.drops.items()):
        if n:
            table.add_row(f"drop: {causes.get(cause, cause)}", f"{n:,}")
    return table


def _ports_table(ports: Sequence[Port]) -> Table:
    table = Table(
        "id",
        "port",
        "rx_pkts",
        "rx_bytes",
        "tx_pkts",
        "tx_bytes",
        "rx_missed",
        title="ports",
        title_justify="left",
    )
    for p in ports:
        table.add_row(
            str(p.id),
            p.name,
            f"{p.rx_pkts:,}",
            f"{p.rx_bytes:,}",
            f"{p.tx_pkts:,}",
            f"{p.tx_bytes:,}",
            f"{p.rx_eth_missed:,}",
        )
    return table


def _nfs_table(nfs: Sequence[Nf]) -> Table:
    table = Table(
        "id",
        "nf",
        "pid",
        "mode",
        "state",
        "rx_pkts",
        "tx_pkts",
        "drops",
        "sleeps",
        "wakes",
        "ring",
        "counters",
        title="nfs",
        title_justify="left",
    )
    for nf in nfs:
        counters = " ".join(f"{k}={v:,}" for k, v in nf.counters.items())
        table.add_row(
            str(nf.id),
            nf.name,
            str(nf.pid),
            nf.mode,
            nf.state,
            f"{nf.rx_pkts:,}",
            f"{nf.tx_pkts:,}",
            f"{nf.drop_verdicts:,}",
            f"{nf.sleeps:,}",
            f"{nf.wakes:,}",
            f"{nf.rx_ring_count:,}",
            counters,
        )
    return table


def cmd_status(args: argparse.Namespace, api: ControlApi) -> Exit:
    if args.json:
        _print_json(
            {
                "stats": api.tm.query("/squall/stats"),
                "ports": api.ports_dict(),
                "nfs": api.nfs_dict(),
            }
        )
        return Exit.OK
    console = Console()
    console.print(_stats_table(api.stats(), api.drop_causes()))
    console.print(_ports_table(api.ports()))
    console.print(_nfs_table(api.nfs()))
    return Exit.OK


def cmd_ports(args: argparse.Namespace, api: ControlApi) -> Exit:
    if args.json:
        _print_json(api.ports_dict())
    else:
        Console().print(_ports_table(api.ports()))
    return Exit.OK


def cmd_nfs(args: argparse.Namespace, api: ControlApi) -> Exit:
    if args.json:
        _print_json(api.nfs_dict())
    else:
        Console().print(_nfs_table(api.nfs()))
    return Exit.OK


def cmd_chains(args: argparse.Namespace, api: ControlApi) -> Exit:
    if args.json:
        _print_json(api.chains_dict())
        return Exit.OK
    table = Table("id", "chain", "hops", "rx_pkts", "tx_pkts", "visits_mismatch")
    for c in api.chains():
        table.add_row(
            str(c.id),
            c.name,
            " → ".join(c.hops),
            f"{c.rx_pkts:,}",
            f"{c.tx_pkts:,}",
            f"{c.visits_mismatch:,}",
        )
    Console().print(table)
    return Exit.OK


def cmd_drops(args: argparse.Namespace, api: ControlApi) -> Exit:
    st = api.stats()
    causes = api.drop_causes()
    if args.json:
        _print_json(
            {
                cause: {"what": causes.get(cause, cause), "pkts": st.drops.get(cause, 0)}
                for cause in sorted(set(causes) | set(st.drops))
            }
        )
        return Exit.OK
    table = Table("cause", "what", "pkts")
    for cause in sorted(set(causes) | set(st.drops)):
        table.add_row(cause, causes.get(cause, ""), f"{st.drops.get(cause, 0):,}")
    table.add_row("total", "", f"{st.drop_pkts:,}")
    Console().print(table)
    return Exit.OK


def cmd_raw(args: argparse.Namespace, api: ControlApi) -> Exit:
    value = api.tm.query_raw(args.cmd)
    if value is None:
        print(
            f"squallctl: no command {args.cmd.split(',')[0]!r} (`squallctl raw /` lists them)",
            file=sys.stderr,
        )
        return Exit.FAILED
    if isinstance(value, dict) and set(value) == {"error"}:
        print(f"squallctl: {args.cmd}: {value['error']}", file=sys.stderr)
        return Exit.FAILED
    _print_json(value)
    return Exit.OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="squallctl",
        description="Show the state of a running squall-mgr, read from its DPDK telemetry socket.",
        epilog="Exit codes: 0 ok, 1 the manager is not running or answered badly, "
        "2 bad arguments, 130 interrupted.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--name",
        help="manager name (manager.name in its config). Default: the only running "
        f"manager, else {DEFAULT_NAME!r}",
    )
    where.add_argument(
        "--socket",
        metavar="PATH",
        help="telemetry socket path (default: /var/run/dpdk/squall-NAME/dpdk_telemetry.v2 as root)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands: list[tuple[str, Command, str]] = [
        ("status", cmd_status, "counters, drops, ports and NFs"),
        ("ports", cmd_ports, "per-port packet and byte counters"),
        ("nfs", cmd_nfs, "every NF instance: pid, mode, state, counters"),
        ("chains", cmd_chains, "per-chain hops and packet counters"),
        ("drops", cmd_drops, "dropped packets per cause"),
        ("raw", cmd_raw, "send one telemetry command, print its JSON reply"),
    ]
    for name, fn, helptext in commands:
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.set_defaults(fn=fn)
        # Also accept "squallctl status --json"; SUPPRESS keeps a global --json.
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        if name == "raw":
            p.add_argument("cmd", metavar="CMD", help="e.g. /squall/stats or /ethdev/stats,0")
    exporter.add_parser(sub)
    return parser


def _default_name() -> str:
    running = list_managers()
    return running[0] if len(running) == 1 else DEFAULT_NAME


def run(argv: Sequence[str] | None = None) -> Exit:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "serve", False):
        return Exit(exporter.run_serve(args, args.name or _default_name()))
    try:
        if args.socket is not None:
            tm = Telemetry.connect(path=args.socket)
        else:
            name = args.name if args.name is not None else _default_name()
            tm = Telemetry.connect(name=name)
    except NotRunningError as e:
        print(f"squallctl: {e}", file=sys.stderr)
        if args.socket is None and args.name is None:
            others = list_managers()
            hint = ", ".join(others) if others else f"none under {socket_path('').parent.parent}"
            print(f"squallctl: managers with a socket: {hint}", file=sys.stderr)
        return Exit.FAILED
    except TelemetryError as e:
        print(f"squallctl: {e}", file=sys.stderr)
        return Exit.FAILED
    with tm:
        try:
            result: Exit = args.fn(args, ControlApi(tm))
            return result
        except TelemetryError as e:
            print(f"squallctl: {e}", file=sys.stderr)
            return Exit.FAILED


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return int(run(argv))
    except KeyboardInterrupt:
        return int(Exit.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away ("squallctl --json nfs | head"): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(Exit.OK)


if __name__ == "__main__":
    sys.exit(main())
