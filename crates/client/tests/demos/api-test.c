/* api-test: one WORD per window (see README.md). */
#include "demos-sch.h"
#include <err.h>
#include <stdio.h>
#include <unistd.h>

static void window_done(void)
{
    if (demos_completed() != 0)
        err(1, "demos_completed");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (demos_init() != 0)
        err(1, "demos_init");
    if (argc < 2) {
        for (;;) {
            puts("new_period");
            sleep(1);
            puts("completed");
            window_done();
        }
    }
    for (int i = 1; i < argc; i++) {
        puts(argv[i]);
        window_done();
    }
    return 0;
}
