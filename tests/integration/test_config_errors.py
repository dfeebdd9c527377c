"""Bad configs exit 2 with "FILE:LINE: FIELD: what" on stderr, both under
--check and on a plain start; a good config passes --check."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Manager

# Line numbers below refer to this text (line 1 is "manager:").
BASE = """\
manager:
  name: NAME
  region_mb: 64
  mbufs: 4095
  stats_interval_ms: 0
  nf_core: 1
ports:
  - name: in
    devargs: "net_pcap0,rx_pcap=IN_PCAP"
  - name: out
    devargs: "net_pcap1,tx_pcap=OUT_PCAP"
services:
  - name: s1
    exec: squall-nf-sig
    mode: sleep
    instances: 1
chains:
  - name: c
    services: [s1]
rules:
  - {in_port: in, dst_mac: "02:00:00:00:00:01", chain: c, out_port: out}
"""


@dataclass(frozen=True)
class Case:
    id: str
    line: int  # the line replaced
    text: str  # its new text
    field: str  # regex the FIELD part must match somewhere
    lines: tuple[int, ...] = ()  # lines the error may name (default: line)
    check_finds_it: bool = True  # False: only found when DPDK probes the port


CASES = [
    Case("unknown-key", 16, "    colour: blue", r"colour"),
    Case("unknown-manager-key", 5, "  stats_interval: 0", r"stats_interval(?!_ms)"),
    Case("wrong-type-int", 16, "    instances: many", r"instances"),
    Case("wrong-type-manager", 4, "  mbufs: [1, 2]", r"mbufs"),
    Case("attach-user-unknown", 5, "  attach_users: [no-such-user-x]", r"attach_users\[0\]"),
    Case("attach-users-not-a-list", 5, "  attach_users: 7", r"attach_users"),
    Case("cpu-weight-too-big", 16, "    cpu_weight: 10001", r"cpu_weight"),
    Case("cpu-max-pct-negative", 16, "    cpu_max_pct: -5", r"cpu_max_pct"),
    Case("pids-max-word", 16, "    pids_max: lots", r"pids_max"),
    Case("half-open-zero", 5, "  flow_half_open_timeout_ms: 0", r"flow_half_open_timeout_ms"),
    # 99 is the control threads' (SCHED_FIFO 99): no NF may rank with them
    Case("nf-priority-99", 16, "    priority: 99", r"priority"),
    Case("control-realtime-word", 5, "  control_realtime: maybe", r"control_realtime"),
    Case(
        "half-open-too-long",
        5,
        "  flow_half_open_timeout_ms: 3600001",
        r"flow_half_open_timeout_ms",
    ),
    Case("wrong-mode", 15, "    mode: sometimes", r"mode"),
    Case("scale-max-below-min", 16, "    scale: {min: 3, max: 2}", r"scale\.max"),
    Case("scale-low-above-high", 16, "    scale: {high_wm: 20, low_wm: 50}", r"low_wm"),
    Case("scale-queue-above-ring", 16, "    scale: {queue_high_pkts: 5000}", r"queue_high_pkts"),
    Case("scale-drop-memory-range", 16, "    scale: {drop_memory_ms: 3600001}", r"drop_memory_ms"),
    Case("scale-unknown-key", 16, "    scale: {maximum: 4}", r"maximum"),
    Case("chain-missing-service", 19, "    services: [s1, nope]", r"services"),
    Case("missing-nf-exec", 14, "    exec: squall-nf-doesnotexist", r"exec"),
    Case(
        "rule-unknown-chain",
        21,
        '  - {in_port: in, dst_mac: "02:00:00:00:00:01", chain: nochain, out_port: out}',
        r"chain",
    ),
    Case(
        "rule-bad-mac",
        21,
        '  - {in_port: in, dst_mac: "02:00:zz", chain: c, out_port: out}',
        r"dst_mac",
    ),
    Case(
        "port-devargs-rejected",
        9,
        '    devargs: "net_bogus0"',
        r"ports|devargs",
        lines=(8, 9),
        check_finds_it=False,
    ),
    # A NIC by its PCI address, and no such device on the bus.
    Case(
        "port-pci-absent",
        9,
        '    devargs: "0000:00:1f.7"',
        r"ports|devargs",
        lines=(8, 9),
        check_finds_it=False,
    ),
]


def _config(mgr: Manager, tmp_path: Path, case: Case | None) -> str:
    text = (
        BASE.replace("NAME", mgr.name)
        .replace("IN_PCAP", str(tmp_path / "in.pcap"))
        .replace("OUT_PCAP", str(tmp_path / "out.pcap"))
    )
    (tmp_path / "in.pcap").write_bytes(b"")  # never read: every case fails before rx
    if case is None:
        return text
    lines = text.splitlines()
    lines[case.line - 1] = case.text
    return "\n".join(lines) + "\n"


def _error_pattern(path: Path, case: Case) -> re.Pattern[str]:
    files = f"(?:{re.escape(str(path))}|{re.escape(path.name)})"
    lines = "|".join(str(n) for n in (case.lines or (case.line,)))
    return re.compile(rf"{files}:(?:{lines}): [^:\s]*(?:{case.field})[^:\s]*: \S")


def test_good_config_passes_check(mgr: Manager, tmp_path: Path) -> None:
    r = mgr.run_to_exit(_config(mgr, tmp_path, None), "--check")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("case", [c for c in CASES if c.check_finds_it], ids=lambda c: c.id)
def test_check_rejects(mgr: Manager, tmp_path: Path, case: Case) -> None:
    r = mgr.run_to_exit(_config(mgr, tmp_path, case), "--check")
    assert r.returncode == 2, f"exit {r.returncode}, stderr:\n{r.stderr}"
    pattern = _error_pattern(mgr.config_path, case)
    assert pattern.search(r.stderr), f"no match for {pattern.pattern!r} in:\n{r.stderr}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_start_rejects(mgr: Manager, tmp_path: Path, case: Case) -> None:
    r = mgr.run_to_exit(_config(mgr, tmp_path, case), "-q")
    assert r.returncode == 2, f"exit {r.returncode}, stderr:\n{r.stderr}"
    pattern = _error_pattern(mgr.config_path, case)
    assert pattern.search(r.stderr), f"no match for {pattern.pattern!r} in:\n{r.stderr}"


def test_missing_config_file(mgr: Manager) -> None:
    mgr.config_path = mgr.workdir / "does-not-exist.yaml"
    r = mgr.run_to_exit(None, "--check")
    assert r.returncode == 2, f"exit {r.returncode}, stderr:\n{r.stderr}"
    assert "does-not-exist.yaml" in r.stderr, r.stderr


def test_unknown_option_is_usage_error(mgr: Manager, tmp_path: Path) -> None:
    r = mgr.run_to_exit(_config(mgr, tmp_path, None), "--no-such-option")
    assert r.returncode == 2, f"exit {r.returncode}, stderr:\n{r.stderr}"


def test_help(mgr: Manager, tmp_path: Path) -> None:
    r = mgr.run_to_exit(_config(mgr, tmp_path, None), "--help")
    assert r.returncode == 0, r.stderr
    for opt in ("--nf-path", "--exit-stats", "--run-s", "--idle-exit-ms", "--check", "-q"):
        assert opt in r.stdout + r.stderr, opt


def _pci_device_not_a_nic() -> str | None:
    """A PCI device of this machine that is no network device (so no DPDK
    driver takes it): the balloon or disk of a VM."""
    root = Path("/sys/bus/pci/devices")
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        cls = (dev / "class").read_text().strip()
        if not cls.startswith("0x02") and not cls.startswith("0x06"):  # not a NIC or bridge
            return dev.name
    return None


def test_a_pci_port_is_looked_for_on_the_bus(mgr: Manager, tmp_path: Path) -> None:
    """A port given by its PCI address makes EAL scan the PCI bus (it runs
    with --no-pci otherwise), allowed to take that device only. An existing
    device that no DPDK driver takes is then found but not attached, which
    is an error naming the field; with the bus off it would be "No such
    device". Nothing here has a NIC to take the good path."""
    addr = _pci_device_not_a_nic()
    if addr is None:
        pytest.skip("no PCI device on this machine")
    lines = _config(mgr, tmp_path, None).splitlines()
    lines[8] = f'    devargs: "{addr}"'
    r = mgr.run_to_exit("\n".join(lines) + "\n", "-q")
    assert r.returncode == 2, f"exit {r.returncode}, stderr:\n{r.stderr}"
    assert re.search(rf"ports\[0\]\.devargs: DPDK rejected \"{addr}\"", r.stderr), r.stderr
    assert "No such device" not in r.stderr, r.stderr


def test_generator_frames_must_fit_the_mbufs(mgr: Manager, tmp_path: Path) -> None:
    """With 512-byte mbufs (384 after the headroom), a 1518-byte generator
    frame would be written past its buffer: the config is refused."""
    lines = _config(mgr, tmp_path, None).splitlines()
    lines.insert(5, "  mbuf_data_room: 512")  # after stats_interval_ms (line 5)
    text = "\n".join(lines) + "\ngenerator: {port: in, rate_pps: 10, sizes: [64, 1518]}\n"
    r = mgr.run_to_exit(text, "--check")
    assert r.returncode == 2, f"exit {r.returncode}, stderr:\n{r.stderr}"
    assert re.search(r":\d+: generator\.sizes\[1\]: .*from 64 to 388", r.stderr), r.stderr
    r = mgr.run_to_exit(text.replace("1518", "388"), "--check")
    assert r.returncode == 0, r.stderr
