"""Eight sleeping sig NFs, four chains of two, all pinned to one core: every
packet goes out exactly once, on the chain its destination MAC selects."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pcaps
import pytest
from conftest import Manager, pid_is_alive

N_PKTS = 1000
N_CHAINS = 4
NF_CORE = 1


def _allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def test_eight_sleeping_nfs_on_one_core(mgr: Manager, tmp_path: Path) -> None:
    macs = [pcaps.mac(10 + i) for i in range(N_CHAINS)]
    # Uneven shares (1:2:3:4), so a chain count cannot match by accident.
    weighted = [m for i, m in enumerate(macs) for _ in range(i + 1)]
    frames = pcaps.good_frames(N_PKTS, weighted, seed=2)
    per_mac = Counter(pcaps.dst_mac_of(f) for f in frames)
    assert sorted(per_mac.values()) == [100, 200, 300, 400]

    in_pcap = pcaps.write_pcap(tmp_path / "in.pcap", frames)
    out_pcap = tmp_path / "out.pcap"
    services = [f"s{c}{h}" for c in range(N_CHAINS) for h in "ab"]
    cfg = mgr.config(
        ports=[
            {"name": "in", "devargs": f"net_pcap0,rx_pcap={in_pcap}"},
            {"name": "out", "devargs": f"net_pcap1,tx_pcap={out_pcap}"},
        ],
        services=[
            {"name": s, "exec": "squall-nf-sig", "mode": "sleep", "instances": 1} for s in services
        ],
        chains=[{"name": f"c{c}", "services": [f"s{c}a", f"s{c}b"]} for c in range(N_CHAINS)],
        rules=[
            {"in_port": "in", "dst_mac": macs[c], "chain": f"c{c}", "out_port": "out"}
            for c in range(N_CHAINS)
        ],
        nf_core=NF_CORE,
    )
    mgr.start(cfg)

    nfs = mgr.nfs()
    assert sorted(nfs) == sorted(f"{s}#0" for s in services), nfs
    for key, nf in nfs.items():
        assert nf["pid"] > 0 and pid_is_alive(nf["pid"]), (key, nf)
        assert _allowed_cpus(nf["pid"]) == str(NF_CORE), (key, _allowed_cpus(nf["pid"]))

    mgr.wait_port_tx("out", N_PKTS, timeout_s=30)
    ex = mgr.finish()

    out = pcaps.read_pcap(out_pcap)
    assert len(out) == N_PKTS
    assert sorted(out) == sorted(frames), "not every packet went out exactly once"
    for m in macs:  # each chain keeps its own order
        assert [f for f in out if pcaps.dst_mac_of(f) == m] == [
            f for f in frames if pcaps.dst_mac_of(f) == m
        ], m

    st = ex["stats"]
    assert st["rx_pkts"] == st["tx_pkts"] == N_PKTS, st
    assert st["drop_pkts"] == 0, st
    for c, m in enumerate(macs):
        chain = ex["chains"][f"c{c}"]
        assert chain["rx_pkts"] == chain["tx_pkts"] == per_mac[m], (c, chain, per_mac[m])
        assert chain["visits_mismatch"] == 0, chain
        want = [f for f in frames if pcaps.dst_mac_of(f) == m]
        for h in "ab":
            nf = ex["nfs"][f"s{c}{h}#0"]
            cnt = nf["counters"]
            assert cnt["sig_pkts"] == per_mac[m], (c, h, cnt)
            assert cnt["sig_sum"] == pcaps.sig_sum(want), (c, h, cnt)
            assert cnt["sig_mismatch"] == 0 and cnt["sig_revisit"] == 0, (c, h, cnt)


RATE_PPS = 600_000
SENT_AT_LEAST = 600_000


def gen_chain_config(
    mgr: Manager, hops: str, rate_pps: int, nf_core: int = NF_CORE, **svc: object
) -> dict:
    cfg = mgr.config(
        ports=[
            {"name": "gen", "devargs": "net_null0,no-rx=1"},
            {"name": "out", "devargs": "net_null1,no-rx=1"},
        ],
        services=[{"name": h, "exec": "squall-nf-fwd", **svc} for h in hops],
        chains=[{"name": "c", "services": list(hops)}],
        rules=[{"in_port": "gen", "chain": "c", "out_port": "out"}],
        nf_core=nf_core,
    )
    cfg["generator"] = {"port": "gen", "rate_pps": rate_pps, "sizes": [64], "flows": 64}
    return cfg


def test_lone_nf_never_yields_its_core(mgr: Manager) -> None:
    """At 100 kpps a packet comes every 10 us, within the 20 us spin, so the
    NF spins between packets. Alone on its core it must not yield: that would
    hand the core to other programs for a slice, and an awake NF is not woken
    back (TCP through one NF fell by half when it did)."""
    # 4096 slots: 40 ms of packets, so a stall of this VM (the hypervisor
    # took 15% of each vCPU during test runs) loses none.
    mgr.start(gen_chain_config(mgr, "a", 100_000, ring_slots=4096))
    sent = mgr.gen_send(100_000)
    mgr.wait_accounted(sent)
    nf = next(iter(mgr.nfs().values()))
    assert nf["rx_pkts"] == sent, nf
    assert nf["spin_yields"] == 0, nf
    mgr.finish()


def test_chain_on_one_core_keeps_up_with_a_steady_rate(mgr: Manager) -> None:
    """Two sleeping NFs of one chain on one core, under a steady 600 kpps
    that arrives a packet or two per round. Each NF catches the next packet
    in its spin, so it never sleeps; unless it yields while spinning, the
    first hop keeps the core for a scheduler slice (ms) while the second
    hop's ring overflows. The core can carry ~3 Mpps."""
    mgr.start(gen_chain_config(mgr, "ab", RATE_PPS))
    sent = mgr.gen_send(SENT_AT_LEAST)
    mgr.wait_accounted(sent)
    st = mgr.stats()
    nfs = mgr.nfs()
    assert st["drop_pkts"] == st["drops"]["nf_ring_full"], st["drops"]
    # The starved hop's signature is drops mid-chain, at b's ring: 4-11% of
    # the packets with the spin's yield taken out. A stall of the whole core
    # (the hypervisor took 15% of it during test runs here) drops at the
    # chain's entry instead, up to 25%, so the total is bounded loosely.
    # A stall can land while b waits its turn, too: 0.5-0.7% at b's ring
    # (3,211 and 4,441 packets) in 2 of 30 runs here, and 1.16% once in a
    # CI run of the whole suite, so b's bound is 3%, still under the starved
    # hop's least.
    assert nfs["b#0"]["ring_full_drops"] <= 0.03 * sent, (st, nfs)
    assert st["tx_pkts"] >= 0.5 * sent, (st, nfs)
    assert sum(nf["spin_yields"] for nf in nfs.values()) > 0, nfs
    mgr.finish()


POLL_WARNING = "poll-mode NF(s) share core"


def test_poll_nfs_sharing_a_core_are_warned_about(mgr: Manager) -> None:
    """Two poll-mode NFs pinned to one core time-slice (0.25 Mpps through the
    pair where one NF moves 6.6): legal, but the manager says so at start.
    The same chain in sleep mode draws no such warning."""
    for mode, warned in (("sleep", False), ("poll", True)):
        mgr.start(gen_chain_config(mgr, "ab", 1000, mode=mode))
        sent = mgr.gen_send(100)
        mgr.wait_accounted(sent)
        mgr.finish()
        log = mgr.stderr_path.read_text(errors="replace")
        assert (POLL_WARNING in log) == warned, (mode, mgr.log_tail())


def test_nfs_on_the_managers_own_core(mgr: Manager) -> None:
    """manager.nf_core set to the manager's own core (EAL's -l 0): the busy
    manager (its generator sends) would leave the NF only what the scheduler
    takes from it. It yields the core while the NF holds packets, and counts
    itself among the core's awake tasks, so the NF, its ring empty, yields
    back at once rather than spin. Every packet comes out."""
    cfg = gen_chain_config(mgr, "a", 100_000, ring_slots=4096)
    cfg["manager"]["nf_core"] = 0
    mgr.start(cfg)
    nf = next(iter(mgr.nfs().values()))
    assert _allowed_cpus(nf["pid"]) == "0", _allowed_cpus(nf["pid"])
    sent = mgr.gen_send(100_000)
    mgr.wait_accounted(sent)
    st = mgr.stats()
    nf = next(iter(mgr.nfs().values()))
    assert st["tx_pkts"] == sent and st["drop_pkts"] == 0, st
    assert st["idle"]["core_yields"] > 0, st["idle"]
    assert nf["spin_yields"] > 0, nf  # (yielded to the manager, counted awake)
    # squallctl serve exports the yields (promtool-clean), no more than
    # telemetry had counted by then.
    from test_exporter import Exporter, metric_value, promtool_accepts

    ex = Exporter(mgr.name, mgr.workdir)
    try:
        text = ex.up_metrics()
        promtool_accepts(text)
        yields = metric_value(text, "squall_manager_core_yields_total")
        assert yields is not None and yields >= st["idle"]["core_yields"], yields
        assert yields <= mgr.stats()["idle"]["core_yields"], yields
    finally:
        ex.stop()
    mgr.finish()
    assert "NFs share the manager's core 0" in mgr.stderr_path.read_text(errors="replace")


def test_the_manager_keeps_its_core_for_rounds_that_move_packets(
    mgr: Manager, tmp_path: Path
) -> None:
    """manager.core_yield_rounds: with the NF on the manager's core, the
    manager gives it the core after a round that moved nothing, or after
    this many rounds in a row that moved packets. At 1 (the default) it
    yields after every round the NF holds packets and defers none; at 4,
    under a generator that moves packets in most rounds, it defers some
    (idle.core_yields_deferred), still yields, and every packet comes out.
    Applied back to 1 while running, it defers no more."""
    from test_priorities import _apply

    def run(n: int) -> dict:
        """Generator on (again) at 100 kpps until n sent in all, then paused."""
        mgr.query("/squall/gen_rate,100000")
        sent = mgr.gen_send(n)
        mgr.wait_accounted(sent)
        st = mgr.stats()
        assert st["tx_pkts"] == sent and st["drop_pkts"] == 0, st
        return st["idle"]

    cfg = gen_chain_config(mgr, "a", 100_000, ring_slots=4096)
    cfg["manager"]["nf_core"] = 0
    mgr.start(cfg)
    idle = run(50_000)
    assert idle["core_yields"] > 0 and idle["core_yields_deferred"] == 0, idle
    mgr.finish()

    cfg["manager"]["core_yield_rounds"] = 4
    mgr.start(cfg)
    idle = run(50_000)
    assert idle["core_yields"] > 0 and idle["core_yields_deferred"] > 0, idle
    cfg["manager"]["core_yield_rounds"] = 1
    _apply(mgr, cfg, tmp_path / "rounds1.yaml")
    before = mgr.stats()["idle"]
    after = run(100_000)
    assert after["core_yields"] > before["core_yields"], (before, after)
    assert after["core_yields_deferred"] == before["core_yields_deferred"], (before, after)
    mgr.finish()


def test_the_wait_before_a_sleep_stretches_with_the_load(mgr: Manager) -> None:
    """idle_after_load: while packets move in most of its rounds (a generator
    at 3 Mpps through one NF), the manager waits idle_after_us / (1 - load)^2
    before a sleep (/squall/stats idle.after_now_us, at most 100x); once they
    stop, its load falls and the wait is idle_after_us again. (1 Mpps kept
    the manager busy 0.88 of its time on an AMD EPYC and 0.40 on a 2.6 GHz
    Xeon, whose rounds are shorter: the rate is set to load any of them.)"""
    cfg = gen_chain_config(mgr, "a", 3_000_000, ring_slots=4096)
    cfg["manager"]["idle_after_load"] = True
    mgr.start(cfg)
    base = mgr.stats()["idle"]["after_us"]

    def stretched() -> bool:
        idle = mgr.stats()["idle"]
        free_pm = max(1000 - min(idle["load_pm"], 1000), 100)
        want_us = base * 1000 * 1000 * 1000 // (free_pm * free_pm) // 1000
        return idle["load_pm"] > 500 and base < idle["after_now_us"] == want_us <= 100 * base

    mgr.wait_for(stretched, 20, "a load over 0.5 and a longer wait")
    sent = mgr.gen_send(0)  # (pauses it now)
    mgr.wait_accounted(sent)
    mgr.wait_for(
        lambda: mgr.stats()["idle"]["after_now_us"] == base, 10, "the wait back to idle_after_us"
    )
    assert mgr.stats()["idle"]["load_pm"] < 100, mgr.stats()["idle"]
    mgr.finish()


@pytest.mark.parametrize("nf_core", [0, 1])
def test_an_nf_on_the_awake_managers_core_stays_awake_between_bursts(
    mgr: Manager, nf_core: int
) -> None:
    """A packet every 100 us, five times the NF's 20 us spin. On the
    manager's own core (0), the spin's yields give the core to the awake
    manager, and that time is not spin (lib/nf.c spin_for_pkts): the NF
    stays awake between packets and sleeps seldom. On another core (1) the
    spin runs out in each gap and the NF sleeps at nearly every packet.
    Either way, once the packets stop, the NF is asleep: the stretched spin
    is bounded."""
    mgr.start(gen_chain_config(mgr, "a", 10_000, nf_core=nf_core))
    sent = mgr.gen_send(10_000)
    mgr.wait_accounted(sent)
    st = mgr.stats()
    nf = next(iter(mgr.nfs().values()))
    assert nf["rx_pkts"] == sent and st["tx_pkts"] == sent, (nf, st)
    if nf_core == 0:
        assert nf["sleeps"] < sent // 10, nf
        assert nf["spin_yields"] > 0, nf
    else:
        assert nf["sleeps"] > sent // 2, nf
    mgr.wait_for(
        lambda: all(n["state"] == "asleep" for n in mgr.nfs().values()), 10, "the NF asleep"
    )
    mgr.finish()
