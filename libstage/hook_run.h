/*
 * hook_run.h - a program run as slurmd runs a hook (hook_run.c), for
 * stg_doctor_hooks.
 */
#ifndef STG_HOOK_RUN_H
#define STG_HOOK_RUN_H

#include "ctx.h"

#define STG_HOOK_OUT_MAX   (64 << 10) /* bytes of stdout or stderr kept */
#define STG_HOOK_LINES_MAX 200        /* lines of each kept */

typedef struct stg_hook_stream {
	int fd;
	char *buf; /* what it wrote (up to STG_HOOK_OUT_MAX bytes) */
	size_t len;
	char *lines[STG_HOOK_LINES_MAX]; /* into buf, once it has ended */
	size_t n_lines;
} stg_hook_stream;

/* Whom the program runs as: root (uid 0, no change), or a user with her
 * groups. */
typedef struct stg_hook_cred {
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	int n_groups;
} stg_hook_cred;

typedef struct stg_hook_run {
	int exit_status; /* -1: it did not exit (a signal, or not started) */
	int sig;         /* the signal that ended it, or 0 */
	int timed_out;   /* killed after the time bound */
	int exec_errno;  /* it could not be started (execve, setuid...): why */
	double secs;
	stg_hook_stream out, err;
} stg_hook_run;

/*
 * Run path with argv {path} and env only, as slurmd runs a hook: execve
 * (no search), cwd /, umask 022, stdin /dev/null, every signal at its
 * default and none blocked, no descriptor but 0-2, as cred (if not NULL),
 * in a process group of its own, which is killed (SIGKILL) after timeout
 * seconds or when ctx is cancelled.  Its stdout and stderr are kept in r
 * (split into lines); once it has exited, what its children still write
 * is read for a second more, then no longer waited for.  STG_OK once it
 * ran, however it ended (r says how; a failure to start is in
 * r->exec_errno); STG_EINTR if ctx was cancelled.  Free r with
 * stg__hook_run_free, whatever it returned.
 */
stg_err stg__hook_run(stg_ctx *ctx, const char *path, char *const env[], const stg_hook_cred *cred,
                      unsigned timeout, stg_hook_run *r);
void stg__hook_run_free(stg_hook_run *r);

#endif
