/*
 * cmd_run.c - stager run [--stage SRC[:DEST]]... [--mount PACK[:DIR]]... [--env ENV_DIR]...
 *                        [--collect SRC:DEST]... [--every INTERVAL] [--pack] [--grace TIME]
 *                        [--all-nodes] -- CMD...
 *
 * The batch-script wrapper: the options become an stg_run_opts, and
 * stg_run stages, runs CMD, passes signals on, collects, keeps what could
 * not be collected and cleans up, telling all of it (failures too)
 * through the log.  The exit status: 5 if a signal stopped it, else
 * CMD's, else that of the first collect that failed.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
	OPT_STAGE = OPT_FIRST_LOCAL,
	OPT_COLLECT,
	OPT_EVERY,
	OPT_PACK,
	OPT_GRACE,
	OPT_ALLNODES,
	OPT_MOUNT,
	OPT_ENV,
};

typedef struct pair {
	char *src, *dest; /* malloc'ed */
} pair;

typedef struct run_args {
	pair *stages, *collects, *mounts;
	size_t n_stages, n_collects, n_mounts;
	const char **envs;
	size_t n_envs;
	stg_run_opts o;
} run_args;

/* --stage SRC[:DEST] (and --mount PACK[:DIR]): split at the last ':', and
 * a SRC whose own name has a ':' is taken whole if it exists. */
static int split_stage(const char *arg, pair *p)
{
	const char *colon = strrchr(arg, ':');
	struct stat st;
	if (colon && stat(arg, &st) == 0)
		colon = NULL;
	p->src = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
	p->dest = colon && colon[1] ? strdup(colon + 1) : NULL;
	return p->src && *p->src ? 0 : -1;
}

/* --collect SRC:DEST: split at the first ':' not escaped as '\:' (SRC is a
 * name in the job directory; DEST may have colons: timestamps).  Refused
 * when another split would name a SRC that exists: it could be read two
 * ways.  NULL, or what is wrong. */
static const char *split_collect(const char *arg, pair *p)
{
	size_t n = strlen(arg);
	char *src = malloc(n + 1), *o = src;
	const char *q = arg;
	if (!src)
		return "out of memory";
	for (; *q && *q != ':'; q++) {
		if (q[0] == '\\' && q[1] == ':')
			q++;
		*o++ = *q;
	}
	*o = '\0';
	if (*q != ':' || !*src || !q[1]) {
		free(src);
		return "is not SRC:DEST (a ':' in SRC is written '\\:')";
	}
	for (const char *c = strchr(q + 1, ':'); c; c = strchr(c + 1, ':')) {
		char *other = strndup(arg, (size_t)(c - arg));
		struct stat st;
		bool exists = other && stat(other, &st) == 0 && strchr(other, '\\') == NULL;
		free(other);
		if (exists) {
			free(src);
			return "could be read two ways: a SRC with a ':' exists; write the ':' in "
			       "SRC "
			       "as '\\:'";
		}
	}
	p->src = src;
	p->dest = strdup(q + 1);
	return p->dest ? NULL : "out of memory";
}

static int parse(int argc, char **argv, run_args *r)
{
	static const struct option lo[] = {
	        {"stage", required_argument, NULL, OPT_STAGE},
	        {"collect", required_argument, NULL, OPT_COLLECT},
	        {"every", required_argument, NULL, OPT_EVERY},
	        {"pack", no_argument, NULL, OPT_PACK},
	        {"grace", required_argument, NULL, OPT_GRACE},
	        {"all-nodes", no_argument, NULL, OPT_ALLNODES},
	        {"mount", required_argument, NULL, OPT_MOUNT},
	        {"env", required_argument, NULL, OPT_ENV},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int c, rc;
	uint64_t g;
	while ((c = getopt_long(argc, argv, "+hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case OPT_STAGE:
			if (split_stage(optarg, &r->stages[r->n_stages++]))
				return cli_usage("--stage: '%s' is not SRC or SRC:DEST", optarg);
			break;
		case OPT_MOUNT:
			if (split_stage(optarg, &r->mounts[r->n_mounts++]))
				return cli_usage("--mount: '%s' is not PACK or PACK:DIR", optarg);
			break;
		case OPT_ENV:
			if (!*optarg)
				return cli_usage("--env: an empty name: give the env's directory");
			r->envs[r->n_envs++] = optarg;
			break;
		case OPT_COLLECT: {
			pair *p = &r->collects[r->n_collects++];
			const char *why = split_collect(optarg, p);
			if (why)
				return cli_usage("--collect: '%s' %s", optarg, why);
			break;
		}
		case OPT_EVERY:
			/* 0: only at the end (no periodic collects in a job) */
			if (stg_parse_duration(optarg, &r->o.every))
				return cli_usage("--every: '%s' is not a time interval (e.g. 10m)",
				                 optarg);
			break;
		case OPT_GRACE:
			if (stg_parse_duration(optarg, &g))
				return cli_usage("--grace: '%s' is not a time (e.g. 5s)", optarg);
			r->o.grace = (double)g;
			break;
		case OPT_PACK: r->o.collect.pack = 1; break;
		case OPT_ALLNODES: r->o.all_nodes = 1; break;
		default: return cli_usage("unexpected option");
		}
	}
	if (r->n_mounts && r->o.all_nodes)
		return cli_usage("--mount mounts on this node only: not with --all-nodes (stage "
		                 "with --stage instead)");
	if (r->n_envs && r->o.all_nodes)
		return cli_usage("--env serves the env on this node only: not with --all-nodes "
		                 "(`stager env --all-nodes ENV` first serves it on every node of "
		                 "the job, the pack read once)");
	if (optind >= argc)
		return cli_usage("what to run? stager run [OPTIONS] -- CMD [ARG]...");
	if (r->o.every != STG_RUN_EVERY_DEFAULT && r->o.every && !r->n_collects)
		return cli_usage("--every needs something to collect (--collect SRC:DEST)");
	if (r->o.all_nodes) {
		unsigned nn = stg_job_nodes();
		if (!nn)
			return cli_usage("--all-nodes works inside a Slurm allocation (sbatch, "
			                 "salloc); SLURM_JOB_ID is not set");
		r->o.all_nodes = nn > 1;
		for (size_t i = 0; r->o.all_nodes && r->o.collect.pack && i < r->n_collects; i++)
			if (!strstr(r->collects[i].dest, "%n") &&
			    !strstr(r->collects[i].dest, "%N"))
				return cli_usage(
				        "--all-nodes --pack: put %%N (the node's name) or %%n "
				        "(its index) in DEST, one pack per node: '%s'",
				        r->collects[i].dest);
	}
	/* sbatch's patterns in DEST (%j, %a, %N, ...); with --all-nodes each
	 * node's collector fills in its own */
	stg_ctx *pctx = stg_ctx_new();
	for (size_t i = 0; pctx && i < r->n_collects; i++) {
		char *d = NULL;
		stg_err e = stg_expand_pattern(pctx, r->collects[i].dest, &d);
		if (e) {
			int st = e == STG_EUSAGE ? cli_usage("--collect: DEST %s", stg_errmsg(pctx))
			                         : cli_fail(pctx, e);
			stg_ctx_free(pctx);
			return st;
		}
		if (r->o.all_nodes)
			free(d); /* checked here; expanded on each node */
		else {
			free(r->collects[i].dest);
			r->collects[i].dest = d;
		}
	}
	stg_ctx_free(pctx);
	if (!pctx)
		return EXIT_IO;
	return -1;
}

/* -vv: each look at the time budget */
static void on_budget(void *arg, uint64_t todo, double need, int measured, double room)
{
	(void)arg;
	char sz[32];
	if (g_opts.verbose > 1)
		cli_info("time budget: %s to send, about %.0f s (%s rate), %.0f s after the time "
		         "limit",
		         stg_format_size(todo, sz, sizeof sz), need,
		         measured ? "measured" : "assumed", room);
}

static void free_pairs(pair *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].src);
		free(v[i].dest);
	}
	free(v);
}

int cmd_run(int argc, char **argv)
{
	run_args r = {0};
	stg_run_opts_init(&r.o);
	r.stages = calloc((size_t)argc, sizeof *r.stages);
	r.collects = calloc((size_t)argc, sizeof *r.collects);
	r.mounts = calloc((size_t)argc, sizeof *r.mounts);
	r.envs = calloc((size_t)argc, sizeof *r.envs);
	stg_run_pair *stages = calloc((size_t)argc, sizeof *stages);
	stg_run_pair *collects = calloc((size_t)argc, sizeof *collects);
	stg_run_pair *mounts = calloc((size_t)argc, sizeof *mounts);
	int rc = r.stages && r.collects && r.mounts && r.envs && stages && collects && mounts
	                 ? parse(argc, argv, &r)
	                 : EXIT_IO;
	if (rc >= 0)
		goto out;
	for (size_t i = 0; i < r.n_stages; i++)
		stages[i] = (stg_run_pair){r.stages[i].src, r.stages[i].dest};
	for (size_t i = 0; i < r.n_collects; i++)
		collects[i] = (stg_run_pair){r.collects[i].src, r.collects[i].dest};
	for (size_t i = 0; i < r.n_mounts; i++)
		mounts[i] = (stg_run_pair){r.mounts[i].src, r.mounts[i].dest};
	r.o.mounts = mounts;
	r.o.n_mounts = r.n_mounts;
	r.o.envs = r.envs;
	r.o.n_envs = r.n_envs;
	r.o.stages = stages;
	r.o.n_stages = r.n_stages;
	r.o.collects = collects;
	r.o.n_collects = r.n_collects;
	r.o.argv = argv + optind;
	r.o.budget = on_budget;
	cli_fanout_opts(&r.o.fanout);
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (cache) {
		stg_run_result res;
		stg_err err = stg_run(ctx, cache, cfg, &r.o, &res);
		/* (a failure is in the log already) */
		rc = err           ? stg_exit_status(err)
		     : res.stopped ? EXIT_INTERRUPTED
		     : res.status  ? res.status
		                   : stg_exit_status(res.collect_err);
	}
	stg_cache_close(cache);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
out:
	free_pairs(r.stages, r.n_stages);
	free_pairs(r.collects, r.n_collects);
	free_pairs(r.mounts, r.n_mounts);
	free(r.envs);
	free(stages);
	free(collects);
	free(mounts);
	return rc;
}
