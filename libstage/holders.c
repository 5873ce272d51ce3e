/*
 * holders.c - who holds the node's shared-FS slots and the cluster's
 * leases, for `stager status` and for the warning of a wait that ran out.
 *
 * A node slot is an flock on slot.N in slot_dir: the kernel lists every
 * flock in /proc/locks with its holder's pid and the file's device and
 * inode, so nothing needs writing to say who holds one (and a holder that
 * dies lets go at once).  A cluster lease file holds "HOST PID START".
 */
#include "holders.h"
#include "ctx.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define SLOT_DIR_DEFAULT  "/run/lock/stager"
#define SLOT_DIR_FALLBACK "/dev/shm/stager-slots"

static int64_t boot_time(void)
{
	FILE *f = fopen("/proc/stat", "re");
	char line[256];
	long long bt = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "btime %lld", &bt) == 1)
			break;
	if (f)
		fclose(f);
	return bt;
}

/* The process pid: owner, start, and what it runs ("stager stage"). */
static void describe(int pid, stg_holder *h)
{
	char path[64];
	struct stat st;
	h->pid = pid;
	snprintf(path, sizeof path, "/proc/%d", pid);
	if (pid <= 0 || stat(path, &st))
		return;
	h->uid = st.st_uid;
	struct passwd pw, *res = NULL;
	char buf[1024];
	if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &res) == 0 && res)
		snprintf(h->user, sizeof h->user, "%s", pw.pw_name);
	else
		snprintf(h->user, sizeof h->user, "uid %u", (unsigned)st.st_uid);
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	char sbuf[1024];
	size_t n = f ? fread(sbuf, 1, sizeof sbuf - 1, f) : 0;
	if (f)
		fclose(f);
	sbuf[n] = '\0';
	/* the fields after the command's name, which may hold spaces */
	const char *p = strrchr(sbuf, ')');
	unsigned long long start = 0;
	if (p && sscanf(p + 2,
	                "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
	                "%*d %*d %*d %*d %llu",
	                &start) == 1) {
		long hz = sysconf(_SC_CLK_TCK);
		h->since = boot_time() + (int64_t)(start / (unsigned long long)(hz > 0 ? hz : 100));
	}
	snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
	f = fopen(path, "re");
	n = f ? fread(sbuf, 1, sizeof sbuf - 1, f) : 0;
	if (f)
		fclose(f);
	sbuf[n] = '\0';
	/* the program's base name and its first argument */
	const char *prog = strrchr(sbuf, '/') ? strrchr(sbuf, '/') + 1 : sbuf;
	size_t first = strlen(sbuf) + 1;
	const char *arg = first < n ? sbuf + first : "";
	snprintf(h->what, sizeof h->what, "%s%s%.24s", prog, *arg ? " " : "", arg);
}

static stg_err add(stg_ctx *ctx, stg_holder **v, size_t *n, const stg_holder *h)
{
	stg_holder *nv = realloc(*v, (*n + 1) * sizeof *nv);
	if (!nv)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	nv[(*n)++] = *h;
	*v = nv;
	return STG_OK;
}

static stg_err node_holders(stg_ctx *ctx, const stg_limits *lim, stg_holder **v, size_t *n)
{
	const char *dir = lim->slot_dir;
	struct stat st;
	if (!strcmp(dir, SLOT_DIR_DEFAULT) && stat(dir, &st) && stat(SLOT_DIR_FALLBACK, &st) == 0)
		dir = SLOT_DIR_FALLBACK;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return STG_OK; /* no slot taken on this node yet */
	stg_err err = STG_OK;
	FILE *locks = fopen("/proc/locks", "re");
	char line[256];
	for (unsigned i = 0; locks && !err && i < lim->node_slots; i++) {
		char name[32];
		snprintf(name, sizeof name, "slot.%u", i);
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		rewind(locks);
		while (!err && fgets(line, sizeof line, locks)) {
			char kind[16];
			int pid;
			unsigned maj, min;
			unsigned long long ino;
			/* "1: FLOCK  ADVISORY  WRITE 2345 00:1a:12345 0 EOF"; waiters
			 * are the lines with "->" */
			if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%llu", kind, &pid, &maj, &min,
			           &ino) != 5 ||
			    strcmp(kind, "FLOCK") || ino != (unsigned long long)st.st_ino ||
			    maj != major(st.st_dev) || min != minor(st.st_dev))
				continue;
			stg_holder h = {.index = i};
			snprintf(h.kind, sizeof h.kind, "node");
			describe(pid, &h);
			err = add(ctx, v, n, &h);
		}
	}
	if (locks)
		fclose(locks);
	close(dfd);
	return err;
}

static stg_err cluster_holders(stg_ctx *ctx, const stg_limits *lim, stg_holder **v, size_t *n)
{
	stg_err err = STG_OK;
	for (unsigned i = 0; !err && lim->lease_dir[0] && i < lim->cluster_slots; i++) {
		char path[STG_PATH_MAX], line[320];
		snprintf(path, sizeof path, "%s/lease.%u", lim->lease_dir, i);
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;
		if (fd < 0)
			continue;
		ssize_t len = fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
		                      ? read(fd, line, sizeof line - 1)
		                      : -1;
		close(fd);
		if (len <= 0)
			continue;
		line[len] = '\0';
		stg_holder h = {.index = i, .uid = st.st_uid};
		snprintf(h.kind, sizeof h.kind, "cluster");
		long long since = 0;
		if (sscanf(line, "%63s %d %lld", h.host, &h.pid, &since) != 3)
			continue;
		h.since = since;
		struct passwd pw, *res = NULL;
		char buf[1024];
		if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &res) == 0 && res)
			snprintf(h.user, sizeof h.user, "%s", pw.pw_name);
		else
			snprintf(h.user, sizeof h.user, "uid %u", (unsigned)st.st_uid);
		snprintf(h.what, sizeof h.what, "stager");
		err = add(ctx, v, n, &h);
	}
	return err;
}

stg_err stg__holders(stg_ctx *ctx, const stg_limits *lim, stg_holder **v, size_t *n)
{
	*v = NULL;
	*n = 0;
	stg_err err = node_holders(ctx, lim, v, n);
	if (!err)
		err = cluster_holders(ctx, lim, v, n);
	if (err) {
		free(*v);
		*v = NULL;
		*n = 0;
	}
	return err;
}

void stg__holders_text(stg_ctx *ctx, const stg_limits *lim, const char *kind, char *out, size_t len)
{
	stg_holder *v;
	size_t n, used = 0;
	out[0] = '\0';
	if (stg__holders(ctx, lim, &v, &n))
		return;
	for (size_t i = 0; i < n && used < len; i++) {
		if (strcmp(v[i].kind, kind))
			continue;
		char at[16] = "?";
		time_t t = (time_t)v[i].since;
		struct tm tm;
		if (v[i].since && localtime_r(&t, &tm))
			strftime(at, sizeof at, "%H:%M:%S", &tm);
		int w = snprintf(out + used, len - used, "%s%s%s%s pid %d (%s) since %s",
		                 used ? "; " : "", v[i].user[0] ? v[i].user : "unknown",
		                 v[i].host[0] ? "@" : "", v[i].host, v[i].pid,
		                 v[i].what[0] ? v[i].what : "?", at);
		used += w > 0 ? (size_t)w : 0;
	}
	free(v);
}
