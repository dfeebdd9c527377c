"""Run-time changes of a squall-mgr: apply a config file, read the running one back,
and single edits (rule, chain, service) made on the running config and applied whole.

The manager has one command that changes it, ``/squall/apply,PATH``: it loads PATH
with the loader it starts with, checks it against what runs, and switches its roles
to it between two rx rounds, or refuses it whole. A telemetry command is one line
of at most 1 KiB, so the manager reads the file itself (as root) and squallctl
passes an absolute path. Single edits are the running config (``/squall/config``),
edited here, written to a private temp file and applied the same way: one path
for every change, so each is checked and atomic alike.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from squall.telemetry import Telemetry, TelemetryError

CONFIG_CHUNK = "/squall/config"


class ApplyError(Exception):
    """The manager refused a config; ``exit`` is 2 for a bad config, 1 otherwise."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class ApplyResult:
    changes: int
    applied: bool


def get_config(tm: Telemetry) -> str:
    """The running config as YAML, exactly as the manager emits it."""
    parts: list[str] = []
    offset = 0
    while True:
        chunk = tm.query_raw(f"{CONFIG_CHUNK},{offset}")
        if chunk is None:
            raise TelemetryError(f"{tm.path}: this manager has no {CONFIG_CHUNK} command")
        if not isinstance(chunk, str):
            raise TelemetryError(f"{tm.path}: {CONFIG_CHUNK}: unexpected reply {chunk!r}")
        if chunk == "":
            return "".join(parts)
        parts.append(chunk)
        offset += len(chunk.encode())


def apply_file(tm: Telemetry, path: str | os.PathLike[str], check: bool = False) -> ApplyResult:
    """Apply a config file (made absolute: the manager opens it)."""
    absolute = Path(path).resolve()
    if "," in str(absolute):
        raise ApplyError(f"{absolute}: a path with a comma cannot be passed to the manager", 2)
    reply = tm.query_raw(f"/squall/apply,{absolute}{',check' if check else ''}")
    if reply is None:
        raise TelemetryError(f"{tm.path}: this manager has no /squall/apply command")
    if not isinstance(reply, dict):
        raise TelemetryError(f"{tm.path}: /squall/apply: unexpected reply {reply!r}")
    if "error" in reply:
        err = reply["error"]
        message = "".join(err) if isinstance(err, list) else str(err)
        raise ApplyError(message, int(reply.get("exit", 1)))
    return ApplyResult(changes=int(reply.get("changes", 0)), applied=bool(reply.get("applied")))


def apply_text(tm: Telemetry, text: str, check: bool = False) -> ApplyResult:
    """Apply a config given as text, through a temp file only root can read."""
    fd, name = tempfile.mkstemp(prefix="squallctl-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return apply_file(tm, name, check)
    finally:
        os.unlink(name)


# ------------------------------------------------------------------ edits


def load(text: str) -> dict[str, Any]:
    """Every scalar as a string, as the manager reads it ("yes" stays "yes")."""
    doc = yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 (BaseLoader builds no objects)
    if not isinstance(doc, dict):
        raise ApplyError("the running config is not a mapping", 1)
    return doc


def dump(doc: dict[str, Any]) -> str:
    return str(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100))


Edit = Callable[[dict[str, Any]], None]


def edit_and_apply(tm: Telemetry, edit: Edit, check: bool = False) -> ApplyResult:
    """Read the running config, change it with ``edit``, apply the result."""
    doc = load(get_config(tm))
    edit(doc)
    return apply_text(tm, dump(doc), check)


def _named(items: list[dict[str, Any]], name: str, what: str) -> int:
    for i, item in enumerate(items):
        if item.get("name") == name:
            return i
    raise ApplyError(f"no {what} named {name!r}", 2)


def rule_add(rule: dict[str, str], at: int | None) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        rules = doc.setdefault("rules", [])
        pos = len(rules) if at is None else at
        if not 0 <= pos <= len(rules):
            raise ApplyError(f"rule position {pos} out of range 0..{len(rules)}", 2)
        rules.insert(pos, rule)

    return edit


def rule_remove(index: int) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        rules = doc.get("rules", [])
        if not 0 <= index < len(rules):
            raise ApplyError(f"no rule {index} (there are {len(rules)})", 2)
        del rules[index]

    return edit


def rule_move(src: int, dst: int) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        rules = doc.get("rules", [])
        if not 0 <= src < len(rules) or not 0 <= dst < len(rules):
            raise ApplyError(f"rule positions must be 0..{len(rules) - 1}", 2)
        rules.insert(dst, rules.pop(src))

    return edit


def chain_add(name: str, services: list[str]) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        doc.setdefault("chains", []).append({"name": name, "services": list(services)})

    return edit


def chain_remove(name: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        chains = doc.get("chains", [])
        del chains[_named(chains, name, "chain")]

    return edit


def service_add(service: dict[str, Any]) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        doc.setdefault("services", []).append(service)

    return edit


def service_remove(name: str) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        services = doc.get("services", [])
        del services[_named(services, name, "service")]

    return edit


def service_set(name: str, settings: list[str]) -> Edit:
    """KEY=VALUE pairs; a dotted key reaches into a mapping (wake.policy=fixed)."""

    def edit(doc: dict[str, Any]) -> None:
        services = doc.get("services", [])
        svc = services[_named(services, name, "service")]
        for setting in settings:
            key, sep, value = setting.partition("=")
            if not sep or not key:
                raise ApplyError(f"expected KEY=VALUE, got {setting!r}", 2)
            *path, last = key.split(".")
            node = svc
            for part in path:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise ApplyError(f"{key}: {part} is not a mapping", 2)
            node[last] = value

    return edit
