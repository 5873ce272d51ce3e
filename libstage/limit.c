/*
 * limit.c - how stager spares the shared filesystem.
 *
 * Slots: a node-wide cap on processes reading or writing the shared FS at
 * once (max_readers_per_node), for every user.  The slots are the files
 * slot.0 .. slot.N-1 in a sticky, world-writable directory (slot_dir);
 * holding one is holding flock(LOCK_EX) on it, so the kernel frees the slot
 * of a holder that dies.  Anyone may create those files, so nothing but a
 * lock is ever taken from them: they are opened O_NOFOLLOW | O_NONBLOCK,
 * read-only, and must be regular files.
 *
 * Leases: an optional cluster-wide cap (max_readers_cluster) with the files
 * lease.0 .. lease.N-1 in shared_lock_dir, on the shared FS, where locks
 * cannot be trusted.  A lease is taken by creating its file with O_EXCL and
 * renewed (its mtime touched) every lease_ttl/3 seconds by a thread of the
 * holder; a lease untouched for lease_ttl seconds belongs to a dead or
 * cut-off node and is broken: renamed to a name of the breaker's own (one
 * breaker wins the rename) and removed.  This compares the file server's
 * clock with ours: clusters keep them within seconds of each other (NTP),
 * well inside lease_ttl.
 *
 * The rates (bwlimit, ops_limit) are token buckets: pace.c.
 */
#include "limit.h"
#include "holders.h"
#include "ctx.h"
#include "fsutil.h"
#include "config.h"
#include "path.h"

#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- node slots --------------------------------------------------------------- */

#define SLOT_DIR_DEFAULT  "/run/lock/stager"
#define FAIR_WAIT         1.0 /* s before a wait asks whether the holders are fair */
#define SLOT_DIR_FALLBACK "/dev/shm/stager-slots"

/* Open (creating it if need be) the slot directory; -1 if it cannot be used.
 * The default lives in /run/lock; a node without one (a minimal container
 * or chroot) uses /dev/shm, node-local on every Linux, rather than having
 * no limit. */
static int slot_dir_open(stg_ctx *ctx, const char *dir)
{
	struct stat pst;
	if (!strcmp(dir, SLOT_DIR_DEFAULT) && stat("/run/lock", &pst) && errno == ENOENT &&
	    stat("/dev/shm", &pst) == 0)
		dir = SLOT_DIR_FALLBACK;
	if (mkdir(dir, 01777) == 0)
		chmod(dir, 01777); /* past the umask: every user's stager uses it */
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		stg__log(ctx, STG_LOG_WARN,
		         "no node-wide limit on shared-FS readers: cannot use slot_dir '%s' "
		         "(%s); ask your administrators or set slot_dir",
		         dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* made by a user, it is theirs to chmod (every user's limit off) and
	 * to empty of others' slots: only root's is shared */
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		char who[300];
		stg__user_text(st.st_uid, who, sizeof who);
		stg__log(ctx, STG_LOG_WARN,
		         "no node-wide limit on shared-FS readers: slot_dir '%s' belongs to %s, "
		         "who could turn the limit off for everyone; ask your administrators to "
		         "make it root's (the stager prolog does, or tmpfiles.d/stager.conf from "
		         "`make install`)",
		         dir, who);
		close(fd);
		return -1;
	}
	if ((st.st_mode & 01777) != 01777 && st.st_uid != geteuid()) {
		stg__log(ctx, STG_LOG_WARN,
		         "no node-wide limit on shared-FS readers: slot_dir '%s' is not a sticky, "
		         "world-writable directory (mode %04o, owner %u)",
		         dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
		close(fd);
		return -1;
	}
	return fd;
}

static int slot_open(int dirfd, unsigned i)
{
	char name[32];
	snprintf(name, sizeof name, "slot.%u", i);
	const int fl = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd = openat(dirfd, name, fl);
	if (fd < 0 && errno == ENOENT) {
		fd = openat(dirfd, name, fl | O_CREAT | O_EXCL, 0444);
		if (fd < 0 && errno == EEXIST)
			fd = openat(dirfd, name, fl);
	}
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Does one other user hold more of the n node slots than a fair share
 * (n over the users who hold or want them, at least 1) while this one
 * holds none?  Their name and count into who[len].  A user who takes
 * every slot (on purpose, with flock, or with many jobs) then delays the
 * others by a second, not by slot_wait_max. */
static bool unfair(stg_ctx *ctx, const stg_limits *lim, unsigned n, char *who, size_t len)
{
	stg_holder *v = NULL;
	size_t m = 0;
	if (stg__holders(ctx, lim, &v, &m)) {
		free(v);
		return false;
	}
	unsigned uids[64], counts[64], users = 0, mine = 0;
	for (size_t i = 0; i < m; i++) {
		if (strcmp(v[i].kind, "node"))
			continue;
		if (v[i].uid == (unsigned)geteuid()) {
			mine++;
			continue;
		}
		unsigned k = 0;
		while (k < users && uids[k] != v[i].uid)
			k++;
		if (k == users && users < 64) {
			uids[users] = v[i].uid;
			counts[users++] = 0;
		}
		if (k < users)
			counts[k]++;
	}
	unsigned fair = n / (users + 1) ? n / (users + 1) : 1;
	bool over = false;
	for (unsigned k = 0; k < users && !mine && !over; k++) {
		if (counts[k] <= fair)
			continue;
		over = true;
		const char *name = "";
		for (size_t i = 0; i < m; i++)
			if (v[i].uid == uids[k] && !strcmp(v[i].kind, "node"))
				name = v[i].user;
		snprintf(who, len, "%s holds %u of the %u", *name ? name : "another user",
		         counts[k], n);
	}
	free(v);
	return over;
}

static stg_err node_slot(stg_ctx *ctx, stg_limits *lim, stg_slot *s, double deadline)
{
	unsigned n = lim->node_slots;
	int dirfd = slot_dir_open(ctx, lim->slot_dir);
	if (dirfd < 0)
		return STG_OK;
	int *fds = malloc(n * sizeof *fds);
	if (!fds) {
		close(dirfd);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	unsigned usable = 0;
	for (unsigned i = 0; i < n; i++)
		usable += (fds[i] = slot_open(dirfd, i)) >= 0;
	close(dirfd);
	stg_err err = STG_OK;
	if (!usable) {
		stg__log(ctx, STG_LOG_WARN,
		         "no node-wide limit on shared-FS readers: no usable slot file in '%s'",
		         lim->slot_dir);
		goto out;
	}
	unsigned start = (unsigned)getpid() % n;
	double delay = 0.02, t0 = stg__now();
	double bound = lim->slot_wait_max ? t0 + lim->slot_wait_max : 0;
	bool told = false;
	double fair_check = t0 + FAIR_WAIT;
	for (;;) {
		for (unsigned k = 0; k < n && s->fd < 0; k++) {
			unsigned i = (start + k) % n;
			if (fds[i] >= 0 && flock(fds[i], LOCK_EX | LOCK_NB) == 0) {
				s->fd = fds[i];
				fds[i] = -1;
			}
		}
		if (s->fd >= 0)
			break;
		if (deadline && stg__now() >= deadline) {
			stg__log(ctx, STG_LOG_WARN,
			         "no shared-FS slot came free in time: going ahead without one "
			         "(the job is ending: its results come first)");
			break;
		}
		if (bound && stg__now() >= bound) {
			char who[512];
			stg__holders_text(ctx, lim, "node", who, sizeof who);
			stg__log(ctx, STG_LOG_WARN,
			         "waited %u s for a shared-FS slot (slot_wait_max): going ahead "
			         "without one; held by %s",
			         lim->slot_wait_max,
			         who[0] ? who : "processes this user cannot see");
			break;
		}
		if (stg__now() >= fair_check) {
			char who[128];
			if (unfair(ctx, lim, n, who, sizeof who)) {
				stg__log(ctx, STG_LOG_WARN,
				         "going ahead without a shared-FS slot: %s on this node, "
				         "more "
				         "than a fair share while others wait",
				         who);
				break;
			}
			fair_check = stg__now() + FAIR_WAIT;
		}
		if (!told && stg__now() - t0 > 0.5) {
			char who[512];
			stg__holders_text(ctx, lim, "node", who, sizeof who);
			stg__log(ctx, STG_LOG_INFO,
			         "waiting for a shared-FS slot: all %u on this node are in use "
			         "(max_readers_per_node)%s%s",
			         n, who[0] ? ", by " : "", who);
			told = true;
		}
		if (!stg__nap(ctx, delay)) {
			err = stg__fail(ctx, STG_EINTR,
			                "interrupted while waiting for a shared-FS slot");
			break;
		}
		delay = delay * 2 > 0.2 ? 0.2 : delay * 2;
	}
out:
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	return err;
}

/* ---- cluster leases ----------------------------------------------------------- */

static void *renewer(void *arg)
{
	stg_slot *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += s->ttl / 3 ? s->ttl / 3 : 1;
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		if (!s->stop)
			futimens(s->lease_fd, NULL); /* the file server's "now" */
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Take lease.i if free or expired: 1 taken, 0 held by someone, -1 error. */
static int lease_try(stg_ctx *ctx, stg_limits *lim, stg_slot *s, unsigned i)
{
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "%s/lease.%u", lim->lease_dir, i);
	for (int tries = 0; tries < 2; tries++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			char host[256] = "?", line[320];
			gethostname(host, sizeof host - 1);
			int len = snprintf(line, sizeof line, "%s %d %lld\n", host, (int)getpid(),
			                   (long long)time(NULL));
			stg__write_full(fd, line, (size_t)len);
			s->lease_fd = fd;
			snprintf(s->lease, sizeof s->lease, "%s", path);
			return 1;
		}
		if (errno != EEXIST)
			return -1;
		struct stat st;
		if (lstat(path, &st))
			continue; /* released meanwhile */
		if (st.st_mtime + (time_t)lim->lease_ttl > time(NULL))
			return 0;
		/* expired: break it; only one breaker wins the rename */
		char host[64] = "?", broken[STG_PATH_MAX];
		gethostname(host, sizeof host - 1);
		snprintf(broken, sizeof broken, "%s/lease.%u.broken.%s.%d", lim->lease_dir, i, host,
		         (int)getpid());
		if (rename(path, broken) == 0) {
			unlink(broken);
			stg__log(ctx, STG_LOG_WARN,
			         "broke the cluster-wide lease '%s': not renewed for %lld s "
			         "(its holder died or lost the shared FS)",
			         path, (long long)(time(NULL) - st.st_mtime));
		}
	}
	return 0;
}

static stg_err cluster_lease(stg_ctx *ctx, stg_limits *lim, stg_slot *s, double deadline)
{
	unsigned n = lim->cluster_slots;
	unsigned start = (unsigned)getpid() % n;
	double bound = lim->slot_wait_max ? stg__now() + lim->slot_wait_max : 0;
	bool told = false;
	for (;;) {
		for (unsigned k = 0; k < n; k++) {
			int r = lease_try(ctx, lim, s, (start + k) % n);
			if (r < 0) {
				stg__log(ctx, STG_LOG_WARN,
				         "no cluster-wide limit: cannot create leases in "
				         "shared_lock_dir '%s': %s",
				         lim->lease_dir, strerror(errno));
				return STG_OK;
			}
			if (r > 0) {
				s->ttl = lim->lease_ttl;
				s->stop = false;
				pthread_mutex_init(&s->mu, NULL);
				pthread_cond_init(&s->cv, NULL);
				s->renewing = pthread_create(&s->thread, NULL, renewer, s) == 0;
				return STG_OK;
			}
		}
		if (!told) {
			char who[512];
			stg__holders_text(ctx, lim, "cluster", who, sizeof who);
			stg__log(ctx, STG_LOG_INFO,
			         "waiting for a cluster-wide shared-FS lease: all %u in '%s' are "
			         "held (max_readers_cluster)%s%s",
			         n, lim->lease_dir, who[0] ? ", by " : "", who);
			told = true;
		}
		if (bound && stg__now() >= bound) {
			char who[512];
			stg__holders_text(ctx, lim, "cluster", who, sizeof who);
			stg__log(
			        ctx, STG_LOG_WARN,
			        "waited %u s for a cluster-wide lease (slot_wait_max): going ahead "
			        "without one; held by %s",
			        lim->slot_wait_max, who[0] ? who : "?");
			return STG_OK;
		}
		if (deadline && stg__now() >= deadline) {
			stg__log(ctx, STG_LOG_WARN,
			         "no cluster-wide lease came free in time: going ahead without "
			         "one (the job is ending: its results come first)");
			return STG_OK;
		}
		/* every round costs the shared FS n operations: poll slowly */
		if (!stg__nap(ctx, 1.0 + (double)(rand() % 1000) / 1000))
			return stg__fail(ctx, STG_EINTR,
			                 "interrupted while waiting for a cluster-wide lease");
	}
}

/* ---- slots: both levels ------------------------------------------------------- */

stg_err stg__slot_acquire(stg_ctx *ctx, stg_limits *lim, stg_slot *s)
{
	return stg__slot_acquire_by(ctx, lim, s, 0);
}

stg_err stg__slot_acquire_by(stg_ctx *ctx, stg_limits *lim, stg_slot *s, double deadline)
{
	memset(s, 0, sizeof *s);
	s->fd = -1;
	s->lease_fd = -1;
	stg_err err = STG_OK;
	if (lim->node_slots && (err = node_slot(ctx, lim, s, deadline)))
		return err;
	if (lim->cluster_slots && lim->lease_dir[0] &&
	    (err = cluster_lease(ctx, lim, s, deadline))) {
		stg__slot_release(s);
		return err;
	}
	return STG_OK;
}

void stg__slot_release(stg_slot *s)
{
	if (s->lease_fd >= 0) {
		if (s->renewing) {
			pthread_mutex_lock(&s->mu);
			s->stop = true;
			pthread_cond_signal(&s->cv);
			pthread_mutex_unlock(&s->mu);
			pthread_join(s->thread, NULL);
			s->renewing = false;
		}
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		/* remove it only if it is still ours (not broken and retaken) */
		struct stat a, b;
		if (fstat(s->lease_fd, &a) == 0 && lstat(s->lease, &b) == 0 &&
		    a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			unlink(s->lease);
		close(s->lease_fd);
		s->lease_fd = -1;
	}
	if (s->fd >= 0) {
		close(s->fd); /* drops the flock */
		s->fd = -1;
	}
}

/* ---- settings ----------------------------------------------------------------- */

stg_err stg__limits_init(stg_ctx *ctx, stg_limits *lim, const stg_config *cfg)
{
	lim->node_slots = (unsigned)stg__config_count(cfg, "max_readers_per_node");
	lim->cluster_slots = (unsigned)stg__config_count(cfg, "max_readers_cluster");
	lim->lease_ttl = (unsigned)stg__config_count(cfg, "lease_ttl");
	lim->slot_wait_max = (unsigned)stg__config_count(cfg, "slot_wait_max");
	if (lim->lease_ttl < 3)
		lim->lease_ttl = 3;
	lim->slot_dir = strdup(stg_config_get(cfg, "slot_dir", NULL));
	lim->lease_dir = strdup(stg_config_get(cfg, "shared_lock_dir", NULL));
	if (!lim->slot_dir || !lim->lease_dir)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	uint64_t bw = stg__config_bytes(cfg, "bwlimit", 0);
	stg__bucket_init(&lim->bw, (double)bw);
	stg__bucket_init(&lim->ops, (double)stg__config_count(cfg, "ops_limit"));
	lim->ready = true;
	return STG_OK;
}

void stg__limits_free(stg_limits *lim)
{
	if (lim->ready) {
		stg__bucket_destroy(&lim->bw);
		stg__bucket_destroy(&lim->ops);
	}
	free(lim->slot_dir);
	free(lim->lease_dir);
}

/* ---- I/O priority ------------------------------------------------------------- */

int stg_io_idle(int idle)
{
	/* ioprio_set has no glibc wrapper; values from linux/ioprio.h */
	const int who_process = 1, class_shift = 13, class_be = 2, class_idle = 3;
	int prio = idle ? class_idle << class_shift : (class_be << class_shift) | 4;
	return (int)syscall(SYS_ioprio_set, who_process, 0, prio);
}
