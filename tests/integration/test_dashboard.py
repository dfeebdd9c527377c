"""The dashboard as a person sees it: headless Chromium (Debian's chromium and
chromium-driver, driven by selenium) loads squallctl serve's page against a
manager carrying generator traffic; the rendered topology and rates match
telemetry; a service opened in the topology lists its instances; a killed NF
turns dead on the page and its exit appears in the event log. And the page's
data: /api/nfs searched, sorted and paged; `--no-nf-metrics`; config edits
in the event log. At 1400x1000, with a chain carrying traffic one way of
two: the rates chart's time axis reads as now, from its first sample; each
direction's row shows its own rate; the latency histogram's labels stay
clear of its title and inside the chart; `?snapshot=1` lets
`chromium --headless --virtual-time-budget` finish with a screenshot
(build/test-output/dashboard-snapshot.png).

The screenshot goes to build/test-output/dashboard.png. To refresh the one
the docs show (docs/img/dashboard.png), run the test with
SQUALL_DOCS_SCREENSHOT=1 (docs/observability.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BUILD, REPO, Manager
from test_apply import squallctl
from test_exporter import Exporter, chain_config, http_get, metric_value, require_tool, wait_until

try:
    from selenium import webdriver
except ImportError:  # (a failure, not a skip: scripts/setup.sh installs it)
    webdriver = None

SCREENSHOT = BUILD / "test-output" / "dashboard.png"
DOCS_SCREENSHOT = REPO / "docs" / "img" / "dashboard.png"
RATE = 3000


@pytest.fixture
def browser() -> Iterator[Any]:
    assert webdriver is not None, "selenium not importable: pip install the dev extras (setup.sh)"
    chromium = require_tool("chromium", "chromium")
    chromedriver = require_tool("chromedriver", "chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1900"):
        opts.add_argument(arg)
    from selenium.webdriver.chrome.service import Service

    drv = webdriver.Chrome(service=Service(chromedriver), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


def telemetry_rate(mgr: Manager, chain: str, secs: float = 2.0) -> float:
    a, t0 = mgr.chains()[chain]["tx_pkts"], time.monotonic()
    time.sleep(secs)
    b, t1 = mgr.chains()[chain]["tx_pkts"], time.monotonic()
    return float(b - a) / (t1 - t0)


def test_dashboard_shows_topology_rates_and_a_dead_nf(
    mgr: Manager, browser: Any, tmp_path: Path
) -> None:
    cfg = chain_config(mgr)
    cfg["generator"]["rate_pps"] = RATE
    # fwd stays dead once killed (the default would restart it at once)
    for svc in cfg["services"]:
        if svc["name"] == "fwd":
            svc["restart"] = "never"
    mgr.start(cfg)
    ex = Exporter(mgr.name, mgr.workdir)
    try:
        browser.get(ex.url + "/")

        # The page re-renders every poll: read it in one script call, never
        # through element handles that the next render makes stale.
        def attr(css: str, name: str) -> str | None:
            v = browser.execute_script(
                "const e = document.querySelector(arguments[0]);"
                "return e ? e.getAttribute(arguments[1]) : null;",
                css,
                name,
            )
            return None if v is None else str(v)

        def exists(css: str) -> bool:
            return bool(
                browser.execute_script("return !!document.querySelector(arguments[0]);", css)
            )

        # The topology: gen -> rule 0 -> web-chain -> mon -> fwd -> out, as telemetry says.
        wait_until(
            lambda: exists('#topology [data-kind="chain"][data-name="web-chain"]'), 20, "chain"
        )
        names = browser.execute_script(
            "return [...document.querySelectorAll('#topology .flow[data-rule=\"0\"] .node')]"
            ".map(n => [n.dataset.kind, n.dataset.name]);"
        )
        hops = mgr.chains()["web-chain"]["hops"].split(",")
        assert names == [
            ["port", "gen"],
            ["rule", "r0"],
            ["chain", "web-chain"],
            *[["service", h] for h in hops],
            ["port", "out"],
        ], names
        nfs = mgr.nfs()
        shown = browser.execute_script(
            "return [...document.querySelectorAll("
            '\'#topology .node[data-kind="service"][data-name="fwd"] .state\')]'
            ".reduce((a, c) => a + Number(c.dataset.count), 0);"
        )
        assert shown == sum(1 for k in nfs if k.startswith("fwd#")) == 2, shown

        # A rate read from the page agrees with one measured from telemetry.
        want = telemetry_rate(mgr, "web-chain")
        assert abs(want - RATE) < RATE * 0.25, want

        def page_rate() -> float | None:
            v = attr('#topology .node[data-kind="chain"][data-name="web-chain"]', "data-tx-pps")
            return float(v) if v and abs(float(v) - want) < want * 0.25 else None

        wait_until(page_rate, 20, f"the page's web-chain tx rate near {want:.0f}")
        tile = float(attr("#tile-tx-pps", "data-value") or 0)
        assert abs(tile - want) < want * 0.25, (tile, want)

        # A click on a service opens its instances, each with its state.
        browser.execute_script(
            'document.querySelector(\'#topology .node[data-kind="service"][data-name="fwd"]\')'
            ".click();"
        )

        def instances() -> dict[str, str]:
            got = browser.execute_script(
                "return [...document.querySelectorAll("
                "'#topology .instances[data-service=\"fwd\"] .inst')]"
                ".map(i => [i.dataset.nf, i.dataset.state]);"
            )
            return {str(k): str(v) for k, v in got}

        live = {k: str(v["state"]) for k, v in mgr.nfs().items() if k.startswith("fwd#")}
        wait_until(lambda: set(instances()) == set(live), 20, "fwd's instances in the topology")

        # Kill an NF: the page shows it dead, and its exit in the event log.
        victim = nfs["fwd#1"]
        os.kill(int(victim["pid"]), signal.SIGKILL)
        mgr.wait_for(lambda: mgr.nfs()["fwd#1"]["state"] == "dead", 10, "fwd#1 dead")
        browser.execute_script(
            "const s = document.querySelector('#nf-service'); s.value = 'fwd';"
            "s.dispatchEvent(new Event('input'));"
        )
        wait_until(
            lambda: exists('#nfs tr[data-nf="fwd#1"][data-state="dead"]'), 20, "fwd#1 dead, page"
        )
        wait_until(
            lambda: browser.execute_script(
                "return [...document.querySelectorAll('#events li[data-kind=\"exit\"]')]"
                ".some(li => li.textContent.includes('fwd#1'));"
            ),
            20,
            "fwd#1's exit in the event log",
        )
        wait_until(
            lambda: exists(
                '#topology .node[data-name="fwd"] .state[data-state="dead"][data-count="1"]'
            ),
            20,
            "the topology counts fwd's dead NF",
        )
        wait_until(lambda: instances().get("fwd#1") == "dead", 20, "fwd#1 dead, topology")
        assert instances()["fwd#0"] in ("awake", "asleep", "waking"), instances()
        # Let the histograms and the rate chart fill, then keep the picture for the docs.
        time.sleep(2)
        height = browser.execute_script(
            "const r = document.querySelector('section.grid').getBoundingClientRect();"
            "return Math.ceil(r.bottom);"
        )
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {
                "width": 1400,
                "height": min(int(height), 4000),
                "deviceScaleFactor": 1,
                "mobile": False,
            },
        )
        time.sleep(1)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(SCREENSHOT))
        print(f"dashboard screenshot: {SCREENSHOT}")
        if os.environ.get("SQUALL_DOCS_SCREENSHOT") == "1":
            shutil.copyfile(SCREENSHOT, DOCS_SCREENSHOT)
        sent = mgr.gen_send(0)
        mgr.wait_accounted(sent)
    finally:
        ex.stop()
    mgr.finish()


def nf_page(ex: Exporter, **query: object) -> dict[str, Any]:
    return dict(json.loads(http_get(ex.url + "/api/nfs?" + urllib.parse.urlencode(query))))


def test_the_nf_list_is_searched_sorted_and_paged(mgr: Manager, tmp_path: Path) -> None:
    """/api/nfs, which the NF table and the topology's instance lists read: a
    search by name or pid, a service, pages that together hold every NF once,
    and each sort order. Then config edits (a service added, a chain's hops
    changed, the rules rewritten) by apply each appear in the event log."""
    from test_scaling import set_rate

    cfg = chain_config(mgr)
    for svc in cfg["services"]:
        if svc["name"] == "fwd":
            svc["instances"] = 23
    n_fwd = 23
    mgr.start(cfg)
    ex = Exporter(mgr.name, mgr.workdir)
    try:
        set_rate(mgr, 2000)
        nfs = mgr.nfs()
        wait_until(lambda: nf_page(ex)["total"] == len(nfs), 20, "every NF listed")
        # pages of 10: every fwd NF once, in instance order by name
        seen: list[str] = []
        for page in range(3):
            got = nf_page(ex, service="fwd", sort="name", page=page, per_page=10)
            assert got["total"] == n_fwd and got["page"] == page, got
            seen += [str(r["name"]) for r in got["rows"]]
        assert seen == [f"fwd#{i}" for i in range(n_fwd)], seen
        assert nf_page(ex, service="fwd", page=3, per_page=10)["rows"] == []
        # by id: ids ascending across the whole list
        ids = [r["id"] for r in nf_page(ex, per_page=500)["rows"]]
        assert ids == sorted(ids) and len(ids) == len(nfs), ids
        # search: a name part, and a pid
        got = nf_page(ex, q="fwd#1", per_page=500)
        assert sorted(r["name"] for r in got["rows"]) == sorted(
            k for k in nfs if k.startswith("fwd#1")
        ), got
        pid = int(nfs["mon#0"]["pid"])
        assert [r["name"] for r in nf_page(ex, q=str(pid))["rows"]] == ["mon#0"]
        assert nf_page(ex, q="no-such-nf")["total"] == 0
        # busiest first: mon (every packet) above each fwd (a share of them)
        wait_until(
            lambda: nf_page(ex, sort="rx_pps", per_page=1)["rows"][0]["name"] == "mon#0",
            20,
            "mon#0 the busiest",
        )
        rates = [r["rx_pps"] for r in nf_page(ex, sort="rx_pps", per_page=500)["rows"]]
        assert rates == sorted(rates, reverse=True), rates

        # Config edits by apply, each an event.
        nxt = dict(cfg)
        nxt["services"] = [*cfg["services"], {"name": "extra", "exec": "squall-nf-noop"}]
        nxt["chains"] = [{"name": "web-chain", "services": ["mon", "extra", "fwd"]}]
        path = tmp_path / "next.yaml"
        from conftest import to_yaml

        path.write_text(to_yaml(nxt))
        r = squallctl(mgr, "apply", str(path))
        assert r.returncode == 0, r.stderr

        def config_events() -> list[str]:
            return [
                str(e["what"])
                for e in json.loads(http_get(ex.url + "/api/events"))
                if e["kind"] == "config"
            ]

        wait_until(
            lambda: (
                {"service extra added", "chain web-chain: hops mon,fwd -> mon,extra,fwd"}
                <= set(config_events())
            ),
            30,
            "the apply's edits in the event log",
        )
        assert any("applied" in w for w in config_events()), config_events()
        sent = mgr.gen_send(0)
        mgr.wait_accounted(sent)
    finally:
        ex.stop()
    mgr.finish()


def test_no_nf_metrics_keeps_the_services_and_drops_the_nfs(mgr: Manager) -> None:
    """--no-nf-metrics: the per-service series stay, summed over the service's
    NFs; no per-NF series is left; the exposition is smaller."""
    mgr.start(chain_config(mgr))
    full = Exporter(mgr.name, mgr.workdir)
    lean = Exporter(mgr.name, mgr.workdir, "--no-nf-metrics")
    try:
        from test_scaling import set_rate

        set_rate(mgr, 5000)
        sent = mgr.gen_send(3000)
        mgr.wait_accounted(sent)
        fwd_rx = sum(v["rx_pkts"] for k, v in mgr.nfs().items() if k.startswith("fwd#"))

        def both() -> tuple[str, str] | None:
            a, b = full.metrics(), lean.metrics()
            want = 'service="fwd"'
            ok = all(
                metric_value(t, "squall_service_received_packets_total", want) == fwd_rx
                for t in (a, b)
            )
            return (a, b) if ok else None

        a, b = wait_until(both, 20, "both exporters at the manager's counts")
        # (the exposition sorts labels by name)
        assert metric_value(a, "squall_nf_up", 'nf_instance="1",service="fwd"') == 1
        # (squall_nf_control_bytes and the like are the manager's, not an NF's)
        nf_lines = [ln for ln in b.splitlines() if 'nf_instance="' in ln]
        assert nf_lines == [], nf_lines[:5]
        assert sum(1 for ln in a.splitlines() if 'nf_instance="' in ln) > 3 * 10
        assert "squall_service_nfs" in b and len(b) < len(a), (len(b), len(a))
    finally:
        full.stop()
        lean.stop()
    mgr.finish()


# ------------------------------------------- what a new user found at 1400x1000

VIEW = (1400, 1000)


def start_one_way(mgr: Manager) -> Exporter:
    """web-chain in both directions (gen -> out by rule 0, out -> gen by rule
    1), the generator sending on gen only: the two directions differ, the
    second carries nothing."""
    cfg = chain_config(mgr)
    cfg["generator"]["rate_pps"] = RATE
    cfg["rules"].append({"in_port": "out", "chain": "web-chain", "out_port": "gen"})
    mgr.start(cfg)
    return Exporter(mgr.name, mgr.workdir)


def stop_one_way(mgr: Manager, ex: Exporter) -> None:
    try:
        sent = mgr.gen_send(0)
        mgr.wait_accounted(sent)
    finally:
        ex.stop()
    mgr.finish()


def rendered(browser: Any) -> None:
    """Wait (bounded) for the page's first render of a summary."""
    wait_until(
        lambda: browser.execute_script("return document.body.dataset.seq || null;"),
        20,
        "the first summary rendered",
    )


def port_rates(mgr: Manager, secs: float = 2.0) -> dict[str, tuple[float, float]]:
    """port -> (rx, tx) packets/s, measured from telemetry over secs."""
    a, t0 = mgr.ports(), time.monotonic()
    time.sleep(secs)
    b, t1 = mgr.ports(), time.monotonic()
    return {
        p: (
            (b[p]["rx_pkts"] - a[p]["rx_pkts"]) / (t1 - t0),
            (b[p]["tx_pkts"] - a[p]["tx_pkts"]) / (t1 - t0),
        )
        for p in b
    }


def test_the_rate_chart_shows_the_last_five_minutes_from_the_first_sample(
    mgr: Manager, browser: Any
) -> None:
    """The time axis of "Packet rates, last 5 min" at its first sample: tick
    labels that read as the local time (and date) within minutes of now, and
    a window of 5 minutes ending at the sample (one point, once, opened an
    axis of years)."""
    ex = start_one_way(mgr)
    try:
        browser.set_window_size(*VIEW)
        # ?snapshot=1: exactly one sample; then the live page, a sample a poll
        for page, points in (("/?snapshot=1", 1), ("/", 0)):
            browser.get(ex.url + page)
            rendered(browser)
            check_time_axis(browser, points)
    finally:
        stop_one_way(mgr, ex)


def check_time_axis(browser: Any, points: int) -> None:
    """The rates chart's time axis: labels of the local time (the first with
    the date) within minutes of now, a 5-minute window ending now; points:
    the samples it must hold (0: any)."""
    # what uPlot drew on the axis (its tick labels as drawn) and its range
    got = browser.execute_script(
        "return {labels: rateChart.axes[0]._values, min: rateChart.scales.x.min,"
        " max: rateChart.scales.x.max, points: rateData[0].length,"
        " now: Date.now() / 1000, tz: new Date().getTimezoneOffset()};"
    )
    labels = [str(v) for v in got["labels"] if v]
    assert len(labels) >= 3 and got["points"] in ((points,) if points else range(1, 999)), got
    now = float(got["now"])
    local_now = now - 60 * float(got["tz"])  # seconds since the epoch, local wall clock
    today = {time.strftime("%Y-%m-%d", time.gmtime(local_now - d)) for d in (0, 600)}
    for label in labels:
        clock, _, date = label.partition("\n")
        parts = clock.split(":")
        assert len(parts) in (2, 3) and all(p.isdigit() for p in parts), (label, got)
        secs = int(parts[0]) * 3600 + int(parts[1]) * 60 + int((parts + ["0"])[2])
        off = (secs - local_now % 86400 + 43200) % 86400 - 43200
        assert abs(off) < 6 * 60, f"tick {label!r} is {off:.0f} s from now: {got}"
        assert not date or date in today, (label, today)
    assert abs(float(got["max"]) - now) < 60, got
    assert 290 <= float(got["max"]) - float(got["min"]) <= 310, got


def test_each_direction_row_shows_its_own_rate(mgr: Manager, browser: Any) -> None:
    """A chain both ways, traffic one way: the row of rule 0 (gen -> out)
    shows, in its chain and service boxes, the rate telemetry measures on its
    ports; the row of rule 1 (out -> gen) shows 0, not the chain's total."""
    ex = start_one_way(mgr)
    try:
        browser.set_window_size(*VIEW)
        browser.get(ex.url + "/")
        rates = port_rates(mgr)
        fwd = rates["out"][1]  # rule 0: out's tx
        assert abs(fwd - RATE) < RATE * 0.25 and rates["gen"][1] == 0, rates

        def rows() -> dict[str, list[Any]]:
            got = browser.execute_script(
                "const o = {};"
                "for (const r of document.querySelectorAll('#topology .flow'))"
                "  o[r.dataset.rule] = [...r.querySelectorAll('.node.chain, .node.service')]"
                "    .map(n => [n.dataset.name, Number(n.dataset.txPps ?? n.dataset.rxPps),"
                "      n.querySelector('.rate').textContent]);"
                "return o;"
            )
            return dict(got)

        def settled() -> dict[str, list[Any]] | None:
            got = rows()
            if set(got) != {"0", "1"}:
                return None
            if any(v is None for row in got.values() for _, v, _ in row):
                return None  # (a box without its rate)
            ok = all(abs(v - fwd) < fwd * 0.25 for _, v, _ in got["0"])
            return got if ok and all(v == 0 for _, v, _ in got["1"]) else None

        # 3 boxes a row (web-chain, mon, fwd): rule 0's at the rate, rule 1's at 0
        try:
            got = wait_until(settled, 20, f"row 0 at {fwd:.0f} packets/s, row 1 at 0")
        except AssertionError as e:
            raise AssertionError(f"{e}; the rows: {rows()}") from None
        for row in got.values():
            assert [n for n, _, _ in row] == ["web-chain", "mon", "fwd"], got
        for (_, _, a), (_, _, b) in zip(got["0"], got["1"], strict=True):
            assert a != b, got
        # the exporter's own per-rule numbers, which the rows show
        rules = json.loads(http_get(ex.url + "/api/summary"))["rules"]
        assert rules[0]["rx_pps"] > 0 and rules[0]["tx_pps"] > 0, rules
        assert rules[1]["rx_pps"] == rules[1]["tx_pps"] == 0, rules
        assert rules[1]["hop_rx_pps"] == [0, 0], rules
    finally:
        stop_one_way(mgr, ex)


def boxes(browser: Any, css: str) -> list[dict[str, Any]]:
    return list(
        browser.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(e => {"
            "  const r = e.getBoundingClientRect();"
            "  return {text: e.textContent, left: r.left, right: r.right, top: r.top,"
            "          bottom: r.bottom};});",
            css,
        )
    )


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


def test_the_latency_histogram_keeps_its_labels_clear_and_inside(
    mgr: Manager, browser: Any
) -> None:
    """The chain's latency histogram at 1400x1000: no y label under the
    title, every x label (the last one was cut) and y label inside the chart."""
    ex = start_one_way(mgr)
    try:
        browser.set_window_size(*VIEW)
        browser.get(ex.url + "/")
        hist = '#hists .hist[data-chain="web-chain"]'
        wait_until(
            lambda: browser.execute_script(
                "return document.querySelectorAll(arguments[0]).length > 10;", hist + " .bar"
            ),
            20,
            "the web-chain histogram's bars",
        )
        title = boxes(browser, hist + " .hist-title")
        chart = boxes(browser, hist + " svg.hist-plot")
        ys = boxes(browser, hist + " .y-label")
        xs = boxes(browser, hist + " .x-label")
        assert len(title) == len(chart) == 1 and len(ys) >= 2 and len(xs) >= 2, (
            title,
            chart,
            ys,
            xs,
        )
        for y in ys:
            assert not overlap(y, title[0]), (y, title)
        c = chart[0]
        for lab in xs + ys:
            inside = (
                lab["left"] >= c["left"] - 0.5
                and lab["right"] <= c["right"] + 0.5
                and lab["top"] >= c["top"] - 0.5
                and lab["bottom"] <= c["bottom"] + 0.5
            )
            assert inside, (lab, c)
    finally:
        stop_one_way(mgr, ex)


CHROMIUM_BOUND_S = 90


def test_snapshot_mode_screenshots_with_a_virtual_time_budget(mgr: Manager, tmp_path: Path) -> None:
    """`chromium --headless --virtual-time-budget` on the page with
    ?snapshot=1 (one fetch, no event stream): it finishes (within a bound;
    on the live page the stream keeps it waiting forever) with a 1400x1000
    PNG, and the DOM it rendered holds the topology."""
    chromium = require_tool("chromium", "chromium")
    ex = start_one_way(mgr)
    out = BUILD / "test-output" / "dashboard-snapshot.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    try:
        wait_until(
            lambda: json.loads(http_get(ex.url + "/api/summary"))["totals"]["tx_pps"] > 0,
            20,
            "traffic in the summary",
        )

        def run(*what: str) -> str:
            cmd = [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--user-data-dir={tmp_path / 'chromium'}",
                "--window-size={},{}".format(*VIEW),
                "--hide-scrollbars",
                "--virtual-time-budget=5000",
                *what,
                ex.url + "/?snapshot=1",
            ]
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            try:
                stdout, stderr = proc.communicate(timeout=CHROMIUM_BOUND_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise AssertionError(
                    f"chromium did not finish within {CHROMIUM_BOUND_S} s: {what}"
                ) from None
            assert proc.returncode == 0, stderr[-2000:]
            return stdout

        run(f"--screenshot={out}")
        png = out.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:16]
        width, height = struct.unpack(">II", png[16:24])
        assert (width, height) == VIEW and len(png) > 10_000, (width, height, len(png))
        print(f"snapshot screenshot: {out}")
        dom = run("--dump-dom")
        assert 'data-kind="chain" data-name="web-chain"' in dom, dom[-2000:]
        assert 'class="badge up"' in dom, dom[:2000]
    finally:
        stop_one_way(mgr, ex)
