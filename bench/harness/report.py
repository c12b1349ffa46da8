"""docs/results.md from the JSON of a run of `bench/run --all`: per experiment the
paper's figures beside ours and the baseline's, the floor, the date and the command,
and SVG plots (docs/img/results/) where the paper has a plot."""

import json
import os

HIDDEN = {"name", "details", "raw", "note"}


def fmt(v):
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v).replace("|", "\\|")


def floor_text(fl):
    if not fl.get("cpus"):
        return f"not probed ({fl.get('error', 'no root')}); load average {fl['loadavg_1min']}"
    cpus = "; ".join(f"CPU {c['cpu']}: median {c['median_us']:.0f} us, p99 {c['p99_us']:.0f} us, "
                     f"max {c['max_us'] / 1000:.2f} ms, {c['missed']} of {c['samples']} wake-ups "
                     f"later than 1 ms" for c in fl["cpus"])
    return (f"`bulkhead probe` for {fl['probe_s']} s just before: {cpus}. Load average "
            f"{fl['loadavg_1min']}, hypervisor steal {fl.get('steal_ms_per_s', 0)} ms/s.")


def table(result):
    paper = result["paper"]["figures"] or {}
    measured = result.get("measured") or {}
    baseline = result.get("baseline") or {}
    keys = [k for k in list(paper) + list(measured) + list(baseline) if k not in HIDDEN]
    keys = list(dict.fromkeys(keys))
    if not keys:
        return ""
    rows = ["| figure | paper | bulkhead | baseline |", "|---|---|---|---|"]
    rows += [f"| {k} | {fmt(paper.get(k))} | {fmt(measured.get(k))} | {fmt(baseline.get(k))} |"
             for k in keys]
    return "\n".join(rows) + "\n"


def verdicts(result):
    v = result.get("verdict") or {}
    if not v:
        return "No target: the figures are reported as measured.\n"
    mark = {True: "met", False: "**not met**", None: "reported"}
    return "".join(f"- {t['target']}: {fmt(t['value'])} — {mark[t['met']]}\n" for t in v.values())


def section(result, exp, img_dir, rel_img):
    out = [f"## {result['experiment']}: {result['title']}\n"]
    src = result["paper"]["source"] or "ours (no paper figure)"
    out.append(f"**Source:** {src}. **Run:** {result['date']}, {result['duration_s']} s, "
               f"`bench/run {result['experiment']}{' --quick' if result['quick'] else ''}`.\n")
    if result.get("noise_dominated"):
        out.append("**Dominated by the noise:** the floor's worst wake-up latency in this run "
                   "reaches the time scale this experiment's verdict hinges on; its worst-case "
                   "figures measure the shared VM, not bulkhead.\n")
    out.append(f"**Set-up:** {result['setup']}")
    if result["differs"]:
        out.append(f"\n**Differs from the paper:** {result['differs']}")
    out.append(f"\n**Floor:** {floor_text(result['floor'])}\n")
    if result.get("error"):
        out.append(f"**Did not complete:** `{result['error']}`\n")
    baseline = (result.get("baseline") or {}).get("name")
    if baseline:
        out.append(f"**Baseline:** {baseline}.\n")
    out.append(table(result))
    note = (result["paper"]["figures"] or {}).get("note")
    if note:
        out.append(f"Paper: {note}.\n")
    raw = (result.get("measured") or {}).get("raw")
    if raw is not None:
        text = json.dumps(raw)
        out.append("Measured (the bench's JSON):\n\n```json\n"
                   + (text if len(text) < 2500 else text[:2500] + " ...") + "\n```\n")
    out.append("**Verdict:**\n\n" + verdicts(result))
    if exp is not None and exp.plots and result.get("measured"):
        for i, (caption, text) in enumerate(exp.plots(result)):
            if not text:
                continue
            name = f"{result['experiment']}-{i}.svg"
            with open(os.path.join(img_dir, name), "w") as f:
                f.write(text)
            out.append(f"\n![{caption}]({rel_img}/{name})\n")
    commands = result.get("commands", [])
    shown = [c if len(c) < 240 else c[:240] + " ..." for c in commands[:4]]
    more = f" (and {len(commands) - 4} more)" if len(commands) > 4 else ""
    out.append("\nCommands: " + "; ".join(f"`{c}`" for c in shown) + more + "\n")
    return "\n".join(out)


def provenance(results):
    """Which run the page comes from: one full or quick run, or a full run whose
    unreached experiments come from an earlier quick one."""
    full = [r for r in results if not r["quick"]]
    quick = [r for r in results if r["quick"]]
    first = (full or quick or [{}])[0].get("date", "?")
    if full and quick:
        return (f"from a run of `bench/run --all --report docs/results.md` that started on "
                f"{first}; the {len(quick)} experiments it did not reach come from an earlier "
                f"`bench/run --all --quick` run, which the summary marks `quick`")
    return (f"from a run of `bench/run --all{' --quick' if quick else ''} --report "
            f"docs/results.md` that started on {first}")


def summary(results):
    rows = ["| experiment | source | run | targets met | floor max (ms) | noise-dominated | s |",
            "|---|---|---|---|---|---|---|"]
    for r in results:
        v = [t["met"] for t in (r.get("verdict") or {}).values() if t["met"] is not None]
        met = "did not complete" if r.get("error") else f"{sum(v)}/{len(v)}" if v else "–"
        fl = r["floor"].get("max_us")
        run = f"{'quick' if r['quick'] else 'full'}, {r.get('date', '?')[:16].replace('T', ' ')}"
        rows.append(f"| [{r['experiment']}](#{anchor(r)}) | {r['paper']['source'] or 'ours'} | "
                    f"{run} | {met} | {'–' if fl is None else f'{fl / 1000:.1f}'} | "
                    f"{'**yes**' if r.get('noise_dominated') else 'no' if r.get('noise_dominated') is False else '–'} | "
                    f"{r['duration_s']:.0f} |")
    return "\n".join(rows) + "\n"


def anchor(r):
    text = f"{r['experiment']}: {r['title']}".lower()
    return "".join(c for c in text.replace(" ", "-") if c.isalnum() or c in "-_")


def write(path, results, experiments):
    by_name = {e.name: e for e in experiments}
    docs = os.path.dirname(os.path.abspath(path))
    img_dir = os.path.join(docs, "img", "results")
    os.makedirs(img_dir, exist_ok=True)
    first = results[0] if results else {}
    host = first.get("host", {})
    floors = [r["floor"].get("max_us") for r in results if r["floor"].get("max_us") is not None]
    loads = [r["floor"]["loadavg_1min"] for r in results]
    head = f"""# Results

Every experiment of `bench/run` (the papers' evaluations and our own benchmarks), {provenance(results)}
(an experiment rerun alone afterwards shows its own date; the summary's `run` column gives
each one's kind and date). The JSON of that run is kept beside this page (`docs/results.jsonl`, one object an
experiment); `bench/run --report docs/results.md --from docs/results.jsonl` writes the page
again from it. Each experiment names its paper's table or figure, the paper's figures,
ours (bulkhead) and the baseline's (the peer or plain Linux, measured in the same
invocation), and the platform's floor measured just before it.

**The machine:** {host.get('cpus', '?')} vCPUs ({host.get('model', '?')}), Linux
{host.get('kernel', '?')}, a VM shared with other agents' builds during the run: the load
average before the experiments ranged {min(loads, default=0):.1f}-{max(loads, default=0):.1f}, and the floor's worst
timer wake-up latency (`bulkhead probe`, SCHED_FIFO 90, 1 ms) ranged
{min(floors, default=0) / 1000:.1f}-{max(floors, default=0) / 1000:.1f} ms. No figure here is the papers' hardware's: the
papers ran on dedicated machines (a 6-core DX1100, a 16-core Xeon, an Up Squared board).
An experiment is marked *dominated by the noise* when the floor's worst latency
reaches the time scale its verdict hinges on (a period or a delay bound); its worst
cases then measure the VM.

## Summary

{summary(results)}
"""
    body = [section(r, by_name.get(r["experiment"]), img_dir, "img/results") for r in results]
    with open(path, "w") as f:
        f.write(head + "\n" + "\n".join(body))
