/*
 * proto_live.h - the wire's clock (proto_live.c): bounded reads and writes
 * and the keepalive, for proto.c; stg__wire_timeout, for its users.
 */
#ifndef STG_PROTO_LIVE_H
#define STG_PROTO_LIVE_H

#include "wire.h"

/* Bound every read from the peer and every write to it by timeout
 * seconds (<= 0: none): within a frame always; between frames once
 * idle is set (the peer is known to send NOOPs, or must answer at
 * once).  With keepalive (the agreed version is 3 or more), a thread
 * sends NOOP after a third of the timeout without a frame sent; it
 * stops in stg__wire_free.  Call again to change either. */
stg_err stg__wire_timeout(stg_wire *w, int timeout, bool idle, bool keepalive);

/* Before a read: wait until w->in is readable; begun: a frame is under
 * way (the bound always holds).  -1/errno: ETIMEDOUT, EINTR (cancelled). */
int stg__live_wait_in(stg_wire *w, bool begun);
/* Write all of buf, each piece after poll: -1/errno (ETIMEDOUT too). */
int stg__live_write(stg_wire *w, const void *buf, size_t n);
/* Around the writes of one frame. */
void stg__live_lock(stg_wire *w);
void stg__live_unlock(stg_wire *w);
/* The timeout in seconds (0: none); NOOPs sent so far. */
int stg__live_timeout(const stg_wire *w);
uint64_t stg__live_noops(const stg_wire *w);
/* Stop the keepalive and free the state (stg__wire_free). */
void stg__live_free(stg_wire *w);

#endif
