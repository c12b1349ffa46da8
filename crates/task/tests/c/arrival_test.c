/* A sporadic task written against include/bulkhead/task.h: each byte arriving on stdin
 * releases one activation (bulkhead_wait_arrival), which prints its index, the byte and
 * its release; stdin's end gives up the wait with -EPIPE. */
#define _POSIX_C_SOURCE 200809L
#include <bulkhead/task.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

static char last;

static int on_input(uint64_t slice_ns, uint64_t *at_ns, void *arg) {
    int fd = *(int *)arg;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = (int)(slice_ns / 1000000);
    int r = poll(&p, 1, ms > 0 ? ms : 1);
    if (r < 0) return -errno;
    if (r == 0) return 0;
    ssize_t n = read(fd, &last, 1);
    if (n < 0) return -errno;
    if (n == 0) return -EPIPE;
    (void)at_ns; /* left 0: released now */
    return 1;
}

int main(void) {
    int fd = 0;
    if (bulkhead_wait_arrival(on_input, &fd, NULL) != -ENOTCONN) return 10;
    if (bulkhead_task_attach() != 0) return 11;
    if (bulkhead_wait_arrival(NULL, &fd, NULL) != -EINVAL) return 12;
    struct bulkhead_activation a;
    int r;
    while ((r = bulkhead_wait_arrival(on_input, &fd, &a)) == 0) {
        printf("job %llu %c %llu\n", (unsigned long long)a.index, last,
               (unsigned long long)a.release_ns);
        fflush(stdout);
    }
    printf("ended %d\n", r);
    bulkhead_task_detach();
    return 0;
}
