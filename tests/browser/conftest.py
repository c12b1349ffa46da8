"""Fixtures of the dashboard's browser tests: a real `bulkhead run` of
examples/driveos.yaml (root), stopped with SIGTERM at the end of each test even when it
fails (bulkhead then stops its processes and removes its cgroups; its channels are
memfds and go with them), and headless Debian chromium driven by Playwright."""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "target" / "release"
EXAMPLE = ROOT / "examples" / "driveos.yaml"
RAV4_LOG = ROOT / "crates" / "can" / "tests" / "data" / "comma2k19_rav4_seg40_excerpt.log.gz"
CHROMIUM = "/usr/bin/chromium"
DOCS_IMG = ROOT / "docs" / "img"


def _skip_reason():
    if os.geteuid() != 0:
        return "needs root (bulkhead run)"
    for exe in ("bulkhead", "bulkhead-app"):
        if not (RELEASE / exe).exists():
            return f"{RELEASE / exe} is not built (cargo build --release)"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (scripts/setup.sh installs it)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Vehicle:
    """A running `bulkhead run` of the example with the dashboard on `url`."""

    def __init__(self, replay, seconds):
        reason = _skip_reason()
        if reason:
            pytest.skip(reason)
        self.dir = Path(tempfile.mkdtemp(prefix="bulkhead-dash-"))
        os.chmod(self.dir, 0o755)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        text = EXAMPLE.read_text()
        text = text.replace("listen: 127.0.0.1:8080", f"listen: 127.0.0.1:{port}")
        assert f"listen: 127.0.0.1:{port}" in text
        if replay:
            # In a loop: the 6 s log would otherwise end before the page is looked at.
            replay_cmd = f"plant --bus car --replay {RAV4_LOG} --iface can0 --loops 0"
            text = text.replace("plant --bus car --v0 72", replay_cmd)
            assert replay_cmd in text
        self.yaml = self.dir / "driveos.yaml"
        self.yaml.write_text(text)
        env = dict(os.environ, PATH=f"{RELEASE}:{os.environ.get('PATH', '')}")
        self.log = open(self.dir / "run.log", "w+")
        self.proc = subprocess.Popen(
            [str(RELEASE / "bulkhead"), "run", str(self.yaml), "--timeout", f"{seconds}s",
             "--control", str(self.dir / "driveos.sock")],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self._wait_for_http()
        self._wait_for_the_loop()

    def _wait_for_http(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"bulkhead run ended early:\n{self.output()}")
            try:
                urllib.request.urlopen(self.url + "/", timeout=1).read()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"no dashboard at {self.url}:\n{self.output()}")

    def status(self):
        """The system's status from its control socket (`bulkhead ctl status`)."""
        out = subprocess.run(
            [str(RELEASE / "bulkhead"), "ctl", "--control", str(self.dir / "driveos.sock"),
             "--json", "status"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            return None
        return json.loads(out.stdout)["status"]

    def counters(self, *tasks):
        """The counters each of `tasks` of the rt partition publishes ({} before its first
        job), from one status."""
        found = {task: {} for task in tasks}
        for partition in (self.status() or {}).get("partitions", []):
            for t in partition.get("tasks") or []:
                if t["name"] in found:
                    found[t["name"]] = t.get("counters") or {}
        return found

    def _wait_for_the_loop(self):
        """Waits until the car's bus carries frames both ways through usb_bh and the read
        mapper has published the cluster's signals: before that, a command sent from a
        page is lost like any frame sent before the bus is up (the plant serves it), and
        the channels have nothing to count. A loaded machine takes seconds to get there."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"bulkhead run ended early:\n{self.output()}")
            counters = self.counters("usb_bh", "ivi_read_mapper")
            usb, reader = counters["usb_bh"], counters["ivi_read_mapper"]
            if usb.get("rx", 0) > 0 and usb.get("tx", 0) > 0 and reader.get("published", 0) > 0:
                return
            time.sleep(0.1)
        raise AssertionError(f"the vehicle's loop did not start in 60 s:\n{self.output()}")

    def output(self):
        self.log.flush()
        return (self.dir / "run.log").read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        for f in self.dir.iterdir():
            f.unlink()
        self.dir.rmdir()


@pytest.fixture
def vehicle(request):
    """The example in closed loop with the plant; `@pytest.mark.replay` for the RAV4 log."""
    v = Vehicle(replay=request.node.get_closest_marker("replay") is not None, seconds=60)
    yield v
    v.stop()
    leftover = list(Path("/sys/fs/cgroup").glob(f"**/bulkhead-{v.proc.pid}-*"))
    assert not leftover, f"cgroups left behind: {leftover}"


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1100, "height": 700})
    pg = ctx.new_page()
    errors = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.console_errors = errors
    yield pg
    ctx.close()


def screenshot(pg, name, full_page=False):
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(DOCS_IMG / name), full_page=full_page)


def number(text):
    m = re.search(r"-?\d+(\.\d+)?", text)
    return float(m.group(0)) if m else None
