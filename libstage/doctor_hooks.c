/*
 * doctor_hooks.c - stg_doctor_hooks: do this node's Slurm prolog, task
 * prolog and epilog work when slurmd runs them?
 *
 * slurmd runs Prolog and Epilog as root with almost nothing in the
 * environment: no PATH (execvp then looks only in /bin and /usr/bin), no
 * HOME, only the job's SLURM_* variables.  A hook tried by hand from a
 * root shell works, and fails under slurmd.  So the hooks are run here as
 * slurmd runs them, for a fake job: execve() of the very file slurm.conf
 * names, that environment and no more, cwd /, stdin /dev/null, the task
 * prolog as the job's user; each in a process group of its own, killed
 * after a time bound, its stdout and stderr kept (bounded) for the report.
 *
 * The fake job's id is above any Slurm gives (ids are under 2^26 per
 * cluster, 63 clusters of a federation below 4294901760), so the round
 * trip cannot touch a real job's directory.  What it leaves of the job's
 * directory is removed: contents by a child running as the directory's
 * owner (never root on a user's files), through descriptors, never
 * following a link, and only under a directory that is root's alone.
 * Before anything runs, each hook's file is checked: a root-run file that
 * others can change is a root hole, and is not run.
 */
#include "hook_run.h"
#include "ctx.h"
#include "fsutil.h"
#include "slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOOK_LIMIT    60 /* s a hook may run (opts.timeout 0) */
#define PER_ROLE      16 /* scripts a glob may name */
#define FAKE_JOB_BASE 4294967000u

enum role { PROLOG, TASK_PROLOG, EPILOG, N_ROLES };
static const char *const role_name[] = {"prolog", "task-prolog", "epilog"};
static const char *const conf_key[] = {"Prolog", "TaskProlog", "Epilog"};
static const char *const context[] = {"prolog_slurmd", "prolog_task", "epilog_slurmd"};

typedef struct hook {
	enum role role;
	char path[PATH_MAX];
	bool safe; /* its file passed the checks */
} hook;

typedef struct hd {
	stg_ctx *ctx;
	stg_hook_check_fn fn;
	void *arg;
	unsigned timeout;
	char job[16], user[256], node[256], cluster[256], conf[PATH_MAX];
	bool on_node; /* Slurm knows this host as a node, or cannot tell */
	uid_t uid;
	gid_t gid, groups[256];
	int n_groups;
	hook hooks[N_ROLES * PER_ROLE];
	size_t n_hooks;
} hd;

void stg_doctor_hooks_opts_init(stg_doctor_hooks_opts *opts)
{
	memset(opts, 0, sizeof *opts);
}

static void report(hd *d, stg_check_level level, const char *name, const char *fix,
                   const stg_hook_result *h, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));

static void report(hd *d, stg_check_level level, const char *name, const char *fix,
                   const stg_hook_result *h, const char *fmt, ...)
{
	char found[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(found, sizeof found, fmt, ap);
	va_end(ap);
	stg_check c = {.level = level, .name = name, .found = found, .fix = fix};
	d->fn(d->arg, &c, h);
}

static void add_hook(hd *d, enum role r, const char *path)
{
	size_t n = strlen(path);
	if (d->n_hooks < sizeof d->hooks / sizeof d->hooks[0] && n < PATH_MAX) {
		hook *k = &d->hooks[d->n_hooks++];
		k->role = r;
		memcpy(k->path, path, n + 1);
	}
}

/* This install's hooks, beside the running program: BIN/../libexec/stager. */
static bool own_hooks(char *dir, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	for (int i = 0; i < 2; i++) {
		char *s = strrchr(exe, '/');
		if (!s)
			return false;
		*s = '\0';
	}
	char p[PATH_MAX + 32];
	if (snprintf(dir, len, "%s/libexec/stager", exe) >= (int)len)
		return false;
	snprintf(p, sizeof p, "%s/epilog", dir);
	return access(p, F_OK) == 0;
}

/* The hooks slurm.conf names, from scontrol; false if none are known. */
static bool hooks_from_slurm(hd *d)
{
	size_t len = 1 << 16;
	char *out = malloc(len), own[1024], hint[2200] = "", fix[2500];
	if (!out)
		return false;
	if (own_hooks(own, sizeof own))
		snprintf(hint, sizeof hint, " (this install's are in '%s': --hooks %s)", own, own);
	snprintf(fix, sizeof fix,
	         "run doctor where scontrol reaches Slurm, or name the hooks: "
	         "stager doctor --hooks DIR%s",
	         hint);
	char *argv[] = {"scontrol", "show", "config", NULL};
	int status = -1;
	if (stg__capture(argv, out, len, &status) || status) {
		report(d, STG_CHECK_WARN, "slurm hooks", fix, NULL,
		       "Slurm is not reachable (`scontrol show config` %s): the hooks slurm.conf "
		       "names are unknown",
		       status < 0 ? "could not run" : "failed");
		free(out);
		return false;
	}
	char v[PATH_MAX], flags[256], names[256] = "";
	bool set[N_ROLES] = {false};
	stg__slurm_conf_value(out, "ClusterName", d->cluster, sizeof d->cluster);
	if (!getenv("SLURM_CONF"))
		stg__slurm_conf_value(out, "SLURM_CONF", d->conf, sizeof d->conf);
	stg__slurm_conf_value(out, "PrologFlags", flags, sizeof flags);
	for (int r = 0; r < N_ROLES; r++) {
		stg__slurm_conf_value(out, conf_key[r], v, sizeof v);
		if (!*v)
			continue;
		set[r] = true;
		size_t o = strlen(names);
		snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "", conf_key[r]);
		glob_t g;
		if (r != TASK_PROLOG && strpbrk(v, "*?[")) {
			/* slurmd runs every file the pattern matches */
			if (glob(v, 0, NULL, &g) == 0) {
				for (size_t i = 0; i < g.gl_pathc && i < PER_ROLE; i++)
					add_hook(d, (enum role)r, g.gl_pathv[i]);
				globfree(&g);
			} else {
				report(d, STG_CHECK_WARN, role_name[r], "correct the pattern", NULL,
				       "%s=%s matches no file: slurmd runs none", conf_key[r], v);
			}
		} else {
			add_hook(d, (enum role)r, v);
		}
	}
	free(out);
	if (!*names) {
		snprintf(fix, sizeof fix,
		         "name stager's in slurm.conf: Prolog, TaskProlog and Epilog "
		         "PREFIX/libexec/stager/{prolog,task-prolog,epilog}, PrologFlags=Alloc%s",
		         hint);
		report(d, STG_CHECK_WARN, "slurm hooks", fix, NULL,
		       "slurm.conf names no Prolog, TaskProlog or Epilog: jobs get no private "
		       "directory on scratch, and nothing cleans what they leave");
		return false;
	}
	report(d, STG_CHECK_OK, "slurm hooks", NULL, NULL,
	       "slurm.conf (scontrol show config) names %s; a fake job %s of %s runs through "
	       "them",
	       names, d->job, d->user);
	static const char *const lack[] = {
	        "jobs get no private directory on node-local scratch from it",
	        "jobs are not told their directory (SLURM_TMPDIR)",
	        "nothing removes what a job left on this node when it ends"};
	for (int r = 0; r < N_ROLES; r++)
		if (!set[r])
			report(d, STG_CHECK_WARN, role_name[r],
			       "name stager's in slurm.conf (PREFIX/libexec/stager)", NULL,
			       "slurm.conf names no %s: %s", conf_key[r], lack[r]);
	if (set[PROLOG] && !strstr(flags, "Alloc") && !strstr(flags, "Contain"))
		report(d, STG_CHECK_WARN, "PrologFlags", "PrologFlags=Alloc in slurm.conf", NULL,
		       "PrologFlags=%s: the prolog runs on a node only when a step of the job "
		       "first starts there, so sbcast (stage --all-nodes) can find no job "
		       "directory on the job's other nodes",
		       *flags ? flags : "(none)");
	return true;
}

/* The first directory above path (path itself not included) that someone
 * other than root could change: not root's, or group- or world-writable
 * without the sticky bit.  false if there is none. */
static bool unsafe_dir(const char *path, char *bad, size_t len, struct stat *st)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = strrchr(p, '/'); s; s = strrchr(p, '/')) {
		*s = '\0';
		const char *dir = s == p ? "/" : p;
		if (stat(dir, st) == 0 &&
		    (st->st_uid != 0 || ((st->st_mode & 022) && !(st->st_mode & S_ISVTX)))) {
			snprintf(bad, len, "%s", dir);
			return true;
		}
		if (s == p)
			break;
	}
	return false;
}

/* The file of a hook, without running it: there, a program, root's, and
 * no one else can change it or the directories above it. */
static void check_file(hd *d, hook *k)
{
	struct stat st, ds;
	stg_hook_result h = {
	        .hook = role_name[k->role], .path = k->path, .owner = -1, .exit_status = -1};
	const char *name = role_name[k->role];
	char real[PATH_MAX], bad[PATH_MAX];
	k->safe = false;
	if (stat(k->path, &st)) {
		report(d, STG_CHECK_FAIL, name, "install it (make install), or correct its path",
		       &h, "'%s': %s", k->path, strerror(errno));
		return;
	}
	h.mode = st.st_mode & 07777;
	h.owner = (long)st.st_uid;
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
		report(d, STG_CHECK_FAIL, name, "install it with mode 755", &h,
		       "'%s' is not an executable file (mode %04o)", k->path, h.mode);
	} else if (st.st_uid != 0 || (st.st_mode & 022)) {
		report(d, STG_CHECK_FAIL, name, "chown root:root it and chmod go-w it", &h,
		       "'%s' is mode %04o, owner %u: slurmd runs it for every job, so whoever can "
		       "change it is root on this node (not run)",
		       k->path, h.mode, (unsigned)st.st_uid);
	} else if (unsafe_dir(k->path, bad, sizeof bad, &ds) ||
	           (realpath(k->path, real) && unsafe_dir(real, bad, sizeof bad, &ds))) {
		report(d, STG_CHECK_FAIL, name,
		       "install the hooks in directories only root can change", &h,
		       "'%s' is in '%s' (mode %04o, owner %u), which others can change: they "
		       "could put another file in its place (not run)",
		       k->path, bad, (unsigned)(ds.st_mode & 07777), (unsigned)ds.st_uid);
	} else {
		k->safe = true;
		report(d, STG_CHECK_OK, name, NULL, &h, "'%s' (root's, mode %04o)", k->path,
		       h.mode);
	}
}

/* Run hook k for the fake job, in the environment slurmd gives it. */
static stg_err run_hook(hd *d, const hook *k, stg_hook_run *r)
{
	/* what slurmd 22.05 gives (the job's limits, partition, output and
	 * the like left out: nothing stager's hooks read) */
	static const char *const more[] = {
	        [PROLOG] = "",
	        [TASK_PROLOG] = "SLURM_STEP_ID=0\nSLURM_PROCID=0\nSLURM_LOCALID=0\nSLURM_NODEID=0\n"
	                        "SLURM_NNODES=1\n",
	        [EPILOG] = "SLURM_JOB_EXIT_CODE=0\nSLURM_JOB_EXIT_CODE2=0:0\n"
	                   "SLURM_JOB_DERIVED_EC=0\n"};
	char pool[2 * PATH_MAX + 2048], *env[32];
	size_t n = 0;
	int w = snprintf(pool, sizeof pool,
	                 "SLURM_JOB_ID=%s\nSLURM_JOBID=%s\nSLURM_JOB_UID=%u\nSLURM_UID=%u\n"
	                 "SLURM_JOB_GID=%u\nSLURM_JOB_USER=%s\nSLURMD_NODENAME=%s\n"
	                 "SLURM_NODELIST=%s\nSLURM_JOB_NUM_NODES=1\nSLURM_SCRIPT_CONTEXT=%s\n"
	                 "SLURM_CLUSTER_NAME=%s\nSLURM_CONF=%s\n%s",
	                 d->job, d->job, (unsigned)d->uid, (unsigned)d->uid, (unsigned)d->gid,
	                 d->user, d->on_node ? d->node : "", d->node, context[k->role], d->cluster,
	                 d->conf, more[k->role]);
	/* one variable a line; those without a value (no cluster name, no
	 * node name) left out */
	for (char *v = pool, *e; w > 0 && (size_t)w < sizeof pool && (e = strchr(v, '\n'));
	     v = e + 1) {
		*e = '\0';
		if (e[-1] != '=' && n < sizeof env / sizeof env[0] - 1)
			env[n++] = v;
	}
	env[n] = NULL;
	stg_hook_cred user = {
	        .uid = d->uid, .gid = d->gid, .groups = d->groups, .n_groups = d->n_groups};
	return stg__hook_run(d->ctx, k->path, env, k->role == TASK_PROLOG ? &user : NULL,
	                     d->timeout, r);
}

/* What a run says, for the report: its result, the level it earns, and
 * the found text's start; a failure's fix in fix. */
static stg_check_level judge(hd *d, const hook *k, const stg_hook_run *r, stg_hook_result *h,
                             char *found, size_t flen, char *fix, size_t xlen)
{
	*h = (stg_hook_result){.hook = role_name[k->role],
	                       .path = k->path,
	                       .ran = 1,
	                       .user = k->role == TASK_PROLOG ? d->user : "root",
	                       .job = d->job,
	                       .exit_status = r->exit_status,
	                       .signal = r->sig,
	                       .timed_out = r->timed_out,
	                       .seconds = r->secs,
	                       .out_lines = (const char *const *)r->out.lines,
	                       .n_out = r->out.n_lines,
	                       .err_lines = (const char *const *)r->err.lines,
	                       .n_err = r->err.n_lines};
	int n = snprintf(found, flen, "'%s' as %s for job %s: ", k->path, h->user, d->job);
	const char *why = NULL;
	bool not_found = r->exit_status == 127;
	for (size_t i = 0; i < r->err.n_lines; i++)
		not_found |= strstr(r->err.lines[i], "not found") ||
		             strstr(r->err.lines[i], "failed to run command");
	if (r->exec_errno)
		snprintf(found + n, flen - (size_t)n, "cannot be run: %s", strerror(r->exec_errno));
	else if (r->timed_out)
		snprintf(found + n, flen - (size_t)n, "still running after %u s: killed",
		         d->timeout);
	else if (r->sig)
		snprintf(found + n, flen - (size_t)n, "killed by signal %d after %.1f s", r->sig,
		         r->secs);
	else
		snprintf(found + n, flen - (size_t)n, "exit %d in %.1f s", r->exit_status, r->secs);
	if (r->err.n_lines) {
		size_t m = strlen(found);
		snprintf(found + m, flen - m, "; %zu line%s on stderr%s", r->err.n_lines,
		         r->err.n_lines == 1 ? "" : "s",
		         r->err.n_lines == STG_HOOK_LINES_MAX ? " or more" : "");
	}
	if (r->exec_errno)
		why = "check its #! line and that the job's user may run it";
	else if (r->timed_out)
		why = "find what it waits for: slurmd would wait for it (up to "
		      "PrologEpilogTimeout), and the job with it";
	else if (not_found)
		why = "a command was not found: slurmd gives hooks no PATH (execvp looks only in "
		      "/bin and /usr/bin); set PATH at its top, or call commands by full path";
	else if (r->exit_status == 126)
		why = "a command could not be run (permissions, or not a program)";
	else if (r->exit_status != 0)
		why = k->role == PROLOG   ? "a failing prolog drains the node and holds the job"
		      : k->role == EPILOG ? "a failing epilog drains the node"
		                          : "a failing task prolog's exports are lost";
	else if (r->err.n_lines)
		why = k->role == EPILOG ? "an epilog tells its problems on stderr: see them"
		                        : "it wrote to stderr: see what it says";
	stg_check_level lv =
	        !why ? STG_CHECK_OK
	        : r->exit_status == 0 && !r->exec_errno && k->role != EPILOG && !not_found
	                ? STG_CHECK_WARN
	                : STG_CHECK_FAIL;
	if (why) {
		int m = snprintf(fix, xlen, "%s (try it: ", why);
		if (k->role == TASK_PROLOG && m > 0 && (size_t)m < xlen)
			m += snprintf(fix + m, xlen - (size_t)m,
			              "setpriv --reuid=%u --regid=%u --init-groups ",
			              (unsigned)d->uid, (unsigned)d->gid);
		if (m > 0 && (size_t)m < xlen)
			snprintf(fix + m, xlen - (size_t)m,
			         "env -i SLURM_JOB_ID=%s SLURM_JOB_UID=%u SLURM_JOB_GID=%u "
			         "SLURM_JOB_USER=%s %s)",
			         d->job, (unsigned)d->uid, (unsigned)d->gid, d->user, k->path);
	}
	return lv;
}

/* The job's directory in what the task prolog exported as SLURM_TMPDIR:
 * the path up to the component that is the job's id ("" if none is). */
static void job_dir_of(const hd *d, const char *tmpdir, char *out, size_t len)
{
	size_t jl = strlen(d->job);
	*out = '\0';
	for (const char *p = strchr(tmpdir, '/'); p; p = strchr(p + 1, '/'))
		if (!strncmp(p + 1, d->job, jl) && (p[1 + jl] == '/' || !p[1 + jl])) {
			snprintf(out, len, "%.*s", (int)(p + 1 + jl - tmpdir), tmpdir);
			return;
		}
}

/* Remove what is left at dir: its contents by a child running as their
 * owner, the directory itself by us, only under a directory that is
 * root's alone.  0 if nothing is left, else -1 with why. */
static int remove_left(const char *dir, char *why, size_t len)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dir);
	char *s = strrchr(parent, '/');
	if (!s || !s[1]) {
		snprintf(why, len, "not a path");
		return -1;
	}
	*s = '\0';
	const char *name = s + 1;
	int pfd = open(*parent ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;
	struct stat ps, st;
	if (pfd < 0 || fstat(pfd, &ps)) {
		snprintf(why, len, "%s", strerror(errno));
		goto out;
	}
	if (ps.st_uid != 0 || (ps.st_mode & 022)) {
		snprintf(why, len, "'%s' is not root's alone: left for you to look at", parent);
		goto out;
	}
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		rc = errno == ENOENT ? 0 : -1;
		snprintf(why, len, "%s", strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		rc = unlinkat(pfd, name, 0);
		snprintf(why, len, "%s", strerror(errno));
		goto out;
	}
	pid_t pid = fork();
	if (pid == 0) {
		if (st.st_uid && (setgroups(0, NULL) || setgid(st.st_gid) || setuid(st.st_uid)))
			_exit(1);
		int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		char **names;
		size_t n;
		if (fd < 0 || fchmod(fd, 0700) || stg__dir_names(fd, NULL, false, &names, &n))
			_exit(1);
		for (size_t i = 0; i < n; i++)
			stg__rmtree_at(fd, names[i]);
		_exit(0);
	}
	int wst;
	while (pid > 0 && waitpid(pid, &wst, 0) < 0 && errno == EINTR)
		;
	rc = unlinkat(pfd, name, AT_REMOVEDIR);
	snprintf(why, len, "%s", strerror(errno));
out:
	if (pfd >= 0)
		close(pfd);
	return rc;
}

/* The task prolog's exports, and what its SLURM_TMPDIR is; the job's
 * directory (or "") into jobdir. */
static stg_check_level task_exports(hd *d, const stg_hook_run *r, stg_hook_result *h,
                                    const char **ex, char *found, size_t flen, char *fix,
                                    size_t xlen, char *jobdir, size_t jlen)
{
	const char *tmpdir = NULL;
	size_t n = 0;
	for (size_t i = 0; i < r->out.n_lines && n < STG_HOOK_LINES_MAX; i++)
		if (!strncmp(r->out.lines[i], "export ", 7) && strchr(r->out.lines[i], '=')) {
			ex[n++] = r->out.lines[i] + 7;
			if (!strncmp(ex[n - 1], "SLURM_TMPDIR=", 13))
				tmpdir = ex[n - 1] + 13;
		}
	h->exports = ex;
	h->n_exports = n;
	size_t m = strlen(found);
	if (!tmpdir) {
		snprintf(found + m, flen - m, "; exports no SLURM_TMPDIR%s",
		         n ? " (only other variables)" : "");
		if (!*fix)
			snprintf(fix, xlen,
			         "a task prolog tells each job its directory on node-local "
			         "scratch as SLURM_TMPDIR (stager's does)");
		return STG_CHECK_WARN;
	}
	job_dir_of(d, tmpdir, jobdir, jlen);
	h->job_dir = *jobdir ? jobdir : NULL;
	struct stat st;
	const char *bad = NULL;
	char own[64];
	if (tmpdir[0] != '/')
		bad = "is not an absolute path";
	else if (lstat(tmpdir, &st))
		bad = errno == ENOENT ? "does not exist" : strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		bad = "is not a directory";
	else if (st.st_uid != d->uid) {
		snprintf(own, sizeof own, "is owned by uid %u, not by the job's user",
		         (unsigned)st.st_uid);
		bad = own;
	}
	if (bad) {
		snprintf(found + m, flen - m, "; exports SLURM_TMPDIR=%s, which %s", tmpdir, bad);
		if (!*fix)
			snprintf(fix, xlen,
			         "the prolog must make the job's directory, owned by the "
			         "job's user, before the task prolog exports it");
		return STG_CHECK_FAIL;
	}
	snprintf(found + m, flen - m, "; exports SLURM_TMPDIR=%s (%s's, mode %04o)%s", tmpdir,
	         d->user, (unsigned)(st.st_mode & 07777),
	         *jobdir ? ""
	                 : ", a path without the job's id: whether the epilog removes it is "
	                   "not checked");
	return STG_CHECK_OK;
}

/* As the job would, the job's user puts files in its directory (a job
 * directory left empty says nothing of an epilog: root's rmdir removes
 * it).  false if they could not be made. */
static bool job_files(hd *d, const char *jobdir)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct stat st;
		int fd = -1, sub = -1;
		if (setgroups((size_t)d->n_groups, d->groups) || setgid(d->gid) || setuid(d->uid))
			_exit(1);
		if ((fd = open(jobdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    fstat(fd, &st) || st.st_uid != d->uid || mkdirat(fd, "stager-doctor", 0700) ||
		    (sub = openat(fd, "stager-doctor", O_RDONLY | O_DIRECTORY | O_NOFOLLOW)) < 0)
			_exit(1);
		int f = openat(sub, "a job's file", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
		_exit(f < 0 || stg__write_full(f, "data\n", 5) || close(f));
	}
	int st = -1;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* What the round trip left of the job's directory, after the epilogs
 * (the last one run: epilog, or NULL). */
static void check_left(hd *d, const char *jobdir, bool existed, const char *epilog)
{
	stg_hook_result h = {.job = d->job, .job_dir = jobdir, .exit_status = -1, .owner = -1};
	struct stat st;
	char why[PATH_MAX + 128], fix[PATH_MAX + 512];
	if (lstat(jobdir, &st)) {
		if (existed)
			report(d, STG_CHECK_OK, "job directory", NULL, &h,
			       "'%s': made by the prolog, exported by the task prolog, the job's "
			       "files put in it, removed by the epilog",
			       jobdir);
		return;
	}
	h.job_dir_left = 1;
	bool gone = remove_left(jobdir, why, sizeof why) == 0;
	if (epilog)
		snprintf(fix, sizeof fix,
		         "the epilog must remove it, and what the job put in it (as the job's "
		         "user, never following a link); run it as slurmd does and see what "
		         "fails: env -i SLURM_JOB_ID=%s SLURM_JOB_UID=%u SLURM_JOB_GID=%u "
		         "SLURM_JOB_USER=%s %s",
		         d->job, (unsigned)d->uid, (unsigned)d->gid, d->user, epilog);
	else
		snprintf(fix, sizeof fix,
		         "name an epilog in slurm.conf (stager's: "
		         "PREFIX/libexec/stager/epilog)");
	report(d, epilog ? STG_CHECK_FAIL : STG_CHECK_WARN, "job directory", fix, &h,
	       "'%s' still there after %s; %s%s", jobdir,
	       epilog ? "the epilog" : "the round trip (no epilog ran)",
	       gone ? "doctor removed it" : "doctor could not remove it: ", gone ? "" : why);
}

stg_err stg_doctor_hooks(stg_ctx *ctx, const stg_doctor_hooks_opts *opts, stg_hook_check_fn fn,
                         void *arg)
{
	if (geteuid() != 0) {
		stg_check c = {.level = STG_CHECK_OK,
		               .name = "slurm hooks",
		               .found = "skipped: run as root to check the Slurm hooks"};
		fn(arg, &c, NULL);
		return STG_OK;
	}
	stg_err err = STG_OK;
	hd *d = calloc(1, sizeof *d);
	const char **ex = calloc(STG_HOOK_LINES_MAX, sizeof *ex);
	char *found = malloc(4096), *fix = malloc(2048), jobdir[PATH_MAX] = "";
	if (!d || !ex || !found || !fix) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	d->ctx = ctx;
	d->fn = fn;
	d->arg = arg;
	d->timeout = opts && opts->timeout ? opts->timeout : HOOK_LIMIT;
	const char *user = opts && opts->user ? opts->user : "nobody";
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		err = stg__fail(ctx, STG_EUSAGE, "no user '%s' on this node to run the hooks for",
		                user);
		goto out;
	}
	snprintf(d->user, sizeof d->user, "%s", pw->pw_name);
	d->uid = pw->pw_uid;
	d->gid = pw->pw_gid;
	d->n_groups = (int)(sizeof d->groups / sizeof d->groups[0]);
	if (getgrouplist(d->user, d->gid, d->groups, &d->n_groups) < 0) {
		d->groups[0] = d->gid;
		d->n_groups = 1;
	}
	snprintf(d->job, sizeof d->job, "%u", FAKE_JOB_BASE + (unsigned)getpid() % 256);
	gethostname(d->node, sizeof d->node - 1);
	d->node[strcspn(d->node, ".")] = '\0';
	if (getenv("SLURM_CONF"))
		snprintf(d->conf, sizeof d->conf, "%s", getenv("SLURM_CONF"));
	if (opts && opts->dir) {
		for (int r = 0; r < N_ROLES; r++) {
			char p[PATH_MAX + 16];
			snprintf(p, sizeof p, "%s/%s", opts->dir, role_name[r]);
			add_hook(d, (enum role)r, p);
		}
		report(d, STG_CHECK_OK, "slurm hooks", NULL, NULL,
		       "'%s' (--hooks): prolog, task-prolog, epilog; a fake job %s of %s runs "
		       "through them",
		       opts->dir, d->job, d->user);
	} else if (!hooks_from_slurm(d)) {
		goto out;
	}
	for (size_t i = 0; i < d->n_hooks; i++)
		check_file(d, &d->hooks[i]);
	/* off a Slurm node there is no SLURMD_NODENAME to give; a slurmctld
	 * that does not answer makes no node a host that is none (the
	 * epilogs run as on a node, and say what fails) */
	int is_node = stg__slurm_is_node(d->node);
	d->on_node = is_node != 0;
	if (is_node == 0)
		report(d, STG_CHECK_OK, "node features", NULL, NULL,
		       "skipped: this host is not a Slurm node (`scontrol show node %s` does not "
		       "know it): the epilogs run without SLURMD_NODENAME, and stager's leaves "
		       "node features alone",
		       d->node);
	else if (is_node < 0)
		report(d, STG_CHECK_WARN, "node features",
		       "start slurmctld (`scontrol ping` says UP), then run doctor again", NULL,
		       "cannot tell whether this host is a Slurm node: slurmctld did not answer "
		       "`scontrol show node %s`; the epilogs run as on a node (SLURMD_NODENAME=%s)",
		       d->node, d->node);

	/* the round trip: prologs, task prolog, epilogs, as a job goes */
	bool existed = false;
	const char *epilog = NULL;
	for (int role = 0; role < N_ROLES; role++) {
		if (role == EPILOG)
			existed = *jobdir && access(jobdir, F_OK) == 0;
		if (role == EPILOG && existed && !job_files(d, jobdir))
			report(d, STG_CHECK_WARN, "job directory",
			       "the prolog must make the job's directory writable by its user",
			       NULL,
			       "%s cannot write in '%s': whether the epilog removes a job's "
			       "files is not checked",
			       d->user, jobdir);
		for (size_t i = 0; i < d->n_hooks; i++) {
			hook *k = &d->hooks[i];
			if (k->role != (enum role)role || !k->safe)
				continue;
			stg_hook_run r;
			stg_hook_result h;
			char name[32];
			err = run_hook(d, k, &r);
			*fix = '\0';
			stg_check_level lv = judge(d, k, &r, &h, found, 4096, fix, 2048);
			if (role == TASK_PROLOG) {
				stg_check_level t = task_exports(d, &r, &h, ex, found, 4096, fix,
				                                 2048, jobdir, sizeof jobdir);
				lv = t > lv ? t : lv;
			}
			epilog = role == EPILOG ? k->path : epilog;
			snprintf(name, sizeof name, "%s run", role_name[role]);
			if (!err)
				report(d, lv, name, *fix ? fix : NULL, &h, "%s", found);
			stg__hook_run_free(&r);
			if (err)
				goto out;
		}
	}
	if (*jobdir)
		check_left(d, jobdir, existed, epilog);
out:
	if (err == STG_EINTR && *jobdir) {
		char why[PATH_MAX + 128];
		remove_left(jobdir, why, sizeof why);
	}
	free(d);
	free(ex);
	free(found);
	free(fix);
	return err;
}
