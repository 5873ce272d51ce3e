/*
 * sigwatch.c - a thread that takes the signals a long operation answers,
 * so that nothing happens in a signal handler and the library keeps no
 * global state for them.
 *
 * stg_collect_every and stg_run's final collect work in the calling
 * thread, and must hear signals while they do: the first stop signal
 * (SIGTERM, SIGINT, SIGHUP) lets the work end well (one last collect), the
 * second cuts it short (stg_cancel), and SIGUSR1/SIGUSR2 ask for a collect
 * now.  The calling thread blocks the signals before the watcher starts,
 * which inherits the mask and takes them with sigtimedwait(), counting
 * each kind; each signal also makes a pipe readable, so a caller asleep in
 * poll() wakes at once.
 *
 * Handlers (that do nothing) are installed while the signals are blocked:
 * a signal ignored since the process started (nohup, a background job) is
 * discarded by the kernel unless it has one, and the tool's handlers used
 * to catch those too.  Invariant: the watched signals are blocked in every
 * thread while the watcher runs, so only it takes them.  Ending the
 * watcher joins it (within WAIT_STEP) and puts back the handlers and the
 * mask; a signal that came after it stopped is then delivered as before.
 */
#include "sigwatch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_STEP_NS 50000000L /* how often the thread looks whether to end */

static const int watched[STG_SIGWATCH_N] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};

static void taken_elsewhere(int sig)
{
	(void)sig;
}

static void *watch(void *arg)
{
	stg_sigwatch *w = arg;
	const struct timespec step = {0, WAIT_STEP_NS};
	while (!atomic_load(&w->done)) {
		int sig = sigtimedwait(&w->set, NULL, &step);
		if (sig <= 0)
			continue;
		if (sig == SIGUSR1 || sig == SIGUSR2) {
			atomic_fetch_add(&w->nows, 1);
		} else if (atomic_fetch_add(&w->stops, 1) >= 1) {
			stg_cancel(w->ctx);
		}
		(void)!write(w->wake_w, "", 1);
	}
	return NULL;
}

int stg__sigwatch_start(stg_sigwatch *w, stg_ctx *ctx, unsigned stops)
{
	memset(w, 0, sizeof *w);
	w->ctx = ctx;
	atomic_init(&w->stops, stops);
	atomic_init(&w->nows, 0);
	atomic_init(&w->done, false);
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK))
		return -1;
	w->wake = p[0];
	w->wake_w = p[1];
	sigemptyset(&w->set);
	for (size_t i = 0; i < STG_SIGWATCH_N; i++)
		sigaddset(&w->set, watched[i]);
	pthread_sigmask(SIG_BLOCK, &w->set, &w->old_mask);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = taken_elsewhere;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < STG_SIGWATCH_N; i++)
		sigaction(watched[i], &sa, &w->old[i]);
	int e = pthread_create(&w->thread, NULL, watch, w);
	if (e) {
		for (size_t i = 0; i < STG_SIGWATCH_N; i++)
			sigaction(watched[i], &w->old[i], NULL);
		pthread_sigmask(SIG_SETMASK, &w->old_mask, NULL);
		close(p[0]);
		close(p[1]);
		errno = e;
		return -1;
	}
	return 0;
}

void stg__sigwatch_end(stg_sigwatch *w)
{
	atomic_store(&w->done, true);
	pthread_join(w->thread, NULL);
	for (size_t i = 0; i < STG_SIGWATCH_N; i++)
		sigaction(watched[i], &w->old[i], NULL);
	pthread_sigmask(SIG_SETMASK, &w->old_mask, NULL);
	close(w->wake);
	close(w->wake_w);
}

void stg__sigwatch_drain(stg_sigwatch *w)
{
	char buf[64];
	while (read(w->wake, buf, sizeof buf) > 0)
		;
}
