"""squall-nf-dpi between the namespaces client and server of
scripts/netns.sh: a rule drops flows whose payload says "evil-payload"
(any case); curl with that in a header fails, plain curl of a 1 MiB file
passes whole, and a tag rule only counts. Shared (one instance, flows told
apart by their hash) and per flow (an NF per connection, whose record of a
dropped flow its state cleaner forgets). Needs root and Vectorscan."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import NF_DIR, Manager
from test_netns import HTTP_PORT, SERVER_IP, http_server, netns  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(
    not (NF_DIR / "squall-nf-dpi").is_file(),
    reason="squall-nf-dpi not built (no libvectorscan-dev)",
)

RULES = """# id action /regex/flags
1 drop /evil-payload/i
2 tag /GET \\/blob/
"""


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", "client", "curl", "-sS", "--max-time", "5", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("per_flow", [False, True], ids=["shared", "per-flow"])
def test_dpi_drops_matching_flow(
    http_server: bytes,  # noqa: F811
    mgr: Manager,
    tmp_path: Path,
    per_flow: bool,
) -> None:
    rules = tmp_path / "dpi.rules"
    rules.write_text(RULES)
    svc: dict[str, object] = {
        "name": "dpi",
        "exec": "squall-nf-dpi",
        "args": ["--rules", str(rules)],
    }
    extra: dict[str, object] = {}
    assign: dict[str, object] = {}
    if per_flow:
        svc.update(instances=4, ring_slots=256)
        extra = {"flow_linger_ms": 100, "flow_idle_timeout_ms": 2000}
        assign = {"assign": "per-flow"}
    mgr.start(
        mgr.config(
            ports=[
                {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
                {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
            ],
            services=[svc],
            chains=[{"name": "edge", "services": ["dpi"]}],
            rules=[
                {"in_port": "client", "chain": "edge", "out_port": "server", **assign},
                {"in_port": "server", "chain": "edge", "out_port": "client", **assign},
            ],
            **extra,
        )
    )
    got = tmp_path / "got.bin"
    ok = curl("-o", str(got), f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin")
    assert ok.returncode == 0 and got.read_bytes() == http_server, f"{ok}\n{mgr.nfs()}"
    bad = curl("-H", "X-Note: EVIL-Payload", "-o", "/dev/null", f"http://{SERVER_IP}:{HTTP_PORT}/")
    assert bad.returncode == 28, f"the evil request got through: {bad}"
    if per_flow:
        # The evil flow ends when its client's retransmissions (every one
        # dropped) come further apart than the idle timeout; its NF goes
        # back to the pool, later retransmissions are strays.
        mgr.wait_for(
            lambda: mgr.query("/squall/flows")["flows_active"] == 0, 30, "the evil flow ended"
        )
    for _ in range(4 if per_flow else 1):
        again = curl("-o", str(got), f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin")
        assert again.returncode == 0, again  # a new flow is not blocked
    flows = mgr.query("/squall/flows")
    ex = mgr.finish()
    c: dict[str, int] = {}
    for nf in ex["nfs"].values():
        for k, v in nf["counters"].items():
            c[k] = c.get(k, 0) + v
    assert c["r1"] >= 1 and c["dropped"] >= c["r1"], c
    assert c["r2"] == (5 if per_flow else 2) and c["tagged"] == c["r2"], c
    assert c["bad_hdr"] == 0, c
    if per_flow:
        # each connection had an NF of its own: 5 fetches and the evil one,
        # on the pool's 4 NFs, each cleaned between its flows
        assert flows["flows_created"] == 6, flows
        assert sum(nf["rx_pkts"] > 0 for nf in ex["nfs"].values()) == 4, ex["nfs"]
