/*
 * slurm.c - what stager asks Slurm, and what it learns of a job's clock.
 *
 * Slurm's client commands are the interface (no libslurm: its ABI changes
 * with every release and a node may lack the headers).  Each question is
 * one command whose output is read whole; a command that is missing or
 * fails means "unknown", never "no".
 *
 * A batch job's clock: its end (the time limit, from squeue), KillWait
 * (from scontrol; SIGKILL comes that long after SIGTERM), and the early
 * warning that the script's own "#SBATCH --signal=[B:]SIG@SECS" asks for
 * (Slurm shows it nowhere else).  And whether stager run is the batch
 * step's main process: without `exec` the batch shell is its parent, the
 * B: warning goes to the shell, which dies of it, and Slurm then kills
 * what is left of the step before it can collect.
 */
#include "slurm.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int stg__capture(char *const argv[], char *out, size_t len, int *status)
{
	int pipefd[2];
	if (len == 0 || pipe2(pipefd, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	/* nothing blocked, whatever this thread blocks (stg_collect_every
	 * and stg_run block the signals they take) */
	posix_spawnattr_t at;
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (rc) {
		close(pipefd[0]);
		return -1;
	}
	size_t got = 0;
	ssize_t n;
	char sink[4096];
	/* read to the end, so the command never blocks on a full pipe */
	while ((n = read(pipefd[0], got < len - 1 ? out + got : sink,
	                 got < len - 1 ? len - 1 - got : sizeof sink)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (got < len - 1)
			got += (size_t)n;
	}
	out[got] = '\0';
	close(pipefd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st))
		return -1;
	*status = WEXITSTATUS(st);
	return 0;
}

int stg__slurm_job_alive(const char *id)
{
	char *argv[] = {"squeue", "-h", "-o", "%T", "-j", (char *)id, NULL};
	char out[256];
	int status;
	if (stg__capture(argv, out, sizeof out, &status))
		return -1;
	static const char *const alive[] = {
	        "PENDING",  "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING",   "RESIZING",
	        "REQUEUED", "STOPPED", "SIGNALING", "STAGE_OUT",   "REQUEUE_HOLD", "REQUEUE_FED"};
	for (size_t i = 0; i < sizeof alive / sizeof alive[0]; i++)
		if (strstr(out, alive[i]))
			return 1;
	/* squeue prints a final state or nothing for a job that ended, and
	 * fails (status 1) alike for a job it no longer knows ("Invalid job
	 * id") and for a controller it cannot reach or that does not answer in
	 * time: a job is gone only if the controller answers.  A running job
	 * taken for gone loses its pins (its data evicted under it), its job
	 * directory and its results (moved to kept/ while it writes them) */
	if (status == 0)
		return 0;
	if (status != 1)
		return -1;
	char *ping[] = {"scontrol", "ping", NULL};
	if (stg__capture(ping, out, sizeof out, &status) || !strstr(out, " is UP"))
		return -1;
	return 0;
}

/* "2026-11-25T06:10:00" (local time, as squeue prints it) */
static double parse_time(const char *s)
{
	struct tm tm = {0};
	if (sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
	           &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	tm.tm_isdst = -1;
	time_t t = mktime(&tm);
	return t == (time_t)-1 ? 0 : (double)t;
}

/* A signal's name or number as --signal takes it: USR1, SIGUSR1, 10. */
static int signal_number(const char *s, size_t len)
{
	char name[16];
	if (len == 0 || len >= sizeof name)
		return 0;
	memcpy(name, s, len);
	name[len] = '\0';
	if (isdigit((unsigned char)name[0])) {
		int n = atoi(name);
		return n > 0 && n < 32 ? n : 0;
	}
	const char *n = strncmp(name, "SIG", 3) ? name : name + 3;
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
	            {"HUP", SIGHUP},   {"URG", SIGURG},   {"CONT", SIGCONT}};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		if (!strcmp(n, sigs[i].name))
			return sigs[i].sig;
	return 0;
}

/* The script's "#SBATCH --signal=[{R|B}:]SIG[@SECS]" (the last one wins,
 * as with sbatch); only the leading block of #SBATCH lines counts. */
static void script_signal(const char *script, stg_job_clock *jc)
{
	FILE *f = fopen(script, "re");
	if (!f)
		return;
	char line[1024];
	bool first = true;
	while (fgets(line, sizeof line, f)) {
		if (first && !strncmp(line, "#!", 2)) {
			first = false;
			continue;
		}
		first = false;
		const char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\n' || *p == '\0')
			continue;
		if (*p != '#')
			break; /* sbatch stops reading options at the first command */
		if (strncmp(p, "#SBATCH", 7))
			continue;
		const char *o = strstr(p, "--signal");
		if (!o)
			continue;
		o += 8;
		while (*o == ' ' || *o == '=')
			o++;
		bool batch = false;
		if ((o[0] == 'B' || o[0] == 'R') && o[1] == ':') {
			batch = o[0] == 'B';
			o += 2;
		}
		size_t n = strcspn(o, "@ \t\n");
		int sig = signal_number(o, n);
		unsigned secs = 60; /* sbatch's default */
		if (o[n] == '@')
			secs = (unsigned)strtoul(o + n + 1, NULL, 10);
		if (sig && secs <= 65535) {
			jc->warn_signal = sig;
			jc->warn_secs = secs;
			jc->warn_batch_only = batch;
		}
	}
	fclose(f);
}

/* Is our parent the batch step's shell (stager run without exec)?  The
 * batch shell runs SPOOL/jobNNN/slurm_script and its own parent is
 * slurmstepd; with exec, slurmstepd is our parent. */
static bool parent_is_batch_shell(char *script, size_t len)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getppid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* the arguments are NUL-separated: the script is one of them */
	for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
		const char *base = strrchr(a, '/');
		if (base && !strcmp(base + 1, "slurm_script")) {
			snprintf(script, len, "%s", a);
			return true;
		}
	}
	return false;
}

/* With exec, the script is slurmd's copy: SlurmdSpoolDir/jobNNNNN/
 * slurm_script (%n in the spool directory is the node's name, %h the
 * host's), from scontrol's configuration in config. */
static void spooled_script(const char *config, const char *id, char *out, size_t len)
{
	const char *k = strstr(config, "\nSlurmdSpoolDir");
	const char *eq = k ? strchr(k + 1, '=') : NULL;
	if (!eq || strchr(k + 1, '\n') < eq)
		return;
	eq++;
	while (*eq == ' ')
		eq++;
	const char *node = getenv("SLURMD_NODENAME");
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	char dir[2048];
	size_t o = 0;
	for (const char *p = eq; *p && *p != '\n' && o < sizeof dir - 1; p++) {
		const char *sub = NULL;
		if (p[0] == '%' && p[1] == 'n')
			sub = node ? node : host;
		else if (p[0] == '%' && p[1] == 'h')
			sub = host;
		if (sub) {
			o += (size_t)snprintf(dir + o, sizeof dir - o, "%s", sub);
			if (o >= sizeof dir)
				return;
			p++;
		} else {
			dir[o++] = *p;
		}
	}
	dir[o] = '\0';
	snprintf(out, len, "%s/job%05lu/slurm_script", dir, strtoul(id, NULL, 10));
}

void stg_job_clock_read(stg_job_clock *jc)
{
	memset(jc, 0, sizeof *jc);
	jc->kill_wait = 30; /* Slurm's default */
	const char *id = getenv("SLURM_JOB_ID");
	if (!id || !*id)
		return;
	size_t len = 1 << 16; /* scontrol show config says much */
	char *out = malloc(len);
	int status;
	if (!out)
		return;
	out[0] = '\0';
	char *q[] = {"squeue", "-h", "-j", (char *)id, "-o", "%e", NULL};
	if (stg__capture(q, out, len, &status) == 0 && status == 0)
		jc->end = parse_time(out);
	char *c[] = {"scontrol", "show", "config", NULL};
	out[0] = '\0';
	if (stg__capture(c, out, len, &status) || status)
		out[0] = '\0';
	else {
		const char *k = strstr(out, "\nKillWait");
		unsigned kw;
		if (k && sscanf(strchr(k, '=') ? strchr(k, '=') + 1 : "", "%u", &kw) == 1)
			jc->kill_wait = kw;
	}
	char script[4096] = "";
	if ((jc->no_exec = parent_is_batch_shell(script, sizeof script)) == 0)
		spooled_script(out, id, script, sizeof script);
	free(out);
	/* the script is the job's own, so its user may read it */
	if (script[0])
		script_signal(script, jc);
}

/* The value of "Key = value" in scontrol's output ("" for "(null)"). */
bool stg__slurm_conf_value(const char *conf, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);
	for (const char *l = conf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, k) || (l[k] != ' ' && l[k] != '='))
			continue;
		const char *v = l + k + strspn(l + k, " ");
		if (*v != '=')
			continue;
		v += 1 + strspn(v + 1, " ");
		size_t n = strcspn(v, "\n");
		snprintf(out, len, "%.*s", (int)n, v);
		if (!strcmp(out, "(null)"))
			*out = '\0';
		return true;
	}
	*out = '\0';
	return false;
}

int stg__slurm_is_node(const char *node)
{
	char out[1024];
	int status = 0;
	char *argv[] = {"scontrol", "show", "node", "-o", (char *)node, NULL};
	if (!node || !*node || stg__capture(argv, out, sizeof out, &status))
		return 0; /* no scontrol here: no Slurm client, no node */
	if (status == 0)
		return 1;
	if (strstr(out, " not found"))
		return 0; /* "Node NAME not found": the controller answered */
	/* no answer (the reason went to stderr): a controller that is down
	 * or does not answer ("Slurmctld(primary) at ... is DOWN") is no
	 * reason to take a node for a host that is none; with no Slurm
	 * configured here at all, ping says nothing either */
	char *ping[] = {"scontrol", "ping", NULL};
	if (!stg__capture(ping, out, sizeof out, &status) && strstr(out, "Slurmctld"))
		return -1;
	return 0;
}

/* A mountinfo field unescaped in place (\040 for a space, and so on). */
static void unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* Does a mount's root (what of its filesystem it shows) name job: a
 * directory "ID", ".ID" (job_container/tmpfs: BasePath/[NODE/]ID/.ID),
 * "job-ID", "job_ID" or "jobID" (per-job /tmp of SPANK plugins)? */
static bool root_names_job(const char *root, const char *job)
{
	size_t jl = strlen(job);
	for (const char *p = root; *p;) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n >= jl && !memcmp(p + n - jl, job, jl)) {
			size_t pre = n - jl;
			if (pre == 0 || (pre == 1 && p[0] == '.') ||
			    (pre == 4 && (!memcmp(p, "job-", 4) || !memcmp(p, "job_", 4))) ||
			    (pre == 3 && !memcmp(p, "job", 3)))
				return true;
		}
		p += n;
	}
	return false;
}

bool stg__job_private_mount_in(FILE *mountinfo, const char *path, const char *job, char *mnt,
                               size_t len)
{
	char *line = NULL;
	size_t cap = 0, best = 0;
	bool priv = false;
	while (getline(&line, &cap, mountinfo) > 0) {
		char *save = NULL, *f[5] = {NULL};
		char *t = strtok_r(line, " \n", &save);
		for (int i = 0; t && i < 5; i++, t = strtok_r(NULL, " \n", &save))
			f[i] = t;
		if (!f[4])
			continue;
		unescape(f[3]);
		unescape(f[4]);
		size_t n = strlen(f[4]);
		if (!strcmp(f[4], "/"))
			n = 0; /* "/" is the prefix of every path */
		else if (strncmp(path, f[4], n) || (path[n] && path[n] != '/'))
			continue;
		/* the deepest mount point, and of those the last (on top) */
		if (n + 1 < best)
			continue;
		best = n + 1;
		priv = root_names_job(f[3], job);
		if (mnt)
			snprintf(mnt, len, "%s", n ? f[4] : "/");
	}
	free(line);
	return priv;
}

bool stg__job_private_mount(const char *path, char *mnt, size_t len)
{
	const char *job = getenv("SLURM_JOB_ID");
	char *real = NULL;
	if (!job || !*job || strspn(job, "0123456789") != strlen(job) || strlen(job) > 20 ||
	    !(real = realpath(path, NULL)))
		return false;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool priv = f && stg__job_private_mount_in(f, real, job, mnt, len);
	if (f)
		fclose(f);
	free(real);
	return priv;
}
