"""squall-nf-dpi between the namespaces client and server of
scripts/netns.sh: a rule drops flows whose payload says "evil-payload"
(any case); curl with that in a header fails, plain curl of a 1 MiB file
passes whole, and a tag rule only counts. Needs root and Vectorscan; run
under flock /tmp/squall-netns.lock."""

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


def test_dpi_drops_matching_flow(http_server: bytes, mgr: Manager, tmp_path: Path) -> None:  # noqa: F811
    rules = tmp_path / "dpi.rules"
    rules.write_text(RULES)
    mgr.start(
        mgr.config(
            ports=[
                {"name": "client", "devargs": "net_af_packet0,iface=sq-c1"},
                {"name": "server", "devargs": "net_af_packet1,iface=sq-s1"},
            ],
            services=[{"name": "dpi", "exec": "squall-nf-dpi", "args": ["--rules", str(rules)]}],
            chains=[{"name": "edge", "services": ["dpi"]}],
            rules=[
                {"in_port": "client", "chain": "edge", "out_port": "server"},
                {"in_port": "server", "chain": "edge", "out_port": "client"},
            ],
        )
    )
    got = tmp_path / "got.bin"
    ok = curl("-o", str(got), f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin")
    assert ok.returncode == 0 and got.read_bytes() == http_server, f"{ok}\n{mgr.nfs()}"
    bad = curl("-H", "X-Note: EVIL-Payload", "-o", "/dev/null", f"http://{SERVER_IP}:{HTTP_PORT}/")
    assert bad.returncode == 28, f"the evil request got through: {bad}"
    again = curl("-o", str(got), f"http://{SERVER_IP}:{HTTP_PORT}/blob.bin")
    assert again.returncode == 0, again  # a new flow is not blocked
    c = mgr.finish()["nfs"]["dpi#0"]["counters"]
    assert c["r1"] >= 1 and c["dropped"] >= c["r1"], c
    assert c["r2"] == 2 and c["tagged"] == 2, c
    assert c["bad_hdr"] == 0, c
