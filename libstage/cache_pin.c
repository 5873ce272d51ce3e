/*
 * cache_pin.c - who uses a cache entry: owners and their pins.
 *
 * An owner is a Slurm job ("job-ID") or a process ("pid-PID-START", its
 * start time telling it from a later process of the same pid).  A pin is
 * the empty file pins/<key>/<owner>; eviction skips an entry with a pin of
 * a live owner, and a pin whose owner is gone counts for nothing (clean
 * removes it).  Liveness is asked once per owner and operation
 * (stg_owner_cache): squeue for a job, /proc for a process; when in doubt,
 * an owner is alive, so nothing in use is evicted.
 */
#include "cache.h"
#include "fsutil.h"
#include "path.h"
#include "slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- owners ------------------------------------------------------------------ */

static bool owner_name_ok(const char *s)
{
	if (!*s || strlen(s) > 128 || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

/* Field 22 of /proc/PID/stat: when the process started (clock ticks). */
static unsigned long long proc_start(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: skip past the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* after ')' come fields 3.. ; starttime is field 22 */
	int field = 2;
	char state = 0;
	unsigned long long v = 0;
	for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
		field++;
		if (field == 3)
			state = tok[0];
		if (field == 22) {
			v = strtoull(tok, NULL, 10);
			break;
		}
	}
	if (state == 'Z' || state == 'X')
		return 0; /* a zombie is dead */
	return v;
}

/* The parent of pid, from /proc/PID/stat; 0 if unknown. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	int ppid = 0;
	return p && sscanf(p + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : 0;
}

/* Is pid a fork of its parent (same program, same arguments): a subshell
 * such as the one of DATA=$(stager stage ...), which ends at once? */
static bool is_fork_of(pid_t pid, pid_t parent)
{
	char a[4096], b[4096], pa[64], pb[64];
	snprintf(pa, sizeof pa, "/proc/%d/exe", (int)pid);
	snprintf(pb, sizeof pb, "/proc/%d/exe", (int)parent);
	ssize_t la = readlink(pa, a, sizeof a - 1), lb = readlink(pb, b, sizeof b - 1);
	if (la <= 0 || la != lb || memcmp(a, b, (size_t)la))
		return false;
	char ca[4096], cb[4096];
	snprintf(pa, sizeof pa, "/proc/%d/cmdline", (int)pid);
	snprintf(pb, sizeof pb, "/proc/%d/cmdline", (int)parent);
	int fa = open(pa, O_RDONLY | O_CLOEXEC), fb = open(pb, O_RDONLY | O_CLOEXEC);
	la = fa >= 0 ? read(fa, ca, sizeof ca) : -1;
	lb = fb >= 0 ? read(fb, cb, sizeof cb) : -1;
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return la > 0 && la == lb && !memcmp(ca, cb, (size_t)la);
}

/* The process a pin outside Slurm belongs to: the parent (the shell or
 * script that ran stager), past the subshells that are forks of it: the
 * one of DATA=$(stager stage ...) ends as soon as stager does, and a pin
 * of it would be dead at once. */
static int lasting_parent(void)
{
	pid_t p = getppid();
	for (int depth = 0; depth < 16 && p > 1; depth++) {
		pid_t up = parent_of(p);
		if (up <= 1 || !is_fork_of(p, up))
			break;
		p = up;
	}
	return (int)p;
}

char *stg__default_owner(void)
{
	char buf[160];
	const char *job = getenv("SLURM_JOB_ID");
	if (job && *job) {
		snprintf(buf, sizeof buf, "job-%s", job);
		if (owner_name_ok(buf))
			return strdup(buf);
	}
	return stg_owner_process(lasting_parent());
}

char *stg_owner_process(int pid)
{
	char buf[160];
	snprintf(buf, sizeof buf, "pid-%d-%llu", pid, proc_start((pid_t)pid));
	return strdup(buf);
}

bool stg__owner_alive(stg_owner_cache *oc, const char *owner)
{
	for (size_t i = 0; i < oc->n; i++)
		if (!strcmp(oc->name[i], owner))
			return oc->alive[i];
	bool alive = true; /* when in doubt, keep */
	if (!strncmp(owner, "job-", 4)) {
		int a = stg__slurm_job_alive(owner + 4);
		alive = a != 0;
	} else if (!strncmp(owner, "pid-", 4)) {
		int pid = 0;
		unsigned long long start = 0;
		if (sscanf(owner + 4, "%d-%llu", &pid, &start) == 2 && pid > 0)
			alive = proc_start(pid) == start && start != 0;
	}
	if (oc->n < sizeof oc->name / sizeof oc->name[0]) {
		snprintf(oc->name[oc->n], sizeof oc->name[0], "%s", owner);
		oc->alive[oc->n++] = alive;
	}
	return alive;
}

/* ---- pins ----------------------------------------------------------------------- */

int stg__pin(stg_cache *c, const char *key, const char *owner)
{
	if (!owner_name_ok(owner)) {
		errno = EINVAL;
		return -1;
	}
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "pins/%s", key);
	if (mkdirat(c->rootfd, path, 0700) && errno != EEXIST)
		return -1;
	snprintf(path, sizeof path, "pins/%s/%s", key, owner);
	int fd =
	        openat(c->rootfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? 1 : -1;
	close(fd);
	return 0;
}

void stg__unpin_key(stg_cache *c, const char *key, const char *owner)
{
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "pins/%s/%s", key, owner);
	if (unlinkat(c->rootfd, path, 0) == 0) {
		snprintf(path, sizeof path, "pins/%s", key);
		unlinkat(c->rootfd, path, AT_REMOVEDIR); /* if it was the last */
	}
}

size_t stg__pins_list(stg_cache *c, const char *key, char (*owners)[160], size_t max)
{
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "pins/%s", key);
	char **names;
	size_t n, k = 0;
	if (stg__dir_names(c->rootfd, path, false, &names, &n))
		return 0;
	for (size_t i = 0; i < n && k < max; i++) {
		size_t len = strlen(names[i]);
		if (names[i][0] != '.' && len < 160)
			memcpy(owners[k++], names[i], len + 1);
	}
	stg__names_free(names, n);
	return k;
}

bool stg__entry_pinned(stg_cache *c, const char *key, stg_owner_cache *oc)
{
	char owners[64][160];
	size_t n = stg__pins_list(c, key, owners, 64);
	for (size_t i = 0; i < n; i++)
		if (stg__owner_alive(oc, owners[i]))
			return true;
	return false;
}
