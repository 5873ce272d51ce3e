/*
 * xfer_recv_state.h - the receiving end's state (receiver, its entries,
 * the record of what stager published), shared by its files: xfer_recv.c
 * (the manifest, what is there, what to ask for, the final check),
 * xfer_recv_file.c (files as they arrive), xfer_record.c (the record, the
 * lock, what may be replaced) and xfer_switch.c (the switch and set-up).
 * A header of its own, so that the calls between them run one way
 * (xfer_switch -> xfer_recv_file -> xfer_recv -> xfer_resume).
 */
#ifndef STG_XFER_RECV_STATE_H
#define STG_XFER_RECV_STATE_H

#include "proto.h"
#include "walk.h"
#include "xfer_resume.h"
#include "xfer_index.h"
#include "path.h"

#include <xxhash.h>
#include <sys/stat.h>

enum { BASIS_NONE, BASIS_PARTIAL, BASIS_DEST };

typedef struct rentry {
	stg_wentry e;
	uint8_t basis; /* where the old version of a wanted file lives */
	bool wanted;   /* asked of the sender */
	bool received;
	bool checked;      /* its bytes at its path matched its XXH3 in this run */
	bool resumable;    /* received as a partial copy kept if cut (xfer_resume.c) */
	uint64_t offer;    /* bytes of a partial copy offered to the sender */
	uint64_t from;     /* the byte its data started at (the offer, accepted) */
	XXH3_state_t *pre; /* the XXH3 of the offered bytes, to go on with */
	char *rname;       /* its partial copy's name (rnames holds the pointer) */
} rentry;

typedef struct receiver {
	stg_ctx *ctx;
	stg_wire *w;
	int parent, part, dest; /* dest: -1 on a first push */
	int rec;                /* the record, open and locked (-1: none yet) */
	bool by_record;         /* DEST may be replaced because the record names it */
	bool by_empty;          /* ... only because it is empty: checked again after the switch */
	bool basis_made;        /* rc->basis_name is ours to remove */
	char *name, *part_name;
	char *rec_name; /* ".stager-published.NAME": the record of what stager
	                   published, and the lock of transfers to DEST */
	char *old_name; /* ".stager-old.NAME": the old version, for a moment (no RENAME_EXCHANGE) */
	char *shown;    /* DEST as given, for messages */
	bool pack;      /* publish a pack (name ends in .tar.zst), not a tree */
	bool replace;   /* --replace: an existing DEST may be replaced whatever it is */
	bool checksum;  /* --checksum: every file of DEST read, none taken from the index */
	stg_xindex idx; /* the index of DEST as stager last left it (xfer_same.c) */
	stg_walk dwalk; /* DEST as walked to see whether it is the tree already */
	uint32_t *dat;  /* entry -> its item in dwalk (UINT32_MAX: none; NULL: no walk) */
	bool part_files;  /* the partial directory holds files of the manifest's */
	char *dir;        /* the parent's path (for the pack writer) */
	char *basis_name; /* --pack: the old pack unpacked, as a basis */
	rentry *r;
	size_t n, cap;
	stg_arena names; /* the manifest's paths and links */
	stg_strmap paths;
	bool map;
	uint8_t digest[32];
	uint32_t root_mode; /* of the sender's tree */
	int64_t root_mtime;
	uint8_t *buf, *out;
	unsigned tmp_seq;
	uint64_t done, total;
	uint64_t sig_bytes; /* signatures sent (estimated) */
	uint64_t hashed;    /* files already here read to compare them */
	const char *what;
	stg_strmap rnames; /* partial copies' names -> entry */
	bool rmap;
	unsigned offers;
	char boot[XFER_BOOT];
	char sh[STG_SHOWN_MAX]; /* a peer's path, escaped for a message */
} receiver;

/* A directory's identity for the record: its inode number, its ctime and,
 * where the filesystem keeps one, its birth time.  The ctime changes when
 * an entry is added to or removed from the directory, and a directory made
 * again under a reused inode number (NFS and Lustre keep no birth time) has
 * a new one; so a directory the user has changed since is not taken for
 * the one stager published. */
typedef struct dir_id {
	unsigned long long ino;
	long long ct_sec, bt_sec;
	unsigned ct_nsec, bt_nsec;
	bool bt;
} dir_id;
/* What ".stager-published.NAME" says (FORMAT.md): the directory (or, for
 * --pack, the file) stager published at DEST; and, while a switch without
 * RENAME_EXCHANGE runs, the old version it moves to ".stager-old.NAME"
 * (and whether that one was stager's) and the new one that takes DEST.
 * Those two by inode and birth time only: the renames change their ctime,
 * and so does removing the old one's entries. */
typedef struct record {
	bool pub, old, old_pub;
	dir_id p, o, n;
} record;

#endif
