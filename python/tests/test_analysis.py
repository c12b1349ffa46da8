"""bulkhead.analyze and bulkhead.sim: the numbers of crates/analysis/tests/system.rs."""

from pathlib import Path

import pytest

import bulkhead
from bulkhead.errors import PipelineError, SimulationError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
US = 1_000

# Lehoczky's arbitrary-deadline example (R = 118 ms at job q = 4) beside an EDF CPU at
# 96 % that the kernel's 95 % SCHED_DEADLINE cap refuses.
MIXED = """
system: {cpus: 0-3}
partitions:
  - name: ctrl
    kind: rt
    cpus: 0
    tasks:
      - {name: fast, cmd: x, budget: 26ms, period: 70ms}
      - {name: slow, cmd: x, budget: 62ms, period: 100ms, deadline: 200ms}
  - name: dl
    kind: rt
    cpus: 1
    scheduler: edf
    tasks:
      - {name: a, cmd: x, budget: 5ms, period: 10ms}
      - {name: b, cmd: x, budget: 4600us, period: 10ms}
"""


def test_driveos_table3_response_times():
    result = bulkhead.analyze(EXAMPLES / "driveos.yaml")
    assert result.schedulable
    wcrt = {t["name"]: t["wcrt_ns"] for t in result}
    expect = {"usb_bh": 100, "mhydra_rx": 300, "long_controller": 350, "aml_read": 450,
              "aml_write": 550, "mhydra_tx": 750, "ivi_read_mapper": 850,
              "ivi_write_mapper": 950, "adas_read_mapper": 1800, "adas_write_mapper": 1900}
    for name, w in expect.items():
        assert wcrt[name] == w * US, name
    usb = next(t for t in result if t["name"] == "usb_bh")
    assert usb["wcet_limit_ns"] == 150 * US
    assert "adas_write_mapper" in result.partitions[0]["binding"]


def test_lehoczky_example_and_the_deadline_cap():
    system = bulkhead.model.loads(MIXED, "mixed.yaml")
    result = bulkhead.analyze(system)
    assert not result.schedulable
    slow = next(t for t in result if t["name"] == "slow")
    assert slow["wcrt_ns"] == 118_000_000 and "job q=4 of 7" in slow["binding"]
    cpu1 = next(c for c in result.cpus if c["cpu"] == "1")
    assert not cpu1["schedulable"] and "cap" in cpu1["binding"]
    assert bulkhead.analyze(system, deadline_cap=100).cpus[1]["schedulable"]
    with pytest.raises(ValueError):
        bulkhead.analyze(system, deadline_cap=0)


def test_dataframe():
    pandas = pytest.importorskip("pandas")
    frame = bulkhead.analyze(EXAMPLES / "driveos.yaml").to_dataframe()
    assert isinstance(frame, pandas.DataFrame)
    assert frame.set_index("name").loc["mhydra_tx", "wcrt_ns"] == 750 * US
    stats = bulkhead.sim(EXAMPLES / "driveos.yaml", for_="10ms").to_dataframe()
    assert (stats["misses"] == 0).all()


def test_sim_statistics():
    system = bulkhead.load(EXAMPLES / "driveos.yaml")
    stats = bulkhead.sim(system, for_="100ms")
    assert stats["duration_ns"] == 100_000_000
    usb = next(t for t in stats.tasks if t["name"] == "usb_bh")
    # 1 ms period, highest priority, 100 us budget: 100 jobs, each answered in 100 us.
    assert (usb["jobs"], usb["max_response_ns"], usb["misses"]) == (100, 100 * US, 0)
    tx = next(t for t in stats.tasks if t["name"] == "mhydra_tx")
    assert tx["max_response_ns"] == 750 * US, "the simulation attains the analysed WCRT"
    assert bulkhead.sim(system, for_=100_000_000) == stats


def test_sim_errors():
    system = bulkhead.model.loads(
        "partitions:\n  - {name: ivi, kind: be, cpus: 0, processes: [{cmd: ./ivi}]}\n")
    with pytest.raises(SimulationError, match="nothing to simulate"):
        bulkhead.sim(system)
    with pytest.raises(ValueError):
        bulkhead.sim(EXAMPLES / "driveos.yaml", for_="soon")
    with pytest.raises(TypeError):
        bulkhead.sim(EXAMPLES / "driveos.yaml", for_=1.5)


def test_pipelines_are_solved_before_analysis_and_simulation():
    names = [t["name"] for t in bulkhead.analyze(EXAMPLES / "boomerang.yaml")]
    assert {"CanRead", "ProcData", "CanWrite", "RTFusion", "RTControl"} <= set(names)
    stats = bulkhead.sim(EXAMPLES / "boomerang.yaml", for_="100ms")
    pipelines = {p["name"]: p for p in stats["pipelines"]}
    assert pipelines["p1"]["messages_out"] > 0
    assert pipelines["p2"]["max_e2e_ns"] <= 8_000_000


def test_an_infeasible_pipeline_raises_pipeline_error(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "system: {}\n"
        "partitions:\n  - {name: q, kind: rt, cpus: 0}\n"
        "pipelines:\n  - name: p\n    spec: A|B[0%,4ms]\n    stages:\n"
        "      A: {partition: q, wcet: 1500us}\n"
        "      B: {partition: q, wcet: 1500us, output: q/B/out}\n"
    )
    with pytest.raises(PipelineError, match="pipeline `p` is infeasible: stage `"):
        bulkhead.analyze(path)
