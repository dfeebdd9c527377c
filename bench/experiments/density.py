"""Density (issue 3): one manager holding 10,000 idle NFs: their memory,
rings included, and how long they take to start."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded

RING_SLOTS = 64
KERNEL_STACK_KB = 16  # x86-64 THREAD_SIZE: not in any per-process figure


def meminfo_kb(field: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def process_kb(pid: int) -> dict[str, int]:
    """Private memory (smaps_rollup) and page tables (status) of one process."""
    out = {"private_kb": 0, "pte_kb": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                out["private_kb"] += int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmPTE:"):
                out["pte_kb"] = int(line.split()[1])
    except FileNotFoundError:
        pass
    return out


def run(ctx: Context) -> None:
    counts = ctx.param("counts", [1000, 5000, 10000], [1000])
    rows = []
    for n in counts:
        svc = config.Service("nf", "squall-nf-noop", instances=n, ring_slots=RING_SLOTS, spin_us=0)
        cfg = config.manager_config(
            ctx.manager_name(),
            ports=[config.GEN_PORT, config.OUT_PORT],
            services=[svc],
            chains=[{"name": "c", "services": ["nf"]}],
            rules=[{"in_port": "in", "chain": "c", "out_port": "out"}],
            region_mb=256,
        )
        avail0 = meminfo_kb("MemAvailable")
        t0 = time.monotonic()
        with ctx.manager(cfg, label=f"{n} idle NFs") as m:
            start_s = time.monotonic() - t0
            time.sleep(1.0)
            nfs = list(m.nfs().values())
            avail1 = meminfo_kb("MemAvailable")
            per = [process_kb(int(nf["pid"])) for nf in nfs]
            starts_ms = [nf["start_us"] / 1000 for nf in nfs]
            asleep = sum(1 for nf in nfs if nf["state"] == "asleep")
            st = m.stats()
        private_kb = sum(p["private_kb"] for p in per)
        pte_kb = sum(p["pte_kb"] for p in per)
        shared_kb = (st["nf_rings_bytes"] + st["nf_ctl_bytes"]) / 1024
        total_kb = private_kb + pte_kb + n * KERNEL_STACK_KB + shared_kb
        row = {
            "nfs": n,
            "asleep": asleep,
            "start_s": start_s,
            "nf_start_ms_p50": statistics.median(starts_ms),
            "nf_start_ms_max": max(starts_ms),
            "private_kb": private_kb,
            "pte_kb": pte_kb,
            "rings_and_ctl_kb": shared_kb,
            "total_gib": total_kb / 2**20,
            "memavailable_drop_gib": (avail0 - avail1) / 2**20,
        }
        ctx.sample("density", **row)
        ctx.log(
            f"{n} NFs: {row['total_gib']:.2f} GiB (MemAvailable -"
            f"{row['memavailable_drop_gib']:.2f} GiB), started in {start_s:.1f} s, "
            f"p50 {row['nf_start_ms_p50']:.2f} ms per NF, {asleep} asleep"
        )
        rows.append(row)

    top = rows[-1]
    k = top["nfs"]
    ctx.summary[f"mem_gib_{k}nf"] = rounded(top["total_gib"])
    ctx.summary[f"memavailable_drop_gib_{k}nf"] = rounded(top["memavailable_drop_gib"])
    ctx.summary[f"kb_per_idle_nf_{k}nf"] = rounded(top["total_gib"] * 2**20 / k, 1)
    ctx.summary[f"start_s_{k}nf"] = rounded(top["start_s"], 1)
    ctx.summary[f"nf_start_ms_p50_{k}nf"] = rounded(top["nf_start_ms_p50"])
    ctx.summary["mem_gib_top"] = ctx.summary[f"mem_gib_{k}nf"]
    ctx.figure(
        Figure(
            "memory",
            "Memory of idle NFs, rings included",
            "idle NFs",
            "memory (GiB)",
            [
                Series(
                    "private + page tables + kernel stacks + rings",
                    [r["nfs"] for r in rows],
                    [r["total_gib"] for r in rows],
                ),
                Series(
                    "drop in MemAvailable",
                    [r["nfs"] for r in rows],
                    [r["memavailable_drop_gib"] for r in rows],
                    style="--s",
                ),
            ],
        )
    )
    ctx.note(
        "Memory: per NF, Private_Clean + Private_Dirty (smaps_rollup) + VmPTE + a 16 KiB "
        "kernel stack, plus its rx and tx rings and control block in the region (hugepages). "
        "The drop in MemAvailable is the system's own view, noisier."
    )
    ctx.note("NFs start one after the other, each waited for until it runs its loop.")


EXPERIMENT = Experiment(
    name="density",
    title="Density: memory and start time of 10,000 idle NFs",
    seed="issue 3 (density); DESIGN §2",
    about=(
        "One manager starts N idle squall-nf-noop NFs in sleep mode (64-slot rings), one "
        "after another, each waited for until it runs its loop; then their memory is summed "
        "from /proc (private pages, page tables, kernel stacks) plus their rings and control "
        "blocks in the shared region. Target: 10,000 idle NFs in at most 3 GiB."
    ),
    run=run,
    summary_keys=("mem_gib_top",),
    targets={"mem_gib_10000nf": "<= 3"},
    needs_generator=False,
    full_minutes=3,
)
