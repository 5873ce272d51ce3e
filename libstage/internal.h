/*
 * internal.h - what libstage's modules share and the public header hides.
 */
#ifndef STG_INTERNAL_H
#define STG_INTERNAL_H

#include "libstage.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <xxhash.h>

#define STG_ERRMSG_MAX 1024

struct stg_ctx {
	char errmsg[STG_ERRMSG_MAX];
	stg_log_fn log_fn;
	void *log_arg;
	stg_progress_fn progress_fn;
	void *progress_arg;
	int threads;
	volatile sig_atomic_t cancelled;
};

/* Record the error detail on ctx and return err.  printf-style. */
stg_err stg__fail(stg_ctx *ctx, stg_err err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The same, appending ": strerror(errnum)". */
stg_err stg__fail_errno(stg_ctx *ctx, stg_err err, int errnum, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Map an errno from opening or reading a source to a result code. */
stg_err stg__err_from_errno(int errnum, stg_err otherwise);

void stg__log(stg_ctx *ctx, stg_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
int stg__threads(const stg_ctx *ctx);
/* Seconds on the monotonic clock. */
double stg__now(void);
/* Sleep s seconds in short steps; false (early) if ctx was cancelled. */
bool stg__nap(stg_ctx *ctx, double s);
static inline bool stg__cancelled(const stg_ctx *ctx)
{
	return ctx->cancelled != 0;
}

/* Little-endian fixed-width access. */
static inline uint32_t stg__get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t stg__get64(const uint8_t *p)
{
	return (uint64_t)stg__get32(p) | (uint64_t)stg__get32(p + 4) << 32;
}
static inline void stg__put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}
static inline void stg__put64(uint8_t *p, uint64_t v)
{
	stg__put32(p, (uint32_t)v);
	stg__put32(p + 4, (uint32_t)(v >> 32));
}

/* a + b, or UINT64_MAX past it: sizes that a peer or an archive declares
 * are added so, never wrapped (two files of 2^63 bytes are not 0 bytes). */
static inline uint64_t stg__sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Full-length I/O that retries on EINTR and short counts.  0 or -1/errno;
 * pread_full reports a short file as -1 with errno = 0. */
int stg__write_full(int fd, const void *buf, size_t len);
/* Room for n elements of size in *v (capacity *cap, at most max, say a
 * declared count): grown by doubling as elements really appear, so that a
 * hostile count costs nothing until its bytes do.  -1 when n is over max
 * or memory is short (*v is then unchanged).  stg__room zeroes the new
 * room; stg__grow leaves it untouched, so that the pages a large array
 * has not used yet cost nothing. */
int stg__grow(void **v, size_t *cap, size_t n, size_t size, size_t max);
int stg__room(void **v, size_t *cap, size_t n, size_t size, size_t max);
int stg__pread_full(int fd, void *buf, size_t len, uint64_t off);
int stg__pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
/* b[0..n) as 2n lowercase hex digits and a NUL at out; returns 2n. */
size_t stg__hex(const uint8_t *b, size_t n, char *out);
/* A buffer that read(2) fills: n bytes (at least 1) on a page boundary,
 * freed with free().  The kernel copies into a page-aligned buffer about 3x
 * faster than into malloc's (16 bytes past a page: 0.65 against 0.21 s for
 * 1 GiB from tmpfs on these AMD EPYC machines, where rep movsb slows down
 * on a misaligned destination), and O_DIRECT wants one. */
void *stg__io_alloc(size_t n);

/* Name a temporary sibling of path: "<dir>/.stager-<tag>.<base>.<pid>.<n>"
 * (malloc'ed).  NULL when out of memory. */
char *stg__tmp_name(const char *path, const char *tag);
/* Create a new temporary sibling file of path (mode 0666 less the umask),
 * O_EXCL; returns the fd and its name in *name (malloc'ed), or -1/errno. */
int stg__create_tmp(const char *path, const char *tag, char **name);

/* ---- the pack format (trailer.c) -------------------------------------- */

#define STG_FORMAT_VERSION                                                                         \
	3                      /* 2: the packed directory's mode in the body;                      \
	                          3: each frame's XXH3-128 in the frame table */
#define STG_FORMAT_OLDEST    1 /* the oldest version read */
#define STG_ROOT_MODE_SET    0x10000u
#define STG_SKIP_MAGIC       0x184D2A57u /* zstd skippable frame, variant 7 */
#define STG_FOOTER_SIZE      48
#define STG_FOOTER_MAGIC     "STGPACK\x01"
#define STG_BODY_MAGIC       "STGT"
#define STG_BODY_HEADER_SIZE 96
#define STG_FRAME_REC_SIZE   48 /* 32 before format 3: no XXH3-128 */
#define STG_FRAME_REC_SIZE_2 32
#define STG_ENTRY_REC_SIZE   80
#define STG_DELTA_REC_SIZE   48
#define STG_FRAME_RAW_MAX    (64u << 20)         /* largest frame a reader accepts */
#define STG_BODY_RAW_MAX     ((uint64_t)2 << 30) /* largest decoded trailer */
#define STG_PATH_MAX         4095
#define STG_TAIL_READ        (1u << 20) /* first read at the end of a pack */

typedef struct stg_frame {
	uint64_t comp_off, comp_size;
	uint64_t raw_off, raw_size;
	uint8_t xxh3[16]; /* of the compressed bytes, canonical (format 3; zero before) */
} stg_frame;

typedef struct stg_rec {
	uint64_t tar_off, data_off, size;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t mode;
	uint64_t path_off; /* into names; link follows path, NUL-separated in memory */
	uint32_t path_len, link_len;
	uint8_t type;
	uint8_t xxh3[16];
} stg_rec;

typedef struct stg_delta_rec {
	uint8_t base[STG_DIGEST_LEN];
	uint64_t name_off;
	uint32_t name_len;
} stg_delta_rec;

/* Everything a trailer says, decoded and checked. */
typedef struct stg_trailer {
	uint64_t data_size, tar_size, content_size;
	uint8_t digest[STG_DIGEST_LEN];
	/* the packed directory's permission bits | STG_ROOT_MODE_SET; 0 when
	 * the pack does not say (version 1) */
	uint32_t root_mode;
	uint32_t version; /* the format version it was read as, or is written as */
	size_t n_frames, n_entries, n_deltas;
	stg_frame *frames;
	stg_rec *recs;
	stg_delta_rec *deltas;
	/* names, with a NUL after every path, link and delta name so that they
	 * can be handed out as C strings */
	char *names;
	size_t names_len;
} stg_trailer;

void stg__trailer_free(stg_trailer *t);

/* Encode t into a complete trailer frame (skippable header, compressed body,
 * footer).  *out is malloc'ed. */
stg_err stg__trailer_encode(stg_ctx *ctx, const stg_trailer *t, int level, uint8_t **out,
                            size_t *out_len);

/*
 * Decode a trailer.  tail holds the last tail_len bytes of a file of
 * file_size bytes.  If the trailer begins before tail, returns STG_OK with
 * *need set to the number of bytes from the end that must be supplied;
 * otherwise *need is 0 and t is filled.  Every count and offset is checked
 * against the file size before anything is allocated.
 */
stg_err stg__trailer_decode(stg_ctx *ctx, const uint8_t *tail, size_t tail_len, uint64_t file_size,
                            stg_trailer *t, size_t *need);

/* Frame that holds tar offset off (t->n_frames if none). */
size_t stg__frame_of(const stg_trailer *t, uint64_t off);

/* ---- an opened pack (pack_read.c) ------------------------------------- */

struct stg_bucket;
struct stg_pack {
	int fd;             /* -1 for a memory pack */
	const uint8_t *mem; /* memory pack */
	uint64_t size;
	stg_trailer t;
	struct stg_bucket *bw; /* reads charged to this rate limit (NULL: none) */
	stg_ctx *bw_ctx;
	dev_t dev;         /* the file's device (st_dev) */
	uint8_t *tail;     /* the pack's last tail_len bytes, from tail_off, when the */
	uint64_t tail_off; /* trailer fit in them (NULL otherwise) */
	size_t tail_len;
};

/* Read len bytes at off of the pack's data (what the trailer's read at
 * open brought in, from memory). */
int stg__pack_pread(const stg_pack *p, void *buf, size_t len, uint64_t off);
/* How many of those bytes a read takes from the source, not from what the
 * trailer's read kept. */
uint64_t stg__pack_unread(const stg_pack *p, uint64_t off, uint64_t len);
const char *stg__rec_path(const stg_pack *p, const stg_rec *r);
const char *stg__rec_link(const stg_pack *p, const stg_rec *r);

/* ---- extraction (extract.c) and the filesystem (fsutil.c) ------------ */

/* Extract the selected part of a pack into the directory rootfd (which the
 * caller made and owns).  Nothing is renamed or removed on failure. */
/* stg_verify without the rule on symlinks that leave the destination: a
 * pack of the user's own results (collect --pack) keeps them as they are. */
stg_err stg__verify_content(stg_ctx *ctx, stg_pack *pack);
stg_err stg__extract_at(stg_ctx *ctx, stg_pack *pack, int rootfd, const stg_unpack_opts *opts,
                        stg_unpack_stats *stats);
/* For a builder that writes a pack's files itself (delta_apply.c), over the
 * entries flagged in sel: directories and empty files first (prepare),
 * hardlinks, symlinks and directory metadata once every file is in place
 * (finish).  The tree must have passed stg__select. */
stg_err stg__tree_prepare(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                          bool read_only);
stg_err stg__tree_finish(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                         bool read_only);
/* The permission bits an extracted entry gets (no setuid/setgid; no write
 * bits if read_only), and both with the mtime set on an open file. */
mode_t stg__final_mode(const stg_rec *r, bool read_only);
int stg__file_meta(int fd, const stg_rec *r, bool read_only);
/* Which entries extraction with opts takes (after checking the tree is
 * safe); *sel is malloc'ed, one flag per entry. */
stg_err stg__select(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, bool **sel);
/* The manifest of a cache entry (manifest.c): one line per regular file,
 * "<xxh3 hex> <size> <path, escaped>".  Written into dirfd as "manifest". */
int stg__manifest_write(int dirfd, const stg_pack *p, const bool *sel);

/* Check the files under datafd against a manifest: 0 match, 1 mismatch
 * (named on ctx), -1 unreadable manifest. */
int stg__manifest_check(stg_ctx *ctx, FILE *manifest, int datafd);
/* The cheap check of a warm entry: every file the manifest names is there
 * with its size, and no more files (local stats only); as above. */
int stg__manifest_quick(stg_ctx *ctx, FILE *manifest, int datafd);
void stg__manifest_line(FILE *f, const uint8_t xxh3[16], uint64_t size, const char *path);
/* fclose of a manifest written with stg__manifest_line: -1 (errno set) if
 * any write failed, also one whose error stdio kept to itself. */
int stg__manifest_close(FILE *f);
/* A path with '\\' and newline escaped, and back (false if malformed). */
void stg__put_escaped(FILE *f, const char *path);
bool stg__unescape(char *s);
/* A tree visited without recursion (fsutil.c): entry is called for each
 * entry under dirfd's directory name (dirfd: the directory that holds it,
 * st: its lstat) and answers 1 to go into a directory, 0 not to, -1 to
 * stop (errno set); enter (if set) gets a directory's descriptor before it
 * is listed, leave (if set) is called once what a directory holds was
 * visited (dirfd: its parent); cancel (if set) stops the visit (EINTR).
 * Never through a link; whatever the depth, a frame and a listing a level
 * on the heap and a bounded number of descriptors.  0 or -1/errno. */
struct stat;
typedef struct stg_tvisit {
	int (*entry)(void *arg, int dirfd, const char *name, const struct stat *st);
	int (*enter)(void *arg, int fd, const struct stat *st);
	int (*leave)(void *arg, int dirfd, const char *name);
	bool (*cancel)(void *arg);
	void *arg;
	bool sorted; /* each directory's names in bytewise order */
} stg_tvisit;
int stg__tree_visit(int dirfd, const char *name, const stg_tvisit *v);
/* Remove a tree without following symlinks; 0 or -1/errno. */
int stg__rmtree(const char *path);
int stg__rmtree_at(int dirfd, const char *name);
bool stg__dir_is_empty(int dirfd);
/* The names in directory rel under dirfd ("" or NULL: dirfd itself),
 * without "." and "..", sorted bytewise if asked; rel is opened with
 * O_NOFOLLOW.  0, or -1/errno.  Free with stg__names_free. */
int stg__dir_names(int dirfd, const char *rel, bool sorted, char ***names, size_t *n);
/* Confined access (fsutil.c). */
/* open beneath dirfd: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so
 * no component of path may be a symlink or lead out; O_NOFOLLOW and
 * O_CLOEXEC are added.  -1/errno. */
int stg__open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* The directory that holds path, opened beneath root; *base is path's last
 * component.  -1/errno. */
int stg__parent_of(int root, const char *path, const char **base);
void stg__names_free(char **names, size_t n);
/* Move the file tmp to path atomically, replacing what is there.  An
 * existing file is swapped out with RENAME_EXCHANGE and unlinked, which
 * spares the synchronous flush ext4 forces on rename-over (auto_da_alloc)
 * unless durable is set.  0 or -1/errno. */
int stg__replace(const char *tmp, const char *path, bool durable);
/* Copy size bytes of the file sfd into dfd: a reflink where the
 * filesystem shares blocks, else copy_file_range, else read and write.
 * 0 or -1/errno. */
int stg__copy_file(int sfd, int dfd, uint64_t size);
/* len bytes of sfd at soff into dfd at doff, in the kernel (blocks shared
 * where the filesystem can).  0 done; 1 when the kernel cannot copy
 * between these two (nothing was copied: copy another way); -1/errno, or
 * -1 with errno 0 when sfd ends first. */
int stg__copy_range(int sfd, uint64_t soff, int dfd, uint64_t doff, uint64_t len);
/* Whether the filesystem of device dev (st_dev) is a network one, and its
 * type into type[len], from /proc/self/mountinfo: no call reaches the
 * filesystem (statfs is a round trip on NFS). */
bool stg__dev_is_network(dev_t dev, char *type, size_t len);
/* "NAME (uid N)" of uid into name[len] ("uid N" if it has no name). */
void stg__user_text(uid_t uid, char *name, size_t len);
/* May the user write into a directory at path (there, or made there)?
 * Only into one of the user's, reached through no link of another
 * user's: STG_EEXIST naming the owner, with what to do, if path is
 * another user's directory or link, or would be made in another user's
 * directory (root's are trusted as parents: a sticky /scratch, /home; a
 * group's directory that others cannot write is trusted by its members: a
 * project's shared directory).  Checked on every run; the caller checks
 * the descriptor it then opens too.  file: path is a file or link that is
 * made or replaced there (a pack, a staged link): one of another user's
 * there is refused, and the directory it goes in must be trusted as a
 * parent. */
stg_err stg__dest_ours(stg_ctx *ctx, const char *path, bool file);
/* Bytes a tree takes on disk (blocks), not following links; name
 * relative to dirfd. */
uint64_t stg__tree_bytes(int dirfd, const char *name);
/* Whether fd's filesystem can share blocks between files (a reflink). */
bool stg__fs_shares_blocks(int fd);
/* mkdir -p of the directory that holds path (mode 0777 less the umask). */
int stg__mkdirs_parent(const char *path);
/* mkdir -p of path itself, each directory made with mode; 0 (also if it
 * exists), or -1/errno. */
int stg__mkdirs(const char *path, mode_t mode);
/* path made absolute against the working directory, without asking any
 * filesystem (no realpath: on NFS each component would be a round trip);
 * -1 if it does not fit. */
int stg__absolute(const char *path, char *out, size_t len);

/* ---- configuration (config.c) ------------------------------------------ */

/* A size or percentage setting in bytes; whole is what 100% means. */
uint64_t stg__config_bytes(const stg_config *c, const char *key, uint64_t whole);
long stg__config_count(const stg_config *c, const char *key);
/* A size ("10G") or percentage ("5%" of whole) in bytes. */
uint64_t stg__bytes_setting(const char *v, uint64_t whole);

/* ---- paths (path.c) --------------------------------------------------- */

/* A clean relative path: not empty, not absolute, no "", "." or ".."
 * components, no NUL, at most STG_PATH_MAX bytes. */
bool stg__path_ok(const char *path, size_t len);
/* Does a symlink at link_path with this target stay inside the tree, given
 * is_symlink(prefix) to tell which paths of the tree are symlinks?  Targets
 * that are absolute, climb above the root, or pass through another symlink
 * are refused. */
bool stg__symlink_ok(const char *link_path, const char *target,
                     bool (*is_symlink)(void *arg, const char *path, size_t len), void *arg);
/* Does path match a pattern: fnmatch on the whole path, or the pattern names
 * one of its parent directories. */
bool stg__path_match(const char *pattern, const char *path);

/* ---- a hash set of strings (path.c) ----------------------------------- */

/* 16 bytes a slot: a map of a million paths is 32 MiB of slots */
typedef struct stg_strslot {
	const char *key; /* NULL: empty */
	uint32_t val;
	uint32_t lentag; /* the key's length (low STG_STRMAP_LEN_BITS bits), then
	                  * the top bits of its hash */
} stg_strslot;
#define STG_STRMAP_LEN_BITS 20 /* keys are shorter than 1 MiB */

typedef struct stg_strmap {
	size_t cap, count;
	stg_strslot *slots;
} stg_strmap;

int stg__strmap_init(stg_strmap *m, size_t expected);
void stg__strmap_free(stg_strmap *m);
/* Insert (key, val); key is not copied.  Returns 1 inserted, 0 present,
 * -1 out of memory (or a key of 1 MiB or more). */
int stg__strmap_put(stg_strmap *m, const char *key, size_t len, uint32_t val);
/* Insert, or replace the value of an existing key; 0, or -1 OOM. */
int stg__strmap_set(stg_strmap *m, const char *key, size_t len, uint32_t val);
/* Value of key, or UINT32_MAX. */
uint32_t stg__strmap_get(const stg_strmap *m, const char *key, size_t len);

/* ---- a cache entry's manifest read back (manifest.c) ------------------ */

/* A manifest read back: its files, and a map from path to index. */
typedef struct stg_mfile {
	char *path;
	uint64_t size;
	uint8_t xxh3[16];
} stg_mfile;
typedef struct stg_manifest {
	stg_mfile *files;
	size_t n;
	stg_strmap map;
} stg_manifest;
/* 0, or -1/errno (EINVAL: a malformed line). */
int stg__manifest_load(FILE *f, stg_manifest *m);
void stg__manifest_free(stg_manifest *m);

/* slurm.c: run argv (from PATH), its stdout into out (NUL-terminated, cut
 * to len - 1), its exit status into *status; -1 if it could not run or was
 * killed. */
int stg__capture(char *const argv[], char *out, size_t len, int *status);
/* Ask squeue about a job: 1 alive, 0 gone, -1 unknown (no Slurm to ask). */
int stg__slurm_job_alive(const char *id);
/* Whether path (existing) is on a mount of this Slurm job's own
 * ($SLURM_JOB_ID): job_container/tmpfs's private /tmp and /dev/shm, whose
 * root is BasePath/[NODE/]ID/.ID, or a SPANK plugin's per-job /tmp.  Slurm
 * removes those when the job ends, before the epilog runs.  The mount
 * point into mnt[len] (may be NULL).  The _in form reads mountinfo lines
 * from a stream, for job. */
bool stg__job_private_mount(const char *path, char *mnt, size_t len);
bool stg__job_private_mount_in(FILE *mountinfo, const char *path, const char *job, char *mnt,
                               size_t len);

/* collect_mark.c: the host name in temporaries' names; the marker a
 * collect keeps in DEST (its name into name; -1 if it cannot), its
 * removal; and the removal of temporaries whose writer is gone (the whole
 * tree under dest, or only dest itself if flat). */
const char *stg__collect_host(void);
int stg__mark_begin(int destfd, char *name, size_t len);
void stg__mark_end(int destfd, const char *name);
void stg__mark_sweep(stg_ctx *ctx, int destfd, const char *dest, bool flat);

#endif
