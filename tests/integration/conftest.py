"""Fixtures for the integration tests: run squall-mgr on a config, watch its telemetry.

Each test gets a Manager with a name of its own (the telemetry socket, the
region file and the EAL file prefix all derive from it), so tests never share
state. The teardown checks what every run must leave behind: nothing — no
manager process, no region file, no NF process.

Environment:
  SQUALL_BUILD_DIR        meson build directory (default: <repo>/build)
  SQUALL_TEST_EAL_ARGS    extra EAL arguments for every manager (after "--")
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from squall.api import by_name, nfs_page, normalize_nfs  # noqa: E402
from squall.bench.config import to_yaml  # noqa: E402
from squall.exit import Exit  # noqa: E402
from squall.telemetry import Telemetry, TelemetryError, socket_path  # noqa: E402

BUILD = Path(os.environ.get("SQUALL_BUILD_DIR", REPO / "build"))
MGR_BIN = BUILD / "mgr" / "squall-mgr"
NF_DIR = BUILD / "nfs"
NF_NAMES = ("fwd", "monitor", "sig", "cost", "drop", "noop")
# where a manager's files go: its region, its link, its attach socket
REGION_DIRS = (Path("/dev/hugepages"), Path("/dev/shm"), Path("/run/squall"))


def cgroup_dirs(name: str) -> list[Path]:
    """The cgroups a manager of that name made (mgr/cgroup.c: squall-NAME
    under its own cgroup of each hierarchy, which a test's manager shares
    with the test) that are there now."""
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        roots = (
            ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            if not ctrls
            else [f"/sys/fs/cgroup/{ctrls.removeprefix('name=')}"]
        )
        for root in roots:
            d = Path(root + path.rstrip("/")) / f"squall-{name}"
            if d.is_dir():
                found.append(d)
    return found


START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.05


def require_build() -> None:
    if not MGR_BIN.is_file():
        pytest.fail(
            f"{MGR_BIN} not found: build first (meson setup build && ninja -C build) "
            "or set SQUALL_BUILD_DIR",
            pytrace=False,
        )


# ------------------------------------------------------------------ processes


def _proc_state(pid: int) -> str | None:
    """One-letter state from /proc/PID/stat, or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def pid_is_alive(pid: int) -> bool:
    state = _proc_state(pid)
    return state is not None and state not in ("Z", "X")


def _read_proc(pid: int, what: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{what}").read_bytes()
    except OSError:
        return b""


def processes_mentioning(needle: str) -> list[int]:
    """Live processes whose command line or environment contains needle."""
    found = []
    me = os.getpid()
    token = needle.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        if token in _read_proc(pid, "cmdline") or token in _read_proc(pid, "environ"):
            if pid_is_alive(pid):
                found.append(pid)
    return found


def unique_name(test_name: str) -> str:
    """A manager name no other test (or concurrent run) uses; at most 31 chars."""
    slug = re.sub(r"[^a-z0-9]", "", test_name.lower().removeprefix("test_"))[:16]
    return f"t{secrets.token_hex(3)}{slug}"


# ------------------------------------------------------------------ the manager


class Manager:
    """One squall-mgr run, driven the way a test needs it."""

    def __init__(self, workdir: Path, name: str) -> None:
        self.workdir = workdir
        self.name = name
        self.config_path = workdir / "squall.yaml"
        self.exit_stats_path = workdir / "exit.json"
        self.stdout_path = workdir / "mgr.stdout"
        self.stderr_path = workdir / "mgr.stderr"
        self.proc: subprocess.Popen[Any] | None = None
        self.returncode: int | None = None
        self.exit_stats: dict[str, Any] | None = None
        self.nf_pids: set[int] = set()  # every NF pid telemetry ever showed
        self._tm: Telemetry | None = None

    # -- config ---------------------------------------------------------------

    def config(
        self,
        *,
        ports: Sequence[dict[str, Any]],
        services: Sequence[dict[str, Any]],
        chains: Sequence[dict[str, Any]],
        rules: Sequence[dict[str, Any]],
        **manager: Any,
    ) -> dict[str, Any]:
        """A config dict with this manager's name and the test defaults."""
        mgr = {"name": self.name, "region_mb": 64, "mbufs": 4095, "stats_interval_ms": 0}
        mgr["nf_core"] = 1
        mgr.update(manager)
        return {
            "manager": mgr,
            "ports": list(ports),
            "services": list(services),
            "chains": list(chains),
            "rules": list(rules),
        }

    def write_config(self, cfg: dict[str, Any] | str) -> Path:
        self.config_path.write_text(cfg if isinstance(cfg, str) else to_yaml(cfg))
        return self.config_path

    def command(self, *options: str) -> list[str]:
        cmd = [str(MGR_BIN), "--nf-path", str(NF_DIR), *options, str(self.config_path)]
        eal = shlex.split(os.environ.get("SQUALL_TEST_EAL_ARGS", ""))
        return cmd + (["--", *eal] if eal else [])

    # -- lifecycle ------------------------------------------------------------

    def start(
        self,
        cfg: dict[str, Any] | str,
        *options: str,
        want_nfs: int | None = None,
        tty: int | None = None,
    ) -> None:
        """Start the manager on cfg and wait (bounded) until telemetry shows every NF
        live. cfg given as text: pass the NF count as want_nfs. tty: a terminal's
        fd that becomes the manager's stdin and controlling terminal, as when an
        operator starts it in a shell."""
        require_build()
        if want_nfs is None:
            assert isinstance(cfg, dict), "give want_nfs with a config text"
            want_nfs = sum(int(s.get("instances", 1)) for s in cfg["services"])
        self.write_config(cfg)
        cmd = self.command("-q", "--exit-stats", str(self.exit_stats_path), *options)
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            if tty is None:
                self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            else:
                self.proc = subprocess.Popen(
                    cmd,
                    stdout=out,
                    stderr=err,
                    stdin=tty,
                    start_new_session=True,
                    preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
                )
        # (10,000 NFs start in ~10 s alone, past 30 s late in a CI run)
        timeout_s = START_TIMEOUT_S + 0.005 * want_nfs
        deadline = time.monotonic() + timeout_s
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                raise AssertionError(
                    f"squall-mgr exited with {rc} during start\n"
                    f"cmd: {shlex.join(cmd)}\n{self.log_tail()}"
                )
            try:
                if self._tm is None:
                    self._tm = Telemetry.connect(name=self.name)
                # Telemetry answers while the manager still starts ports and
                # NFs; it is ready when every configured NF is live.
                if self._tm.query("/squall/stats").get("nfs_live", 0) >= want_nfs:
                    return
            except TelemetryError:
                if self._tm is not None:
                    self._tm.close()
                    self._tm = None
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"manager not ready within {timeout_s:g} s: telemetry at "
                    f"{socket_path(self.name)} must show nfs_live >= {want_nfs}\n"
                    f"{self.snapshot()}"
                )
            time.sleep(POLL_INTERVAL_S)

    def run_to_exit(
        self, cfg: dict[str, Any] | str | None, *options: str, timeout_s: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the manager expecting it to exit by itself (--check, bad config).
        cfg None: use config_path as it is (which may not exist)."""
        require_build()
        if cfg is not None:
            self.write_config(cfg)
        cmd = self.command(*options)
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.proc = proc
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(
                f"squall-mgr was still running after {timeout_s} s: {shlex.join(cmd)}"
            ) from None
        self.returncode = proc.returncode
        self.stderr_path.write_text(err)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, wait (bounded), load the exit stats; return the exit code."""
        assert self.proc is not None, "manager never started"
        if self._tm is not None:
            self._tm.close()
            self._tm = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.returncode = self.proc.returncode
                raise AssertionError(
                    f"squall-mgr did not stop within {timeout_s} s of SIGTERM (killed)\n"
                    f"{self.log_tail()}"
                ) from None
        self.returncode = self.proc.returncode
        if self.exit_stats_path.exists():
            ex = json.loads(self.exit_stats_path.read_text())
            # Keyed like the live queries: by real name, NFs "<service>#<instance>".
            ex["nfs"] = normalize_nfs(ex.get("nfs", {}))
            ex["ports"] = by_name(ex.get("ports", {}))
            ex["chains"] = by_name(ex.get("chains", {}))
            self.exit_stats = ex
        return self.returncode

    # -- telemetry ------------------------------------------------------------

    def query(self, cmd: str) -> dict[str, Any]:
        if not self.is_running():
            raise AssertionError(
                f"squall-mgr is not running (exit {self.returncode})\n{self.log_tail()}"
            )
        if self._tm is None:
            self._tm = Telemetry.connect(name=self.name)
        try:
            reply = self._tm.query(cmd)
        except TelemetryError:
            # One reconnect: the manager may have dropped an idle connection.
            self._tm.close()
            self._tm = Telemetry.connect(name=self.name)
            reply = self._tm.query(cmd)
        return reply

    def query_error(self, cmd: str) -> str:
        """The error a command answers (fails if it answers none)."""
        self.query("/squall/stats")  # connected, and the manager alive
        assert self._tm is not None
        reply = self._tm.query_raw(cmd)
        assert isinstance(reply, dict) and set(reply) == {"error"}, f"{cmd}: {reply}"
        return str(reply["error"])

    def stats(self) -> dict[str, Any]:
        return self.query("/squall/stats")

    def ports(self) -> dict[str, Any]:
        """Ports by their configured name."""
        return by_name(self.query("/squall/ports"))

    def nfs(self) -> dict[str, Any]:
        """Every NF (all pages), its NF-defined counters under "counters"."""
        entries, nxt = nfs_page(self.query("/squall/nfs"))
        while nxt is not None:
            page, nxt = nfs_page(self.query(f"/squall/nfs,{nxt}"))
            entries.update(page)
        self.nf_pids.update(int(nf["pid"]) for nf in entries.values() if nf.get("pid", 0) > 0)
        return entries

    def chains(self) -> dict[str, Any]:
        """Chains by their configured name."""
        return by_name(self.query("/squall/chains"))

    def wait_for(self, pred: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll pred until it holds; fail naming `what` after timeout_s or if the manager dies."""
        deadline = time.monotonic() + timeout_s
        while True:
            if pred():
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout_s} s waiting for: {what}\n{self.snapshot()}"
                )
            time.sleep(POLL_INTERVAL_S)

    def gen_send(self, pkts: int, timeout_s: float = 60.0) -> int:
        """Let the generator send at least pkts (counted from its start), then
        pause it; return how many it sent in all."""
        self.wait_for(
            lambda: self.query("/squall/gen")["sent_pkts"] >= pkts, timeout_s, f"{pkts} sent"
        )
        assert self.query("/squall/gen_rate,0")["rate_pps"] == 0
        return int(self.query("/squall/gen")["sent_pkts"])

    def wait_accounted(self, sent: int, timeout_s: float = 30.0) -> None:
        """Wait until each of sent packets went out or was counted as dropped."""

        def accounted() -> bool:
            st = self.stats()
            return st["tx_pkts"] + st["drop_pkts"] == sent

        self.wait_for(accounted, timeout_s, f"all {sent} packets out or counted as dropped")

    def wait_port_tx(self, port: str, pkts: int, timeout_s: float = 30.0) -> None:
        self.wait_for(
            lambda: self.ports()[port]["tx_pkts"] >= pkts,
            timeout_s,
            f"port {port} tx_pkts >= {pkts}",
        )

    def wait_mbufs_home(self, timeout_s: float = 10.0) -> None:
        self.wait_for(
            lambda: self.stats()["mbufs_in_use"] == 0, timeout_s, "stats mbufs_in_use == 0"
        )

    def finish(self, live_mbufs: bool = True, fill_ring_kept: bool = False) -> dict[str, Any]:
        """The end of every test: every mbuf home (live and at exit), a clean stop,
        and counters that add up. Returns the exit stats. fill_ring_kept: an
        af_xdp port, which in DPDK 22.11 keeps its fill ring's mbufs at close
        (the manager allows what the ports took at start, no more)."""
        if live_mbufs:
            self.wait_mbufs_home()
        rc = self.stop()
        assert rc == Exit.OK, f"squall-mgr exit code {rc}\n{self.log_tail()}"
        assert self.exit_stats is not None, f"no exit stats at {self.exit_stats_path}"
        st = self.exit_stats["stats"]
        assert st["mbufs_in_use"] == (st["mbufs_port_reserved"] if fill_ring_kept else 0), st
        # each mbuf home once (mgr/poolaudit.h): a double free hides a lost one
        assert st["mbufs_double_freed"] == 0, st
        assert st["rx_pkts"] == st["tx_pkts"] + st["drop_pkts"], st
        assert st["drop_pkts"] == sum(st["drops"].values()), st
        return self.exit_stats

    def snapshot(self) -> str:
        """Stats and ports for a failure message, whatever state the manager is in."""
        try:
            return (
                f"stats: {self.stats()}\nports: {self.ports()}\nnfs: {self.nfs()}\n"
                f"{self.log_tail()}"
            )
        except (AssertionError, TelemetryError) as e:
            return f"(no telemetry: {e})\n{self.log_tail()}"

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no manager stderr)"
        return "manager stderr (tail):\n" + "\n".join(text.splitlines()[-lines:])

    # -- teardown -------------------------------------------------------------

    def live_nf_pids(self) -> set[int]:
        """NF processes of this manager still alive: pids telemetry showed (if the
        pid still runs an NF, not a newcomer that reused it) and any process whose
        command line or environment names this manager's region."""
        pids = {
            p for p in self.nf_pids if pid_is_alive(p) and b"squall-nf" in _read_proc(p, "cmdline")
        }
        pids |= set(processes_mentioning(f"squall-{self.name}.region"))
        if self.proc is not None:
            pids.discard(self.proc.pid)
        return pids

    def leftovers(self) -> list[str]:
        """What a finished run left behind; empty when it cleaned up after itself."""
        problems = []
        if self.is_running():
            problems.append("squall-mgr process still running")
        for d in REGION_DIRS:
            for p in sorted(d.glob(f"squall-{self.name}*")):
                problems.append(f"file left behind: {p}")
        for d in cgroup_dirs(self.name):
            problems.append(f"cgroup left behind: {d}")
        for pid in sorted(self.live_nf_pids()):
            cmdline = _read_proc(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace")
            problems.append(f"NF process left behind: {pid} {cmdline}")
        return problems

    def cleanup(self) -> list[str]:
        """Stop whatever still runs, check for leftovers, then remove them."""
        if self._tm is not None:
            self._tm.close()
            self._tm = None
        if self.is_running():
            try:
                self.stop()
            except AssertionError:
                pass
        # NFs exit on the manager's stop request; give a dying one a moment.
        deadline = time.monotonic() + 2.0
        problems = self.leftovers()
        while problems and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
            problems = self.leftovers()
        for pid in self.live_nf_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for d in REGION_DIRS:
            for p in d.glob(f"squall-{self.name}*"):
                p.unlink(missing_ok=True)
        for d in cgroup_dirs(self.name):
            for sub in d.iterdir():
                if sub.is_dir():
                    sub.rmdir()
            d.rmdir()
        # EAL leaves its runtime directory (config, telemetry socket) by design;
        # not a leak worth failing on, but a test run should not pile them up.
        if not self.is_running():
            shutil.rmtree(socket_path(self.name).parent, ignore_errors=True)
        return problems


def nf_can_reach(path: Path) -> None:
    """NFs run as an unprivileged user (manager.nf_user): let it pass through
    pytest's private temporary directories (0700) to the files a test writes
    for its NFs (rules, keys), without listing them."""
    top = Path(tempfile.gettempdir())
    for d in [path, *path.parents]:
        if d == top or top not in d.parents:
            break
        d.chmod(d.stat().st_mode | 0o011)


@pytest.fixture
def mgr2(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Manager]:
    """A second Manager beside mgr, in a folder of its own."""
    workdir = tmp_path / "second"
    workdir.mkdir()
    nf_can_reach(workdir)
    m = Manager(workdir, unique_name(request.node.name + "-2"))
    yield m
    problems = m.cleanup()
    if m.stderr_path.exists():
        print(m.log_tail(60))
    assert not problems, "after the test (second manager):\n  " + "\n  ".join(problems)


@pytest.fixture
def mgr(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Manager]:
    """A Manager with a unique name; teardown asserts nothing is left behind."""
    nf_can_reach(tmp_path)
    m = Manager(tmp_path, unique_name(request.node.name))
    yield m
    problems = m.cleanup()
    if m.stderr_path.exists():
        print(m.log_tail(60))
    assert not problems, "after the test:\n  " + "\n  ".join(problems)
