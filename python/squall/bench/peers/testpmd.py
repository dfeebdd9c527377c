"""DPDK's testpmd in io mode between the two ends: the least work a DPDK
forwarder does per packet (receive a burst on one port, send it on the other:
no parsing, no lookup, no NF), on the same af_xdp ports, descriptors and core
as Squall's manager. Not a switch a user would deploy, but the reference of
the path: on veth ends most of a forwarder's core goes to the kernel, not to
the forwarder (the hosts' TCP runs in its sendto: veth delivers in the
sender's context; see squall.bench.profile), so testpmd shows what a DPDK
forwarder carries here when its own work is next to nothing. It is not a
ceiling: how a forwarder batches its sendto()s moves the kernel's share too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import (
    CLIENT_END,
    POLL_S,
    SERVER_END,
    PeerError,
    die_with_parent,
    hugepages_free_mib,
    not_root,
    restore_ends,
    save_end,
    stop_process,
)

TESTPMD = "dpdk-testpmd"
DPDK_RUNTIME = Path("/var/run/dpdk")
START_TIMEOUT_S = 30.0
# What Squall's tcp_peers ports use (bench/experiments/tcp_peers.py): af_xdp
# without preferred busy polling, 4,096 rx descriptors.
XDP_ARGS = "start_queue=0,queue_count=1,busy_budget=0"
RX_DESC = 4096
MBUFS = 16384
NEEDS_MIB = 64  # 16,384 mbufs of 2,176 B and the rings, rounded up
# printed as forwarding starts (stdout line-buffered: stdbuf)
READY = "forwards packets on"


class TestpmdIo:
    """dpdk-testpmd --forward-mode=io between the ends, forwarding on one core."""

    name = "testpmd-io"

    def __init__(self, ends: tuple[str, str] = (CLIENT_END, SERVER_END), core: int = 0):
        self.ends = ends
        self.core = core  # the forwarding lcore's CPU; the main lcore sleeps on the other
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._saved: dict[str, dict[str, Any]] = {}

    def unavailable(self) -> str | None:
        if why := not_root():
            return why
        if shutil.which(TESTPMD) is None:
            return f"{TESTPMD} not found in PATH: install Debian package dpdk (scripts/setup.sh)"
        cpus = os.sched_getaffinity(0)
        if self.core not in cpus or len(cpus) < 2:
            return f"needs core {self.core} and one more among this process's CPUs {sorted(cpus)}"
        free, facts = hugepages_free_mib()
        if free < NEEDS_MIB:
            return f"needs {NEEDS_MIB} MiB of free hugepages, {free} MiB free ({facts})"
        return None

    def command(self) -> list[str]:
        main = next(c for c in sorted(os.sched_getaffinity(0)) if c != self.core)
        assert self._dir is not None
        vdevs = []
        for i, end in enumerate(self.ends):
            vdevs += ["--vdev", f"net_af_xdp{i},iface={end},{XDP_ARGS}"]
        return [
            "stdbuf", "-oL", TESTPMD, "-l", f"{main},{self.core}", "--main-lcore", str(main),
            "--no-pci", "--in-memory", f"--file-prefix={self._dir.name}", *vdevs, "--",
            "--forward-mode=io", "--nb-cores=1", f"--rxd={RX_DESC}",
            f"--total-num-mbufs={MBUFS}", "--stats-period=3600",
        ]  # fmt: skip

    def _log(self) -> str:
        assert self._dir is not None
        try:
            return (self._dir / "testpmd.out").read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> None:
        self.stop()
        for end in self.ends:
            self._saved[end] = save_end(end)
        self._dir = Path(tempfile.mkdtemp(prefix="squall-testpmd-", dir="/tmp"))
        try:
            with open(self._dir / "testpmd.out", "wb") as out:
                self._proc = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    preexec_fn=die_with_parent,
                )
            deadline = time.monotonic() + START_TIMEOUT_S
            while READY not in self._log():
                if (rc := self._proc.poll()) is not None:
                    tail = " | ".join(self._log().strip().splitlines()[-5:])
                    raise PeerError(f"{TESTPMD} exited {rc} while starting: {tail}")
                if time.monotonic() > deadline:
                    raise PeerError(f"{TESTPMD}: not forwarding after {START_TIMEOUT_S:g} s")
                time.sleep(POLL_S)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        # SIGINT: testpmd stops forwarding and closes its ports (their XDP
        # programs go); what it leaves (promiscuous mode) restore_ends undoes.
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        stop_process(self._proc)
        self._proc = None
        errors = restore_ends(self._saved)
        self._saved = {}
        if self._dir is not None:
            shutil.rmtree(DPDK_RUNTIME / self._dir.name, ignore_errors=True)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if errors:
            raise PeerError(f"{self.name} stop: " + "; ".join(errors))
