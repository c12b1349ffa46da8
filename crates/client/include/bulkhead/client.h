/* bulkhead client library: cooperate with `bulkhead run`'s window scheduler.
 *
 * Link with -lbulkhead_client (libbulkhead_client.a or .so from target/release).
 * The demos_* names are those of DEmOS's demos-sch.h, so DEmOS programs build and
 * run unchanged. Every function returns 0 on success and -1 with errno set on
 * failure (ENOKEY: not started by a scheduler; EBADMSG: malformed DEMOS_PARAMETERS).
 */
#ifndef BULKHEAD_CLIENT_H
#define BULKHEAD_CLIENT_H

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

/* DEmOS names. */
int demos_init(void);
int demos_initialization_completed(void);
int demos_completed(void);

#ifdef __cplusplus
}
#endif

#endif /* BULKHEAD_CLIENT_H */
