/*
 * fanout.h - what the Slurm fan-out's files share: srun steps and the
 * "stager-node" lines their tasks speak (fanout_step.c), and the per-node
 * collectors that stg_run starts with all_nodes (fanout_collect.c).
 */
#ifndef STG_FANOUT_H
#define STG_FANOUT_H

#include "ctx.h"

#include <sys/types.h>

#define STG_STEP_START_TIMEOUT 300 /* s for a step's tasks to say they are ready */
#define STG_MAX_NODES          4096

/* An argument vector, NULL-terminated.  Out of memory, adding stops and
 * oom says so (one check, when it is used). */
typedef struct stg_argv {
	char **v;
	size_t n, cap;
	bool oom;
} stg_argv;

void stg__argv_add(stg_argv *a, const char *s);
void stg__argv_free(stg_argv *a);

/* `srun` of one task on each of n nodes: those named (a comma list), or
 * all but the one named in exclude (either may be NULL). */
void stg__srun_args(stg_argv *a, unsigned n, const char *nodes, const char *exclude);
/* The stager each task runs: fo's program, cmd, own (NULL-terminated, may
 * be NULL), fo's args.  The caller adds "--" and the operands. */
void stg__node_command(stg_argv *a, const stg_fanout_opts *fo, const char *cmd,
                       const char *const *own);

/* Start argv with a socket to its stdin (*in: written with stg__say, so a
 * task that is gone is EPIPE, not SIGPIPE) and a pipe from its stdout
 * (*out), each if asked; stderr is ours.  It starts with the default
 * dispositions and nothing blocked.  Its pid into *pid. */
stg_err stg__spawn(stg_ctx *ctx, stg_argv *argv, int *in, int *out, pid_t *pid);
/* A line to a step's stdin; false if it is gone. */
bool stg__say(int in, const char *line);
/* Its exit status as a shell reports it.  If ctx is cancelled while we
 * wait, it is told too (srun then cancels its step). */
int stg__wait_status(stg_ctx *ctx, pid_t pid);
/* A step's status as a result: the tasks' own exit statuses (2-7) pass,
 * anything else from srun is STG_EREMOTE; STG_EINTR if interrupted. */
stg_err stg__step_err(int status, bool interrupted);
/* One line from fd into buf (without the newline), waiting at most
 * timeout seconds; 1 a line, 0 the end, -1 timeout, error or ctx
 * cancelled. */
int stg__read_line(stg_ctx *ctx, int fd, char *buf, size_t len, int timeout);
/* "stager-node WORD NODE [REST]", split in place (*rest may be NULL). */
bool stg__node_line(char *line, char **word, char **node, char **rest);
/* A line to fd, whole; false if it could not be written. */
bool stg__tell(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The collectors of one source of stg_run --all-nodes: a step of one
 * stg_node_collect per node. */
typedef struct stg_collectors {
	pid_t pid; /* 0: not running */
	int in, out;
} stg_collectors;

/* Start them, collecting src to dest (every seconds apart, 0: only when
 * told, and when stopped), and wait until every node has made src. */
stg_err stg__collectors_start(stg_ctx *ctx, const stg_fanout_opts *fo, const char *src,
                              const char *dest, const stg_collect_opts *co, uint64_t every,
                              stg_collectors *c);
/* Have each collect now. */
void stg__collectors_now(stg_ctx *ctx, stg_collectors *c);
/* Stop them (each collects one last time) and wait: their status. */
stg_err stg__collectors_end(stg_ctx *ctx, stg_collectors *c);
/* They ended on their own, with status (as a shell reports it). */
stg_err stg__collectors_ended(stg_collectors *c, int status);

#endif
