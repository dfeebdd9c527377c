"""squallctl msg / msgs: messages between the manager and NF instances.

    squallctl msgs                              counts, and the last messages both ways
    squallctl msg SERVICE INSTANCE TYPE [DATA]  a user message to one instance

Reads /squall/msgs; writes /squall/msg_send (mgr/msg.c). An NF takes it in
the handler it set with sq_nf_set_msg_handler() (docs/nf-api.md "Messages").
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from squall.exit import Exit
from squall.telemetry import Telemetry

DATA_MAX = 56
TOTALS = ("sent", "received", "full", "bad", "undelivered")


def add_parsers(sub: Any) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    show = sub.add_parser(
        "msgs",
        help="messages between the manager and NFs: counts and the last ones",
        description=(
            "Show the message counts (sent to NFs, received from them, refused because a "
            "ring was full, bad: an NF whose ring counts or messages made no sense, "
            "undelivered: sent to a process that died before taking them), per NF, and the "
            "last messages both ways with their data."
        ),
    )
    show.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    send = sub.add_parser(
        "msg",
        help="send a user message to one NF instance",
        description=(
            "Send a user message to one instance of a service; its NF's message handler gets "
            "it between bursts. Block, rerun and stop are the scaler's and not sent by hand."
        ),
        epilog="Example: squallctl msg fw 0 300 reload; squallctl msg fw 1 301 --hex 0a0b",
    )
    send.add_argument("service", metavar="SERVICE")
    send.add_argument("instance", metavar="INSTANCE", type=int)
    send.add_argument("type", metavar="TYPE", type=int, help="a user type, 256 or above")
    send.add_argument("data", metavar="DATA", nargs="?", default="", help="text (UTF-8)")
    send.add_argument("--hex", action="store_true", help="DATA is hex digits, not text")
    send.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    return show, send


def _error(reply: Any) -> str | None:
    if isinstance(reply, dict) and set(reply) == {"error"}:
        return str(reply["error"])
    return None


def _shown(hexdata: str) -> str:
    raw = bytes.fromhex(hexdata)
    text = raw.decode("utf-8", errors="replace")
    return text if text.isprintable() else hexdata


def run_show(args: argparse.Namespace, tm: Telemetry) -> Exit:
    from rich.table import Table

    from squall.console import console

    reply = tm.query("/squall/msgs")
    entries = sorted(
        (v for v in reply.values() if isinstance(v, dict) and "dir" in v), key=lambda e: e["seq"]
    )
    per_nf = {k: v for k, v in reply.items() if isinstance(v, dict) and "dir" not in v}
    if getattr(args, "json", False):
        print(json.dumps({"totals": reply, "messages": entries}, indent=2, sort_keys=True))
        return Exit.OK
    out = console()
    out.print(", ".join(f"{k} {reply[k]}" for k in TOTALS))
    if per_nf:
        table = Table("nf", *TOTALS, "acked", title="per NF")
        for key, c in sorted(per_nf.items(), key=lambda kv: int(kv[0][2:])):
            table.add_row(key[2:], *(str(c[t]) for t in TOTALS), c["acked"])
        out.print(table)
    table = Table("seq", "ms", "dir", "nf", "service#instance", "type", "kind", "data")
    for e in entries:
        table.add_row(
            str(e["seq"]),
            f"{e['us'] / 1000:.1f}",
            e["dir"],
            str(e["nf"]),
            f"{e['service']}#{e['instance']}",
            str(e["type"]),
            e["kind"],
            _shown(e["data"]),
        )
    out.print(table)
    return Exit.OK


def run_send(args: argparse.Namespace, tm: Telemetry) -> Exit:
    try:
        data = bytes.fromhex(args.data) if args.hex else args.data.encode()
    except ValueError:
        print(f"squallctl: msg: {args.data!r} is not hex", file=sys.stderr)
        return Exit.USAGE
    if len(data) > DATA_MAX:
        print(f"squallctl: msg: {len(data)} bytes of data, at most {DATA_MAX}", file=sys.stderr)
        return Exit.USAGE
    cmd = f"/squall/msg_send,{args.service},{args.instance},{args.type}"
    reply = tm.query_raw(cmd + (f",{data.hex()}" if data else ""))
    err = _error(reply)
    if err is not None:
        print(f"squallctl: msg {args.service} {args.instance}: {err}", file=sys.stderr)
        return Exit.USAGE
    if getattr(args, "json", False):
        print(json.dumps(reply, sort_keys=True))
    else:
        print(
            f"sent to {reply['service']}#{reply['instance']} (nf {reply['nf']}): "
            f"type {reply['type']}, {reply['len']} B"
        )
    return Exit.OK
