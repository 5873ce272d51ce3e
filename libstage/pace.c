/*
 * pace.c - token buckets: the rate limits for bytes (bwlimit) and metadata
 * operations (ops_limit) of one process.
 *
 * A taker goes into debt and sleeps it off, so large requests are charged
 * exactly and the rate holds over any interval longer than the burst (a
 * tenth of a second's worth).  The sleep ends early when the operation is
 * cancelled.
 */
#include "pace.h"
#include "ctx.h"

#include <pthread.h>

void stg__bucket_init(stg_bucket *b, double rate)
{
	pthread_mutex_init(&b->mu, NULL);
	b->rate = rate;
	b->tokens = 0;
	b->last = stg__now();
}

void stg__bucket_destroy(stg_bucket *b)
{
	pthread_mutex_destroy(&b->mu);
}

void stg__bucket_take(stg_ctx *ctx, stg_bucket *b, double n)
{
	if (!b || b->rate <= 0)
		return;
	pthread_mutex_lock(&b->mu);
	double t = stg__now(), burst = b->rate / 10 > 1 ? b->rate / 10 : 1;
	b->tokens += (t - b->last) * b->rate;
	if (b->tokens > burst)
		b->tokens = burst;
	b->last = t;
	b->tokens -= n;
	double wait = b->tokens < 0 ? -b->tokens / b->rate : 0;
	pthread_mutex_unlock(&b->mu);
	stg__nap(ctx, wait);
}
