/*
 * sharedfs - a FUSE passthrough with the costs of a shared (NFS) filesystem,
 * for benchmarks and tests of stager.
 *
 *   sharedfs [--delay-ms MS] [--bw RATE] [--attr-timeout S] [--direct-io]
 *            [--pass-direct] [--foreground] BACKING_DIR MOUNTPOINT
 *
 * MOUNTPOINT shows BACKING_DIR.  The costs:
 *
 *   - latency: every operation but read, write, flush, release and
 *     releasedir is a "metadata operation", one NFS RPC (LOOKUP and GETATTR
 *     both arrive as getattr), and sleeps --delay-ms before its work
 *     (default 0.5 ms, a LAN round trip).  Concurrent sleeps overlap, as
 *     RPCs in flight do; up to 10 requests (libfuse's threads) at once.
 *   - bandwidth: the bytes read and written pass one token bucket shared by
 *     all threads (default 1 GiB/s, a 10 Gb/s link) that holds 10 ms worth;
 *     a caller that overdraws it sleeps, outside the lock, until its bytes
 *     would have crossed the link.
 *
 * Caching as on NFS: attributes and names are kept --attr-timeout seconds
 * (default 1, a short actimeo), failed lookups not at all, and the page
 * cache is dropped at each open (close-to-open).  --direct-io bypasses the
 * page cache altogether, so every read reaches the counters: the "nodes" of
 * a test cluster on one machine would otherwise share the host's cache.
 * A caller's O_DIRECT bypasses the client's page cache only, as on NFS:
 * the server reads its own files as it always does (--pass-direct passes
 * it on to BACKING_DIR's files, as a plain passthrough does, so that a
 * disk that wants aligned direct I/O refuses the reads with EINVAL).  An
 * open file that is unlinked becomes .fuse_hiddenNNN until closed, as with
 * NFS's .nfsNNN.
 * Unlike NFS, open does not revalidate attributes: a file changed through
 * another hard link, another mount or BACKING_DIR may show its old size for
 * up to --attr-timeout seconds.  Inode numbers are the backing ones.  Run
 * as root, the mount is for all users (allow_other; the kernel checks
 * permissions) and new entries belong to the user who made them.
 *
 * Counters: the virtual file MOUNTPOINT/.sharedfs-stats (not listed, not
 * in BACKING_DIR, itself neither counted nor delayed) reads as "key value"
 * lines: meta_ops, read_calls, write_calls, bytes_read, bytes_written,
 * open_now, open_max, open_read_now, open_read_max (handles from open and
 * create; "read" ones are O_RDONLY), then one line per operation (getattr,
 * open, ...).  Writing "reset" to it zeroes them; the open_*_max restart
 * from open_*_now.  Writing "fail OP ERRNO N" (OP write, create or
 * rename; ERRNO EIO, ESTALE, EAGAIN, ENOSPC or EDQUOT) makes the next N
 * such operations fail with that error: faults for tests of retries.  The
 * path to the file is counted, though: once the root's attributes are
 * --attr-timeout old, the kernel asks for them again (a getattr of "/")
 * before it opens anything under the mount, this file too.
 *
 * Exit status: 0 after a clean unmount, 1 usage error, 2 cannot mount.
 */
#define FUSE_USE_VERSION 31

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 1
#define EXIT_MOUNT 2

#define STATS_NAME ".sharedfs-stats"
#define STATS_PATH "/" STATS_NAME

/* ---- settings ------------------------------------------------------------ */

static long delay_ns = 500000;           /* per metadata operation */
static double bw = 1024.0 * 1024 * 1024; /* bytes/s; 0 = unlimited */
static double attr_timeout = 1.0;        /* seconds */
static int direct_io;                    /* --direct-io */
static int pass_direct;                  /* --pass-direct */
static int bfd = -1;                     /* the backing directory */
static int as_root;                      /* mounted allow_other */
static struct stat stats_st;             /* the stats file's attributes */

/* ---- counters ------------------------------------------------------------ */

/* The lines of the stats file, in order: totals, then one per operation. */
/* clang-format off */
#define COUNTERS(X)                                                                                \
	X(meta_ops) X(read_calls) X(write_calls) X(bytes_read) X(bytes_written)                    \
	X(open_now) X(open_max) X(open_read_now) X(open_read_max)                                  \
	X(getattr) X(readlink) X(mknod) X(mkdir) X(unlink) X(rmdir) X(symlink) X(rename) X(link)   \
	X(chmod) X(chown) X(truncate) X(open) X(read) X(write) X(statfs) X(flush) X(release)       \
	X(fsync) X(opendir) X(readdir) X(releasedir) X(fsyncdir) X(access) X(create) X(utimens)    \
	X(fallocate)
/* clang-format on */
#define C_ENUM(name) C_##name,
#define C_NAME(name) #name,
enum counter_id { COUNTERS(C_ENUM) N_COUNTERS };
static const char *const counter_names[N_COUNTERS] = {COUNTERS(C_NAME)};

static _Atomic uint64_t cnt[N_COUNTERS];

static void add(enum counter_id c, uint64_t n)
{
	atomic_fetch_add_explicit(&cnt[c], n, memory_order_relaxed);
}

static void raise_max(enum counter_id max, uint64_t v)
{
	uint64_t m = atomic_load(&cnt[max]);
	while (v > m && !atomic_compare_exchange_weak(&cnt[max], &m, v))
		;
}

static void opened(int flags)
{
	raise_max(C_open_max, atomic_fetch_add(&cnt[C_open_now], 1) + 1);
	if ((flags & O_ACCMODE) == O_RDONLY)
		raise_max(C_open_read_max, atomic_fetch_add(&cnt[C_open_read_now], 1) + 1);
}

static void closed(int flags)
{
	atomic_fetch_sub(&cnt[C_open_now], 1);
	if ((flags & O_ACCMODE) == O_RDONLY)
		atomic_fetch_sub(&cnt[C_open_read_now], 1);
}

/* The open_*_now gauges stay.  Operations racing with a reset may land on
 * either side of it; that is fine for counters read between runs. */
static void reset_counters(void)
{
	for (int i = 0; i < N_COUNTERS; i++)
		if (i != C_open_now && i != C_open_read_now)
			atomic_store(&cnt[i], 0);
	atomic_store(&cnt[C_open_max], atomic_load(&cnt[C_open_now]));
	atomic_store(&cnt[C_open_read_max], atomic_load(&cnt[C_open_read_now]));
}

/* ---- costs --------------------------------------------------------------- */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ns(long ns)
{
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A metadata operation: counted, then one round trip of latency. */
static void meta(enum counter_id op)
{
	add(op, 1);
	add(C_meta_ops, 1);
	if (delay_ns > 0)
		sleep_ns(delay_ns);
}

static struct bucket {
	pthread_mutex_t mu;
	double tokens; /* bytes; negative while callers wait for the link */
	double last;   /* when tokens were last refilled */
} bucket = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Charge n bytes to the link.  Each caller takes its bytes at once, so the
 * debt grows with the queue and each one sleeps until its turn is over. */
static void charge(size_t n)
{
	if (bw <= 0 || n == 0)
		return;
	double burst = bw / 100;
	pthread_mutex_lock(&bucket.mu);
	double t = now();
	bucket.tokens += (t - bucket.last) * bw;
	if (bucket.tokens > burst)
		bucket.tokens = burst;
	bucket.last = t;
	bucket.tokens -= (double)n;
	double wait = bucket.tokens < 0 ? -bucket.tokens / bw : 0;
	pthread_mutex_unlock(&bucket.mu);
	if (wait > 0)
		sleep_ns((long)(wait * 1e9));
}

/* ---- the stats file ------------------------------------------------------ */

static int is_stats(const char *path)
{
	return path && !strcmp(path, STATS_PATH);
}

/* Reads see the counters as they were at open, however they are split;
 * fh holds the text. */
static int stats_open(struct fuse_file_info *fi)
{
	fi->direct_io = 1; /* the size is 0; read until EOF anyway */
	fi->fh = 0;
	if ((fi->flags & O_ACCMODE) == O_WRONLY)
		return 0;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	for (int i = 0; i < N_COUNTERS; i++)
		fprintf(f, "%s %" PRIu64 "\n", counter_names[i], atomic_load(&cnt[i]));
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	fi->fh = (uintptr_t)text;
	return 0;
}

static int stats_read(char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	const char *text = (const char *)(uintptr_t)fi->fh;
	size_t len = text ? strlen(text) : 0;
	if (off < 0 || (size_t)off >= len)
		return 0;
	size_t n = len - (size_t)off < size ? len - (size_t)off : size;
	memcpy(buf, text + off, n);
	return (int)n;
}

/* Injected faults: the next fault_n[op] operations fail with fault_err[op]. */
enum { F_write, F_create, F_rename, F_N };
static const char *const fault_ops[F_N] = {"write", "create", "rename"};
static atomic_int fault_n[F_N], fault_err[F_N];

static int fault(int op)
{
	int n = atomic_load(&fault_n[op]);
	while (n > 0)
		if (atomic_compare_exchange_weak(&fault_n[op], &n, n - 1))
			return -atomic_load(&fault_err[op]);
	return 0;
}

/* "fail OP ERRNO N" */
static int set_fault(const char *line)
{
	static const struct {
		const char *name;
		int err;
	} errs[] = {{"EIO", EIO},
	            {"ESTALE", ESTALE},
	            {"EAGAIN", EAGAIN},
	            {"ENOSPC", ENOSPC},
	            {"EDQUOT", EDQUOT}};
	char op[16], err[16];
	int n;
	if (sscanf(line, "fail %15s %15s %d", op, err, &n) != 3 || n < 0)
		return -EINVAL;
	for (int i = 0; i < F_N; i++) {
		if (strcmp(op, fault_ops[i]))
			continue;
		for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++) {
			if (!strcmp(err, errs[e].name)) {
				atomic_store(&fault_err[i], errs[e].err);
				atomic_store(&fault_n[i], n);
				return 0;
			}
		}
	}
	return -EINVAL;
}

/* "reset" or a fault, with a newline or not */
static int stats_write(const char *buf, size_t size)
{
	size_t n = size;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r'))
		n--;
	char line[64];
	if (n >= sizeof line)
		return -EINVAL;
	memcpy(line, buf, n);
	line[n] = '\0';
	if (!strncmp(line, "fail ", 5)) {
		int rc = set_fault(line);
		return rc ? rc : (int)size;
	}
	if (strcmp(line, "reset"))
		return -EINVAL;
	reset_counters();
	return (int)size;
}

/* ---- helpers ------------------------------------------------------------- */

/* FUSE paths start with '/'; the backing ones are relative to bfd. */
static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

static int ret(int r)
{
	return r < 0 ? -errno : 0;
}

/* New entries belong to the caller, not to us (root); a parent directory
 * with the set-group-ID bit keeps its group, as the kernel would. */
static int give_to_caller(const char *path)
{
	struct fuse_context *c = fuse_get_context();
	if (!as_root || (c->uid == 0 && c->gid == 0))
		return 0;
	gid_t gid = c->gid;
	const char *slash = strrchr(path, '/');
	char parent[PATH_MAX];
	if (slash - path >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(parent, path, (size_t)(slash - path));
	parent[slash - path] = '\0';
	struct stat st;
	if (fstatat(bfd, slash == path ? "." : parent + 1, &st, 0) == 0 && (st.st_mode & S_ISGID))
		gid = (gid_t)-1;
	return ret(fchownat(bfd, rel(path), c->uid, gid, AT_SYMLINK_NOFOLLOW));
}

/* ---- operations ---------------------------------------------------------- */

static void *sfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	cfg->entry_timeout = attr_timeout;
	cfg->attr_timeout = attr_timeout;
	cfg->negative_timeout = 0;
	cfg->kernel_cache = 0; /* drop the page cache at open */
	cfg->auto_cache = 0;
	/* an unlink that arrives before the RELEASE of the file's last close
	 * (FUSE sends RELEASE asynchronously) would otherwise be a rename to
	 * .fuse_hidden*: an operation no client asked for, which an injected
	 * rename fault could hit */
	cfg->hard_remove = 1;
	return NULL;
}

static int sfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	if (is_stats(path)) {
		*st = stats_st;
		return 0;
	}
	meta(C_getattr);
	return ret(fstatat(bfd, rel(path), st, AT_SYMLINK_NOFOLLOW));
}

static int sfs_access(const char *path, int mask)
{
	if (is_stats(path))
		return 0;
	meta(C_access);
	return ret(faccessat(bfd, rel(path), mask, 0));
}

static int sfs_readlink(const char *path, char *buf, size_t size)
{
	meta(C_readlink);
	ssize_t n = readlinkat(bfd, rel(path), buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int sfs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	meta(C_mknod);
	if (mknodat(bfd, rel(path), mode, rdev) != 0)
		return -errno;
	return give_to_caller(path);
}

static int sfs_mkdir(const char *path, mode_t mode)
{
	meta(C_mkdir);
	if (mkdirat(bfd, rel(path), mode) != 0)
		return -errno;
	return give_to_caller(path);
}

static int sfs_symlink(const char *target, const char *path)
{
	meta(C_symlink);
	if (symlinkat(target, bfd, rel(path)) != 0)
		return -errno;
	return give_to_caller(path);
}

static int sfs_unlink(const char *path)
{
	if (is_stats(path))
		return -EPERM;
	meta(C_unlink);
	return ret(unlinkat(bfd, rel(path), 0));
}

static int sfs_rmdir(const char *path)
{
	meta(C_rmdir);
	return ret(unlinkat(bfd, rel(path), AT_REMOVEDIR));
}

static int sfs_rename(const char *from, const char *to, unsigned int flags)
{
	if (is_stats(from) || is_stats(to))
		return -EPERM;
	meta(C_rename);
	int f = fault(F_rename);
	return f ? f : ret(renameat2(bfd, rel(from), bfd, rel(to), flags));
}

static int sfs_link(const char *from, const char *to)
{
	if (is_stats(from) || is_stats(to))
		return -EPERM;
	meta(C_link);
	return ret(linkat(bfd, rel(from), bfd, rel(to), 0));
}

static int sfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)fi; /* may be a directory handle: always go by the path */
	if (is_stats(path))
		return -EPERM;
	meta(C_chmod);
	return ret(fchmodat(bfd, rel(path), mode, 0));
}

static int sfs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	(void)fi;
	if (is_stats(path))
		return -EPERM;
	meta(C_chown);
	return ret(fchownat(bfd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int sfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (is_stats(path))
		return 0; /* "> .sharedfs-stats" */
	meta(C_truncate);
	if (fi)
		return ret(ftruncate((int)fi->fh, size));
	int fd = openat(bfd, rel(path), O_WRONLY | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	int r = ret(ftruncate(fd, size));
	close(fd);
	return r;
}

static int sfs_utimens(const char *path, const struct timespec ts[2], struct fuse_file_info *fi)
{
	(void)fi;
	if (is_stats(path))
		return 0; /* touch */
	meta(C_utimens);
	return ret(utimensat(bfd, rel(path), ts, AT_SYMLINK_NOFOLLOW));
}

static int sfs_open(const char *path, struct fuse_file_info *fi)
{
	if (is_stats(path))
		return stats_open(fi);
	meta(C_open);
	int fd = openat(bfd, rel(path), pass_direct ? fi->flags : fi->flags & ~O_DIRECT);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	fi->direct_io = direct_io;
	opened(fi->flags);
	return 0;
}

static int sfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (is_stats(path))
		return -EEXIST;
	meta(C_create);
	int f = fault(F_create);
	if (f)
		return f;
	int fd = openat(bfd, rel(path), (pass_direct ? fi->flags : fi->flags & ~O_DIRECT) | O_CREAT,
	                mode);
	if (fd < 0)
		return -errno;
	int r = give_to_caller(path);
	if (r != 0) {
		close(fd);
		return r;
	}
	fi->fh = (uint64_t)fd;
	fi->direct_io = direct_io;
	opened(fi->flags);
	return 0;
}

static int sfs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (is_stats(path))
		return stats_read(buf, size, off, fi);
	add(C_read, 1);
	add(C_read_calls, 1);
	if (pass_direct) {
		/* as the caller has it now (fcntl may have changed it since open) */
		int fl = fcntl((int)fi->fh, F_GETFL);
		if (fl >= 0 && ((fl ^ fi->flags) & O_DIRECT))
			fcntl((int)fi->fh, F_SETFL, (fl & ~O_DIRECT) | (fi->flags & O_DIRECT));
	}
	ssize_t n = pread((int)fi->fh, buf, size, off);
	if (n < 0)
		return -errno;
	add(C_bytes_read, (uint64_t)n);
	charge((size_t)n);
	return (int)n;
}

static int sfs_write(const char *path, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
	if (is_stats(path))
		return stats_write(buf, size);
	add(C_write, 1);
	add(C_write_calls, 1);
	int f = fault(F_write);
	if (f)
		return f;
	ssize_t n = pwrite((int)fi->fh, buf, size, off);
	if (n < 0)
		return -errno;
	add(C_bytes_written, (uint64_t)n);
	charge((size_t)n);
	return (int)n;
}

static int sfs_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	meta(C_statfs);
	return ret(fstatvfs(bfd, st));
}

/* close(2) reports the errors of a delayed write-back, so close a copy. */
static int sfs_flush(const char *path, struct fuse_file_info *fi)
{
	if (is_stats(path))
		return 0;
	add(C_flush, 1);
	int fd = dup((int)fi->fh);
	if (fd < 0)
		return -errno;
	return ret(close(fd));
}

static int sfs_release(const char *path, struct fuse_file_info *fi)
{
	if (is_stats(path)) {
		free((void *)(uintptr_t)fi->fh);
		return 0;
	}
	add(C_release, 1);
	close((int)fi->fh);
	closed(fi->flags);
	return 0;
}

static int sfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	if (is_stats(path))
		return 0;
	meta(C_fsync);
	return ret(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static int sfs_fallocate(const char *path, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
	if (is_stats(path))
		return -EOPNOTSUPP;
	meta(C_fallocate);
	return ret(fallocate((int)fi->fh, mode, off, len));
}

static int sfs_opendir(const char *path, struct fuse_file_info *fi)
{
	meta(C_opendir);
	int fd = openat(bfd, rel(path), O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -ENOMEM;
	}
	fi->fh = (uintptr_t)dp;
	return 0;
}

/* The whole directory in one call (offset 0 to the filler): libfuse keeps
 * it for the following reads, as one READDIR reply of many entries. */
static int sfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)flags;
	meta(C_readdir);
	DIR *dp = (DIR *)(uintptr_t)fi->fh;
	int root = !strcmp(path, "/");
	rewinddir(dp);
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(dp);
		if (!e)
			return -errno;
		if (root && !strcmp(e->d_name, STATS_NAME))
			continue;
		struct stat st = {.st_ino = e->d_ino, .st_mode = DTTOIF(e->d_type)};
		if (fill(buf, e->d_name, &st, 0, 0) != 0)
			return -ENOMEM;
	}
}

static int sfs_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	add(C_releasedir, 1);
	closedir((DIR *)(uintptr_t)fi->fh);
	return 0;
}

static int sfs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	meta(C_fsyncdir);
	int fd = dirfd((DIR *)(uintptr_t)fi->fh);
	return ret(datasync ? fdatasync(fd) : fsync(fd));
}

static const struct fuse_operations sfs_ops = {
        .init = sfs_init,
        .getattr = sfs_getattr,
        .access = sfs_access,
        .readlink = sfs_readlink,
        .mknod = sfs_mknod,
        .mkdir = sfs_mkdir,
        .symlink = sfs_symlink,
        .unlink = sfs_unlink,
        .rmdir = sfs_rmdir,
        .rename = sfs_rename,
        .link = sfs_link,
        .chmod = sfs_chmod,
        .chown = sfs_chown,
        .truncate = sfs_truncate,
        .utimens = sfs_utimens,
        .open = sfs_open,
        .create = sfs_create,
        .read = sfs_read,
        .write = sfs_write,
        .statfs = sfs_statfs,
        .flush = sfs_flush,
        .release = sfs_release,
        .fsync = sfs_fsync,
        .fallocate = sfs_fallocate,
        .opendir = sfs_opendir,
        .readdir = sfs_readdir,
        .releasedir = sfs_releasedir,
        .fsyncdir = sfs_fsyncdir,
};

/* ---- main ---------------------------------------------------------------- */

static const char usage_text[] =
        "usage: sharedfs [OPTIONS] BACKING_DIR MOUNTPOINT\n"
        "Mounts BACKING_DIR on MOUNTPOINT with the costs of an NFS-like shared filesystem.\n"
        "  --delay-ms MS     sleep per metadata operation (default 0.5; 0 = none)\n"
        "  --bw RATE         bytes/s for reads and writes together, K/M/G suffixes are\n"
        "                    powers of 1024 (default 1G; 0 = unlimited)\n"
        "  --attr-timeout S  kernel attribute and name cache, seconds (default 1)\n"
        "  --direct-io       no page cache: every read and write reaches the counters\n"
        "  --pass-direct     a caller's O_DIRECT reaches BACKING_DIR's files too\n"
        "  -f, --foreground  do not daemonize\n"
        "Counters: cat MOUNTPOINT/" STATS_NAME "; echo reset > MOUNTPOINT/" STATS_NAME "\n"
        "Unmount with fusermount3 -u MOUNTPOINT.\n";

static void usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "sharedfs: %s '%s'\n%s", msg, arg, usage_text);
	exit(EXIT_USAGE);
}

/* A non-negative number, with a K/M/G/T suffix (powers of 1024) if binary. */
static double parse_num(const char *opt, const char *s, int binary)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || v != v)
		usage_error("bad value for", opt);
	const char *p = binary && *end ? strchr("KMGT", toupper((unsigned char)*end)) : NULL;
	if (p && *p) {
		for (const char *q = "KMGT"; q <= p; q++)
			v *= 1024;
		end++;
	}
	if (*end)
		usage_error("bad value for", opt);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	        {"delay-ms", required_argument, NULL, 'd'},
	        {"bw", required_argument, NULL, 'b'},
	        {"attr-timeout", required_argument, NULL, 'a'},
	        {"direct-io", no_argument, NULL, 'D'},
	        {"pass-direct", no_argument, NULL, 'P'},
	        {"foreground", no_argument, NULL, 'f'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	int foreground = 0, c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "fh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': delay_ns = (long)(parse_num("--delay-ms", optarg, 0) * 1e6 + 0.5); break;
		case 'b': bw = parse_num("--bw", optarg, 1); break;
		case 'a': attr_timeout = parse_num("--attr-timeout", optarg, 0); break;
		case 'D': direct_io = 1; break;
		case 'P': pass_direct = 1; break;
		case 'f': foreground = 1; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: usage_error("unknown option", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		usage_error("need BACKING_DIR and MOUNTPOINT, got",
		            optind < argc ? argv[optind] : "");
	const char *backing = argv[optind];
	bfd = open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bfd < 0) {
		fprintf(stderr, "sharedfs: cannot open %s: %s\n", backing, strerror(errno));
		return EXIT_MOUNT;
	}
	/* absolute, since the daemon moves to / and unmounts by this name */
	char *mnt = realpath(argv[optind + 1], NULL);
	if (!mnt) {
		fprintf(stderr, "sharedfs: cannot use %s: %s\n", argv[optind + 1], strerror(errno));
		return EXIT_MOUNT;
	}
	as_root = geteuid() == 0;
	umask(0); /* the kernel has applied the caller's umask already */
	stats_st.st_mode = S_IFREG | 0666;
	stats_st.st_nlink = 1;
	stats_st.st_uid = getuid();
	stats_st.st_gid = getgid();
	clock_gettime(CLOCK_REALTIME, &stats_st.st_mtim);
	stats_st.st_atim = stats_st.st_ctim = stats_st.st_mtim;
	bucket.tokens = bw / 100;
	bucket.last = now();

	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	int status = EXIT_MOUNT;
	struct fuse *f = NULL;
	if (fuse_opt_add_arg(&args, argv[0]) != 0 || fuse_opt_add_arg(&args, "-o") != 0 ||
	    fuse_opt_add_arg(&args, as_root ? "fsname=sharedfs,allow_other,default_permissions"
	                                    : "fsname=sharedfs") != 0)
		goto out;
	f = fuse_new(&args, &sfs_ops, sizeof sfs_ops, NULL);
	if (!f)
		goto out;
	if (fuse_mount(f, mnt) != 0) {
		fprintf(stderr, "sharedfs: cannot mount %s on %s\n", backing, mnt);
		goto out;
	}
	/* the mount exists before the parent returns: callers may use it then */
	if (fuse_daemonize(foreground) != 0 || fuse_set_signal_handlers(fuse_get_session(f)) != 0) {
		fuse_unmount(f);
		goto out;
	}
	status = fuse_loop_mt(f, 0) == 0 ? 0 : EXIT_MOUNT;
	fuse_remove_signal_handlers(fuse_get_session(f));
	fuse_unmount(f);
out:
	if (f)
		fuse_destroy(f);
	fuse_opt_free_args(&args);
	free(mnt);
	return status;
}
