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
 * ends on SIGTERM, SIGINT or SIGHUP, or when unmounted.
 */
#include "mount.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static stg_mount *volatile serving;

static void on_stop(int sig)
{
	(void)sig;
	if (serving)
		stg_mount_stop(serving);
}

/* Reads the caller's end of the tie until it closes, then unmounts. */
static void *tie_watch(void *arg)
{
	stg_mount *m = arg;
	char c;
	for (;;) {
		ssize_t n = read(m->tie_fd, &c, 1);
		if (n > 0 || (n < 0 && errno == EINTR))
			continue;
		break;
	}
	stg__unmount_path(m->mountpoint);
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

static int serve_child(stg_ctx *ctx, stg_mount *m, bool tied)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	if (tied) {
		sa.sa_handler = SIG_IGN;
		const int job[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
		for (size_t i = 0; i < sizeof job / sizeof job[0]; i++)
			sigaction(job[i], &sa, NULL);
		pthread_t t;
		if (pthread_create(&t, NULL, tie_watch, m) == 0)
			pthread_detach(t);
	} else {
		sa.sa_handler = on_stop; /* no SA_RESTART: a blocked read returns */
		serving = m;
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
	}
	stg_err err = stg_mount_serve(m);
	if (err)
		stg__log(ctx, STG_LOG_WARN, "%s", stg_errmsg(ctx));
	serving = NULL;
	stg_mount_close(m);
	return stg_exit_status(err);
}

stg_err stg_mount_spawn(stg_ctx *ctx, stg_cache *cache, const char *pack, const char *mountpoint,
                        const stg_mount_opts *opts, int tied, int *pid, int *tie_fd)
{
	int ready[2], tie[2] = {-1, -1};
	*pid = -1;
	if (tie_fd)
		*tie_fd = -1;
	if (pipe2(ready, O_CLOEXEC) || (tied && pipe2(tie, O_CLOEXEC)))
		return stg__fail_errno(ctx, STG_EIO, errno, "pipe");
	fflush(NULL);
	pid_t child = fork();
	if (child < 0) {
		int e = errno;
		close(ready[0]);
		close(ready[1]);
		if (tied) {
			close(tie[0]);
			close(tie[1]);
		}
		return stg__fail_errno(ctx, STG_EIO, e, "cannot start the mount's process");
	}
	if (child == 0) {
		close(ready[0]);
		if (tied)
			close(tie[1]);
		else
			setsid();
		stg_mount *m;
		stg_err err = stg_mount_open(ctx, cache, pack, mountpoint, opts, &m);
		char msg[STG_ERRMSG_MAX + 16];
		int n = snprintf(msg, sizeof msg, "%d %s", (int)err, err ? stg_errmsg(ctx) : "");
		if (n >= (int)sizeof msg)
			n = (int)sizeof msg - 1;
		bool told = write(ready[1], msg, (size_t)n) == n;
		close(ready[1]);
		if (err || !told)
			_exit(err ? stg_exit_status(err) : 7);
		m->tie_fd = tie[0];
		log_to_scratch(cache);
		_exit(serve_child(ctx, m, tied));
	}
	close(ready[1]);
	if (tied)
		close(tie[0]);
	char msg[STG_ERRMSG_MAX + 16];
	size_t got = 0;
	ssize_t n;
	while ((n = read(ready[0], msg + got, sizeof msg - 1 - got)) > 0 ||
	       (n < 0 && errno == EINTR))
		if (n > 0)
			got += (size_t)n;
	close(ready[0]);
	msg[got] = '\0';
	char *rest = NULL;
	long code = got ? strtol(msg, &rest, 10) : -1;
	if (code != 0) {
		int st = 0;
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		if (tied)
			close(tie[1]);
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
	return STG_OK;
}
