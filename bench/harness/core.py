"""What every experiment of `bench/run` shares: one build, one lock for the rt ones, the
platform's floor measured in the same run, running a bench and reading its JSON, and the
shape of the result (docs/results.md).

An experiment is an `Experiment`: its name, the paper's figures, and a `run(ctx)`
function that returns `measured`, `baseline` and `verdict` (a dict per target:
`{"target": text, "value": figure, "met": bool}`).
"""

import contextlib
import fcntl
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
RELEASE = os.path.join(TARGET, "release")
BULKHEAD = os.path.join(RELEASE, "bulkhead")
# The lock the root tests of exclusive CPUs and rt reservations share
# (crates/cli/tests/common/mod.rs): rt experiments hold it for their whole run.
RT_LOCK = "/run/bulkhead-rt-tests.lock"
# What every run needs: the CLI (probe, run, sim, check) and the test workloads.
BASE_PACKAGES = ["bulkhead-cli", "bulkhead-workloads"]
LOG = "/work/shared/data/can/comma2k19_rav4_seg40.log.gz"
LOG_EXCERPT = os.path.join(ROOT, "crates/can/tests/data/comma2k19_rav4_seg40_excerpt.log.gz")


def can_log():
    """The RAV4 log (comma2k19), or the excerpt the repository ships."""
    return LOG if os.path.exists(LOG) else LOG_EXCERPT


@dataclass
class Experiment:
    name: str
    title: str
    # Where the figures come from, e.g. "DriveOS (Jadhav et al.), Table 4"; None: ours.
    source: str | None
    # The paper's figures as the paper gives them (numbers, or the claim in words where
    # the figure is a plot without printed values).
    paper: dict
    # What we run, and how it differs from the paper's set-up.
    setup: str
    differs: str
    run: object
    packages: list = field(default_factory=list)
    root: bool = True
    rt: bool = False
    # The time scale the verdict hinges on, us (a bound, a period): the run is marked as
    # dominated by the noise when the floor's worst wake-up latency reaches it.
    timescale_us: float | None = None
    # Optional: (title, svg-text) pairs drawn from a result (docs/results.md).
    plots: object = None


class Context:
    """What a run function gets: quick or full, a scratch directory, and helpers."""

    def __init__(self, quick, scratch):
        self.quick = quick
        self.scratch = scratch
        self.commands = []

    def sh(self, argv, timeout=None, env=None, check=True):
        """Runs `argv` from the repository root, its output shown as it comes (stderr)
        and kept (stdout); returns stdout. The command is recorded for the report."""
        shown = [a.replace(self.scratch, "$SCRATCH").replace(ROOT + "/", "") for a in argv]
        self.commands.append(" ".join(shlex.quote(a) for a in shown))
        print(f"bench/run: $ {self.commands[-1]}", file=sys.stderr, flush=True)
        full_env = dict(os.environ, **(env or {}))
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=full_env)
        lines = []
        try:
            for line in proc.stdout:
                lines.append(line)
                sys.stderr.write("  | " + line)
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if check and proc.returncode != 0:
            raise RuntimeError(f"`{argv[0]}` exited with {proc.returncode}")
        return "".join(lines)

    def bench_json(self, argv, **kw):
        """Runs a bench that prints one JSON object as its last line; returns it."""
        return last_json(self.sh(argv, **kw))


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON object in the output")


def target(text, value, met):
    return {"target": text, "value": value, "met": bool(met) if met is not None else None}


def build(experiments):
    """One release build of every package the experiments run."""
    packages = sorted(set(BASE_PACKAGES).union(*(e.packages for e in experiments)))
    argv = ["cargo", "build", "--release", "-q"] + [a for p in packages for a in ("-p", p)]
    print(f"bench/run: $ {' '.join(argv)}", file=sys.stderr, flush=True)
    subprocess.run(argv, cwd=ROOT, check=True)
    # The benches build themselves when run alone; under the harness they skip it: a
    # different set of packages unifies features differently and rebuilds (while an rt
    # experiment holds the lock the tests share).
    os.environ["BULKHEAD_BENCH_BUILT"] = "1"


@contextlib.contextmanager
def rt_lock(held):
    """The rt tests' lock, held while `held` (rt experiments: their floor and run)."""
    if not held:
        yield
        return
    with open(RT_LOCK, "w") as f:
        start = time.monotonic()
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        waited = time.monotonic() - start
        if waited > 1:
            print(f"bench/run: waited {waited:.0f} s for {RT_LOCK}", file=sys.stderr)
        yield


def floor(seconds):
    """The platform's floor in this run: `bulkhead probe` (timer wake-ups every 1 ms at
    SCHED_FIFO 90 on every CPU) with what else runs on the machine, the load average and
    the CPU time the hypervisor stole meanwhile. Without root: the load only."""
    doc = {"loadavg_1min": round(os.getloadavg()[0], 2), "probe_s": seconds}
    if os.geteuid() != 0:
        doc["probe"] = None
        return doc
    steal = steal_ms()
    out = subprocess.run([BULKHEAD, "probe", "--for", f"{seconds}s", "--json"],
                         capture_output=True, text=True)
    doc["steal_ms_per_s"] = round((steal_ms() - steal) / seconds, 1)
    if out.returncode != 0:
        doc["probe"] = None
        doc["error"] = out.stderr.strip()[-300:]
        return doc
    cpus = json.loads(out.stdout)["cpus"]
    doc["cpus"] = [{k: c[k] for k in ("cpu", "samples", "median_us", "p99_us", "p999_us",
                                      "max_us", "missed")} for c in cpus]
    doc["max_us"] = max(c["max_us"] for c in cpus)
    doc["p99_us"] = max(c["p99_us"] for c in cpus)
    return doc


def host():
    """The machine: kernel, CPUs and their model."""
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"kernel": os.uname().release, "cpus": os.cpu_count(), "model": model}


def steal_ms():
    """CPU time stolen by the hypervisor so far, all CPUs, ms (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")


def noise(exp, fl):
    """Whether the floor dominates the figures: its worst wake-up latency reaches the
    time scale the verdict hinges on."""
    if exp.timescale_us is None or fl.get("max_us") is None:
        return None
    return fl["max_us"] >= exp.timescale_us


def run_one(exp, quick, scratch):
    """Runs `exp` (its floor first, both under the rt lock when it is an rt experiment)
    and returns the result object."""
    if exp.root and os.geteuid() != 0:
        raise SystemExit(f"bench/run {exp.name}: needs root")
    ctx = Context(quick, scratch)
    started = time.time()
    result = {"experiment": exp.name, "title": exp.title,
              "paper": {"source": exp.source, "figures": exp.paper},
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "quick": quick, "host": host()}
    with rt_lock(exp.rt):
        result["floor"] = floor(1 if quick else 5)
        try:
            measured, baseline, verdict = exp.run(ctx)
            result.update(measured=measured, baseline=baseline, verdict=verdict)
        except Exception as e:  # one experiment's failure is reported, not fatal
            result.update(measured=None, baseline=None, verdict={}, error=str(e))
    result["noise_dominated"] = noise(exp, result["floor"])
    result["setup"] = exp.setup
    result["differs"] = exp.differs
    result["commands"] = ctx.commands
    result["duration_s"] = round(time.time() - started, 1)
    return result
