/* bulkhead task library: periodic real-time tasks under a bulkhead supervisor.
 *
 * Link with -lbulkhead_task (static: libbulkhead_task.a, plus -lpthread -ldl -lm;
 * shared: libbulkhead_task.so). One task per process. Every function returns 0 or a
 * negative errno unless stated otherwise.
 *
 *   if (bulkhead_task_attach() != 0) exit(1);     // BULKHEAD_TASK from the supervisor
 *   struct bulkhead_activation a;
 *   while (bulkhead_wait_next_period(&a) == 0) {   // completes the previous activation
 *       do_work(&a);                               // a.release_ns, a.deadline_ns, a.flags
 *   }                                              // -ESHUTDOWN: asked to stop
 *   bulkhead_task_detach();
 */
#ifndef BULKHEAD_TASK_H
#define BULKHEAD_TASK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Activation flags. */
#define BULKHEAD_OVERRUN   1u /* started late: the previous activation ran past this release */
#define BULKHEAD_SKIPPED   2u /* whole periods were skipped; see `skipped` */
#define BULKHEAD_RESTARTED 4u /* first activation of a restarted process, or of a
                                 restartable task after a resume (from its checkpoint) */
#define BULKHEAD_RESUMED   8u /* first activation after a system resume (stop-start) */
#define BULKHEAD_OVER_BUDGET 16u /* in a trace record only: the job used more CPU time
                                    than its budget (health.on_overrun) */

struct bulkhead_activation {
    uint64_t index;       /* k: release = epoch + k * period */
    uint64_t release_ns;  /* CLOCK_MONOTONIC */
    uint64_t deadline_ns; /* release + relative deadline */
    uint32_t flags;
    uint32_t skipped;     /* releases skipped just before this one */
};

/* Attaches to the control block and trace ring named by BULKHEAD_TASK. Idempotent.
 * -ENOENT when not started by bulkhead. */
int bulkhead_task_attach(void);

/* Completes the current activation (its timestamps go to the trace ring, no system
 * call), sleeps until the next release and fills *out (may be NULL).
 * -ESHUTDOWN once the supervisor asks the task to stop; -ENOTCONN if not attached. */
int bulkhead_wait_next_period(struct bulkhead_activation *out);

/* A sporadic task (Task::wait_arrival): completes the current activation, then calls
 * arrival(slice_ns, &at_ns, arg) until it returns 1: an input arrived, at_ns its
 * arrival on CLOCK_MONOTONIC (left 0: now). Return 0 when none came within slice_ns (at
 * most the task's period and 1 ms: the library looks at stop, suspend and mode requests
 * between calls), a negative errno to give up (returned). Fills *out (may be NULL) with
 * the activation released at the arrival, deadline release + D. The callback must not
 * call other bulkhead_ functions. -EINVAL if arrival is NULL. */
typedef int (*bulkhead_arrival_fn)(uint64_t slice_ns, uint64_t *at_ns, void *arg);
int bulkhead_wait_arrival(bulkhead_arrival_fn arrival, void *arg, struct bulkhead_activation *out);

/* Reports the current activation complete now (optional: waiting completes it too). */
int bulkhead_complete(void);

/* 1 if the supervisor asked the task to stop, 0 if not, negative if not attached. */
int bulkhead_stop_requested(void);

/* Budget C, period T and relative deadline D in ns; pointers may be NULL. */
int bulkhead_task_params(uint64_t *budget_ns, uint64_t *period_ns, uint64_t *deadline_ns);

/* Named counters: up to 32 per task, names of 1 to 47 bytes, values the supervisor
 * reads by name and exports to the trace (`counter` events). bulkhead_counter returns
 * the counter's handle (>= 0), creating it at 0 on first use (a restarted process gets
 * its predecessor's value back), or -EINVAL (bad name, all slots used). Set and add are
 * relaxed atomic stores in shared memory (no system call); -EINVAL for a bad handle. */
int bulkhead_counter(const char *name);
int bulkhead_counter_set(int counter, uint64_t value);
int bulkhead_counter_add(int counter, uint64_t delta);

/* Modes (multi-mode systems, docs/modes.md): bulkhead_current_mode returns the index of
 * the current mode in the description's mode table (>= 0). bulkhead_mode_wait waits up
 * to timeout_ns (0: only look) for the mode agent's request: 1 with *mode and *seq filled
 * (pointers may be NULL), 0 on timeout; it holds the task (call it from the task's own
 * thread, e.g. after each activation). bulkhead_mode_ack(seq) tells the agent the task
 * runs in the new mode. */
int bulkhead_current_mode(void);
int bulkhead_mode_wait(uint64_t timeout_ns, uint32_t *mode, uint32_t *seq);
int bulkhead_mode_ack(uint32_t seq);

/* Stop-start (docs/stop-start.md). bulkhead_wait_next_period is the task's safe point:
 * at a suspend request it runs the suspend callback, acknowledges and waits for the
 * resume, so no job runs between the acknowledgement and the freeze. The first
 * activation after a resume has BULKHEAD_RESUMED: a continuable task (the default)
 * continues with its next release on the shifted epoch, with no OVERRUN or SKIPPED for
 * the stop; a restartable task gets a new first release at the resume instant with
 * BULKHEAD_RESTARTED, and its checkpoint copied back over its state first.
 *
 *   struct state s = setup();
 *   bulkhead_checkpoint(&s, sizeof s);             // restartable: "Save Context"
 *   while (bulkhead_wait_next_period(&a) == 0) {   // after a resume: s as checkpointed
 *       if (a.flags & BULKHEAD_RESTARTED) ...;     // fresh start
 *       step1(&s); if (bulkhead_stale()) continue; // frozen mid-job: drop stale work
 *       step2(&s);
 *   }
 *
 * bulkhead_checkpoint(state, len): makes the task restartable and copies len bytes at
 * state; they are copied back at each resume. state must stay valid for the task's life
 * (no pointers into memory that changes after the checkpoint; see docs/stop-start.md).
 * bulkhead_on_suspend(fn, arg): fn(deadline_ns, arg) runs at a suspend request before the
 * acknowledgement (deadline: CLOCK_MONOTONIC ns; past it the task is frozen anyway); it
 * must not call other bulkhead_ functions; NULL removes it.
 * bulkhead_suspend_point(): the safe point for a long job: 1 if it suspended and resumed,
 * 0 if nothing was pending, -ESHUTDOWN if asked to stop.
 * bulkhead_stale(): 1 if the system suspended and resumed during the current activation.
 * bulkhead_system_time_ns(): CLOCK_MONOTONIC minus the time the system spent suspended.
 * bulkhead_resumed_at_ns(): CLOCK_MONOTONIC instant of the latest resume (0: none).
 * bulkhead_fresh(stamp_ns): the stale/fresh rule for an input stamped stamp_ns (a CAN
 * frame's reception time): 1 if the task may use it, 0 if a restartable task got data
 * from before the latest resume (counted in the named counter ss.stale_dropped); the
 * first fresh input after a resume stores when it was taken in ss.first_fresh_ns.
 * bulkhead_fresh_can(stamp_ns): the same rule for a CAN frame from a gateway channel, whose
 * stamp (the message's first word) is the bus's reception time on CLOCK_REALTIME. */
typedef void (*bulkhead_suspend_fn)(uint64_t deadline_ns, void *arg);
int bulkhead_checkpoint(void *state, size_t len);
int bulkhead_on_suspend(bulkhead_suspend_fn fn, void *arg);
int bulkhead_suspend_point(void);
int bulkhead_stale(void);
uint64_t bulkhead_system_time_ns(void);
uint64_t bulkhead_resumed_at_ns(void);
int bulkhead_fresh(uint64_t stamp_ns);
int bulkhead_fresh_can(uint64_t stamp_ns);

/* CLOCK_MONOTONIC in ns (vDSO, no system call). */
uint64_t bulkhead_now_ns(void);

/* Completes the current activation and detaches. */
void bulkhead_task_detach(void);

#ifdef __cplusplus
}
#endif

#endif
