"""The daily report in a real browser: headless Debian Chromium driven over the DevTools protocol
(raw CDP through ``websockets``, no browser download). Loads the page from a file URL, checks it
renders with no console error, no exception and no request leaving file://, that its charts and
headings are there and nothing overflows the page's width, and saves a full-page screenshot to
``tests/browser/artifacts/daily_report.png``.

Chromium comes from Debian (``/usr/bin/chromium``), installed by ``make chromium``, which
``make test`` runs first; the test skips (saying why) only where that could not install it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluation import storage
from evaluation.compare import run_comparison
from evaluation.contract.comparison import ComparisonSpec
from evaluation.report import write_daily_report
from tests.unit.report.test_report import DAY, write_history

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
)
VIEWPORT = (1280, 900)


# --------------------------------------------------------------------------------------------
# Chromium


def find_chromium() -> str:
    """The chromium binary that the setup installed (``make chromium``, part of ``make test``);
    skips the test, saying why, only where the setup could not install it."""
    found = shutil.which("chromium") or (str(Path("/usr/bin/chromium")) if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        pytest.skip("chromium is not installed: `make chromium` installs Debian's package (as root)")
    return found


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


# --------------------------------------------------------------------------------------------
# A tiny DevTools protocol client


class CDP:
    """Commands and events over the browser's DevTools websocket (flattened sessions)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.counter = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message)
            if "id" in data:
                future = self.pending.pop(data["id"], None)
                if future is not None and not future.done():
                    if "error" in data:
                        future.set_exception(RuntimeError(f"CDP error: {data['error']}"))
                    else:
                        future.set_result(data.get("result", {}))
            else:
                self.events.append(data)
                self.changed.set()

    async def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
                   timeout: float = 60) -> dict[str, Any]:
        self.counter += 1
        message: dict[str, Any] = {"id": self.counter, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.counter] = future
        await self.ws.send(json.dumps(message))
        return await asyncio.wait_for(future, timeout)

    async def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {method} event within {timeout}s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)

    async def close(self) -> None:
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.reader
        await self.ws.close()


@contextlib.contextmanager
def launched(binary: str) -> Iterator[tuple[str, Path]]:
    """A headless Chromium with a throw-away profile; yields its DevTools websocket URL."""
    profile = Path(tempfile.mkdtemp(prefix="report-chromium-"))
    log = (profile / "chromium.log").open("wb")
    process = subprocess.Popen(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
         f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}", "about:blank"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if process.poll() is not None:
                raise RuntimeError(f"chromium exited {process.returncode}: {(profile / 'chromium.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port within 60s")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        yield f"ws://127.0.0.1:{port}{path}", profile
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.close()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.asynccontextmanager
async def page_session(ws_url: str) -> AsyncIterator[tuple[CDP, str]]:
    """A new page target with Runtime, Log, Page and Network events on."""
    from websockets.asyncio.client import connect

    async with connect(ws_url, max_size=None, open_timeout=30) as ws:
        cdp = CDP(ws)
        try:
            target = await cdp.send("Target.createTarget", {"url": "about:blank"})
            attached = await cdp.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
            session = attached["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                await cdp.send(f"{domain}.enable", session=session)
            await cdp.send("Emulation.setDeviceMetricsOverride", {
                "width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False,
            }, session=session)
            yield cdp, session
        finally:
            await cdp.close()


def problems_of(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and requests that leave file:// / data: in the events."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            found.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            found.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            entry = params["entry"]
            found.append(f"log {entry.get('level')} ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "about:")):
                found.append(f"request leaves the page: {url}")
        elif method == "Network.loadingFailed":
            found.append(f"load failed: {params.get('errorText')}")
    return found


PAGE_FACTS = """(() => {
  const svgs = [...document.querySelectorAll('svg')];
  return {
    title: document.title,
    svgs: svgs.length,
    svgs_with_marks: svgs.filter(s => s.querySelectorAll('rect,path,circle,polygon,line').length > 0).length,
    svgs_labelled: svgs.filter(s => s.getAttribute('aria-label') && s.querySelector('title')).length,
    svg_sizes: svgs.map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; }),
    headings: [...document.querySelectorAll('h1,h2,h3')].map(h => h.textContent.trim()),
    scripts: document.querySelectorAll('script').length,
    tables: document.querySelectorAll('table').length,
    scroll_width: document.documentElement.scrollWidth,
    tables_scrolling: [...document.querySelectorAll('.table-wrap')].filter(w => w.scrollWidth > w.clientWidth + 1)
      .map(w => w.previousElementSibling ? w.previousElementSibling.textContent.trim() : w.closest('section').id),
    inner_width: window.innerWidth,
    body_text: document.body.innerText,
    clipped: svgs.flatMap(s => {
      // each text's box (getBBox, through its transform to the SVG's user space) against the viewBox
      const vb = s.viewBox.baseVal;
      return [...s.querySelectorAll('text')].filter(t => {
        const b = t.getBBox(), m = t.getCTM().multiply(s.getCTM().inverse());
        const corners = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]]
          .map(([x, y]) => new DOMPoint(x, y).matrixTransform(m));
        return corners.some(p => p.x < vb.x - 0.5 || p.y < vb.y - 0.5 || p.x > vb.x + vb.width + 0.5
                                  || p.y > vb.y + vb.height + 0.5);
      }).map(t => `${s.getAttribute('aria-label')}: ${t.textContent}`);
    }),
  };
})()"""


async def render(binary: str, url: str, screenshot: Path) -> tuple[dict[str, Any], list[str]]:
    """Open ``url``, return the page facts and the problems seen, and save a full-page PNG."""
    with launched(binary) as (ws_url, _profile):
        async with page_session(ws_url) as (cdp, session):
            await cdp.send("Page.navigate", {"url": url}, session=session)
            await cdp.wait_for("Page.loadEventFired", timeout=60)
            await asyncio.sleep(0.3)  # let late console messages arrive
            result = await cdp.send("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True}, session=session)
            facts = result["result"]["value"]
            metrics = await cdp.send("Page.getLayoutMetrics", session=session)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            shot = await cdp.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": VIEWPORT[0], "height": min(size["height"], 16000), "scale": 1},
            }, session=session, timeout=120)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            return facts, problems_of(cdp.events)


# --------------------------------------------------------------------------------------------
# The test


def test_daily_report_renders_in_chromium(chromium: str, tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    write_history(store)
    uris = write_daily_report(store, DAY)
    page = Path(uris["html"])
    assert page.is_file()

    screenshot = ARTIFACTS / "daily_report.png"
    facts, problems = asyncio.run(render(chromium, page.as_uri(), screenshot))
    print(f"\nscreenshot: {screenshot}")

    assert problems == [], problems
    assert facts["title"] == f"LLM evaluation — daily report {DAY.isoformat()}"
    assert facts["scripts"] == 0
    # interval charts (2 per judge), the verdict mix, trends (2 per judge), histograms, rejects by rule
    assert facts["svgs"] >= 14, facts["svgs"]
    assert facts["svgs_with_marks"] == facts["svgs"]
    assert facts["svgs_labelled"] == facts["svgs"]
    assert all(w > 100 and h > 50 for w, h in facts["svg_sizes"]), facts["svg_sizes"]
    for heading in ("Overview", "Flags", "Quality by model and judge", "Verdict and status mix", "Trends (last 30 days)",
                    "Metric distributions (ok rows)", "Judge health", "Rejected input records",
                    "Worst records (lowest scores among ok rows)"):
        assert heading in facts["headings"], (heading, facts["headings"])
    assert facts["tables"] >= 8
    assert facts["scroll_width"] <= facts["inner_width"], "the page overflows horizontally"
    assert facts["tables_scrolling"] == [], f"tables wider than the page at {VIEWPORT[0]}px: {facts['tables_scrolling']}"
    assert facts["clipped"] == [], f"chart labels outside their chart: {facts['clipped']}"
    text = facts["body_text"]
    assert "<script>alert(1)</script>" in text  # the hostile answer shows as text, never runs
    assert screenshot.stat().st_size > 50_000


def test_comparison_page_labels_fit_their_charts(chromium: str, tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    write_history(store)
    spec = ComparisonSpec(start_date=DAY - dt.timedelta(days=3), end_date=DAY,
                          models=["assistant-lite", "assistant-v2", "assistant-v1"], baseline="assistant-lite")
    result = run_comparison(store, spec)
    page = Path(result["report_uri"])
    facts, problems = asyncio.run(render(chromium, page.as_uri(), ARTIFACTS / "comparison.png"))
    assert problems == [], problems
    assert facts["svgs"] >= 3 and facts["svgs_labelled"] == facts["svgs"]
    labels = facts["body_text"]
    assert "answer_relevance" in page.read_text() and labels
    assert facts["clipped"] == [], f"chart labels outside their chart: {facts['clipped']}"
    assert facts["scroll_width"] <= facts["inner_width"], "the page overflows horizontally"


def test_chromium_helper_finds_the_binary(chromium: str) -> None:
    assert Path(chromium).exists()
    version = subprocess.run([chromium, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert "Chromium" in version.stdout, version


if __name__ == "__main__":  # render a landed report by hand: python -m tests.browser.test_report_browser ROOT DAY
    import sys

    root, day = sys.argv[1], dt.date.fromisoformat(sys.argv[2])
    out = write_daily_report(storage.open_store(root), day)
    facts, problems = asyncio.run(render(find_chromium(), Path(out["html"]).as_uri(), ARTIFACTS / "manual.png"))
    print(json.dumps({k: v for k, v in facts.items() if k != "body_text"}, indent=2), problems)
