"""`bulkhead report` in a real headless Chromium: the page renders without console
errors, its Gantt chart has one row per task, each row drawn, the wheel zooms, and a 60 s
DriveOS simulation loads (the time is printed; bench/report measures it properly)."""

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BULKHEAD = REPO / "target" / "release" / "bulkhead"
DRIVEOS = REPO / "examples" / "driveos.yaml"
SCREENSHOT = REPO / "docs" / "img" / "report.png"


def bulkhead(*args, cwd=None):
    assert BULKHEAD.exists(), f"{BULKHEAD} missing: cargo build --release first"
    done = subprocess.run([str(BULKHEAD), *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def driveos_report(tmp_path_factory):
    """The page and the JSON figures of a 60 s DriveOS simulation."""
    out = tmp_path_factory.mktemp("report")
    trace, page = out / "driveos.json", out / "driveos.html"
    bulkhead("sim", DRIVEOS, "--for", "60s", "--trace", trace)
    # A relative input path: the page names it, and the screenshot stays the same.
    bulkhead("report", trace.name, "-o", page.name, "--system", DRIVEOS, cwd=out)
    figures = json.loads(bulkhead("report", trace, "--format", "json"))
    trace.unlink()
    return page, figures


def open_page(browser, path):
    """Opens `path`; returns the page and the console errors and page errors seen."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=60_000)
    return page, errors


def drawn_rows(page):
    """Per Gantt row whether some pixel of it has the colour of an execution interval."""
    return page.evaluate(
        """() => {
        const c = document.getElementById('gantt'), d = c.dataset;
        const ctx = c.getContext('2d'), dpr = c.width / c.clientWidth;
        return JSON.parse(d.rows).map((_, k) => {
          const y = Math.round((+d.top + k * +d.rowHeight + +d.rowHeight / 2) * dpr);
          const x0 = Math.round(+d.left * dpr);
          const px = ctx.getImageData(x0, y, c.width - x0, 1).data;
          for (let i = 0; i < px.length; i += 4) {
            const [r, g, b] = [px[i], px[i + 1], px[i + 2]];
            if (Math.max(r, g, b) - Math.min(r, g, b) > 40) return true;
          }
          return false;
        });
    }"""
    )


def test_report_renders_with_one_gantt_row_per_task(browser, driveos_report):
    path, figures = driveos_report
    tasks = [f"{t['partition']}/{t['name']}" for t in figures["tasks"]]
    assert len(tasks) == 10, tasks  # the quest partition's rt tasks
    page, errors = open_page(browser, path)
    try:
        rows = json.loads(page.get_attribute("#gantt", "data-rows"))
        assert rows == tasks
        assert drawn_rows(page) == [True] * len(tasks)
        assert page.locator("#tasks tr").count() == len(tasks) + 1
        assert page.locator("#responses .card").count() == len(tasks)
        before = page.text_content("#view")
        box = page.locator("#gantt").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 30)
        page.mouse.wheel(0, -300)
        page.wait_for_function(f"document.getElementById('view').textContent !== {json.dumps(before)}")
        for _ in range(40):  # down to a few milliseconds: single jobs and preemptions
            page.mouse.wheel(0, -300)
        page.wait_for_timeout(200)
        assert drawn_rows(page) == [True] * len(tasks)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
        assert errors == []
    finally:
        page.close()


def test_report_of_a_60s_driveos_trace_loads(browser, driveos_report):
    path, _ = driveos_report
    page, errors = open_page(browser, path)
    try:
        ready_ms = page.evaluate("window.reportReady")
        print(f"report of a 60 s DriveOS simulation ({path.stat().st_size} bytes) ready after {ready_ms:.0f} ms")
        assert 0 < ready_ms < 20_000
        assert errors == []
    finally:
        page.close()


BOOMERANG = REPO / "examples" / "boomerang.yaml"


def test_pipeline_delays_are_plotted_against_their_bounds(browser, tmp_path):
    """A log with `message` events of p2's sink (a run's, written by hand): the page
    lists the pipeline with its bound and draws its histogram and CDF."""
    lines = [json.dumps({"t_ns": 20_000_000 + i * 2_000_000, "event": "message", "partition": "quest",
                         "task": "RTControl", "id": i, "e2e_ns": ms * 1_000_000})
             for i, ms in enumerate([1, 2, 2, 3, 9, 12])]
    log = tmp_path / "run.jsonl"
    log.write_text("\n".join(lines) + "\n")
    page_path = tmp_path / "run.html"
    bulkhead("report", log, "-o", page_path, "--system", BOOMERANG)
    page, errors = open_page(browser, page_path)
    try:
        rows = page.locator("#pipelines tr")
        assert rows.count() == 2
        cells = rows.nth(1).locator("td").all_text_contents()
        assert cells[:3] == ["p2", "quest/RTControl", "6"], cells
        assert cells[8] == "8 ms" and cells[9] == "2", cells  # the paper's bound, 2 beyond
        assert page.locator("#pipeplots .card canvas").count() == 2  # histogram and CDF
        assert errors == []
    finally:
        page.close()
