"""Open vSwitch with DPDK as a peer: Debian's openvswitch-switch-dpdk, userspace
(netdev) datapath, one PMD core, bridging sq-c1 and sq-s1 with actions=NORMAL.

ovsdb-server and ovs-vswitchd run as children of this process, with their
database, sockets and logs in a temporary directory (no systemd, nothing in
/etc or /var/run/openvswitch), and DPDK on its own EAL settings: --in-memory
(no hugepage files), no PCI, a file prefix of its own, a small socket-mem.

The ends are attached the way Squall attaches them, DPDK's net_af_xdp; if OVS
refuses that, OVS's own AF_XDP netdev (type=afxdp), then DPDK's net_af_packet.
`port_kind` tells which one carried the run, `port_errors` why the others did not.

ovs-ct and ovs-ct-nat (OvsDpdkCt) replace the learning switch's one flow with
a stateful firewall in OpenFlow: IP goes through the userspace datapath's
connection tracker (ct(zone=1), with ct(nat) for the NAT variant), then
established and related pass, invalid is dropped, and a new connection from
the client to an allowed port (or an ICMP echo) is committed, in the NAT
variant with nat(src=SNAT_IP), and passes; everything else new is dropped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import (
    ALLOWED_TCP_PORTS,
    CLIENT_END,
    POLL_S,
    SERVER_END,
    SNAT_IP,
    PeerError,
    die_with_parent,
    hugepages_free_mib,
    missing_tool,
    not_root,
    restore_ends,
    run,
    save_end,
    snat_neighbour,
    stop_process,
    why_not,
)

VSWITCHD_DPDK = Path("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
DPDK_RUNTIME = Path("/var/run/dpdk")
DPDK_INIT_TIMEOUT_S = 30.0
# What dump-flows adds to a flow: counters and ages.
STATS_FIELDS = re.compile(r"\b(cookie|duration|n_packets|n_bytes|idle_age|hard_age)=[^,\s]*,?\s*")

# Port kinds in order of preference: name -> Interface columns for end number i.
PORT_KINDS: dict[str, tuple[str, ...]] = {
    "dpdk net_af_xdp": ("type=dpdk", "options:dpdk-devargs=net_af_xdp{i},iface={end}"),
    "afxdp": ("type=afxdp",),
    "dpdk net_af_packet": ("type=dpdk", "options:dpdk-devargs=net_af_packet{i},iface={end}"),
}


class OvsDpdk:
    """ovs-vswitchd (DPDK build), netdev bridge over the two ends, flows actions=NORMAL."""

    name = "ovs-dpdk"

    def __init__(
        self,
        ends: tuple[str, str] = (CLIENT_END, SERVER_END),
        bridge: str = "sqovs0",
        pmd_core: int = 0,
        socket_mem_mib: int = 256,
    ):
        self.ends = ends
        self.bridge = bridge
        self.pmd_core = pmd_core
        self.socket_mem_mib = socket_mem_mib
        self.port_kind: str | None = None
        self.port_errors: list[str] = []
        self._dir: Path | None = None
        self._db: subprocess.Popen[bytes] | None = None
        self._switch: subprocess.Popen[bytes] | None = None
        self._saved: dict[str, dict[str, Any]] = {}

    # -- availability ---------------------------------------------------------

    def unavailable(self) -> str | None:
        if why := not_root():
            return why
        if not VSWITCHD_DPDK.is_file():
            return f"{VSWITCHD_DPDK} not found: install Debian package openvswitch-switch-dpdk"
        for prog in ("ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-appctl", "ovs-ofctl"):
            if why := missing_tool(prog, "openvswitch-switch"):
                return why
        if not SCHEMA.is_file():
            return f"{SCHEMA} not found: install Debian package openvswitch-common"
        try:
            version = run([str(VSWITCHD_DPDK), "--version"])
        except PeerError as e:
            return str(e)
        if "DPDK" not in version:
            return f"{VSWITCHD_DPDK} --version names no DPDK: {version.strip()!r}"
        if self.pmd_core not in os.sched_getaffinity(0):
            return f"PMD core {self.pmd_core} is not among this process's CPUs"
        free, facts = hugepages_free_mib()
        if free < self.socket_mem_mib:
            return (
                f"needs {self.socket_mem_mib} MiB of free hugepages for dpdk-socket-mem, "
                f"{free} MiB free (/proc/meminfo {facts})"
            )
        return None

    # -- helpers --------------------------------------------------------------

    def _path(self, name: str) -> str:
        assert self._dir is not None
        return str(self._dir / name)

    def _env(self) -> dict[str, str]:
        d = self._path("")
        return {"OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d, "OVS_SYSCONFDIR": d}

    def _vsctl(self, *args: str, timeout: float = 15.0) -> str:
        db = f"--db=unix:{self._path('db.sock')}"
        cmd = ["ovs-vsctl", db, f"--timeout={int(timeout)}", *args]
        return run(cmd, timeout=timeout + 5, env=self._env()).strip()

    def _spawn(self, cmd: list[str], out: str) -> subprocess.Popen[bytes]:
        with open(self._path(out), "wb") as f:
            return subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=f,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self._env()},
                preexec_fn=die_with_parent,
            )

    def _log_tail(self, n: int = 8) -> str:
        """The switch's last warnings and errors (EAL and port failures land there)."""
        try:
            lines = Path(self._path("ovs-vswitchd.log")).read_text(errors="replace").splitlines()
        except OSError:
            return "(no ovs-vswitchd log)"
        bad = [ln for ln in lines if re.search(r"\|(WARN|ERR|EMER)\|", ln)]
        return " | ".join((bad or lines)[-n:])

    def _file_prefix(self) -> str:
        assert self._dir is not None
        return self._dir.name

    # -- start ----------------------------------------------------------------

    def start(self) -> None:
        self.stop()
        for end in self.ends:
            self._saved[end] = save_end(end)
        self._dir = Path(tempfile.mkdtemp(prefix="squall-ovs-", dir="/tmp"))
        try:
            self._start_db()
            self._start_switch()
            self._add_bridge()
        except BaseException:
            self.stop()
            raise

    def _start_db(self) -> None:
        run(["ovsdb-tool", "create", self._path("conf.db"), str(SCHEMA)])
        sock = Path(self._path("db.sock"))
        self._db = self._spawn(
            [
                "ovsdb-server",
                self._path("conf.db"),
                f"--remote=punix:{sock}",
                f"--unixctl={self._path('ovsdb-server.ctl')}",
                f"--log-file={self._path('ovsdb-server.log')}",
                "-vconsole:warn",
            ],
            "ovsdb-server.out",
        )
        deadline = time.monotonic() + 10
        while not sock.exists():
            if (rc := self._db.poll()) is not None:
                out = Path(self._path("ovsdb-server.out")).read_text(errors="replace")
                raise PeerError(f"ovsdb-server exited {rc}: {out.strip()}")
            if time.monotonic() > deadline:
                raise PeerError(f"ovsdb-server: no socket {sock} after 10 s")
            time.sleep(POLL_S)
        self._vsctl("--no-wait", "init")

    def _start_switch(self) -> None:
        core = f"{1 << self.pmd_core:#x}"
        eal = f"--in-memory --no-pci --no-telemetry --file-prefix={self._file_prefix()}"
        mem = str(self.socket_mem_mib)
        self._vsctl(
            *("--no-wait", "set", "Open_vSwitch", "."),
            "other_config:dpdk-init=true",
            f"other_config:dpdk-lcore-mask={core}",
            f"other_config:pmd-cpu-mask={core}",
            f"other_config:dpdk-socket-mem={mem}",
            f"other_config:dpdk-socket-limit={mem}",
            "other_config:per-port-memory=true",
            f'other_config:dpdk-extra="{eal}"',
        )
        self._switch = self._spawn(
            [
                str(VSWITCHD_DPDK),
                f"unix:{self._path('db.sock')}",
                f"--unixctl={self._path('ovs-vswitchd.ctl')}",
                f"--log-file={self._path('ovs-vswitchd.log')}",
                "-vconsole:warn",
            ],
            "ovs-vswitchd.out",
        )
        deadline = time.monotonic() + DPDK_INIT_TIMEOUT_S
        while True:
            if (rc := self._switch.poll()) is not None:
                raise PeerError(f"ovs-vswitchd exited {rc} during DPDK init: {self._log_tail()}")
            if self._vsctl("get", "Open_vSwitch", ".", "dpdk_initialized") == "true":
                return
            if time.monotonic() > deadline:
                raise PeerError(
                    f"ovs-vswitchd: dpdk_initialized not true after {DPDK_INIT_TIMEOUT_S:g} s "
                    f"with dpdk-extra={eal!r}: {self._log_tail()}"
                )
            time.sleep(0.1)

    def _add_bridge(self) -> None:
        self._vsctl(
            *("add-br", self.bridge, "--", "set", "Bridge", self.bridge),
            *("datapath_type=netdev", "fail_mode=secure"),
        )
        self.port_kind, self.port_errors = None, []
        for kind, columns in PORT_KINDS.items():
            if (err := self._add_ports(columns)) is None:
                self.port_kind = kind
                break
            self.port_errors.append(f"{kind}: {err}")
            for end in self.ends:
                self._vsctl("--if-exists", "del-port", self.bridge, end)
        else:
            raise PeerError(
                f"ovs-vswitchd could not attach {' and '.join(self.ends)} as any port kind: "
                f"{'; '.join(self.port_errors)}; log: {self._log_tail()}"
            )
        mgmt = f"unix:{self._path(self.bridge + '.mgmt')}"
        run(["ovs-ofctl", "del-flows", mgmt])
        run(["ovs-ofctl", "add-flows", mgmt, "-"], stdin="\n".join(self.flows()) + "\n")
        self._wait_links_up()

    def flows(self) -> list[str]:
        """The OpenFlow table: a learning switch."""
        return ["priority=0,actions=NORMAL"]

    def flow_stats(self) -> dict[str, int]:
        """Packets per flow (match and actions), for the run's records."""
        mgmt = f"unix:{self._path(self.bridge + '.mgmt')}"
        found: dict[str, int] = {}
        for line in run(["ovs-ofctl", "dump-flows", mgmt]).splitlines():
            m = re.search(r"n_packets=(\d+)", line)
            if m:
                flow = STATS_FIELDS.sub("", line.strip())
                found[flow] = found.get(flow, 0) + int(m.group(1))
        return found

    def _add_ports(self, columns: tuple[str, ...]) -> str | None:
        """Add both ends as ports of one kind; None if both attached, else OVS's error."""
        for i, end in enumerate(self.ends):
            cols = [c.format(i=i, end=end) for c in columns]
            try:
                self._vsctl("add-port", self.bridge, end, "--", "set", "Interface", end, *cols)
            except PeerError as e:
                return str(e)
            ofport = self._vsctl("get", "Interface", end, "ofport")
            error = self._vsctl("get", "Interface", end, "error")
            if ofport in ("-1", "[]") or error not in ("[]", '""'):
                return f"interface {end} ({' '.join(cols)}): ofport {ofport}, error {error}"
        return None

    def _wait_links_up(self, timeout: float = 10.0) -> None:
        """Both ports up and polled by the PMD thread (before that, the first
        packets wait hundreds of ms)."""
        ctl = self._path("ovs-vswitchd.ctl")
        deadline = time.monotonic() + timeout
        while True:
            states = {e: self._vsctl("get", "Interface", e, "link_state") for e in self.ends}
            rxqs = run(["ovs-appctl", "-t", ctl, "dpif-netdev/pmd-rxq-show"])
            polled = {e: f"port: {e} " in rxqs for e in self.ends}
            if all(s == "up" for s in states.values()) and all(polled.values()):
                return
            if time.monotonic() > deadline:
                raise PeerError(
                    f"OVS ports not ready after {timeout:g} s: link_state {states}, "
                    f"polled by a PMD {polled}"
                )
            time.sleep(0.1)

    # -- stop -----------------------------------------------------------------

    def stop(self) -> None:
        errors: list[str] = []
        if self._switch is not None and self._switch.poll() is None:
            # Removing the ports first detaches DPDK from the ends (and their XDP programs).
            try:
                self._vsctl("--if-exists", "del-br", self.bridge, timeout=10)
            except PeerError as e:
                errors.append(str(e))
            ctl = self._path("ovs-vswitchd.ctl")
            if why := why_not(["ovs-appctl", "-t", ctl, "exit", "--cleanup"], timeout=10):
                errors.append(why)
        stop_process(self._switch)
        if self._db is not None and self._db.poll() is None:
            why_not(["ovs-appctl", "-t", self._path("ovsdb-server.ctl"), "exit"])
        stop_process(self._db)
        self._switch = self._db = None
        errors += restore_ends(self._saved)
        self._saved = {}
        if self._dir is not None:
            shutil.rmtree(DPDK_RUNTIME / self._file_prefix(), ignore_errors=True)
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if errors:
            raise PeerError(f"{self.name} stop: " + "; ".join(errors))


CT_ZONE = 1


class OvsDpdkCt(OvsDpdk):
    """OVS-DPDK with ct() flows: a stateful firewall, and SNAT if nat."""

    def __init__(
        self,
        nat: bool = False,
        allowed_tcp_ports: tuple[int, ...] = ALLOWED_TCP_PORTS,
        **kw: Any,
    ):
        super().__init__(**kw)
        self.name = "ovs-ct-nat" if nat else "ovs-ct"
        self.nat = nat
        self.allowed_tcp_ports = allowed_tcp_ports

    def describe(self) -> str:
        return "OVS-DPDK (userspace datapath), OpenFlow ct(commit)" + (
            " + ct(nat)" if self.nat else ""
        )

    def flows(self) -> list[str]:
        z = f"zone={CT_ZONE}"
        # Table 0 sends IP to the tracker (un-NATting a known connection's
        # packets on the way), table 1 decides on the state it found.
        track = f"ct(table=1,{z},nat)" if self.nat else f"ct(table=1,{z})"
        # No port range: OVS keeps the client's port, as the kernel's
        # masquerade does where it can. With one, OVS picks a random port
        # even when the client's is free, and the server's TIME_WAIT sockets
        # then meet new connections on their port pairs from other client
        # ports: Linux's per-connection timestamp offsets make PAWS refuse
        # those SYNs, and the tracker drops the server's answer (measured:
        # TcpExtPAWSTimewait in ns server, conntrack_tcp_seq_chk_failed).
        nat = f"nat(src={SNAT_IP})"
        commit = f"ct(commit,{z},{nat})" if self.nat else f"ct(commit,{z})"
        client = self.ends[0]
        new = f"ct_state=+trk+new,in_port={client}"
        flows = [
            "table=0,priority=100,arp,actions=NORMAL",
            f"table=0,priority=100,ip,actions={track}",
            "table=0,priority=0,actions=drop",
            "table=1,priority=100,ct_state=+trk+est,ip,actions=NORMAL",
            "table=1,priority=100,ct_state=+trk+rel,ip,actions=NORMAL",
            "table=1,priority=100,ct_state=+trk+inv,ip,actions=drop",
        ]
        flows += [
            f"table=1,priority=90,{new},tcp,tp_dst={port},actions={commit},NORMAL"
            for port in self.allowed_tcp_ports
        ]
        flows.append(f"table=1,priority=90,{new},icmp,icmp_type=8,actions={commit},NORMAL")
        flows.append("table=1,priority=0,actions=drop")
        return flows

    def _appctl(self, *args: str) -> str:
        return run(["ovs-appctl", "-t", self._path("ovs-vswitchd.ctl"), *args], env=self._env())

    def nat_exhausted(self) -> int:
        """The switch's log lines for new connections its NAT refused."""
        try:
            log = Path(self._path("ovs-vswitchd.log")).read_text(errors="replace")
        except OSError:
            return 0
        return log.count("Unable to NAT due to tuple space exhaustion")

    def between_reps(self) -> str | None:
        """Before a repetition after the first, with no connection open: the
        NAT variant's connection table emptied (its TIME_WAIT entries), and
        why. A connection from a client port whose earlier connection is still
        in the table (TIME_WAIT) needs another reply tuple, which nat(src=IP)
        with no port range does not have: the tracker refuses it ("Unable to
        NAT due to tuple space exhaustion"), and the client's SYN waits for
        its retransmission (measured: about 1,600 connections/s after the first
        repetition without this, 25,000 with it)."""
        if not self.nat:
            return None
        before = self._appctl("dpctl/ct-stats-show").split("Total:", 1)[-1].split()[0]
        self._appctl("dpctl/flush-conntrack")
        return f"flushed {before} connections from the tracker"

    def start(self) -> None:
        super().start()
        if self.nat:
            try:
                snat_neighbour(True)
            except BaseException:
                self.stop()
                raise

    def stop(self) -> None:
        if self.nat:
            snat_neighbour(False)
        super().stop()
