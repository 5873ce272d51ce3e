/*
 * libstage.h - libstage, the library behind the stager tool.
 *
 * libstage moves training data between a cluster's shared filesystem and a
 * compute node's local disk.  Its unit of data is the *pack*: a pax tar
 * stream compressed as independent zstd frames, followed by a trailer in a
 * zstd skippable frame (manifest with an XXH3-128 per file, frame table, and
 * the SHA-256 of the pack, its digest).  Plain `tar --zstd -xf` reads a pack;
 * libstage reads it in parallel, extracts subsets, and verifies every byte.
 * The format is specified in libstage/FORMAT.md; docs/ARCHITECTURE.md is
 * the map of the library's modules and where a change belongs.
 *
 * Conventions
 *  - Every call that can fail returns an stg_err.  The detail (what failed,
 *    on which path, the underlying library's message) is kept on the context
 *    and read with stg_errmsg().  The library never prints and never exits;
 *    warnings and progress reach the caller through callbacks.
 *  - Handles are opaque.  Each _new or _open call has a _free or _close, and
 *    passing NULL to those is a no-op.
 *  - Strings given to the library are copied; pointers the library returns
 *    stay valid as long as the handle they came from, unless said otherwise.
 *  - One stg_ctx must not be used by two threads at once; separate contexts
 *    are independent.  Operations may use threads internally.
 */
#ifndef LIBSTAGE_H
#define LIBSTAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(STG_BUILDING) && defined(__GNUC__)
#define STG_API __attribute__((visibility("default")))
#else
#define STG_API
#endif

#define STG_VERSION_MAJOR  0
#define STG_VERSION_MINOR  1
#define STG_VERSION_PATCH  0
#define STG_VERSION_STRING "0.1.0"

/* Version of the library actually linked, "MAJOR.MINOR.PATCH". */
STG_API const char *stg_version(void);

/*
 * Result codes.  Append only: values are never renumbered or reused.
 * stager maps them to its exit statuses (see stg_exit_status()).
 */
typedef enum stg_err {
	STG_OK = 0,
	STG_EUSAGE = 1,   /* invalid argument or option */
	STG_ENOENT = 2,   /* a source is missing or unreadable */
	STG_ENOSPC = 3,   /* not enough space or inodes */
	STG_ECORRUPT = 4, /* integrity failure: checksum, damaged or hostile input */
	STG_EINTR = 5,    /* cancelled (stg_cancel) */
	STG_EREMOTE = 6,  /* remote or transport failure */
	STG_EIO = 7,      /* other I/O error */
	STG_ENOMEM = 8,   /* out of memory */
	STG_EEXIST = 9,   /* the destination exists and would be overwritten */
	STG_ENOTSUP = 10, /* not supported (yet) */
} stg_err;

/* A short, static description of a result code. */
STG_API const char *stg_strerror(stg_err err);

/* The stager exit status for a result code (0..7; `stager --help` and the
 * README list them). */
STG_API int stg_exit_status(stg_err err);

/* ---- context ---------------------------------------------------------- */

typedef struct stg_ctx stg_ctx;

/* Severity of a log message. */
typedef enum stg_log_level {
	STG_LOG_DEBUG = 0,
	STG_LOG_INFO = 1,
	STG_LOG_WARN = 2,
	STG_LOG_ERROR = 3, /* a failure that an operation goes on after (one
	                      collect of many), or one it has told already
	                      (stg_run, stg_collect_every): show it, also when
	                      quiet */
} stg_log_level;

/* Log callback: msg is valid only during the call.  Called from the thread
 * that called into the library. */
typedef void (*stg_log_fn)(void *arg, stg_log_level level, const char *msg);

/* Progress callback: what is being done ("pack", "unpack", "verify"), the
 * units done and the total (bytes of tar stream; total 0 if unknown).  May be
 * called from any of the library's threads, never concurrently. */
typedef void (*stg_progress_fn)(void *arg, const char *what, uint64_t done, uint64_t total);

/* Returns NULL only when out of memory. */
STG_API stg_ctx *stg_ctx_new(void);
STG_API void stg_ctx_free(stg_ctx *ctx);

STG_API void stg_set_log(stg_ctx *ctx, stg_log_fn fn, void *arg);
STG_API void stg_set_progress(stg_ctx *ctx, stg_progress_fn fn, void *arg);

/* Worker threads for compression, decompression and extraction; 0 (the
 * default) means one per online CPU. */
STG_API void stg_set_threads(stg_ctx *ctx, int threads);

/* Ask a running operation on ctx to stop as soon as it safely can; it then
 * returns STG_EINTR having published nothing partial.  Async-signal-safe:
 * may be called from a signal handler. */
STG_API void stg_cancel(stg_ctx *ctx);

/* Detail of the last error on ctx ("" if none).  Valid until the next call
 * on ctx. */
STG_API const char *stg_errmsg(const stg_ctx *ctx);

/* The errno behind the last error on ctx (EACCES for a source the user may
 * not read, ENOENT for a missing one ...), or 0 when no system call's
 * failure caused it. */
STG_API int stg_errno(const stg_ctx *ctx);

/* ---- packs: reading --------------------------------------------------- */

typedef struct stg_pack stg_pack;

#define STG_DIGEST_LEN    32 /* SHA-256 */
#define STG_DIGEST_HEXLEN 64

typedef enum stg_type {
	STG_FILE = 1,
	STG_DIR = 2,
	STG_SYMLINK = 3,
	STG_HARDLINK = 4,
} stg_type;

/* One manifest entry.  link points into the pack handle; so does path for
 * an entry at the top of the pack, while the path of one in a directory
 * is built into a buffer of the calling thread (a pack holds each
 * directory once): valid until this thread's next stg_pack_entry or
 * stg_reader_file call, copy it to keep it. */
typedef struct stg_entry {
	const char *path; /* relative, '/'-separated, NUL-terminated */
	const char *link; /* symlink target or hardlink's target path; NULL otherwise */
	stg_type type;
	uint32_t mode; /* permission bits (07777) */
	uint64_t size; /* content bytes (files only) */
	int64_t mtime; /* seconds since the epoch */
	uint32_t mtime_nsec;
	uint64_t tar_offset;  /* where its header starts in the tar stream */
	uint64_t data_offset; /* where its content starts in the tar stream */
	uint8_t xxh3[16];     /* XXH3-128 of the content, canonical (big-endian) */
} stg_entry;

/* Totals of a pack. */
typedef struct stg_pack_info {
	uint8_t digest[STG_DIGEST_LEN]; /* SHA-256 of every byte before the trailer */
	uint64_t pack_size;             /* bytes of the pack file */
	uint64_t data_size;             /* bytes of compressed frames */
	uint64_t tar_size;              /* bytes of the uncompressed tar stream */
	uint64_t content_size;          /* bytes of regular file content */
	uint64_t entries;               /* manifest entries */
	uint64_t files, dirs, symlinks, hardlinks;
	uint64_t frames;
	uint64_t deltas; /* delta records */
	uint32_t format_version;
} stg_pack_info;

/*
 * Open a pack and read its trailer.  Reads only the end of the file (one
 * read of at most 1 MiB when the trailer fits, else two), whatever the
 * pack's size; when one read held the trailer, the pack keeps it (up to
 * 1 MiB while open), and later reads of those bytes are served from it, as
 * they were at open.  STG_ENOENT if the file cannot be opened,
 * STG_ECORRUPT if it is not a valid pack.
 */
STG_API stg_err stg_pack_open(stg_ctx *ctx, const char *path, stg_pack **out);

/* The same over an open, seekable descriptor; the pack dups fd.  While a
 * pack on a network filesystem is unpacked or verified, that open file
 * (shared with fd) reads with O_DIRECT; its flags are put back after. */
STG_API stg_err stg_pack_open_fd(stg_ctx *ctx, int fd, stg_pack **out);

/* The same over a whole pack image in memory (copied as needed); for tests
 * and fuzzing.  Operations that need the frames read them from buf, which
 * must stay valid while the handle lives. */
STG_API stg_err stg_pack_open_mem(stg_ctx *ctx, const void *buf, size_t len, stg_pack **out);

STG_API void stg_pack_close(stg_pack *pack);

STG_API void stg_pack_get_info(const stg_pack *pack, stg_pack_info *info);
STG_API size_t stg_pack_count(const stg_pack *pack);
/* Entry i (0 <= i < count), in pack order; returns 0, or -1 if out of range. */
STG_API int stg_pack_entry(const stg_pack *pack, size_t i, stg_entry *out);

/* Frame i: where it lies in the file and what part of the tar stream it
 * holds.  0, or -1 if out of range. */
STG_API int stg_pack_frame(const stg_pack *pack, size_t i, uint64_t *offset, uint64_t *size,
                           uint64_t *tar_offset, uint64_t *tar_size);

/* Delta record i: the digest of the base it applies to and the delta file's
 * name (relative to the pack's directory).  0, or -1 if out of range. */
STG_API int stg_pack_delta(const stg_pack *pack, size_t i, uint8_t base_digest[STG_DIGEST_LEN],
                           const char **name);

/* ---- packs: files read at random (pack_reader.c) ----------------------- */

/* A pack open for reading its files at random, from any number of threads
 * at once: what `import stager` reads packs with. */
typedef struct stg_reader stg_reader;

typedef struct stg_reader_opts {
	size_t cache_bytes; /* decoded frames kept, least recently used out;
	                       default 64 MiB, at least two frames */
	int prefetch;       /* a thread that fetches what stg_reader_prefetch
	                       names (default 1) */
} stg_reader_opts;

typedef struct stg_reader_stats {
	uint64_t frames_fetched; /* frames read from the pack */
	uint64_t frames_cached;  /* reads served from decoded frames */
	uint64_t bytes_fetched;  /* compressed bytes read from the pack */
	uint64_t bytes_decoded;  /* bytes decoded */
} stg_reader_stats;

STG_API void stg_reader_opts_init(stg_reader_opts *opts);

/*
 * Open the pack at path (one read of its trailer, as stg_pack_open) and map
 * its regular files, and hard links to them, by path.  opts may be NULL.
 * The files are numbered 0 .. stg_reader_count() - 1 in pack order; a path
 * packed twice is the later one, as tar extracts it.
 */
STG_API stg_err stg_reader_open(stg_ctx *ctx, const char *path, const stg_reader_opts *opts,
                                stg_reader **out);
/*
 * In a process forked from the one that opened parent (a DataLoader's fork
 * worker): a reader of the same pack for this process, with a cache,
 * read-ahead thread and locks of its own, that shares parent's manifest
 * and file descriptor as the fork left them (read here, never written:
 * their pages stay shared with the parent, not a copy per process).
 * parent is not touched (its locks and threads are the other process's)
 * and must stay unclosed here while the new reader lives.  path, if not
 * NULL, must still name the file parent opened, unchanged (its device,
 * inode, size and times), else STG_ECORRUPT with errno ESTALE.  Closing
 * the new reader frees only its own part.
 */
STG_API stg_err stg_reader_fork(stg_ctx *ctx, const stg_reader *parent, const char *path,
                                const stg_reader_opts *opts, stg_reader **out);
STG_API void stg_reader_close(stg_reader *r);
STG_API const stg_pack *stg_reader_pack(const stg_reader *r);
STG_API size_t stg_reader_count(const stg_reader *r);
/* File i: its entry (type STG_FILE; a hard link's path with its target's
 * size, offsets and hash).  0, or -1 if out of range. */
STG_API int stg_reader_file(const stg_reader *r, size_t i, stg_entry *out);
/* The file at path (len bytes, no NUL needed) into *i; 0, or -1 if the pack
 * has no such file. */
STG_API int stg_reader_find(const stg_reader *r, const char *path, size_t len, size_t *i);
/* The frame that holds file i's first byte: files of one frame are read
 * together at the cost of one. */
STG_API size_t stg_reader_frame(const stg_reader *r, size_t i);
/*
 * Up to len bytes of file i from off into buf; *got says how many (0 at or
 * past its end).  Every byte comes from a frame checked against the frame
 * table (format 3), or from a file checked whole first (older formats).
 * 0, or an errno value: EIO (the file's bytes are damaged; for good),
 * ESTALE (the pack changed in place since it was opened), ENOMEM, or the
 * pack's read error.  Thread-safe.
 */
STG_API int stg_reader_pread(stg_reader *r, size_t i, void *buf, size_t len, uint64_t off,
                             size_t *got);
/* All of file i (its size in bytes) into buf, checked against its
 * XXH3-128 whatever the format.  0, or an errno value as above. */
STG_API int stg_reader_read(stg_reader *r, size_t i, void *buf);
/* Fetch and check frames [frame, frame + n) in the background, if not
 * cached (a reader that knows what it reads next: a sampler's next
 * window); they are decoded when read.  Nothing without prefetch. */
STG_API void stg_reader_prefetch(stg_reader *r, size_t frame, size_t n);
/* Why a read of file i failed with rc, in words, into buf; returns the
 * errno value that says it: ESTALE where the pack's file changed since it
 * was opened (rewritten or cut short in place: not damage), else rc. */
STG_API int stg_reader_why(stg_reader *r, size_t i, int rc, char *buf, size_t len);
STG_API void stg_reader_get_stats(stg_reader *r, stg_reader_stats *stats);

/* Lower-case hex of a digest into out (STG_DIGEST_HEXLEN + 1 bytes). */
STG_API void stg_digest_hex(const uint8_t digest[STG_DIGEST_LEN], char *out);
/* The reverse: STG_DIGEST_HEXLEN hex digits (either case) into digest;
 * 0, or -1 if hex is not that. */
STG_API int stg_digest_parse(const char *hex, uint8_t digest[STG_DIGEST_LEN]);

/*
 * Verify a pack: the SHA-256 of its frames against the trailer, every frame,
 * and every file's XXH3-128.  STG_ECORRUPT names the first problem (which
 * file, which frame, expected and found).
 */
STG_API stg_err stg_verify(stg_ctx *ctx, stg_pack *pack);

/* Options of stg_unpack(); initialise with stg_unpack_opts_init(). */
typedef struct stg_unpack_opts {
	const char *const *include; /* glob patterns (fnmatch, a match on a
	                               directory takes its subtree); NULL = all */
	size_t n_include;
	int replace_empty; /* DIR may exist if it is an empty directory
	                      (default 1) */
	int read_only;     /* drop every write permission bit (cache
	                      entries; default 0) */
} stg_unpack_opts;

STG_API void stg_unpack_opts_init(stg_unpack_opts *opts);

/* What an extraction did. */
typedef struct stg_unpack_stats {
	uint64_t files; /* regular files and hardlinks written */
	uint64_t dirs, symlinks;
	uint64_t bytes;       /* content bytes written */
	uint64_t frames_read; /* frames decoded, of ... */
	uint64_t frames_total;
	uint64_t pack_bytes_read; /* compressed bytes read from the pack (not
	                           * those its open read with the trailer) */
} stg_unpack_stats;

/*
 * Extract a pack into dir, which must not exist (or be an empty directory).
 * The tree is built in a temporary sibling (".stager-unpack.*"), every file
 * is checked against its XXH3-128 as it is written, the SHA-256 is checked
 * when the whole pack is read, and only then is the tree renamed to dir.
 * On failure nothing is left at dir.  Extraction is secure: paths are
 * confined to dir, symlinks may not point outside it, setuid/setgid bits are
 * dropped, and only files, directories, symlinks and hardlinks exist.
 * Includes select a subset and decode only the frames that hold it; a
 * selected hardlink brings its target along.  stats (may be NULL) receives
 * what was done.
 */
STG_API stg_err stg_unpack(stg_ctx *ctx, stg_pack *pack, const char *dir,
                           const stg_unpack_opts *opts, stg_unpack_stats *stats);

/* ---- packs: writing --------------------------------------------------- */

/* A delta from an older version of a pack (see stg_delta_write). */
typedef struct stg_delta_info {
	uint8_t base_digest[STG_DIGEST_LEN];
	const char *name;                    /* stg_pack_dir: the delta file, beside the pack */
	uint64_t size;                       /* bytes of the delta file */
	uint64_t unchanged;                  /* files the base has as they are */
	uint64_t copied;                     /* files the base has under another path */
	uint64_t patched;                    /* changed files, as librsync deltas */
	uint64_t added;                      /* new files, whole */
	uint64_t removed;                    /* files of the base the new version lacks */
	uint64_t patched_bytes, added_bytes; /* their new sizes */
} stg_delta_info;

typedef void (*stg_delta_fn)(void *arg, const char *base, const stg_delta_info *info);

typedef struct stg_pack_opts {
	int level;         /* zstd level, 1..19; default 3 (frames that do not
	                      compress are stored at a fast level whatever this is) */
	size_t frame_size; /* target uncompressed bytes per frame; 0 (the
	                      default): 256 KiB, doubled up to 4 MiB while the
	                      tree would take over 65,536 frames */
	int fsync;         /* stg_pack_dir: fsync the pack before renaming it into
	                      place (default 0: like tar and rsync, the write is
	                      left to the kernel; a pack damaged by a crash fails
	                      its digest check when read) */
	/* stg_pack_dir: packs of older versions.  For each, a delta file that
	 * turns it into the new pack is written beside the new pack, named
	 * "<pack name>.delta-<16 hex digits of the base's digest>", and listed
	 * in the new pack's trailer; stg_stage of the new pack on a node that
	 * caches a base reads that delta instead of the pack.  The pack and its
	 * deltas appear together, after all are written, or not at all.  The
	 * pack's digest is the same with or without bases. */
	const char *const *bases;
	size_t n_bases;
	stg_delta_fn delta_done; /* told of each delta written (may be NULL) */
	void *delta_arg;
} stg_pack_opts;

STG_API void stg_pack_opts_init(stg_pack_opts *opts);

/*
 * Pack the tree at dir into out_path.  Writes "<out_path>.stager-tmp.*" and
 * renames it into place when complete, so out_path is either the old file
 * or the complete new pack.  Regular files, directories (empty ones too),
 * symlinks and hardlinks are kept with permission bits and mtimes; sockets,
 * FIFOs and devices are skipped with a warning.  The same tree gives the same
 * digest.  info (may be NULL) receives the totals.
 */
STG_API stg_err stg_pack_dir(stg_ctx *ctx, const char *dir, const char *out_path,
                             const stg_pack_opts *opts, stg_pack_info *info);

/* The stream form: write the pack to fd (need not be seekable); opts->bases
 * are refused (STG_EUSAGE): write deltas with stg_delta_write. */
STG_API stg_err stg_pack_dir_fd(stg_ctx *ctx, const char *dir, int fd, const stg_pack_opts *opts,
                                stg_pack_info *info);

/*
 * Write to fd the delta that turns the tree of base (an older version) into
 * the tree of new_, which was packed from dir: per changed file a librsync
 * delta against the base's version (RabinKarp + BLAKE2), files the base
 * lacks whole, files it has under another path as a reference, and the list
 * of removed files, compressed with zstd.  The base's files are read from
 * its frames (each checked against its XXH3-128); the changed files from
 * dir (each checked against new_'s manifest: STG_EIO if one changed since
 * it was packed).  fd must be a regular file: the header is written last,
 * at offset 0.  The format is in FORMAT.md.  info (may be NULL) receives
 * the counts (name stays NULL).
 */
STG_API stg_err stg_delta_write(stg_ctx *ctx, stg_pack *base, stg_pack *new_, const char *dir,
                                int fd, stg_delta_info *info);

/* Check a delta file for target as far as it can be without its base: the
 * header (it must make target), the structure, every record against
 * target's manifest, the whole files' XXH3-128 and the checksum of the
 * body.  The base's digest into base, the file's size into *size (may be
 * NULL).  STG_ECORRUPT names the first problem. */
STG_API stg_err stg_delta_check(stg_ctx *ctx, stg_pack *target, int fd,
                                uint8_t base[STG_DIGEST_LEN], uint64_t *size);

/* Read a delta file's header: the digests of the pack it applies to and of
 * the pack it makes, and its size.  STG_ECORRUPT if it is not an intact
 * delta header or the file is truncated. */
STG_API stg_err stg_delta_read_header(stg_ctx *ctx, int fd, uint8_t base[STG_DIGEST_LEN],
                                      uint8_t target[STG_DIGEST_LEN], uint64_t *size);

/* ---- configuration ---------------------------------------------------- */

/*
 * Settings, each with where it came from ("default", "/etc/stager.conf:3",
 * "environment STAGER_CACHE_MAX", "--scratch", ...).  The keys and their
 * meaning: stg_config_key().  Load order is the caller's: later calls win.
 *
 * A file holds "key = value" lines, '#' starts a comment.  It must be a
 * regular file of at most STG_CONFIG_MAX_SIZE bytes, with lines of at most
 * STG_CONFIG_MAX_LINE bytes and no NUL byte; anything else (a FIFO, a
 * directory, a device other than /dev/null, which reads as empty, a binary
 * file) is STG_EUSAGE with the file (and line) named on ctx, found without
 * blocking and in bounded time.
 */
#define STG_CONFIG_MAX_SIZE (1u << 20)
#define STG_CONFIG_MAX_LINE 4096

typedef struct stg_config stg_config;

STG_API stg_config *stg_config_new(void);
STG_API void stg_config_free(stg_config *cfg);
/* Set one key, validating the value; origin is copied. */
STG_API stg_err stg_config_set(stg_ctx *ctx, stg_config *cfg, const char *key, const char *value,
                               const char *origin);
/* "key = value" lines; a missing file is fine unless must_exist. */
STG_API stg_err stg_config_load_file(stg_ctx *ctx, stg_config *cfg, const char *path,
                                     int must_exist);
/* The same from len bytes at data (copied as needed); name stands for the
 * file in messages ("NAME:LINE: ..."). */
STG_API stg_err stg_config_load_mem(stg_ctx *ctx, stg_config *cfg, const void *data, size_t len,
                                    const char *name);
/* STAGER_<KEY> variables, e.g. STAGER_SCRATCH_ROOT. */
STG_API stg_err stg_config_load_env(stg_ctx *ctx, stg_config *cfg);
/* The settings as stager reads them, later ones winning: the site's file
 * ($STAGER_SITE_CONFIG, else /etc/stager.conf; missing is fine), then
 * path (which must exist) if not NULL, else the user's file
 * ($XDG_CONFIG_HOME/stager/config or ~/.config/stager/config), then
 * STAGER_<KEY> variables. */
STG_API stg_err stg_config_load_standard(stg_ctx *ctx, stg_config *cfg, const char *path);
/* The value of key (NULL if no such key) and, if origin, where it came from. */
STG_API const char *stg_config_get(const stg_config *cfg, const char *key, const char **origin);
STG_API size_t stg_config_count(void);
/* Key i (NULL past the end) and a one-line description. */
STG_API const char *stg_config_key(size_t i, const char **help);

/* ---- the node cache --------------------------------------------------- */

/*
 * A per-node, per-user cache of extracted, verified packs under the scratch
 * root (cache.c describes the layout): entries keyed by the pack's digest, an index from a
 * source's identity (device, inode, size, mtime, ctime) to its digest so a
 * warm stage costs one stat() of the source, single flight between
 * processes, atomic publish, pins by live jobs, LRU eviction under quotas.
 */
typedef struct stg_cache stg_cache;

/* Resolve and open the scratch root (creating it, mode 0700). */
STG_API stg_err stg_cache_open(stg_ctx *ctx, const stg_config *cfg, stg_cache **out);
STG_API void stg_cache_close(stg_cache *cache);
STG_API const char *stg_cache_root(const stg_cache *cache);
/* The job's own node-local scratch directory: the value of the variable
 * that the job_tmpdir_var setting names ($SLURM_TMPDIR by default) if it is
 * an absolute path, else NULL (then stager keeps a job directory under the
 * scratch root).  If var is not NULL it is set to the variable's name. */
STG_API const char *stg_job_tmpdir(const stg_cache *cache, const char **var);

typedef struct stg_stage_opts {
	const char *dest;           /* NULL: $SLURM_TMPDIR/NAME, else a job
	                               directory under the scratch root */
	const char *const *include; /* stage a subset (see stg_unpack_opts) */
	size_t n_include;
	int copy;          /* a private writable copy instead of a link */
	int verify;        /* re-check a warm entry's files */
	int no_pin;        /* do not pin the entry */
	const char *owner; /* pin owner; NULL: "job-$SLURM_JOB_ID" under
	                      Slurm, else the calling process's parent */
	/* A local file said to hold src's bytes (a pack another node read and
	 * fanned out, see stg_copy_pack): staged from it, without reading src,
	 * if it is the pack with digest from_copy_digest (checked: its SHA-256)
	 * and intact; otherwise a warning and src is read after all.  With
	 * from_copy_digest alone, an entry already cached for that digest is
	 * used without asking src anything.  With from_copy_digest set, src
	 * must be that pack: another one (src replaced meanwhile) is refused
	 * with STG_ECORRUPT rather than staged, so that the nodes of one job
	 * never hold different versions. */
	const char *from_copy;
	const uint8_t *from_copy_digest;
	/* Fill the node cache only: the entry made (or found) and pinned, no
	 * DEST; res->path is the entry's read-only data directory. */
	int cache_only;
	/* The pack of the caller's own Python env (stg_env_spawn): its
	 * symlinks may point out of it (a venv's interpreter does). */
	int env;
} stg_stage_opts;

STG_API void stg_stage_opts_init(stg_stage_opts *opts);

typedef struct stg_stage_result {
	char *path; /* the staged path; freed by stg_stage_result_free */
	uint8_t digest[STG_DIGEST_LEN];
	int hit;                /* served from the cache */
	int waited;             /* waited for another process building it */
	uint64_t source_bytes;  /* bytes read from the source (the shared FS) */
	uint64_t content_bytes; /* bytes of file content staged */
	uint64_t files;
	double seconds;
	const char *kind;                    /* "pack", "archive" or "directory" (static) */
	int delta;                           /* built from a delta against a cached older version */
	uint8_t base_digest[STG_DIGEST_LEN]; /* that version, when delta */
} stg_stage_result;

/*
 * Make the dataset at src (a pack, another archive, or a directory)
 * available on this node and link (or copy) it at the destination.  A pack
 * with deltas from older versions (stg_pack_opts.bases), one of which this
 * node caches, is built from that entry and the delta file beside src (or
 * beside the pack a symlinked src points to): unchanged files linked,
 * changed ones patched, every file checked against src's manifest;
 * res->delta says so.  A delta that is missing, damaged or for another
 * version is named in a warning and src is read whole.  Exit
 * paths: STG_ENOENT (src missing), STG_ECORRUPT (damaged or hostile; nothing
 * published), STG_ENOSPC (cannot fit even after eviction; nothing copied),
 * STG_EEXIST (destination exists), STG_EINTR.
 */
STG_API stg_err stg_stage(stg_ctx *ctx, stg_cache *cache, const char *src,
                          const stg_stage_opts *opts, stg_stage_result *res);
STG_API void stg_stage_result_free(stg_stage_result *res);

/* Is the entry stg_stage would use for the pack with this digest (and
 * opts' subset) complete in the cache?  1 yes, 0 no. */
STG_API int stg_stage_cached(stg_cache *cache, const uint8_t digest[STG_DIGEST_LEN],
                             const stg_stage_opts *opts);

/* Copy the pack src (on the shared filesystem) to the local file dst,
 * holding a shared-FS slot and within the bandwidth limit, checking its
 * SHA-256 on the way; dst appears whole or not at all.  Its digest into
 * digest, the bytes read into *bytes.  STG_ECORRUPT if src is not an intact
 * pack, STG_ENOSPC if dst's filesystem cannot hold it. */
STG_API stg_err stg_copy_pack(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dst,
                              uint8_t digest[STG_DIGEST_LEN], uint64_t *bytes);

/* The owner name of a process ("pid-PID-STARTTIME", malloc'ed), for
 * stg_stage_opts.owner when a long-lived process (a job wrapper) owns
 * what it stages rather than its parent. */
STG_API char *stg_owner_process(int pid);

/* What a batch job's clock says (slurm.c): its end, KillWait, the early
 * warning its script asks for, and whether stager run was started without
 * `exec` (its parent is the batch shell). */
typedef struct stg_job_clock {
	double end;          /* the time limit (seconds since the epoch); 0: none known */
	unsigned kill_wait;  /* seconds from SIGTERM to SIGKILL (Slurm's KillWait) */
	int warn_signal;     /* #SBATCH --signal's signal (0: none found) */
	unsigned warn_secs;  /* ... that many seconds before the end */
	int warn_batch_only; /* B: (to the batch shell only) */
	int no_exec;         /* the parent is the batch step's shell */
} stg_job_clock;
/* Read the clock of the job in $SLURM_JOB_ID (asks squeue and scontrol;
 * what cannot be learned stays 0, KillWait 30). */
STG_API void stg_job_clock_read(stg_job_clock *jc);
/* Drop every pin of owner (when it stops using what it staged). */
STG_API stg_err stg_unpin(stg_ctx *ctx, stg_cache *cache, const char *owner);

/* A pin: who uses an entry, and whether that owner is still alive. */
typedef struct stg_pin {
	const char *owner;
	int alive;
} stg_pin;

typedef struct stg_cache_entry {
	const char *key; /* digest, or digest-subsethash */
	const char *kind;
	const char *source; /* the path it was staged from */
	uint64_t size;      /* bytes on disk (estimate) */
	uint64_t files;
	int64_t last_use; /* seconds since the epoch */
	const stg_pin *pins;
	size_t n_pins;
} stg_cache_entry;

typedef struct stg_cache_info {
	const char *root;
	uint64_t fs_size, fs_free, fs_files_free;
	uint64_t cache_bytes;
	uint64_t cache_max, min_free; /* resolved to bytes (0: none) */
	const stg_cache_entry *entries;
	size_t n_entries;
} stg_cache_info;

/* A snapshot of the cache; free with stg_cache_info_free. */
STG_API stg_err stg_cache_status(stg_ctx *ctx, stg_cache *cache, stg_cache_info **out);
STG_API void stg_cache_info_free(stg_cache_info *info);

typedef struct stg_clean_opts {
	int dry_run;         /* change nothing, report what would go */
	int all;             /* every unpinned entry */
	uint64_t older_than; /* entries unused for this many seconds (0: off) */
	const char *job;     /* what this Slurm job left: its pins and job directory */
	int kept;            /* also remove every kept result now (see
	                        stg_keep_results), whatever its age */
} stg_clean_opts;

STG_API void stg_clean_opts_init(stg_clean_opts *opts);

/* Called for each thing removed (or that would be, with dry_run): what it
 * is ("entry", "partial", "pin", "mount": a mount whose process died,
 * unmounted, "jobdir", "record": a collect record whose
 * source is gone, "kept": kept results past keep_days or asked for,
 * "keep": results a finished job never fully collected, moved to kept/
 * rather than removed; path is then where they went; "stays": kept
 * results younger than keep_days, left where they are), its path and its
 * size. */
typedef void (*stg_clean_fn)(void *arg, const char *what, const char *path, uint64_t bytes);

/*
 * Remove what no live owner needs: leftovers of dead builders, stale pins,
 * job directories of finished jobs, and entries down to the quotas (with
 * all or older_than, more).  Never removes an entry pinned by a live owner.
 * freed (may be NULL) receives the bytes freed.
 */
STG_API stg_err stg_clean(stg_ctx *ctx, stg_cache *cache, const stg_clean_opts *opts,
                          stg_clean_fn report, void *arg, uint64_t *freed);

/* ---- data gravity: where packs are cached (gravity.c, node_features.c) -- */

/*
 * A node tells Slurm which packs its caches hold as node features, so
 * that `sbatch --prefer=FEATURE` sends a job to where its data is warm.
 * A feature names one user's cached copy of one pack: "stg_" and 12 hex
 * digits of SHA-256("stager-feature", uid, pack digest).  Caches are per
 * user, so a feature of the pack alone would send a job to where another
 * user's cache holds it.  A feature names neither the pack nor the user,
 * but features are public: someone who has the pack can compute its
 * feature for every uid (and so find who caches it where), and the time
 * a feature appears ties it to the job that just ended on that node.
 */
#define STG_FEATURE_LEN 16 /* "stg_" and 12 hex digits */

/* The feature that names user uid's cached copy of the pack digest. */
STG_API void stg_node_feature(unsigned uid, const uint8_t digest[STG_DIGEST_LEN],
                              char out[STG_FEATURE_LEN + 1]);

/* The user's side of a node's update (the epilog runs it as the job's
 * user): the whole packs this user's cache holds, as "DIGEST LAST_USE"
 * lines written to fd, at most node_features_max, most recently used
 * first, then a line "end"; only that line when the user's settings say
 * node_features = no (stg_features_list_none).  A list without its end
 * (the user's side failed, or was stopped) takes none of the user's
 * features away. */
STG_API stg_err stg_features_list(stg_ctx *ctx, const stg_config *cfg, stg_cache *cache, int fd);
STG_API stg_err stg_features_list_none(stg_ctx *ctx, int fd);

typedef struct stg_features_update_opts {
	const char *node;      /* the node's name in Slurm */
	unsigned uid;          /* whose list this is */
	const char *state_dir; /* root's own directory for the node's record */
	int dry_run;           /* decide, but neither record nor tell Slurm */
} stg_features_update_opts;

typedef struct stg_features_update_result {
	size_t advertised;     /* stager's features the node has now */
	size_t added, removed; /* by this update */
	int changed;           /* Slurm was told */
} stg_features_update_result;

/*
 * The root side of a node's update (the epilog): list (len bytes, what
 * stg_features_list printed as the user; hostile: every line checked,
 * at most node_features_max taken, the features computed here from the
 * digests and opts->uid, so a user can name only their own, and a last
 * use never later than now) becomes that user's part of the node's
 * record (state_dir/node-features, locked, replaced atomically); the
 * features to advertise are chosen (the node_features_max most recently
 * used of all users', a feature that leaves staying node_features_grace
 * seconds) and set with `scontrol update NodeName=... AvailableFeatures=
 * ActiveFeatures=` only when they differ from what Slurm has; the site's
 * own features are kept as they are.  Does nothing (STG_OK, nothing
 * changed) when the site's node_features is no.  STG_EUSAGE for a
 * state_dir that is not root's alone; STG_EREMOTE when scontrol fails.
 */
STG_API stg_err stg_features_update(stg_ctx *ctx, const stg_config *cfg,
                                    const stg_features_update_opts *opts, const char *list,
                                    size_t len, stg_features_update_result *res);

/* Where a pack is cached, as Slurm sees it (stg_where). */
typedef struct stg_where_result {
	uint8_t digest[STG_DIGEST_LEN];
	char feature[STG_FEATURE_LEN + 1]; /* the calling user's */
	char *nodes;                       /* comma-separated; "" for none */
	size_t n_nodes;
} stg_where_result;

/* For each of the n packs: its digest (from its trailer: one read), the
 * calling user's feature for it, and the nodes that have that feature
 * (one `sinfo` for all).  STG_ENOENT / STG_ECORRUPT naming a pack that
 * cannot be read; STG_EREMOTE when Slurm cannot be asked.  out[n] is
 * freed by stg_where_free. */
STG_API stg_err stg_where(stg_ctx *ctx, const char *const *packs, size_t n, stg_where_result *out);
/* The same among the nodes of partition (Slurm's comma-separated list;
 * NULL or "": every partition sinfo shows).  A job's preferred feature
 * must be on a node of its own partition: sbatch -p P --prefer=F refuses
 * the job ("Requested node configuration is not available") when F is
 * only on nodes outside P. */
STG_API stg_err stg_where_in(stg_ctx *ctx, const char *const *packs, size_t n,
                             const char *partition, stg_where_result *out);
STG_API void stg_where_free(stg_where_result *w, size_t n);

/* The sbatch option that prefers the nodes holding the packs of w[n]:
 * "--prefer=A&B" of the packs some node holds when one node holds them
 * all, else "--prefer=A|B" of those, "" when no node holds any (sbatch
 * refuses a feature that no node has).  Into out[len]; 0, or -1 if it
 * does not fit. */
STG_API int stg_hint(const stg_where_result *w, size_t n, char *out, size_t len);

/* ---- comparing packs --------------------------------------------------- */

typedef enum { STG_DIFF_ADDED, STG_DIFF_REMOVED, STG_DIFF_CHANGED } stg_diff_kind;

/* What differs in a changed entry (bits). */
enum {
	STG_DIFF_CONTENT = 1, /* size or XXH3-128 */
	STG_DIFF_MODE = 2,    /* permission bits */
	STG_DIFF_TYPE = 4,    /* file, directory, link */
	STG_DIFF_LINK = 8,    /* a link's target */
};

typedef struct stg_diff_stats {
	uint64_t added, removed, changed, unchanged; /* entries */
	/* file content; of changed files, the new size of those whose content
	 * (or type) changed */
	uint64_t added_bytes, removed_bytes, changed_bytes;
} stg_diff_stats;

/* Called per difference; old is NULL for an added entry, new_ for a
 * removed one; what is a mask of STG_DIFF_CONTENT ... for a changed one. */
typedef void (*stg_diff_fn)(void *arg, stg_diff_kind kind, unsigned what, const stg_entry *old,
                            const stg_entry *new_);

/*
 * Compare two packs by their manifests alone (no frame is read): entries
 * matched by path; changed when type, content, permission bits or link
 * target differ (not for an mtime alone).  Reports in new_'s order, then the
 * removed in old's.  st (may be NULL) receives the counts.
 */
STG_API stg_err stg_diff(stg_ctx *ctx, const stg_pack *old, const stg_pack *new_, stg_diff_fn fn,
                         void *arg, stg_diff_stats *st);

/* ---- collecting results ------------------------------------------------ */

typedef struct stg_collect_opts {
	int pack;  /* one pack, DEST.tar.zst, instead of a tree of files */
	int level; /* its zstd level (0: the default) */
	/* The job is ending (SIGTERM, the time limit): wait at most this many
	 * seconds for a shared-FS slot or lease, then collect without one -
	 * saving the results comes before the limit.  0: wait as long as it
	 * takes. */
	double slot_wait_max;
} stg_collect_opts;

STG_API void stg_collect_opts_init(stg_collect_opts *opts);

typedef struct stg_collect_result {
	char *dest;          /* what was written to (DEST, or DEST.tar.zst) */
	uint64_t files;      /* regular files in SRC */
	uint64_t sent_files; /* files (and links) written to DEST this time */
	uint64_t sent_bytes; /* bytes written to DEST this time */
	uint64_t unchanged;  /* files already collected and unchanged */
	uint64_t retries;    /* transient errors retried */
	uint64_t failed;     /* files that could not be collected */
	double seconds;
	uint64_t changing; /* files that kept changing while they were copied:
	                      DEST keeps its previous copy, the next collect
	                      sends them */
} stg_collect_result;

/*
 * Copy the directory src (on scratch) to dest (on the shared filesystem):
 * a tree like `rsync -a src/ dest/` (files removed from src are left in
 * dest), or with opts->pack one verified pack.  Incremental: a record on
 * scratch says what dest already holds, so unchanged files cost nothing
 * and deciding needs no reads of the shared filesystem.  Every file is
 * written under a temporary name (.stager-tmp.*) and renamed, so dest never
 * shows a partial file; a killed collect is completed by the next.  Free
 * space and inodes of dest are checked first (STG_ENOSPC with the figures).
 * Transient errors (EINTR, EAGAIN, ESTALE, EIO, ETIMEDOUT) are retried with
 * backoff; a file that still fails is reported and the others go on
 * (STG_EIO at the end, naming the first).  Uses the node's shared-FS slots,
 * bandwidth and operations limits.  res->dest is freed by
 * stg_collect_result_free, also after an error.
 */
STG_API stg_err stg_collect(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                            const stg_collect_opts *opts, stg_collect_result *res);
STG_API void stg_collect_result_free(stg_collect_result *res);

/* What the collects of stg_collect_every (or of one stager collect) did:
 * files, unchanged, failed and changing are the last round's, the others
 * add up over the rounds. */
typedef struct stg_collect_totals {
	unsigned rounds;
	uint64_t files, sent_files, sent_bytes, unchanged, retries, failed, changing;
	double seconds;
	stg_err err; /* the last round's */
} stg_collect_totals;

/*
 * Collect src to dest (stg_collect) now and then every `every` seconds at
 * idle I/O priority, until SIGTERM, SIGINT or SIGHUP, or until control_fd
 * (-1: none) reaches its end; then once more at normal priority, waiting
 * at most 10 s for a shared-FS slot (Slurm's SIGKILL follows its SIGTERM).
 * A second terminating signal cancels that last collect (what it sent
 * stays whole).  SIGUSR1 and SIGUSR2 (Slurm's early warning), or a line
 * "now" on control_fd, start a collect at once.  A round that fails
 * because src is missing or the call is wrong (STG_ENOENT; STG_EUSAGE,
 * STG_EEXIST, STG_ENOTSUP) ends it, without a last collect.  With every 0: one collect, and the
 * signals are left alone.
 *
 * Each round is told through the log: what it sent (STG_LOG_INFO), that
 * nothing changed (STG_LOG_DEBUG), or its failure (STG_LOG_ERROR); the
 * return value is the last round's (stg_errmsg(ctx) holds its detail).
 * *t (zeroed by the caller) receives the totals.
 *
 * Signals: while it runs, stg_collect_every blocks the five signals and a
 * thread of its own takes them (sigtimedwait); it installs handlers for
 * the three terminating ones (so that one ignored since the process
 * started is seen too), and restores the handlers and the mask before it
 * returns.  In a program with other threads, those must block them too.
 * A caller that blocks them before the call (before opening the cache,
 * say) has one that came meanwhile taken as if it came at the start.
 */
STG_API stg_err stg_collect_every(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                                  const stg_collect_opts *opts, uint64_t every, int control_fd,
                                  stg_collect_totals *t);

/*
 * Results a job has yet to collect outlive the job (results.c).  A job's
 * wrapper records each SRC it will collect, with its DEST, before its
 * command starts (stg_results_pending), and says when a last collect sent
 * everything (stg_results_done).  stg_clean moves the sources of a record
 * whose owner is gone (the job or its wrapper was killed, Slurm's KillWait
 * cut the last collect short) to SCRATCH_ROOT/kept/ instead of removing
 * them with the job's scratch.  owner as in stg_stage_opts.owner ("job-ID",
 * "pid-PID-START").
 */
STG_API stg_err stg_results_pending(stg_ctx *ctx, stg_cache *cache, const char *owner, size_t n,
                                    const char *const *src, const char *const *dest);
STG_API stg_err stg_results_done(stg_ctx *ctx, stg_cache *cache, const char *owner);

/* Days that kept results stay, unless the keep_days setting says otherwise. */
#define STG_KEEP_DAYS 14

/*
 * Move the directory src to SCRATCH_ROOT/kept/NAME.EPOCH (one rename; from
 * another filesystem, a copy and then src removed; STG_EIO if that fails,
 * and src is then left as it is), remembering dest (may be
 * NULL) for stg_collect_kept.  stg_clean removes it after keep_days, not
 * before (or when asked: stg_clean_opts.kept).  *out (freed by the caller)
 * is where it went; NULL on failure.
 */
STG_API stg_err stg_keep_results(stg_ctx *ctx, stg_cache *cache, const char *src, const char *name,
                                 const char *dest, char **out);

/* Who holds a shared-FS slot: kind "node" (a slot of max_readers_per_node,
 * held by a process on this node) or "cluster" (a lease of
 * max_readers_cluster, held on host), its index, the holder's pid, uid and
 * user name, since when (seconds since the epoch; 0 unknown) and what it
 * runs ("stager stage"). */
typedef struct stg_holder {
	char kind[8];
	unsigned index;
	int pid;
	unsigned uid;
	char user[40], host[64], what[64];
	int64_t since;
} stg_holder;

/* The current holders of this node's slots and the cluster's leases; free
 * *v with free(). */
STG_API stg_err stg_slot_holders(stg_ctx *ctx, stg_cache *cache, stg_holder **v, size_t *n);

/* Kept results: name ("NAME.EPOCH"), path, dest (NULL if not known), and
 * when they were kept (seconds since the epoch). */
typedef struct stg_kept {
	char *name, *path, *dest;
	int64_t since;
	int pack;       /* collected to DEST.tar.zst as one pack */
	uint64_t bytes; /* on disk */
} stg_kept;

/* The kept results of this cache, oldest name first; free with
 * stg_kept_free. */
STG_API stg_err stg_kept_list(stg_ctx *ctx, stg_cache *cache, stg_kept **v, size_t *n);
STG_API void stg_kept_free(stg_kept *v, size_t n);

/* Where kept results wait, as the notes in the user's home say (kept on
 * every node the user's jobs ran on; readable from a login node): the
 * node, the job, the path there, the DEST meant, bytes, and since when. */
typedef struct stg_kept_note {
	char *node, *job, *path, *dest;
	uint64_t bytes;
	int64_t since;
} stg_kept_note;

/* The notes in ~/.local/state/stager/kept/ (none: *n 0); free with
 * stg_kept_notes_free. */
STG_API stg_err stg_kept_notes(stg_ctx *ctx, stg_kept_note **v, size_t *n);
/* The same, of results kept on other nodes than this one (this node's are
 * in its cache's kept/: stg_kept_list), and of job only if it is not
 * NULL: where to go for them from a login node. */
STG_API stg_err stg_kept_notes_elsewhere(stg_ctx *ctx, const char *job, stg_kept_note **v,
                                         size_t *n);
STG_API void stg_kept_notes_free(stg_kept_note *v, size_t n);

/* Called for each kept result stg_collect_kept tried: err (its message on
 * ctx) and what the collect did. */
typedef void (*stg_kept_fn)(void *arg, const stg_kept *k, stg_err err,
                            const stg_collect_result *res);

/* Collect every kept result to its dest (stg_collect with opts); each one
 * collected whole is removed.  The first error, or STG_OK. */
STG_API stg_err stg_collect_kept(stg_ctx *ctx, stg_cache *cache, const stg_collect_opts *opts,
                                 stg_kept_fn report, void *arg);
/* The same for the kept results of one Slurm job (job NULL: all). */
STG_API stg_err stg_collect_kept_job(stg_ctx *ctx, stg_cache *cache, const stg_collect_opts *opts,
                                     const char *job, stg_kept_fn report, void *arg);

/* ---- Slurm fan-out ------------------------------------------------------ */

/* The nodes of the Slurm job this process is in (SLURM_JOB_NUM_NODES, or
 * SLURM_NNODES, at most 4096); 0 outside a job, or if the number is not
 * known. */
STG_API unsigned stg_job_nodes(void);

/* This node's name, $SLURMD_NODENAME or else the host's short name, into
 * buf; buf. */
STG_API const char *stg_node_name(char *buf, size_t len);

/*
 * How the stagers on the other nodes of a job are started: `srun ...
 * PROGRAM COMMAND [its options] ARGS... -- SRC [DEST]`, one task per node.
 * program must be the same path on every node (a tool passes its own,
 * from /proc/self/exe); args, NULL-terminated, are options every node's
 * stager needs too (--scratch, --config, --bwlimit, --quiet, --verbose).
 * Both are used while the call that takes them runs, not copied.
 */
typedef struct stg_fanout_opts {
	const char *program;     /* NULL: "stager", from PATH */
	const char *const *args; /* NULL: none */
} stg_fanout_opts;

STG_API void stg_fanout_opts_init(stg_fanout_opts *opts);

/* How one node came by the data: "cached" (its cache had the entry),
 * "sbcast" (from the copy Slurm's sbcast sent it), "shared" (it read the
 * shared filesystem itself), "read" (the lead: it read the pack for all),
 * "failed", or "need" (it asked for the copy and said no more). */
typedef struct stg_fanout_node {
	char name[72];
	char how[16];
} stg_fanout_node;

typedef struct stg_fanout_result {
	char *path; /* the staged path, the same on every node (NULL if no
	               node gave one) */
	int pack;   /* src is a pack: digest and nodes are set; 0: each node
	               staged src from the shared filesystem on its own */
	uint8_t digest[STG_DIGEST_LEN];
	stg_fanout_node *nodes; /* every node, the lead last */
	size_t n_nodes;
	double seconds;
	/* STG_OK, or the status of the other nodes that failed; they said
	 * why in their own messages (on stderr), and stg_stage_all_nodes in
	 * the log (STG_LOG_ERROR) */
	stg_err nodes_err;
} stg_fanout_result;

/* Frees what res holds (res itself is the caller's). */
STG_API void stg_fanout_result_free(stg_fanout_result *res);

/* "n2 sbcast, n3 cached, n1 read": how each node of res came by the data,
 * into buf (n bytes, cut at a node's end if it is too small); buf. */
STG_API char *stg_fanout_nodes_text(const stg_fanout_result *res, char *buf, size_t n);

/*
 * Stage the pack src on every node of the Slurm job, reading the shared
 * filesystem once.  Called on one node of the job (the batch script's):
 * it reads the pack's trailer, asks the other nodes in one srun step
 * whether their cache has the entry (those that do link it), copies the
 * pack once to its scratch (stg_copy_pack) if anyone lacks it, starts a
 * step on those nodes and, when their tasks are ready, has Slurm's sbcast
 * send the copy to that step only; each node then stages from its copy
 * (checked again, see stg_stage_opts.from_copy), or from src if the copy
 * did not come or is bad.  This node stages last, from the same copy.
 * src that is not a pack (a directory, another archive) is staged by
 * every node on its own, in one step.  opts as for stg_stage (include,
 * verify, copy and no_pin are passed on).  STG_EUSAGE outside a Slurm job,
 * in a job of one node (stage with stg_stage there), or on a node that is
 * not one of the job's.  Returns an error when nothing was staged here;
 * other nodes' failures are res->nodes_err.  Progress and what goes wrong
 * on the way are told through the log.  Free res with
 * stg_fanout_result_free, also after an error.
 */
STG_API stg_err stg_stage_all_nodes(stg_ctx *ctx, stg_cache *cache, const char *src,
                                    const stg_stage_opts *opts, const stg_fanout_opts *fo,
                                    stg_fanout_result *res);

/* The other end of stg_stage_all_nodes, on each node (`stager stage
 * --node-probe` and `--node-receive`): stg_node_probe stages src from
 * this node's cache if it holds the pack with this digest (without asking
 * the shared filesystem) and says "stager-node have NODE PATH" on out,
 * else "stager-node need NODE".  stg_node_receive says "stager-node ready
 * NODE STEP" on out, waits for a line on in ("go": the copy is at copy;
 * anything else, or the end: read src), stages, removes the copy and says
 * "stager-node done NODE copy" (or "shared"). */
STG_API stg_err stg_node_probe(stg_ctx *ctx, stg_cache *cache, const char *src,
                               const stg_stage_opts *opts, const uint8_t digest[STG_DIGEST_LEN],
                               int out);
STG_API stg_err stg_node_receive(stg_ctx *ctx, stg_cache *cache, const char *src,
                                 const stg_stage_opts *opts, const char *copy,
                                 const uint8_t digest[STG_DIGEST_LEN], int in, int out);

/* A node's collector of stg_run with all_nodes (`stager collect
 * --node-ready`): makes the directory src, says "stager-node ready NODE"
 * on out, then collects as stg_collect_every does with control_fd in
 * (every 0: only when told, and at the end), failures told in the log. */
STG_API stg_err stg_node_collect(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                                 const stg_collect_opts *opts, uint64_t every, int in, int out,
                                 stg_collect_totals *t);

/* ---- running a job's command ------------------------------------------- */

/* For stg_run_opts.stages: a dataset and where it goes (dest NULL: the
 * job's scratch as stg_stage chooses; relative: in the job directory).
 * For .collects: a directory of results (relative: in the job directory;
 * made if missing) and where it is collected to. */
typedef struct stg_run_pair {
	const char *src, *dest;
} stg_run_pair;

/* stg_run_opts.every: collect periodically only in a Slurm job with a
 * known time limit, every tenth of the time left (1 to 30 minutes). */
#define STG_RUN_EVERY_DEFAULT UINT64_MAX

/* A look at the job's time budget (at most every 15 s, in a Slurm job
 * with a known time limit and something to collect): the bytes still to
 * send (of files changed since the last collect began), the seconds they
 * take at the rate of earlier collects (measured 1) or at an assumed
 * 50 MiB/s (measured 0), and the seconds the job has after its time limit
 * (KillWait, and the early warning's). */
typedef void (*stg_budget_fn)(void *arg, uint64_t todo, double need, int measured, double room);

typedef struct stg_run_opts {
	const stg_run_pair *stages; /* staged in this order */
	size_t n_stages;
	const stg_run_pair *collects;
	size_t n_collects;
	/* packs mounted (stg_mount_spawn, tied) for the command's lifetime: src
	 * a pack, dest where (relative: in the job directory; NULL: the
	 * pack's name without .tar.zst), made if missing; exported as
	 * STAGER_MOUNT, STAGER_MOUNT_2, ... */
	const stg_run_pair *mounts;
	size_t n_mounts;
	stg_collect_opts collect; /* how each collect is made */
	uint64_t every;           /* seconds between collects while the command
	                             runs; 0: only at the end; default
	                             STG_RUN_EVERY_DEFAULT */
	double grace;             /* seconds the command has after a terminating
	                             signal before its results are collected
	                             while it goes on (default 5) */
	int all_nodes;            /* stage on every node of the job
	                             (stg_stage_all_nodes), and collect on each
	                             (a collector per node, stg_node_collect;
	                             dest may hold sbatch's patterns, each node
	                             fills in its own); in a job of one node,
	                             or none, the same as 0 */
	stg_fanout_opts fanout;   /* all_nodes: how those nodes' stagers start */
	char *const *argv;        /* the command and its arguments,
	                             NULL-terminated, found in PATH */
	stg_budget_fn budget;     /* told of each look at the time budget */
	void *budget_arg;         /* (may be NULL) */
	/* Python envs served at their own paths on this node for the
	 * command's lifetime (stg_env_spawn, tied), after the mounts */
	const char *const *envs;
	size_t n_envs;
} stg_run_opts;

STG_API void stg_run_opts_init(stg_run_opts *opts);

typedef struct stg_run_result {
	int status;          /* the command's exit status as a shell reports
	                        it (128+N: killed by signal N; 127: not found,
	                        126: not runnable) */
	int stopped;         /* a terminating signal reached stg_run */
	stg_err collect_err; /* STG_OK, or the first collect that failed */
} stg_run_result;

/*
 * A batch job's wrapper (`stager run`): stage, run a command, collect its
 * results, clean up.  In order: the job directory ($SLURM_TMPDIR, see
 * stg_job_tmpdir, else SCRATCH_ROOT/jobs/OWNER), exported as
 * STAGER_JOB_DIR; each of stages staged and exported as STAGER_DATA,
 * STAGER_DATA_2, ... (with a trailing '/'); each of mounts mounted and
 * exported as STAGER_MOUNT, STAGER_MOUNT_2, ...; each collect source made and
 * exported as STAGER_OUT, STAGER_OUT_2, ..., and recorded as pending
 * (stg_results_pending); kept results of earlier jobs on this node
 * collected to their dest (stg_collect_kept) by a child at idle I/O
 * priority; then the command, and stg_run waits for it.  (It waits for
 * that child too, once the command has ended and its own results are
 * collected; a terminating signal stops the child, the rest stays kept,
 * and the log says so.)  The exports are setenv() in this process, for the
 * command to inherit.
 *
 * While the command runs: SIGTERM, SIGINT and SIGHUP are passed on to it
 * (not when a terminal sent them to the whole process group), and after
 * grace seconds what it has made is collected while it goes on; SIGUSR1
 * and SIGUSR2 (Slurm's early warning) collect at once and are passed on
 * only to a command that catches them (its SigCgt in /proc), since by
 * default they kill.  Collects also come every `every` seconds and, in a
 * Slurm job, on their own once the time limit nears and the last collect
 * would no longer fit after it (stg_job_clock); these run in a child at
 * idle I/O priority, one at a time.  When the command has ended: a final
 * collect at normal priority (after a terminating signal, each waits at
 * most 10 s for a shared-FS slot), which a second terminating signal
 * cancels (what it sent stays whole).  Results not all collected are
 * moved to kept/ (stg_keep_results) and named in the log; then the
 * mounts are unmounted (always, and first: a mount's process ignores the
 * job's signals, so the command keeps its data until it ends; files it
 * left open stay readable until they are closed), the links to the cache,
 * the collected sources stg_run made, its empty job directory and its
 * pins are removed.
 *
 * Signals: from the moment the command starts until stg_run returns, it
 * takes SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 and SIGCHLD: blocked
 * and waited for (sigtimedwait), during the final collect by a thread of
 * its own; it restores their handlers and the mask before it returns.  In
 * a program with other threads, those must block them too.  Before the
 * command starts (staging), the caller's handlers are in force: to have a
 * signal interrupt staging, call stg_cancel(ctx) from them.
 *
 * What it does is told through the log, and every failure as
 * STG_LOG_ERROR when it happens, the one it returns too (those of the
 * other nodes' stagers, with all_nodes, by them on stderr): a caller that
 * shows the log need not show it again.  Returns STG_OK once the command
 * ran (res says how it ended), else what kept it from running.  cfg is
 * the configuration cache was opened with.
 */
STG_API stg_err stg_run(stg_ctx *ctx, stg_cache *cache, const stg_config *cfg,
                        const stg_run_opts *opts, stg_run_result *res);

/* ---- checking a node ---------------------------------------------------- */

typedef enum stg_check_level {
	STG_CHECK_OK = 0,
	STG_CHECK_WARN = 1,
	STG_CHECK_FAIL = 2,
} stg_check_level;

/* One check of stg_doctor; the strings are valid during the call. */
typedef struct stg_check {
	stg_check_level level;
	const char *name;  /* what was checked: "scratch root", "reader slots",
	                      "shared filesystem", ... */
	const char *found; /* what was found, with its figures */
	const char *fix;   /* what to do about a warning or failure (NULL for
	                      ok) */
} stg_check;

typedef void (*stg_check_fn)(void *arg, const stg_check *check);

/*
 * Is this node set up right for stager (`stager doctor`)?  Each check is
 * handed to fn as it is made: the configuration; the scratch root (its
 * filesystem, privacy, write and read throughput, free space and inodes
 * against min_free; if the cache cannot be opened, that is told in the
 * log and fails the check); Slurm (the job, the job's scratch variable,
 * squeue, srun and sbcast); the node's reader slots and the cluster's
 * leases; and each of paths on the shared filesystem (none: $HOME) - its
 * filesystem, the cost of a stat() and the read throughput of the file or
 * of the largest file near the top of the directory, probed in a child
 * process that fails the check if it has not answered within 30 s.  It
 * writes only its own probe files (.doctor.PID) and removes them.
 */
STG_API stg_err stg_doctor(stg_ctx *ctx, const stg_config *cfg, const char *const *paths,
                           size_t n_paths, stg_check_fn fn, void *arg);

/*
 * The node's shared places, which no user can make safely for the others
 * (`stager doctor --prepare`, which the Slurm prolog runs as root before
 * every job; stg_doctor makes these checks first): the shared parent of
 * the users' scratch roots (from the site's scratch_root: /scratch/stager
 * in /scratch/stager/$USER) and the reader slots' slot_dir.  As root, a
 * missing one is made, root's and mode 01777 like /tmp (the scratch roots'
 * parent only where its own parent exists), and the check says "created";
 * for anyone, each is checked on a descriptor opened without following a
 * link: a directory, root's (one another user made is named with its
 * owner and left alone), mode 01777.  Each check is handed to fn.
 */
STG_API stg_err stg_doctor_prepare(stg_ctx *ctx, const stg_config *cfg, stg_check_fn fn, void *arg);

/* Options of stg_doctor_hooks(); initialise with
 * stg_doctor_hooks_opts_init(). */
typedef struct stg_doctor_hooks_opts {
	const char *dir;  /* the hooks are DIR/prolog, DIR/task-prolog and
	                     DIR/epilog, as `make install` puts them in
	                     PREFIX/libexec/stager; NULL: those slurm.conf
	                     names (Prolog, TaskProlog, Epilog, from
	                     `scontrol show config`) */
	const char *user; /* the fake job's user; NULL: "nobody" */
	unsigned timeout; /* seconds each hook may run before it is killed
	                     (0: 60) */
} stg_doctor_hooks_opts;

STG_API void stg_doctor_hooks_opts_init(stg_doctor_hooks_opts *opts);

/* What a check of stg_doctor_hooks found out about one hook: its file
 * (ran 0), or its run (ran 1); or, for the check of the job's directory
 * (hook NULL), only job_dir and job_dir_left.  Valid during the call. */
typedef struct stg_hook_result {
	const char *hook; /* "prolog", "task-prolog", "epilog"; NULL: the job's
	                     directory */
	const char *path; /* the hook's file, as named */
	int ran;          /* 1: it was run; 0: its file was checked */
	unsigned mode;    /* the file's permission bits (0 if missing) */
	long owner;       /* the file's owner's uid (-1 if missing) */
	const char *user; /* whom it ran as ("root" or the job's user) */
	const char *job;  /* the fake job's id */
	int exit_status;  /* its exit status; -1 if it did not exit */
	int signal;       /* the signal that ended it, or 0 */
	int timed_out;    /* 1: killed after opts.timeout seconds */
	double seconds;   /* how long it ran */
	/* its stdout and stderr, line by line; a task prolog's "export
	 * NAME=VALUE" lines, as "NAME=VALUE" */
	const char *const *out_lines;
	size_t n_out;
	const char *const *err_lines;
	size_t n_err;
	const char *const *exports;
	size_t n_exports;
	const char *job_dir; /* the job's directory (the task prolog's
	                        SLURM_TMPDIR up to the job's id), or NULL */
	int job_dir_left;    /* 1: it was still there after the epilog */
} stg_hook_result;

/* A check of stg_doctor_hooks, with what it found out about the hook (or
 * NULL: a check of none in particular). */
typedef void (*stg_hook_check_fn)(void *arg, const stg_check *check, const stg_hook_result *hook);

/*
 * Are this node's Slurm hooks set up right (`stager doctor` as root)?
 * Run as anyone but root, it hands fn one check that says it was skipped.
 * The hooks are opts->dir's, or slurm.conf's (a glob in Prolog or Epilog
 * names several; Slurm unreachable or naming none is a warning, and so
 * is a Prolog without PrologFlags=Alloc).  Each hook's file must exist,
 * be executable, and it and every directory above it be root's and not
 * writable by group or others (slurmd runs it as root): else it fails
 * and is not run.  Then a round trip for a fake job, each hook run as
 * slurmd runs it: execve() with nothing in the environment but the job's
 * SLURM_* variables (no PATH, no HOME), working directory /, stdin
 * /dev/null, stdout and stderr kept, in a process group of its own that
 * is killed after opts->timeout seconds.  The job's id is
 * 4294967000 + (pid % 256), above any id Slurm gives, digits only; its
 * user opts->user.  The prolog as root (it must exit 0), the task prolog
 * as the job's user (exit 0; the SLURM_TMPDIR it exports, if any, must
 * be a directory of that user's, in which the user then puts a file, as
 * a job would), the epilog as root (exit 0 and nothing on stderr, and the
 * job's directory - SLURM_TMPDIR up to the job's id - gone after it).
 * What the round trip left of the job's directory is removed (its
 * contents as their owner, never through a link, and only under a
 * directory of root's that others cannot write).  STG_EUSAGE if the
 * user does not exist; STG_EINTR if ctx was cancelled (the running hook
 * is killed); else STG_OK, whatever the checks found.
 */
STG_API stg_err stg_doctor_hooks(stg_ctx *ctx, const stg_doctor_hooks_opts *opts,
                                 stg_hook_check_fn fn, void *arg);

/* ---- push, pull and serve ------------------------------------------------ */

typedef struct stg_xfer_opts {
	const char *rsh;           /* the transport command, split into words
	                              ('...' and "..." quote); NULL: "ssh" */
	const char *remote_stager; /* the far end's stager; NULL: "stager" */
	uint64_t bwlimit;          /* bytes per second written to and read from
	                              the connection (0: no limit); reading
	                              slower holds the sender back */
	int level;                 /* zstd level of the data sent (0: 3) */
	int pack;                  /* stg_push: the far end stores PATH.tar.zst
	                              (PATH if it ends so), a verified pack,
	                              instead of a tree */
	int replace;               /* an existing directory at the destination
	                              that stager did not publish, and that is
	                              not empty, is replaced (never a home
	                              directory); without it, STG_EEXIST */
	int io_timeout;            /* seconds a read from or a write to the far
	                              end may wait (0: 120; < 0: no bound); a
	                              far end that speaks protocol 3 sends a
	                              keepalive while busy, so only a stalled
	                              or lost one hits it; with an older far
	                              end it bounds only a message begun */
	int checksum;              /* read every file on both ends to hash it
	                              (rsync -c): nothing is taken from the
	                              stat-keyed indexes; the far end must be
	                              a stager that knows it */
	const char *index_dir;     /* the sender's index of the files it read
	                              (their inode, size, mtime, ctime, mode and
	                              XXH3), made 0700 if absent: a file whose
	                              stat is unchanged is not read again (NULL:
	                              none, every file read); stg_serve_with
	                              takes it for pulls from it.  The
	                              receiver's index is beside the record
	                              (".stager-index.NAME") */
} stg_xfer_opts;

STG_API void stg_xfer_opts_init(stg_xfer_opts *opts);

/* What a transfer did.  Both ends fill it. */
typedef struct stg_xfer_result {
	uint64_t files, dirs, links; /* in the tree */
	uint64_t content_bytes;      /* bytes of file content in the tree */
	uint64_t whole_files;        /* sent whole (compressed) */
	uint64_t delta_files;        /* sent as a librsync delta */
	uint64_t reused_files;       /* already at the receiver (whole, in the
	                                tree or kept by a cut transfer) */
	uint64_t sent_content;       /* content bytes of the files sent */
	uint64_t wire_out, wire_in;  /* bytes written to and read from the
	                                connection, framing included */
	double seconds;
	uint64_t hashed_files;  /* files this end read to hash them (to make
	                           the manifest, or to compare with it), not
	                           counting those it sent or received */
	uint64_t resumed_files; /* resumed within: the receiver kept their
	                           first bytes from a cut transfer, and only
	                           the rest was sent (whole or as a delta);
	                           counted in neither whole_files nor
	                           delta_files */
	uint64_t resumed_bytes; /* the bytes of those that were not sent
	                           again */
} stg_xfer_result;

/*
 * Send the directory local to remote, "[USER@]HOST:PATH", through the
 * transport (`ssh HOST stager serve`) and the far end's stg_serve():
 * only what PATH lacks crosses (librsync deltas against its files, whole
 * compressed files for new ones, nothing for files it has); every file is
 * checked against its XXH3-128 and the whole tree against the sender's
 * SHA-256 before PATH is switched, in one step, to the new version.  An
 * interrupted push leaves PATH as it was and its completed files in the
 * partial directory beside it (".stager-partial.NAME"), which the next
 * push reuses.  PATH's parent must exist.  A PATH written as a directory
 * (ending in "/", or "~", "." or "..") means into it: PATH/NAME, NAME
 * being local's last component.  An existing PATH is replaced only if
 * stager published it and it has not changed at its top level since (the
 * record ".stager-published.NAME" beside it, the user's own file, holds
 * its inode, ctime and birth time; it is also the lock that makes two
 * transfers to one PATH take turns), it is empty, or opts->replace is set;
 * PATH is checked again just before the switch.  Errors: STG_ENOENT
 * (local missing), STG_EUSAGE (local is not a directory), STG_EEXIST
 * (PATH exists and may not be replaced), STG_EREMOTE (transport or far
 * end), STG_ECORRUPT (data damaged in transit; nothing published),
 * STG_ENOSPC (no room at the far end), STG_EIO (a file of local changed
 * while it was sent), STG_EINTR.  The caller should ignore SIGPIPE.
 */
STG_API stg_err stg_push(stg_ctx *ctx, const char *local, const char *remote,
                         const stg_xfer_opts *opts, stg_xfer_result *res);
/* The reverse: the far end sends PATH, local is built and switched the
 * same way (local ending in "/", or ".", "..", means into it). */
STG_API stg_err stg_pull(stg_ctx *ctx, const char *remote, const char *local,
                         const stg_xfer_opts *opts, stg_xfer_result *res);
/* The same over a connection the caller made: read from in, write to out,
 * with stg_serve() at the other end; path is the far end's PATH. */
STG_API stg_err stg_push_fd(stg_ctx *ctx, const char *local, const char *path, int in, int out,
                            const stg_xfer_opts *opts, stg_xfer_result *res);
STG_API stg_err stg_pull_fd(stg_ctx *ctx, const char *path, const char *local, int in, int out,
                            const stg_xfer_opts *opts, stg_xfer_result *res);
/* The far end: answer one push or pull on in/out.  Errors are also sent to
 * the client. */
STG_API stg_err stg_serve(stg_ctx *ctx, int in, int out, stg_xfer_result *res);
/* The same with opts (only io_timeout and index_dir count: the client
 * asks the rest). */
STG_API stg_err stg_serve_with(stg_ctx *ctx, int in, int out, const stg_xfer_opts *opts,
                               stg_xfer_result *res);

/* ---- mounting a pack ----------------------------------------------------- */

/*
 * A pack served as a read-only tree through FUSE, straight from its
 * trailer: no copy and no index.  Mounting reads the trailer alone (one
 * read at the end of the pack, two for a large manifest); a read fetches,
 * checks and decodes only the frames it needs, within the shared-FS slots
 * and the bandwidth limit, keeping decoded frames in a bounded memory
 * cache.  No byte is served unchecked: a frame of a format 3 pack must match
 * its XXH3-128 in the frame table; a file of an older pack is checked whole
 * against its manifest hash before any of it is served.  A damaged frame
 * makes the reads that need it fail with EIO (logged once); the rest stays
 * readable.  A pack the node cache holds is served from the cache's entry,
 * pinned while mounted.  The pack stays open: replaced by a rename, the
 * mounted version goes on being served; changed in place, reads of what is
 * not cached fail with ESTALE, so the two versions never mix.
 */
typedef struct stg_mount stg_mount;

typedef struct stg_mount_opts {
	uint64_t cache_bytes; /* decoded frames kept in memory (0: 256 MiB) */
	int keep_frames;      /* also keep the frames fetched in the node cache
	                         (an entry "<digest>-f" of kind "frames", within
	                         the cache's quota, least recently used out
	                         first), read from there by later mounts of the
	                         pack; packs of format 3 only (a warning for
	                         older ones) */
} stg_mount_opts;

STG_API void stg_mount_opts_init(stg_mount_opts *opts);

#define STG_MOUNT_MAX_PACKS 10000 /* packs one mount serves, at most */

/* Open the n packs, build their tree and mount it on mountpoint (an empty
 * directory of the caller's); the mount is there when this returns, and is
 * served by stg_mount_serve in this process.  Several packs (shards of a
 * dataset, say) make one tree: a directory that two of them hold is one
 * directory (with the attributes of the first pack that lists it); any
 * other path that two of them hold is refused (STG_EUSAGE, naming it and
 * both packs), as is a pack given twice or, among several, a pack of
 * format 1 or 2.  STG_ENOENT (a pack missing), STG_ECORRUPT (not a pack,
 * or one a stage would refuse), STG_EUSAGE (mountpoint not an empty
 * directory; more packs than the open-file limit allows), STG_EIO (FUSE
 * could not mount). */
STG_API stg_err stg_mount_open(stg_ctx *ctx, stg_cache *cache, const char *const *packs,
                               size_t n_packs, const char *mountpoint, const stg_mount_opts *opts,
                               stg_mount **out);
/* Serve requests (several threads) until the mount is unmounted
 * (stg_umount, `fusermount3 -u`) or stg_mount_stop is called.  Messages
 * (damaged frames, a changed pack) go to ctx's log callback; ctx must not
 * be used by the caller meanwhile. */
STG_API stg_err stg_mount_serve(stg_mount *m);
/* Make stg_mount_serve return soon.  Async-signal-safe. */
STG_API void stg_mount_stop(stg_mount *m);
/* Unmount (if still mounted) and free. */
STG_API void stg_mount_close(stg_mount *m);
/* Open, mount and serve in this process until the mount is unmounted or a
 * stop signal (SIGTERM, SIGINT, SIGHUP) comes, then unmount and close.
 * The signals are caught from before the mount appears: one sent as soon
 * as the tree shows stops the serving, rather than ending the process with
 * a dead mount left behind; so does a ctx cancelled (stg_cancel) before
 * the serving begins.  A stop signal also cancels ctx, so that one during
 * the opening (a wait for a reader slot, say) ends it at once (STG_EINTR).
 * SIGINT and SIGHUP stay ignored if they were; SIGPIPE is ignored until
 * return.  ready(arg), if given, is called once the tree can be read.
 * Inside a Slurm job (SLURM_JOB_ID) it also ends when the job does: the
 * job's batch shell, looked for at the call from this process up (or,
 * from a step of srun, among the job's processes on this node), is
 * watched; without one, Slurm is asked every 30 s.  The mount's record
 * names the job (stg_mount_info.job).
 * Errors as stg_mount_open's and stg_mount_serve's; the signals' handlers
 * are as they were on return.  One such call at a time in a process (the
 * signals are the process's). */
STG_API stg_err stg_mount_foreground(stg_ctx *ctx, stg_cache *cache, const char *const *packs,
                                     size_t n_packs, const char *mountpoint,
                                     const stg_mount_opts *opts, void (*ready)(void *arg),
                                     void *arg);

/*
 * Mount the packs on mountpoint in a child process that serves them, and return
 * once the tree can be read (*pid: the child), or with the child's error
 * and message.  The child's messages go to SCRATCH_ROOT/mounts/log.
 * tied: the mount lives as long as *tie_fd, which the caller keeps: when
 * it is closed (or the caller dies) the child unmounts, lazily, and ends;
 * the child ignores SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2, the
 * signals a batch job's processes get (and SIGPIPE), so that a command keeps its data
 * until the caller ends the mount.  Untied (tie_fd may be NULL): the child
 * has a session of its own, outlives the caller, and ends on SIGTERM,
 * SIGINT or SIGHUP (as stg_mount_foreground), when unmounted (stg_umount),
 * or, inside a Slurm job, when the job ends (as stg_mount_foreground).
 */
STG_API stg_err stg_mount_spawn(stg_ctx *ctx, stg_cache *cache, const char *const *packs,
                                size_t n_packs, const char *mountpoint, const stg_mount_opts *opts,
                                int tied, int *pid, int *tie_fd);

/* Unmount the stager mount at mountpoint (lazily: it goes once its last
 * open file is closed).  With a cache, waits up to 3 s for the mount's
 * process to end, so that on return it no longer holds the pack open
 * unless a file in the mount is still open (said at STG_LOG_INFO).
 * STG_EUSAGE if it is not a stager mount of the caller's. */
STG_API stg_err stg_umount(stg_ctx *ctx, stg_cache *cache, const char *mountpoint);

/* A mount of this cache's user: where, of what, by which process, and
 * whether that process lives and the mount is still there.  A mount made
 * inside a Slurm job (SLURM_JOB_ID) ends with the job: its serving
 * process watches the job's batch shell (or asks Slurm), and `stager
 * clean --job ID` (the epilog) or a clean after the job ends it. */
typedef struct stg_mount_info {
	char *mountpoint, *pack, *owner; /* pack: the first of a mount of several */
	char digest[STG_DIGEST_HEXLEN + 1];
	size_t n_packs; /* how many it serves */
	int alive, mounted;
	char *job;              /* the Slurm job it was made in, or NULL */
	int job_over;           /* 1: Slurm says that job is over; 0: it is not; -1: unknown */
	unsigned long long env; /* a Python env's server (stg_env_spawn): its
	                           mount namespace's id; 0: a mount of packs */
} stg_mount_info;

/* The mounts recorded under the scratch root; free with
 * stg_mount_list_free. */
STG_API stg_err stg_mount_list(stg_ctx *ctx, stg_cache *cache, stg_mount_info **v, size_t *n);
STG_API void stg_mount_list_free(stg_mount_info *v, size_t n);

/* ---- a Python environment served from the node -------------------------- */

/*
 * A job's Python environment (a venv or a conda prefix: ENV_DIR on the
 * shared filesystem) served on this node at its own absolute path, so
 * that shebangs, pyvenv.cfg, .pth files, RPATHs and conda's hard-coded
 * prefixes work unchanged: its pack, ENV_DIR.tar.zst (stg_env_pack; made
 * by stg_pack_dir), staged into the node cache (single flight, pinned
 * while served, evicted under the quota) and mounted read-only over
 * ENV_DIR with FUSE, by the user, for every process of this node.  Other
 * nodes see the shared filesystem.  The mount is shared by every server
 * of the same pack on the node (one per job, say), and unmounted by the
 * last to end.  Never stale: an env whose bin, lib, conda-meta or
 * lib/pythonX.Y/site-packages directories changed after its pack (a
 * package installed, removed or upgraded) is refused, STG_ENOENT, with
 * the command that packs it again; as is one with no pack.  STG_ENOTSUP:
 * FUSE is not available here (no /dev/fuse, or no fusermount3): nothing
 * is served, and the env as the shared filesystem has it is the only
 * one (stg_run and `stager env` go on with it, saying so).  STG_EIO:
 * another version of the pack is served at ENV_DIR on this node (by
 * another job: one path shows one version), or FUSE could not mount.  STG_EUSAGE: ENV_DIR is not
 * a directory of the caller's.  Otherwise as stg_mount_open.
 */
/* ENV_DIR's pack: ENV_DIR (without a trailing '/') + ".tar.zst";
 * malloc'ed, NULL if out of memory. */
STG_API char *stg_env_pack(const char *env_dir);
/* As stg_mount_foreground: served in this process until a stop signal,
 * or the Slurm job's end. */
STG_API stg_err stg_env_foreground(stg_ctx *ctx, stg_cache *cache, const char *env_dir,
                                   void (*ready)(void *arg), void *arg);
/* As stg_mount_spawn: served by a child process, tied to *tie_fd (run's)
 * or until a stop signal or the job's end.  A tied server that ends
 * unmounts only if it was the last. */
STG_API stg_err stg_env_spawn(stg_ctx *ctx, stg_cache *cache, const char *env_dir, int tied,
                              int *pid, int *tie_fd);
/* Served on every node of the Slurm job until it ends: here as
 * stg_env_spawn untied (*pid), on the job's other nodes by a step of its
 * own that lasts the job (srun --overlap of `stager env --foreground
 * --node-ready` per node: fo's program), started in the background and
 * left running once each node serves it.  All or nothing: STG_EREMOTE
 * naming a node that cannot (its reason), and nothing served anywhere.
 * In a job of one node, or none, stg_env_spawn. */
STG_API stg_err stg_env_all_nodes(stg_ctx *ctx, stg_cache *cache, const char *env_dir,
                                  const stg_fanout_opts *fo, int *pid);

/* ---- helpers ---------------------------------------------------------- */

/* Parse a size: digits with an optional fraction ("1.5"), then an optional
 * K M G T suffix (powers of 1024, optional "iB"/"B").  0 on success, -1 if
 * malformed (signs, spaces, exponents, hex, inf, nan) or 2^64 or more. */
STG_API int stg_parse_size(const char *s, uint64_t *out);

/* Parse a duration, digits with an optional fraction and an optional
 * s m h d suffix, into seconds; -1 if malformed or 10^15 s or more. */
STG_API int stg_parse_duration(const char *s, uint64_t *seconds);

/*
 * A path with sbatch's file-name patterns filled in from the job's
 * environment, so each job or array task collects to its own place:
 * %j the job id (SLURM_JOB_ID), %A the array's job id (SLURM_ARRAY_JOB_ID),
 * %a the array task id (SLURM_ARRAY_TASK_ID), %N the node's name
 * (SLURMD_NODENAME, else the host's short name), %n the node's index in the
 * job (SLURM_NODEID), %u the user, %x the job's name (SLURM_JOB_NAME), %%
 * a '%'.  A pattern whose variable is not set, or an unknown one, is
 * STG_EUSAGE, named on ctx: a path is never quietly shared by jobs meant to
 * be apart.  *out is malloc'ed.
 */
STG_API stg_err stg_expand_pattern(stg_ctx *ctx, const char *pattern, char **out);

/* Give this process idle I/O priority (idle != 0) or the normal one back,
 * for background work such as periodic collection.  0 or -1/errno. */
STG_API int stg_io_idle(int idle);

/* Format bytes as "12.3 MiB" into buf (at least 16 bytes). */
STG_API const char *stg_format_size(uint64_t bytes, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* LIBSTAGE_H */
