/* A periodic task written against include/bulkhead/task.h: attaches, prints its
 * parameters, runs N activations (argv[1]) and checks what the library returns. */
#include <bulkhead/task.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5;
    struct bulkhead_activation a;
    if (bulkhead_wait_next_period(&a) != -ENOTCONN) return 10;
    int r = bulkhead_task_attach();
    if (r != 0) {
        printf("attach %d\n", r);
        return 11;
    }
    uint64_t c, t, d;
    if (bulkhead_task_params(&c, &t, &d) != 0) return 12;
    printf("params %llu %llu %llu\n", (unsigned long long)c, (unsigned long long)t, (unsigned long long)d);
    int frames = bulkhead_counter("can0.rx_forwarded");
    if (frames < 0 || bulkhead_counter("") != -EINVAL) return 18;
    if (bulkhead_counter_set(frames + 1, 1) != -EINVAL) return 19;
    uint64_t last = 0;
    for (int i = 0; i < n; i++) {
        if (bulkhead_wait_next_period(&a) != 0) return 13;
        if (a.index != (uint64_t)i || a.deadline_ns != a.release_ns + d) return 14;
        if (bulkhead_now_ns() < a.release_ns || a.release_ns <= last) return 15;
        last = a.release_ns;
        if (bulkhead_counter_add(frames, 10) != 0) return 20;
    }
    if (bulkhead_complete() != 0) return 16;
    if (bulkhead_stop_requested() != 0) return 17;
    bulkhead_task_detach();
    printf("done %d\n", n);
    return 0;
}
