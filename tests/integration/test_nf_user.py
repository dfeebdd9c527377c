"""No NF runs as root: the manager starts every NF under a uid of its own
(its manager's range, mgr/uids.h) in manager.nf_user's group (default
squall-nf, made by scripts/setup.sh) with no capabilities, an empty bounding
set and no_new_privs, also when it restarts one; root only when the config
says so; an unknown user is a config error."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
from pathlib import Path

import pcaps
from conftest import Manager

N_PKTS = 200


def proc_status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def start_fwd(mgr: Manager, tmp_path: Path, **manager: object) -> list[bytes]:
    frames = pcaps.good_frames(N_PKTS, [pcaps.mac(1)])
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    cfg = mgr.config(
        ports=pcaps.pcap_ports(in_pcap, tmp_path / "out.pcap"),
        services=[{"name": "f", "exec": "squall-nf-fwd", "restart": "always"}],
        chains=[{"name": "c", "services": ["f"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        **manager,
    )
    mgr.start(cfg)
    return frames


def assert_unprivileged(pid: int, user: pwd.struct_passwd, uid: int) -> None:
    st = proc_status(pid)
    assert st["Uid"].split() == [str(uid)] * 4, st["Uid"]
    assert 0x5A000000 <= uid < 0x5A000000 + (64 << 20), uid  # mgr/uids.h
    assert st["Gid"].split() == [str(user.pw_gid)] * 4, st["Gid"]
    assert st["Groups"].strip() == "", st["Groups"]
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[caps], 16) == 0, (caps, st[caps])
    assert st["NoNewPrivs"].strip() == "1"


def test_nfs_run_as_the_nf_user_without_capabilities(mgr: Manager, tmp_path: Path) -> None:
    user = pwd.getpwnam("squall-nf")
    frames = start_fwd(mgr, tmp_path)
    pid = int(mgr.nfs()["f#0"]["pid"])
    uid = int(mgr.nfs()["f#0"]["uid"])
    assert_unprivileged(pid, user, uid)
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")

    # A restarted NF is started the same way.
    os.kill(pid, signal.SIGKILL)
    mgr.wait_for(
        lambda: (
            mgr.nfs()["f#0"]["pid"] not in (0, pid)
            and mgr.nfs()["f#0"]["state"] in ("awake", "asleep")
        ),
        30,
        "f#0 restarted",
    )
    # (its slot's uid again)
    assert_unprivileged(int(mgr.nfs()["f#0"]["pid"]), user, uid)
    mgr.finish()
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames


def test_root_only_when_the_config_says_so(mgr: Manager, tmp_path: Path) -> None:
    frames = start_fwd(mgr, tmp_path, nf_user="root")
    st = proc_status(int(mgr.nfs()["f#0"]["pid"]))
    assert st["Uid"].split()[0] == "0", st["Uid"]
    assert "NFs run as root" in mgr.stderr_path.read_text()
    mgr.wait_for(lambda: mgr.stats()["tx_pkts"] == N_PKTS, 30, "every packet out")
    mgr.finish()
    assert pcaps.read_pcap(tmp_path / "out.pcap") == frames


def test_an_unknown_user_is_a_config_error(mgr: Manager, tmp_path: Path) -> None:
    cfg = mgr.config(
        ports=[{"name": "gen", "devargs": "net_null0,no-rx=1"}],
        services=[{"name": "f", "exec": "squall-nf-fwd"}],
        chains=[{"name": "c", "services": ["f"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "gen"}],
        nf_user="no-such-user-here",
    )
    path = mgr.write_config(cfg)
    r = subprocess.run(mgr.command(), capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "nf_user" in t)
    assert f"{path}:{line}: manager.nf_user: no such user" in r.stderr, r.stderr


ATTEMPT = """
import socket, sys
region, sock = sys.argv[1], sys.argv[2]
out = []
try:
    open(region, "rb").read(64)
    out.append("region:opened")
except OSError as e:
    out.append(f"region:{type(e).__name__}")
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sock)
    out.append("telemetry:connected")
except OSError as e:
    out.append(f"telemetry:{type(e).__name__}")
print(" ".join(out))
"""


def test_the_nf_user_cannot_reach_the_managers_files(mgr: Manager, tmp_path: Path) -> None:
    """What an NF's user could use against the manager, tried as that user: the
    region by its path (only the fd the manager hands an NF maps it) and the
    telemetry socket (which can apply configs and start captures)."""
    from squall.telemetry import socket_path

    start_fwd(mgr, tmp_path)
    region = f"/dev/shm/squall-{mgr.name}.region"
    sock = str(socket_path(mgr.name))
    # As root both work: the attempt itself is sound.
    r = subprocess.run(
        ["python3", "-c", ATTEMPT, region, sock], capture_output=True, text=True, timeout=30
    )
    assert r.stdout.split() == ["region:opened", "telemetry:connected"], r
    r = subprocess.run(
        ["python3", "-c", ATTEMPT, region, sock],
        capture_output=True,
        text=True,
        timeout=30,
        user="squall-nf",
        group="squall-nf",
        extra_groups=[],
    )
    assert r.stdout.split() == ["region:PermissionError", "telemetry:PermissionError"], r
    mgr.finish()
