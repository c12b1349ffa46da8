/* A restartable task written against include/bulkhead/task.h: its state (a job count
 * starting at 100) is checkpointed after setup; at a resume the library copies the
 * checkpoint back. It publishes the state each job and, at the restart, the state it
 * found, the suspend callback's calls and deadline, and whether the restart's release is
 * the resume instant. */
#include <bulkhead/task.h>
#include <errno.h>
#include <stdio.h>

struct state {
    uint64_t jobs;
    uint64_t sum;
};

static uint64_t calls, last_deadline;

static void on_suspend(uint64_t deadline_ns, void *arg) {
    calls += *(uint64_t *)arg;
    last_deadline = deadline_ns;
}

int main(void) {
    if (bulkhead_checkpoint(NULL, 1) != -EINVAL) return 10;
    if (bulkhead_task_attach() != 0) return 11;
    int state = bulkhead_counter("state");
    int found = bulkhead_counter("restart_state");
    int ncalls = bulkhead_counter("suspend_calls");
    int deadline = bulkhead_counter("suspend_deadline");
    int at_resume = bulkhead_counter("release_is_resume");
    if (state < 0 || found < 0 || ncalls < 0 || deadline < 0 || at_resume < 0) return 12;
    static uint64_t one = 1;
    if (bulkhead_on_suspend(on_suspend, &one) != 0) return 13;
    struct state s = {.jobs = 100, .sum = 0};
    if (bulkhead_checkpoint(&s, 0) != -EINVAL) return 14;
    if (bulkhead_checkpoint(&s, sizeof s) != 0) return 15;
    if (bulkhead_resumed_at_ns() != 0 || bulkhead_stale() != 0) return 16;
    struct bulkhead_activation a;
    int r;
    while ((r = bulkhead_wait_next_period(&a)) == 0) {
        if (a.flags & BULKHEAD_RESTARTED) {
            if (!(a.flags & BULKHEAD_RESUMED)) return 17;
            bulkhead_counter_set(found, s.jobs);
            bulkhead_counter_set(ncalls, calls);
            bulkhead_counter_set(deadline, last_deadline);
            bulkhead_counter_set(at_resume, a.release_ns == bulkhead_resumed_at_ns());
        }
        if (bulkhead_system_time_ns() > bulkhead_now_ns()) return 18;
        s.jobs++;
        s.sum += a.index;
        bulkhead_counter_set(state, s.jobs);
    }
    if (r != -ESHUTDOWN) return 19;
    bulkhead_task_detach();
    return 0;
}
