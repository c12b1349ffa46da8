"""The papers' experiments (/work/shared/seeds/): DriveOS, JuMP2start, M2-Xen, Boomerang
and DEmOS, each with the paper's figures, what runs here and how it differs."""

import json
import os

from . import svg
from .core import BULKHEAD, RELEASE, ROOT, Experiment, can_log, target

DRIVEOS = "DriveOS (Jadhav et al., 2023)"
JUMP = "JuMP2start (Jadhav, Golchin, West; ECRTS 2024)"
M2XEN = "M2-Xen (Li et al., RTAS 2018)"
BOOM = "Boomerang (Golchin, Sinha, West; RTAS 2020)"
DEMOS = "DEmOS (Sojka et al.)"
CAN_BENCH = os.path.join(RELEASE, "bulkhead-bench-can")


def pick(quick, small, full):
    return small if quick else full


# ---- DriveOS -------------------------------------------------------------------------

def driveos_table2(ctx):
    """The Table 2 channels as examples/driveos.yaml declares them, and what each carried
    in a simulation of the example."""
    stats = os.path.join(ctx.scratch, "table2.json")
    ctx.sh([BULKHEAD, "sim", "examples/driveos.yaml", "--for", pick(ctx.quick, "2s", "20s"),
            "--stats-json", stats])
    with open(stats) as f:
        channels = {c["name"]: c for c in json.load(f)["channels"]}
    measured = {}
    for i, name in enumerate(TABLE2_CHANNELS, 1):
        c = channels.get(name, {})
        measured[f"ch{i}_{name}"] = f"{c.get('kind')} written {c.get('written')} lost {c.get('lost')}"
    kinds_ok = all(channels.get(n, {}).get("kind") == k for n, k in TABLE2_CHANNELS.items())
    # A `latest` channel (Async) overwrites by design: only the Sync ones must not lose.
    lost = sum(channels.get(n, {}).get("lost", 0) for n, k in TABLE2_CHANNELS.items() if k == "fifo")
    verdict = {"types": target("every Table 2 channel present with the paper's type "
                               "(Sync = fifo, Async = latest)", kinds_ok, kinds_ok),
               "lost": target("no message lost on the Sync channels", lost, lost == 0)}
    return measured, None, verdict


TABLE2_CHANNELS = {"ic_ivi_sensor": "fifo", "hvac_control": "fifo", "carla_sensor": "latest",
                   "carla_control": "fifo", "long_control_command": "fifo",
                   "long_control_data": "fifo", "long_update_input": "fifo",
                   "long_update_output": "fifo"}


def can_rows(ctx, what, seconds, counts=None):
    argv = [CAN_BENCH, what, BULKHEAD, can_log(), str(seconds)]
    if counts:
        argv.append(",".join(map(str, counts)))
    return ctx.bench_json(argv, timeout=3600)["rows"]


def driveos_table4(ctx):
    rows = {r["mode"]: r for r in can_rows(ctx, "table4", pick(ctx.quick, 3, 20))}
    ms = lambda r, where, key: round(r["inter_frame_ms"][where][key], 3)
    res, base = rows["reserved"], rows["sched_other"]
    measured = {"source_raw_ms": ms(res, "source", "raw_mean"),
                "received_raw_ms": ms(res, "received", "raw_mean"),
                "source_per_id_ms": ms(res, "source", "per_id_mean"),
                "received_per_id_ms": ms(res, "received", "per_id_mean"),
                "received_raw_p99_ms": ms(res, "received", "raw_p99"),
                "frames": res["received"], "lost": res["lost"]}
    baseline = {"name": "the same path as SCHED_OTHER processes (plain Linux)",
                "source_raw_ms": ms(base, "source", "raw_mean"),
                "received_raw_ms": ms(base, "received", "raw_mean"),
                "source_per_id_ms": ms(base, "source", "per_id_mean"),
                "received_per_id_ms": ms(base, "received", "per_id_mean"),
                "received_raw_p99_ms": ms(base, "received", "raw_p99"),
                "frames": base["received"], "lost": base["lost"]}
    over = measured["received_raw_ms"] / measured["source_raw_ms"] - 1
    verdict = {"raw_overhead": target("mean raw delay at most 1% above the source's "
                                      "(paper: DriveOS +0.4%, Linux +31%)",
                                      round(over * 100, 2), over <= 0.01),
               "lost": target("no frame lost", res["lost"], res["lost"] == 0)}
    return measured, baseline, verdict


def throughput_sweep(ctx, what, full_counts):
    counts = pick(ctx.quick, [0, 5], full_counts)
    rows = can_rows(ctx, what, pick(ctx.quick, 2, 10), counts)
    series = lambda mode: {r["processes"]: round(r["throughput_fps"]) for r in rows
                           if r["mode"] == mode}
    res, base = series("reserved"), series("sched_other")
    lost = {r["processes"]: r["lost"] for r in rows if r["mode"] == "reserved"}
    measured = {f"fps_{n}": res[n] for n in counts}
    measured.update({f"lost_{n}": lost[n] for n in counts})
    baseline = {"name": "the same path as SCHED_OTHER processes (plain Linux)"}
    baseline.update({f"fps_{n}": base[n] for n in counts})
    drop = 1 - min(res.values()) / max(res.values())
    verdict = {"flat": target("throughput within 5% of its best at every count "
                              "(paper: DriveOS flat, Linux drops)",
                              f"{drop * 100:.1f}% below best", drop <= 0.05)}
    return measured, baseline, verdict


def fps_plot(xlabel, paper_driveos, paper_linux):
    def plot(result):
        m, b = result.get("measured") or {}, result.get("baseline") or {}
        pts = lambda d: sorted((int(k[4:]), v) for k, v in d.items() if k.startswith("fps_"))
        return [("frames/s at the mapper", svg.lines(
            "Throughput at the Linux side's mapper", xlabel, "frames/s",
            {"bulkhead (reserved)": pts(m), "plain Linux (SCHED_OTHER)": pts(b)},
            hlines=[("paper: DriveOS", paper_driveos), ("paper: Linux, most load", paper_linux)]))]
    return plot


def driveos_72(ctx):
    args = pick(ctx.quick, ["--seconds", "5", "--quiet-seconds", "2"],
                ["--seconds", "60", "--quiet-seconds", "10"])
    d = ctx.bench_json(["bench/vehicle"] + args, timeout=3600)
    def figures(system):
        load = d["systems"][system]["load"]
        delay = load["delay"]
        return {"min_ms": delay["min_ms"], "mean_ms": delay["mean_ms"], "max_ms": delay["max_ms"],
                "p99_ms": delay["p99_ms"], "above_10ms_pct": delay["above_10ms_pct"],
                "frames": delay["frames"], "controller_misses": load["long_controller"]["misses"],
                "tracking_error_rms_kmh": load["tracking_error_kmh"]["rms"]}
    measured = figures("bulkhead")
    baseline = {"name": "the same programs as plain Linux processes (controller, K and L "
                        "under SCHED_DEADLINE, no partitions)"}
    baseline.update(figures("baseline"))
    verdict = {"bound": target("max end-to-end delay <= 11 ms (Table 3's sum of periods)",
                               measured["max_ms"], measured["max_ms"] <= 11),
               "industry": target("< 1% of delays above 10 ms (paper: Linux > 15%)",
                                  measured["above_10ms_pct"], measured["above_10ms_pct"] < 1),
               "ratio": target("baseline max / bulkhead max (paper: 12x)",
                               d["max_ratio_baseline_over_bulkhead"], None)}
    return measured, baseline, verdict


def driveos_72_plot(result):
    m, b = result.get("measured") or {}, result.get("baseline") or {}
    keys = ["min_ms", "mean_ms", "max_ms"]
    return [("end-to-end delay", svg.bars(
        "Controller pipeline end-to-end delay (Fig. 6a)", "ms", ["min", "mean", "max"],
        {"paper: DriveOS": [None, None, 4.0], "bulkhead": [m.get(k) for k in keys],
         "plain Linux": [b.get(k) for k in keys]}))]


# ---- JuMP2start ----------------------------------------------------------------------

FIG5_YAML = """system: {cpus: 0}
partitions:
  - name: quest
    kind: rt
    cpus: 0
    scheduler: fixed-priority
    tasks:
      - {name: tau1, cmd: "true", budget: 4ms, period: 8ms, server: sporadic, resume: restartable}
      - {name: tau2, cmd: "true", budget: 3ms, period: 10ms, server: sporadic, resume: continuable}
"""


def sim_log(ctx, name, yaml, extra):
    """`bulkhead sim` of `yaml` with `extra` flags: the schedule log's events."""
    path, log = (os.path.join(ctx.scratch, f"{name}.{x}") for x in ("yaml", "jsonl"))
    with open(path, "w") as f:
        f.write(yaml)
    ctx.sh([BULKHEAD, "sim", path, "--schedule-log", log] + extra)
    with open(log) as f:
        return [json.loads(line) for line in f]


def segments(events):
    """Per task, the (start, end) ms during which it ran, from job_start to the job's
    preemption or completion."""
    out, running = {}, {}
    for e in events:
        task, ev, t = e.get("task"), e["event"], e["t_ns"] / 1e6
        if ev == "job_start":
            running[task] = t
        elif ev in ("job_preempt", "job_complete") and task in running:
            out.setdefault(task, []).append((running.pop(task), t))
    return out


def jump_fig5(ctx):
    stopped = segments(sim_log(ctx, "fig5", FIG5_YAML, ["--for", "20ms", "--suspend", "5ms:7ms"]))
    normal = segments(sim_log(ctx, "fig5-normal", FIG5_YAML, ["--for", "20ms"]))
    fmt = lambda segs: " ".join(f"{a:g}-{b:g}" for a, b in segs)
    measured = {"tau1_runs_ms": fmt(stopped["tau1"]), "tau2_runs_ms": fmt(stopped["tau2"])}
    baseline = {"name": "the same tasks without the suspension (Fig. 5's Normal Execution)",
                "tau1_runs_ms": fmt(normal["tau1"]), "tau2_runs_ms": fmt(normal["tau2"])}
    want = JUMP_FIG5_PAPER
    verdict = {k: target(f"{k} as in Fig. 5's stitched timeline", measured[k], measured[k] == want[k])
               for k in ("tau1_runs_ms", "tau2_runs_ms")}
    return measured, baseline, verdict


JUMP_FIG5_PAPER = {"tau1_runs_ms": "0-4 5-9 13-17", "tau2_runs_ms": "4-5 9-11 17-20",
                   "note": "suspend at 5 for 7 units; tau1 restarts at 5 with a full budget, "
                           "tau2 resumes at 9, completes at 11, next release 5 + T2 = 15"}


def jump_fig5_plot(result):
    m = result.get("measured") or {}
    parse = lambda s: [tuple(float(x) for x in p.split("-")) for p in s.split()]
    rows = [(k[:4], parse(m[k])) for k in ("tau1_runs_ms", "tau2_runs_ms") if m.get(k)]
    return [("stitched timeline", svg.gantt("Fig. 5 stitched timeline (system time, ms)",
                                            "ms", rows, [("suspend/resume", 5)]))]


def fig11_yaml(pre_ms, resume):
    return f"""system: {{cpus: 0}}
partitions:
  - name: quest
    kind: rt
    cpus: 0
    tasks:
      - {{name: can2linux, cmd: "true", budget: {pre_ms}ms, period: {2 * pre_ms}ms, resume: {resume}}}
"""


def jump_fig11(ctx):
    """CAN2LINUX's pre-processing of T ms per job (period 2T), suspended mid-job in each
    of `cycles` cycles (at a point spread over the job), for 20 ms: per mode, how long
    after the resume the task still processes data sampled before the suspension (a
    continuable job finishing; a restartable one restarts at once), and when its first
    result from fresh data is out."""
    sweep = pick(ctx.quick, [1, 10, 100], [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000])
    cycles = pick(ctx.quick, 5, 50)
    out = {}
    for resume in ("restartable", "continuable"):
        for pre in sweep:
            period = 2 * pre
            ats = [(2 * k + 1) * period + pre * (k + 0.5) / cycles for k in range(cycles)]
            flags = ["--for", f"{(2 * cycles + 2) * period}ms"]
            flags += [a for at in ats for a in ("--suspend", f"{at:.6f}ms:20ms")]
            events = sim_log(ctx, f"fig11-{resume}-{pre}", fig11_yaml(pre, resume), flags)
            stale, fresh = [], []
            for at in ats:
                done = min(e["t_ns"] / 1e6 for e in events
                           if e["event"] == "job_complete" and e["t_ns"] / 1e6 > at)
                starts = [e["t_ns"] / 1e6 for e in events
                          if e["event"] == "job_start" and e["t_ns"] / 1e6 >= at]
                # Restartable: the job restarts at the resume on fresh data; continuable:
                # it finishes the stale job, and the next job is the first on fresh data.
                stale.append(0.0 if resume == "restartable" else done - at)
                first_fresh = min(starts) if resume == "restartable" else min(
                    s for s in starts if s >= done)
                fresh.append(min(e["t_ns"] / 1e6 for e in events if e["event"] == "job_complete"
                                 and e["t_ns"] / 1e6 > first_fresh) - at)
            out[(resume, pre)] = (sum(stale) / len(stale), max(stale), max(fresh))
    def figures(resume):
        out_ = {f"stale_worst_ms_T{p}": round(out[(resume, p)][1], 3) for p in sweep}
        out_.update({f"first_fresh_worst_ms_T{p}": round(out[(resume, p)][2], 3) for p in sweep})
        return out_
    measured = figures("restartable")
    baseline = {"name": "the same task continuable (the paper's other line)"}
    baseline.update(figures("continuable"))
    gain = [1 - out[("restartable", p)][2] / out[("continuable", p)][2] for p in sweep]
    verdict = {"better": target("restartable's first fresh result earlier than continuable's "
                                "at every T (paper: 50% better on average, 40% worst case)",
                                f"{min(gain) * 100:.0f}-{max(gain) * 100:.0f}% earlier",
                                min(gain) > 0)}
    return measured, baseline, verdict


def jump_fig11_plot(result):
    m, b = result.get("measured") or {}, result.get("baseline") or {}
    pts = lambda d, pre: sorted((int(k.split("_T")[1]), v) for k, v in d.items() if k.startswith(pre))
    return [("stale processing", svg.lines(
        "CAN2LINUX after a resume (Fig. 11)", "pre-processing T (ms)", "ms after the resume",
        {"restartable: stale work": pts(m, "stale"),
         "continuable: stale work": pts(b, "stale"),
         "restartable: first fresh result": pts(m, "first_fresh"),
         "continuable: first fresh result": pts(b, "first_fresh")}, logx=True))]


def jump_33(ctx):
    args = pick(ctx.quick, ["--cycles", "5", "--cold", "1", "--be-cycles", "3"],
                ["--cycles", "200", "--cold", "3", "--be-cycles", "50"])
    d = ctx.bench_json(["bench/stop-start"] + args, timeout=3600)
    p = lambda k, q="p50_ms": d.get(k, {}).get(q)
    measured = {"suspend_p50_ms": p("suspend"), "suspend_max_ms": p("suspend", "max_ms"),
                "resume_all_thawed_p50_ms": p("resume_all_thawed"),
                "resume_to_first_fresh_frame_p50_ms": p("resume_to_first_fresh_frame_rt"),
                "resume_to_first_fresh_frame_p99_ms": p("resume_to_first_fresh_frame_rt", "p99_ms"),
                "stale_frames_used": d.get("stale_frames_used"),
                "fresh_frames_lost": d.get("fresh_frames_lost"),
                "cold_over_resume_p50": d.get("cold_over_resume_like_for_like_p50")}
    baseline = {"name": "cold start: a new `bulkhead run` to can_rx's first frame",
                "cold_start_to_first_frame_p50_ms": p("cold_start_to_first_frame")}
    verdict = {"stale": target("no stale frame used", measured["stale_frames_used"],
                               measured["stale_frames_used"] == 0),
               "lost": target("no fresh frame lost", measured["fresh_frames_lost"],
                              measured["fresh_frames_lost"] == 0),
               "faster": target("resume >= 10x faster than a cold start (paper: ~100x vs a "
                                "PC's cold boot)", measured["cold_over_resume_p50"],
                                (measured["cold_over_resume_p50"] or 0) >= 10)}
    return measured, baseline, verdict


# ---- M2-Xen --------------------------------------------------------------------------

def m2xen_fig5(ctx):
    d = ctx.bench_json([os.path.join(RELEASE, "m2xen-fig5"), str(pick(ctx.quick, 4, 40))])
    rows = d["rows"]
    measured = {"cases": d["cases"], "schedulable_on_15": d["m2xen_schedulable"],
                "pcpus_max": max(r["m2xen"] for r in rows),
                "pcpus_mean": round(sum(r["m2xen"] for r in rows) / len(rows), 2),
                "initial_mode_cases_missing": d["initial_mode_cases_missing"],
                "details": rows}
    baseline = {"name": "Static Worst-case: one interface per VM for its worst mode (Xen)",
                "cases": d["cases"], "schedulable_on_15": d["static_schedulable"],
                "pcpus_max": max(r["static_worst_case"] for r in rows),
                "pcpus_mean": round(sum(r["static_worst_case"] for r in rows) / len(rows), 2)}
    fewer = all(r["m2xen"] <= r["static_worst_case"] for r in rows)
    verdict = {"fewer": target("per-mode interfaces need no more PCPUs than static worst-case "
                               "ones in every case", fewer, fewer),
               "fits": target("every case fits 15 PCPUs per mode", d["m2xen_schedulable"],
                              d["m2xen_schedulable"] == d["cases"])}
    return measured, baseline, verdict


def m2xen_fig5_plot(result):
    rows = (result.get("measured") or {}).get("details") or []
    return [("PCPUs per test case", svg.lines(
        "PCPUs required per test case (Fig. 5)", "test case", "PCPUs",
        {"Static Worst-case": [(r["case"], r["static_worst_case"]) for r in rows],
         "M2-Xen mode 0": [(r["case"], r["mode0"]) for r in rows],
         "M2-Xen mode 1": [(r["case"], r["mode1"]) for r in rows]},
        hlines=[("15 PCPUs available", 15)]))]


def m2xen_89(ctx):
    d = ctx.bench_json(["bench/mode-switch", "--switches", str(pick(ctx.quick, 10, 300))],
                       timeout=3600)
    by = {r["policy"]: r for r in d["results"]}
    measured = {}
    for pol in ("sequential", "batch", "greedy", "boost"):
        if pol in by:
            measured[f"{pol}_p50_ms"] = round(by[pol]["median_us"] / 1e3, 3)
            measured[f"{pol}_p99_ms"] = round(by[pol]["p99_us"] / 1e3, 3)
            measured[f"{pol}_kept_misses_per_s"] = by[pol]["kept_task_misses_per_s"]
    if by.get("boost", {}).get("steal_read"):
        clean = by["boost"]["without_steal_p99_us"]
        measured["boost_switches_without_steal"] = by["boost"]["switches_without_steal"]
        measured["boost_p99_without_steal_ms"] = round(clean / 1e3, 3) if clean else None
    base, strict = by.get("baseline", {}), by.get("baseline-strict", {})
    cpu1 = d["platform_floor"].get("cpu1_wakeups", {})
    baseline = {"name": "the same run without switches (kept tasks' misses in the measured "
                        "window: started late = the platform's)",
                "kept_misses_per_s": base.get("kept_task_misses_per_s"),
                "kept_misses_started_late": base.get("misses_started_late"),
                "kept_misses_overran": base.get("misses_overran"),
                "kept_misses_per_s_without_reclaim": strict.get("kept_task_misses_per_s"),
                "cpu1_other_processes_s": base.get("cpu1_other_processes_s"),
                "window_s": base.get("window_s"),
                "cpu1_wakeups_later_than_1ms_per_s": cpu1.get("later_than_1ms_per_s"),
                "futex_round_trip_cross_cpu_p50_ms": round(
                    d["platform_floor"].get("cross_cpu", {}).get("median_us", 0) / 1e3, 3),
                "wake_of_busy_cpu1_p50_ms": round(
                    d["platform_floor"].get("cross_cpu_busy", {}).get("wake_call_us", 0) / 1e3,
                    4)}
    boost, greedy = measured.get("boost_p99_ms"), measured.get("greedy_p99_ms")
    clean_p99 = measured.get("boost_p99_without_steal_ms")
    verdict = {"boost": target("boost p99 <= 1.5 ms (paper: < 1.5 ms)", boost,
                               boost is not None and boost <= 1.5),
               "order": target("boost p99 below greedy's (paper: 2.7x lower)",
                               round(greedy / boost, 2) if boost and greedy else None,
                               boost is not None and greedy is not None and boost < greedy),
               "boost_ours": target("boost p99 <= 0.5 ms (issue 36)", boost,
                                    boost is not None and boost <= 0.5),
               "boost_ours_without_steal": target(
                   "boost p99 <= 0.5 ms over the switches the host took < 10 us from "
                   "(issue 36)", clean_p99, None if clean_p99 is None else clean_p99 <= 0.5),
               "baseline": target("kept tasks' misses without switches <= 1 per second",
                                  baseline["kept_misses_per_s"],
                                  baseline["kept_misses_per_s"] is not None
                                  and baseline["kept_misses_per_s"] <= 1)}
    return measured, baseline, verdict


def m2xen_89_plot(result):
    m = result.get("measured") or {}
    pols = ["sequential", "batch", "greedy", "boost"]
    return [("switch latency", svg.bars(
        "Mode switch latency per policy (Fig. 8-9)", "ms", pols,
        {"bulkhead p50": [m.get(f"{p}_p50_ms") for p in pols],
         "bulkhead p99": [m.get(f"{p}_p99_ms") for p in pols],
         "paper p99 (12 VMs)": [None, None, 5.0, 1.49]}))]


# ---- Boomerang -----------------------------------------------------------------------

def pipes(ctx, sets):
    argv = ["bench/pipes", "--sets", sets, "--no-floor",
            "--duration", str(pick(ctx.quick, 3, 20))]
    d = ctx.bench_json(argv, timeout=3600)["sets"][sets]
    def figures(which):
        out = {}
        for p, f in (d.get(which) or {}).items():
            for k in ("min_ms", "max_ms", "mean_ms"):
                out[f"{p}_{k}"] = f[k]
            out[f"{p}_loss_pct"] = round((f["loss"] or 0) * 100, 2)
            if f.get("throughput_per_s") is not None:
                out[f"{p}_msgs_per_s"] = f["throughput_per_s"]
        return out
    measured = figures("bulkhead")
    baseline = {"name": "the same stages as plain Linux processes (CFS, pipes)"}
    baseline.update(figures("baseline"))
    verdict = {}
    for p, b in d["bounds_ms"].items():
        f = d["bulkhead"][p]
        verdict[f"{p}_bound"] = target(f"{p}: max delay <= {b} ms", f["max_ms"], f["max_within_bound"])
        verdict[f"{p}_loss"] = target(f"{p}: loss <= {d['loss_bound'][p] * 100:g}%",
                                      measured[f"{p}_loss_pct"],
                                      f["loss"] is not None and f["loss"] <= d["loss_bound"][p] + 1e-9)
    return measured, baseline, verdict


def lead(v):
    """The leading number of a paper's figure (`9.57 (Linux SMP 31.5)` -> 9.57)."""
    try:
        return float(str(v).split()[0])
    except (ValueError, IndexError):
        return None


def pipes_plot(paper_rows):
    def plot(result):
        m, b = result.get("measured") or {}, result.get("baseline") or {}
        names = sorted({k.split("_")[0] for k in m})
        groups = [f"{n} {s}" for n in names for s in ("min", "mean", "max")]
        key = lambda n, s: f"{n}_{s}_ms"
        return [("end-to-end delay", svg.bars(
            "End-to-end delay per pipeline", "ms", groups,
            {"paper: Boomerang": [lead(paper_rows.get(key(n, s))) for n in names for s in ("min", "mean", "max")],
             "bulkhead": [m.get(key(n, s)) for n in names for s in ("min", "mean", "max")],
             "plain Linux": [b.get(key(n, s)) for n in names for s in ("min", "mean", "max")]}))]
    return plot


# ---- DEmOS ---------------------------------------------------------------------------

def demos_fig5(ctx):
    """Fig. 5's configuration run by `bulkhead run` (real processes, real windows): the
    grants of each 200 ms window, against the timeline the configuration implies and
    `bulkhead sim`'s."""
    src = os.path.join(ROOT, "examples", "demos-window-schedule.yaml")
    path = os.path.join(ctx.scratch, "demos-fig5.yaml")
    with open(src) as f, open(path, "w") as g:
        g.write(f.read())
    os.chmod(ctx.scratch, 0o755)
    log = os.path.join(ctx.scratch, "demos-fig5.jsonl")
    ctx.sh([BULKHEAD, "run", path, "--timeout", pick(ctx.quick, "1s", "10s"),
            "--schedule-log", log])
    run = timeline(log)
    simlog = os.path.join(ctx.scratch, "demos-fig5-sim.jsonl")
    ctx.sh([BULKHEAD, "sim", path, "--for", "1s", "--schedule-log", simlog])
    sim = timeline(simlog)
    # The timeout cuts the last window short: the complete ones count.
    run = run[:-1]
    windows = len(run)
    same = sum(1 for w in run if w == DEMOS_FIG5_PAPER["grants_per_window"])
    measured = {"windows": windows, "windows_as_configured": same,
                "grants_per_window": run[0] if run else None}
    baseline = {"name": "bulkhead sim of the same configuration (no demos-sched here)",
                "windows": len(sim), "grants_per_window": sim[0] if sim else None}
    verdict = {"timeline": target("every window's grants as Fig. 5's configuration implies",
                                  f"{same}/{windows}", windows > 0 and same == windows)}
    return measured, baseline, verdict


DEMOS_FIG5_PAPER = {
    "grants_per_window": "cpu0 SC1@0 SC1@100 BE1@175; cpu1 SC2@0",
    "note": "one 200 ms window: CPU 0 runs SC1's 100 and 50 ms processes, then BE1 once every "
            "SC partition of the window has finished (SC2's 175 ms on CPU 1)"}


def timeline(log):
    """Per 200 ms window, its grants as `cpuN PART@ms ...; cpuM ...`."""
    windows = {}
    with open(log) as f:
        for line in f:
            e = json.loads(line)
            if e["event"] != "run":
                continue
            w, at = divmod(e["t_ns"] // 1_000_000, 200)
            windows.setdefault(w, {}).setdefault(e["cpus"], []).append(f"{e['partition']}@{at}")
    return ["; ".join(f"cpu{c} " + " ".join(g) for c, g in sorted(ws.items()))
            for _, ws in sorted(windows.items())]


def demos_window_switch(ctx):
    """bench/window-switch, with DEmOS beside bulkhead when DEMOS_SCHED names a build
    of it (scripts/build-demos.sh), checked against issue 36's goals (<= 15 us,
    <= 0.25x DEmOS) on two partitions alternating in 1 ms windows (`alternate_1`), the
    fair case: both schedulers must freeze one and thaw the other at every switch. With
    one partition alone bulkhead never freezes it (granted again at once) while DEmOS
    does, so its 1 ms figures are reported but judge nothing. The figure judged is the
    direct one (the CPU time lost per switch, from the spins' own clocks) when the
    bench has it, else the difference of wall times."""
    return window_switch_figures(ctx.bench_json(["bench/window-switch"], timeout=3600))


def window_switch_figures(d):
    """The measured, baseline and verdict of `demos_window_switch` from the bench's JSON."""
    one = d["per_switch_us"].get("1") or {}
    alt = d["per_switch_us"].get("alternate_1") or {}
    direct = alt.get("gap_median_us") is not None
    ours = alt.get("gap_median_us") if direct else alt.get("median_us")
    theirs = alt.get("demos_gap_median_us") if direct else alt.get("demos_median_us")
    how = "CPU time lost per switch, two partitions alternating" if direct else \
        "overhead per switch (wall times), two partitions alternating"
    measured = {"raw": d, "alternate_median_us_at_1ms": ours,
                "one_partition_median_us_at_1ms": one.get("median_us"),
                "one_partition_demos_median_us_at_1ms": one.get("demos_median_us")}
    baseline = {"name": "the work pinned alone, no windows (in the same run)"}
    verdict = {}
    if ours is not None:
        verdict["switch"] = target(f"{how}, 1 ms windows, median <= 15 us", ours, ours <= 15)
    if theirs is not None:
        baseline = {"name": f"DEmOS's demos-sched ({demos_commit()}), same work and windows, "
                            "same run", "alternate_median_us_at_1ms": theirs,
                    "one_partition_median_us_at_1ms": one.get("demos_median_us")}
        ratio = ours / theirs if ours is not None and theirs > 0 else None
        measured["alternate_ratio_to_demos_at_1ms"] = ratio
        verdict["ratio"] = target(f"{how}, 1 ms windows: at most 0.25x DEmOS's median", ratio,
                                  ratio is not None and ratio <= 0.25)
    return measured, baseline, verdict


def demos_commit():
    """The DEmOS commit DEMOS_SCHED was built from (written beside it by
    scripts/build-demos.sh)."""
    path = os.environ.get("DEMOS_SCHED", "") + ".commit"
    try:
        with open(path) as f:
            return "commit " + f.read().strip()
    except OSError:
        return "commit unknown"


def demos_startup(ctx):
    # --raw-output: without the output relay, whose two pipes per process do not fit
    # 10000 processes under a hard descriptor limit of 20000 that the run may not raise
    # (no CAP_SYS_RESOURCE), so that size would be refused; every size alike, so that
    # the rows compare.
    args = pick(ctx.quick, ["--sizes", "100", "--runs", "1"], ["--sizes", "100,1000,10000", "--runs", "1"])
    args.append("--raw-output")
    d = ctx.bench_json(["bench/startup"] + args, timeout=3600)
    measured = {f"startup_{r['n']}_s": r["startup_s"] for r in d["runs"]}
    measured.update({f"teardown_{r['n']}_s": r["teardown_s"] for r in d["runs"]})
    measured["left_behind"] = sum(r["left_processes"] + r["left_cgroups"] for r in d["runs"])
    baseline = {"name": "spawning the same processes without partitions"}
    baseline.update({f"startup_{r['n']}_s": r["baseline_spawn_s"] for r in d["runs"]})
    baseline.update({f"teardown_{r['n']}_s": r["baseline_teardown_s"] for r in d["runs"]})
    verdict = {"clean": target("nothing left behind", measured["left_behind"], measured["left_behind"] == 0)}
    for r in d["runs"]:
        goal = d["targets"].get(f"{r['n']}_s")
        if goal:
            verdict[f"startup_{r['n']}"] = target(f"{r['n']} partitions start within {goal} s",
                                                  r["startup_s"], r["startup_s"] <= goal)
    for r in d["runs"]:
        verdict[f"teardown_{r['n']}"] = target(f"{r['n']} partitions torn down no slower than started",
                                               r["teardown_s"], r["teardown_s"] <= r["startup_s"])
    return measured, baseline, verdict


def wrap_raw(d, baseline_name):
    """A bench whose JSON has no fixed figures to pick: all of it, as measured."""
    return {"raw": d}, {"name": baseline_name}, {}


def boom(rows):
    """Boomerang's table as `{pipeline_figure: "Boomerang (Linux SMP)"}` from
    `{figure: (boomerang, linux)}`."""
    return {k: f"{b} (Linux SMP {l})" if l is not None else b for k, (b, l) in rows.items()}


BOOM_TABLE2 = boom({"p1_min_ms": (0.79, 2.1), "p1_max_ms": (9.57, 31.5), "p1_mean_ms": (3.27, 11.70),
                    "p1_loss_pct": (0, 28), "p2_min_ms": (0.92, 1.8), "p2_max_ms": (7.97, 24.77),
                    "p2_mean_ms": (4.35, 6.79), "p2_loss_pct": (0, 56)})
BOOM_TABLE4 = boom({"p1_min_ms": (0.64, 2.24), "p1_max_ms": (10.96, 98.21), "p1_mean_ms": (4.87, 14.46),
                    "p1_loss_pct": (3.5, 55), "p2_min_ms": (0.64, 3.49), "p2_max_ms": (2.38, 96.02),
                    "p2_mean_ms": (1.07, 13.91), "p2_loss_pct": (0, 50)})
BOOM_TABLE6 = boom({"p1_min_ms": (0.77, 0.96), "p1_max_ms": (11.23, 65.24), "p1_mean_ms": (4.25, 33.10),
                    "p1_loss_pct": (0, 0.5), "p2_min_ms": (0.70, 0.70), "p2_max_ms": (5.03, 38.46),
                    "p2_mean_ms": (1.56, 12.84), "p2_loss_pct": (0, 0),
                    "p1_msgs_per_s": (99.77, 98.1), "p2_msgs_per_s": (124.77, 123.17)})
BOOM_MIMO = {"m_min_ms": "CAN4 path 0.86; CAN5 path 0.70", "m_max_ms": "CAN4 path 9.63; CAN5 path 5.00",
             "m_mean_ms": "CAN4 path 2.56; CAN5 path 2.11", "m_loss_pct": 0,
             "m_msgs_per_s": "CAN4 path 99.74; CAN5 path 124.74 (in)"}


EXPERIMENTS = [
    Experiment("driveos-table2", "Shared memory channels", f"{DRIVEOS}, Table 2",
               {f"ch{i}_{n}": "Async" if k == "latest" else "Sync, buffer 10"
                for i, (n, k) in enumerate(TABLE2_CHANNELS.items(), 1)},
               "examples/driveos.yaml's channels for Table 2's, simulated (`bulkhead sim`) for "
               "20 s: their kind and the messages each carried and lost.",
               "Table 2 is a list, not a measurement; our Sync channels are fifos of depth 10, "
               "Async ones `latest`; the traffic is the simulation's, not the HIL car's.",
               driveos_table2, root=False),
    Experiment("driveos-table4", "Delay between consecutive CAN frames", f"{DRIVEOS}, Table 4",
               {"source_raw_ms": 2.85, "received_raw_ms": "DriveOS 2.86; Linux 3.73; optimized Linux 3.43",
                "source_per_id_ms": 82.5,
                "received_per_id_ms": "DriveOS 83.25; Linux 98.97; optimized Linux 94.38",
                "frames": 5000},
               "The RAV4 log (comma2k19) replayed at 1x on a virtual 500 kbit/s bus; the gateway's "
               "reader -> fifo channel -> the Linux side's mapper, with a CPU hog per CPU; mean "
               "delay between consecutive frames (all, and of one CAN id) at the bus and at the "
               "mapper, reserved (SCHED_DEADLINE) against SCHED_OTHER.",
               "A virtual bus, no USB-CAN adapter or xHCI interrupts (the paper's Linux loses "
               "frames there); the RAV4 log rather than the Laguna Seca log (more frames per "
               "second); 20 s (about 22,000 frames) rather than 5,000 frames.",
               driveos_table4, packages=["bulkhead-bench-can"], rt=True, timescale_us=2000),
    Experiment("driveos-fig8", "Infotainment throughput against background processes",
               f"{DRIVEOS}, Fig. 8 and Table 5",
               {"result": "DriveOS flat; Linux drops as background processes grow",
                "fps_20": "DriveOS 1938.4 +- 29.4; Linux 1378.6 +- 769.5; optimized Linux "
                          "1558.3 +- 632.5 (Table 5)"},
               "A saturated 500 kbit/s virtual bus through the gateway's reader to the mapper, "
               "10 s per point, beside 0, 5, 10 and 20 background processes that log every "
               "frame to disk, sync and copy their logs; reserved against SCHED_OTHER.",
               "Frames per second at the mapper (IML's place); the bus is saturated to measure "
               "the path's capacity instead of replaying the car's log; 10 s per point instead "
               "of 3 minutes; no USB interrupts.",
               lambda ctx: throughput_sweep(ctx, "fig8", [0, 5, 10, 20]),
               packages=["bulkhead-bench-can"], rt=True, timescale_us=2000,
               plots=fps_plot("background processes", 1938.4, 1378.6)),
    Experiment("driveos-fig9", "Infotainment throughput against time-critical processes",
               f"{DRIVEOS}, Fig. 9",
               {"result": "DriveOS flat over 0-15 critical processes; Linux drops with CAN I/O "
                          "and with other I/O critical processes"},
               "As driveos-fig8, beside 0, 5, 10 and 15 critical processes under "
               "SCHED_DEADLINE (20 us every 20 ms, Sec. 7.3.1) that read every frame and write "
               "one per period on the bus (winning arbitration).",
               "The critical processes are SCHED_DEADLINE in both configurations (the paper's "
               "DriveOS runs them in Quest); their frames share the virtual bus; no USB-CAN.",
               lambda ctx: throughput_sweep(ctx, "fig9", [0, 5, 10, 15]),
               packages=["bulkhead-bench-can"], rt=True, timescale_us=2000,
               plots=fps_plot("critical processes", 1938.4, 1378.6)),
    Experiment("driveos-7.2", "Controller pipeline end-to-end delay", f"{DRIVEOS}, Sec. 7.2, Fig. 6",
               {"max_ms": "DriveOS within the 11 ms bound (1/12 of Linux's max)",
                "above_10ms_pct": "DriveOS 0; Linux > 15", "bound_ms": 11, "industry_ms": 10},
               "bench/vehicle: `bulkhead run examples/driveos.yaml` with 20 best-effort threads "
               "keeping ~60% of the machine busy (disk, loopback), 60 s loaded + 10 s quiet, "
               "against the same programs as plain Linux processes.",
               "A simulated vehicle (plant) instead of CARLA; 60 s (30,000 frames) instead of the "
               "paper's runs; bench/vehicle's own default is 100,000 frames.",
               driveos_72, packages=["bulkhead-apps", "bulkhead-bench-vehicle"], rt=True,
               timescale_us=11000, plots=driveos_72_plot),
    Experiment("jump2start-fig5", "Restartable and continuable tasks across a suspension",
               f"{JUMP}, Sec. 2.4, Fig. 5", JUMP_FIG5_PAPER,
               "Fig. 5's tasks (tau1 C=4 T=8 restartable, tau2 C=3 T=10 continuable, sporadic "
               "servers, RMS) in `bulkhead sim`, suspended at 5 for 7 units (ms).",
               "Simulated: Fig. 5 is a schedule diagram; the real stop-start is jump2start-3.3.",
               jump_fig5, root=False, plots=jump_fig5_plot),
    Experiment("jump2start-fig11", "Restartable against continuable over the pre-processing sweep",
               f"{JUMP}, Sec. 3.3, Fig. 11",
               {"result": "restartable 50% better on average, 40% in the worst case; the gap "
                          "grows with the pre-processing delay T = 1..1000 ms",
                "cycles": 50},
               "CAN2LINUX with T ms of pre-processing per job (period 2T), suspended mid-job in "
               "each of 50 cycles (points spread over the job) for 20 ms, in `bulkhead sim` for "
               "T = 1, 2, 5, ..., 1000 ms: stale work after the resume and the first result from "
               "fresh data, restartable against continuable.",
               "Simulated, so the restartable task's checkpoint costs nothing (the paper's "
               "user-space checkpoints leave it some stale work); a real run at these T would "
               "take hours.",
               jump_fig11, root=False, plots=jump_fig11_plot),
    Experiment("jump2start-3.3", "Stop-start: suspend, resume, fresh frames", f"{JUMP}, Sec. 3.2-3.3",
               {"resume": "critical services resume in several hundred ms (ACPI S3); ~100x "
                          "faster than a cold boot (16.7-24.5 s)",
                "stale_frames": "restartable tasks process no stale data"},
               "bench/stop-start: DriveOS Table 1's services, the gateway fed from the RAV4 log, "
               "200 suspend/resume cycles (20 ms each) through the control socket, 3 cold starts.",
               "A freeze of cgroups instead of ACPI S3 (no firmware, no device power-down): the "
               "resume is milliseconds, not hundreds; the cold start is a new `bulkhead run`.",
               jump_33, rt=True, timescale_us=10000),
    Experiment("m2xen-fig5", "PCPUs needed: per-mode interfaces against static worst-case",
               f"{M2XEN}, Sec. VI-B, Fig. 5",
               {"cases": 40, "schedulable_on_15": "M2-Xen 40; Static Worst-case 0",
                "pcpus_max": "Static Worst-case above 15 in every case",
                "initial_mode_cases_missing": "Xen on its initial mode: 6 (deadline misses in a "
                                              "200 s run)"},
               "40 random two-mode cases of 12 3-VCPU VMs, tasks with periods in [100, 1000] ms, "
               "each mode's interfaces (period 5 ms, gEDF MPR test) fitted to 8.0 CPUs; PCPUs = "
               "the interfaces' bandwidth summed and rounded up.",
               "An analysis, as the paper's Fig. 5 is (CARTS); our PCPU count does not pack "
               "VCPUs onto PCPUs as CARTS does, so it is lower; the missed-deadline count is "
               "the analysis's (mode 1's tasks on mode 0's interfaces), not a 200 s run.",
               m2xen_fig5, packages=["bulkhead-bench-analysis"], root=False, plots=m2xen_fig5_plot),
    Experiment("m2xen-fig8-9", "Mode switch latency per policy", f"{M2XEN}, Sec. VI-D, Fig. 8-9",
               {"sequential_p99_ms": "> 5", "batch_p99_ms": "> 5",
                "greedy_p99_ms": "> 5 (min 2.25, max > 10)", "boost_p99_ms": "< 1.5 (1.09-1.49)"},
               "bench/mode-switch: 12 partitions as servers on CPU 1, half growing and half "
               "shrinking per switch, 300 switches per policy through `bulkhead ctl`'s socket; "
               "the partitions reclaim (GRUB), a baseline without reclaiming beside.",
               "Partitions (cgroups, SCHED_DEADLINE) on 2 vCPUs instead of 12 VMs of 3 VCPUs on "
               "15 PCPUs; a switch every ~25 ms instead of every 2-3 s.",
               m2xen_89, rt=True, timescale_us=1500, plots=m2xen_89_plot),
    Experiment("boomerang-table2", "Tuned pipes, no expected loss", f"{BOOM}, Sec. IV-A, Table II",
               BOOM_TABLE2,
               "bench/pipes, set noloss: Table I's pipelines from examples/boomerang.yaml fed "
               "from a virtual bus every 2 ms, Table I's background load as a best-effort "
               "partition of the description on the `linux` partition's CPU, which declares "
               "`exclusive: false` (ProcData under SCHED_DEADLINE beside the load, as the "
               "paper's Core 1), 20 s; against the stages as CFS processes over pipes.",
               "A virtual bus for the USB-CAN adapter and the Arduinos; the load's wget reads "
               "over loopback; 20 s instead of 10 runs of 30 s; 2 vCPUs of a shared VM.",
               lambda ctx: pipes(ctx, "noloss"), rt=True, timescale_us=8000,
               plots=pipes_plot(BOOM_TABLE2)),
    Experiment("boomerang-table4", "Tuned pipes, 20% allowed loss", f"{BOOM}, Sec. IV-A, Table IV",
               BOOM_TABLE4,
               "bench/pipes, set loss20: Table III's periods (2.5 ms), bounds 11 and 8.5 ms, as "
               "boomerang-table2 otherwise.", "As boomerang-table2.",
               lambda ctx: pipes(ctx, "loss20"), rt=True, timescale_us=8500,
               plots=pipes_plot(BOOM_TABLE4)),
    Experiment("boomerang-table6", "Tuned pipes with FIFO buffers", f"{BOOM}, Sec. IV-C, Tables VI-VII",
               BOOM_TABLE6,
               "bench/pipes, set fifo: Table V's FIFO pipelines (`*` specs, CanRead every 2 ms, "
               "ProcData and CanWrite every 4 ms, RTControl every 2.5 ms, budgets solved), fed at "
               "Table VII's rates (100 and 125 messages a second), 20 s, beside the load.",
               "The solver gives ProcData and RTControl two messages per period (rate matching, "
               "docs/pipes.md) where Table V gives one; otherwise as boomerang-table2.",
               lambda ctx: pipes(ctx, "fifo"), rt=True, timescale_us=8500,
               plots=pipes_plot(BOOM_TABLE6)),
    Experiment("boomerang-mimo", "MIMO pipeline", f"{BOOM}, Sec. IV-D, Table VIII",
               BOOM_MIMO,
               "bench/pipes, set mimo: Fig. 6's pipeline `*(A|B),C|D|E,F` with Table VIII's "
               "(budget, period) pairs, A fed at 100 and C at 125 messages a second from the "
               "bus, D in the `linux` partition, 20 s beside the load.",
               "One pipeline's figures over both outputs (each message reaches E and F: the "
               "paths' figures are not separated, and its messages out per second count both "
               "outputs); one delay bound (10 ms) for both paths. The baseline's sources "
               "produce every period (not at the paper's rates).",
               lambda ctx: pipes(ctx, "mimo"), rt=True, timescale_us=8000,
               plots=pipes_plot(BOOM_MIMO)),
    Experiment("demos-fig5", "The DEmOS example configuration run", f"{DEMOS}, Fig. 5",
               DEMOS_FIG5_PAPER,
               "examples/demos-window-schedule.yaml (Fig. 5, unchanged) run by `bulkhead run` "
               "for 10 s: each 200 ms window's grants from the schedule log.",
               "The grants are the supervisor's; demos-sched is not built here, so the "
               "baseline is bulkhead's simulation of the same configuration.",
               demos_fig5, rt=True),
    Experiment("demos-window-switch", "Window-switch overhead", f"{DEMOS}, Sec. 6, Fig. 9",
               {"result": "processing time per frame grows as windows shorten; negligible at "
                          ">= 10 ms windows"},
               "bench/window-switch: fixed CPU work pinned alone against the same work in one "
               "repeating window of 100/10/5/2/1 ms.",
               "CPU work instead of the paper's video frames; demos-sched beside it only when "
               "DEMOS_SCHED names a build of it (`scripts/build-demos.sh DEMOS_SRC` builds one).",
               demos_window_switch, packages=["bulkhead-runtime", "bulkhead-bench-window-switch"],
               rt=True, timescale_us=1000),
    Experiment("demos-startup", "Start-up and teardown of many partitions", f"{DEMOS} (start-up)",
               {"note": "DEmOS starts its partitions' processes at start-up"},
               "bench/startup --raw-output: `bulkhead run` with 100, 1000 and 10000 partitions of "
               "one process, without the output relay; baseline: spawning, then killing and "
               "waiting for, the same processes without partitions.",
               "No figure in the paper to compare with; our targets: 1000 in 0.5 s, 10000 in 5 s, "
               "teardown no slower than startup.",
               demos_startup, packages=["bulkhead-bench-startup"], rt=True),
]
