/* A channel between two processes (DriveOS 5, Programs 1-2): the parent creates an
 * anonymous fifo channel (a sealed memfd), forks, and sends three readings; the child
 * receives them in order. Under `bulkhead run` the supervisor creates the channels and
 * hands each partition its end instead (BULKHEAD_CHAN_<NAME>, docs/chan.md).
 *
 *   cc -I crates/chan/include examples/c/chan.c target/release/libbulkhead_chan.a \
 *      -lpthread -ldl -lm -o chan && ./chan
 */
#include <bulkhead/chan.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct reading {
    uint64_t seq;
    double speed_kph;
};

static int receive(int fd) {
    bulkhead_chan *rx = bulkhead_chan_open_receive_fd(fd, NULL);
    if (!rx) return 1;
    for (int i = 0; i < 3; i++) {
        struct reading r;
        int n = bulkhead_chan_read(rx, &r, sizeof r, 5000);
        if (n != (int)sizeof r) {
            fprintf(stderr, "read: %s\n", strerror(-n));
            return 1;
        }
        printf("received %llu: %.1f km/h\n", (unsigned long long)r.seq, r.speed_kph);
    }
    fflush(stdout); /* the child leaves with _exit */
    return bulkhead_chan_close(rx) == 0 ? 0 : 1;
}

int main(void) {
    int fd = bulkhead_chan_create_fd("speed", BULKHEAD_CHAN_SYNC, sizeof(struct reading), 4);
    if (fd < 0) {
        fprintf(stderr, "create: %s\n", strerror(-fd));
        return 1;
    }
    bulkhead_chan *tx = bulkhead_chan_open_send_fd(fd, NULL);
    if (!tx) return 1;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) _exit(receive(fd));
    for (uint64_t seq = 1; seq <= 3; seq++) {
        struct reading r = {seq, 40.0 + (double)seq};
        int n = bulkhead_chan_write(tx, &r, sizeof r, 5000);
        if (n != (int)sizeof r) {
            fprintf(stderr, "write: %s\n", strerror(-n));
            return 1;
        }
    }
    int status = 0;
    waitpid(child, &status, 0);
    bulkhead_chan_close(tx);
    close(fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
