/* A window-scheduled program (DEmOS API, demos-sch.h names): it initializes, then does
 * one piece of work per window and yields the rest of the window. Under `bulkhead run`
 * (examples/demos-window-schedule.yaml style, `init: true`) the calls block until the
 * scheduler runs the program again; started by hand they fail with ENOKEY and the
 * program just works through its rounds.
 *
 *   cc -I crates/client/include examples/c/client.c target/release/libbulkhead_client.a \
 *      -lpthread -ldl -lm -o client && ./client 3
 */
#include <bulkhead/client.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned long work(unsigned long x) {
    for (int i = 0; i < 1000000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
    return x;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    int scheduled = demos_initialization_completed() == 0;
    if (!scheduled && errno != ENOKEY) {
        perror("demos_initialization_completed");
        return 1;
    }
    printf("%s\n", scheduled ? "scheduled by bulkhead" : "not started by a scheduler");
    unsigned long x = 1;
    for (int i = 0; i < rounds; i++) {
        x = work(x);
        printf("round %d done\n", i);
        fflush(stdout);
        if (scheduled && demos_completed() != 0) {
            perror("demos_completed");
            return 1;
        }
    }
    return x == 0; /* keeps the work */
}
