"""The dashboard as a person sees it: headless Chromium (Debian's chromium and
chromium-driver, driven by selenium) loads squallctl serve's page against a
manager carrying generator traffic; the rendered topology and rates match
telemetry; a service opened in the topology lists its instances; a killed NF
turns dead on the page and its exit appears in the event log. And the page's
data: /api/nfs searched, sorted and paged; `--no-nf-metrics`; config edits
in the event log.

The screenshot goes to build/test-output/dashboard.png. To refresh the one
the docs show (docs/img/dashboard.png), run the test with
SQUALL_DOCS_SCREENSHOT=1 (docs/observability.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
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
