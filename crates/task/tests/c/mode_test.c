/* A task of a multi-mode system written against include/bulkhead/task.h: prints its
 * mode, then waits for N mode requests (argv[1]), printing and acknowledging each. */
#include <bulkhead/task.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    if (bulkhead_current_mode() >= 0) return 10;
    if (bulkhead_task_attach() != 0) return 11;
    uint32_t mode = 0, seq = 0;
    if (bulkhead_mode_wait(0, &mode, &seq) != 0) return 12;
    printf("start in mode %d\n", bulkhead_current_mode());
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        int r = bulkhead_mode_wait(5000000000ull, &mode, &seq);
        if (r != 1) return 13;
        if ((int)mode != bulkhead_current_mode()) return 14;
        printf("mode %u seq %u\n", mode, seq);
        fflush(stdout);
        if (bulkhead_mode_ack(seq) != 0) return 15;
    }
    bulkhead_task_detach();
    return 0;
}
