"""Every port, chain and NF of a config shows up in telemetry under its name,
whatever characters the config lets a name have."""

from __future__ import annotations

from pathlib import Path

import pcaps
from conftest import Manager


def test_all_configured_names_in_telemetry(mgr: Manager, tmp_path: Path) -> None:
    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", pcaps.good_frames(10, [pcaps.mac(1)]))
    ports = ["in-1", "out_1"]
    services = ["sig-a", "sig_b"]
    chains = ["chain-x", "chain_y"]
    cfg = mgr.config(
        ports=[
            {"name": ports[0], "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": ports[1], "devargs": f"net_pcap1,tx_pcap={tmp_path / 'out.pcap'}"},
        ],
        services=[{"name": s, "exec": "squall-nf-noop", "mode": "sleep"} for s in services],
        chains=[
            {"name": chains[0], "services": services},
            {"name": chains[1], "services": ["sig_b"]},
        ],
        rules=[{"in_port": ports[0], "chain": chains[0], "out_port": ports[1]}],
    )
    check = mgr.run_to_exit(cfg, "--check")
    if check.returncode == 2:
        # Rejecting names telemetry cannot carry is fine too, if it names the spot.
        assert f"{mgr.config_path}:" in check.stderr, check.stderr
        return
    assert check.returncode == 0, check.stderr

    mgr.start(cfg)
    assert sorted(mgr.ports()) == sorted(ports)
    assert sorted(mgr.chains()) == sorted(chains)
    assert sorted(mgr.nfs()) == sorted(f"{s}#0" for s in services)
    mgr.wait_port_tx(ports[1], 10)
    mgr.finish()
