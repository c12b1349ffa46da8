/* bulkhead client library: cooperate with `bulkhead run`'s window scheduler.
 *
 * Link with -lbulkhead_client (libbulkhead_client.a or .so from target/release).
 * The demos_* names are those of DEmOS's demos-sch.h, so DEmOS programs build and
 * run unchanged. Every function returns 0 on success and -1 with errno set on
 * failure (ENOKEY: not started by a scheduler; EBADMSG: malformed DEMOS_PARAMETERS).
 */
#ifndef BULKHEAD_CLIENT_H
#define BULKHEAD_CLIENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads DEMOS_PARAMETERS; called automatically by the other functions. */
int bulkhead_init(void);
/* Ends initialization (init: true processes); blocks until the schedule runs the process. */
int bulkhead_initialization_completed(void);
/* Yields the rest of the current window; blocks until the process is scheduled again.
 * Does nothing while an initialization is pending. */
int bulkhead_completed(void);
/* Feeds this process's watchdog (health: {watchdog: ...}, docs/health.md) without
 * blocking; does nothing where bulkhead reads no heartbeats (BULKHEAD_HEARTBEAT unset). */
int bulkhead_heartbeat(void);
/* Requests from inside (docs/modes.md): ask the supervisor to switch the system to
 * mode `name`, or to suspend it (stop-start), on this process's own channel; the
 * supervisor knows the partition from the channel. Blocks until the manager took the
 * request: 0, or -1 with errno: EPERM (modes.requesters does not allow this partition
 * the request; nothing changes), EBUSY (a switch or stop-start under way, or sooner
 * than the agent period after the last switch), EINVAL (a name too long, or a switch
 * the manager does not make), ENOTCONN (no supervisor reads requests here: not a
 * process of a best-effort partition in no window). */
int bulkhead_request_mode(const char *name);
int bulkhead_request_suspend(void);

/* DEmOS names (also in demos-sch.h, DEmOS's header, beside bulkhead/); with DEmOS's
 * semantics: demos_initialization_completed without a pending initialization returns
 * -1 with errno EWOULDBLOCK at once. */
int demos_init(void);
int demos_initialization_completed(void);
int demos_completed(void);

/* Stop-start (docs/stop-start.md), for best-effort programs of a run without windows
 * (BULKHEAD_STOP_START): the program learns that the system was asked to suspend and
 * that it resumed, and drops inputs stamped before the resume. The program is frozen
 * without waiting for it, so it usually sees a suspend and its resume as one "resumed"
 * event after the thaw. */
struct bulkhead_stop_start_event {
    uint32_t kind;          /* 1: suspend requested, 2: resumed */
    uint32_t seq;           /* the request's number */
    uint64_t at_ns;         /* 1: the acknowledgement deadline; 2: the resume instant
                               (CLOCK_MONOTONIC) */
    uint64_t suspended_ns;  /* 2: total time the system has spent suspended */
};
/* Maps the notice page. 0, or -1 with errno (ENOKEY: no BULKHEAD_STOP_START). */
int bulkhead_stop_start_init(void);
/* The next event not reported yet, waiting at most timeout_ns (0: do not wait;
 * negative: forever). 1 with *event filled, 0 if none came, -1 with errno. */
int bulkhead_stop_start_event(int64_t timeout_ns, struct bulkhead_stop_start_event *event);
/* CLOCK_MONOTONIC instant of the latest resume (0: none). */
uint64_t bulkhead_stop_start_resumed_at_ns(void);
/* CLOCK_MONOTONIC minus the time the system spent suspended. */
uint64_t bulkhead_stop_start_system_time_ns(void);
/* 1: an input stamped stamp_ns (CLOCK_MONOTONIC) is fresh, use it; 0: stale (stamped
 * before the latest resume), drop it; -1 with errno. */
int bulkhead_stop_start_fresh(uint64_t stamp_ns);
/* The same for a CAN frame from a gateway channel (stamp on CLOCK_REALTIME). */
int bulkhead_stop_start_fresh_can(uint64_t stamp_ns);
/* Inputs found stale so far. */
uint64_t bulkhead_stop_start_stale_dropped(void);

#ifdef __cplusplus
}
#endif

#endif /* BULKHEAD_CLIENT_H */
