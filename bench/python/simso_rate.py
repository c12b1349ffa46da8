"""SimSo's rate on bench/sim's task set (bench/crates/sim/src/main.rs: 10 tasks,
rate monotonic on one CPU, U = 0.85): jobs simulated per second of CPU time, for
SECONDS of simulated time. Prints one JSON object."""

import json
import sys
import time

from simso.configuration import Configuration
from simso.core import Model

# (C, T) in microseconds, as bench/sim's TASKS.
TASKS = [(50, 1000), (100, 2000), (150, 2500), (300, 4000), (400, 5000), (500, 8000),
         (800, 10000), (1000, 16000), (1500, 20000), (2000, 25000)]


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    c = Configuration()
    c.cycles_per_ms = 1000  # one cycle per microsecond
    c.duration = int(seconds * 1e6)
    for i, (wcet, period) in enumerate(TASKS):
        c.add_task(name=f"t{i}", identifier=i + 1, period=period / 1000, activation_date=0,
                   wcet=wcet / 1000, deadline=period / 1000)
    c.add_processor(name="CPU", identifier=1)
    c.scheduler_info.clas = "simso.schedulers.RM_mono"
    c.check_all()
    model = Model(c)
    start = time.process_time()
    model.run_model()
    cpu = time.process_time() - start
    jobs = sum(len(t.jobs) for t in model.results.tasks)
    print(json.dumps({"simulated_s": seconds, "jobs": jobs, "cpu_s": round(cpu, 3),
                      "jobs_per_s": round(jobs / cpu)}))


if __name__ == "__main__":
    main()
