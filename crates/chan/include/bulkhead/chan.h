/*
 * bulkhead/chan.h - shared-memory channels between processes (C API of the
 * Rust crate bulkhead-chan; link libbulkhead_chan.a or libbulkhead_chan.so).
 *
 * The operations of DriveOS's libshmcomm (section 5, Fig. 4, Programs 1-2):
 * open to send / open to receive with create or connect, read, write, close,
 * destroy, metadata, and optional marshal / unmarshal callbacks.
 *
 *   SYNC  = fifo:   lossless single-producer single-consumer ring; write
 *                   blocks while full, read blocks while empty.
 *   ASYNC = latest: Simpson's four-slot register (Simpson 1990); wait-free,
 *                   read returns the most recent complete message.
 *
 * Named channels live in /dev/shm/bulkhead-chan-<name>. Anonymous channels
 * are memfds (bulkhead_chan_create_fd) that can be granted to another
 * process over a Unix socket (bulkhead_chan_send_fd / bulkhead_chan_recv_fd).
 *
 * Conventions: int results are >= 0 on success and -errno on failure
 * (-EAGAIN full/empty on a non-blocking call, -ETIMEDOUT, -EPIPE peer closed,
 * -EOWNERDEAD peer process died while this side waited,
 * -EBADMSG peer corrupted the channel, -EPROTO bad header, -EINVAL bad
 * argument, -EBUSY end already held by a live process, -EEXIST, -ENOENT).
 * Handle-returning functions return NULL and set errno.
 * timeout_ms: -1 waits forever, 0 never waits, > 0 waits at most that long.
 */
#ifndef BULKHEAD_CHAN_H
#define BULKHEAD_CHAN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BULKHEAD_CHAN_CREATE  0x1u /* create a new channel            */
#define BULKHEAD_CHAN_CONNECT 0x2u /* connect to an existing channel  */
#define BULKHEAD_CHAN_SYNC    0x4u /* fifo (shmcomm SHMCOMM_SYNC_CH)   */
#define BULKHEAD_CHAN_ASYNC   0x8u /* latest (shmcomm SHMCOMM_ASYNC_CH) */

/* An open channel endpoint. */
typedef struct BulkheadChan bulkhead_chan;

/*
 * Marshal: converts the user's value (src, src_len = nbytes of write) into a
 * message (dst, dst_len = message size). Unmarshal: converts a message (src,
 * src_len = message size) into the user's buffer (dst, dst_len = nbytes of
 * read). Return 0, or a negative value that the call then returns.
 */
typedef int (*bulkhead_chan_marshal_fn)(const void *src, size_t src_len, void *dst, size_t dst_len);

/*
 * Open named channel `name` (1-63 chars of A-Z a-z 0-9 . _ -).
 * flags: CREATE | SYNC or ASYNC (msg_size and depth used; ASYNC ignores depth)
 *    or: CONNECT [| SYNC or ASYNC to check the kind] (sizes come from the channel).
 * With CONNECT, `name` may also be the value `bulkhead run` hands a partition in
 * BULKHEAD_CHAN_<NAME> (`fd:<data>:<region>:<writer lock>:<reader lock>`: a channel it
 * inherited), e.g.
 * bulkhead_chan_open_receive(getenv("BULKHEAD_CHAN_SPEED"), BULKHEAD_CHAN_CONNECT, NULL, 0, 0).
 * marshal / unmarshal may be NULL.
 */
bulkhead_chan *bulkhead_chan_open_send(const char *name, unsigned flags, bulkhead_chan_marshal_fn marshal,
                                       size_t msg_size, unsigned depth);
bulkhead_chan *bulkhead_chan_open_receive(const char *name, unsigned flags, bulkhead_chan_marshal_fn unmarshal,
                                          size_t msg_size, unsigned depth);

/* Create an anonymous channel in a sealed memfd; returns the fd or -errno. */
int bulkhead_chan_create_fd(const char *name, unsigned flags, size_t msg_size, unsigned depth);
/* Open a memfd channel fd (the fd stays the caller's; the header is validated). */
bulkhead_chan *bulkhead_chan_open_send_fd(int fd, bulkhead_chan_marshal_fn marshal);
bulkhead_chan *bulkhead_chan_open_receive_fd(int fd, bulkhead_chan_marshal_fn unmarshal);
/* Grant / take a channel fd over a Unix socket (SCM_RIGHTS). */
int bulkhead_chan_send_fd(int unix_socket, int fd);
int bulkhead_chan_recv_fd(int unix_socket);

/* Write / read one message; return nbytes or -errno. */
int bulkhead_chan_write(bulkhead_chan *ch, const void *buf, size_t nbytes, int timeout_ms);
int bulkhead_chan_read(bulkhead_chan *ch, void *buf, size_t nbytes, int timeout_ms);

/* Close the endpoint and free the handle; destroy also removes a named channel. */
int bulkhead_chan_close(bulkhead_chan *ch);
int bulkhead_chan_destroy(bulkhead_chan *ch);

/* Metadata (shmcomm get_vshm_key / get_channel_transfer_type). */
const char *bulkhead_chan_name(const bulkhead_chan *ch);
int bulkhead_chan_kind(const bulkhead_chan *ch); /* BULKHEAD_CHAN_SYNC or BULKHEAD_CHAN_ASYNC */
size_t bulkhead_chan_msg_size(const bulkhead_chan *ch);
unsigned bulkhead_chan_depth(const bulkhead_chan *ch);
int bulkhead_chan_fd(const bulkhead_chan *ch);

/* Remove named channels whose creator died and that no live process holds. */
int bulkhead_chan_cleanup_stale(void);

#ifdef __cplusplus
}
#endif

#endif /* BULKHEAD_CHAN_H */
