"""Run-time changes (squallctl apply / get config, mgr/control.c): a config applied
to a running manager changes what differs and nothing else, atomically; a bad one
changes nothing and is refused with the message squall-mgr gives at start."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import MGR_BIN, NF_DIR, REPO, Manager
from squall import control
from squall.bench.config import to_yaml
from test_config_errors import CASES, Case, _config, _error_pattern

APPLIES = 1000
RATE_PPS = 20000


def squallctl(mgr: Manager, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.run(
        [sys.executable, "-m", "squall.ctl", "--name", mgr.name, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def check_config(path: Path) -> subprocess.CompletedProcess[str]:
    """squall-mgr --check on a file, as at start."""
    cmd = [str(MGR_BIN), "--nf-path", str(NF_DIR), "--check", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def get_config(mgr: Manager) -> str:
    r = squallctl(mgr, "get", "config")
    assert r.returncode == 0, r.stderr
    return r.stdout


def two_chains(mgr: Manager, flip_hops: list[str]) -> dict[str, Any]:
    """steady: gen a -> sig1 -> sig2 -> out a, never changed. flip: gen b -> the
    hops given -> out b, the chain each apply changes."""
    cfg = mgr.config(
        ports=[
            {"name": "a", "devargs": "net_null0,no-rx=1"},
            {"name": "b", "devargs": "net_null1,no-rx=1"},
            {"name": "outa", "devargs": "net_null2,no-rx=1"},
            {"name": "outb", "devargs": "net_null3,no-rx=1"},
        ],
        services=[
            {"name": "sig1", "exec": "squall-nf-sig", "ring_slots": 4096},
            {"name": "sig2", "exec": "squall-nf-sig", "ring_slots": 4096},
            {"name": "f1", "exec": "squall-nf-fwd", "ring_slots": 4096},
            {"name": "f2", "exec": "squall-nf-fwd", "ring_slots": 4096},
        ],
        chains=[
            {"name": "steady", "services": ["sig1", "sig2"]},
            {"name": "flip", "services": flip_hops},
        ],
        rules=[
            {"in_port": "a", "chain": "steady", "out_port": "outa"},
            {"in_port": "b", "chain": "flip", "out_port": "outb"},
        ],
    )
    cfg["generator"] = [
        {"port": "a", "rate_pps": 0, "sizes": [64, 570, 1518], "flows": 64},
        {"port": "b", "rate_pps": 0, "sizes": [64], "flows": 64},
    ]
    return cfg


def services_config(mgr: Manager, flip_hops: list[str], f1: int, x: bool) -> dict[str, Any]:
    """two_chains, with f1 resizable up to 4 instances and service x (a sig
    NF) present or not."""
    cfg = two_chains(mgr, flip_hops)
    for svc in cfg["services"]:
        if svc["name"] == "f1":
            svc.update(instances=f1, max_instances=4)
    if x:
        cfg["services"].append({"name": "x", "exec": "squall-nf-sig", "ring_slots": 4096})
    return cfg


def counters(mgr: Manager, service: str) -> dict[str, int]:
    nfs = [nf for nf in mgr.nfs().values() if nf["service"] == service]
    assert len(nfs) == 1, nfs
    return {k: int(v) for k, v in nfs[0]["counters"].items()}


def test_applies_under_traffic_leave_the_unchanged_chain_alone(
    mgr: Manager, tmp_path: Path
) -> None:
    first = two_chains(mgr, ["f1"])
    mgr.start(first)
    files = [tmp_path / "one.yaml", tmp_path / "two.yaml"]
    files[0].write_text(to_yaml(first))
    files[1].write_text(to_yaml(two_chains(mgr, ["f1", "f2"])))
    for port in ("a", "b"):
        mgr.query(f"/squall/gen_rate,{RATE_PPS},{port}")
    tm = mgr._tm
    assert tm is not None
    applied = 0
    for i in range(APPLIES):
        res = control.apply_file(tm, files[(i + 1) % 2])
        assert res.changes > 0 and res.applied, res
        applied += 1
    for port in ("a", "b"):
        assert mgr.query(f"/squall/gen_rate,0,{port}")["rate_pps"] == 0
    sent_a = int(mgr.query("/squall/gen,a")["sent_pkts"])
    sent_b = int(mgr.query("/squall/gen,b")["sent_pkts"])
    assert sent_a > RATE_PPS // 10 and sent_b > RATE_PPS // 10, "traffic ran during the applies"
    mgr.wait_accounted(sent_a + sent_b)
    assert mgr.query("/squall/control")["applies"] == APPLIES

    # The unchanged chain: every packet out, unchanged (sig2 saw what sig1 saw).
    ports = mgr.ports()
    assert ports["outa"]["tx_pkts"] == sent_a
    s1, s2 = counters(mgr, "sig1"), counters(mgr, "sig2")
    assert s1["sig_pkts"] == s2["sig_pkts"] == sent_a
    assert s1["sig_sum"] == s2["sig_sum"]
    assert s2["sig_mismatch"] == 0 and s2["sig_revisit"] == 0
    chains = mgr.chains()
    assert chains["steady"]["rx_pkts"] == chains["steady"]["tx_pkts"] == sent_a

    # The changed chain: out, or dropped under the cause named for it.
    st = mgr.stats()
    drops = {k: v for k, v in st["drops"].items() if v}
    assert set(drops) <= {"config_changed"}, drops
    assert ports["outb"]["tx_pkts"] + drops.get("config_changed", 0) == sent_b
    mgr.finish()


def test_services_added_resized_and_removed_under_traffic(mgr: Manager, tmp_path: Path) -> None:
    mgr.start(services_config(mgr, ["f1"], 1, False))
    for port in ("a", "b"):
        mgr.query(f"/squall/gen_rate,{RATE_PPS},{port}")
    tm = mgr._tm
    assert tm is not None
    steps = [
        ("add x, in flip", services_config(mgr, ["f1", "x"], 1, True)),
        ("f1 to 3", services_config(mgr, ["f1", "x"], 3, True)),
        ("f1 to 1", services_config(mgr, ["f1", "x"], 1, True)),
        ("remove x", services_config(mgr, ["f1"], 1, False)),
    ]
    seen: dict[str, dict[str, Any]] = {}
    for i, (what, cfg) in enumerate(steps):
        path = tmp_path / f"step{i}.yaml"
        path.write_text(to_yaml(cfg))
        res = control.apply_file(tm, path)
        assert res.applied, (what, res)
        before = {k: int(v["rx_pkts"]) for k, v in mgr.nfs().items()}
        # each NF that should take packets now does
        in_chains = {h for c in cfg["chains"] for h in c["services"]}
        live = [
            k
            for k, v in mgr.nfs().items()
            if v["service"] in in_chains and v["state"] in ("asleep", "awake", "waking")
        ]
        mgr.wait_for(
            lambda b=before, lv=live: all(  # type: ignore[misc]
                int(mgr.nfs()[k]["rx_pkts"]) > b[k] for k in lv
            ),
            10,
            f"every live NF gets packets after {what!r}",
        )
        seen[what] = mgr.nfs()
    # x ran while it was there, in flip's path
    assert int(seen["add x, in flip"]["x#0"]["counters"]["sig_pkts"]) > 0
    # f1 had three instances, each took a share (rss over 64 flows)
    assert {k for k, v in seen["f1 to 3"].items() if v["service"] == "f1" and v["pid"] > 0} == {
        "f1#0",
        "f1#1",
        "f1#2",
    }
    # and then one again; x is gone, its process too
    final = mgr.nfs()
    assert [k for k, v in final.items() if v["service"] == "f1" and v["pid"] > 0] == ["f1#0"]
    x_pid = int(seen["remove x"].get("x#0", {}).get("pid", 0))
    assert x_pid == 0, "x still runs after its removal"
    assert "name: x" not in get_config(mgr)
    for port in ("a", "b"):
        assert mgr.query(f"/squall/gen_rate,0,{port}")["rate_pps"] == 0
    sent_a = int(mgr.query("/squall/gen,a")["sent_pkts"])
    sent_b = int(mgr.query("/squall/gen,b")["sent_pkts"])
    mgr.wait_accounted(sent_a + sent_b)
    ports = mgr.ports()
    assert ports["outa"]["tx_pkts"] == sent_a, "the chain no change touched lost packets"
    st = mgr.stats()
    drops = {k: v for k, v in st["drops"].items() if v}
    assert set(drops) <= {"config_changed"}, drops
    assert ports["outb"]["tx_pkts"] + drops.get("config_changed", 0) == sent_b
    # what the manager did to the NFs it stopped is not taken for an NF's doing
    assert not any(st["region_corrupt"].values()), st["region_corrupt"]
    mgr.finish()


def test_get_config_round_trips_through_apply(mgr: Manager, tmp_path: Path) -> None:
    mgr.start(two_chains(mgr, ["f1", "f2"]))
    text = get_config(mgr)
    path = tmp_path / "running.yaml"
    path.write_text(text)
    r = squallctl(mgr, "apply", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no change"
    assert get_config(mgr) == text
    assert mgr.query("/squall/control")["applies"] == 0
    # The same text starts a manager of its own: it is a whole config.
    r2 = check_config(path)
    assert r2.returncode == 0, r2.stderr
    # Keys that size the region are refused, each by name, nothing changed.
    for key, value in (("max_nfs", 4096), ("region_mb", 512)):
        cfg = two_chains(mgr, ["f1", "f2"])
        cfg["manager"][key] = value
        path.write_text(to_yaml(cfg))
        r = squallctl(mgr, "apply", str(path))
        assert r.returncode == 2, (key, r.stdout, r.stderr)
        assert f"manager.{key}: cannot change while running" in r.stderr, r.stderr
    assert get_config(mgr) == text
    mgr.finish()


def test_single_edits(mgr: Manager) -> None:
    mgr.start(two_chains(mgr, ["f1"]))
    ok = [
        ("chain", "add", "extra", "f2", "f1"),
        ("rule", "add", "--chain", "extra", "--out-port", "outb", "--in-port", "outa"),
        ("rule", "move", "2", "0"),
        ("service", "set", "f1", "wake.policy=fixed", "wake.thresh_pkts=8", "burst_max=16"),
    ]
    for edit in ok:
        r = squallctl(mgr, *edit)
        assert r.returncode == 0 and r.stdout.startswith("applied"), (edit, r.stdout, r.stderr)
    text = get_config(mgr)
    assert "name: extra" in text and "services: [f2, f1]" in text, text
    assert "policy: fixed" in text and "thresh_pkts: 8" in text, text
    assert text.index("in_port: outa") < text.index("in_port: a,"), text
    nf = next(n for n in mgr.nfs().values() if n["service"] == "f1")
    assert nf["wake_policy"] == "fixed", nf
    # A chain a rule uses cannot go; after the rule, it can.
    r = squallctl(mgr, "chain", "remove", "extra")
    assert r.returncode == 2 and 'unknown chain "extra"' in r.stderr, r.stderr
    assert squallctl(mgr, "rule", "remove", "0").returncode == 0
    assert squallctl(mgr, "chain", "remove", "extra").returncode == 0
    assert "extra" not in get_config(mgr)
    # The same edits are the manager's own commands (dpdk-telemetry.py works).
    assert mgr.query("/squall/rule_move,0,1")["applied"] == 1
    assert mgr.query("/squall/rule_move,1,0")["applied"] == 1
    assert "expected /squall/rule_move,FROM,TO" in str(mgr._tm.query_raw("/squall/rule_move,x"))
    # What cannot change while running is refused, naming the field.
    r = squallctl(mgr, "service", "set", "f1", "mode=poll")
    assert r.returncode == 2 and ": mode: " in r.stderr and "running" in r.stderr, r.stderr
    r = squallctl(mgr, "service", "set", "f1", "max_instances=8")
    assert r.returncode == 2 and "max_instances" in r.stderr and "running" in r.stderr, r.stderr
    # instances only up to the ids reserved at start
    r = squallctl(mgr, "service", "set", "f1", "instances=2")
    assert r.returncode == 2 and "max_instances" in r.stderr, r.stderr
    mgr.finish()


@pytest.fixture
def running_base(mgr: Manager, tmp_path: Path) -> Manager:
    text = _config(mgr, tmp_path, None)
    # a pcap of no packets (the errors tests never start the manager on it)
    (tmp_path / "in.pcap").write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    mgr.start(text, want_nfs=1)
    return mgr


def test_bad_apply_is_refused_as_at_start_and_changes_nothing(
    running_base: Manager, tmp_path: Path
) -> None:
    mgr = running_base
    before = get_config(mgr)
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    for case in CASES:
        path = bad_dir / f"{case.id}.yaml"
        path.write_text(_config(mgr, tmp_path, case))
        r = squallctl(mgr, "apply", str(path))
        assert r.returncode == 2, (case.id, r.returncode, r.stdout, r.stderr)
        assert _error_pattern(path, case).search(r.stderr), (case.id, r.stderr)
        if case.check_finds_it:
            assert _same_as_at_start(mgr, path, case, r.stderr)
    assert get_config(mgr) == before
    assert mgr.query("/squall/control")["applies"] == 0
    mgr.finish()


def _same_as_at_start(mgr: Manager, path: Path, case: Case, apply_stderr: str) -> bool:
    """squall-mgr --check on the same file prints the same message."""
    r = check_config(path)
    assert r.returncode == 2, (case.id, r.stderr)
    at_start = r.stderr.strip().removeprefix("squall-mgr: ")
    assert at_start in apply_stderr, (case.id, at_start, apply_stderr)
    return True


# What `squallctl apply` may import: a user applies with a process each time,
# on a host whose cores also move the packets (2 here), so its start is CPU
# taken from the data path. The tables, the exporter and its HTTP server are
# for other commands (with them an apply took ~300 ms of CPU here, ~140 ms
# without; live_apply's TCP part counts what the applies cost a chain).
HEAVY_FOR_APPLY = ("rich", "prometheus_client", "http.server", "squall.exporter")

LIGHT_APPLY = """import sys
from squall import ctl
rc = ctl.main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.startswith({heavy!r}))
print("RC", rc, "HEAVY", ",".join(heavy) or "none")
"""


def test_squallctl_apply_imports_nothing_it_does_not_use(mgr: Manager, tmp_path: Path) -> None:
    first = two_chains(mgr, ["f1"])
    mgr.start(first)
    before = {nf["service"]: nf["pid"] for nf in mgr.nfs().values()}
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(two_chains(mgr, ["f1", "f2"])))
    code = LIGHT_APPLY.format(heavy=HEAVY_FOR_APPLY)
    r = subprocess.run(
        [sys.executable, "-c", code, "--name", mgr.name, "apply", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
        check=False,
    )
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("RC 0 "), r.stdout + r.stderr
    assert last == "RC 0 HEAVY none", f"squallctl apply imported {last.split()[-1]}"
    assert mgr.query("/squall/control")["applies"] == 1
    # the unchanged chain's NFs are the same processes
    after = {nf["service"]: nf["pid"] for nf in mgr.nfs().values()}
    assert {s: after[s] for s in ("sig1", "sig2")} == {s: before[s] for s in ("sig1", "sig2")}
    mgr.finish()
