"""Exporter at scale (issue 19): what squallctl serve costs with 1, 1,000 and
10,000 NFs: the poll of the manager's telemetry, the Prometheus exposition
(time to render, size) and the dashboard's summary."""

from __future__ import annotations

import json
import time

from squall import exporter
from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread

RING_SLOTS = 64
# Prometheus's default scrape_timeout: a scrape must render well within it.
TARGET_RENDER_S = 10.0


def measure(name: str, nf_detail: bool) -> dict[str, float]:
    """One poll and one render of each format, timed, in this process."""
    poller = exporter.Poller(name=name, interval_s=1.0)
    poller.nf_detail = nf_detail
    t0 = time.monotonic()
    poller.poll_once()
    poll_s = time.monotonic() - t0
    if not poller.state.up:
        raise RuntimeError(f"exporter could not read manager {name}: {poller.state.error}")
    t0 = time.monotonic()
    body, _ = poller.exposition("text/plain")
    render_s = time.monotonic() - t0
    t0 = time.monotonic()
    gz, _ = poller.exposition("text/plain", gzipped=True)
    gzip_s = time.monotonic() - t0
    t0 = time.monotonic()
    summary = json.dumps(exporter.summary(poller)).encode()
    summary_s = time.monotonic() - t0
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {
        "poll_s": poll_s,
        "render_s": render_s,
        "scrape_s": poll_s + render_s,
        "exposition_bytes": len(body),
        "exposition_gzip_bytes": len(gz),
        "gzip_s": gzip_s,
        "samples": samples,
        "summary_bytes": len(summary),
        "summary_s": summary_s,
    }


def run(ctx: Context) -> None:
    counts = ctx.param("counts", [1, 1000, 10000], [1, 100])
    reps = ctx.reps
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
        with ctx.manager(cfg, label=f"{n} idle NFs") as m:
            time.sleep(1.0)
            runs = {True: [], False: []}  # type: dict[bool, list[dict[str, float]]]
            for _ in range(reps):
                for detail in (True, False):
                    r = measure(m.name, detail)
                    runs[detail].append(r)
                    ctx.sample("scrape", nfs=n, nf_metrics=detail, **r)
        row = {"nfs": n}
        for detail, key in ((True, "all"), (False, "service")):
            for f in (
                "poll_s",
                "render_s",
                "gzip_s",
                "scrape_s",
                "exposition_bytes",
                "exposition_gzip_bytes",
                "samples",
            ):
                row[f"{f}_{key}"] = spread(r[f] for r in runs[detail])
        row["summary_bytes"] = spread(r["summary_bytes"] for r in runs[True])
        rows.append(row)
        ctx.log(
            f"{n} NFs: poll {row['poll_s_all']['median']:.3f} s, render "
            f"{row['render_s_all']['median']:.3f} s, "
            f"{row['exposition_bytes_all']['median'] / 1e6:.2f} MB "
            f"({row['samples_all']['median']:.0f} samples); per-service only: render "
            f"{row['render_s_service']['median']:.3f} s, "
            f"{row['exposition_bytes_service']['median'] / 1e3:.1f} kB; summary "
            f"{row['summary_bytes']['median'] / 1e3:.1f} kB"
        )
    top = rows[-1]
    k = top["nfs"]
    ctx.summary[f"poll_s_{k}nf"] = rounded(top["poll_s_all"]["median"])
    ctx.summary[f"render_s_{k}nf"] = rounded(top["render_s_all"]["median"])
    ctx.summary[f"exposition_mb_{k}nf"] = rounded(top["exposition_bytes_all"]["median"] / 1e6)
    ctx.summary[f"exposition_gzip_mb_{k}nf"] = rounded(
        top["exposition_gzip_bytes_all"]["median"] / 1e6
    )
    ctx.summary[f"exposition_kb_per_service_{k}nf"] = rounded(
        top["exposition_bytes_service"]["median"] / 1e3
    )
    ctx.summary[f"summary_kb_{k}nf"] = rounded(top["summary_bytes"]["median"] / 1e3)
    ctx.summary["render_s_top"] = ctx.summary[f"render_s_{k}nf"]
    xs = [r["nfs"] for r in rows]

    def med(key: str, scale: float = 1.0) -> list[float | None]:
        return [r[key]["median"] * scale for r in rows]

    def lo(key: str, scale: float = 1.0) -> list[float | None]:
        return [r[key]["min"] * scale for r in rows]

    def hi(key: str, scale: float = 1.0) -> list[float | None]:
        return [r[key]["max"] * scale for r in rows]

    ctx.figure(
        Figure(
            "time",
            "Exporter: time to read the manager and to render /metrics",
            "NFs",
            "time (s)",
            [
                Series(
                    "poll of telemetry (every NF)",
                    xs,
                    med("poll_s_all"),
                    lo("poll_s_all"),
                    hi("poll_s_all"),
                ),
                Series(
                    "render /metrics, per-NF series",
                    xs,
                    med("render_s_all"),
                    lo("render_s_all"),
                    hi("render_s_all"),
                ),
                Series(
                    "render /metrics, per-service only",
                    xs,
                    med("render_s_service"),
                    lo("render_s_service"),
                    hi("render_s_service"),
                    style="--s",
                ),
                Series(
                    f"target: render < {TARGET_RENDER_S:g} s (default scrape timeout)",
                    xs,
                    [TARGET_RENDER_S] * len(xs),
                    style=":",
                    color="k",
                ),
            ],
            xscale="log",
            yscale="log",
            caption="Median of the repetitions, bars min..max.",
        )
    )
    ctx.figure(
        Figure(
            "size",
            "Exporter: size of one /metrics exposition and of the dashboard's summary",
            "NFs",
            "size (MB)",
            [
                Series("/metrics, per-NF series", xs, med("exposition_bytes_all", 1e-6)),
                Series(
                    "/metrics gzipped (as Prometheus asks), per-NF series",
                    xs,
                    med("exposition_gzip_bytes_all", 1e-6),
                    style="-^",
                ),
                Series(
                    "/metrics, per-service only",
                    xs,
                    med("exposition_bytes_service", 1e-6),
                    style="--s",
                ),
                Series(
                    "dashboard summary (one SSE message)",
                    xs,
                    med("summary_bytes", 1e-6),
                    style=":^",
                ),
            ],
            xscale="log",
            yscale="log",
        )
    )
    ctx.note(
        "The exporter polls the manager once per interval (default 1 s; a poll that takes "
        "longer waits as long as it took) and renders /metrics once per poll whatever the "
        "number of scrapers: a scrape costs the render only, the poll sets how fresh it is."
    )
    ctx.note(
        "NFs are idle squall-nf-noop (sleep mode, 64-slot rings). Measured in the "
        "squall-bench process: poll_once(), then the text exposition, then the summary JSON."
    )


EXPERIMENT = Experiment(
    name="exporter_scale",
    title="Exporter at scale: /metrics with 1, 1,000 and 10,000 NFs",
    seed="issue 19 (observability)",
    about=(
        "One manager with N idle NFs; squallctl serve's poller reads every telemetry command "
        "(/squall/nfs in pages of 16) and renders the Prometheus exposition with per-NF series "
        "and with per-service series only; the dashboard's summary is aggregated. Reported: "
        "poll time, render time, exposition size and samples. Target: a scrape renders well "
        "within Prometheus's default 10 s timeout at 10,000 NFs."
    ),
    run=run,
    summary_keys=("render_s_top",),
    targets={"render_s_10000nf": f"<= {TARGET_RENDER_S:g}"},
    needs_generator=False,
    full_minutes=4,
)
