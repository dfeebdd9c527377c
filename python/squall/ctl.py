"""squallctl: look at a running squall-mgr through its telemetry socket."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from squall import capture, control, msg, scale, serve_cli
from squall.api import ControlApi, Nf, Port, Stats
from squall.exit import Exit
from squall.telemetry import (
    NotRunningError,
    Telemetry,
    TelemetryError,
    list_managers,
    socket_path,
)

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_NAME = "squall"  # squall-mgr's default manager name

Command = Callable[[argparse.Namespace, ControlApi], Exit]


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _stats_table(st: Stats, causes: dict[str, str]) -> Table:
    from rich.table import Table

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
    from rich.table import Table

    table = Table(
        "id",
        "port",
        "rx_pkts",
        "rx_bytes",
        "tx_pkts",
        "tx_bytes",
        "rx_missed",
        "rx_held",
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
            f"{p.rx_held:,}",
        )
    return table


def _nfs_table(nfs: Sequence[Nf]) -> Table:
    from rich.table import Table

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
        "restarts",
        "last exit",
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
            f"{nf.restarts:,}",
            nf.exit_reason or "-",
            counters,
        )
    return table


def cmd_status(args: argparse.Namespace, api: ControlApi) -> Exit:
    from squall.console import console

    if args.json:
        _print_json(
            {
                "stats": api.tm.query("/squall/stats"),
                "ports": api.ports_dict(),
                "nfs": api.nfs_dict(),
            }
        )
        return Exit.OK
    out = console()
    out.print(_stats_table(api.stats(), api.drop_causes()))
    out.print(_ports_table(api.ports()))
    out.print(_nfs_table(api.nfs()))
    return Exit.OK


def cmd_ports(args: argparse.Namespace, api: ControlApi) -> Exit:
    from squall.console import console

    if args.json:
        _print_json(api.ports_dict())
    else:
        console().print(_ports_table(api.ports()))
    return Exit.OK


def cmd_nfs(args: argparse.Namespace, api: ControlApi) -> Exit:
    from squall.console import console

    if args.json:
        _print_json(api.nfs_dict())
    else:
        console().print(_nfs_table(api.nfs()))
    return Exit.OK


def cmd_chains(args: argparse.Namespace, api: ControlApi) -> Exit:
    from rich.table import Table

    from squall.console import console

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
    console().print(table)
    return Exit.OK


def cmd_drops(args: argparse.Namespace, api: ControlApi) -> Exit:
    from rich.table import Table

    from squall.console import console

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
    console().print(table)
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


def _report(args: argparse.Namespace, run: Callable[[], control.ApplyResult]) -> Exit:
    try:
        res = run()
    except control.ApplyError as e:
        print(f"squallctl: {e}", file=sys.stderr)
        return Exit.USAGE if e.exit_code == 2 else Exit.FAILED
    if args.json:
        _print_json({"changes": res.changes, "applied": res.applied})
    elif res.changes == 0:
        print("no change")
    elif getattr(args, "check", False):
        print(f"ok: {res.changes} change(s) would be made")
    else:
        print(f"applied: {res.changes} change(s)")
    return Exit.OK


def cmd_apply(args: argparse.Namespace, api: ControlApi) -> Exit:
    return _report(args, lambda: control.apply_file(api.tm, args.file, args.check, args.end_flows))


def cmd_get(args: argparse.Namespace, api: ControlApi) -> Exit:
    sys.stdout.write(control.get_config(api.tm))
    return Exit.OK


def _rule_of(args: argparse.Namespace) -> dict[str, str]:
    rule = {"chain": args.chain, "out_port": args.out_port}
    for key in ("in_port", "dst_mac", "assign", "nf_priority"):
        if getattr(args, key) is not None:
            rule[key] = str(getattr(args, key))
    return rule


def _edit_command(args: argparse.Namespace) -> tuple[str, str]:
    """The manager's command and parameters for a single edit."""
    what = f"{args.command}_{args.action}"
    if what == "rule_add":
        frag = control.fragment(_rule_of(args))
        return what, frag if args.at is None else f"{args.at},{frag}"
    if what == "rule_remove":
        return what, str(args.index)
    if what == "rule_move":
        return what, f"{args.src},{args.dst}"
    if what == "chain_add":
        return what, control.fragment({"name": args.obj, "services": args.services})
    if what in ("chain_remove", "service_remove"):
        return what, args.obj
    if what == "service_add":
        svc: dict[str, Any] = {"name": args.obj, "exec": args.exec, "args": args.nf_args}
        if args.instances is not None:
            svc["instances"] = str(args.instances)
        return what, control.fragment(svc)
    return what, f"{args.obj},{control.fragment(control.settings(args.settings))}"


def cmd_edit(args: argparse.Namespace, api: ControlApi) -> Exit:
    try:
        command, params = _edit_command(args)
    except control.ApplyError as e:
        print(f"squallctl: {e}", file=sys.stderr)
        return Exit.USAGE
    return _report(args, lambda: control.edit(api.tm, command, params))


def _add_edit_parsers(sub: Any) -> None:
    """rule|chain|service add|remove|...: the manager's /squall/rule_add and the rest,
    each an edit of the running config applied as a whole config is."""

    def verb(parent: Any, name: str, helptext: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=helptext, description=helptext)
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        return p

    rule = sub.add_parser("rule", help="add, remove or move a rule of the running config")
    rule.set_defaults(fn=cmd_edit)
    rv = rule.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = verb(rv, "add", "add a rule (at the end, or --at INDEX; the first match wins)")
    p.add_argument("--chain", required=True)
    p.add_argument("--out-port", required=True, dest="out_port")
    p.add_argument("--in-port", dest="in_port")
    p.add_argument("--dst-mac", dest="dst_mac")
    p.add_argument("--assign", choices=["rss", "per-flow", "round-robin", "spray"])
    p.add_argument("--nf-priority", type=int, dest="nf_priority")
    p.add_argument("--at", type=int, metavar="INDEX")
    p = verb(rv, "remove", "remove the rule at INDEX (0 is the first)")
    p.add_argument("index", type=int, metavar="INDEX")
    p = verb(rv, "move", "move the rule at SRC to position DST")
    p.add_argument("src", type=int, metavar="SRC")
    p.add_argument("dst", type=int, metavar="DST")

    chain = sub.add_parser("chain", help="add or remove a chain of the running config")
    chain.set_defaults(fn=cmd_edit)
    cv = chain.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = verb(cv, "add", "add a chain of services")
    p.add_argument("obj", metavar="NAME")
    p.add_argument("services", nargs="+", metavar="SERVICE")
    p = verb(cv, "remove", "remove a chain (no rule may still use it)")
    p.add_argument("obj", metavar="NAME")

    service = sub.add_parser("service", help="add, remove or change a service")
    service.set_defaults(fn=cmd_edit)
    sv = service.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = verb(sv, "add", "add a service; its NFs start before any rule sends it a packet")
    p.add_argument("obj", metavar="NAME")
    p.add_argument("--exec", required=True)
    p.add_argument("--instances", type=int)
    p.add_argument("nf_args", nargs="*", metavar="ARG", help="the NF's arguments (after --)")
    p = verb(sv, "remove", "remove a service: its NFs hand back what they hold, then stop")
    p.add_argument("obj", metavar="NAME")
    p = verb(sv, "set", "change a service's settings, e.g. wake.policy=fixed burst_max=16")
    p.add_argument("obj", metavar="NAME")
    p.add_argument("settings", nargs="+", metavar="KEY=VALUE")


def cmd_capture(args: argparse.Namespace, api: ControlApi) -> Exit:
    return capture.run(args, api.tm)


def cmd_scale(args: argparse.Namespace, api: ControlApi) -> Exit:
    return scale.run(args, api.tm)


def cmd_msgs(args: argparse.Namespace, api: ControlApi) -> Exit:
    return msg.run_show(args, api.tm)


def cmd_msg(args: argparse.Namespace, api: ControlApi) -> Exit:
    return msg.run_send(args, api.tm)


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
        ("apply", cmd_apply, "apply a config file to the running manager (all or nothing)"),
        ("get", cmd_get, "print the running config as YAML (get config)"),
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
        if name == "apply":
            p.add_argument("file", metavar="FILE", help="a config, as squall-mgr takes at start")
            p.add_argument("--check", action="store_true", help="check only, change nothing")
            p.add_argument(
                "--end-flows",
                action="store_true",
                help="per-flow flows of chains removed or changed, and of pool instances "
                "removed, end now (default: they finish on their NFs, then those go)",
            )
        if name == "get":
            p.add_argument("what", choices=["config"], help="what to print")
    _add_edit_parsers(sub)
    capture.add_parser(sub).set_defaults(fn=cmd_capture)
    scale.add_parser(sub).set_defaults(fn=cmd_scale)
    show, send = msg.add_parsers(sub)
    show.set_defaults(fn=cmd_msgs)
    send.set_defaults(fn=cmd_msg)
    serve_cli.add_parser(sub)
    return parser


def _default_name() -> str:
    running = list_managers()
    return running[0] if len(running) == 1 else DEFAULT_NAME


def run(argv: Sequence[str] | None = None) -> Exit:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "serve", False):
        # (imported here: every other command, an apply's too, starts without
        # prometheus_client and the HTTP server)
        from squall import exporter

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
