"""bench/dashboard: the dashboard's update rate and frame-to-screen latency measured
in headless chromium, and the rt tasks' misses of examples/driveos.yaml with the
dashboard serving a browser against a baseline run (same system, the dashboard process
replaced by an idle one) in this invocation. Last line: one JSON object."""

import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "browser"))
import conftest  # noqa: E402  (the tests' Vehicle fixture: runs and stops bulkhead)

ARGS = [a for a in sys.argv[1:] if a != "--replay"]
SECONDS = float(ARGS[0]) if ARGS else 10.0
# --replay: the RAV4 log replayed in a loop (the plant as HIL replay) instead of the plant.
REPLAY = "--replay" in sys.argv[1:]
TASK = re.compile(r"task `(\w+)` of `quest` .*: (\d+) jobs, .*?(\d+) misses")


def misses(output):
    jobs = sum(int(m.group(2)) for m in TASK.finditer(output))
    missed = sum(int(m.group(3)) for m in TASK.finditer(output))
    return jobs, missed


def run(with_dashboard, startup_s=0.0):
    """One run of the example; the rt tasks' jobs and misses over the whole run."""
    if not with_dashboard:
        example = conftest.EXAMPLE.read_text()
        idle = example.replace("{cmd: bulkhead-app dashboard}", "{cmd: /bin/sleep 3600}")
        assert idle != example
        conftest.EXAMPLE = Path("/tmp/bulkhead-bench-dashboard-baseline.yaml")
        conftest.EXAMPLE.write_text(idle)
        conftest.Vehicle._wait_for_http = lambda self: None
    start = time.monotonic()
    v = conftest.Vehicle(replay=REPLAY, seconds=int(SECONDS) + 120)
    figures = {}
    try:
        if with_dashboard:
            figures = browse(v.url)
            figures["startup_s"] = round(time.monotonic() - start - SECONDS, 1)
        else:
            time.sleep(startup_s + SECONDS)
        # Stopped, the run prints every task's jobs and misses.
        v.proc.send_signal(conftest.signal.SIGTERM)
        v.proc.wait(timeout=60)
        figures["jobs"], figures["misses"] = misses(v.output())
    finally:
        v.stop()
    return figures


def browse(url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=conftest.CHROMIUM, args=["--no-sandbox"])
        page = b.new_page()
        page.goto(url + "/ic")
        page.wait_for_function("window.dashboardStats.latencies.length > 0", timeout=60000)
        page.evaluate("() => { const s = window.dashboardStats; s.latencies.length = 0; s.times.length = 0; }")
        time.sleep(SECONDS)
        stats = page.evaluate("window.dashboardStats")
        b.close()
    times, lat = stats["times"], sorted(stats["latencies"])
    rate = (len(times) - 1) / ((times[-1] - times[0]) / 1000)
    return {
        "updates_per_s": round(rate, 2),
        "latency_ms_median": round(statistics.median(lat), 2),
        "latency_ms_p99": round(lat[int(0.99 * (len(lat) - 1))], 2),
        "latency_ms_max": round(lat[-1], 2),
        "samples": len(lat),
    }


def main():
    example = conftest.EXAMPLE
    with_dash = run(True)
    conftest.EXAMPLE = example
    baseline = run(False, with_dash["startup_s"])
    print(f"dashboard ({'RAV4 replay' if REPLAY else 'plant'}): {with_dash['updates_per_s']} updates/s, frame to screen median "
          f"{with_dash['latency_ms_median']} ms, p99 {with_dash['latency_ms_p99']} ms, "
          f"max {with_dash['latency_ms_max']} ms ({with_dash['samples']} samples)")
    print(f"rt misses with the dashboard: {with_dash['misses']} of {with_dash['jobs']} jobs; "
          f"baseline (idle process instead): {baseline['misses']} of {baseline['jobs']} jobs")
    ok = with_dash["updates_per_s"] >= 10 and with_dash["latency_ms_p99"] < 100
    print(json.dumps({
        "bench": "dashboard",
        "seconds": SECONDS,
        "source": "rav4-replay" if REPLAY else "plant",
        "with_dashboard": with_dash,
        "baseline": baseline,
        "targets": {"updates_per_s_min": 10, "latency_ms_p99_max": 100},
        "met": ok,
    }))


if __name__ == "__main__":
    main()
