"""1,000 NFs on one core (issue 3): they start, carry traffic spread over all
of them, and stop cleanly, with every packet and mbuf accounted for."""

from __future__ import annotations

from conftest import Manager

N_NFS = 1000


def test_thousand_nfs_start_carry_traffic_and_stop(mgr: Manager) -> None:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[
            {
                "name": "s",
                "exec": "squall-nf-sig",
                "instances": N_NFS,
                "ring_slots": 64,
                "spin_us": 0,
            }
        ],
        chains=[{"name": "c", "services": ["s"]}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
        region_mb=128,
        mbufs=8191,
    )
    cfg["generator"] = {"port": "gen", "rate_pps": 20000, "flows": 8192}
    mgr.start(cfg)
    assert mgr.stats()["nfs_live"] == N_NFS
    sent = mgr.gen_send(20000)
    mgr.wait_accounted(sent, timeout_s=60)
    nfs = mgr.nfs()
    assert len(nfs) == N_NFS
    busy = sum(1 for nf in nfs.values() if nf["rx_pkts"] > 0)
    assert busy > 0.95 * N_NFS, f"only {busy} of {N_NFS} NFs got traffic"
    assert sum(nf["counters"]["sig_pkts"] for nf in nfs.values()) == mgr.stats()["tx_pkts"]
    ex = mgr.finish()
    assert ex["stats"]["nfs_total"] == N_NFS
    assert all(nf["state"] == "exited" for nf in ex["nfs"].values())
