"""The manager's generator: what it sends enters the rx path as port traffic,
its size mix and pause work, and every generated packet is accounted for."""

from __future__ import annotations

from conftest import Manager

SIZES = [64, 64, 64, 64, 64, 64, 64, 570, 570, 570, 570, 1518]  # IMIX, FCS included


def test_generator_traffic_is_accounted_for(mgr: Manager) -> None:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": "sig", "exec": "squall-nf-sig", "ring_slots": 4096}],
        chains=[{"name": "c", "services": ["sig"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 20000, "sizes": SIZES, "flows": 7}
    mgr.start(cfg)
    sent = mgr.gen_send(1200)
    mgr.wait_accounted(sent)
    gen = mgr.query("/squall/gen")
    assert gen["sent_pkts"] == sent, "the generator kept sending while paused"
    ports = mgr.ports()
    assert ports["gen"]["rx_pkts"] == sent
    # Buffers are the RFC 2544 sizes less the 4-byte FCS no port adds here.
    whole_cycles = sent // len(SIZES)
    want_bytes = whole_cycles * sum(s - 4 for s in SIZES) + sum(
        s - 4 for s in SIZES[: sent % len(SIZES)]
    )
    assert gen["sent_bytes"] == ports["gen"]["rx_bytes"] == want_bytes
    st = mgr.stats()
    assert st["drops"]["parse"] == 0, "the generator built a malformed packet"
    nf = next(iter(mgr.nfs().values()))
    assert nf["counters"]["sig_pkts"] == st["tx_pkts"]
    assert mgr.chains()["c"]["lat_count"] == st["tx_pkts"]
    mgr.finish()


def test_generator_config_errors_name_the_field(mgr: Manager) -> None:
    cfg = mgr.config(
        ports=[{"name": "gen", "devargs": "net_null0,no-rx=1"}],
        services=[{"name": "f", "exec": "squall-nf-fwd"}],
        chains=[{"name": "c", "services": ["f"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "gen"}],
    )
    cfg["generator"] = {"port": "gen", "sizes": [64, 9000]}
    r = mgr.run_to_exit(cfg, "--check")
    assert r.returncode == 2
    assert "generator.sizes[1]: expected an integer from 64 to 1518" in r.stderr, r.stderr
    cfg["generator"] = {"port": "nope"}
    r = mgr.run_to_exit(cfg, "--check")
    assert r.returncode == 2
    assert 'generator.port: unknown port "nope"' in r.stderr, r.stderr
