"""NFs started by hand attach only as a user the manager allows (issue 16;
mgr/attach.c): they ask the attach socket for the region, the manager reads
their uid from the kernel (SO_PEERCRED) and gives the region's fd to a uid
in manager.attach_users (or root), and tells any other why not. The old way
in, the region's /dev/shm symlink, is closed to such a user as well."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest
from conftest import NF_DIR, Manager

ALLOWED, OTHER = "squall-nf", "nobody"


def attach_path(mgr: Manager) -> str:
    return f"/run/squall/squall-{mgr.name}.attach"


def config(mgr: Manager, **manager: object) -> dict:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        # slot 1 is reserved and not started: for the NF run by hand
        services=[{"name": "fwd", "exec": "squall-nf-fwd", "max_instances": 2}],
        chains=[{"name": "c", "services": ["fwd"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
    )
    cfg["manager"].update(manager)
    return cfg


def by_hand(user: str, region: str, slot: int = 1) -> subprocess.Popen[str]:
    pw = pwd.getpwnam(user)
    return subprocess.Popen(
        [str(NF_DIR / "squall-nf-fwd"), "--sq-region", region, "--sq-id", str(slot)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"PATH": os.environ["PATH"], "SQUALL_LOG_LEVEL": "info"},
        user=pw.pw_uid,
        group=pw.pw_gid,
        extra_groups=[],
    )


def uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("Uid:")))


def test_an_allowed_user_attaches_by_hand(mgr: Manager) -> None:
    mgr.start(config(mgr, attach_users=[ALLOWED]))
    path = Path(attach_path(mgr))
    assert path.is_socket() and path.stat().st_mode & 0o777 == 0o666
    nf = by_hand(ALLOWED, str(path))
    try:
        mgr.wait_for(lambda: mgr.stats()["attach_granted"] == 1, 20, "the region given")
        # it runs its loop on slot 1, as its own user, with the region mapped
        mgr.wait_for(
            lambda: (
                f"squall-{mgr.name}.region" in Path(f"/proc/{nf.pid}/maps").read_text()
                or nf.poll() is not None
            ),
            20,
            "the region mapped",
        )
        assert nf.poll() is None, nf.communicate()[0]
        assert uid_of(nf.pid) == pwd.getpwnam(ALLOWED).pw_uid
        assert mgr.stats()["attach_refused"] == 0
    finally:
        nf.terminate()
        out = nf.communicate(timeout=20)[0]
    assert "attached" in out, out
    mgr.finish(live_mbufs=False)


@pytest.mark.parametrize("allowed", [[], [ALLOWED]])
def test_another_user_is_refused_and_told_why(mgr: Manager, allowed: list[str]) -> None:
    mgr.start(config(mgr, attach_users=allowed))
    nf = by_hand(OTHER, attach_path(mgr))
    out = nf.communicate(timeout=30)[0]
    assert nf.returncode != 0
    assert "refused: uid 65534 may not attach (manager.attach_users)" in out, out
    assert mgr.stats()["attach_refused"] == 1 and mgr.stats()["attach_granted"] == 0
    # nor by the region's name: the symlink leads into the manager's /proc
    nf = by_hand(OTHER, f"/dev/shm/squall-{mgr.name}.region")
    out = nf.communicate(timeout=30)[0]
    assert nf.returncode != 0 and "Permission denied" in out, out
    mgr.finish(live_mbufs=False)


def test_the_socket_goes_with_the_manager(mgr: Manager) -> None:
    mgr.start(config(mgr))
    path = Path(attach_path(mgr))
    assert path.is_socket()
    mgr.finish(live_mbufs=False)
    assert not path.exists()


def test_a_second_manager_of_one_name_refuses_and_takes_nothing(mgr: Manager) -> None:
    """Two managers of one name would share a region path, a telemetry
    socket and an attach socket: the second refuses, and the first keeps
    all three (an allowed NF still attaches through its socket)."""
    cfg = config(mgr, attach_users=[ALLOWED])
    mgr.start(cfg)
    first = mgr.proc
    assert first is not None
    r = mgr.run_to_exit(cfg)
    assert r.returncode != 0
    assert f"is in use by squall-mgr pid {first.pid}; pick another manager.name" in r.stderr, (
        r.stderr
    )
    mgr.proc = first
    assert mgr.is_running() and Path(attach_path(mgr)).is_socket()
    nf = by_hand(ALLOWED, attach_path(mgr))
    try:
        mgr.wait_for(lambda: mgr.stats()["attach_granted"] == 1, 20, "the region given")
    finally:
        nf.terminate()
        nf.communicate(timeout=20)
    mgr.finish(live_mbufs=False)
