/*
 * mount_job.c - a mount made inside a Slurm job ends with the job.
 *
 * `stager mount` serves from a process of its own, in a session of its
 * own (setsid): under proctrack/pgid Slurm does not kill it with the job,
 * and nothing else would end it.  So the serving process watches the job
 * itself, and `stager clean` (the epilog's, or the user's) ends the mounts
 * of a job that is over (mount_open.c).
 *
 * What is watched is chosen once, when the mount is made, while the
 * process that ran `stager mount` still lives (the spawned child looks
 * from its own parent up): the job's *batch shell*, the one process whose
 * end is the job's end.
 *   - The topmost ancestor whose parent is a slurmstepd is a step's main
 *     process; the slurmstepd's title says which step ("slurmstepd:
 *     [JOB.STEP]").  For the batch step it is the batch shell, which ran
 *     `stager mount` (or exec'ed it: then the script, and so the job, ends
 *     at once, and so does the mount); for salloc's interactive step, the
 *     interactive shell.  That process is watched.
 *   - For any other step (`srun stager mount ...`: the step's task is
 *     stager itself, which ends as soon as the mount is made) the mount
 *     lives as long as the job, not the step: the batch shell is the
 *     batch step's task 0 in `scontrol listpids JOB` (which asks this
 *     node's step daemons of this cluster; a step daemon's title alone
 *     could be another cluster's job of the same id).  It is there on the
 *     job's first node only.  Under proctrack/cgroup the step's end
 *     ends every process in its cgroup, this one too (setsid does not
 *     take it out): stg_mount_spawn refuses there (stg__step_cgroup_ends).
 *   - Without one (another node of the job, salloc's own command, a login
 *     shell with SLURM_JOB_ID set): Slurm is asked every 30 s, and the job
 *     is over only when squeue no longer lists it *and* the controller
 *     answers (`scontrol ping`): squeue fails the same way for a job it has
 *     forgotten and for a controller it cannot reach, and a mount ended
 *     under a running job is worse than one left for the epilog.
 * The process is watched through a pidfd (Linux 5.3), which wakes the
 * watch the moment it ends, else by looking at /proc every 2 s; its start
 * time tells it from a later process of the same pid.
 *
 * Every Slurm command here runs for 10 s at most (then it is killed and
 * the answer is "unknown"): a controller or node daemon that does not
 * answer must not hang `stager mount`, status or clean.
 *
 * The watch is a thread that waits in poll() and calls back once.  Its
 * owner ends it at once (a pipe); a thread busy asking Slurm is left to
 * finish on its own (10 s at most) and frees what it holds then: ending a
 * mount never waits on squeue.
 */
#include "mount_job.h"
#include "ctx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROC_POLL_MS  2000  /* /proc looked at, without a pidfd */
#define SLURM_POLL_MS 30000 /* Slurm asked, without a process to watch */
#define JOIN_WAIT_NS  500000000L
#define SLURM_WAIT    10.0 /* s a Slurm command may take (its own MessageTimeout) */
#define CANCEL_STEP   0.1  /* s between looks at the caller's cancellation */

/* ---- processes ----------------------------------------------------------------- */

int stg__pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

int stg__pidfd_signal(int pidfd, pid_t pid, int sig)
{
#ifdef SYS_pidfd_send_signal
	if (pidfd >= 0)
		return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#else
	(void)pidfd;
#endif
	return kill(pid, sig);
}

/* /proc/PID/stat: the parent and the start time (clock ticks since boot);
 * 0, or -1 for a process that is gone or a zombie. */
int stg__proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* the name may hold spaces and parentheses: fields 3.. follow the last ')' */
	const char *p = strrchr(buf, ')');
	char state;
	int pp;
	unsigned long long st;
	if (!p ||
	    sscanf(p + 1,
	           " %c %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
	           "%*s %*s %*s %llu",
	           &state, &pp, &st) != 3 ||
	    state == 'Z' || state == 'X')
		return -1;
	if (ppid)
		*ppid = (pid_t)pp;
	if (start)
		*start = st;
	return 0;
}

/* The start of a small file of /proc into buf (n bytes), a string; false
 * if it cannot be read or is empty. */
static bool read_proc(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t k = fd >= 0 ? read(fd, buf, n - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (k <= 0)
		return false;
	buf[k] = '\0';
	return true;
}

static bool is_stepd(pid_t pid)
{
	char path[64], comm[32];
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	return read_proc(path, comm, sizeof comm) && !strcmp(comm, "slurmstepd\n");
}

bool stg__stepd_step(const char *title, size_t len, const char *job, char *step, size_t step_len)
{
	char want[40];
	int w = snprintf(want, sizeof want, "[%s.", job);
	if (w <= 0 || (size_t)w >= sizeof want || len < (size_t)w)
		return false;
	for (size_t i = 0; i + (size_t)w <= len; i++) {
		if (memcmp(title + i, want, (size_t)w))
			continue;
		const char *s = title + i + w;
		size_t k = 0;
		while (s + k < title + len && s[k] != ']' && s[k] && k < step_len - 1)
			k++;
		if (s + k >= title + len || s[k] != ']' || !k)
			return false;
		memcpy(step, s, k);
		step[k] = '\0';
		return true;
	}
	return false;
}

/* The step of job that the slurmstepd pid runs (its title, "slurmstepd:
 * [JOB.STEP]"), into step; false if it is not one of job's. */
static bool stepd_of(pid_t pid, const char *job, char *step, size_t len)
{
	char path[64], title[512];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, title, sizeof title) : -1;
	if (fd >= 0)
		close(fd);
	return n > 0 && stg__stepd_step(title, (size_t)n, job, step, len);
}

/* ---- asking Slurm, in bounded time ------------------------------------------------ */

/* Run argv with its output in out (len bytes, NUL-terminated), for at
 * most SLURM_WAIT seconds: a Slurm command waits on its controller or its
 * node's daemons as long as they make it, and clean, status and `stager
 * mount` must not.  Its exit status, or -1 (could not run, killed by the
 * time limit: *late is then set; or killed because ctx, if not NULL, was
 * cancelled: a mount's start answers a stop signal within a second). */
static int run_bounded(char *const argv[], char *out, size_t len, bool *late, const stg_ctx *ctx)
{
	int p[2];
	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	/* a group of its own, so that the time limit ends what it started too;
	 * no signal blocked, whatever this thread blocks */
	posix_spawnattr_t at;
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc) {
		close(p[0]);
		return -1;
	}
	size_t got = 0;
	double until = stg__now() + SLURM_WAIT;
	bool killed = false, late_now = false;
	for (;;) {
		double left = until - stg__now();
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int step = left > CANCEL_STEP ? (int)(CANCEL_STEP * 1000) : (int)(left * 1000) + 1;
		int n = left > 0 ? poll(&pf, 1, step) : 0;
		bool cancelled = ctx && stg__cancelled(ctx);
		if (n < 0 && errno == EINTR && !cancelled)
			continue;
		if (n == 0 && left > CANCEL_STEP && !cancelled)
			continue;
		if (n <= 0 || cancelled) {
			kill(-pid, SIGKILL);
			killed = true;
			late_now = !cancelled;
			break;
		}
		char sink[4096];
		ssize_t r = got < len - 1 ? read(p[0], out + got, len - 1 - got)
		                          : read(p[0], sink, sizeof sink);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (got < len - 1)
			got += (size_t)r;
	}
	out[got] = '\0';
	close(p[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (late_now && late)
		*late = true;
	return killed || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

static bool numeric(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* The batch shell of job on this node, as Slurm lists the job's processes
 * here (`scontrol listpids JOB`: task 0 of the batch step), if its parent
 * is a slurmstepd; 0 if there is none here (another node of the job,
 * salloc) or Slurm cannot say.  Not from the step daemons' titles alone:
 * two clusters on one machine (test clusters) have jobs of the same id. */
static pid_t batch_shell(const char *job, const stg_ctx *ctx)
{
	char *argv[] = {"scontrol", "listpids", (char *)job, NULL};
	size_t len = (size_t)1 << 16;
	char *out = malloc(len);
	pid_t pid = 0, pp;
	if (out && run_bounded(argv, out, len, NULL, ctx) == 0) {
		/* PID JOBID STEPID LOCALID GLOBALID */
		for (char *line = out; line && *line && !pid;) {
			char *nl = strchr(line, '\n');
			if (nl)
				*nl = '\0';
			long p;
			char jb[32], step[32], local[16];
			if (sscanf(line, "%ld %31s %31s %15s", &p, jb, step, local) == 4 &&
			    !strcmp(jb, job) && !strcmp(step, "batch") && !strcmp(local, "0") &&
			    p > 1)
				pid = (pid_t)p;
			line = nl ? nl + 1 : NULL;
		}
	}
	free(out);
	if (pid && (stg__proc_stat(pid, &pp, NULL) || !is_stepd(pp)))
		pid = 0;
	return pid;
}

bool stg__mount_job_find(stg_mount_job *j, const stg_ctx *ctx)
{
	memset(j, 0, sizeof *j);
	const char *id = getenv("SLURM_JOB_ID");
	if (!id || !numeric(id) || strlen(id) >= sizeof j->job)
		return false;
	snprintf(j->job, sizeof j->job, "%s", id);
	/* from this process up: the topmost whose parent is a slurmstepd */
	pid_t p = getpid(), top = 0;
	char step[32] = "";
	for (int depth = 0; depth < 64 && p > 1; depth++) {
		pid_t pp;
		if (stg__proc_stat(p, &pp, NULL))
			break;
		if (pp > 1 && is_stepd(pp)) {
			top = p;
			if (!stepd_of(pp, j->job, step, sizeof step))
				step[0] = '\0'; /* another job's step */
		}
		p = pp;
	}
	if (top && (!strcmp(step, "batch") || !strcmp(step, "interactive"))) {
		j->pid = top;
		snprintf(j->what, sizeof j->what, "its %s shell",
		         strcmp(step, "batch") ? "interactive" : "batch");
	} else if ((j->pid = batch_shell(j->job, ctx)) != 0) {
		snprintf(j->what, sizeof j->what, "its batch shell");
	}
	if (j->pid && stg__proc_stat(j->pid, NULL, &j->start))
		j->pid = 0;
	if (!j->pid)
		snprintf(j->what, sizeof j->what, "Slurm");
	return true;
}

int stg__mount_job_over(const char *job, bool *late)
{
	/* as stg__slurm_job_alive reads squeue, in bounded time */
	static const char *const alive[] = {
	        "PENDING",  "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING",   "RESIZING",
	        "REQUEUED", "STOPPED", "SIGNALING", "STAGE_OUT",   "REQUEUE_HOLD", "REQUEUE_FED"};
	char *q[] = {"squeue", "-h", "-o", "%T", "-j", (char *)job, NULL};
	char out[1024];
	int status = run_bounded(q, out, sizeof out, late, NULL);
	if (status != 0 && status != 1)
		return -1;
	for (size_t i = 0; i < sizeof alive / sizeof alive[0]; i++)
		if (strstr(out, alive[i]))
			return 0;
	/* squeue fails alike (status 1) for a job it forgot and a controller
	 * it cannot reach: over only if the controller answers */
	char *ping[] = {"scontrol", "ping", NULL};
	if (run_bounded(ping, out, sizeof out, late, NULL) < 0 || !strstr(out, " is UP"))
		return -1;
	return 1;
}

/* ---- the watch ------------------------------------------------------------------ */

struct stg_mount_jobwatch {
	pthread_mutex_t mu;
	int refs; /* the thread's and its owner's */
	bool stopping;
	int wake[2]; /* the owner writes to wake[1]: the watch ends */
	atomic_bool done;
	stg_mount_job j;
	void (*over)(void *arg, const stg_mount_job *j);
	void *arg;
};

static void release(stg_mount_jobwatch *w)
{
	pthread_mutex_lock(&w->mu);
	bool last = --w->refs == 0;
	pthread_mutex_unlock(&w->mu);
	if (!last)
		return;
	close(w->wake[0]);
	close(w->wake[1]);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* Wait up to ms (-1: for ever) for the wake pipe or fd (if >= 0): 1 if fd
 * is ready, 0 on time out, -1 if the watch is to end. */
static int wait_for(stg_mount_jobwatch *w, int fd, int ms)
{
	struct pollfd p[2] = {{.fd = w->wake[0], .events = POLLIN}, {.fd = fd, .events = POLLIN}};
	for (;;) {
		int n = poll(p, fd >= 0 ? 2 : 1, ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[0].revents)
			return -1;
		return n > 0 ? 1 : 0;
	}
}

static bool process_gone(const stg_mount_job *j)
{
	unsigned long long start;
	return stg__proc_stat(j->pid, NULL, &start) || start != j->start;
}

static void *watch(void *arg)
{
	stg_mount_jobwatch *w = arg;
	const stg_mount_job *j = &w->j;
	int pidfd = j->pid ? stg__pidfd_open(j->pid) : -1;
	bool over = false;
	if (j->pid && process_gone(j)) {
		over = true; /* ended already, or the pidfd is of a later process */
	} else if (pidfd >= 0) {
		over = wait_for(w, pidfd, -1) == 1;
	} else if (j->pid) {
		int r;
		while ((r = wait_for(w, -1, PROC_POLL_MS)) == 0 && !process_gone(j))
			;
		over = r == 0;
	} else {
		while (!over && wait_for(w, -1, SLURM_POLL_MS) == 0)
			over = stg__mount_job_over(j->job, NULL) == 1;
	}
	if (pidfd >= 0)
		close(pidfd);
	pthread_mutex_lock(&w->mu);
	if (over && !w->stopping)
		w->over(w->arg, j);
	pthread_mutex_unlock(&w->mu);
	atomic_store(&w->done, true);
	release(w);
	return NULL;
}

stg_mount_jobwatch *stg__mount_job_watch(const stg_mount_job *j,
                                         void (*over)(void *arg, const stg_mount_job *j), void *arg)
{
	stg_mount_jobwatch *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK)) {
		free(w);
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	w->refs = 2;
	w->j = *j;
	w->over = over;
	w->arg = arg;
	/* the stop signals go to the threads that wait for them, not here */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_t t;
	int rc = pthread_create(&t, NULL, watch, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		w->refs = 1;
		release(w);
		return NULL;
	}
	pthread_detach(t);
	return w;
}

void stg__mount_job_unwatch(stg_mount_jobwatch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true; /* from here on, the callback is never called */
	pthread_mutex_unlock(&w->mu);
	(void)!write(w->wake[1], "", 1);
	/* a watch waiting in poll() ends at once; one asking Slurm is left
	 * to end on its own (it frees itself) */
	const struct timespec step = {0, 10000000L};
	for (long waited = 0; !atomic_load(&w->done) && waited < JOIN_WAIT_NS;
	     waited += step.tv_nsec)
		nanosleep(&step, NULL);
	release(w);
}

bool stg__cgroup_step_ends(const char *cgroups, const char *job)
{
	if (!job || !*job || strlen(job) > 32)
		return false;
	char want[64];
	snprintf(want, sizeof want, "/job_%s/step_", job);
	for (const char *at = cgroups; (at = strstr(at, want));) {
		at += strlen(want);
		size_t n = strcspn(at, "/\n");
		/* the batch script's, the extern and salloc's steps last the job */
		if (n && !(n == 5 && !strncmp(at, "batch", 5)) &&
		    !(n == 6 && !strncmp(at, "extern", 6)) &&
		    !(n == 11 && !strncmp(at, "interactive", 11)))
			return true;
	}
	return false;
}

bool stg__step_cgroup_ends(const char *job)
{
	char buf[8192];
	return read_proc("/proc/self/cgroup", buf, sizeof buf) && stg__cgroup_step_ends(buf, job);
}
