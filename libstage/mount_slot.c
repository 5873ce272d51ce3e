/*
 * mount_slot.c - a mount's shared-filesystem reader slot: taken when a
 * fetch needs it, given back after a second without one, so that an idle
 * mount holds none.
 */
#include "mount_slot.h"
#include "ctx.h"
#include "limit.h"

#include <errno.h>
#include <time.h>

#define SLOT_IDLE 1.0 /* s without a fetch before the slot is given back */

#define MOUNT_SLOT_WAIT 5 /* s a read waits for a shared-FS slot, at most */

/* Hold the shared-FS slot for a fetch (taken if need be). */
int stg__mslot_take(stg_mount *m)
{
	pthread_mutex_lock(&m->slot_mu);
	if (!m->slot_held && m->cache) {
		stg_ctx *c = stg_ctx_new();
		if (!c) {
			pthread_mutex_unlock(&m->slot_mu);
			return ENOMEM;
		}
		c->log_fn = NULL;
		/* a read(2) through the mount waits for a slot a few seconds at
		 * most, not slot_wait_max: a program blocked in read for minutes
		 * cannot even be told why */
		stg_limits lim = m->cache->lim;
		if (!lim.slot_wait_max || lim.slot_wait_max > MOUNT_SLOT_WAIT)
			lim.slot_wait_max = MOUNT_SLOT_WAIT;
		stg_err err = stg__slot_acquire(c, &lim, &m->slot);
		stg_ctx_free(c);
		if (err) {
			pthread_mutex_unlock(&m->slot_mu);
			return EIO;
		}
		m->slot_held = true;
	}
	m->in_flight++;
	pthread_mutex_unlock(&m->slot_mu);
	return 0;
}

void stg__mslot_done(stg_mount *m)
{
	pthread_mutex_lock(&m->slot_mu);
	m->in_flight--;
	m->slot_used = stg__now();
	pthread_cond_signal(&m->slot_cv);
	pthread_mutex_unlock(&m->slot_mu);
}

/* Gives the slot back once no fetch has needed it for SLOT_IDLE seconds. */
void *stg__mslot_keeper(void *arg)
{
	stg_mount *m = arg;
	pthread_mutex_lock(&m->slot_mu);
	while (!m->stopping) {
		if (m->slot_held && !m->in_flight && stg__now() - m->slot_used >= SLOT_IDLE) {
			stg__slot_release(&m->slot);
			m->slot_held = false;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&m->slot_cv, &m->slot_mu, &ts);
	}
	if (m->slot_held)
		stg__slot_release(&m->slot);
	m->slot_held = false;
	pthread_mutex_unlock(&m->slot_mu);
	return NULL;
}
