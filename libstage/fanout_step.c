/*
 * fanout_step.c - srun steps and the "stager-node" lines their tasks
 * speak, for the Slurm fan-out (fanout_stage.c, fanout_collect.c).
 *
 * A step is one srun with one task per node, each a stager (the same
 * program on every node).  The tasks talk to the lead (the node that
 * started the step) in lines "stager-node WORD NODE [REST]" on their
 * stdout; what the lead has to say reaches them on stdin (srun
 * --input=all), through a socket, so that a step that is gone is an error
 * (EPIPE), not a SIGPIPE.  Every wait is bounded, and ends when the
 * context is cancelled: a cancelled lead tells srun (SIGTERM), which
 * cancels its step.
 */
#include "fanout.h"
#include "ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void stg__argv_add(stg_argv *a, const char *s)
{
	if (a->oom)
		return;
	if (a->n + 2 > a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 32;
		char **v = realloc(a->v, cap * sizeof *v);
		if (!v) {
			a->oom = true;
			return;
		}
		a->v = v;
		a->cap = cap;
	}
	if (!(a->v[a->n] = strdup(s))) {
		a->oom = true;
		return;
	}
	a->v[++a->n] = NULL;
}

void stg__argv_free(stg_argv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	*a = (stg_argv){0};
}

unsigned stg_job_nodes(void)
{
	const char *job = getenv("SLURM_JOB_ID");
	const char *nn = getenv("SLURM_JOB_NUM_NODES");
	if (!nn)
		nn = getenv("SLURM_NNODES");
	if (!job || !*job || !nn)
		return 0;
	char *end;
	unsigned long n = strtoul(nn, &end, 10);
	if (end == nn || *end)
		return 0;
	return n > STG_MAX_NODES ? STG_MAX_NODES : (unsigned)n;
}

const char *stg_node_name(char *buf, size_t len)
{
	const char *s = getenv("SLURMD_NODENAME");
	if (s && *s)
		snprintf(buf, len, "%s", s);
	else if (gethostname(buf, len) == 0 && memchr(buf, '\0', len))
		buf[strcspn(buf, ".")] = '\0';
	else
		snprintf(buf, len, "localhost");
	return buf;
}

void stg_fanout_opts_init(stg_fanout_opts *opts)
{
	memset(opts, 0, sizeof *opts);
}

void stg__srun_args(stg_argv *a, unsigned n, const char *nodes, const char *exclude)
{
	char num[16];
	snprintf(num, sizeof num, "%u", n);
	const char *fixed[] = {"srun", "--overlap", "--quiet", "--kill-on-bad-exit=0",
	                       "--ntasks-per-node=1", "--cpus-per-task=1",
	                       /* explicit: the job's SLURM_NTASKS, inherited,
	                        * would ask for more */
	                       "-N", num, "-n", num};
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		stg__argv_add(a, fixed[i]);
	if (nodes) {
		stg__argv_add(a, "-w");
		stg__argv_add(a, nodes);
	}
	if (exclude) {
		stg__argv_add(a, "-x");
		stg__argv_add(a, exclude);
	}
}

void stg__node_command(stg_argv *a, const stg_fanout_opts *fo, const char *cmd,
                       const char *const *own)
{
	stg__argv_add(a, fo->program ? fo->program : "stager");
	stg__argv_add(a, cmd);
	for (; own && *own; own++)
		stg__argv_add(a, *own);
	for (const char *const *g = fo->args; g && *g; g++)
		stg__argv_add(a, *g);
}

stg_err stg__spawn(stg_ctx *ctx, stg_argv *argv, int *in, int *out, pid_t *started)
{
	if (argv->oom)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	int ip[2] = {-1, -1}, op[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	sigset_t none, dfl;
	sigemptyset(&none);
	sigemptyset(&dfl);
	int sigs[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&dfl, sigs[i]);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	pid_t pid = -1;
	if ((in && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ip)) ||
	    (out && pipe2(op, O_CLOEXEC))) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "pipe");
		goto out;
	}
	if (in)
		posix_spawn_file_actions_adddup2(&fa, ip[0], 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out)
		posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	int e = posix_spawnp(&pid, argv->v[0], &fa, &at, argv->v, environ);
	if (e) {
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e, "cannot run '%s'",
		                      argv->v[0]);
		pid = -1;
	}
out:
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (ip[0] >= 0)
		close(ip[0]);
	if (op[1] >= 0)
		close(op[1]);
	if (pid < 0) {
		if (ip[1] >= 0)
			close(ip[1]);
		if (op[0] >= 0)
			close(op[0]);
		return err;
	}
	if (in)
		*in = ip[1];
	if (out)
		*out = op[0];
	*started = pid;
	return STG_OK;
}

bool stg__say(int in, const char *line)
{
	return send(in, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line);
}

int stg__wait_status(stg_ctx *ctx, pid_t pid)
{
	int st;
	bool told = false;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return 127;
		if (stg__cancelled(ctx) && !told) {
			kill(pid, SIGTERM);
			told = true;
		}
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

stg_err stg__step_err(int status, bool interrupted)
{
	if (interrupted)
		return STG_EINTR;
	/* stg_exit_status in reverse: 2-7 are the result codes of that value */
	return status == 0 ? STG_OK : status >= 2 && status <= 7 ? (stg_err)status : STG_EREMOTE;
}

int stg__read_line(stg_ctx *ctx, int fd, char *buf, size_t len, int timeout)
{
	size_t n = 0;
	double end = stg__now() + timeout;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((end - stg__now()) * 1000);
		if (left <= 0)
			return -1;
		int r = poll(&p, 1, left);
		if (stg__cancelled(ctx))
			return -1;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		char c;
		ssize_t k = read(fd, &c, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			buf[n] = '\0';
			return n ? 1 : 0;
		}
		if (c == '\n') {
			buf[n] = '\0';
			return 1;
		}
		if (n + 1 < len)
			buf[n++] = c;
	}
}

bool stg__node_line(char *line, char **word, char **node, char **rest)
{
	if (strncmp(line, "stager-node ", 12))
		return false;
	*word = line + 12;
	char *sp = strchr(*word, ' ');
	if (!sp)
		return false;
	*sp = '\0';
	*node = sp + 1;
	sp = strchr(*node, ' ');
	*rest = sp ? sp + 1 : sp;
	if (sp)
		*sp = '\0';
	return **node != '\0';
}

bool stg__tell(int fd, const char *fmt, ...)
{
	char line[PATH_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	return n > 0 && (size_t)n < sizeof line && stg__write_full(fd, line, (size_t)n) == 0;
}
