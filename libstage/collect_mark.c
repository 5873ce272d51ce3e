/*
 * collect_mark.c - who writes temporaries in a DEST, for any node to see.
 *
 * A collect writes each file as .stager-tmp.HOST.PID.N and renames it.
 * Killed in between (Slurm's SIGKILL at KillWait), it leaves the
 * temporary on the shared filesystem.  Its own node's record names it, but
 * the next collect into that DEST may run on another node.  So while a
 * collect writes in DEST it keeps a marker there,
 * DEST/.stager-collecting.HOST.PID[.JOB], JOB being the Slurm job it
 * belongs to (in the name: an empty file costs one operation, no write).
 * A collect that finds a marker whose writer is gone (the same host and
 * no such process; else its job ended, as squeue says; else a day old)
 * removes that writer's temporaries, and then the marker.  Only names
 * collect makes are removed, never through a symbolic link.
 */
#include "collect_mark.h"
#include "slurm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MARK        ".stager-collecting."
#define STALE_AFTER (24 * 3600) /* a marker with no job, from another host */

const char *stg__collect_host(void)
{
	static char host[72];
	if (!host[0]) {
		const char *n = getenv("SLURMD_NODENAME");
		struct utsname u;
		if (!(n && *n) && uname(&u) == 0)
			n = u.nodename;
		snprintf(host, sizeof host, "%s", n && *n ? n : "host");
		host[strcspn(host, "./")] = '\0';
	}
	return host;
}

int stg__mark_begin(int destfd, char *name, size_t len)
{
	const char *job = getenv("SLURM_JOB_ID");
	bool jobbed = job && *job && strspn(job, "0123456789_") == strlen(job) && strlen(job) < 32;
	snprintf(name, len, MARK "%s.%d%s%s", stg__collect_host(), (int)getpid(), jobbed ? "." : "",
	         jobbed ? job : "");
	int fd = openat(destfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		name[0] = '\0';
		return -1;
	}
	close(fd);
	return 0;
}

void stg__mark_end(int destfd, const char *name)
{
	if (name[0])
		unlinkat(destfd, name, 0);
}

/* Is the writer of marker name (HOST.PID[.JOB] after the prefix) gone?
 * Its temporaries' prefix into prefix. */
static bool writer_gone(int destfd, const char *name, char *prefix, size_t len)
{
	char host[72], job[32] = "";
	int pid = 0, used = 0;
	const char *hp = name + strlen(MARK);
	if (sscanf(hp, "%71[^.].%d%n", host, &pid, &used) != 2 || pid <= 0)
		return false;
	if (hp[used] == '.' && sscanf(hp + used + 1, "%31[0-9_]", job) != 1)
		return false;
	snprintf(prefix, len, ".stager-tmp.%s.%d.", host, pid);
	if (!strcmp(host, stg__collect_host()))
		return kill((pid_t)pid, 0) && errno == ESRCH;
	if (job[0])
		return stg__slurm_job_alive(job) == 0;
	struct stat st;
	return fstatat(destfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       time(NULL) - st.st_mtime > STALE_AFTER;
}

static char sweep_prefix[128];
static size_t sweep_count;
static bool sweep_flat;

static int sweep_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	if (flag == FTW_D && sweep_flat && f->level > 0)
		return FTW_SKIP_SUBTREE;
	if (flag == FTW_F && S_ISREG(st->st_mode) &&
	    !strncmp(path + f->base, sweep_prefix, strlen(sweep_prefix)) && unlink(path) == 0)
		sweep_count++;
	return FTW_CONTINUE;
}

void stg__mark_sweep(stg_ctx *ctx, int destfd, const char *dest, bool flat)
{
	sweep_flat = flat;
	int fd = openat(destfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, MARK, strlen(MARK)) ||
		    !writer_gone(destfd, e->d_name, sweep_prefix, sizeof sweep_prefix))
			continue;
		sweep_count = 0;
		nftw(dest, sweep_one, 16, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL);
		if (unlinkat(destfd, e->d_name, 0) == 0 && sweep_count)
			stg__log(ctx, STG_LOG_INFO,
			         "removed %zu temporar%s that a collect killed on %s left in '%s'",
			         sweep_count, sweep_count == 1 ? "y" : "ies",
			         e->d_name + strlen(MARK), dest);
	}
	closedir(d);
}
