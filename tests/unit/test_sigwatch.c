/* test_sigwatch.c - the thread that takes a long operation's signals
 * (sigwatch.c), signalled for real (kill of this process): SIGINT,
 * SIGTERM and SIGHUP each count a stop, wake a poll at once, and the
 * second stop cancels the context (the first when one had come before
 * start); SIGUSR1 and SIGUSR2 count "now" and never cancel; the signals
 * are blocked in the calling thread meanwhile, a signal ignored since
 * start is still taken, and at the end the handlers and the mask are as
 * they were: a signal after it reaches the old handler. */
#include "unit.h"
#include "sigwatch.h"

#include <poll.h>

static volatile sig_atomic_t handled[32];

static void old_handler(int sig)
{
	handled[sig]++;
}

/* Is w->wake readable within ms? */
static bool woken(stg_sigwatch *w, int ms)
{
	struct pollfd p = {.fd = w->wake, .events = POLLIN};
	return poll(&p, 1, ms) == 1;
}

/* Wait (2 s at most) until *counter reaches want. */
static void wait_count(atomic_uint *counter, unsigned want)
{
	for (int i = 0; i < 400 && atomic_load(counter) < want; i++) {
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	assert_int_equal(atomic_load(counter), want);
}

static void test_stop_signals(void **state)
{
	(void)state;
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < 3; i++) {
		int sig = sigs[i];
		struct sigaction sa = {0}, was;
		sa.sa_handler = old_handler;
		sigaction(sig, &sa, &was);
		handled[sig] = 0;
		stg_ctx *ctx = ut_ctx(0);
		stg_sigwatch w;
		assert_int_equal(stg__sigwatch_start(&w, ctx, 0), 0);
		/* blocked in this thread while the watcher runs */
		sigset_t now;
		pthread_sigmask(SIG_BLOCK, NULL, &now);
		assert_true(sigismember(&now, sig));
		assert_false(woken(&w, 0));
		/* the first: a stop, a wake-up, no cancel */
		assert_int_equal(kill(getpid(), sig), 0);
		assert_true(woken(&w, 2000));
		wait_count(&w.stops, 1);
		assert_false(stg__cancelled(ctx));
		stg__sigwatch_drain(&w);
		assert_false(woken(&w, 0));
		/* the second cancels */
		assert_int_equal(kill(getpid(), sig), 0);
		assert_true(woken(&w, 2000));
		wait_count(&w.stops, 2);
		for (int k = 0; k < 200 && !stg__cancelled(ctx); k++)
			usleep(5000);
		assert_true(stg__cancelled(ctx));
		assert_int_equal(atomic_load(&w.nows), 0);
		stg__sigwatch_end(&w);
		assert_int_equal(handled[sig], 0); /* none reached the old handler */
		/* afterwards: the mask and the handler as they were */
		pthread_sigmask(SIG_BLOCK, NULL, &now);
		assert_false(sigismember(&now, sig));
		assert_int_equal(kill(getpid(), sig), 0);
		assert_int_equal(handled[sig], 1);
		sigaction(sig, &was, NULL);
		stg_ctx_free(ctx);
	}
}

/* One stop came before start (a collect already asked to end): the next
 * cancels. */
static void test_stop_before(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(0);
	stg_sigwatch w;
	assert_int_equal(stg__sigwatch_start(&w, ctx, 1), 0);
	assert_int_equal(atomic_load(&w.stops), 1);
	assert_int_equal(kill(getpid(), SIGTERM), 0);
	wait_count(&w.stops, 2);
	for (int k = 0; k < 200 && !stg__cancelled(ctx); k++)
		usleep(5000);
	assert_true(stg__cancelled(ctx));
	stg__sigwatch_end(&w);
	stg_ctx_free(ctx);
}

static void test_now_signals(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(0);
	stg_sigwatch w;
	assert_int_equal(stg__sigwatch_start(&w, ctx, 0), 0);
	for (unsigned i = 1; i <= 6; i++) {
		assert_int_equal(kill(getpid(), i % 2 ? SIGUSR1 : SIGUSR2), 0);
		assert_true(woken(&w, 2000));
		wait_count(&w.nows, i);
		stg__sigwatch_drain(&w);
	}
	assert_int_equal(atomic_load(&w.stops), 0);
	assert_false(stg__cancelled(ctx));
	stg__sigwatch_end(&w);
	stg_ctx_free(ctx);
}

/* A signal ignored when the watcher starts (nohup) is taken all the same,
 * and ignored again after. */
static void test_ignored(void **state)
{
	(void)state;
	struct sigaction ign = {0}, was, after;
	ign.sa_handler = SIG_IGN;
	sigaction(SIGHUP, &ign, &was);
	stg_ctx *ctx = ut_ctx(0);
	stg_sigwatch w;
	assert_int_equal(stg__sigwatch_start(&w, ctx, 0), 0);
	assert_int_equal(kill(getpid(), SIGHUP), 0);
	assert_true(woken(&w, 2000));
	wait_count(&w.stops, 1);
	stg__sigwatch_end(&w);
	sigaction(SIGHUP, NULL, &after);
	assert_true(after.sa_handler == SIG_IGN);
	sigaction(SIGHUP, &was, NULL);
	stg_ctx_free(ctx);
}

#define T(name) cmocka_unit_test(name)
static const struct CMUnitTest tests[] = {
        T(test_stop_signals),
        T(test_stop_before),
        T(test_now_signals),
        T(test_ignored),
};

UT_MAIN(tests)
