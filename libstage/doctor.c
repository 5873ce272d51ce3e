/*
 * doctor.c - stg_doctor: is this node set up right for stager, and what to
 * fix.
 *
 * Each check is ok, warn or fail, says what it found, and for the last
 * two what to do; checks are handed to the caller one by one, as they are
 * made, since probing a shared filesystem takes seconds.  The shared
 * filesystem's paths are probed in a child process with a time limit
 * (PROBE_LIMIT), so a hung NFS mount makes a failed check, not a hung
 * caller.  The checks write only their own probe files (".doctor.PID"),
 * and remove them.
 */
#include "ctx.h"
#include "slurm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_LIMIT 30 /* s for a shared-filesystem path to answer */

typedef struct doctor {
	stg_ctx *ctx;
	stg_check_fn fn;
	void *arg;
} doctor;

static void check(doctor *d, stg_check_level level, const char *name, const char *fix,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void check(doctor *d, stg_check_level level, const char *name, const char *fix,
                  const char *fmt, ...)
{
	char found[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(found, sizeof found, fmt, ap);
	va_end(ap);
	/* an ok check has nothing to fix (libstage.h) */
	stg_check c = {.level = level,
	               .name = name,
	               .found = found,
	               .fix = level == STG_CHECK_OK ? NULL : fix};
	d->fn(d->arg, &c);
}

/* A filesystem's name from statfs, and whether it is a network one. */
static const char *fs_kind(long type, bool *network)
{
	static const struct {
		long magic;
		const char *name;
		bool net;
	} fs[] = {
	        {NFS_SUPER_MAGIC, "nfs", true},  {0xFF534D42, "cifs", true},
	        {0x0BD00BD0, "lustre", true},    {0x47504653, "gpfs", true},
	        {0x65735546, "fuse", true},      {0x6B414653, "afs", true},
	        {0x19830326, "beegfs", true},    {EXT4_SUPER_MAGIC, "ext4", false},
	        {XFS_SUPER_MAGIC, "xfs", false}, {BTRFS_SUPER_MAGIC, "btrfs", false},
	        {TMPFS_MAGIC, "tmpfs", false},   {0x794C7630, "overlayfs", false},
	        {0x2FC12FC1, "zfs", false},
	};
	for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
		if (fs[i].magic == type) {
			*network = fs[i].net;
			return fs[i].name;
		}
	}
	*network = false;
	return "other";
}

/* Read throughput of fd from offset 0 (up to max bytes), past the page
 * cache where the kernel lets us; MB/s, or -1. */
static double read_speed(int fd, uint64_t max, uint64_t *got)
{
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	const size_t bs = 4 << 20;
	char *buf = malloc(bs);
	if (!buf)
		return -1;
	double t0 = stg__now();
	*got = 0;
	while (*got < max) {
		ssize_t n = read(fd, buf, bs);
		if (n <= 0)
			break;
		*got += (uint64_t)n;
	}
	double t = stg__now() - t0;
	free(buf);
	return *got && t > 0 ? (double)*got / t / 1e6 : -1;
}

/* Writable, and how fast it writes and reads back (64 MiB). */
static void check_throughput(doctor *d, const char *root)
{
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s/.doctor.%d", root, (int)getpid());
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		check(d, STG_CHECK_FAIL, "scratch write", "check the disk and its permissions",
		      "cannot create a file in '%s': %s", root, strerror(errno));
		return;
	}
	const size_t bs = 4 << 20, total = 64 << 20;
	char *buf = calloc(1, bs);
	size_t done = 0;
	double t0 = stg__now();
	while (buf && done < total && write(fd, buf, bs) == (ssize_t)bs)
		done += bs;
	fsync(fd);
	double wt = stg__now() - t0;
	free(buf);
	lseek(fd, 0, SEEK_SET);
	uint64_t got;
	double rs = read_speed(fd, total, &got);
	if (done < total)
		check(d, STG_CHECK_FAIL, "scratch write", "free space on the scratch disk",
		      "only %zu of %zu MiB could be written: %s", done >> 20, total >> 20,
		      strerror(errno));
	else
		check(d, STG_CHECK_OK, "scratch throughput", NULL,
		      "write %.0f MB/s (with fsync), read %.0f MB/s (64 MiB)",
		      (double)total / wt / 1e6, rs);
	close(fd);
	unlink(tmp);
}

static void check_scratch(doctor *d, stg_cache *cache)
{
	const char *root = stg_cache_root(cache);
	struct stat st;
	struct statfs sf;
	if (stat(root, &st) || statfs(root, &sf)) {
		check(d, STG_CHECK_FAIL, "scratch root", "set scratch_root to a node-local disk",
		      "'%s': %s", root, strerror(errno));
		return;
	}
	bool net;
	const char *kind = fs_kind((long)sf.f_type, &net);
	char mnt[256];
	if (stg__job_private_mount(root, mnt, sizeof mnt))
		check(d, STG_CHECK_FAIL, "scratch root",
		      "set scratch_root to a node-local disk outside the job's private mounts",
		      "'%s' is on '%s', a mount of this job's own (job_container/tmpfs): the "
		      "cache and kept results go with each job",
		      root, mnt);
	else if (net)
		check(d, STG_CHECK_WARN, "scratch root",
		      "point scratch_root at the node's local disk",
		      "'%s' is on %s, a network filesystem: staging there gains nothing", root,
		      kind);
	else if (st.st_uid != geteuid() || (st.st_mode & 077))
		check(d, STG_CHECK_FAIL, "scratch root", "chmod 700 it (and own it)",
		      "'%s' (%s) is mode %04o, owner %u: others could read or change your data",
		      root, kind, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
	else
		check(d, STG_CHECK_OK, "scratch root", NULL, "'%s' (%s, private)", root, kind);
	check_throughput(d, root);
	stg_cache_info *in = NULL;
	if (stg_cache_status(d->ctx, cache, &in) == STG_OK) {
		char a[16], b[16], c[16], e[16];
		check(d, in->fs_free < in->min_free ? STG_CHECK_FAIL : STG_CHECK_OK,
		      "scratch space", "stager clean --older-than 7d, or lower cache_max",
		      "%s free of %s (min_free %s), %llu inodes free; cache %s in %zu entries",
		      stg_format_size(in->fs_free, a, sizeof a),
		      stg_format_size(in->fs_size, b, sizeof b),
		      stg_format_size(in->min_free, c, sizeof c),
		      (unsigned long long)in->fs_files_free,
		      stg_format_size(in->cache_bytes, e, sizeof e), in->n_entries);
		stg_cache_info_free(in);
	}
}

static bool on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char dir[4096], full[4200];
	while (path && *path) {
		size_t n = strcspn(path, ":");
		snprintf(dir, sizeof dir, "%.*s", (int)n, path);
		snprintf(full, sizeof full, "%s/%s", *dir ? dir : ".", prog);
		if (access(full, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

static void check_slurm(doctor *d, const stg_config *cfg)
{
	/* the job's scratch variable is a site's choice (job_tmpdir_var) */
	const char *var = stg_config_get(cfg, "job_tmpdir_var", NULL);
	const char *job = getenv("SLURM_JOB_ID"), *tmp = getenv(var);
	if (job && *job)
		check(d, STG_CHECK_OK, "slurm job", NULL, "job %s on %s node(s)", job,
		      getenv("SLURM_NNODES") ? getenv("SLURM_NNODES") : "1");
	else
		check(d, STG_CHECK_OK, "slurm job", NULL,
		      "not in a job: what you stage is pinned while your shell lives");
	if (job && *job && !(tmp && *tmp))
		check(d, STG_CHECK_OK, var, NULL,
		      "not set: stager keeps a job directory under the scratch root, which "
		      "`stager clean` (or the epilog) removes after the job");
	else if (tmp && *tmp)
		check(d, tmp[0] != '/' || access(tmp, W_OK) ? STG_CHECK_FAIL : STG_CHECK_OK, var,
		      "ask your administrators: the job's scratch directory is not writable",
		      "'%s'", tmp);
	/* clean asks squeue whether jobs still run */
	if (!on_path("squeue"))
		check(d, STG_CHECK_WARN, "squeue", "install Slurm's client commands on this node",
		      "not found: `stager clean` cannot tell finished jobs from running ones and "
		      "keeps their pins");
	else
		check(d, STG_CHECK_OK, "squeue", NULL,
		      "found: clean asks Slurm which jobs still run");
	/* stage --all-nodes and run --all-nodes fan out with Slurm's own tools */
	bool srun = on_path("srun"), sbcast = on_path("sbcast");
	if (srun && sbcast)
		check(d, STG_CHECK_OK, "srun, sbcast", NULL,
		      "found: --all-nodes can fan a pack out");
	else
		check(d, STG_CHECK_WARN, "srun, sbcast",
		      "install Slurm's client commands on this node",
		      "%s not found: --all-nodes cannot fan a pack out (each node reads the "
		      "shared filesystem itself)",
		      !srun && !sbcast ? "srun and sbcast"
		      : !srun          ? "srun"
		                       : "sbcast");
}

/* The cluster's leases (the node's slots are stg_doctor_prepare's). */
static void check_leases(doctor *d, const stg_config *cfg)
{
	const char *lease = stg_config_get(cfg, "shared_lock_dir", NULL);
	const char *lmax = stg_config_get(cfg, "max_readers_cluster", NULL);
	if (!*lease || !strcmp(lmax, "0"))
		return;
	char probe[4200];
	snprintf(probe, sizeof probe, "%s/.doctor.%d", lease, (int)getpid());
	int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		check(d, STG_CHECK_FAIL, "cluster leases",
		      "create shared_lock_dir on the shared filesystem, writable by all (1777)",
		      "cannot create a lease in '%s': %s", lease, strerror(errno));
		return;
	}
	close(fd);
	unlink(probe);
	check(d, STG_CHECK_OK, "cluster leases", NULL, "%s per cluster, in '%s'", lmax, lease);
}

/* The largest readable regular file among the first entries of dir and of
 * its first subdirectories (a bounded look: each entry is a round trip on
 * a network filesystem); false if none has 1 MiB. */
static bool sample_file(const char *dir, char *out, size_t cap)
{
	char sub[8][4096];
	int n_sub = 0, seen = 0;
	off_t best = -1;
	const char *dirs[9] = {dir};
	int n_dirs = 1;
	for (int k = 0; k < n_dirs && seen < 400; k++) {
		DIR *dh = opendir(dirs[k]);
		if (!dh)
			continue;
		struct dirent *e;
		while (seen < 400 && (e = readdir(dh))) {
			if (e->d_name[0] == '.' &&
			    (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
				continue;
			seen++;
			char p[4096];
			if (snprintf(p, sizeof p, "%s/%s", dirs[k], e->d_name) >= (int)sizeof p)
				continue;
			struct stat st;
			if (stat(p, &st))
				continue;
			if (S_ISREG(st.st_mode) && st.st_size > best && access(p, R_OK) == 0) {
				best = st.st_size;
				snprintf(out, cap, "%s", p);
			} else if (S_ISDIR(st.st_mode) && k == 0 && n_sub < 8) {
				snprintf(sub[n_sub], sizeof sub[n_sub], "%s", p);
				dirs[n_dirs++] = sub[n_sub++];
			}
		}
		closedir(dh);
	}
	return best >= 1 << 20; /* less says little about throughput */
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* In the probing child: the path's filesystem, its metadata latency, and
 * for a file (or one near the top of a directory) its read throughput;
 * "O..." (ok) or "F..." (failed) into out. */
static void probe(const char *path, char *out, size_t len)
{
	struct stat st;
	struct statfs sf;
	if (stat(path, &st) || statfs(path, &sf)) {
		snprintf(out, len, "F'%s': %s", path, strerror(errno));
		return;
	}
	bool net;
	const char *kind = fs_kind((long)sf.f_type, &net);
	/* metadata latency: stat() of the path, 200 times, the median (one
	 * stall of a busy server is not what a stat costs) */
	double t[200];
	for (int i = 0; i < 200; i++) {
		double t0 = stg__now();
		stat(path, &st);
		t[i] = stg__now() - t0;
	}
	qsort(t, 200, sizeof t[0], cmp_double);
	double us = t[100] * 1e6;
	int n = snprintf(out, len, "O'%s' (%s%s): %.1f us per stat() (median of 200)", path, kind,
	                 net ? ", network" : "", us);
	/* read throughput: the file, or the largest file near the top of the
	 * directory */
	char file[4096];
	const char *f = S_ISREG(st.st_mode)                                           ? path
	                : S_ISDIR(st.st_mode) && sample_file(path, file, sizeof file) ? file
	                                                                              : NULL;
	if (!f && S_ISDIR(st.st_mode))
		snprintf(out + n, len - (size_t)n,
		         "; no file of 1 MiB or more near its top to time a read (name one as "
		         "PATH)");
	if (!f)
		return;
	int fd = open(f, O_RDONLY | O_CLOEXEC);
	uint64_t got = 0;
	double mbs = fd >= 0 ? read_speed(fd, 256ull << 20, &got) : -1;
	if (fd >= 0)
		close(fd);
	if (mbs > 0 && got)
		snprintf(out + n, len - (size_t)n, ", read %.0f MB/s (%llu MiB%s%s)", mbs,
		         (unsigned long long)(got >> 20), f == path ? "" : " of ",
		         f == path ? "" : f);
}

/* Probe a shared-FS path in a child: a hung mount must not hang us. */
static void check_path(doctor *d, const char *path)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC))
		return;
	pid_t pid = fork();
	if (pid == 0) {
		char out[1024];
		probe(path, out, sizeof out);
		(void)!write(pipefd[1], out, strlen(out));
		_exit(0);
	}
	close(pipefd[1]);
	char buf[1024] = "";
	size_t len = 0;
	double t0 = stg__now();
	int status;
	bool done = false;
	fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
	while (pid > 0 && stg__now() - t0 < PROBE_LIMIT) {
		ssize_t n = read(pipefd[0], buf + len, sizeof buf - 1 - len);
		if (n > 0)
			len += (size_t)n;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			while ((n = read(pipefd[0], buf + len, sizeof buf - 1 - len)) > 0)
				len += (size_t)n;
			done = true;
			break;
		}
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	}
	close(pipefd[0]);
	buf[len] = '\0';
	if (!done && pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		check(d, STG_CHECK_FAIL, "shared filesystem",
		      "check the mount (is the file server up?)", "'%s' did not answer within %d s",
		      path, PROBE_LIMIT);
	} else if (buf[0] == 'O') {
		check(d, STG_CHECK_OK, "shared filesystem", NULL, "%s", buf + 1);
	} else {
		check(d, STG_CHECK_FAIL, "shared filesystem", "check the path and the mount", "%s",
		      buf[0] ? buf + 1 : "no answer");
	}
}

stg_err stg_doctor(stg_ctx *ctx, const stg_config *cfg, const char *const *paths, size_t n_paths,
                   stg_check_fn fn, void *arg)
{
	doctor d = {.ctx = ctx, .fn = fn, .arg = arg};
	check(&d, STG_CHECK_OK, "configuration", NULL,
	      "loaded (stager status lists every setting)");
	/* first: as root, what it makes is said, and opening root's own
	 * scratch root below must not make it unsaid */
	stg_doctor_prepare(ctx, cfg, fn, arg);
	stg_cache *cache = NULL;
	stg_err err = stg_cache_open(ctx, cfg, &cache);
	if (err) {
		stg__log(ctx, STG_LOG_ERROR, "%s", *ctx->errmsg ? ctx->errmsg : stg_strerror(err));
		check(&d, STG_CHECK_FAIL, "scratch root",
		      "set scratch_root to a writable node-local directory", "%s", ctx->errmsg);
	} else {
		check_scratch(&d, cache);
		stg_cache_close(cache);
	}
	check_slurm(&d, cfg);
	check_leases(&d, cfg);
	if (n_paths) {
		for (size_t i = 0; i < n_paths; i++)
			check_path(&d, paths[i]);
	} else if (getenv("HOME")) {
		check_path(&d, getenv("HOME"));
	}
	return STG_OK;
}
