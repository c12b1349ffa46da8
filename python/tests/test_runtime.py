"""Python programs under ``bulkhead run`` (root): an rt task written with bulkhead.task
that publishes on a described channel, and a window-scheduled process written with
bulkhead.client that reads it, observed through the schedule log and their outputs."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BULKHEAD = REPO / "target" / "release" / "bulkhead"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: bulkhead run uses cgroups "
                       "and SCHED_DEADLINE (run the suite as CI does, as root)"),
    pytest.mark.skipif(not BULKHEAD.exists(), reason=f"{BULKHEAD} is not built "
                       "(cargo build --release -p bulkhead-cli)"),
]

TASK = """
import sys
from bulkhead import chan, task
tx = chan.Channel.open("speed").writer()
t = task.current()
with open(sys.argv[1], "w") as out:
    print("params", t.params.name, t.params.budget_ns, t.params.period_ns, file=out, flush=True)
    jobs = t.counter("jobs")
    for act in t.periods():
        tx.write(act.index.to_bytes(8, "little"))
        jobs.add()
        print("activation", act.index, act.release_ns, act.deadline_ns, act.flags, file=out,
              flush=True)
"""

CLIENT = """
import sys
from bulkhead import chan, client
with open(sys.argv[1], "w") as out:
    assert client.initialization_pending()
    rx = chan.Channel.open("speed").reader()
    client.initialization_completed()
    while True:
        msg = rx.read_latest()
        print("window", -1 if msg is None else int.from_bytes(msg, "little"), file=out,
              flush=True)
        client.completed()
"""


def test_python_rt_task_and_window_client_under_bulkhead_run(scratch):
    (scratch / "task.py").write_text(TASK)
    (scratch / "client.py").write_text(CLIENT)
    task_out, client_out = scratch / "task.out", scratch / "client.out"
    # The interpreter may live where only root can read it (pyenv under /root): both
    # partitions run as the host's root, declared shared, instead of uids bulkhead
    # allocates (a be partition's `user: root` is otherwise root of a user namespace
    # of its own, mapped to such a uid).
    py = sys.executable
    (scratch / "system.yaml").write_text(textwrap.dedent(f"""\
        system: {{cpus: 0-1}}
        partitions:
          - name: ctl
            kind: rt
            cpus: 0
            user: root
            shared_user: true
            tasks:
              - {{name: pytask, cmd: {py} {scratch}/task.py {task_out}, budget: 8ms, period: 20ms}}
          - name: ivi
            kind: be
            user: root
            shared_user: true
            sandbox: {{private_users: false}}
            processes:
              - {{cmd: {py} {scratch}/client.py {client_out}, budget: 5ms, init: true}}
        windows:
          - {{length: 50ms, slices: [{{cpu: 1, be_partition: ivi}}]}}
        channels:
          - {{name: speed, kind: latest, message_size: 8, writer: ctl, readers: [ivi]}}
        """))
    log = scratch / "schedule.jsonl"
    run = subprocess.run([str(BULKHEAD), "run", str(scratch / "system.yaml"), "--timeout",
                          "3s", "--schedule-log", str(log)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    # The rt task: parameters from the supervisor, activations one period apart, each
    # completed into the schedule log.
    lines = task_out.read_text().splitlines()
    assert lines[0] == "params pytask 8000000 20000000", lines[:2]
    acts = [list(map(int, l.split()[1:])) for l in lines[1:]]
    assert len(acts) >= 50, f"{len(acts)} activations in 3 s of a 20 ms period\n{run.stderr}"
    for (i, rel, dl, _), (j, rel2, _, _) in zip(acts, acts[1:]):
        assert j > i and rel2 - rel == (j - i) * 20_000_000 and dl == rel + 20_000_000
    done = [e for e in events if e["event"] == "job_complete" and e.get("task") == "pytask"]
    assert len(done) >= 40, f"{len(done)} completions of pytask in the schedule log"

    # The window-scheduled client: run grants in the log, one line per window it got,
    # reading ever newer values the task published.
    grants = [e for e in events if e["event"] == "run" and "client.py" in json.dumps(e)]
    assert len(grants) >= 20, f"{len(grants)} run grants\n{run.stderr}"
    seen = [int(l.split()[1]) for l in client_out.read_text().splitlines()]
    assert len(seen) >= 20 and seen == sorted(seen) and seen[-1] > 20, seen
    assert not _running(str(scratch)), "Python programs left running after the run"


def _running(needle: str) -> list:
    """Pids whose command line mentions ``needle``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "cmdline").read_bytes().decode():
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


REQUEST = """
import sys, time
from bulkhead import client
from bulkhead.errors import RequestRefusedError
time.sleep(0.3)
with open(sys.argv[1], "w") as out:
    try:
        client.request_mode("highway")
        print("granted", file=out, flush=True)
    except RequestRefusedError as e:
        print("refused", e.errno, file=out, flush=True)
time.sleep(30)
"""


def test_python_requests_a_mode_from_inside(scratch):
    """A requester partition's program switches the mode with client.request_mode; a
    program of another partition gets RequestRefusedError with errno EPERM (1)."""
    (scratch / "request.py").write_text(REQUEST)
    ivi_out, media_out = scratch / "ivi.out", scratch / "media.out"
    py = sys.executable
    periodic = BULKHEAD.with_name("bulkhead-periodic")
    be = "user: root\n            shared_user: true\n            sandbox: {private_users: false}"
    (scratch / "system.yaml").write_text(textwrap.dedent(f"""\
        system: {{cpus: 0-1}}
        partitions:
          - name: pyr-ctl
            kind: rt
            cpus: 1
            scheduler: edf
            tasks:
              - {{name: loop, cmd: {periodic} --exec-us 300, budget: 2ms, period: 10ms}}
          - name: pyr-ivi
            {be}
            processes: [{{cmd: {py} {scratch}/request.py {ivi_out}}}]
          - name: pyr-media
            {be}
            processes: [{{cmd: {py} {scratch}/request.py {media_out}}}]
        modes:
          initial: normal
          table:
            - {{name: normal, partitions: {{pyr-ctl: {{tasks: [loop]}}}}}}
            - {{name: highway, partitions: {{pyr-ctl: {{tasks: [{{name: loop, period: 20ms, deadline: 20ms}}]}}}}}}
          requesters: [{{partition: pyr-ivi, modes: [highway]}}]
        """))
    log = scratch / "schedule.jsonl"
    run = subprocess.run([str(BULKHEAD), "run", str(scratch / "system.yaml"), "--timeout",
                          "3s", "--schedule-log", str(log)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert ivi_out.read_text().split() == ["granted"], run.stderr
    assert media_out.read_text().split() == ["refused", "1"], run.stderr
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    verdicts = sorted((e["partition"], e["verdict"]) for e in events
                      if e["event"] == "partition_request")
    assert verdicts == [("pyr-ivi", "granted"), ("pyr-media", "refused")], run.stderr
    assert any(e["event"] == "mode_done" and e["mode"] == "highway" for e in events)
