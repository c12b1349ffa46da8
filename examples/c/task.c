/* A periodic real-time task (DriveOS 3.2): it attaches to its supervisor, runs one job
 * per activation, counts jobs in a named counter the supervisor exports to the trace,
 * and stops when asked or after N jobs. Started by `bulkhead run` as an rt task
 * (`kind: rt`, docs/tasks.md); started by hand it says it has no supervisor.
 *
 *   cc -I crates/task/include examples/c/task.c target/release/libbulkhead_task.a \
 *      -lpthread -ldl -lm -o task
 */
#include <bulkhead/task.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long jobs = argc > 1 ? atol(argv[1]) : 10;
    int rc = bulkhead_task_attach();
    if (rc != 0) {
        fprintf(stderr, "not started by bulkhead: %s\n", strerror(-rc));
        return 2;
    }
    uint64_t budget, period, deadline;
    bulkhead_task_params(&budget, &period, &deadline);
    printf("C=%llu T=%llu D=%llu ns\n", (unsigned long long)budget,
           (unsigned long long)period, (unsigned long long)deadline);
    int done = bulkhead_counter("jobs");
    struct bulkhead_activation a;
    long k = 0;
    while (k < jobs && (rc = bulkhead_wait_next_period(&a)) == 0) {
        if (a.flags & BULKHEAD_OVERRUN) printf("job %llu started late\n", (unsigned long long)a.index);
        bulkhead_counter_add(done, 1); /* the job's work */
        k++;
    }
    bulkhead_task_detach();
    printf("%ld jobs\n", k);
    return rc == 0 || rc == -ESHUTDOWN ? 0 : 1;
}
