/*
 * mount_list.c - the record of live mounts read: `stager status`'s list,
 * unmounting (`stager umount`), and the mounts nobody needs any more
 * (`stager clean`).
 *
 * Each serving process keeps a record, SCRATCH_ROOT/mounts/<owner> (owner
 * "pid-PID-START", as pins name a process; written by mount_open.c),
 * holding the mountpoint, the first pack, its digest, for a mount made
 * inside a Slurm job the job's id (the fourth line, empty if none, which
 * older readers ignore), then a line "DIGEST PATH" for each other pack of
 * a mount of several, so that `stager status` lists live mounts and their
 * jobs, and `stager clean` finds those whose process died (their
 * mountpoint answers ENOTCONN until it is unmounted) and those whose job
 * is over: all of a job with --job (the epilog, as the job's user), those
 * of jobs that Slurm says are over without.  A live one's process is
 * stopped first (SIGTERM, then SIGKILL past a bounded wait), and its pins
 * (of every pack) dropped there and then: clean holds the cache's lock,
 * which the process would otherwise wait for to unpin.  A record is
 * trusted only as far as unmounting and stopping go: a mountpoint only if
 * /proc/self/mountinfo shows it as a stager mount (fuse.stager) of the
 * scratch root's owner's uid, a process only if it is the one the record
 * names (its start time, then held by a pidfd) and of that same uid, so
 * that a clean run as root cannot be made to touch another user's.
 */
#include "mount_job.h"
#include "mount_list.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define UMOUNT_WAIT 3         /* seconds stg_umount waits for the serving process to end */
#define STOP_WAIT   3         /* seconds clean waits for stopped mounts' processes */
#define MAX_JOBS    16        /* jobs whose state one listing asks Slurm */
#define RECORD_MAX  (1 << 20) /* bytes of a record read, at most */

bool stg__is_stager_mount(const char *path, uid_t uid)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	while (!found && getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS] - FSTYPE SOURCE SUPER */
		char mp[STG_PATH_MAX + 1], fstype[64], super[512];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
			continue;
		/* the kernel writes a space, tab, newline or '\' in octal */
		char *o = mp;
		for (const char *s = mp; *s; s++) {
			if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
				*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
				s += 3;
			} else {
				*o++ = *s;
			}
		}
		*o = '\0';
		if (strcmp(mp, path) || strcmp(fstype, "fuse.stager"))
			continue;
		char want[32];
		snprintf(want, sizeof want, "user_id=%u", (unsigned)uid);
		found = uid == (uid_t)-1 || strstr(super, want) != NULL;
	}
	free(line);
	fclose(f);
	return found;
}

int stg__unmount_path(const char *path)
{
	if (geteuid() == 0)
		return umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execlp("fusermount3", "fusermount3", "-u", "-z", "--", path, (char *)NULL);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	errno = WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ENOENT : EBUSY;
	return -1;
}

static bool hex_digest(const char *s, size_t n)
{
	return n == STG_DIGEST_HEXLEN && strspn(s, "0123456789abcdef") >= STG_DIGEST_HEXLEN;
}

/* Read the record name under dfd into mp, pack, digest and job (24
 * bytes; "" if none), and how many packs it names; with each, call
 * other(arg, digest) for the digest of each other pack.  0 or -1. */
static int record_read(int dfd, const char *name, char *mp, char *pack, char *digest, char *job,
                       size_t *n_packs, unsigned long long *env_ns,
                       void (*other)(void *arg, const char *digest), void *arg)
{
	if (env_ns)
		*env_ns = 0;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	char *buf = NULL;
	size_t n = 0, want = 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		want = st.st_size < RECORD_MAX ? (size_t)st.st_size : RECORD_MAX;
		buf = malloc(want + 1);
	}
	while (buf && n < want) {
		ssize_t r = read(fd, buf + n, want - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	int rc = -1;
	if (!n)
		goto out;
	buf[n] = '\0';
	char *a = buf, *b = strchr(a, '\n'), *c = b ? strchr(b + 1, '\n') : NULL;
	char *d = c ? strchr(c + 1, '\n') : NULL;
	if (!d || b - a > STG_PATH_MAX || c - b - 1 > STG_PATH_MAX || d - c - 1 > STG_DIGEST_HEXLEN)
		goto out;
	*b = *c = *d = '\0';
	strcpy(mp, a);
	strcpy(pack, b + 1);
	strcpy(digest, c + 1);
	/* the job: digits alone on the fourth line */
	char *e = strchr(d + 1, '\n');
	size_t jl = e ? (size_t)(e - d - 1) : 0;
	job[0] = '\0';
	if (jl && jl < 24 && strspn(d + 1, "0123456789") == jl) {
		memcpy(job, d + 1, jl);
		job[jl] = '\0';
	}
	/* then "DIGEST PATH" for each other pack */
	*n_packs = 1;
	for (char *l = e ? e + 1 : NULL; l && *l; l = e ? e + 1 : NULL) {
		e = strchr(l, '\n');
		if (!e)
			break; /* cut short: not a whole line */
		unsigned long long ns;
		if (env_ns && !strncmp(l, "env ", 4) && sscanf(l + 4, "%llu", &ns) == 1 && ns)
			*env_ns = ns;
		if (e - l > STG_DIGEST_HEXLEN && l[STG_DIGEST_HEXLEN] == ' ' &&
		    hex_digest(l, STG_DIGEST_HEXLEN)) {
			(*n_packs)++;
			l[STG_DIGEST_HEXLEN] = '\0';
			if (other)
				other(arg, l);
		}
	}
	rc = mp[0] == '/' ? 0 : -1;
out:
	free(buf);
	return rc;
}

/* What Slurm says of the jobs of one listing or clean, each asked once;
 * once Slurm has been too slow to answer, it is not asked again. */
typedef struct job_states {
	size_t n;
	bool late;
	char job[MAX_JOBS][24];
	int over[MAX_JOBS];
} job_states;

static int job_over(job_states *js, const char *job)
{
	for (size_t i = 0; i < js->n; i++)
		if (!strcmp(js->job[i], job))
			return js->over[i];
	if (js->n == MAX_JOBS || js->late)
		return -1;
	snprintf(js->job[js->n], sizeof js->job[0], "%s", job);
	return js->over[js->n++] = stg__mount_job_over(job, &js->late);
}

/* The mounts recorded; with ask, the state of their jobs too. */
static stg_err list_mounts(stg_ctx *ctx, stg_cache *c, bool ask, stg_mount_info **v, size_t *n)
{
	*v = NULL;
	*n = 0;
	char **names;
	size_t k;
	if (stg__dir_names(c->rootfd, "mounts", true, &names, &k))
		return errno == ENOENT ? STG_OK : stg__fail_errno(ctx, STG_EIO, errno, "mounts/");
	int dfd = openat(c->rootfd, "mounts", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	stg_mount_info *out = calloc(k ? k : 1, sizeof *out);
	stg_owner_cache oc = {0};
	job_states js = {0};
	for (size_t i = 0; out && dfd >= 0 && i < k; i++) {
		stg_mount_info *mi = &out[*n];
		char mp[STG_PATH_MAX + 1], pack[STG_PATH_MAX + 1], job[24];
		if (strncmp(names[i], "pid-", 4) || strchr(names[i], '.') ||
		    record_read(dfd, names[i], mp, pack, mi->digest, job, &mi->n_packs, &mi->env,
		                NULL, NULL))
			continue;
		mi->mountpoint = strdup(mp);
		mi->pack = strdup(pack);
		mi->owner = strdup(names[i]);
		mi->job = job[0] ? strdup(job) : NULL;
		if (!mi->mountpoint || !mi->pack || !mi->owner || (job[0] && !mi->job)) {
			free(mi->mountpoint);
			free(mi->pack);
			free(mi->owner);
			free(mi->job);
			memset(mi, 0, sizeof *mi);
			continue;
		}
		mi->alive = stg__owner_alive(&oc, names[i]);
		mi->mounted = stg__is_stager_mount(mp, getuid());
		mi->job_over = job[0] && ask ? job_over(&js, job) : -1;
		(*n)++;
	}
	if (dfd >= 0)
		close(dfd);
	stg__names_free(names, k);
	if (!out)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	*v = out;
	return STG_OK;
}

stg_err stg_mount_list(stg_ctx *ctx, stg_cache *c, stg_mount_info **v, size_t *n)
{
	return list_mounts(ctx, c, true, v, n);
}

void stg_mount_list_free(stg_mount_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].mountpoint);
		free(v[i].pack);
		free(v[i].owner);
		free(v[i].job);
	}
	free(v);
}

/* The real uid of pid, or (uid_t)-1. */
static uid_t proc_uid(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return (uid_t)-1;
	buf[n] = '\0';
	const char *u = strstr(buf, "\nUid:");
	unsigned long uid;
	return u && sscanf(u + 5, "%lu", &uid) == 1 ? (uid_t)uid : (uid_t)-1;
}

/* A live mount's process, being stopped. */
typedef struct stopping {
	pid_t pid;
	unsigned long long start;
	int pidfd; /* -1 without pidfds (Linux < 5.3) */
} stopping;

/* Hold the process a record's owner ("pid-PID-START") names and send it
 * SIGTERM, if it is still that process and uid's: 0, or -1. */
static int stop_owner(const char *owner, uid_t uid, stopping *p)
{
	unsigned long long now;
	p->pidfd = -1;
	if (sscanf(owner, "pid-%d-%llu", &p->pid, &p->start) != 2 || p->pid <= 1)
		return -1;
	p->pidfd = stg__pidfd_open(p->pid);
	if (p->pidfd < 0 && errno != ENOSYS)
		return -1;
	/* checked after the pidfd is open: it holds the process checked */
	if (stg__proc_stat(p->pid, NULL, &now) || now != p->start || proc_uid(p->pid) != uid ||
	    stg__pidfd_signal(p->pidfd, p->pid, SIGTERM)) {
		if (p->pidfd >= 0)
			close(p->pidfd);
		p->pidfd = -1;
		return -1;
	}
	return 0;
}

static bool ended(const stopping *p)
{
	unsigned long long now;
	if (p->pidfd >= 0) {
		struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
		return poll(&pf, 1, 0) != 0;
	}
	return stg__proc_stat(p->pid, NULL, &now) || now != p->start;
}

/* Wait (STOP_WAIT s at most) for the processes sent SIGTERM to end; kill
 * those that have not, unless clean was interrupted. */
static void reap(stg_ctx *ctx, stopping *v, size_t n)
{
	double until = stg__now() + STOP_WAIT;
	for (;;) {
		size_t left = 0;
		for (size_t i = 0; i < n; i++)
			left += !ended(&v[i]);
		if (!left || stg__now() >= until || !stg__nap(ctx, 0.05))
			break;
	}
	for (size_t i = 0; i < n; i++) {
		if (!ended(&v[i]) && !stg__cancelled(ctx)) {
			stg__pidfd_signal(v[i].pidfd, v[i].pid, SIGKILL);
			stg__log(
			        ctx, STG_LOG_WARN,
			        "the mount's process %d did not end within %d s of SIGTERM: killed",
			        (int)v[i].pid, STOP_WAIT);
		}
		if (v[i].pidfd >= 0)
			close(v[i].pidfd);
	}
}

/* What sweep needs on its way. */
typedef struct sweeping {
	stg_cache *c;
	uid_t uid;
	int dfd; /* mounts/ */
	bool dry_run;
	stg_clean_fn report;
	void *arg;
	stopping *stop;
	size_t n_stop;
} sweeping;

/* Drop a mount's pins of the pack of this digest (its entry's, its kept
 * frames'). */
static void unpin_pack(sweeping *sw, const char *owner, const char *digest)
{
	if (!hex_digest(digest, strlen(digest)))
		return;
	char kept[STG_DIGEST_HEXLEN + 3];
	snprintf(kept, sizeof kept, "%s-f", digest);
	stg__unpin_key(sw->c, digest, owner);
	stg__unpin_key(sw->c, kept, owner);
}

typedef struct unpin_arg {
	sweeping *sw;
	const char *owner;
} unpin_arg;

static void unpin_other(void *arg, const char *digest)
{
	unpin_arg *u = arg;
	unpin_pack(u->sw, u->owner, digest);
}

/* End the mount mi: its process stopped (if it lives), unmounted, its
 * record removed. */
static void end_mount(sweeping *sw, const stg_mount_info *mi, bool shared)
{
	if (sw->report)
		sw->report(sw->arg, "mount", mi->mountpoint, 0);
	if (sw->dry_run)
		return;
	if (mi->alive) {
		/* its pins go here: the process would wait for the cache's lock,
		 * held by this clean, to drop them itself */
		unpin_pack(sw, mi->owner, mi->digest);
		if (mi->n_packs > 1) {
			char mp[STG_PATH_MAX + 1], pack[STG_PATH_MAX + 1],
			        digest[STG_DIGEST_HEXLEN + 1];
			char job[24];
			size_t n;
			unpin_arg u = {sw, mi->owner};
			record_read(sw->dfd, mi->owner, mp, pack, digest, job, &n, NULL,
			            unpin_other, &u);
		}
		if (stop_owner(mi->owner, sw->uid, &sw->stop[sw->n_stop]) == 0)
			sw->n_stop++;
	}
	/* an env's mount that other live servers share stays theirs */
	if (!shared && stg__is_stager_mount(mi->mountpoint, sw->uid))
		stg__unmount_path(mi->mountpoint);
	char sock[200];
	snprintf(sock, sizeof sock, "%s.sock", mi->owner);
	unlinkat(sw->dfd, sock, 0);
	unlinkat(sw->dfd, mi->owner, 0);
}

/* Is the env mount of v[i] served by another live server that this sweep
 * leaves alone (end[j] false)? */
static bool served_by_others(const stg_mount_info *v, size_t n, const bool *end, size_t i)
{
	for (size_t j = 0; v[i].env && j < n; j++)
		if (j != i && !end[j] && v[j].alive && v[j].env == v[i].env &&
		    !strcmp(v[j].mountpoint, v[i].mountpoint))
			return true;
	return false;
}

/* Mounts of dead processes; with job, all of that job's; with ask, those
 * of jobs Slurm says are over.  Slurm is asked last, once the rest is
 * done: what the epilog's clean is for never waits on it. */
static int sweep(stg_ctx *ctx, stg_cache *c, const char *job, bool ask, bool dry_run,
                 stg_clean_fn report, void *arg)
{
	stg_mount_info *v;
	size_t n;
	if (list_mounts(ctx, c, false, &v, &n))
		return -1;
	/* the owner of the scratch root is the owner of its mounts */
	struct stat st;
	sweeping sw = {.c = c,
	               .uid = fstat(c->rootfd, &st) == 0 ? st.st_uid : getuid(),
	               .dry_run = dry_run,
	               .report = report,
	               .arg = arg,
	               .stop = calloc(n ? n : 1, sizeof *sw.stop)};
	sw.dfd = openat(c->rootfd, "mounts", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int removed = 0;
	job_states js = {0};
	/* end[i]: v[i] is ended by this sweep (decided a pass at a time: an
	 * env's mount stays while a server the sweep leaves alone uses it) */
	bool *end = calloc(n ? n : 1, sizeof *end), *now = calloc(n ? n : 1, sizeof *now);
	for (int pass = 0; pass < 2 && end && now && sw.stop && sw.dfd >= 0; pass++) {
		for (size_t i = 0; i < n; i++) {
			const stg_mount_info *mi = &v[i];
			bool mine = !mi->alive || (job && mi->job && !strcmp(job, mi->job));
			now[i] = !end[i] && (pass == 0 ? mine
			                               : !mine && mi->job && ask &&
			                                         job_over(&js, mi->job) == 1);
			end[i] |= now[i];
		}
		for (size_t i = 0; i < n; i++)
			if (now[i]) {
				end_mount(&sw, &v[i], served_by_others(v, n, end, i));
				removed++;
			}
	}
	free(end);
	free(now);
	reap(ctx, sw.stop, sw.n_stop);
	free(sw.stop);
	if (sw.dfd >= 0)
		close(sw.dfd);
	stg_mount_list_free(v, n);
	return removed;
}

int stg__mounts_clean(stg_ctx *ctx, stg_cache *c, const char *job, bool dry_run,
                      stg_clean_fn report, void *arg)
{
	return sweep(ctx, c, job, true, dry_run, report, arg);
}

/* The owner of the live mount recorded at mountpoint, or "". */
static void serving_owner(stg_ctx *ctx, stg_cache *c, const char *mountpoint, char *owner,
                          size_t len)
{
	stg_mount_info *v = NULL;
	size_t n = 0;
	if (stg_mount_list(ctx, c, &v, &n))
		return;
	for (size_t i = 0; i < n; i++)
		if (v[i].alive && v[i].mountpoint && v[i].owner &&
		    !strcmp(v[i].mountpoint, mountpoint))
			snprintf(owner, len, "%s", v[i].owner);
	stg_mount_list_free(v, n);
}

stg_err stg_umount(stg_ctx *ctx, stg_cache *c, const char *mountpoint)
{
	char *real = realpath(mountpoint, NULL);
	/* a dead mount's directory cannot be resolved (ENOTCONN): take it as
	 * written, made absolute */
	if (!real && errno == ENOTCONN) {
		char cwd[STG_PATH_MAX + 1];
		if (mountpoint[0] == '/')
			real = strdup(mountpoint);
		else if (getcwd(cwd, sizeof cwd) && asprintf(&real, "%s/%s", cwd, mountpoint) < 0)
			real = NULL;
	}
	if (!real)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "'%s'", mountpoint);
	stg_err err = STG_OK;
	if (!stg__is_stager_mount(real, geteuid() == 0 ? (uid_t)-1 : getuid())) {
		err = stg__fail(ctx, STG_EUSAGE, "'%s' is not a stager mount of yours", mountpoint);
		goto out;
	}
	char owner[160] = "";
	if (c)
		serving_owner(ctx, c, real, owner, sizeof owner);
	if (stg__unmount_path(real)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot unmount '%s'", mountpoint);
		goto out;
	}
	/* the serving process ends once the last open file is closed: unless
	 * one stays open, it has let go of the pack when this returns (so that
	 * the pack's filesystem can be unmounted, the pack removed) */
	if (owner[0]) {
		stg_owner_cache oc = {0};
		for (int i = 0; i < UMOUNT_WAIT * 10 && stg__owner_alive(&oc, owner); i++) {
			stg__nap(ctx, 0.1);
			oc.n = 0;
		}
		if (stg__owner_alive(&oc, owner))
			stg__log(
			        ctx, STG_LOG_INFO,
			        "unmounted '%s'; a file in it is still open: its process ends when "
			        "the last one is closed",
			        mountpoint);
	}
	/* a dead one's record goes now */
	if (c)
		sweep(ctx, c, NULL, false, false, NULL, NULL);
out:
	free(real);
	return err;
}

size_t stg__env_servers(stg_cache *c, const char *mountpoint, unsigned long long ns,
                        const char *self, stg_env_server *out, size_t max)
{
	stg_mount_info *v;
	size_t n, k = 0;
	stg_ctx *ctx = stg_ctx_new();
	if (!ctx || list_mounts(ctx, c, false, &v, &n)) {
		stg_ctx_free(ctx);
		return 0;
	}
	for (size_t i = 0; i < n && k < max; i++) {
		if (!v[i].alive || v[i].env != ns || strcmp(v[i].mountpoint, mountpoint) ||
		    (self && !strcmp(v[i].owner, self)))
			continue;
		snprintf(out[k].owner, sizeof out[k].owner, "%s", v[i].owner);
		snprintf(out[k].digest, sizeof out[k].digest, "%s", v[i].digest);
		snprintf(out[k].job, sizeof out[k].job, "%s", v[i].job ? v[i].job : "");
		k++;
	}
	stg_mount_list_free(v, n);
	stg_ctx_free(ctx);
	return k;
}
