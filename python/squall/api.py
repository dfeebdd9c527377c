"""Typed view of squall-mgr's telemetry commands (/squall/stats, /ports, /nfs, /chains).

The same shapes appear in the manager's ``--exit-stats`` file, so the
``*_from_dict`` helpers work on either. Unknown fields are ignored and missing
counters read as 0, so an older or newer manager still parses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.telemetry import Telemetry


def _int(d: dict[str, Any], key: str) -> int:
    v = d.get(key, 0)
    return int(v) if isinstance(v, int | float) else 0


@dataclass
class Stats:
    rx_pkts: int
    tx_pkts: int
    drop_pkts: int
    mbufs_in_use: int
    mbufs_total: int
    nfs_live: int
    drops: dict[str, int] = field(default_factory=dict)  # cause -> pkts

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stats:
        drops = d.get("drops") or {}
        return cls(
            rx_pkts=_int(d, "rx_pkts"),
            tx_pkts=_int(d, "tx_pkts"),
            drop_pkts=_int(d, "drop_pkts"),
            mbufs_in_use=_int(d, "mbufs_in_use"),
            mbufs_total=_int(d, "mbufs_total"),
            nfs_live=_int(d, "nfs_live"),
            drops={str(k): _int(drops, k) for k in drops},
        )


@dataclass
class Port:
    name: str
    id: int
    rx_pkts: int
    rx_bytes: int
    tx_pkts: int
    tx_bytes: int
    rx_eth_missed: int
    rx_held: int  # rounds rx left it unread (manager.rx_backpressure)

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> Port:
        return cls(
            name=name,
            id=_int(d, "id"),
            rx_pkts=_int(d, "rx_pkts"),
            rx_bytes=_int(d, "rx_bytes"),
            tx_pkts=_int(d, "tx_pkts"),
            tx_bytes=_int(d, "tx_bytes"),
            rx_eth_missed=_int(d, "rx_eth_missed"),
            rx_held=_int(d, "rx_held"),
        )


@dataclass
class Nf:
    name: str  # "<service>#<instance>"
    id: int
    service: str
    instance: int
    pid: int
    state: str  # asleep|awake|waking|spawned|exited|dead|free
    mode: str  # sleep|poll
    rx_pkts: int
    tx_pkts: int
    drop_verdicts: int
    sleeps: int
    wakes: int
    rx_ring_count: int
    restarts: int = 0  # times the manager started it again after it died
    exit_reason: str = ""  # of its last death: "exit 3", "signal 9 (KILL)", "watchdog"
    counters: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> Nf:
        counters = normalize_nf(d)["counters"]
        return cls(
            name=name,
            id=_int(d, "id"),
            service=str(d.get("service", name.split("#")[0])),
            instance=_int(d, "instance"),
            pid=_int(d, "pid"),
            state=str(d.get("state", "")),
            mode=str(d.get("mode", "")),
            rx_pkts=_int(d, "rx_pkts"),
            tx_pkts=_int(d, "tx_pkts"),
            drop_verdicts=_int(d, "drop_verdicts"),
            sleeps=_int(d, "sleeps"),
            wakes=_int(d, "wakes"),
            rx_ring_count=_int(d, "rx_ring_count"),
            restarts=_int(d, "restarts"),
            exit_reason=str(d.get("exit_reason", "")),
            counters={str(k): _int(counters, k) for k in counters},
        )


@dataclass
class Chain:
    name: str
    id: int
    hops: list[str]
    rx_pkts: int
    tx_pkts: int
    visits_mismatch: int

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> Chain:
        hops = d.get("hops", "")
        return cls(
            name=name,
            id=_int(d, "id"),
            hops=[h for h in str(hops).split(",") if h] if isinstance(hops, str) else list(hops),
            rx_pkts=_int(d, "rx_pkts"),
            tx_pkts=_int(d, "tx_pkts"),
            visits_mismatch=_int(d, "visits_mismatch"),
        )


# DPDK 22.11 telemetry nests one level only, so squall-mgr flattens an NF's own
# counters into its entry as "c_<name>"; these helpers put them back under
# "counters" (a nested "counters" object is accepted too).
NF_COUNTER_PREFIX = "c_"


def normalize_nf(d: dict[str, Any]) -> dict[str, Any]:
    """An NF entry with its NF-defined counters under "counters"."""
    out = {k: v for k, v in d.items() if not k.startswith(NF_COUNTER_PREFIX)}
    counters = dict(d.get("counters") or {})
    for k, v in d.items():
        if k.startswith(NF_COUNTER_PREFIX):
            counters[k.removeprefix(NF_COUNTER_PREFIX)] = v
    out["counters"] = counters
    return out


def nf_key(name: str, d: dict[str, Any]) -> str:
    """ "<service>#<instance>", from the entry's own fields when it has them: the
    manager's key is sanitized (telemetry keys allow only [A-Za-z0-9_/])."""
    if "service" in d and "instance" in d:
        return f"{d['service']}#{d['instance']}"
    return name


def by_name(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Port or chain entries keyed by their real name: the manager sanitizes keys
    ("in-1" -> "in_1") and carries the name as the "name" value."""
    return {str(v.get("name", k)): v for k, v in d.items() if isinstance(v, dict)}


def normalize_nfs(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """NF entries (of a /squall/nfs page or an exit-stats file) keyed "<service>#<instance>"."""
    return {nf_key(k, v): normalize_nf(v) for k, v in d.items() if isinstance(v, dict)}


def nfs_page(reply: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], int | None]:
    """One /squall/nfs reply: its NF entries, and the first id of the next page."""
    nxt = reply.get("next")
    return normalize_nfs(reply), nxt if isinstance(nxt, int) and not isinstance(nxt, bool) else None


def ports_from_dict(d: dict[str, Any]) -> list[Port]:
    return sorted((Port.from_dict(k, v) for k, v in d.items()), key=lambda p: p.id)


def nfs_from_dict(d: dict[str, Any]) -> list[Nf]:
    return sorted((Nf.from_dict(k, v) for k, v in d.items()), key=lambda n: n.id)


def chains_from_dict(d: dict[str, Any]) -> list[Chain]:
    return sorted((Chain.from_dict(k, v) for k, v in d.items()), key=lambda c: c.id)


class ControlApi:
    """squall-mgr's commands over one telemetry connection."""

    def __init__(self, tm: Telemetry) -> None:
        self.tm = tm

    def stats(self) -> Stats:
        return Stats.from_dict(self.tm.query("/squall/stats"))

    def ports_dict(self) -> dict[str, dict[str, Any]]:
        return by_name(self.tm.query("/squall/ports"))

    def chains_dict(self) -> dict[str, dict[str, Any]]:
        return by_name(self.tm.query("/squall/chains"))

    def ports(self) -> list[Port]:
        return ports_from_dict(self.ports_dict())

    def nfs_dict(self) -> dict[str, dict[str, Any]]:
        """Every NF entry, all pages of /squall/nfs, counters under "counters"."""
        entries, nxt = nfs_page(self.tm.query("/squall/nfs"))
        seen = set()
        while nxt is not None and nxt not in seen:
            seen.add(nxt)
            page, nxt = nfs_page(self.tm.query(f"/squall/nfs,{nxt}"))
            entries.update(page)
        return entries

    def nfs(self) -> list[Nf]:
        return nfs_from_dict(self.nfs_dict())

    def chains(self) -> list[Chain]:
        return chains_from_dict(self.chains_dict())

    def drop_causes(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.tm.query("/squall/drop_causes").items()}
