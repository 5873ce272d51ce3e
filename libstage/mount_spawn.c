/*
 * mount_spawn.c - a mount served by a process of its own: `stager mount`
 * in the background, and the mounts of `stager run --mount`.
 *
 * The child opens and mounts, then tells the caller through a pipe whether
 * the tree can be read (or the error and its message), so the caller
 * returns only once it can, or with the reason it cannot.  The child's
 * messages go to SCRATCH_ROOT/mounts/log: nobody reads its standard error.
 *
 * A mount tied to its caller (run's) lives as long as a descriptor the
 * caller keeps: when the caller closes it, or dies, a thread of the child
 * sees the end of the pipe and unmounts (lazily: files still open stay
 * readable), which ends the serving.  Such a child ignores the signals a
 * job gets (SIGTERM from scancel or the time limit, the early warning), so
 * that the command keeps its data for as long as it runs; the caller ends
 * it after the command.  An untied mount has a session of its own and
 * ends on SIGTERM, SIGINT or SIGHUP, or when unmounted: it is served as
 * `stager mount --foreground` serves (stg_mount_foreground), which catches
 * those signals from before the mount appears.
 *
 * Until the caller is told, it can give up (interrupted: SIGINT, SIGTERM
 * or SIGHUP, whatever their disposition was, end an untied caller's wait;
 * run's are its own): it closes its end of a pipe to the child, sends an
 * untied one SIGTERM and waits for it to end, so that nothing is mounted
 * after it returns.  The child listens to that pipe (its "ear") until it
 * tells: its end, or its caller's death, stops any wait of its start (a
 * reader slot, Slurm) and unmounts a tree already up.  The child keeps no
 * descriptor of its caller's but its standard ones until it tells (then
 * its log), the scratch root and its two pipes.
 *
 * Inside a Slurm job, that serving also ends with the job (mount_job.c
 * says which process of the job is watched, and why): the process is
 * found first, while the caller that ran `stager mount` still lives, and
 * watched once the tree is up; its end stops the serving as a stop signal
 * does, so the mount is unmounted and the process ends even though it left
 * the job's process group (proctrack/pgid would not kill it).
 */
#include "mount_spawn.h"
#include "mount.h"
#include "mount_job.h"
#include "mount_list.h"
#include "ctx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The foreground serving's stop.  The handler only cancels the operation
 * (which records the stop: a wait for a reader slot or the cache's lock ends
 * at once) and writes a byte to a pipe: all of it async-signal-safe, and
 * none of it touches the mount, which the handler may outlive when another
 * thread takes the signal.  A thread of the serving's own (stopper) reads
 * the pipe and ends the session, then signals the serving thread until the
 * serving returns: libfuse 3.14's loop checks its exit flag and then sleeps
 * in sem_wait(), and a signal that lands between the two would be lost
 * (libfuse #997, fixed in 3.18). */
static _Atomic(stg_ctx *) stop_ctx;
static atomic_int stop_pipe = -1; /* the write end, non-blocking */
static const int stops[] = {SIGTERM, SIGINT, SIGHUP};
#define N_STOPS     (sizeof stops / sizeof stops[0])
#define KICK_NS     20000000L      /* between the stopper's signals to the serving thread */
#define POLL_MS     100            /* between a waiting caller's looks at its cancellation */
#define GIVE_UP_MAX 3.0            /* s an interrupted caller waits for the child to end */
#define SIGWAKE     (SIGRTMIN + 3) /* ends a tied env server's wait; no job gets it */

static void on_stop(int sig)
{
	(void)sig;
	int e = errno;
	stg_ctx *ctx = atomic_load(&stop_ctx);
	if (ctx)
		stg_cancel(ctx);
	int fd = atomic_load(&stop_pipe);
	if (fd >= 0)
		(void)!write(fd, "", 1);
	errno = e;
}

/* The job the mount was made in ended: stop as a stop signal does. */
static void job_ended(void *arg, const stg_mount_job *j)
{
	stg_mount *m = arg;
	if (j->pid)
		stg__mount_log(m, STG_LOG_INFO,
		               "job %s is over (%s, process %d, ended): unmounting '%s'", j->job,
		               j->what, (int)j->pid, m->mountpoint);
	else
		stg__mount_log(m, STG_LOG_INFO, "job %s is over (Slurm says so): unmounting '%s'",
		               j->job, m->mountpoint);
	on_stop(SIGTERM);
}

struct stopper {
	stg_mount *m;
	pthread_t serving; /* the thread in stg_mount_serve */
	int fd;            /* the pipe's read end */
	atomic_bool done;  /* the serving returned */
};

static void *stopper(void *arg)
{
	struct stopper *st = arg;
	char c;
	while (read(st->fd, &c, 1) < 0 && errno == EINTR)
		;
	if (atomic_load(&st->done))
		return NULL;
	stg_mount_stop(st->m);
	const struct timespec step = {0, KICK_NS};
	while (!atomic_load(&st->done)) {
		pthread_kill(st->serving, SIGTERM); /* wakes the loop's sem_wait */
		nanosleep(&step, NULL);
	}
	return NULL;
}

/* The tied child's serving: the thread in stg_mount_serve, and whether it
 * returned. */
struct tied {
	stg_mount *m;
	pthread_t serving;
	atomic_bool done;
	int over[2]; /* the serving returned: the watch ends */
};

static void on_wake(int sig)
{
	(void)sig;
}

/* Reads the caller's end of the tie until it closes, then unmounts; an
 * env's mount, which other jobs' servers may share, is left to its last
 * server (mount_share.c): this one stops serving. */
static void *tie_watch(void *arg)
{
	struct tied *t = arg;
	stg_mount *m = t->m;
	char c;
	struct pollfd pf[2] = {{.fd = m->tie_fd, .events = POLLIN},
	                       {.fd = t->over[0], .events = POLLIN}};
	for (;;) {
		int r = poll(pf, 2, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || pf[1].revents)
			return NULL; /* unmounted by another: nothing to stop */
		ssize_t n = read(m->tie_fd, &c, 1);
		if (n > 0 || (n < 0 && errno == EINTR))
			continue;
		break;
	}
	if (!m->share) {
		stg__unmount_path(m->mountpoint);
		return NULL;
	}
	stg_mount_stop(m);
	const struct timespec step = {0, KICK_NS};
	while (!atomic_load(&t->done)) {
		pthread_kill(t->serving, SIGWAKE); /* wakes the loop's sem_wait */
		nanosleep(&step, NULL);
	}
	return NULL;
}

/* The child's messages: SCRATCH_ROOT/mounts/log, appended to. */
static void log_to_scratch(stg_cache *cache)
{
	int fd = openat(cache->rootfd, "mounts/log",
	                O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
	}
	dup2(fd >= 0 ? fd : null, STDERR_FILENO);
	if (fd >= 0)
		close(fd);
	if (null >= 0)
		close(null);
}

/* stg_mount_open's arguments, for the openers of stg_mount_foreground and
 * stg_mount_spawn. */
struct packs_at {
	const char *const *packs;
	size_t n_packs;
	const char *mountpoint;
	const stg_mount_opts *opts;
};

static stg_err open_packs_at(void *arg, stg_ctx *ctx, stg_cache *cache, stg_mount **out)
{
	struct packs_at *a = arg;
	return stg_mount_open(ctx, cache, a->packs, a->n_packs, a->mountpoint, a->opts, out);
}

stg_err stg_mount_foreground(stg_ctx *ctx, stg_cache *cache, const char *const *packs,
                             size_t n_packs, const char *mountpoint, const stg_mount_opts *opts,
                             void (*ready)(void *arg), void *arg)
{
	struct packs_at a = {packs, n_packs, mountpoint, opts};
	return stg__mount_foreground_with(ctx, cache, open_packs_at, &a, mountpoint, ready, arg);
}

stg_err stg__mount_foreground_with(stg_ctx *ctx, stg_cache *cache, stg_mount_opener open_fn,
                                   void *open_arg, const char *mountpoint, void (*ready)(void *arg),
                                   void *arg)
{
	/* the handlers go in before anything waits, and before the mount
	 * appears: a stop signal sent as soon as the tree shows must stop the
	 * serving, not end the process and leave a dead mount behind.  One that
	 * came earlier, to a handler of the caller's, has cancelled ctx.  No
	 * SA_RESTART: libfuse's main thread waits in sem_wait() and must see
	 * the signal.  Until the tree is up, each stop signal ends the wait,
	 * even one ignored when the process started: nothing is lost, and a
	 * wait for a reader slot can be long.  Then SIGINT and SIGHUP ignored
	 * (nohup, a script's background job) are ignored again, and the
	 * serving goes on.  SIGPIPE is ignored while serving: a message to a
	 * stderr nobody reads any more must not end the process with the mount
	 * left behind. */
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return stg__fail_errno(ctx, STG_EIO, errno, "pipe");
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	struct sigaction sa, old[N_STOPS], old_pipe, ign;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	atomic_store(&stop_ctx, ctx);
	atomic_store(&stop_pipe, p[1]);
	for (size_t i = 0; i < N_STOPS; i++)
		sigaction(stops[i], &sa, &old[i]);
	sigaction(SIGPIPE, &ign, &old_pipe);
	/* the job's process to watch, while the caller (stg_mount_spawn's
	 * parent, waiting for the tree) is still there to be looked up from */
	stg_mount_job job;
	bool in_job = stg__mount_job_find(&job, ctx);
	stg_mount *m = NULL;
	stg_err err = stg__cancelled(ctx)
	                      ? stg__fail(ctx, STG_EINTR, "interrupted before '%s' was mounted",
	                                  mountpoint)
	                      : open_fn(open_arg, ctx, cache, &m);
	if (!err) {
		for (size_t i = 0; i < N_STOPS; i++)
			if (old[i].sa_handler == SIG_IGN && stops[i] != SIGTERM)
				sigaction(stops[i], &ign, NULL);
		struct stopper st = {m, pthread_self(), p[0], false};
		pthread_t t;
		if (pthread_create(&t, NULL, stopper, &st)) {
			err = stg__fail(ctx, STG_ENOMEM, "cannot start a thread");
		} else {
			stg_mount_jobwatch *jw =
			        in_job ? stg__mount_job_watch(&job, job_ended, m) : NULL;
			if (in_job && !jw)
				stg__log(ctx, STG_LOG_WARN,
				         "cannot watch job %s: the mount of '%s' outlives it until "
				         "`stager clean --job %s` or `stager umount`",
				         job.job, m->mountpoint, job.job);
			if (ready)
				ready(arg);
			if (stg__cancelled(ctx)) /* a stop came while it mounted */
				stg_mount_stop(m);
			err = stg_mount_serve(m);
			stg__mount_job_unwatch(jw);
			/* the stopper ends (it is woken if no stop came) before m goes */
			atomic_store(&st.done, true);
			(void)!write(p[1], "", 1);
			pthread_join(t, NULL);
		}
		stg_mount_close(m);
	}
	atomic_store(&stop_pipe, -1);
	for (size_t i = 0; i < N_STOPS; i++)
		sigaction(stops[i], &old[i], NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	atomic_store(&stop_ctx, NULL);
	close(p[0]);
	close(p[1]);
	return err;
}

/* The child's ear on its caller while it mounts: the caller's end of the
 * tie closes when the caller gives up (interrupted) or dies, and the child
 * gives up too, as a stop signal makes it: its waits end (ctx cancelled;
 * the signals are left to the thread that waits, so that one interrupts a
 * blocking lock), a tree already up is unmounted (the serving's stop).
 * The ear ends before the caller is told: once told, the caller's exit
 * closes the tie too, and an untied mount outlives its caller. */
struct ear {
	stg_ctx *ctx;
	int tie;     /* the child's end of the tie */
	int wake[2]; /* ends the ear */
	pthread_t t;
	bool on;
};

static void *ear_listen(void *arg)
{
	struct ear *e = arg;
	struct pollfd pf[2] = {{.fd = e->tie, .events = POLLIN},
	                       {.fd = e->wake[0], .events = POLLIN}};
	for (;;) {
		int n = poll(pf, 2, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || pf[1].revents)
			return NULL;
		if (pf[0].revents) {
			stg_cancel(e->ctx);
			int fd = atomic_load(&stop_pipe);
			if (fd >= 0)
				(void)!write(fd, "", 1);
			return NULL;
		}
	}
}

static void ear_start(struct ear *e, stg_ctx *ctx, int tie)
{
	e->ctx = ctx;
	e->tie = tie;
	e->on = false;
	if (pipe2(e->wake, O_CLOEXEC))
		return;
	sigset_t all, was;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &was); /* the ear's own mask: every signal blocked */
	e->on = pthread_create(&e->t, NULL, ear_listen, e) == 0;
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (!e->on) {
		close(e->wake[0]);
		close(e->wake[1]);
	}
}

static void ear_stop(struct ear *e)
{
	if (!e->on)
		return;
	(void)!write(e->wake[1], "", 1);
	pthread_join(e->t, NULL);
	close(e->wake[0]);
	close(e->wake[1]);
	e->on = false;
}

/* The child keeps none of its caller's descriptors (a lock, another
 * mount's tie, whatever a shell had open) for as long as it serves: only
 * the standard ones and keep[0..n-1]. */
static void close_inherited(const int *keep, size_t n)
{
	int from = STDERR_FILENO + 1;
	for (;;) {
		int next = -1; /* the lowest kept descriptor at or above from */
		for (size_t i = 0; i < n; i++)
			if (keep[i] >= from && (next < 0 || keep[i] < next))
				next = keep[i];
		if (next < 0)
			break;
		for (int fd = from; fd < next; fd++)
			close(fd);
		from = next + 1;
	}
	closefrom(from);
}

/* The untied child: once mounted, tell the caller and log to scratch. */
struct child_ready {
	stg_cache *cache;
	int fd;
	bool told;
	struct ear *ear;
};

static bool tell(int fd, stg_ctx *ctx, stg_err err)
{
	char msg[STG_ERRMSG_MAX + 16];
	int n = snprintf(msg, sizeof msg, "%d %s", (int)err, err ? stg_errmsg(ctx) : "");
	if (n >= (int)sizeof msg)
		n = (int)sizeof msg - 1;
	bool told = write(fd, msg, (size_t)n) == n;
	close(fd);
	return told;
}

static void child_ready(void *arg)
{
	struct child_ready *r = arg;
	ear_stop(r->ear);
	close(r->ear->tie); /* what it listened to: the caller's exit closes it now */
	r->told = true;
	if (!tell(r->fd, NULL, STG_OK))
		raise(SIGTERM); /* nobody waits for the tree: unmount */
	log_to_scratch(r->cache);
}

/* The tied child, from its first step: deaf to the job's signals. */
static void ignore_job_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_IGN;
	/* and SIGPIPE: telling a caller that died must not end the process
	 * with the mount left behind */
	const int job[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};
	for (size_t i = 0; i < sizeof job / sizeof job[0]; i++)
		sigaction(job[i], &sa, NULL);
}

/* The tied child: mounted and told already; serves until the caller's
 * descriptor closes. */
static int serve_tied(stg_ctx *ctx, stg_mount *m)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_wake; /* no SA_RESTART: it must end a wait */
	sigaction(SIGWAKE, &sa, NULL);
	struct tied td = {m, pthread_self(), false, {-1, -1}};
	pthread_t t;
	bool watching =
	        pipe2(td.over, O_CLOEXEC) == 0 && pthread_create(&t, NULL, tie_watch, &td) == 0;
	stg_err err = stg_mount_serve(m);
	atomic_store(&td.done, true);
	if (watching) {
		(void)!write(td.over[1], "", 1);
		pthread_join(t, NULL);
	}
	for (int i = 0; i < 2; i++)
		if (td.over[i] >= 0)
			close(td.over[i]);
	if (err)
		stg__log(ctx, STG_LOG_WARN, "%s", stg_errmsg(ctx));
	stg_mount_close(m);
	return stg_exit_status(err);
}

/* The caller's wait for the child's word (into msg, NUL-terminated):
 * until the child closes its end, or, once ctx is cancelled, for
 * GIVE_UP_MAX s after giving up (the tie closed, an untied child sent
 * SIGTERM).  Whether it gave up. */
static bool hear(stg_ctx *ctx, int fd, pid_t child, int tied, int *tie, char *msg, size_t len)
{
	size_t got = 0;
	bool gave_up = false;
	double until = 0;
	for (;;) {
		if (!gave_up && stg__cancelled(ctx)) {
			gave_up = true;
			close(*tie);
			*tie = -1;
			if (!tied)
				kill(child, SIGTERM);
			until = stg__now() + GIVE_UP_MAX;
		}
		if (gave_up && stg__now() >= until)
			break;
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int n = poll(&pf, 1, POLL_MS);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		ssize_t r = read(fd, msg + got, len - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	msg[got] = '\0';
	return gave_up;
}

/* The child's end: within GIVE_UP_MAX s if the caller gave up (then
 * killed, and a tree it said was up unmounted for it), else when it ends. */
static int reap(pid_t child, bool gave_up, bool up, const char *mountpoint)
{
	int st = 0;
	double until = stg__now() + GIVE_UP_MAX;
	for (;;) {
		pid_t w = waitpid(child, &st, gave_up ? WNOHANG : 0);
		if (w == child || (w < 0 && errno != EINTR))
			return st;
		if (w == 0 && stg__now() >= until) {
			kill(child, SIGKILL);
			while (waitpid(child, &st, 0) < 0 && errno == EINTR)
				;
			if (up)
				stg__unmount_path(mountpoint);
			return st;
		}
		if (w == 0)
			stg__nap(NULL, 0.01);
	}
}

stg_err stg_mount_spawn(stg_ctx *ctx, stg_cache *cache, const char *const *packs, size_t n_packs,
                        const char *mountpoint, const stg_mount_opts *opts, int tied, int *pid,
                        int *tie_fd)
{
	struct packs_at a = {packs, n_packs, mountpoint, opts};
	if (!tied && stg__step_cgroup_ends(getenv("SLURM_JOB_ID")))
		return stg__fail(ctx, STG_EUSAGE,
		                 "'%s' would be served only until this step of srun ends, which "
		                 "is now (Slurm ends every process of a step with it here): mount "
		                 "in the batch script (`stager mount PACK %s`), or for one step "
		                 "`srun stager run --mount PACK:%s -- CMD`",
		                 mountpoint, mountpoint, mountpoint);
	return stg__mount_spawn_with(ctx, cache, open_packs_at, &a, mountpoint, tied, pid, tie_fd);
}

stg_err stg__mount_spawn_with(stg_ctx *ctx, stg_cache *cache, stg_mount_opener open_fn,
                              void *open_arg, const char *mountpoint, int tied, int *pid,
                              int *tie_fd)
{
	int ready[2], tie[2];
	*pid = -1;
	if (tie_fd)
		*tie_fd = -1;
	if (pipe2(ready, O_CLOEXEC))
		return stg__fail_errno(ctx, STG_EIO, errno, "pipe");
	if (pipe2(tie, O_CLOEXEC)) {
		int e = errno;
		close(ready[0]);
		close(ready[1]);
		return stg__fail_errno(ctx, STG_EIO, e, "pipe");
	}
	/* an untied mount's caller answers every stop signal while it waits,
	 * whatever it inherited (stg_mount_foreground says why); run's are
	 * run's.  The child starts with these handlers too. */
	struct sigaction sa, old[N_STOPS];
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	if (!tied) {
		atomic_store(&stop_ctx, ctx);
		for (size_t i = 0; i < N_STOPS; i++)
			sigaction(stops[i], &sa, &old[i]);
	}
	fflush(NULL);
	pid_t child = fork();
	if (child < 0) {
		int e = errno;
		close(ready[0]);
		close(ready[1]);
		close(tie[0]);
		close(tie[1]);
		if (!tied) {
			for (size_t i = 0; i < N_STOPS; i++)
				sigaction(stops[i], &old[i], NULL);
			atomic_store(&stop_ctx, NULL);
		}
		return stg__fail_errno(ctx, STG_EIO, e, "cannot start the mount's process");
	}
	if (child == 0) {
		close(ready[0]);
		close(tie[1]);
		if (tied)
			ignore_job_signals();
		const int keep[] = {cache->rootfd, ready[1], tie[0]};
		close_inherited(keep, sizeof keep / sizeof keep[0]);
		signal(SIGPIPE, SIG_IGN); /* a caller that gave up: its pipe is closed */
		struct ear ear;
		ear_start(&ear, ctx, tie[0]);
		stg_err err;
		if (!tied) {
			setsid();
			struct child_ready r = {cache, ready[1], false, &ear};
			err = stg__mount_foreground_with(ctx, cache, open_fn, open_arg, mountpoint,
			                                 child_ready, &r);
			ear_stop(&ear);
			if (r.told) {
				if (err)
					stg__log(ctx, STG_LOG_WARN, "%s", stg_errmsg(ctx));
				_exit(stg_exit_status(err));
			}
			tell(ready[1], ctx, err);
			_exit(stg_exit_status(err));
		}
		stg_mount *m;
		err = open_fn(open_arg, ctx, cache, &m);
		ear_stop(&ear);
		bool told = tell(ready[1], ctx, err);
		if (err)
			_exit(stg_exit_status(err));
		if (!told || stg__cancelled(ctx)) {
			stg_mount_close(m);
			_exit(told ? 5 : 7);
		}
		m->tie_fd = tie[0];
		log_to_scratch(cache);
		_exit(serve_tied(ctx, m));
	}
	close(ready[1]);
	close(tie[0]);
	char msg[STG_ERRMSG_MAX + 16];
	bool gave_up = hear(ctx, ready[0], child, tied, &tie[1], msg, sizeof msg);
	close(ready[0]);
	if (!tied) {
		for (size_t i = 0; i < N_STOPS; i++)
			sigaction(stops[i], &old[i], NULL);
		atomic_store(&stop_ctx, NULL);
	}
	char *rest = NULL;
	long code = msg[0] ? strtol(msg, &rest, 10) : -1;
	if (code != 0 || gave_up) {
		int st = reap(child, gave_up, code == 0, mountpoint);
		if (tie[1] >= 0)
			close(tie[1]);
		if (gave_up && code == STG_EINTR && rest && *rest)
			return stg__fail(ctx, STG_EINTR, "%s", rest + 1);
		if (gave_up)
			return stg__fail(ctx, STG_EINTR, "interrupted: nothing was mounted at '%s'",
			                 mountpoint);
		if (code > 0 && code <= STG_ENOTSUP && rest)
			return stg__fail(ctx, (stg_err)code, "%s",
			                 *rest ? rest + 1 : stg_strerror((stg_err)code));
		return stg__fail(ctx, STG_EIO,
		                 "the mount's process ended before it mounted (status %d)",
		                 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	*pid = (int)child;
	if (tie_fd)
		*tie_fd = tie[1];
	else
		close(tie[1]);
	return STG_OK;
}
