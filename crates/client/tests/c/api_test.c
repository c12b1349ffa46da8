/* A DEmOS-style program (like DEmOS's src/tests/api-test.c): written against the
 * DEmOS API only, it appends each argument after OUT to OUT, one per window,
 * yielding with demos_completed() after each. Outside a scheduler demos_init
 * fails with ENOKEY and the program exits 1. */
#include <bulkhead/client.h>
#include <errno.h>
#include <stdio.h>

int main(int argc, char *argv[])
{
    if (demos_init() < 0) {
        fprintf(stderr, "demos_init: errno %d\n", errno);
        return errno == ENOKEY ? 1 : 3;
    }
    for (int i = 2; i < argc; i++) {
        FILE *out = fopen(argv[1], "a");
        if (!out) return 4;
        fprintf(out, "%s\n", argv[i]);
        fclose(out);
        if (demos_completed() < 0) return 5;
    }
    for (;;) {
        if (bulkhead_completed() < 0) return 6;
    }
}
