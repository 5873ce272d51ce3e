/*
 * allnodes.c - stage --all-nodes: one shared-filesystem read per
 * allocation, fanned out by Slurm.
 *
 * The node running the batch script (the lead) reads the pack's trailer
 * and asks every other node, in one srun step, whether its cache already
 * holds the entry (those that do just link it).  If anyone lacks it, the
 * lead copies the pack once to its scratch (checking its SHA-256), starts a
 * second step on the nodes that lack it, and when their tasks are ready
 * hands the copy to sbcast for that step only, so a node that has the entry
 * receives nothing.  Each task then stages from its copy, which libstage
 * checks again (digest, SHA-256, every file's XXH3) before trusting it; a
 * copy that fails falls back to reading the shared filesystem on that node,
 * with a warning.  The tasks talk to the lead in "stager-node" lines on
 * their stdout; the go-ahead reaches them on stdin (srun --input=all).
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define STEP_START_TIMEOUT 300 /* s for a step's tasks to report */
#define MAX_NODES          4096

typedef struct argvec {
	char **v;
	size_t n, cap;
} argvec;

static void av_add(argvec *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 32;
		char **v = realloc(a->v, cap * sizeof *v);
		if (!v) {
			cli_error("out of memory");
			exit(EXIT_IO);
		}
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n] = strdup(s);
	if (!a->v[a->n]) {
		cli_error("out of memory");
		exit(EXIT_IO);
	}
	a->v[++a->n] = NULL;
}

static void av_free(argvec *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	*a = (argvec){0};
}

const char *cli_node_name(void)
{
	static char name[HOST_NAME_MAX + 1];
	if (!name[0]) {
		const char *s = getenv("SLURMD_NODENAME");
		if (s && *s)
			snprintf(name, sizeof name, "%s", s);
		else if (gethostname(name, sizeof name) == 0)
			name[strcspn(name, ".")] = '\0';
		else
			snprintf(name, sizeof name, "localhost");
	}
	return name;
}

/* Start argv with a channel to its stdin (*in: a socket, written with
 * say(), so a step that is gone is EPIPE, not SIGPIPE) and a pipe from its
 * stdout (*out), if asked; stderr is ours.  It starts with the default
 * signal dispositions and nothing blocked.  The pid, or -1 after a
 * message. */
static pid_t spawn(char **argv, int *in, int *out)
{
	int ip[2] = {-1, -1}, op[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	sigset_t none, dfl;
	sigemptyset(&none);
	sigemptyset(&dfl);
	int sigs[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&dfl, sigs[i]);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	pid_t pid = -1;
	if ((in && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ip)) ||
	    (out && pipe2(op, O_CLOEXEC))) {
		cli_error("pipe: %s", strerror(errno));
		goto out;
	}
	if (in)
		posix_spawn_file_actions_adddup2(&fa, ip[0], 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out)
		posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	int e = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	if (e) {
		cli_error("cannot run '%s': %s", argv[0], strerror(e));
		pid = -1;
	}
out:
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (ip[0] >= 0)
		close(ip[0]);
	if (op[1] >= 0)
		close(op[1]);
	if (pid < 0) {
		if (ip[1] >= 0)
			close(ip[1]);
		if (op[0] >= 0)
			close(op[0]);
		return -1;
	}
	if (in)
		*in = ip[1];
	if (out)
		*out = op[0];
	return pid;
}

/* A line to a step's stdin; false if it is gone. */
static bool say(int in, const char *line)
{
	return send(in, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line);
}

/* Its exit status as a shell reports it.  If we are told to stop while
 * waiting, it is told too (srun then cancels its step). */
static int wait_status(pid_t pid)
{
	int st;
	bool told = false;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return 127;
		if (cli_interrupted && !told) {
			kill(pid, SIGTERM);
			told = true;
		}
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A step's status as ours: the tasks' own statuses (2-7) pass, anything
 * else from srun is a remote failure (6); 5 if we were told to stop. */
static int step_status(int st)
{
	if (cli_interrupted)
		return EXIT_INTERRUPTED;
	return st == 0 ? EXIT_OK : st >= EXIT_SOURCE && st <= EXIT_IO ? st : EXIT_REMOTE;
}

/* One line from fd into buf (without the newline), waiting at most
 * timeout seconds; 1 a line, 0 end of file, -1 timeout or error. */
static int read_line(int fd, char *buf, size_t len, int timeout)
{
	size_t n = 0;
	double end = cli_now() + timeout;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((end - cli_now()) * 1000);
		if (left <= 0)
			return -1;
		int r = poll(&p, 1, left);
		if (cli_interrupted)
			return -1;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		char c;
		ssize_t k = read(fd, &c, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			buf[n] = '\0';
			return n ? 1 : 0;
		}
		if (c == '\n') {
			buf[n] = '\0';
			return 1;
		}
		if (n + 1 < len)
			buf[n++] = c;
	}
}

/* The two directories above a copy (bcast/job-ID/), if missing. */
static void mkdir_parents(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	char *up = strrchr(dir, '/');
	if (up && up != dir) {
		*up = '\0';
		mkdir(dir, 0700);
		*up = '/';
	}
	mkdir(dir, 0700);
}

/* srun of one task on each of n nodes: those named (a comma list), or
 * all but the one named in exclude. */
static void srun_args(argvec *a, unsigned n, const char *nodes, const char *exclude)
{
	char num[16];
	snprintf(num, sizeof num, "%u", n);
	av_add(a, "srun");
	av_add(a, "--overlap");
	av_add(a, "--quiet");
	av_add(a, "--kill-on-bad-exit=0");
	av_add(a, "--ntasks-per-node=1");
	av_add(a, "--cpus-per-task=1");
	/* explicit: the job's SLURM_NTASKS, inherited, would ask for more */
	av_add(a, "-N");
	av_add(a, num);
	av_add(a, "-n");
	av_add(a, num);
	if (nodes) {
		av_add(a, "-w");
		av_add(a, nodes);
	}
	if (exclude) {
		av_add(a, "-x");
		av_add(a, exclude);
	}
}

/* The stager that runs on the other nodes (this binary: the same path on
 * every node of a cluster): CMD, the mode's arguments, then fwd. */
static void stager_args(argvec *a, const char *cmd, const char *const *mode, const char *const *fwd)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0)
		self[n] = '\0';
	else
		snprintf(self, sizeof self, "stager");
	av_add(a, self);
	av_add(a, cmd);
	for (; mode && *mode; mode++)
		av_add(a, *mode);
	for (; *fwd; fwd++)
		av_add(a, *fwd);
}

typedef struct node_state {
	char name[72];
	char how[16]; /* "cached", "need", "sbcast", "shared", "read", "failed" */
} node_state;

typedef struct fanout {
	node_state *nodes;
	size_t n;
} fanout;

static node_state *node_add(fanout *f, const char *name, const char *how)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->nodes[i].name, name)) {
			snprintf(f->nodes[i].how, sizeof f->nodes[i].how, "%s", how);
			return &f->nodes[i];
		}
	if (f->n >= MAX_NODES)
		return NULL;
	node_state *v = realloc(f->nodes, (f->n + 1) * sizeof *v);
	if (!v)
		return NULL;
	f->nodes = v;
	node_state *s = &v[f->n++];
	snprintf(s->name, sizeof s->name, "%s", name);
	snprintf(s->how, sizeof s->how, "%s", how);
	return s;
}

/* "stager-node WORD NODE [REST]" */
static bool node_line(char *line, char **word, char **node, char **rest)
{
	if (strncmp(line, "stager-node ", 12))
		return false;
	*word = line + 12;
	char *sp = strchr(*word, ' ');
	if (!sp)
		return false;
	*sp = '\0';
	*node = sp + 1;
	sp = strchr(*node, ' ');
	*rest = sp ? sp + 1 : sp;
	if (sp)
		*sp = '\0';
	return **node != '\0';
}

/* Run a step and note what its tasks say ("have" or "need"). */
static int run_step(char **argv, fanout *f)
{
	int out;
	pid_t pid = spawn(argv, NULL, &out);
	if (pid < 0)
		return EXIT_IO;
	char line[512];
	while (read_line(out, line, sizeof line, 24 * 3600) == 1) {
		char *word, *node, *rest;
		if (node_line(line, &word, &node, &rest))
			node_add(f, node, !strcmp(word, "have") ? "cached" : "need");
	}
	close(out);
	return wait_status(pid);
}

/* The fan-out step on the nodes that need the pack: start it, wait for its
 * tasks, sbcast the copy (if there is one) to that step, tell them to go,
 * and note their answers.  If the copy cannot be sent, the tasks are told
 * so and read the shared filesystem themselves; if they do not start, the
 * step is cancelled.  Our exit status for the step. */
static int fan_out(fanout *f, const char *nodes, unsigned n, const char *copy, bool have_copy,
                   const char *const *fwd, const char *digest_hex)
{
	argvec b = {0};
	srun_args(&b, n, nodes, NULL);
	av_add(&b, "--input=all");
	const char *mode[] = {"--node-receive", copy, "--node-digest", digest_hex, NULL};
	stager_args(&b, "stage", mode, fwd);
	int in, out;
	pid_t pid = spawn(b.v, &in, &out);
	av_free(&b);
	if (pid < 0)
		return EXIT_IO;
	char line[512], step[32] = "";
	unsigned ready = 0;
	int r = 1;
	while (ready < n && (r = read_line(out, line, sizeof line, STEP_START_TIMEOUT)) == 1) {
		char *word, *node, *rest;
		if (node_line(line, &word, &node, &rest) && !strcmp(word, "ready") && rest) {
			snprintf(step, sizeof step, "%s", rest);
			ready++;
		}
	}
	if (ready < n || !step[0]) {
		cli_error("the stagers on %s did not start (%s)", nodes,
		          cli_interrupted ? "interrupted"
		          : r < 0         ? "timed out"
		                          : "the step ended");
		kill(pid, SIGTERM); /* srun cancels the step */
		close(in);
		close(out);
		wait_status(pid);
		return cli_interrupted ? EXIT_INTERRUPTED : EXIT_REMOTE;
	}
	bool sent = false;
	if (have_copy) {
		const char *job = getenv("SLURM_JOB_ID");
		char target[64];
		snprintf(target, sizeof target, "%s.%s", job, step);
		char *sb[] = {"sbcast", "--compress=none", "--force",    "-j",
		              target,   (char *)copy,      (char *)copy, NULL};
		double t0 = cli_now();
		pid_t sp = spawn(sb, NULL, NULL);
		int st = sp < 0 ? 127 : wait_status(sp);
		if (st == 0) {
			sent = true;
			if (g_opts.verbose)
				cli_info("sent the pack to %s with sbcast in %.2f s", nodes,
				         cli_now() - t0);
		} else {
			cli_error("sbcast to %s failed (status %d): those nodes read the shared "
			          "filesystem themselves",
			          nodes, st);
		}
	}
	if (!say(in, sent ? "go\n" : "nogo\n") && g_opts.verbose)
		cli_info("the fan-out step is gone: %s", strerror(errno));
	close(in);
	while (read_line(out, line, sizeof line, 24 * 3600) == 1) {
		char *word, *node, *rest;
		if (node_line(line, &word, &node, &rest) && !strcmp(word, "done"))
			node_add(f, node, rest && !strcmp(rest, "copy") ? "sbcast" : "shared");
	}
	close(out);
	return step_status(wait_status(pid));
}

int cli_stage_all_nodes(stg_ctx *ctx, stg_cache *cache, const char *src, stg_stage_opts *so,
                        const char *const *fwd, int json, char **path)
{
	double t0 = cli_now();
	const char *job = getenv("SLURM_JOB_ID");
	unsigned nn = cli_job_nodes();
	if (!nn)
		return cli_usage(job && *job
		                         ? "--all-nodes: SLURM_JOB_NUM_NODES (or SLURM_NNODES) "
		                           "is not a number of nodes"
		                         : "--all-nodes works inside a Slurm allocation (sbatch, "
		                           "salloc); SLURM_JOB_ID is not set");
	if (nn == 1)
		return -1; /* a plain stage */
	if (!getenv("SLURMD_NODENAME"))
		return cli_usage("--all-nodes runs on one of the job's nodes: in the batch "
		                 "script, or under salloc as `srun -N1 -n1 stager stage "
		                 "--all-nodes ...`");
	const char *me = cli_node_name();
	fanout f = {0};
	argvec a = {0};
	char *copy = NULL;
	int rc = EXIT_OK;

	/* the pack's identity: its trailer, one small read */
	stg_pack *p = NULL;
	struct stat st;
	stg_err err = stat(src, &st) == 0 && S_ISDIR(st.st_mode) ? STG_ECORRUPT
	                                                         : stg_pack_open(ctx, src, &p);
	if (err == STG_ECORRUPT) {
		/* a directory or another archive: every node reads it */
		cli_info("'%s' is not a pack (%s): each of the %u nodes stages it from the "
		         "shared filesystem on its own; `stager pack` it once and it is read "
		         "once",
		         src, S_ISDIR(st.st_mode) ? "a directory" : stg_errmsg(ctx), nn);
		srun_args(&a, nn, NULL, NULL);
		stager_args(&a, "stage", NULL, fwd);
		int out;
		pid_t pid = spawn(a.v, NULL, &out);
		if (pid < 0) {
			rc = EXIT_IO;
			goto out;
		}
		/* every node prints the same path: once is enough */
		char line[PATH_MAX + 64], first[PATH_MAX + 64] = "";
		while (read_line(out, line, sizeof line, 24 * 3600) == 1)
			if (!first[0])
				snprintf(first, sizeof first, "%s", line);
		close(out);
		rc = step_status(wait_status(pid));
		if (first[0] && path) {
			*path = strdup(first);
		} else if (first[0] && json) {
			printf("{\"path\":");
			json_str(stdout, first);
			printf(",\"digest\":null,\"nodes\":[],\"seconds\":%.3f}\n", cli_now() - t0);
		} else if (first[0]) {
			printf("%s\n", first);
		}
		goto out;
	}
	if (err) {
		rc = cli_fail(ctx, err);
		goto out;
	}
	stg_pack_info info;
	stg_pack_get_info(p, &info);
	stg_pack_close(p);
	uint8_t digest[STG_DIGEST_LEN];
	memcpy(digest, info.digest, STG_DIGEST_LEN);
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(digest, hex);

	/* who has it already: those that do link it now */
	bool lead_needs = !stg_stage_cached(cache, digest, so);
	srun_args(&a, nn - 1, NULL, me);
	const char *probe[] = {"--node-probe", "--node-digest", hex, NULL};
	stager_args(&a, "stage", probe, fwd);
	int pst = run_step(a.v, &f);
	if (pst || f.n != nn - 1) {
		cli_error("asking the other nodes with srun failed (status %d, %zu of %u answered)",
		          pst, f.n, nn - 1);
		rc = pst ? step_status(pst) : EXIT_REMOTE;
		goto out;
	}
	av_free(&a);
	size_t cap = 1;
	for (size_t i = 0; i < f.n; i++)
		cap += strlen(f.nodes[i].name) + 1;
	char *need = calloc(cap, 1);
	unsigned n_need = 0;
	for (size_t i = 0; need && i < f.n; i++) {
		if (strcmp(f.nodes[i].how, "need"))
			continue;
		if (n_need++)
			strcat(need, ",");
		strcat(need, f.nodes[i].name);
	}
	if (!need) {
		rc = EXIT_IO;
		goto out;
	}

	/* one read of the shared filesystem for all */
	bool have_copy = false;
	if (lead_needs || n_need) {
		/* bcast/job-ID/: `stager clean` removes what a killed job left */
		size_t len = strlen(stg_cache_root(cache)) + strlen(job) + STG_DIGEST_HEXLEN + 40;
		if (!(copy = malloc(len))) {
			free(need);
			rc = EXIT_IO;
			goto out;
		}
		snprintf(copy, len, "%s/bcast/job-%s/%s.tar.zst", stg_cache_root(cache), job, hex);
		mkdir_parents(copy);
		uint64_t bytes;
		uint8_t got[STG_DIGEST_LEN];
		err = stg_copy_pack(ctx, cache, src, copy, got, &bytes);
		if (err == STG_EINTR || err == STG_ENOENT || err == STG_ECORRUPT) {
			free(need);
			rc = cli_fail(ctx, err);
			goto out;
		}
		if (err) {
			/* no room or a read error here: the others may do better */
			cli_error("%s: every node reads '%s' itself", stg_errmsg(ctx), src);
		} else if (memcmp(got, digest, STG_DIGEST_LEN)) {
			free(need);
			cli_error("'%s' changed while it was being staged; try again", src);
			rc = EXIT_SOURCE;
			goto out;
		}
		have_copy = !err;
	}
	int frc = n_need ? fan_out(&f, need, n_need, copy, have_copy, fwd, hex) : EXIT_OK;
	free(need);

	/* this node, from the copy too */
	so->from_copy = lead_needs && have_copy ? copy : NULL;
	so->from_copy_digest = digest;
	stg_stage_result res;
	err = stg_stage(ctx, cache, src, so, &res);
	if (copy)
		unlink(copy);
	if (err) {
		rc = cli_fail(ctx, err);
		node_add(&f, me, "failed");
		goto out;
	}
	node_add(&f, me, !lead_needs ? "cached" : res.source_bytes ? "shared" : "read");
	if (frc) {
		cli_error("staging on some nodes failed (exit %d); see above", frc);
		rc = frc;
	}
	if (path) {
		*path = strdup(res.path);
	} else if (json) {
		printf("{\"path\":");
		json_str(stdout, res.path);
		printf(",\"digest\":\"%s\",\"nodes\":[", hex);
		for (size_t i = 0; i < f.n; i++) {
			printf("%s{\"node\":", i ? "," : "");
			json_str(stdout, f.nodes[i].name);
			printf(",\"how\":\"%s\"}", f.nodes[i].how);
		}
		printf("],\"seconds\":%.3f}\n", cli_now() - t0);
	} else {
		printf("%s\n", res.path);
	}
	stg_stage_result_free(&res);
	if (!g_opts.quiet) {
		char line[1024] = "";
		size_t used = 0;
		for (size_t i = 0; i < f.n && used < sizeof line - 100; i++)
			used += (size_t)snprintf(line + used, sizeof line - used, "%s%s %s",
			                         i ? ", " : "", f.nodes[i].name, f.nodes[i].how);
		cli_info("'%s' on %zu nodes in %.2f s: %s", src, f.n, cli_now() - t0, line);
	}
out:
	if (copy) {
		unlink(copy);
		free(copy);
	}
	av_free(&a);
	free(f.nodes);
	return rc;
}

static int parse_digest(const char *hex, uint8_t digest[STG_DIGEST_LEN])
{
	if (!hex || strlen(hex) != STG_DIGEST_HEXLEN)
		return -1;
	for (int i = 0; i < STG_DIGEST_LEN; i++)
		if (sscanf(hex + 2 * i, "%2hhx", &digest[i]) != 1)
			return -1;
	return 0;
}

/* The task on a node that may have the entry: link it if so (without
 * touching the shared filesystem). */
int cli_node_probe(stg_ctx *ctx, stg_cache *cache, const char *src, stg_stage_opts *so,
                   const char *digest_hex)
{
	uint8_t digest[STG_DIGEST_LEN];
	if (parse_digest(digest_hex, digest))
		return cli_usage("--node-digest: not a digest");
	if (!stg_stage_cached(cache, digest, so)) {
		printf("stager-node need %s\n", cli_node_name());
		return EXIT_OK;
	}
	so->from_copy_digest = digest;
	stg_stage_result res;
	stg_err err = stg_stage(ctx, cache, src, so, &res);
	if (err)
		return cli_fail(ctx, err);
	printf("stager-node have %s %s\n", cli_node_name(), res.path);
	stg_stage_result_free(&res);
	return EXIT_OK;
}

/* The task on a node that lacks the entry: say it is ready, wait for the
 * copy, stage from it (or from src if none came or it is bad). */
int cli_node_receive(stg_ctx *ctx, stg_cache *cache, const char *src, stg_stage_opts *so,
                     const char *copy, const char *digest_hex)
{
	uint8_t digest[STG_DIGEST_LEN];
	if (parse_digest(digest_hex, digest))
		return cli_usage("--node-digest: not a digest");
	mkdir_parents(copy);
	const char *step = getenv("SLURM_STEP_ID");
	printf("stager-node ready %s %s\n", cli_node_name(), step ? step : "");
	fflush(stdout);
	char line[64];
	int r = read_line(0, line, sizeof line, 24 * 3600);
	bool go = r == 1 && !strcmp(line, "go");
	if (!go)
		cli_error("no copy of '%s' came from the lead node: reading it here", src);
	so->from_copy = go ? copy : NULL;
	so->from_copy_digest = digest;
	stg_stage_result res;
	stg_err err = stg_stage(ctx, cache, src, so, &res);
	unlink(copy);
	if (err)
		return cli_fail(ctx, err);
	printf("stager-node done %s %s\n", cli_node_name(), res.source_bytes ? "shared" : "copy");
	stg_stage_result_free(&res);
	return EXIT_OK;
}

size_t cli_global_args(const char **v)
{
	size_t n = 0;
	const char *gv[][2] = {{"--scratch", g_opts.scratch},
	                       {"--config", g_opts.config},
	                       {"--bwlimit", g_opts.bwlimit}};
	for (size_t i = 0; i < sizeof gv / sizeof gv[0]; i++)
		if (gv[i][1]) {
			v[n++] = gv[i][0];
			v[n++] = gv[i][1];
		}
	if (g_opts.quiet)
		v[n++] = "--quiet";
	if (g_opts.verbose)
		v[n++] = "--verbose";
	return n;
}

unsigned cli_job_nodes(void)
{
	const char *job = getenv("SLURM_JOB_ID");
	const char *nn = getenv("SLURM_JOB_NUM_NODES");
	if (!nn)
		nn = getenv("SLURM_NNODES");
	if (!job || !*job || !nn)
		return 0;
	char *end;
	unsigned long n = strtoul(nn, &end, 10);
	if (end == nn || *end)
		return 0;
	return n > MAX_NODES ? MAX_NODES : (unsigned)n;
}

pid_t cli_node_collectors(const char *src, const char *dest, const stg_collect_opts *co,
                          uint64_t every, int *in, int *out)
{
	unsigned nn = cli_job_nodes();
	const char *fwd[24];
	size_t nf = cli_global_args(fwd);
	char every_s[32], level_s[16];
	fwd[nf++] = "--node-ready";
	if (every) {
		snprintf(every_s, sizeof every_s, "%llus", (unsigned long long)every);
		fwd[nf++] = "--every";
		fwd[nf++] = every_s;
	}
	if (co->pack)
		fwd[nf++] = "--pack";
	if (co->level) {
		snprintf(level_s, sizeof level_s, "%d", co->level);
		fwd[nf++] = "--level";
		fwd[nf++] = level_s;
	}
	fwd[nf++] = "--";
	fwd[nf++] = src;
	fwd[nf++] = dest;
	fwd[nf] = NULL;
	argvec a = {0};
	srun_args(&a, nn, NULL, NULL);
	av_add(&a, "--input=all");
	stager_args(&a, "collect", NULL, fwd);
	pid_t pid = spawn(a.v, in, out);
	av_free(&a);
	if (pid < 0)
		return -1;
	char line[512];
	unsigned ready = 0;
	while (ready < nn && read_line(*out, line, sizeof line, STEP_START_TIMEOUT) == 1) {
		char *word, *node, *rest;
		if (node_line(line, &word, &node, &rest) && !strcmp(word, "ready"))
			ready++;
	}
	if (ready < nn) {
		cli_error("the collectors for '%s' did not start on all %u nodes (%u did)", src, nn,
		          ready);
		close(*in);
		kill(pid, SIGTERM);
		wait_status(pid);
		close(*out);
		return -1;
	}
	return pid;
}

void cli_node_collectors_now(int in)
{
	if (!say(in, "now\n") && g_opts.verbose)
		cli_info("the collectors are gone: %s", strerror(errno));
}

int cli_node_collectors_end(pid_t pid, int in, int out)
{
	close(in); /* end of file: each collects once more and ends */
	int st = wait_status(pid);
	close(out);
	return step_status(st);
}
