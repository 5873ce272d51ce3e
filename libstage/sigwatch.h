/*
 * sigwatch.h - a thread that takes the signals of a long operation
 * (sigwatch.c): stop signals (SIGTERM, SIGINT, SIGHUP) and "now" signals
 * (SIGUSR1, SIGUSR2).
 */
#ifndef STG_SIGWATCH_H
#define STG_SIGWATCH_H

#include "ctx.h"

#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>

#define STG_SIGWATCH_N 5 /* the signals watched */

typedef struct stg_sigwatch {
	stg_ctx *ctx;
	atomic_uint stops, nows; /* signals taken, of each kind */
	int wake;                /* readable after each signal (for poll) */
	/* private */
	int wake_w;
	atomic_bool done;
	pthread_t thread;
	sigset_t set, old_mask;
	struct sigaction old[STG_SIGWATCH_N];
} stg_sigwatch;

/* Block the five signals in this thread, install handlers for them (see
 * sigwatch.c) and start the thread that takes them: the second stop
 * signal, counting `stops` as already come, cancels ctx.  0, or -1/errno
 * (nothing changed). */
int stg__sigwatch_start(stg_sigwatch *w, stg_ctx *ctx, unsigned stops);
/* Stop the thread; the handlers and the mask as they were. */
void stg__sigwatch_end(stg_sigwatch *w);
/* Empty w->wake (after poll said it is readable). */
void stg__sigwatch_drain(stg_sigwatch *w);

#endif
