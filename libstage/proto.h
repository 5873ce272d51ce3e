/*
 * proto.h - the wire protocol of push, pull and serve (proto.c), shared by
 * the transfer module (xfer.c) and the fuzz target.
 *
 * A frame is a type byte, a payload length (u32, little-endian, at most
 * STG_WIRE_FRAME_MAX) and the payload.  The conversation:
 *
 *   client -> server  HELLO    magic, version, operation (push/pull), flags, PATH
 *   server -> client  WELCOME  magic, version (the client's, if this end
 *                       speaks it: the one both then use)
 *   client -> server  HOLDS    a pull's receiver, since version 4: the
 *                       lock it holds on its DEST (this boot's id, the
 *                       record's device and inode; all zero: none), so
 *                       a server reading that very tree does not wait
 *                       for it (see stg__xfer_read_lock)
 *   sender -> receiver  ENTRY...  the sender's tree, parents before children,
 *                       in compressed batches
 *                       ENTRIES_END  count, SHA-256 of the tree (see xfer.c)
 *   receiver -> sender  WANT [SIG...]...  what it lacks; a signature of its
 *                       basis when it has one (librsync); since version 2,
 *                       an offer to resume: the length and XXH3-128 of
 *                       the part of the file it kept from a cut transfer
 *                       WANTS_END
 *   sender -> receiver  FILE DATA... FILE_END ...  whole files or deltas,
 *                       each DATA chunk zstd-compressed; since version 2,
 *                       FILE says from which byte the data starts: the
 *                       offer's length if the sender's first bytes have
 *                       that hash, else 0
 *                       DONE
 *   receiver -> sender  PUBLISHED  (after verifying and switching)
 *
 * Either side may send ERROR (a result code and a message) instead of what
 * is expected, and then closes.  The phases alternate strictly, so neither
 * side ever writes while the other also writes: no deadlock on pipes.
 *
 * Since version 3 each end also sends NOOP (no payload) whenever it sent
 * nothing for a third of its I/O timeout, from a thread of its own, and
 * the reader skips them: so a peer that says nothing for a whole timeout
 * is gone or stalled, and the reader gives up, between frames as within
 * one.  With an older peer only a frame begun and not finished in time
 * counts (it may be hashing for hours before its next frame).
 */
#ifndef STG_PROTO_H
#define STG_PROTO_H

#include "wire.h"
#include "proto_live.h"

#include <zstd.h>

stg_err stg__wire_init(stg_wire *w, stg_ctx *ctx, int in, int out);
void stg__wire_free(stg_wire *w);
/* Read one frame; *payload points into w->buf until the next read.  A
 * truncated stream, an unknown type or an oversize length is an error
 * (STG_EREMOTE), as is ERROR from the peer (its code, its message). */
stg_err stg__wire_read(stg_wire *w, uint8_t *type, const uint8_t **payload, uint32_t *len);
/* Read a frame that must be of type want. */
stg_err stg__wire_expect(stg_wire *w, uint8_t want, const uint8_t **payload, uint32_t *len);
/* Send a frame whose payload is a then b (either may be empty). */
stg_err stg__wire_send(stg_wire *w, uint8_t type, const void *a, size_t alen, const void *b,
                       size_t blen);
/* Send ERROR with the context's message (best effort). */
void stg__wire_send_error(stg_wire *w, stg_err err);
/* Compress raw (at most STG_WIRE_CHUNK bytes) into one DATA frame. */
stg_err stg__wire_send_data(stg_wire *w, const void *raw, size_t len);
/* The same for a frame of another type (ENTRY batches). */
stg_err stg__wire_send_chunk(stg_wire *w, uint8_t type, const void *raw, size_t len);
/* Decode a DATA payload (or an ENTRY batch's); *raw points into w->zbuf, at most STG_WIRE_CHUNK. */
stg_err stg__wire_data(stg_wire *w, const uint8_t *p, uint32_t len, const uint8_t **raw,
                       size_t *rawlen);

/* A peer's text (n bytes of s), for a local message: printable ASCII and
 * valid UTF-8 printable characters as they are; control bytes (C0, DEL,
 * C1 raw or UTF-8 encoded), bidi overrides, bytes of invalid UTF-8 and
 * the backslash as \xNN; cut with "..." to fit out (size >= 8).  Returns
 * out.  So nothing a peer sends can drive the local terminal. */
const char *stg__peer_text(const char *s, size_t n, char *out, size_t size);
#define STG_SHOWN_MAX 400 /* a buffer for stg__peer_text in a message */

/* Strings kept in large blocks that never move, freed together: a
 * manifest's paths cost their bytes, not an allocation each. */
typedef struct stg_arena {
	struct arena_block *head;
	uint64_t bytes; /* the strings' bytes so far (NULs included) */
} stg_arena;
/* A NUL-terminated copy of n bytes of s; NULL when out of memory. */
char *stg__arena_strndup(stg_arena *a, const char *s, size_t n);
void stg__arena_free(stg_arena *a);

/* A manifest entry on the wire. */
typedef struct stg_wentry {
	uint8_t type; /* stg_type */
	uint32_t mode;
	uint64_t size;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint8_t xxh3[16];
	char *path; /* malloc'ed, or in an arena */
	char *link; /* symlink target, hardlink's target path; NULL otherwise */
} stg_wentry;

#define STG_WENTRY_FIXED 45 /* bytes before the path */

/* Encode e into out (STG_WENTRY_FIXED + 2 * (STG_PATH_MAX + 1) bytes). */
size_t stg__wentry_encode(const stg_wentry *e, uint8_t *out);
/* Decode and check an ENTRY payload: a known type, a clean relative path,
 * a link only where one belongs.  STG_ECORRUPT names what is wrong. */
stg_err stg__wentry_decode(stg_ctx *ctx, const uint8_t *p, uint32_t len, stg_wentry *e);
/* The same with path and link copied into names (not to be freed alone). */
stg_err stg__wentry_decode_in(stg_ctx *ctx, const uint8_t *p, uint32_t len, stg_wentry *e,
                              stg_arena *names);
void stg__wentry_free(stg_wentry *e);

/* An ENTRY frame is a chunk (as DATA) of records, each a u16 length and an
 * entry's encoding; fn is called for each. */
stg_err stg__entries_decode(stg_wire *w, const uint8_t *p, uint32_t len,
                            stg_err (*fn)(void *arg, const uint8_t *rec, uint32_t len), void *arg);

/* HELLO: parse the client's greeting; *path points into p (NUL added in
 * w->buf's copy by the reader); *version is the client's, one this end
 * speaks. */
stg_err stg__hello_decode(stg_ctx *ctx, const uint8_t *p, uint32_t len, uint8_t *op, uint8_t *flags,
                          int *level, uint32_t *version, const char **path);
/* WELCOME: encode w->version (12 bytes); decode the server's answer, which
 * must be a version this end speaks, at most the one it asked for (the
 * w->version it sent), and becomes w->version. */
size_t stg__welcome_encode(const stg_wire *w, uint8_t out[12]);
stg_err stg__welcome_decode(stg_wire *w, const uint8_t *p, uint32_t len);

/* WANT: entry idx, as kind (STG_WANT_*); from version 2, an offer to
 * resume: off bytes kept (0: none) whose XXH3-128 is prefix (zero without
 * an offer).  Encoded for w->version, at most STG_WANT_MAX bytes.  The
 * decoder checks the message alone; idx and off against the manifest are
 * the caller's to check. */
typedef struct stg_wwant {
	uint32_t idx;
	uint8_t kind;
	uint64_t off;
	uint8_t prefix[16];
} stg_wwant;
#define STG_WANT_MAX 29
size_t stg__want_encode(const stg_wire *w, const stg_wwant *x, uint8_t out[STG_WANT_MAX]);
stg_err stg__want_decode(stg_wire *w, const uint8_t *p, uint32_t len, stg_wwant *x);

/* FILE: entry idx, as kind; from version 2, off: its data starts at that
 * byte (0, or the receiver's offer, accepted).  At most STG_FILE_MAX bytes. */
typedef struct stg_wfile {
	uint32_t idx;
	uint8_t kind;
	uint64_t off;
} stg_wfile;
#define STG_FILE_MAX 13
size_t stg__file_encode(const stg_wire *w, const stg_wfile *x, uint8_t out[STG_FILE_MAX]);
stg_err stg__file_decode(stg_wire *w, const uint8_t *p, uint32_t len, stg_wfile *x);

/* For the fuzz target (xfer.c): decode every frame of data as a reader
 * would (librsync signatures and deltas included), then, if dir is not
 * NULL, let a receiver build dir/ds from it as serve would for a client's
 * stream (replies go to /dev/null) and remove what it made. */
stg_err stg__proto_replay(stg_ctx *ctx, const uint8_t *data, size_t len, const char *dir);

#endif
