/*
 * pace.h - token buckets (pace.c): a rate of bytes or operations per
 * second, shared by the threads of one process.
 */
#ifndef STG_PACE_H
#define STG_PACE_H

#include "ctx.h"

#include <pthread.h>

typedef struct stg_bucket {
	pthread_mutex_t mu;
	double rate;   /* units per second; 0: unlimited */
	double tokens; /* negative: a debt the next taker sleeps off */
	double last;
} stg_bucket;

void stg__bucket_init(stg_bucket *b, double rate);
void stg__bucket_destroy(stg_bucket *b);
/* Charge n units, sleeping as long as the rate demands (less if cancelled;
 * b NULL or of rate 0: no limit). */
void stg__bucket_take(stg_ctx *ctx, stg_bucket *b, double n);

#endif
