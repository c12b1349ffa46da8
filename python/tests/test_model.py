"""bulkhead.model: typed descriptions and positioned errors."""

from pathlib import Path

import pytest

import bulkhead
from bulkhead import model
from bulkhead.errors import ModelError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_driveos_example_loads_into_typed_objects():
    system = bulkhead.load(EXAMPLES / "driveos.yaml")
    assert isinstance(system, model.System)
    quest = system.partition("quest")
    assert quest is not None and quest.kind == "rt"
    usb = next(t for t in quest.tasks if t.name == "usb_bh")
    assert (usb.budget_ns, usb.period_ns, usb.deadline_ns) == (100_000, 1_000_000, 1_000_000)
    assert usb.resume in ("continuable", "restartable")
    assert ("quest", usb) in system.tasks
    with pytest.raises(AttributeError):
        usb.budget_ns = 1  # frozen


def test_demos_windows_and_channels_load():
    system = bulkhead.load(EXAMPLES / "demos-window-schedule.yaml")
    assert system.windows and all(w.length_ns > 0 for w in system.windows)
    assert any(s.sc_partition or s.be_partition for w in system.windows for s in w.slices)
    text = """
partitions:
  - {name: control, kind: rt, cpus: 0, tasks: [{name: rx, cmd: ./rx, budget: 200us, period: 1ms}]}
  - {name: ivi, kind: be, cpus: 1, processes: [{cmd: ./ivi}]}
channels:
  - {name: can2ivi, kind: latest, message_size: 32, writer: control, readers: [ivi]}
"""
    system = model.loads(text, "inline.yaml")
    (c,) = system.channels
    assert (c.name, c.kind, c.message_size, c.writer, c.readers) == (
        "can2ivi", "latest", 32, "control", ("ivi",))


def test_buses_and_their_gateway_tasks():
    system = bulkhead.load(EXAMPLES / "can-gateway.yaml")
    (bus,) = system.buses
    assert (bus.name, bus.gateway, bus.interface, bus.period_ns) == ("rav4", "quest", None,
                                                                     2_000_000)
    assert bus.clients[0].partition == "cluster" and bus.clients[0].allow == (0x2E4,)
    services = {t.name: t.service for t in system.partition("quest").tasks}
    assert services == {"rav4-reader": "can-reader:rav4", "rav4-writer": "can-writer:rav4"}
    cluster = system.partition("cluster")
    assert (cluster.user, cluster.memory) == ("nobody", 256 * 1024 * 1024)


def test_errors_carry_file_line_column_and_key_path(tmp_path):
    path = tmp_path / "vms.yaml"
    path.write_text(
        "partitions:\n"
        "  - name: control\n"
        "    kind: rt\n"
        "    cpus: 0\n"
        "    tasks:\n"
        "      - {name: rx, cmd: ./rx, budget: -3ms, period: 1ms}\n")
    with pytest.raises(ModelError) as e:
        bulkhead.load(path)
    err = e.value
    assert err.file == str(path)
    assert (err.line, err.key_path) == (6, "partitions[0].tasks[0].budget")
    assert err.column > 1
    assert str(err).startswith(f"{path}:6:{err.column}: partitions[0].tasks[0].budget: ")
    assert err.reason and err.reason in str(err)


def test_unreadable_file_and_bad_yaml():
    with pytest.raises(ModelError, match="cannot read") as e:
        bulkhead.load("/nonexistent/system.yaml")
    assert (e.value.line, e.value.column, e.value.key_path) == (0, 0, "")
    with pytest.raises(ModelError) as e:
        model.loads("partitions: [\n", "broken.yaml")
    assert e.value.file == "broken.yaml" and e.value.line >= 1
    assert isinstance(e.value, ValueError)


def test_pipelines_load_with_stages_and_edges():
    system = bulkhead.load(EXAMPLES / "boomerang.yaml")
    p1 = next(p for p in system.pipelines if p.name == "p1")
    assert (p1.buffering, p1.loss_ppm, p1.delay_ns) == ("latest", 0, 10_000_000)
    assert [s.name for s in p1.stages] == ["CanRead", "ProcData", "CanWrite"]
    assert p1.edges == (("CanRead", "ProcData"), ("ProcData", "CanWrite"))
    read = p1.stages[0]
    assert (read.partition, read.wcet_ns, read.input, read.output) == (
        "quest", 100_000, "can:rav4:0x101", None)


def test_stop_start_sandbox_and_restart_load():
    text = """
partitions:
  - name: control
    kind: rt
    cpus: 0
    tasks: [{name: rx, cmd: ./rx, budget: 200us, period: 1ms, resume: restartable}]
  - name: ivi
    kind: be
    cpus: 1
    monitor: true
    sandbox: {seccomp: false}
    processes: [{cmd: ./ivi, restart: on-failure, restart_delay: 50ms, required: false}]
stop_start:
  order: [ivi, control]
  ack_deadline: 2ms
"""
    system = model.loads(text, "inline.yaml")
    ivi = system.partition("ivi")
    assert ivi.monitor and not ivi.shared_user
    assert ivi.sandbox.seccomp is False and ivi.sandbox.pid_namespace is True
    (proc,) = ivi.processes
    assert (proc.restart.when, proc.restart.delay_ns, proc.required) == (
        "on-failure", 50_000_000, False)
    ss = system.stop_start
    assert (ss.order, ss.ack_deadline_ns, ss.stale, ss.suspend_when) == (
        ("ivi", "control"), 2_000_000, "drop", None)
    assert system.partition("control").tasks[0].resume == "restartable"
