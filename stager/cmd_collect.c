/*
 * cmd_collect.c - stager collect SRC DEST [--pack] [--every INTERVAL]
 *                                [--level N] [--json]
 *
 * With --every, stg_collect_every collects at once and then every
 * INTERVAL (with idle I/O priority) until SIGTERM, SIGINT or SIGHUP, which
 * end it after one last collect at normal priority (exit 0 if that
 * succeeds); a second signal interrupts that collect (exit 5).  --kept
 * sends the results kept on this node to their DEST; --node-ready is the
 * collector that stager run --all-nodes starts on each node.
 */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	OPT_JSON = OPT_FIRST_LOCAL,
	OPT_PACK,
	OPT_EVERY,
	OPT_LEVEL,
	OPT_NODE_READY,
	OPT_KEPT,
	OPT_JOB
};

static void print_json(const char *src, const char *dest, const stg_collect_totals *t)
{
	printf("{\"src\":");
	json_str(stdout, src);
	printf(",\"dest\":");
	json_str(stdout, dest);
	printf(",\"rounds\":%u,\"files\":%llu,\"sent_files\":%llu,\"sent_bytes\":%llu,"
	       "\"unchanged\":%llu,\"retries\":%llu,\"failed\":%llu,\"changing\":%llu,"
	       "\"seconds\":%.3f,"
	       "\"status\":%d}\n",
	       t->rounds, (unsigned long long)t->files, (unsigned long long)t->sent_files,
	       (unsigned long long)t->sent_bytes, (unsigned long long)t->unchanged,
	       (unsigned long long)t->retries, (unsigned long long)t->failed,
	       (unsigned long long)t->changing, t->seconds, stg_exit_status(t->err));
}

/* --kept: each kept result, collected to its DEST (or not) */
typedef struct kept_out {
	stg_ctx *ctx;
	int json, first;
	unsigned done, left;
} kept_out;

static void on_kept(void *arg, const stg_kept *k, stg_err err, const stg_collect_result *res)
{
	kept_out *o = arg;
	char a[16];
	if (err)
		o->left++;
	else
		o->done++;
	if (o->json) {
		printf("%s{\"kept\":", o->first ? "" : ",");
		json_str(stdout, k->path);
		printf(",\"dest\":");
		json_str(stdout, k->dest);
		printf(",\"sent_files\":%llu,\"sent_bytes\":%llu,\"status\":%d}",
		       (unsigned long long)res->sent_files, (unsigned long long)res->sent_bytes,
		       err ? stg_exit_status(err) : 0);
		o->first = 0;
	} else if (err) {
		cli_error("'%s' not collected to '%s': %s (kept; try again later)", k->path,
		          k->dest, stg_errmsg(o->ctx));
	} else {
		cli_info("collected kept results '%s' to '%s': %llu sent (%s); removed from kept/",
		         k->path, k->dest, (unsigned long long)res->sent_files,
		         stg_format_size(res->sent_bytes, a, sizeof a));
	}
}

/* The notes in the user's home of results kept on other nodes (of job, if
 * given): "kept_elsewhere", as status prints it. */
static void print_elsewhere_json(const char *job)
{
	stg_ctx *ctx = stg_ctx_new();
	stg_kept_note *v = NULL;
	size_t n = 0;
	if (!ctx || stg_kept_notes_elsewhere(ctx, job, &v, &n))
		v = NULL, n = 0;
	cli_kept_notes_json(v, n);
	stg_kept_notes_free(v, n);
	stg_ctx_free(ctx);
}

/* Nothing kept here: on a login node the results are on the nodes the
 * jobs ran on, which the notes in the user's home name; each with the
 * command that sends them from there. */
static void say_none_here(stg_cache *cache, const char *job)
{
	char node[72], a[16];
	stg_node_name(node, sizeof node);
	stg_ctx *ctx = stg_ctx_new();
	stg_kept_note *v = NULL;
	size_t n = 0;
	if (!ctx || stg_kept_notes_elsewhere(ctx, job, &v, &n))
		v = NULL, n = 0;
	cli_info("no kept results%s%s under '%s' on %s%s", job ? " of job " : "", job ? job : "",
	         stg_cache_root(cache), node,
	         n ? "; the notes in ~/.local/state/stager/kept name them on other nodes:" : "");
	for (size_t i = 0; i < n; i++)
		cli_info("  %s: job %s, %s for '%s' in '%s': `srun -w %s -N1 -n1 stager collect "
		         "--kept%s%s` sends them",
		         v[i].node, v[i].job, stg_format_size(v[i].bytes, a, sizeof a), v[i].dest,
		         v[i].path, v[i].node, job ? " --job " : "", job ? job : "");
	stg_kept_notes_free(v, n);
	stg_ctx_free(ctx);
}

static int collect_kept(stg_ctx *ctx, stg_cache *cache, const stg_collect_opts *co, const char *job,
                        int json)
{
	kept_out o = {.ctx = ctx, .json = json, .first = 1};
	if (json)
		printf("{\"kept\":[");
	stg_err err = stg_collect_kept_job(ctx, cache, co, job, on_kept, &o);
	if (json) {
		printf("],\"collected\":%u,\"left\":%u", o.done, o.left);
		print_elsewhere_json(job);
		printf("}\n");
	}
	if (!json && !o.done && !o.left && !err)
		say_none_here(cache, job);
	/* what stays kept (failed, or not tried before a stop), each with the
	 * one command that brings it back: the epilog copies these lines into
	 * the job's log */
	stg_kept *v = NULL;
	size_t n = 0;
	char node[72], a[16];
	stg_node_name(node, sizeof node);
	if (!stg_kept_list(ctx, cache, &v, &n)) {
		size_t jl = job ? strlen(job) : 0;
		for (size_t i = 0; i < n; i++) {
			if (!v[i].dest ||
			    (job && (strncmp(v[i].name, "job", 3) ||
			             strncmp(v[i].name + 3, job, jl) || v[i].name[3 + jl] != '-')))
				continue;
			cli_error(
			        "results for '%s' are kept on %s in '%s' (%s): `srun -w %s -N1 -n1 "
			        "stager collect --kept` sends them",
			        v[i].dest, node, v[i].path,
			        stg_format_size(v[i].bytes, a, sizeof a), node);
		}
		stg_kept_free(v, n);
	}
	return err ? stg_exit_status(err) : EXIT_OK;
}

int cmd_collect(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"pack", no_argument, NULL, OPT_PACK},
	        {"every", required_argument, NULL, OPT_EVERY},
	        {"level", required_argument, NULL, OPT_LEVEL},
	        {"json", no_argument, NULL, OPT_JSON},
	        {"kept", no_argument, NULL, OPT_KEPT},
	        {"job", required_argument, NULL, OPT_JOB},
	        /* run --all-nodes: make SRC, say so, collect until stopped */
	        {"node-ready", no_argument, NULL, OPT_NODE_READY},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	stg_collect_opts co;
	stg_collect_opts_init(&co);
	int json = 0, c, rc, node_ready = 0, kept = 0;
	const char *job = NULL;
	uint64_t every = 0;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case OPT_PACK: co.pack = 1; break;
		case OPT_JSON: json = 1; break;
		case OPT_NODE_READY: node_ready = 1; break;
		case OPT_KEPT: kept = 1; break;
		case OPT_JOB:
			if (!*optarg || optarg[strspn(optarg, "0123456789_")])
				return cli_usage("--job: '%s' is not a Slurm job id", optarg);
			job = optarg;
			break;
		case OPT_EVERY:
			if (stg_parse_duration(optarg, &every) || every == 0)
				return cli_usage("--every: '%s' is not a time interval (e.g. 10m)",
				                 optarg);
			break;
		case OPT_LEVEL:
			if (cli_parse_level(optarg, &co.level))
				return cli_usage("--level: '%s' is not a level from 1 to 19",
				                 optarg);
			break;
		default: return cli_usage("unexpected option");
		}
	}
	if (job && !kept)
		return cli_usage("--job goes with --kept: stager collect --kept --job ID");
	if (kept) {
		if (argc != optind || every || node_ready)
			return cli_usage(
			        "--kept takes no SRC, DEST or --every: it sends every kept "
			        "result to the DEST it was meant for");
		stg_ctx *ctx = cli_ctx();
		stg_config *cfg = cli_config(ctx);
		stg_cache *cache = cli_cache(ctx, cfg, &rc);
		if (cache)
			rc = collect_kept(ctx, cache, &co, job, json);
		stg_cache_close(cache);
		stg_config_free(cfg);
		cli_ctx_done(ctx);
		return rc;
	}
	if (co.level && !co.pack)
		return cli_usage("--level sets the compression of --pack: a plain collect "
		                 "copies files as they are");
	if (argc - optind != 2)
		return cli_usage(argc - optind < 2
		                         ? "what to collect, and where? stager collect SRC "
		                           "DEST"
		                         : "too many arguments");
	const char *src = argv[optind];
	char *dest = NULL;
	{
		stg_ctx *pctx = stg_ctx_new();
		stg_err perr =
		        pctx ? stg_expand_pattern(pctx, argv[optind + 1], &dest) : STG_ENOMEM;
		if (perr) {
			rc = perr == STG_EUSAGE ? cli_usage("DEST %s", stg_errmsg(pctx))
			                        : cli_fail(pctx, perr);
			stg_ctx_free(pctx);
			return rc;
		}
		stg_ctx_free(pctx);
	}
	if (node_ready) {
		/* say which node a message comes from */
		static char who[128];
		char me[72];
		snprintf(who, sizeof who, "collect on %s", stg_node_name(me, sizeof me));
		g_cmd = who;
	}
	if (every || node_ready) {
		/* stg_collect_every takes these signals; one that comes while the
		 * cache is opened is its own too: a stop that comes early must
		 * still end in a collect */
		sigset_t set;
		sigemptyset(&set);
		const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			sigaddset(&set, sigs[i]);
		sigprocmask(SIG_BLOCK, &set, NULL);
	}
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (cache) {
		/* (failures are in the log already) */
		stg_collect_totals t = {0};
		stg_err err =
		        node_ready ? stg_node_collect(ctx, cache, src, dest, &co, every,
		                                      STDIN_FILENO, STDOUT_FILENO, &t)
		                   : stg_collect_every(ctx, cache, src, dest, &co, every, -1, &t);
		rc = stg_exit_status(err);
		if (json && t.rounds) /* (none if no collect began) */
			print_json(src, dest, &t);
	}
	stg_cache_close(cache);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	free(dest);
	return rc;
}
