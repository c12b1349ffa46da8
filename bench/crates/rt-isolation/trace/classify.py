"""Classifies every missed job of a bench run against a CPU 0 trace (see trace-cpu0.sh).

usage: classify.py TRACE MISSES
MISSES lines: `# task NAME PID`, then task job release start end late | task job deadline - -
skipped (ns, CLOCK_MONOTONIC).
Classes, first match wins:
  other-task  a non-rt task ran on CPU 0 between the release and the completion
  host-stall  CPU 0 executed nothing while timers were due: the release timer expired > 200 us
              late, or the trace is silent > 1 ms (an idle or running guest CPU takes a due timer
              interrupt at once; only the hypervisor not running the vCPU delays it)
  throttled   the task was switched out while runnable: SCHED_DEADLINE throttled it, its runtime
              C spent (interrupt time and unreported hypervisor time are charged to it)
  postponed   the task did not run at all in the job's window, and its last switch-out before
              it was a throttle: it still paid off an overrun debt (the kernel postpones a
              throttled task's deadline by one period per runtime C of debt, so a stall of s
              charged to it keeps it off the CPU for about s/C periods)
  unexplained none of these
"""
import bisect, collections, re, sys

pat = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+): (\w+): (.*)$')
ev = []
for line in open(sys.argv[1]):
    m = pat.match(line)
    if m:
        ev.append((int(round(float(m.group(5)) * 1e9)), m.group(1), m.group(6), m.group(7)))
ts = [e[0] for e in ev]
# Per pid: (time, runnable?) of every switch-out, to tell what a task was doing before a window.
outs = collections.defaultdict(list)
for t, comm, name, rest in ev:
    if name == 'sched_switch':
        pid = int(re.search(r'prev_pid=(\d+)', rest).group(1))
        outs[pid].append((t, 'prev_state=R' in rest))
pids = {}
count, worst, shown = collections.Counter(), collections.defaultdict(int), collections.Counter()
for l in open(sys.argv[2]):
    f = l.split()
    if f[0] == '#':
        pids[f[2]] = int(f[3])
        continue
    if f[5] == 'skipped':
        rel, end = int(f[2]) - 2_000_000, int(f[2])
    else:
        rel, end = int(f[2]), int(f[4])
    if not ts or end > ts[-1]:
        count['after the trace'] += 1
        continue
    a, b = bisect.bisect_left(ts, rel), bisect.bisect_right(ts, end)
    late = silence = 0
    other, throttled, ran = set(), False, False
    pid = pids.get(f[0])
    for i in range(max(a, 1), min(b + 1, len(ev))):
        t, comm, name, rest = ev[i]
        silence = max(silence, t - ev[i - 1][0])
        if name == 'hrtimer_expire_entry' and 'hrtimer_wakeup' in rest and not late:
            late = int(re.search(r'now=(\d+)', rest).group(1)) - rel
        if name == 'sched_switch':
            nxt = re.search(r'next_comm=(.+?) next_pid', rest).group(1)
            if not nxt.startswith(('bulkhead-period', 'swapper')):
                other.add(nxt)
            throttled |= 'prev_state=R' in rest and comm.startswith('bulkhead-period')
            ran |= f'next_pid={pid} ' in rest
    before = [o for o in outs.get(pid, []) if o[0] < rel]
    postponed = pid is not None and not ran and bool(before) and before[-1][1]
    c = ('other-task' if other else
         'host-stall' if late > 200_000 or silence > 1_000_000 else
         'postponed' if postponed else
         'throttled' if throttled else 'unexplained')
    count[c] += 1
    worst[c] = max(worst[c], max(late, silence))
    if shown[c] < 3:
        shown[c] += 1
        print(f'  {c}: {l.strip()}: release timer {late / 1e3:.0f} us late, longest silence '
              f'{silence / 1e3:.0f} us, other tasks {sorted(other)}')
print('misses by cause:', dict(count))
print('worst timer lateness or silence per cause (ms):',
      {c: round(w / 1e6, 2) for c, w in worst.items()})
