"""squallctl scale: the scaler's view of scaled services, and scaling by hand.

    squallctl scale                   every scaled service, and the last decisions
    squallctl scale SERVICE           its instances (state, flows, load, queue)
    squallctl scale SERVICE N|auto    run N instances whatever the load, or let it decide

Reads /squall/scale, /squall/scale_events and /squall/scale_nfs; writes
/squall/scale_set (mgr/scaler.c).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from squall.exit import Exit
from squall.telemetry import Telemetry

if TYPE_CHECKING:
    from rich.table import Table

SERVICE_COLUMNS = (
    "running",
    "blocked",
    "starting",
    "load_pct",
    "overflow_pps",
    "queue_max",
    "spawns",
    "reruns",
)
EVENT_COLUMNS = ("ms", "service", "reason", "load_pct", "queue", "from", "to")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    helptext = "scaled services: instances, load, decisions; scale one by hand"
    p: argparse.ArgumentParser = sub.add_parser(
        "scale",
        help=helptext,
        description=(
            "Show what the scaler does for services with a scale: policy (instances running, "
            "blocked and starting, their load and queues, and every decision with its reason), "
            "or set how many instances of one run. A number holds until 'auto' gives the "
            "decision back to the load. Flows never move: a blocked instance keeps the flows "
            "it has until they end."
        ),
        epilog="Examples: squallctl scale; squallctl scale aes; squallctl scale aes 3; "
        "squallctl scale aes auto",
    )
    p.add_argument("service", nargs="?", metavar="SERVICE", help="one scaled service")
    p.add_argument("count", nargs="?", metavar="N|auto", help="instances to run, or auto")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def _error(reply: Any) -> str | None:
    if isinstance(reply, dict) and set(reply) == {"error"}:
        return str(reply["error"])
    return None


def _events(tm: Telemetry) -> list[dict[str, Any]]:
    reply = tm.query("/squall/scale_events")
    return sorted((v for v in reply.values() if isinstance(v, dict)), key=lambda e: e["seq"])


def _events_table(events: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(*EVENT_COLUMNS, "spawned", "rerun", "blocked", title="decisions")
    for e in events:
        table.add_row(
            *(str(e[c]) for c in EVENT_COLUMNS),
            str(e["spawned"]),
            str(e["rerun"]),
            str(e["blocked"]),
        )
    return table


def _show_all(tm: Telemetry, as_json: bool) -> Exit:
    from rich.table import Table

    from squall.console import console

    reply = tm.query("/squall/scale")
    services = {k: v for k, v in reply.items() if isinstance(v, dict)}
    events = _events(tm)
    if as_json:
        print(json.dumps({"scale": reply, "events": events}, indent=2, sort_keys=True))
        return Exit.OK
    table = Table("service", "min..max", "target", *SERVICE_COLUMNS, title="scaled services")
    for name, s in sorted(services.items()):
        table.add_row(
            name, f"{s['min']}..{s['max']}", str(s["target"]), *(str(s[c]) for c in SERVICE_COLUMNS)
        )
    out = console()
    out.print(table)
    out.print(
        f"scale-out to first packet p50: {reply['scale_out_us_p50'] / 1000:.2f} ms "
        f"({reply['scale_out_samples']} samples); rerun p50: "
        f"{reply['rerun_us_p50'] / 1000:.2f} ms ({reply['rerun_samples']} samples)"
    )
    out.print(_events_table(events[-20:]))
    return Exit.OK


def _show_one(tm: Telemetry, service: str, as_json: bool) -> Exit:
    from rich.table import Table

    from squall.console import console

    reply = tm.query_raw(f"/squall/scale_nfs,{service}")
    err = _error(reply)
    if err is not None:
        print(f"squallctl: scale {service}: {err}", file=sys.stderr)
        return Exit.USAGE
    instances = sorted(reply.values(), key=lambda i: i["instance"])
    if as_json:
        print(json.dumps(instances, indent=2, sort_keys=True))
        return Exit.OK
    table = Table(
        "instance",
        "nf",
        "pid",
        "state",
        "flows",
        "load_pct",
        "queue",
        "cost_ns",
        title=f"{service}: instances",
    )
    for i in instances:
        table.add_row(
            *(
                str(i[c])
                for c in ("instance", "nf", "pid", "state", "flows", "load_pct", "queue", "cost_ns")
            )
        )
    console().print(table)
    return Exit.OK


def run(args: argparse.Namespace, tm: Telemetry) -> Exit:
    as_json = bool(getattr(args, "json", False))
    if args.service is None:
        return _show_all(tm, as_json)
    if args.count is None:
        return _show_one(tm, args.service, as_json)
    reply = tm.query_raw(f"/squall/scale_set,{args.service},{args.count}")
    err = _error(reply)
    if err is not None:
        print(f"squallctl: scale {args.service} {args.count}: {err}", file=sys.stderr)
        return Exit.USAGE
    if as_json:
        print(json.dumps(reply, sort_keys=True))
    else:
        print(f"{reply['service']}: target {reply['target']}")
    return Exit.OK
