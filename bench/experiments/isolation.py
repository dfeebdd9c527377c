"""Isolated NFs against shared ones (issue 16; seed 004: architecture #2,
double buffer + semaphore, against #4, isolated buffers + semaphore, a copy
per hop): throughput and latency against frame size and against the number
of NFs on one core, side by side in one run; what an isolated NF's private
region costs in memory; and the hostile tries of tests/nfs/hostile.c run
against an isolated NF next to a chain whose traffic must not notice."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from squall.bench import config
from squall.bench.experiment import (
    Context,
    Experiment,
    Figure,
    Series,
    rounded,
    spread,
    spread_series,
)
from squall.bench.paths import BUILD
from squall.bench.trial import gen_trial, latency_at

SIZES = [64, 256, 512, 1024, 1518]
COUNTS = [1, 10, 100, 1000]
CASES = ("shared", "isolated")
SANDBOX = {"shared": "none", "isolated": "isolated"}
RING_SLOTS = 256
HOSTILE = BUILD / "tests" / "nfs" / "squall-nf-hostile"
# Each try and what it must come to, per sandbox mode it is tried in (a
# mode it is not listed for allows it, or it aims at what only isolation
# takes away): a "failed" said by the NF, or the exit reason the manager
# gives it. The isolated filter is an allow list (mgr/sandbox.c): a try
# that first scans a directory for its target (region, kill, ptrace) is
# killed at the scan (SIGSYS); in a sanitizer build (the deny list) it runs
# and finds nothing. docs/nf-api.md, "Threat model", says what each is.
SIGSYS, SIGSEGV, SIGKILL = "signal 31", "signal 11", "signal 9"
MODES = ("none", "strict", "isolated")
Want = str | tuple[str, ...]


def every(want: Want) -> dict[str, Want]:
    return dict.fromkeys(MODES, want)


def sandboxed(want: Want, none: Want | None = None) -> dict[str, Want]:
    return {"strict": want, "isolated": want} | ({"none": none} if none else {})


ATTACKS: dict[str, dict[str, Want]] = {
    "region": {"isolated": (SIGSYS, "failed")},  # open and map the shared region's file
    "peek": {"isolated": SIGSEGV},  # read the shared region's address
    "poke": {"isolated": SIGSEGV},  # write there
    "snoop": {"isolated": "failed"},  # find another chain's packets in what it maps
    "ctl": {"isolated": "failed"},  # write another NF's control block
    "ring": {"isolated": "failed"},  # write another NF's rings
    "ptrace": sandboxed(SIGSYS, "failed"),  # another NF: its own uid
    "kill": {"none": "failed", "strict": "failed", "isolated": (SIGSYS, "failed")},
    "socket": sandboxed(SIGSYS),
    "fork": sandboxed(SIGSYS),
    "setuid": sandboxed(SIGSYS, "failed"),
    "mount": sandboxed(SIGSYS, "failed"),
    "alloc": every("stopped"),  # at memory_mb
    "shmalloc": every(SIGKILL),  # shared memory: memory_mb's cgroup
    "hugealloc": sandboxed((SIGSYS, "failed"), "failed"),  # huge pages of its own
    "spin": every("watchdog"),
    "fds": every("listed: 0:chr 1:fifo 2:fifo"),  # the manager's descriptors
    "accept": every("failed"),  # a socket of the manager's
    "tiocsti": sandboxed(SIGSYS, "failed"),  # the operator's terminal
    "procmem": {"none": "failed", "strict": "failed", "isolated": (SIGSYS, "failed")},
    "mgrpid": {"none": "succeeded", "strict": "succeeded"},  # the other NF must live on
    "extbuf": every("succeeded"),  # the manager must not follow the header
    "indirect": every("succeeded"),
    "pool": {"none": "outside the region", "strict": "outside the region"},
}
# --quick's: one of each kind (the region, a call, a descriptor, a header)
QUICK_ATTACKS = ["peek", "socket", "fds", "extbuf"]
BAD_FRAMES = 20
# how the hostile NF's report of a try begins (spin's "spinning" is none)
SAID = ("succeeded", "failed", "stopped", "listed", "outside the region")


def make_cfg(ctx: Context, case: str, n: int, size: int) -> dict[str, Any]:
    svc = config.Service("nf", "squall-nf-fwd", instances=n, ring_slots=RING_SLOTS).to_dict()
    svc["sandbox"] = SANDBOX[case]
    room = 512 if size <= 384 else 2176
    return config.manager_config(
        ctx.manager_name(),
        ports=[config.GEN_PORT, config.OUT_PORT],
        services=[],
        chains=[{"name": "c", "services": ["nf"]}],
        rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
        gen=config.generator([size], flows=min(65536, max(1024, 16 * n)), rate_pps=0),
        region_mb=256 if n <= 100 else 512,
        mbufs=min(262144, max(16384, 1 << (RING_SLOTS * n).bit_length())) - 1,
        mbuf_data_room=room,
    ) | {"services": [svc]}


def measure(
    ctx: Context, case: str, n: int, size: int, seconds: float, warm_s: float
) -> dict[str, Any]:
    with ctx.manager(make_cfg(ctx, case, n, size), label=f"{case} {n} NFs {size} B") as m:
        gen_trial(m, math.inf, warm_s)
        top = gen_trial(m, math.inf, seconds)
        half = latency_at(m, ["c"], max(1.0, 0.5 * top.fwd_rate_pps), seconds)
        nfs = list(m.nfs().values())
        private_kb = max((int(nf.get("private_kb", 0)) for nf in nfs), default=0)
    return {
        "mpps": top.fwd_rate_pps / 1e6,
        "gbps": top.fwd_rate_pps * (size + 20) * 8 / 1e9,
        "p50_us_half": half.p50_ns / 1000,
        "p99_us_half": half.p99_ns / 1000,
        "private_kb": private_kb,
    }


def write_bad_pcap(path: Path) -> Path:
    """BAD_FRAMES UDP frames for the hostile NF's chain (its MACs are not the
    generator's, so the snoop's marker is only ever in the other chain)."""
    from scapy.all import IP, UDP, Ether, Raw, wrpcap

    frames = [
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:bb")
        / IP(src="10.9.0.1", dst="10.9.0.2")
        / UDP(sport=1000 + i, dport=9)
        / Raw(b"x" * 32)
        for i in range(BAD_FRAMES)
    ]
    wrpcap(str(path), frames)
    return path


def attack(ctx: Context, attempt: str, mode: str, marker: str, bad_pcap: Path) -> dict[str, Any]:
    """One try by a hostile NF of sandbox @p mode while the generator's
    chain runs next to it. Contained: the try came to what ATTACKS says,
    the manager still runs, and the other chain lost nothing."""
    args = ["--try", attempt] + (["--marker", marker] if attempt == "snoop" else [])
    bad = {
        "name": "bad",
        "exec": str(HOSTILE),
        "args": args,
        "sandbox": mode,
        "ring_slots": RING_SLOTS,
        "restart": "never",
        "memory_mb": 128,
        # (snoop holds its packets while it scans, ~0.5 s: not a hang)
        "watchdog_ms": 300 if attempt == "spin" else 2000,
    }
    # A ring that rides out the core the two NFs share being held by the
    # other for a scheduler slice or two (40 ms at 100 kpps): a stall is
    # not a breach, a lost packet would read as one.
    good = config.Service("fwd", "squall-nf-fwd", ring_slots=4096).to_dict()
    cfg = config.manager_config(
        ctx.manager_name(),
        ports=[
            config.GEN_PORT,
            config.OUT_PORT,
            {"name": "bad_in", "devargs": f"net_pcap0,rx_pcap={bad_pcap}"},
            {"name": "bad_out", "devargs": "net_null2,no-rx=1"},
        ],
        services=[],
        chains=[{"name": "good", "services": ["fwd"]}, {"name": "bad", "services": ["bad"]}],
        rules=[
            {"in_port": "in", "chain": "good", "out_port": "out"},
            {"in_port": "bad_in", "chain": "bad", "out_port": "bad_out"},
        ],
        gen=config.generator([64], flows=64, rate_pps=100_000),
    ) | {"services": [good, bad]}
    # (the hostile NF may end at its first packet, before both are seen live)
    with ctx.manager(cfg, label=f"attack {attempt}", want_nfs=1) as m:
        said = ""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for line in m.log_path.read_text(errors="replace").splitlines():
                tail = line.split(f"squall-nf-hostile: {attempt}: ", 1)
                if len(tail) == 2 and tail[1].startswith(SAID):
                    said = tail[1]
            nf = m.nfs().get("bad#0", {})
            if said or nf.get("exit_reason"):
                break
            time.sleep(0.05)
        outcome = said or str(m.nfs().get("bad#0", {}).get("exit_reason", ""))
        time.sleep(0.3)
        m.set_rate(0)
        # what is in flight in the good chain comes out (a sleeping NF's
        # batch waits up to its wake timeout)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            chain = m.chains()["good"]
            if chain["rx_pkts"] == chain["tx_pkts"]:
                break
            time.sleep(0.05)
        st = m.stats()
        running = m.proc is not None and m.proc.poll() is None
    lost = int(chain["rx_pkts"]) - int(chain["tx_pkts"])
    contained = outcome.startswith(ATTACKS[attempt][mode]) and running and lost == 0
    return {
        "outcome": outcome,
        "contained": contained,
        "good_pkts": int(chain["tx_pkts"]),
        "good_lost": lost,
        "drops": st.get("drops", {}),
    }


def run(ctx: Context) -> None:
    sizes = ctx.param("sizes", SIZES, [64, 1518])
    counts = ctx.param("counts", COUNTS, [1, 10])
    seconds = ctx.param("seconds", 2.0, 0.5)
    warm_s = ctx.param("warmup_s", 1.0, 0.2)
    by_size: dict[tuple[str, int], list[dict[str, Any]]] = {}
    by_n: dict[tuple[str, int], list[dict[str, Any]]] = {}
    # Interleaved per repetition: a slow stretch of the shared machine hits
    # both cases alike.
    for rep in range(ctx.reps):
        for size in sizes:
            for case in CASES:
                r = measure(ctx, case, 1, size, seconds, warm_s)
                ctx.sample("size", case=case, size=size, rep=rep, **r)
                ctx.log(
                    f"{case:8} 1 NF {size:5} B: {r['mpps']:.3f} Mpps, p99 at half "
                    f"{r['p99_us_half']:.0f} us"
                )
                by_size.setdefault((case, size), []).append(r)
        for n in counts:
            for case in CASES:
                r = by_size[case, 64][-1] if n == 1 and 64 in sizes else None
                r = r or measure(ctx, case, n, 64, seconds, warm_s)
                ctx.sample("nfs", case=case, nfs=n, rep=rep, **r)
                ctx.log(f"{case:8} {n:5} NFs 64 B: {r['mpps']:.3f} Mpps")
                by_n.setdefault((case, n), []).append(r)

    def med(res: dict, case: str, x: int, key: str) -> float:
        return spread(r[key] for r in res[case, x])["median"]

    for size in sizes:
        for case in CASES:
            ctx.summary[f"mpps_1nf_{size}b_{case}"] = rounded(med(by_size, case, size, "mpps"))
        ctx.summary[f"ratio_isolated_vs_shared_1nf_{size}b"] = rounded(
            med(by_size, "isolated", size, "mpps") / med(by_size, "shared", size, "mpps")
        )
    for n in counts:
        ctx.summary[f"ratio_isolated_vs_shared_{n}nf_64b"] = rounded(
            med(by_n, "isolated", n, "mpps") / med(by_n, "shared", n, "mpps")
        )
        for case in CASES:
            ctx.summary[f"p99_us_{n}nf_{case}_half_load"] = rounded(
                med(by_n, case, n, "p99_us_half"), 1
            )
    ctx.summary["isolated_nf_private_kb"] = max(
        int(r["private_kb"]) for (c, _), rs in by_size.items() if c == "isolated" for r in rs
    )

    bad_pcap = write_bad_pcap(ctx.workdir / "bad.pcap")
    marker = "0200000000010200000000aa"  # the generator's MACs: in every one of its frames
    tried = contained = 0
    for mode in ctx.param("modes", list(MODES), ["isolated"]):
        for attempt in ctx.param("attacks", list(ATTACKS), QUICK_ATTACKS):
            if mode not in ATTACKS[attempt]:
                continue
            a = attack(ctx, attempt, mode, marker, bad_pcap)
            ctx.sample("attack", attempt=attempt, mode=mode, **a)
            ctx.log(
                f"attack {attempt:9} {mode:8}: {a['outcome']!r} -> "
                f"{'contained' if a['contained'] else 'NOT CONTAINED'}; other chain "
                f"{a['good_pkts']} pkts, {a['good_lost']} lost; drops "
                f"{ {k: v for k, v in a['drops'].items() if v} }"
            )
            tried += 1
            contained += a["contained"]
    ctx.summary["attacks_tried"] = tried
    ctx.summary["attacks_contained"] = contained

    def series(res: dict, xs: list[int], case: str, key: str, label: str, style: str) -> Series:
        return spread_series(label, xs, [spread(r[key] for r in res[case, x]) for x in xs], style)

    ctx.figure(
        Figure(
            "size",
            "1-NF chain: throughput against frame size, shared and isolated",
            "frame size (B)",
            "throughput (Mpps)",
            [
                series(by_size, sizes, "shared", "mpps", "shared (seed 004 #2)", "-o"),
                series(by_size, sizes, "isolated", "mpps", "isolated (#4, a copy per hop)", "-s"),
            ],
            caption="The L2 forwarder, sleeping when idle, on core 1; the manager and its "
            "generator (unpaced) on core 0. Isolated: the packet copied into the NF's "
            "private region and its result copied back.",
        )
    )
    ctx.figure(
        Figure(
            "nfs",
            "Throughput against NFs on one core (64 B), shared and isolated",
            "NFs on core 1",
            "throughput (Mpps)",
            [
                series(by_n, counts, "shared", "mpps", "shared", "-o"),
                series(by_n, counts, "isolated", "mpps", "isolated", "-s"),
            ],
            xscale="log",
            caption="Traffic spread over every NF by a symmetric flow hash (as in e1).",
        )
    )
    ctx.figure(
        Figure(
            "latency",
            "p99 latency at half of each point's throughput (64 B)",
            "NFs on core 1",
            "rx-to-tx p99 (us)",
            [
                series(by_n, counts, "shared", "p99_us_half", "shared p99", "-o"),
                series(by_n, counts, "isolated", "p99_us_half", "isolated p99", "-s"),
            ],
            xscale="log",
            yscale="log",
        )
    )
    ctx.note(
        "isolated_nf_private_kb is one isolated NF's private region (its pool of "
        f"max_outstanding_pkts mbufs, {RING_SLOTS}-slot rings, its control block) at the "
        "data room the largest frame needs: memory each isolated NF adds, mapped by it "
        "and the manager only."
    )
    ctx.note(
        "The attacks are tests/nfs/hostile.c's tries, each by an NF of each sandbox mode "
        "it applies to (none, strict, isolated) in a chain of its own next to a chain the "
        "generator feeds at 100 kpps; contained means the try came to what it must "
        "(it failed, or ended the NF: seccomp's SIGSYS, SIGSEGV, the watchdog, "
        "RLIMIT_DATA, the memory cgroup's OOM kill; or, for a header or region header "
        "it rewrote, the manager did not act on it), the manager kept running and the "
        "other chain lost no packet (docs/nf-api.md, Threat model)."
    )


EXPERIMENT = Experiment(
    name="isolation",
    title="Isolated NFs: what a private region and a copy per hop cost, and what they stop",
    seed="seed 004 architectures #2 and #4; issue 16 (untrusted NFs)",
    about=(
        "The L2 forwarder in a 1-NF chain with its service at `sandbox: none` (shared) and "
        "`sandbox: isolated` (a private region, a copy in and out per hop, namespaces, "
        "the strict sandbox), interleaved per repetition: the forwarded rate with the "
        "generator unpaced, and the latency at half of it, against frame size (64 to 1518 "
        "B) and against the number of NFs on core 1 (1 to 1000, traffic spread by flow "
        "hash). Then each hostile try, by an NF of each sandbox mode it applies to, next "
        "to a busy chain. 3 repetitions (1 with --quick, which runs 64 and 1518 B and 1 and "
        "10 NFs, and the tries in isolated mode only)."
    ),
    run=run,
    summary_keys=(
        "ratio_isolated_vs_shared_1nf_64b",
        "ratio_isolated_vs_shared_1nf_1518b",
        "isolated_nf_private_kb",
        "attacks_tried",
        "attacks_contained",
    ),
    targets={
        "ratio_isolated_vs_shared_1nf_64b": ">= 0.5",
        "attacks_tried": ">= 30",
        "attacks_contained": "== attacks_tried",
    },
    full_minutes=12,
)
