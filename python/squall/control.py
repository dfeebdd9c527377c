"""Run-time changes of a squall-mgr: apply a config file, read the running one back,
and single edits (rule, chain, service).

``/squall/apply,PATH`` loads PATH with the loader the manager starts with, checks it
against what runs, and switches the roles to it between two rx rounds, or refuses it
whole. A telemetry command is one line of at most 1 KiB, so the manager reads the
file itself (as root) and squallctl passes an absolute path. The single edits
(``/squall/rule_add`` and the rest) take a YAML fragment, edit the running config
with it in the manager, and go the same way: each is checked and atomic alike.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def apply_file(
    tm: Telemetry, path: str | os.PathLike[str], check: bool = False, end_flows: bool = False
) -> ApplyResult:
    """Apply a config file (made absolute: the manager opens it). With
    end_flows, per-flow flows of chains the file removes or changes end now
    instead of finishing on a draining copy of their chain."""
    absolute = Path(path).resolve()
    if "," in str(absolute):
        raise ApplyError(f"{absolute}: a path with a comma cannot be passed to the manager", 2)
    cmd = "/squall/apply"
    flags = (",check" if check else "") + (",end_flows" if end_flows else "")
    return _result(tm, cmd, tm.query_raw(f"{cmd},{absolute}{flags}"))


def _result(tm: Telemetry, cmd: str, reply: Any) -> ApplyResult:
    if reply is None:
        raise TelemetryError(f"{tm.path}: this manager has no {cmd} command")
    if not isinstance(reply, dict):
        raise TelemetryError(f"{tm.path}: {cmd}: unexpected reply {reply!r}")
    if "error" in reply:
        err = reply["error"]
        message = "".join(err) if isinstance(err, list) else str(err)
        raise ApplyError(message, int(reply.get("exit", 1)))
    return ApplyResult(changes=int(reply.get("changes", 0)), applied=bool(reply.get("applied")))


# ------------------------------------------------------------------ single edits
#
# Each is a command of the manager's (/squall/rule_add, ...): it edits the
# running config's YAML with the fragment given (JSON is YAML) and applies the
# result as a whole config, checked by the same loader.


def edit(tm: Telemetry, command: str, params: str) -> ApplyResult:
    cmd = f"/squall/{command}"
    if len(cmd) + 1 + len(params) >= 1024:
        raise ApplyError(f"{command}: parameters longer than a telemetry command takes", 2)
    return _result(tm, cmd, tm.query_raw(f"{cmd},{params}"))


def fragment(value: dict[str, Any]) -> str:
    """A flow mapping for the manager's YAML loader: JSON, every value a string."""
    return json.dumps(value, separators=(", ", ": "))


def settings(pairs: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs as a mapping; a dotted key nests (wake.policy=fixed)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ApplyError(f"expected KEY=VALUE, got {pair!r}", 2)
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out
