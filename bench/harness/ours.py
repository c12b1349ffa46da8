"""Our own experiments: the existing benches (bench/*) with the peer each compares with."""

import os
import subprocess

from . import svg
from .core import ROOT, Experiment, target
from .papers import pick, wrap_raw

SIMSO_REQ = os.path.join(ROOT, "bench", "python", "requirements-simso.txt")
SIMSO_VENV = os.path.join(ROOT, ".venv-simso")


def channels(ctx):
    d = ctx.bench_json(["bench/chan"] + (["--quick"] if ctx.quick else []), timeout=1800)
    keys = ["fifo_rtt_median_ns", "fifo_rtt_p99_ns", "latest_rtt_median_ns",
            "fifo_blocking_rtt_median_ns", "fifo_throughput_msgs_per_s"]
    measured = {k: d[k] for k in keys}
    baseline = {"name": "iceoryx2, a bare SPSC ring, a futex ping-pong, a Unix socket (same run)",
                "iceoryx2_rtt_median_ns": d.get("iceoryx2_rtt_median_ns"),
                "bare_ring_rtt_median_ns": d["bare_ring_rtt_median_ns"],
                "futex_rtt_median_ns": d["futex_rtt_median_ns"],
                "unix_rtt_median_ns": d["unix_rtt_median_ns"],
                "iceoryx2_throughput_msgs_per_s": d.get("iceoryx2_throughput_msgs_per_s")}
    verdict = {k[:-4]: target(k[:-4].replace("_", " "), d.get(k[:-4]), d[k])
               for k in d if k.endswith("_met")}
    return measured, baseline, verdict


def can(ctx):
    env = {"REPLAY_S": str(pick(ctx.quick, 3, 20)), "SATURATE_S": str(pick(ctx.quick, 2, 10))}
    d = ctx.bench_json(["bench/can"], env=env, timeout=1800)
    runs = {(r["load"], r["mode"]): r for r in d["runs"]}
    def figures(mode):
        out = {}
        for load in ("replay", "saturate"):
            r = runs[(load, mode)]
            out[f"{load}_p99_delivery_to_mapper_ms"] = r["delivery_to_mapper_ms"]["p99"]
            out[f"{load}_lost"] = r["lost"]
            out[f"{load}_fps"] = round(r["throughput_fps"])
        return out
    measured = figures("reserved")
    baseline = {"name": "the same path as SCHED_OTHER processes"}
    baseline.update(figures("sched_other"))
    verdict = {"saturation": target("0 loss at saturation, p99 delivery-to-mapper <= 2 periods",
                                    measured["saturate_p99_delivery_to_mapper_ms"],
                                    d["target_met_reserved_saturation"])}
    return measured, baseline, verdict


def analysis(ctx):
    d = ctx.bench_json(["bench/analysis"])
    measured = {"full_ms": d["full_ms"], "verdict_ms": d["verdict_ms"], "sets": d["sets"],
                "schedulable": d["schedulable"]}
    baseline = {"name": "the naive Joseph & Pandya iteration (same run); pyCPA is not on "
                        "PyPI here: its figure is quoted",
                "naive_rta_ms": d["baseline_naive_rta_ms"], "pycpa_quoted_s": 21}
    verdict = {"time": target("1000 sets in <= 5 ms", d["full_ms"], d["within_target"])}
    return measured, baseline, verdict


def simso(seconds):
    """SimSo's jobs per CPU-second on bench/sim's set, from .venv-simso (installed from
    the pinned requirements when missing); None when it does not install."""
    py = os.path.join(SIMSO_VENV, "bin", "python")
    marker = os.path.join(SIMSO_VENV, "requirements.txt")
    with open(SIMSO_REQ) as f:
        wanted = f.read()
    if not os.path.exists(marker) or open(marker).read() != wanted:
        ok = subprocess.run(["python3", "-m", "venv", SIMSO_VENV]).returncode == 0 and \
            subprocess.run([os.path.join(SIMSO_VENV, "bin", "pip"), "install", "-q",
                            "--disable-pip-version-check", "-r", SIMSO_REQ]).returncode == 0
        if not ok:
            return None
        with open(marker, "w") as f:
            f.write(wanted)
    return [py, os.path.join(ROOT, "bench", "python", "simso_rate.py"), str(seconds)]


def sim(ctx):
    d = ctx.bench_json(["bench/sim", str(pick(ctx.quick, 20, 600))])
    measured = {"jobs_per_s": d["jobs_per_s"], "sporadic_server_jobs_per_s":
                d["sporadic_server_jobs_per_s"], "traced_jobs_per_s": d["baseline_jobs_per_s"]}
    peer = simso(pick(ctx.quick, 1, 10))
    s = ctx.bench_json(peer) if peer else {}
    baseline = {"name": "SimSo 0.8.5 on the same task set (same run)",
                "jobs_per_s": s.get("jobs_per_s")}
    verdict = {"rate": target(">= 5 M jobs/s", d["jobs_per_s"], d["jobs_per_s"] >= d["target_jobs_per_s"])}
    if s:
        ratio = round(d["jobs_per_s"] / s["jobs_per_s"])
        verdict["simso"] = target(">= 100x SimSo", ratio, ratio >= 100)
    return measured, baseline, verdict


def probe(ctx):
    d = ctx.bench_json(["bench/probe", "--duration", str(pick(ctx.quick, 2, 10))])
    measured = {f"cpu{r['cpu']}_{k}": r[k] for r in d["probe"] for k in ("median_us", "p99_us", "max_us")}
    baseline = {"name": "cyclictest (rt-tests), same setting, same run"}
    for r in d["cyclictest"] or []:
        baseline.update({f"cpu{r['cpu']}_{k}": r[k] for k in ("median_us", "p99_us", "max_us")})
    agree = None
    if d["cyclictest"]:
        ours = max(r["p99_us"] for r in d["probe"])
        theirs = max(r["p99_us"] for r in d["cyclictest"])
        agree = abs(ours - theirs) <= max(50, theirs)
    verdict = {"agrees": target("p99 within 2x (or 50 us) of cyclictest's", None, agree)}
    return measured, baseline, verdict


def check(ctx):
    d = ctx.bench_json(["bench/check"])
    measured = {k: v for k, v in d.items() if k.startswith("load_")}
    baseline = {"name": "bare YAML parsing of the same files (same run)"}
    baseline.update({k: v for k, v in d.items() if k.startswith("yaml_parse_")})
    return measured, baseline, {}


def power(ctx):
    d = ctx.bench_json(["bench/power"])
    measured = {"write_ns_kept_fd": d["write_ns_kept_fd"],
                "driveos_min_energy_hz": d["driveos_min_energy_hz"]}
    baseline = {"name": "reopening the frequency file per write",
                "write_ns_reopen": d["write_ns_reopen_baseline"]}
    return measured, baseline, {}


def python_chan(ctx):
    argv = ["bench/python-chan", "--quick"] if ctx.quick else ["bench/python-chan", "20000"]
    d = ctx.bench_json(argv, timeout=1800)
    p50 = d["round_trip_p50_us"]
    measured = {k + "_p50_us": v for k, v in p50.items() if k.startswith("bulkhead")}
    baseline = {"name": "multiprocessing shared memory, iceoryx2's Python binding (same run)"}
    baseline.update({k + "_p50_us": v for k, v in p50.items() if not k.startswith("bulkhead")})
    verdict = {"target": target("busy-poll <= 3 us and <= 0.5x the fastest alternative",
                                d["busy_poll_ratio"], d["target_met"])}
    return measured, baseline, verdict


def report(ctx):
    d = ctx.bench_json(["bench/report"], timeout=1800)
    measured = {"generate_s": d["generate_s"], "page_mb": d["page_mb"],
                "chromium_ready_ms": d["chromium_ready_ms"]}
    baseline = {"name": "Python's json parser; Chromium parsing the raw trace (same run)",
                "python_json_s": d["baseline_python_json_s"],
                "chromium_trace_parse_ms": d["baseline_chromium_trace_parse_ms"]}
    verdict = {"drawn": target("page drawn within 2 s", d["chromium_ready_ms"], d["within_goal"])}
    return measured, baseline, verdict


def dashboard(ctx):
    d = ctx.bench_json(["bench/dashboard", str(pick(ctx.quick, 5, 30))], timeout=1800)
    w = d["with_dashboard"]
    measured = {k: w[k] for k in ("updates_per_s", "latency_ms_median", "latency_ms_p99", "misses", "jobs")}
    baseline = {"name": "the same run with an idle process for the dashboard",
                "misses": d["baseline"]["misses"], "jobs": d["baseline"]["jobs"]}
    verdict = {"met": target(">= 10 updates/s, p99 < 100 ms", w["latency_ms_p99"], d["met"])}
    return measured, baseline, verdict


def fuzz(ctx):
    d = ctx.bench_json(["bench/fuzz", "--seconds", str(pick(ctx.quick, 5, 60))], timeout=3600)
    return wrap_raw(d, "none (fuzzing finds crashes; no peer)")


def run_memory(ctx):
    d = ctx.bench_json(["bench/run-memory", "--for", str(pick(ctx.quick, 10, 60))], timeout=1800)
    measured = {k: d[k] for k in ("growth_kb_quiet", "growth_kb_logged", "growth_kb_traced", "jobs")}
    verdict = {"flat": target("resident set grows <= 1 MB after start-up",
                              max(measured["growth_kb_logged"], measured["growth_kb_traced"]),
                              max(measured["growth_kb_logged"], measured["growth_kb_traced"]) <= 1024)}
    return measured, {"name": "the same run without outputs", "growth_kb": d["growth_kb_quiet"]}, verdict


def health(ctx):
    argv = ["bench/health"] + (["--quick"] if ctx.quick else [])
    d = ctx.bench_json(argv, timeout=1800)
    measured = {"faults": d["faults"]}
    for key in ("crash_restart", "silence_restart", "miss_mode"):
        for what, s in d[key].items():
            measured.update({f"{key}_{what}_{k}": v for k, v in s.items()})
    baseline = {"name": "the platform's floor in the same run (bulkhead probe, CPUs 0-1)",
                "probe_max_us": d["floor"].get("max_us")}
    p99 = measured.get("crash_restart_to_first_job_p99_us")
    verdict = {"restart": target("a crashed task's next job within one period (10 ms), p99",
                                 p99, p99 is not None and p99 <= 10_000)}
    return measured, baseline, verdict


def rt_isolation(ctx):
    d = ctx.bench_json(["bench/rt-isolation", "--duration", str(pick(ctx.quick, 5, 30))],
                       timeout=1800)
    jobs = lambda s: sum(t["jobs"] for t in d[s]["tasks"])
    measured = {"misses": d["bulkhead"]["misses"], "jobs": jobs("bulkhead"),
                "max_response_within_wcrt": d["bulkhead"]["max_response_within_wcrt"]}
    baseline = {"name": "the same tasks as SCHED_OTHER processes beside the hogs",
                "misses": d["baseline"]["misses"], "jobs": jobs("baseline")}
    verdict = {"misses": target("fewer misses than the baseline", measured["misses"],
                                measured["misses"] < baseline["misses"])}
    return measured, baseline, verdict


# bench/zenoh's bridges: period 2 ms under EDF with implicit deadlines, so each of the
# four bridge jobs a round trip waits for ends within T + D = 4 ms of the message.
ZENOH_RTT_BOUND_US = 4 * 4000


def zenoh(ctx):
    d = ctx.bench_json(["bench/zenoh"] + (["--quick"] if ctx.quick else []), timeout=1800)
    def figures(who):
        rtt, flood = d[f"{who}_round_trip"], d[f"{who}_throughput"]
        out = {f"round_trip_{k}": rtt.get(k) for k in ("median_us", "p99_us", "max_us")}
        out.update({f"throughput_{k}": flood.get(k)
                    for k in ("msgs_per_s", "gaps", "out_of_order")})
        return out
    measured = figures("bulkhead")
    measured["network"] = d.get("network")
    load = d.get("pipeline_under_load") or {}
    measured.update({f"pipeline_e2e_{k}": load.get(k)
                     for k in ("median_us", "p99_us", "max_us", "bound_us", "gaps",
                               "out_of_order")})
    baseline = {"name": f"plain Zenoh pub/sub between the same endpoints (same run, "
                        f"{d.get('network')})"}
    baseline.update(figures("zenoh"))
    p99 = measured["round_trip_p99_us"]
    lost = (measured["throughput_gaps"] or 0) + (measured["throughput_out_of_order"] or 0)
    e2e_max, e2e_bound = load.get("max_us"), load.get("bound_us")
    e2e_lost = (load.get("gaps") or 0) + (load.get("out_of_order") or 0)
    verdict = {
        "round_trip": target("p99 round trip within four bridge jobs, 4 x (T + D) = 16 ms",
                             p99, p99 is not None and p99 <= ZENOH_RTT_BOUND_US),
        "lossless": target("0 gaps and 0 out of order at full rate", lost,
                           measured["throughput_msgs_per_s"] is not None and lost == 0),
        "pipeline_bound": target("pipeline under load: max e2e delay within solve's bound, "
                                 "none lost or reordered", e2e_max,
                                 None not in (e2e_max, e2e_bound) and e2e_max <= e2e_bound
                                 and e2e_lost == 0),
    }
    return measured, baseline, verdict


def probe_plot(result):
    m, b = result.get("measured") or {}, result.get("baseline") or {}
    cpus = sorted({k.split("_")[0] for k in m})
    groups = [f"{c} {q}" for c in cpus for q in ("median", "p99")]
    val = lambda d: [d.get(f"{c}_{q}_us") for c in cpus for q in ("median", "p99")]
    return [("wake-up latency", svg.bars("Timer wake-up latency", "us", groups,
                                         {"bulkhead probe": val(m), "cyclictest": val(b)}))]


EXPERIMENTS = [
    Experiment("channels", "Channel round trip and throughput", None, {},
               "bench/chan: fifo (busy-poll, blocking) and latest channels between two "
               "processes pinned to CPUs 0 and 1, 32-byte messages.", "", channels,
               packages=["bulkhead-bench-chan"], rt=True, timescale_us=100),
    Experiment("can", "CAN gateway path", None, {},
               "bench/can: virtual bus -> gateway reader -> fifo channel -> mapper under a CPU "
               "hog per CPU, the RAV4 log at 1x (20 s) and a saturated bus (10 s).", "", can,
               packages=["bulkhead-bench-can"], rt=True, timescale_us=4000),
    Experiment("analysis", "Schedulability analysis speed (against pyCPA)", None,
               {"pycpa_s": "21 (quoted, docs/analysis.md)"},
               "bench/analysis: 1000 random sets of 10 tasks.", "", analysis,
               packages=["bulkhead-bench-analysis"], root=False),
    Experiment("sim", "Simulator throughput (against SimSo)", None,
               {"simso_jobs_per_s": "about 5,000 (quoted before this harness ran it)"},
               "bench/sim: 10 rate-monotonic tasks (U = 0.85), 600 s simulated; SimSo on the "
               "same set for 10 s simulated.", "", sim, packages=["bulkhead-bench-sim"], root=False),
    Experiment("probe", "The platform's floor against cyclictest", None, {},
               "bench/probe: `bulkhead probe` and cyclictest, 1 ms interval, SCHED_FIFO 90, "
               "every CPU, 10 s each.", "", probe, rt=True, plots=probe_plot),
    Experiment("check", "Loading and validating large descriptions", None, {},
               "bench/check: 100 to 10000 partitions; 100000 keys, tasks, channels.", "", check,
               packages=["bulkhead-bench-check"], root=False),
    Experiment("power", "Frequency writes and energy per policy", None, {},
               "bench/power: CPUFreq writes on an imitation tree; energy per DEmOS policy in "
               "simulation; --min-energy on the DriveOS example.", "", power,
               packages=["bulkhead-bench-power"], root=False),
    Experiment("python-chan", "Python channel round trip", None, {},
               "bench/python-chan: 20000 round trips per variant, CPUs 0 and 1.", "", python_chan,
               rt=True, timescale_us=100),
    Experiment("report", "The HTML report of a 60 s simulation", None, {},
               "bench/report: `bulkhead report` of a 60 s DriveOS simulation, drawn in "
               "headless Chromium.", "", report, root=False),
    Experiment("dashboard", "The live dashboard", None, {},
               "bench/dashboard: examples/driveos.yaml with the dashboard in headless "
               "Chromium for 30 s, against an idle process in its place.", "", dashboard,
               packages=["bulkhead-apps"], rt=True, timescale_us=100000),
    Experiment("fuzz", "Fuzzing the input parsers", None, {},
               "bench/fuzz: cargo-fuzz, 60 s per target (description, candump, dbc, channel "
               "header).", "", fuzz, root=False),
    Experiment("run-memory", "Supervisor memory over a long run", None, {},
               "bench/run-memory: a 1 kHz rt task, 60 s per run, without outputs, with a "
               "schedule log, with a trace.", "", run_memory, rt=True),
    Experiment("health", "Health monitoring: from a fault's evidence to its action's end", None, {},
               "bench/health: an rt task that crashes every 2 jobs (restart), a process that "
               "falls silent (watchdog 20 ms, restart), a task that misses (mode switch, switched "
               "back by ctl); 25 s each.", "", health, rt=True, timescale_us=10000),
    Experiment("rt-isolation", "DriveOS Table 3's tasks beside 20 hogs", None, {},
               "bench/rt-isolation: Table 3's Quest tasks as an rt partition on CPU 0, 20 hogs "
               "on CPU 1, 30 s; then as SCHED_OTHER processes.", "", rt_isolation,
               packages=["bulkhead-bench-rt-isolation"], rt=True, timescale_us=1000),
    Experiment("zenoh", "Channels across machines: bulkhead-bridge beside plain Zenoh", None, {},
               "bench/zenoh: 32-byte messages over TCP between two network namespaces joined "
               "by a veth pair (loopback where they cannot be made): round trip through four "
               "bridges (period 2 ms) and throughput through two, beside plain Zenoh pub/sub "
               "on the same CPUs, same configuration; a bridged pipeline's end-to-end delay "
               "under a CPU burner beside solve's bound.", "", zenoh,
               packages=["bulkhead-bridge", "bulkhead-bench-zenoh"], rt=True,
               timescale_us=2000),
]
