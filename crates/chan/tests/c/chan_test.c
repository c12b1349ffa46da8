/*
 * Two-process test of the C API of bulkhead-chan (built and run by
 * tests/c_api.rs). Argument: a channel name prefix unique to this run.
 * Prints one "ok <case>" line per passed case; exits non-zero on failure.
 */
#include <bulkhead/chan.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                               \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "[%d] %s:%d: check failed: %s (errno %d)\n", getpid(), \
                    __FILE__, __LINE__, #cond, errno);                            \
            exit(3);                                                              \
        }                                                                         \
    } while (0)

#define TIMEOUT_MS 20000
#define FIFO_COUNT 20000

/* DriveOS Programs 1-2. */
struct packet { int X; int Y; };

static int wait_child(pid_t pid) {
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Program 1 (sender, creates channel "<prefix>101", ring length 10) and
 * Program 2 (receiver, connects) in two processes, then a long ordered run. */
static void programs_1_2(const char *prefix) {
    char name[64];
    snprintf(name, sizeof name, "%s101", prefix);
    bulkhead_chan *tx = bulkhead_chan_open_send(name, BULKHEAD_CHAN_CREATE | BULKHEAD_CHAN_SYNC, NULL,
                                                sizeof(struct packet), 10);
    CHECK(tx != NULL);
    CHECK(strcmp(bulkhead_chan_name(tx), name) == 0);
    CHECK(bulkhead_chan_kind(tx) == (int)BULKHEAD_CHAN_SYNC);
    CHECK(bulkhead_chan_msg_size(tx) == sizeof(struct packet));
    CHECK(bulkhead_chan_depth(tx) == 10);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        bulkhead_chan *rx = bulkhead_chan_open_receive(name, BULKHEAD_CHAN_CONNECT, NULL, 0, 0);
        CHECK(rx != NULL);
        CHECK(bulkhead_chan_depth(rx) == 10 && bulkhead_chan_kind(rx) == (int)BULKHEAD_CHAN_SYNC);
        struct packet p_rec;
        CHECK(bulkhead_chan_read(rx, &p_rec, sizeof p_rec, TIMEOUT_MS) == sizeof p_rec);
        CHECK(p_rec.X == 10 && p_rec.Y == 20);
        for (int i = 0; i < FIFO_COUNT; i++) {
            CHECK(bulkhead_chan_read(rx, &p_rec, sizeof p_rec, TIMEOUT_MS) == sizeof p_rec);
            CHECK(p_rec.X == i && p_rec.Y == ~i);
        }
        /* The sender closed: the drained fifo reports EPIPE. */
        CHECK(bulkhead_chan_read(rx, &p_rec, sizeof p_rec, TIMEOUT_MS) == -EPIPE);
        CHECK(bulkhead_chan_close(rx) == 0);
        _exit(0);
    }
    struct packet p_snd = {.X = 10, .Y = 20};
    CHECK(bulkhead_chan_write(tx, &p_snd, sizeof p_snd, TIMEOUT_MS) == sizeof p_snd);
    for (int i = 0; i < FIFO_COUNT; i++) {
        struct packet p = {.X = i, .Y = ~i};
        CHECK(bulkhead_chan_write(tx, &p, sizeof p, TIMEOUT_MS) == sizeof p);
    }
    CHECK(bulkhead_chan_destroy(tx) == 0);
    CHECK(wait_child(pid) == 0);
    errno = 0;
    CHECK(bulkhead_chan_open_receive(name, BULKHEAD_CHAN_CONNECT, NULL, 0, 0) == NULL && errno == ENOENT);
    printf("ok programs_1_2 %d messages\n", FIFO_COUNT + 1);
}

/* Marshal: host struct -> 8 big-endian bytes; unmarshal: back. */
static int marshal(const void *src, size_t src_len, void *dst, size_t dst_len) {
    if (src_len != sizeof(struct packet) || dst_len != 8) return -EINVAL;
    const struct packet *p = src;
    uint8_t *d = dst;
    for (int i = 0; i < 4; i++) {
        d[i] = (uint8_t)((uint32_t)p->X >> (24 - 8 * i));
        d[4 + i] = (uint8_t)((uint32_t)p->Y >> (24 - 8 * i));
    }
    return 0;
}

static int unmarshal(const void *src, size_t src_len, void *dst, size_t dst_len) {
    if (src_len != 8 || dst_len != sizeof(struct packet)) return -EINVAL;
    const uint8_t *s = src;
    struct packet *p = dst;
    uint32_t x = 0, y = 0;
    for (int i = 0; i < 4; i++) {
        x = x << 8 | s[i];
        y = y << 8 | s[4 + i];
    }
    p->X = (int)x;
    p->Y = (int)y;
    return 0;
}

/* A latest channel in a memfd, granted to the child over a socket
 * (SCM_RIGHTS), with marshal/unmarshal callbacks. */
static void latest_over_socket(const char *prefix) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        int fd = bulkhead_chan_recv_fd(sv[1]);
        CHECK(fd >= 0);
        bulkhead_chan *rx = bulkhead_chan_open_receive_fd(fd, unmarshal);
        CHECK(rx != NULL);
        close(fd);
        CHECK(bulkhead_chan_kind(rx) == (int)BULKHEAD_CHAN_ASYNC && bulkhead_chan_msg_size(rx) == 8);
        struct packet p;
        CHECK(write(sv[1], "r", 1) == 1); /* attached */
        int last = -1;
        long reads = 0;
        while (last < 99999) {
            int r = bulkhead_chan_read(rx, &p, sizeof p, 0);
            if (r == -EAGAIN) continue; /* nothing published yet */
            CHECK(r == sizeof p);
            CHECK(p.Y == -p.X);     /* never torn */
            CHECK(p.X >= last);     /* monotonic freshness */
            last = p.X;
            reads++;
        }
        /* A receiver may not write. */
        CHECK(bulkhead_chan_write(rx, &p, sizeof p, 0) == -EBADF);
        CHECK(bulkhead_chan_close(rx) == 0);
        _exit(reads > 0 ? 0 : 4);
    }
    close(sv[1]);
    char name[64];
    snprintf(name, sizeof name, "%slatest", prefix);
    int fd = bulkhead_chan_create_fd(name, BULKHEAD_CHAN_CREATE | BULKHEAD_CHAN_ASYNC, 8, 1);
    CHECK(fd >= 0);
    bulkhead_chan *tx = bulkhead_chan_open_send_fd(fd, marshal);
    CHECK(tx != NULL);
    CHECK(bulkhead_chan_send_fd(sv[0], fd) == 0);
    close(fd);
    char ack;
    CHECK(read(sv[0], &ack, 1) == 1);
    for (int i = 0; i < 100000; i++) {
        struct packet p = {.X = i, .Y = -i};
        CHECK(bulkhead_chan_write(tx, &p, sizeof p, 0) == sizeof p); /* never blocks */
    }
    CHECK(wait_child(pid) == 0);
    CHECK(bulkhead_chan_destroy(tx) == 0);
    close(sv[0]);
    printf("ok latest_over_socket\n");
}

static void errors(const char *prefix) {
    char name[64];
    snprintf(name, sizeof name, "%serr", prefix);
    errno = 0;
    CHECK(bulkhead_chan_open_send("bad/name", BULKHEAD_CHAN_CREATE | BULKHEAD_CHAN_SYNC, NULL, 8, 4) == NULL);
    CHECK(errno == EINVAL);
    CHECK(bulkhead_chan_open_send(name, BULKHEAD_CHAN_CREATE, NULL, 8, 4) == NULL && errno == EINVAL);
    bulkhead_chan *tx = bulkhead_chan_open_send(name, BULKHEAD_CHAN_CREATE | BULKHEAD_CHAN_SYNC, NULL, 8, 1);
    CHECK(tx != NULL);
    errno = 0;
    CHECK(bulkhead_chan_open_send(name, BULKHEAD_CHAN_CONNECT, NULL, 0, 0) == NULL && errno == EBUSY);
    CHECK(bulkhead_chan_open_receive(name, BULKHEAD_CHAN_CONNECT | BULKHEAD_CHAN_ASYNC, NULL, 0, 0) == NULL);
    CHECK(errno == EINVAL);
    bulkhead_chan *rx = bulkhead_chan_open_receive(name, BULKHEAD_CHAN_CONNECT, NULL, 0, 0);
    CHECK(rx != NULL);
    struct packet p = {1, 2};
    CHECK(bulkhead_chan_read(rx, &p, sizeof p, 0) == -EAGAIN);
    CHECK(bulkhead_chan_read(rx, &p, sizeof p, 50) == -ETIMEDOUT);
    CHECK(bulkhead_chan_write(tx, &p, 3, 0) == -EINVAL);
    CHECK(bulkhead_chan_write(tx, &p, sizeof p, 0) == sizeof p);
    CHECK(bulkhead_chan_write(tx, &p, sizeof p, 0) == -EAGAIN);
    CHECK(bulkhead_chan_write(tx, &p, sizeof p, 50) == -ETIMEDOUT);
    CHECK(bulkhead_chan_close(rx) == 0);
    CHECK(bulkhead_chan_write(tx, &p, sizeof p, 50) == -EPIPE);
    CHECK(bulkhead_chan_write(NULL, &p, sizeof p, 0) == -EINVAL);
    CHECK(bulkhead_chan_destroy(tx) == 0);
    printf("ok errors\n");
}

int main(int argc, char **argv) {
    const char *prefix = argc > 1 ? argv[1] : "ctest-";
    setvbuf(stdout, NULL, _IONBF, 0);
    programs_1_2(prefix);
    latest_over_socket(prefix);
    errors(prefix);
    return 0;
}
