/*
 * cmd_clean.c - stager clean [--dry-run] [--all] [--older-than AGE]
 *                            [--job ID] [--kept] [--json]
 *
 * Results that a finished job never fully collected are moved to kept/,
 * never removed ("kept" lines); --kept removes kept results now.
 */
#include "cli.h"

#include <string.h>

enum { OPT_JSON = OPT_FIRST_LOCAL, OPT_ALL, OPT_OLDER, OPT_JOB, OPT_KEPT };

typedef struct clean_out {
	int json, dry, first;
	unsigned long long count;
} clean_out;

static void on_removed(void *arg, const char *what, const char *path, uint64_t bytes)
{
	clean_out *o = arg;
	o->count += strcmp(what, "keep") != 0 && strcmp(what, "stays") != 0;
	if (o->json) {
		printf("%s{\"what\":\"%s\",\"path\":", o->first ? "" : ",", what);
		json_str(stdout, path);
		printf(",\"bytes\":%llu}", (unsigned long long)bytes);
		o->first = 0;
		return;
	}
	char a[16];
	if (!strcmp(what, "stays")) { /* kept earlier, not yet collected */
		printf("keeping uncollected results %10s  %s (stager collect --kept sends them)\n",
		       stg_format_size(bytes, a, sizeof a), path);
		return;
	}
	if (!strcmp(what, "keep")) { /* moved aside, not removed */
		printf("%s %10s  %s\n",
		       o->dry ? "would keep uncollected results" : "kept uncollected results",
		       stg_format_size(bytes, a, sizeof a), path);
		return;
	}
	printf("%s%-7s %10s  %s\n", o->dry ? "would remove " : "removed ", what,
	       stg_format_size(bytes, a, sizeof a), path);
}

int cmd_clean(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"dry-run", no_argument, NULL, 'n'},
	        {"all", no_argument, NULL, OPT_ALL},
	        {"older-than", required_argument, NULL, OPT_OLDER},
	        {"job", required_argument, NULL, OPT_JOB},
	        {"kept", no_argument, NULL, OPT_KEPT},
	        {"json", no_argument, NULL, OPT_JSON},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	stg_clean_opts co;
	stg_clean_opts_init(&co);
	clean_out out = {.first = 1};
	int c, rc;
	while ((c = getopt_long(argc, argv, "nhqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case 'n': co.dry_run = 1; break;
		case OPT_ALL: co.all = 1; break;
		case OPT_OLDER:
			if (stg_parse_duration(optarg, &co.older_than) || !co.older_than)
				return cli_usage(
				        "--older-than wants an age like 12h or 7d, not '%s'",
				        optarg);
			break;
		case OPT_JOB:
			for (const char *p = optarg; *p; p++)
				if (!((*p >= '0' && *p <= '9') || *p == '_'))
					return cli_usage("--job wants a Slurm job id, not '%s'",
					                 optarg);
			if (!*optarg)
				return cli_usage("--job wants a Slurm job id");
			co.job = optarg;
			break;
		case OPT_KEPT: co.kept = 1; break;
		case OPT_JSON: out.json = 1; break;
		default: return cli_usage("unexpected option");
		}
	}
	if (optind != argc)
		return cli_usage("stager clean takes no arguments");
	if ((rc = cli_check_globals()))
		return rc;
	out.dry = co.dry_run;
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (!cache && co.job)
		/* the epilog tells this apart from a clean that failed after
		 * it could read the records of results (which stay then) */
		cli_error("nothing of job %s to keep: no scratch root of this user's could be "
		          "opened, so none holds a record of its results",
		          co.job);
	if (cache) {
		uint64_t freed = 0;
		if (out.json)
			printf("{\"dry_run\":%s,\"removed\":[", co.dry_run ? "true" : "false");
		stg_err err = stg_clean(ctx, cache, &co, on_removed, &out, &freed);
		if (out.json)
			printf("],\"bytes_freed\":%llu}\n", (unsigned long long)freed);
		if (err) {
			rc = cli_fail(ctx, err);
		} else {
			char a[16];
			cli_info("%s %s in %llu item%s under '%s'",
			         co.dry_run ? "would free" : "freed",
			         stg_format_size(freed, a, sizeof a), out.count,
			         out.count == 1 ? "" : "s", stg_cache_root(cache));
			rc = EXIT_OK;
		}
		stg_cache_close(cache);
	}
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return rc;
}
