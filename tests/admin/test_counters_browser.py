"""The counters' charts in real headless Chromium (Playwright, Debian's ``chromium``).

The queue page, the queue list and the Tasks page draw their charts (SVG with data),
with no console error and no request leaving the host, fitting 1,280 px, in light and
dark mode; the live toggle swaps fresh charts in. Screenshots go under the test's
temporary folder (``LEDGER_SCREENSHOTS=docs/screenshots`` writes the docs' ones there).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from django_ledger.conf import get_ledger
from django_ledger.core.counters import Counters, Tally
from django_ledger.core.ledger import Ledger
from tests.support.browser import fast_passwords, log_in, new_page
from tests.support.worker_process import wait_until

ROOT = Path(__file__).resolve().parents[2]

pytest_plugins = ["tests.support.browser_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def counted(namespace: str, settings: Any) -> Ledger:
    """An hour of a worker's counts on ``default``, one flush a minute."""
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace}
    fast_passwords(settings)
    ledger = get_ledger("default")
    counters, now = Counters(ledger.redis, namespace), ledger.server_time_ms()
    # Three DEAD records (one attempt each, their leases expired), for the depth chart.
    once = Ledger(ledger.redis, namespace, "default", max_attempts=1)
    for n in range(3):
        once.admit(f"dead-{n}", "work")
        assert once.claim("gone", lease=0.05) is not None
    wait_until(lambda: once.stats().expired_leases == 3, what="the leases to expire")
    assert once.sweep().dead == 3
    admitted = 0
    for minute in range(59, -1, -1):
        # A backlog that builds, then drains: the depth sampled as the worker's flush does.
        for _ in range(6 if minute > 30 else 1):
            ledger.admit(f"r-{admitted}", "work", delay=0 if admitted % 5 else 3600)
            admitted += 1
        for _ in range(3 if minute <= 30 else 0):
            ledger.claim("w", lease=3600)
        tally = Tally()
        for n in range(20 + (minute * 7) % 30):
            tally.add("default", "shop.tasks.send_receipt", "completed", 0.05 + n / 200, 0.02)
        for _ in range(minute % 4):
            tally.add("default", "shop.tasks.send_receipt", "failed", 2.0, 0.5)
        tally.add("default", "shop.tasks.resize_image", "completed", 1.5 + minute / 10, 1.0)
        for queue, counts in tally.take().items():
            # Minutes 45 to 41 no worker sampled: the depth chart breaks there.
            sample = not 41 <= minute <= 45
            counters.add(queue, counts, now_ms=now - minute * 60_000, sample=sample)
    return ledger


FITS = """() => ({viewport: window.innerWidth, document: document.documentElement.scrollWidth})"""
#: The colour of a chart's caption and of its plot's background: they must differ.
COLOURS = """() => {
  const svg = document.querySelector('.ledger-svg');
  const caption = document.querySelector('.ledger-chart figcaption');
  return [getComputedStyle(caption).color, getComputedStyle(svg).backgroundColor,
          getComputedStyle(document.querySelector('.ledger-svg .tick')).fill];
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_charts_render_in_chromium(
    live_server: Any,
    django_user_model: Any,
    counted: Ledger,
    browser: Any,
    scheme: str,
    tmp_path: Path,
) -> None:
    shots = Path(os.environ.get("LEDGER_SCREENSHOTS", tmp_path))
    if not shots.is_absolute():
        shots = ROOT / shots
    page = new_page(browser, 1280, color_scheme=scheme)
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "request",
        lambda r: None if r.url.startswith(live_server.url) else outside.append(r.url),
    )
    log_in(page, live_server, django_user_model)

    base = f"{live_server.url}/admin/django_ledger/queue/"
    page.goto(base + "default/change/")
    assert page.locator("#ledger-charts svg.ledger-svg").count() == 4
    for line in ("due", "claimed", "dead"):  # two runs each, either side of the gap
        assert page.locator(f"#chart-depth polyline.{line}").count() == 2
    assert page.locator("#chart-depth details tbody tr").count() >= 54
    assert page.locator("#chart-throughput rect.done").count() >= 59  # a minute may roll over
    assert page.locator("#chart-throughput rect.failed").count() > 10
    assert page.locator("#chart-run polyline.p95").count() == 1
    caption, background, tick = page.evaluate(COLOURS)
    assert caption != background and tick != background, (caption, background, tick)
    measured = page.evaluate(FITS)
    assert measured["document"] <= measured["viewport"], measured
    page.locator("#over-time").screenshot(path=str(shots / f"queue-charts-{scheme}.png"))

    # The live view: off by default; on, it swaps in fresh charts without a reload.
    page.evaluate("() => { window.notReloaded = true; }")
    with page.expect_response(lambda r: "fragment=charts" in r.url) as answer:
        page.check("#ledger-live")
    assert answer.value.ok
    page.wait_for_function("() => document.querySelectorAll('#ledger-charts svg').length === 4")
    assert page.evaluate("() => window.notReloaded") is True
    page.uncheck("#ledger-live")

    page.goto(base + "default/change/?window=week")
    assert page.locator("#chart-throughput rect.done").count() in (1, 2)  # the last hour or two
    assert page.locator("#chart-depth circle.due").count() in (1, 2)

    page.goto(base)
    assert page.locator("#queues svg.ledger-spark polyline").count() >= 2
    assert page.evaluate(FITS)["document"] <= 1280

    page.click("#tasks-link")
    page.wait_for_selector("#tasks")
    assert page.locator('#tasks tr[data-task="shop.tasks.send_receipt"] a').count() == 1
    assert page.evaluate(FITS)["document"] <= 1280
    page.screenshot(path=str(shots / f"tasks-{scheme}.png"), full_page=True)

    assert errors == []
    assert outside == []
