"""Exporter at scale (issue 19): what squallctl serve costs with 1, 1,000 and
10,000 NFs: the poll of the manager's telemetry, a real HTTP scrape of
/metrics (plain, and as Prometheus asks: OpenMetrics, gzip), the render alone,
the sizes, and the dashboard's summary."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

from squall import exporter
from squall.bench import config
from squall.bench.experiment import Context, Experiment, Figure, Series, rounded, spread

RING_SLOTS = 64
# Prometheus's default scrape_timeout: a scrape must render well within it.
TARGET_RENDER_S = 10.0


# What Prometheus 2.x sends with a scrape.
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}


def http_get(url: str, headers: dict[str, str]) -> tuple[float, bytes]:
    """Seconds from the request to the last byte, and the body as sent."""
    req = urllib.request.Request(url, headers=headers)
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=60) as r:
        body = bytes(r.read())
    return time.monotonic() - t0, body


def measure(name: str, nf_detail: bool) -> dict[str, float]:
    """squallctl serve's poller and HTTP server in this process, on a free
    loopback port: a poll, then a scrape over HTTP with nothing rendered yet
    (the render, gzip and transfer a scraper waits for); again as Prometheus
    asks; and the render alone, timed in the process."""
    poller = exporter.Poller(name=name, interval_s=1.0)
    poller.nf_detail = nf_detail
    server = exporter.Server(("127.0.0.1", 0), poller)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        t0 = time.monotonic()
        poller.poll_once()
        poll_s = time.monotonic() - t0
        if not poller.state.up:
            raise RuntimeError(f"exporter could not read manager {name}: {poller.state.error}")
        http_s, body = http_get(url, {"Accept": "text/plain"})
        poller.poll_once()  # a new snapshot: nothing rendered
        http_gzip_s, gz = http_get(url, PROMETHEUS_HEADERS)
        poller.poll_once()
        t0 = time.monotonic()
        poller.exposition("text/plain")
        render_s = time.monotonic() - t0
        t0 = time.monotonic()
        summary = json.dumps(exporter.summary(poller)).encode()
        summary_s = time.monotonic() - t0
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        poller.stop()
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {
        "poll_s": poll_s,
        "render_s": render_s,
        "http_s": http_s,
        "http_gzip_s": http_gzip_s,
        "exposition_bytes": len(body),
        "exposition_gzip_bytes": len(gz),
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
                "http_s",
                "http_gzip_s",
                "exposition_bytes",
                "exposition_gzip_bytes",
                "samples",
            ):
                row[f"{f}_{key}"] = spread(r[f] for r in runs[detail])
        row["summary_bytes"] = spread(r["summary_bytes"] for r in runs[True])
        rows.append(row)
        ctx.log(
            f"{n} NFs: poll {row['poll_s_all']['median']:.3f} s, HTTP scrape "
            f"{row['http_s_all']['median']:.3f} s (gzip {row['http_gzip_s_all']['median']:.3f} s), "
            f"render {row['render_s_all']['median']:.3f} s, "
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
    ctx.summary[f"scrape_http_s_{k}nf"] = rounded(top["http_s_all"]["median"])
    ctx.summary[f"scrape_http_gzip_s_{k}nf"] = rounded(top["http_gzip_s_all"]["median"])
    ctx.summary[f"scrape_http_gzip_s_per_service_{k}nf"] = rounded(
        top["http_gzip_s_service"]["median"]
    )
    ctx.summary[f"exposition_mb_{k}nf"] = rounded(top["exposition_bytes_all"]["median"] / 1e6)
    ctx.summary[f"exposition_gzip_mb_{k}nf"] = rounded(
        top["exposition_gzip_bytes_all"]["median"] / 1e6
    )
    ctx.summary[f"exposition_kb_per_service_{k}nf"] = rounded(
        top["exposition_bytes_service"]["median"] / 1e3
    )
    ctx.summary[f"summary_kb_{k}nf"] = rounded(top["summary_bytes"]["median"] / 1e3)
    ctx.summary["scrape_http_s_top"] = ctx.summary[f"scrape_http_gzip_s_{k}nf"]
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
            "Exporter: time to read the manager and to scrape /metrics over HTTP",
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
                    "HTTP GET /metrics as Prometheus (gzip), per-NF series",
                    xs,
                    med("http_gzip_s_all"),
                    lo("http_gzip_s_all"),
                    hi("http_gzip_s_all"),
                ),
                Series(
                    "HTTP GET /metrics plain, per-NF series",
                    xs,
                    med("http_s_all"),
                    lo("http_s_all"),
                    hi("http_s_all"),
                    style="-^",
                ),
                Series(
                    "render alone, per-NF series",
                    xs,
                    med("render_s_all"),
                    lo("render_s_all"),
                    hi("render_s_all"),
                    style=":v",
                ),
                Series(
                    "HTTP GET /metrics as Prometheus, per-service only",
                    xs,
                    med("http_gzip_s_service"),
                    lo("http_gzip_s_service"),
                    hi("http_gzip_s_service"),
                    style="--s",
                ),
                Series(
                    f"target: scrape < {TARGET_RENDER_S:g} s (default scrape timeout)",
                    xs,
                    [TARGET_RENDER_S] * len(xs),
                    style=":",
                    color="k",
                ),
            ],
            xscale="log",
            yscale="log",
            caption=(
                "Median of the repetitions, bars min..max. An HTTP GET right after a poll: "
                "the render, the gzip and the transfer, as a scraper waits for them."
            ),
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
        "squall-bench process, which runs squallctl serve's poller and HTTP server on a free "
        "loopback port: poll_once(); an HTTP GET of /metrics (text/plain); a new poll and a "
        "GET as Prometheus sends it (OpenMetrics, Accept-Encoding: gzip), each the first "
        "of its snapshot, so it waits for the render; then the render alone in the process; "
        "then the summary JSON."
    )


EXPERIMENT = Experiment(
    name="exporter_scale",
    title="Exporter at scale: /metrics with 1, 1,000 and 10,000 NFs",
    seed="issue 19 (observability)",
    about=(
        "One manager with N idle NFs; squallctl serve's poller reads every telemetry command "
        "(/squall/nfs in pages of 16) and its HTTP server is scraped (GET /metrics, plain and "
        "as Prometheus asks: OpenMetrics, gzip) with per-NF series and with per-service "
        "series only; the dashboard's summary is aggregated. Reported: poll time, HTTP "
        "scrape time, render time, exposition size (plain and gzipped) and samples. Target: "
        "a scrape completes well within Prometheus's default 10 s timeout at 10,000 NFs."
    ),
    run=run,
    summary_keys=("scrape_http_s_top",),
    targets={"scrape_http_gzip_s_10000nf": f"<= {TARGET_RENDER_S:g}"},
    needs_generator=False,
    full_minutes=4,
)
