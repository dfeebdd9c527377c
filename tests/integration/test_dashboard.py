"""The dashboard as a person sees it: headless Chromium (Debian's chromium and
chromium-driver, driven by selenium) loads squallctl serve's page against a
manager carrying generator traffic; the rendered topology and rates match
telemetry; a killed NF turns dead on the page and its exit appears in the
event log. The screenshot is docs/img/dashboard.png."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Manager
from test_exporter import Exporter, chain_config, wait_until

webdriver = pytest.importorskip("selenium.webdriver")

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
SCREENSHOT = REPO / "docs" / "img" / "dashboard.png"
RATE = 3000


@pytest.fixture
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromium-driver are not installed")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1900"):
        opts.add_argument(arg)
    from selenium.webdriver.chrome.service import Service

    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
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
        shot = tmp_path / "dashboard.png"
        assert browser.save_screenshot(str(shot))
        shutil.copyfile(shot, SCREENSHOT)
        sent = mgr.gen_send(0)
        mgr.wait_accounted(sent)
    finally:
        ex.stop()
    mgr.finish()
