#!/usr/bin/env bash
# Runs bulkhead-bench-rt-isolation (bulkhead run only) under an ftrace instance recording
# CPU 0 (scheduler switches and wake-ups, timer interrupts and hrtimers, IRQs, softirqs,
# IPIs, workqueue items; clock: CLOCK_MONOTONIC) and a sampler of /proc/stat steal, then
# classifies every missed job with classify.py. Root; mounts tracefs on /sys/kernel/tracing
# if it is not mounted yet.
# Usage: trace-cpu0.sh OUTDIR [bench flags...]   e.g. trace-cpu0.sh /tmp/t --duration 60
set -euo pipefail
out=$1; shift; mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
bench="${CARGO_TARGET_DIR:-$here/../../../../target}/release/bulkhead-bench-rt-isolation"
tracing=/sys/kernel/tracing
[ -d "$tracing/instances" ] || mount -t tracefs nodev "$tracing"
T=$tracing/instances/bulkhead-rt-isolation
mkdir "$T"
cleanup() { echo 0 > "$T/tracing_on"; echo 0 > "$T/events/enable"; rmdir "$T"; }
trap cleanup EXIT
echo mono > "$T/trace_clock"; echo 1 > "$T/tracing_cpumask"; echo 0 > "$T/options/overwrite"
echo 300000 > "$T/buffer_size_kb"
for e in sched/sched_switch sched/sched_wakeup irq_vectors/local_timer_entry \
    irq_vectors/local_timer_exit timer/hrtimer_expire_entry workqueue/workqueue_execute_start \
    irq/irq_handler_entry irq/softirq_entry irq_vectors/call_function_entry \
    irq_vectors/call_function_single_entry irq_vectors/reschedule_entry; do
    echo 1 > "$T/events/$e/enable"
done
cat /proc/interrupts > "$out/interrupts.before"
echo 1 > "$T/tracing_on"
# CPU 0's steal column (USER_HZ ticks) whenever it changes, with the CLOCK_MONOTONIC time.
python3 -u -c '
import time, sys
last = None
while True:
    steal = open("/proc/stat").read().split("\ncpu0 ")[1].split()[7]
    if steal != last:
        print(time.monotonic_ns(), steal, flush=True); last = steal
    time.sleep(0.005)' > "$out/steal" & sampler=$!
"$bench" --no-baseline --misses "$out/misses" "$@" > "$out/bench.out" || true
echo 0 > "$T/tracing_on"
kill "$sampler" 2>/dev/null || true
cat /proc/interrupts > "$out/interrupts.after"
cat "$T/per_cpu/cpu0/stats" > "$out/trace.stats"
cat "$T/trace" > "$out/trace"
grep -v '^{' "$out/bench.out"
python3 "$here/classify.py" "$out/trace" "$out/misses"
