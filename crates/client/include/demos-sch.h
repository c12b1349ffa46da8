/* DEmOS's client API (its lib/demos-sch.h), from bulkhead's client library: DEmOS
 * programs `#include "demos-sch.h"` and build unchanged with -I<this directory> and
 * -lbulkhead_client (libbulkhead_client.a or .so from target/release). The same
 * functions are declared in bulkhead/client.h with bulkhead's own names beside them.
 *
 * The semantics are DEmOS's. Every function returns 0 on success and -1 with errno set
 * on failure: ENOKEY when DEMOS_PARAMETERS is not set (not started by demos-sched or
 * bulkhead run), EBADMSG when it is malformed.
 */
#ifndef DEMOSSCH_H
#define DEMOSSCH_H

#ifdef __cplusplus
extern "C" {
#endif

/* Reads DEMOS_PARAMETERS; called by the other two on their first use. */
int demos_init(void);

/* Ends the initialization of an `init: yes` process and blocks until the schedule runs
 * it. Without a pending initialization (no `init: yes`, or called before) it returns -1
 * with errno EWOULDBLOCK at once, and the process goes on running. */
int demos_initialization_completed(void);

/* The work of this window is done: blocks until the process is scheduled again. Does
 * nothing while an initialization is pending. */
int demos_completed(void);

#ifdef __cplusplus
}
#endif

#endif /* DEMOSSCH_H */
