/*
 * hook_run.c - a program run as slurmd runs a Prolog or Epilog: for a
 * check, it must meet the same world as under slurmd, not the caller's.
 *
 * slurmd starts a hook with execve() (no PATH search: the path is
 * absolute), an environment of its own making, cwd /, stdin /dev/null;
 * the task prolog runs as the job's user.  So the child drops everything
 * it inherited that a shell would not get from slurmd: the environment
 * (only what the caller gives), signal dispositions and mask (an ignored
 * SIGPIPE survives execve), descriptors (all but 0-2 are close-on-exec
 * or closed), the working directory, the umask, root's groups.  It leads a
 * process group of its own, so that a hook that hangs is killed with all
 * it started.  A failure to start it (setuid, execve) comes back through a
 * close-on-exec pipe as an errno, told apart from the hook's own exit 127.
 * Output is kept up to a bound and the rest read and dropped, so a hook
 * never blocks on a full pipe; a hook that leaves a child holding its
 * stdout is not waited for past a second after it exits.
 */
#include "hook_run.h"
#include "ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define AFTER_EXIT 1.0 /* s to read what a hook's children still write */

/* Read what s's pipe has (what passes the bound is read and dropped); at
 * its end the pipe is closed. */
static void drain(stg_hook_stream *s)
{
	char sink[4096];
	ssize_t n = s->len < STG_HOOK_OUT_MAX
	                    ? read(s->fd, s->buf + s->len, STG_HOOK_OUT_MAX - s->len)
	                    : read(s->fd, sink, sizeof sink);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
	} else if (s->len < STG_HOOK_OUT_MAX) {
		s->len += (size_t)n;
	}
}

static void split_lines(stg_hook_stream *s)
{
	s->buf[s->len] = '\0';
	for (char *p = s->buf; *p && s->n_lines < STG_HOOK_LINES_MAX;) {
		char *e = strchr(p, '\n');
		if (e)
			*e = '\0';
		s->lines[s->n_lines++] = p;
		if (!e)
			break;
		p = e + 1;
	}
}

/* In the child: become the hook.  Never returns. */
static void child(const char *path, char *const env[], const stg_hook_cred *cred, int out, int err,
                  int errp)
{
	setpgid(0, 0);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	/* the C library's own signals (32, 33), which signal() refuses:
	 * ignored by whoever started us, they would stay so in the hook
	 * (a zeroed kernel sigaction is SIG_DFL, whatever the layout) */
	for (int s = 32; s < SIGRTMIN; s++) {
		unsigned long ksa[4] = {0};
		syscall(SYS_rt_sigaction, s, ksa, NULL, sizeof(unsigned long));
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || chdir("/"))
		goto fail;
	umask(022);
	if (cred && cred->uid != 0 &&
	    (setgroups((size_t)cred->n_groups, cred->groups) || setgid(cred->gid) ||
	     setuid(cred->uid) || getuid() != cred->uid))
		goto fail;
	/* what the caller opened without O_CLOEXEC: all but errp, now 3 */
	if (errp != 3 && dup3(errp, 3, O_CLOEXEC) < 0)
		goto fail;
	errp = 3;
	closefrom(4);
	char *argv[] = {(char *)path, NULL};
	execve(path, argv, env);
fail:;
	int e = errno;
	(void)!write(errp, &e, sizeof e);
	_exit(127);
}

stg_err stg__hook_run(stg_ctx *ctx, const char *path, char *const env[], const stg_hook_cred *cred,
                      unsigned timeout, stg_hook_run *r)
{
	memset(r, 0, sizeof *r);
	r->exit_status = -1;
	r->out.fd = r->err.fd = -1;
	if (stg__cancelled(ctx))
		return stg__fail(ctx, STG_EINTR, "interrupted before '%s' ran", path);
	stg_err ret = STG_OK;
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, px[2] = {-1, -1};
	r->out.buf = malloc(STG_HOOK_OUT_MAX + 1);
	r->err.buf = malloc(STG_HOOK_OUT_MAX + 1);
	if (!r->out.buf || !r->err.buf) {
		free(r->out.buf);
		free(r->err.buf);
		r->out.buf = r->err.buf = NULL;
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	double t0 = stg__now();
	pid_t pid = -1;
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC) || pipe2(px, O_CLOEXEC) ||
	    (pid = fork()) < 0) {
		r->exec_errno = errno;
		goto out;
	}
	if (pid == 0)
		child(path, env, cred, po[1], pe[1], px[1]);
	setpgid(pid, pid); /* (the child does too: a kill finds the group) */
	close(po[1]);
	close(pe[1]);
	close(px[1]);
	po[1] = pe[1] = px[1] = -1;
	r->out.fd = po[0];
	r->err.fd = pe[0];
	po[0] = pe[0] = -1;
	fcntl(r->out.fd, F_SETFL, O_NONBLOCK);
	fcntl(r->err.fd, F_SETFL, O_NONBLOCK);
	int st = 0;
	bool exited = false;
	double ended = 0;
	while (!exited || ((r->out.fd >= 0 || r->err.fd >= 0) && stg__now() - ended < AFTER_EXIT)) {
		struct pollfd p[2] = {{.fd = r->out.fd, .events = POLLIN},
		                      {.fd = r->err.fd, .events = POLLIN}};
		if (poll(p, 2, 50) > 0) {
			if (p[0].revents && r->out.fd >= 0)
				drain(&r->out);
			if (p[1].revents && r->err.fd >= 0)
				drain(&r->err);
		}
		if (!exited && waitpid(pid, &st, WNOHANG) == pid) {
			exited = true;
		} else if (!exited && (stg__now() - t0 > timeout || stg__cancelled(ctx))) {
			if (stg__cancelled(ctx))
				ret = stg__fail(ctx, STG_EINTR, "interrupted while '%s' ran", path);
			else
				r->timed_out = 1;
			kill(-pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			exited = true;
		} else if (!exited) {
			continue;
		}
		if (!ended) {
			ended = stg__now();
			r->secs = ended - t0;
		}
	}
	if (read(px[0], &r->exec_errno, sizeof r->exec_errno) != sizeof r->exec_errno)
		r->exec_errno = 0;
	if (WIFEXITED(st) && !r->exec_errno)
		r->exit_status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		r->sig = WTERMSIG(st);
out:
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
		if (px[i] >= 0)
			close(px[i]);
	}
	split_lines(&r->out);
	split_lines(&r->err);
	return ret;
}

void stg__hook_run_free(stg_hook_run *r)
{
	if (r->out.fd >= 0)
		close(r->out.fd);
	if (r->err.fd >= 0)
		close(r->err.fd);
	free(r->out.buf);
	free(r->err.buf);
	r->out.buf = r->err.buf = NULL;
	r->out.fd = r->err.fd = -1;
}
