/*
 * proto_live.c - the wire's clock: every read from the peer and every
 * write to it bounded by the I/O timeout (poll before each), and the
 * keepalive thread that sends NOOP while this end is busy, so that the
 * peer can tell busy from gone (proto.h says when which bound holds).
 *
 * Writes go out in pieces of at most PIPE_BUF bytes, each after poll says
 * the descriptor is writable: a pipe (the transport's stdin and stdout)
 * then takes the piece whole without blocking, so a peer that stops
 * reading holds a write no longer than the timeout.  A frame is written
 * under the wire's lock, and the keepalive writes its NOOP under it too,
 * so a NOOP never lands inside a frame; while a frame is being written no
 * NOOP is needed.  Reads poll in slices of a second, so a cancelled
 * context is answered within one.
 */
#include "proto_live.h"
#include "ctx.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct wire_live {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool running, stop;
	int timeout_ms; /* <= 0: none */
	bool idle;      /* the bound holds between frames too */
	double last;    /* the last frame sent (stg__now) */
	int out;
	uint64_t noops; /* sent, for tests */
};

static void *keepalive(void *arg)
{
	stg_wire *w = arg;
	struct wire_live *l = w->live;
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		double every = l->timeout_ms / 3000.0, due = l->last + every, now = stg__now();
		if (now >= due) {
			uint8_t hdr[STG_WIRE_HDR] = {STG_W_NOOP, 0, 0, 0, 0};
			struct pollfd pf = {.fd = l->out, .events = POLLOUT};
			/* a pipe with room takes the 5 bytes whole; none: the
			 * peer reads nothing, and a NOOP would not help */
			if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT) &&
			    write(l->out, hdr, sizeof hdr) == (ssize_t)sizeof hdr)
				l->noops++;
			l->last = now;
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		double wait = due - now;
		ts.tv_sec += (time_t)wait;
		ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&l->cv, &l->mu, &ts);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void stop_keepalive(struct wire_live *l)
{
	if (!l->running)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->th, NULL);
	l->running = l->stop = false;
}

stg_err stg__wire_timeout(stg_wire *w, int timeout, bool idle, bool keep)
{
	if (w->mem || w->out < 0)
		return STG_OK;
	struct wire_live *l = w->live;
	if (!l) {
		if (!(l = calloc(1, sizeof *l)))
			return stg__fail(w->ctx, STG_ENOMEM, "out of memory");
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_mutex_init(&l->mu, NULL);
		pthread_cond_init(&l->cv, &ca);
		pthread_condattr_destroy(&ca);
		l->out = w->out;
		l->last = stg__now();
		w->live = l;
	}
	stop_keepalive(l);
	l->timeout_ms = timeout > 0 ? (timeout > INT_MAX / 1000 ? INT_MAX : timeout * 1000) : 0;
	l->idle = idle && timeout > 0;
	if (keep && timeout > 0) {
		l->last = stg__now();
		if (pthread_create(&l->th, NULL, keepalive, w))
			return stg__fail(w->ctx, STG_ENOMEM, "cannot start the keepalive thread");
		l->running = true;
	}
	return STG_OK;
}

void stg__live_free(stg_wire *w)
{
	struct wire_live *l = w->live;
	if (!l)
		return;
	stop_keepalive(l);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
	w->live = NULL;
}

int stg__live_timeout(const stg_wire *w)
{
	return w->live ? w->live->timeout_ms / 1000 : 0;
}

uint64_t stg__live_noops(const stg_wire *w)
{
	return w->live ? w->live->noops : 0;
}

/* Wait until fd has events, or the bound (ms, <= 0: none) passes (-1,
 * ETIMEDOUT), or ctx is cancelled (-1, EINTR). */
static int wait_fd(stg_ctx *ctx, int fd, short events, int bound)
{
	double end = bound > 0 ? stg__now() + bound / 1000.0 : 0;
	for (;;) {
		if (stg__cancelled(ctx)) {
			errno = EINTR;
			return -1;
		}
		int slice = 1000;
		if (bound > 0) {
			double left = end - stg__now();
			if (left <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			if (left * 1000 < slice)
				slice = (int)(left * 1000) + 1;
		}
		struct pollfd pf = {.fd = fd, .events = events};
		int n = poll(&pf, 1, slice);
		if (n > 0)
			return 0; /* readable, writable, or an error read/write will say */
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

int stg__live_wait_in(stg_wire *w, bool begun)
{
	struct wire_live *l = w->live;
	if (!l || l->timeout_ms <= 0)
		return 0;
	return wait_fd(w->ctx, w->in, POLLIN, begun || l->idle ? l->timeout_ms : 0);
}

void stg__live_lock(stg_wire *w)
{
	if (w->live)
		pthread_mutex_lock(&w->live->mu);
}

void stg__live_unlock(stg_wire *w)
{
	if (w->live) {
		w->live->last = stg__now();
		pthread_mutex_unlock(&w->live->mu);
	}
}

int stg__live_write(stg_wire *w, const void *buf, size_t n)
{
	struct wire_live *l = w->live;
	if (!l || l->timeout_ms <= 0)
		return stg__write_full(w->out, buf, n);
	const uint8_t *p = buf;
	while (n) {
		if (wait_fd(w->ctx, w->out, POLLOUT, l->timeout_ms))
			return -1;
		ssize_t k = write(w->out, p, n < PIPE_BUF ? n : PIPE_BUF);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}
