"""One squall-mgr run for an experiment: start on a config, query telemetry,
stop, and leave nothing behind (no process, no region file, no NF)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from squall.api import by_name, nfs_page
from squall.bench.config import to_yaml
from squall.bench.paths import MGR_BIN, NF_DIR
from squall.telemetry import Telemetry, TelemetryError, socket_path

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
SPAWN_RETRY_S = 30.0
POLL_S = 0.02
REGION_DIRS = (Path("/dev/hugepages"), Path("/dev/shm"))


class BenchError(RuntimeError):
    """An experiment cannot go on; the message says why."""


class Manager:
    """squall-mgr on one config, with a telemetry connection.

    >>> with Manager(workdir, cfg) as m:
    ...     m.query("/squall/stats")
    """

    def __init__(
        self,
        workdir: Path,
        cfg: dict[str, Any],
        *options: str,
        mgr_bin: Path = MGR_BIN,
        want_nfs: int | None = None,
    ) -> None:
        if not mgr_bin.is_file():
            raise BenchError(f"{mgr_bin} not found: run `make build`")
        self.name = str(cfg["manager"]["name"])
        self.cfg = cfg
        self.workdir = workdir
        self.config_path = workdir / f"{self.name}.yaml"
        self.exit_stats_path = workdir / f"{self.name}.exit.json"
        self.log_path = workdir / f"{self.name}.log"
        self.config_text = to_yaml(cfg)
        self.config_path.write_text(self.config_text)
        # Another build's manager starts that build's NFs (its region ABI),
        # when that build made them (guard_cost's builds only the manager).
        nf_dir = mgr_bin.parent.parent / "nfs"
        if mgr_bin == MGR_BIN or not any(p.is_file() for p in nf_dir.glob("squall-nf-*")):
            nf_dir = NF_DIR
        self.cmd = [
            str(mgr_bin),
            "--nf-path",
            str(nf_dir),
            "-q",
            "--exit-stats",
            str(self.exit_stats_path),
            *options,
            str(self.config_path),
        ]
        # (fewer when an NF may end before the start is seen: a hostile one)
        self.want_nfs = nfs_at_start(cfg) if want_nfs is None else want_nfs
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.exit_stats: dict[str, Any] | None = None
        self._tm: Telemetry | None = None

    @property
    def command(self) -> str:
        return shlex.join(self.cmd)

    def start(self) -> Manager:
        """Start and wait (bounded) until every NF is live."""
        if self.proc is not None:
            raise BenchError(f"squall-mgr {self.name} already started")
        self.proc = self._spawn()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.returncode = rc
                self.cleanup()
                raise BenchError(
                    f"squall-mgr exited {rc} during start: {self.command}\n{self.log_tail()}"
                )
            try:
                if self._tm is None:
                    self._tm = Telemetry.connect(name=self.name)
                if self._tm.query("/squall/stats").get("nfs_live", 0) >= self.want_nfs:
                    return self
            except TelemetryError:
                if self._tm is not None:
                    self._tm.close()
                    self._tm = None
            if time.monotonic() > deadline:
                self.cleanup()
                raise BenchError(
                    f"squall-mgr not ready in {START_TIMEOUT_S:g} s ({self.want_nfs} NFs): "
                    f"{self.command}\n{self.log_tail()}"
                )
            time.sleep(POLL_S)

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Popen, waiting out a rebuild (ninja replacing the binary: EACCES,
        ETXTBSY or a moment without it) for at most SPAWN_RETRY_S."""
        deadline = time.monotonic() + SPAWN_RETRY_S
        while True:
            try:
                with self.log_path.open("wb") as log:
                    return subprocess.Popen(
                        self.cmd, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL
                    )
            except OSError as e:
                if time.monotonic() > deadline:
                    raise BenchError(f"cannot start {self.cmd[0]}: {e}") from e
                time.sleep(0.5)

    def query(self, cmd: str) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            raise BenchError(
                f"squall-mgr is not running (exit {self.returncode}): {self.log_tail()}"
            )
        if self._tm is None:
            self._tm = Telemetry.connect(name=self.name)
        try:
            return self._tm.query(cmd)
        except TelemetryError:
            self._tm.close()
            self._tm = Telemetry.connect(name=self.name)
            return self._tm.query(cmd)

    def stats(self) -> dict[str, Any]:
        return self.query("/squall/stats")

    def ports(self) -> dict[str, Any]:
        return by_name(self.query("/squall/ports"))

    def chains(self) -> dict[str, Any]:
        return by_name(self.query("/squall/chains"))

    def nfs(self) -> dict[str, Any]:
        entries, nxt = nfs_page(self.query("/squall/nfs"))
        seen: set[int] = set()
        while nxt is not None and nxt not in seen:
            seen.add(nxt)
            page, nxt = nfs_page(self.query(f"/squall/nfs,{nxt}"))
            entries.update(page)
        return entries

    def gen(self) -> dict[str, Any]:
        return self.query("/squall/gen")

    def set_rate(self, pps: int | str) -> None:
        """pps packets per second, 0 pauses, "max" unpaced."""
        self.query(f"/squall/gen_rate,{pps}")

    def wait_idle(self, timeout_s: float = 5.0) -> bool:
        """Wait (bounded) until no mbuf is in flight; False if some still are."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if int(self.stats().get("mbufs_in_use", 0)) == 0:
                return True
            time.sleep(POLL_S)
        return False

    def stop(self) -> int:
        """SIGTERM, wait (bounded, then SIGKILL); load the exit stats."""
        if self._tm is not None:
            self._tm.close()
            self._tm = None
        if self.proc is None:
            return -1
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        if self.exit_stats_path.exists():
            try:
                self.exit_stats = json.loads(self.exit_stats_path.read_text())
            except json.JSONDecodeError:
                self.exit_stats = None
        return self.returncode

    def cleanup(self) -> None:
        """Stop, then remove whatever a killed manager may have left."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        if self._tm is not None:
            self._tm.close()
            self._tm = None
        region = f"squall-{self.name}.region"
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and _nf_pids(region):
            time.sleep(POLL_S)
        for pid in _nf_pids(region):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for d in REGION_DIRS:
            for p in d.glob(f"squall-{self.name}*"):
                p.unlink(missing_ok=True)
        shutil.rmtree(socket_path(self.name).parent, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no manager log)"
        return "manager stderr (tail):\n" + "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Manager:
        return self if self.proc is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


def nfs_at_start(cfg: dict[str, Any]) -> int:
    """The NFs the manager starts: every instance, but pool_idle of a
    per-flow service (one a per-flow rule's chain runs; docs/config.md)."""
    chains = {c["name"]: c["services"] for c in cfg["chains"]}
    pooled = {
        svc
        for r in cfg["rules"]
        if r.get("assign") == "per-flow"
        for svc in chains.get(r["chain"], [])
    }
    n = 0
    for s in cfg["services"]:
        instances = int(s.get("instances", 1))
        n += (
            min(instances, int(s.get("pool_idle", instances))) if s["name"] in pooled else instances
        )
    return n


def _nf_pids(region: str) -> list[int]:
    """NF processes attached to this region (named in their environment)."""
    token = region.encode()
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if b"squall-nf" not in cmdline:
                continue
            if token in (entry / "environ").read_bytes() or token in cmdline:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def check_config(workdir: Path, cfg: dict[str, Any]) -> str | None:
    """None if `squall-mgr --check` accepts cfg, else its error line."""
    path = workdir / f"{cfg['manager']['name']}.check.yaml"
    path.write_text(to_yaml(cfg))
    r = subprocess.run(
        [str(MGR_BIN), "--nf-path", str(NF_DIR), "--check", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if r.returncode == 0:
        return None
    return (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}").splitlines()[-1]
