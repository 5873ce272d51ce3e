/* test_pace.c - token buckets (pace.c): the rate holds over a run of
 * small and large takes and across threads, idle time buys at most the
 * burst, no limit costs nothing, and a cancel ends the sleep. */
#include "unit.h"
#include "pace.h"

#include <pthread.h>
#include <time.h>

static void test_rate_holds(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	stg_bucket b;
	stg__bucket_init(&b, 2e6);
	double t0 = stg__now();
	/* 1 MB in 100 takes at 2 MB/s: half a second, less at most the
	 * burst (0.1 s) that a slow start may have earned */
	for (int i = 0; i < 100; i++)
		stg__bucket_take(ctx, &b, 10000);
	double t = stg__now() - t0;
	assert_true(t >= 0.39);
	ut_assert_time_below(t, 2.0);
	/* one large take is charged whole */
	t0 = stg__now();
	stg__bucket_take(ctx, &b, 600000);
	t = stg__now() - t0;
	assert_true(t >= 0.19);
	ut_assert_time_below(t, 2.0);
	stg__bucket_destroy(&b);
	stg_ctx_free(ctx);
}

static void nap(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

/* Time spent idle is credited only up to a tenth of a second's worth. */
static void test_burst(void **state)
{
	(void)state;
	stg_bucket b;
	stg__bucket_init(&b, 1e6);
	nap(0.5);
	double t0 = stg__now();
	stg__bucket_take(NULL, &b, 100000); /* the burst: at once */
	ut_assert_time_below(stg__now() - t0, 0.08);
	nap(0.5);
	t0 = stg__now();
	stg__bucket_take(NULL, &b, 500000); /* 0.1 s credited, 0.4 s slept */
	double t = stg__now() - t0;
	assert_true(t >= 0.35);
	ut_assert_time_below(t, 1.5);
	stg__bucket_destroy(&b);
	/* a slow rate still has a burst of one unit */
	stg__bucket_init(&b, 2);
	nap(1.0);
	t0 = stg__now();
	stg__bucket_take(NULL, &b, 1);
	ut_assert_time_below(stg__now() - t0, 0.3); /* without it: 0.5 s */
	stg__bucket_destroy(&b);
}

static void test_unlimited(void **state)
{
	(void)state;
	stg_bucket b;
	stg__bucket_init(&b, 0);
	double t0 = stg__now();
	for (int i = 0; i < 1000; i++)
		stg__bucket_take(NULL, &b, 1e12);
	stg__bucket_take(NULL, NULL, 1e12);
	ut_assert_time_below(stg__now() - t0, 1);
	stg__bucket_destroy(&b);
}

typedef struct shared {
	stg_bucket *b;
	int takes;
} shared;

static void *taker(void *arg)
{
	shared *s = arg;
	for (int i = 0; i < s->takes; i++)
		stg__bucket_take(NULL, s->b, 1);
	return NULL;
}

/* Four threads on one bucket of 400 ops/s: 200 ops take half a second. */
static void test_threads(void **state)
{
	(void)state;
	stg_bucket b;
	stg__bucket_init(&b, 400);
	shared s = {&b, 50};
	pthread_t th[4];
	double t0 = stg__now();
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, taker, &s), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	double t = stg__now() - t0;
	assert_true(t >= 0.35); /* 0.5 s, less the burst */
	ut_assert_time_below(t, 3.0);
	stg__bucket_destroy(&b);
}

static void *cancel_later(void *arg)
{
	nap(0.2);
	stg_cancel(arg);
	return NULL;
}

static void test_cancel(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	stg_bucket b;
	stg__bucket_init(&b, 100);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, ctx), 0);
	double t0 = stg__now();
	stg__bucket_take(ctx, &b, 3000); /* 30 s, cut short */
	double t = stg__now() - t0;
	pthread_join(th, NULL);
	assert_true(t >= 0.01);
	ut_assert_time_below(t, 5);
	/* cancelled: later takes return at once, though the debt stands */
	t0 = stg__now();
	stg__bucket_take(ctx, &b, 100);
	ut_assert_time_below(stg__now() - t0, 0.5);
	assert_true(b.tokens < -2000);
	stg__bucket_destroy(&b);
	stg_ctx_free(ctx);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_holds), cmocka_unit_test(test_burst),
        cmocka_unit_test(test_unlimited),  cmocka_unit_test(test_threads),
        cmocka_unit_test(test_cancel),
};

UT_MAIN(tests)
