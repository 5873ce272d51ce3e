/*
 * wire.h - the wire's words and one end of a connection (stg_wire): what
 * proto.c (frames and messages) and proto_live.c (the wire's clock) both
 * take.  proto.h tells the conversation.
 */
#ifndef STG_WIRE_H
#define STG_WIRE_H

#include "ctx.h"

#include <zstd.h>

#define STG_WIRE_MAGIC "STGWIRE1"
/* 2: WANT's resume offer and FILE's offset.  A server speaks every version
 * from STG_WIRE_VERSION_MIN up and answers in the client's, or in its own
 * when the client's is newer (a client speaks every older one too). */
#define STG_WIRE_VERSION     4 /* 3: NOOP, the keepalive; 4: HOLDS */
#define STG_WIRE_VERSION_MIN 1
#define STG_WIRE_FRAME_MAX   (4u << 20) /* largest payload a reader accepts */
#define STG_WIRE_CHUNK       (1u << 20) /* largest raw DATA chunk */
#define STG_WIRE_HDR         5
/* What a receiver accepts of a manifest: entries, and bytes of paths and
 * link targets (kept in one arena, about 160 bytes per entry besides):
 * at most about 800 MiB held for the largest.  Past either, the transfer
 * is refused before anything is written. */
#define STG_WIRE_ENTRIES_MAX (4u << 20)
#define STG_WIRE_NAMES_MAX   ((uint64_t)128 << 20)
/* The I/O timeout when the caller gives none (seconds). */
#define STG_WIRE_TIMEOUT 120

enum {
	STG_W_HELLO = 1,
	STG_W_WELCOME = 2,
	STG_W_ERROR = 3,
	STG_W_ENTRY = 4,
	STG_W_ENTRIES_END = 5,
	STG_W_WANT = 6,
	STG_W_SIG = 7,
	STG_W_WANTS_END = 8,
	STG_W_FILE = 9,
	STG_W_DATA = 10,
	STG_W_FILE_END = 11,
	STG_W_DONE = 12,
	STG_W_PUBLISHED = 13,
	STG_W_NOOP = 14,
	STG_W_HOLDS = 15,
	STG_W_TYPE_MAX = 15,
};

enum { STG_OP_PUSH = 1, STG_OP_PULL = 2 };
enum { STG_WANT_WHOLE = 0, STG_WANT_DELTA = 1 };
/* HELLO flags; with STG_FLAG_LEVEL a byte after them gives the zstd level
 * that the far end compresses what it sends with (a pull's --level);
 * STG_FLAG_CHECKSUM: the far end reads every file, whatever its index says
 * (--checksum; a server older than it refuses the flag) */
enum { STG_FLAG_PACK = 1, STG_FLAG_REPLACE = 2, STG_FLAG_LEVEL = 4, STG_FLAG_CHECKSUM = 8 };

/* One end of a connection.  Reads come from fd in, or from a memory buffer
 * (mem != NULL: the fuzz target and tests). */
typedef struct stg_wire {
	stg_ctx *ctx;
	struct wire_live *live; /* the timeout's and the keepalive's state
	                           (proto.c; NULL: none) */
	int in, out;
	const uint8_t *mem;
	size_t mem_len, mem_pos;
	uint8_t *buf;    /* the last frame's payload (grown up to STG_WIRE_FRAME_MAX + 1) */
	size_t buf_cap;  /* buf's size */
	uint8_t *zbuf;   /* compression and decompression (up to ZSTD_compressBound) */
	size_t zbuf_cap; /* zbuf's size */
	ZSTD_CCtx *cz;
	ZSTD_DCtx *dz;
	int level;
	unsigned raw_left; /* DATA chunks still sent as they are: the last
	                      one tried did not pay for its compression */
	uint64_t bytes_in, bytes_out;
	uint32_t version;      /* agreed in HELLO and WELCOME (initially this end's) */
	bool broken;           /* the peer is gone or failed: do not send ERROR */
	bool stalled;          /* ... it sent or took nothing for the timeout */
	struct stg_bucket *bw; /* bytes written and read are charged here
	                          (NULL: none) */
} stg_wire;

#endif
