/*
 * cmd_stage.c - stager stage SRC [DEST] [--include GLOB]... [--verify]
 *                             [--copy] [--no-pin] [--all-nodes] [--json]
 *
 * --node-probe and --node-receive (not in --help) are the tasks that
 * stager stage --all-nodes starts on the other nodes; with --node-env,
 * those of stager env --all-nodes (the env's pack into the cache only,
 * its links as they are: see stg_stage_opts.env).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	OPT_JSON = OPT_FIRST_LOCAL,
	OPT_VERIFY,
	OPT_COPY,
	OPT_NOPIN,
	OPT_ALLNODES,
	/* between the nodes of --all-nodes (not in --help) */
	OPT_NODE_PROBE,
	OPT_NODE_RECEIVE,
	OPT_NODE_DIGEST,
	OPT_NODE_ENV,
};

/* The staged path as every way of staging gives it (plain, --all-nodes,
 * --json, run's STAGER_DATA): with a trailing '/', so that find, du and
 * cp -r see the dataset, not the link to it. */
static void print_path(const char *path, bool json)
{
	size_t n = strlen(path);
	char *v = malloc(n + 2);
	if (!v)
		return;
	snprintf(v, n + 2, "%s%s", path, n && path[n - 1] == '/' ? "" : "/");
	if (json)
		json_str(stdout, v);
	else
		printf("%s\n", v);
	free(v);
}

static int stage_here(stg_ctx *ctx, stg_cache *cache, const char *src, const stg_stage_opts *so,
                      int json)
{
	stg_stage_result res;
	stg_err err = stg_stage(ctx, cache, src, so, &res);
	if (err)
		return cli_fail(ctx, err);
	char hex[STG_DIGEST_HEXLEN + 1], base[STG_DIGEST_HEXLEN + 1], a[16], b[16];
	stg_digest_hex(res.digest, hex);
	stg_digest_hex(res.base_digest, base);
	if (json) {
		printf("{\"path\":");
		print_path(res.path, true);
		printf(",\"digest\":\"%s\",\"kind\":\"%s\",\"hit\":%s,"
		       "\"waited\":%s,\"delta\":%s,",
		       hex, res.kind, res.hit ? "true" : "false", res.waited ? "true" : "false",
		       res.delta ? "true" : "false");
		if (res.delta)
			printf("\"base\":\"%s\",", base);
		printf("\"source_bytes\":%llu,\"content_bytes\":%llu,"
		       "\"files\":%llu,\"seconds\":%.3f}\n",
		       (unsigned long long)res.source_bytes, (unsigned long long)res.content_bytes,
		       (unsigned long long)res.files, res.seconds);
	} else {
		cli_progress_end();
		print_path(res.path, false);
	}
	char via[64] = "";
	if (res.delta)
		snprintf(via, sizeof via, " (a delta from the cached %.12s)", base);
	cli_info("%s '%s' at '%s': %llu files, %s; %s read from the source%s, %.2f "
	         "s",
	         res.hit ? (res.waited ? "reused (built by another stager)" : "cached") : "staged",
	         src, res.path, (unsigned long long)res.files,
	         stg_format_size(res.content_bytes, a, sizeof a),
	         stg_format_size(res.source_bytes, b, sizeof b), via, res.seconds);
	stg_stage_result_free(&res);
	return EXIT_OK;
}

/* --all-nodes: the path (the same on every node), and how each node came
 * by the pack. */
static int stage_all_nodes(stg_ctx *ctx, stg_cache *cache, const char *src,
                           const stg_stage_opts *so, int json)
{
	stg_fanout_opts fo;
	cli_fanout_opts(&fo);
	stg_fanout_result res;
	stg_err err = stg_stage_all_nodes(ctx, cache, src, so, &fo, &res);
	if (err) {
		stg_fanout_result_free(&res);
		return err == STG_EUSAGE ? cli_usage("%s", stg_errmsg(ctx)) : cli_fail(ctx, err);
	}
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(res.digest, hex);
	if (res.path && json) {
		printf("{\"path\":");
		print_path(res.path, true);
		if (res.pack) {
			printf(",\"digest\":\"%s\",\"nodes\":[", hex);
			for (size_t i = 0; i < res.n_nodes; i++) {
				printf("%s{\"node\":", i ? "," : "");
				json_str(stdout, res.nodes[i].name);
				printf(",\"how\":\"%s\"}", res.nodes[i].how);
			}
			printf("]");
		} else {
			printf(",\"digest\":null,\"nodes\":[]");
		}
		printf(",\"seconds\":%.3f}\n", res.seconds);
	} else if (res.path) {
		print_path(res.path, false);
	}
	if (res.pack && !g_opts.quiet) {
		char line[1024];
		cli_info("'%s' on %zu nodes in %.2f s: %s", src, res.n_nodes, res.seconds,
		         stg_fanout_nodes_text(&res, line, sizeof line));
	}
	int rc = stg_exit_status(res.nodes_err);
	stg_fanout_result_free(&res);
	return rc;
}

int cmd_stage(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"include", required_argument, NULL, 'i'},
	        {"verify", no_argument, NULL, OPT_VERIFY},
	        {"copy", no_argument, NULL, OPT_COPY},
	        {"no-pin", no_argument, NULL, OPT_NOPIN},
	        {"json", no_argument, NULL, OPT_JSON},
	        {"all-nodes", no_argument, NULL, OPT_ALLNODES},
	        {"node-probe", no_argument, NULL, OPT_NODE_PROBE},
	        {"node-receive", required_argument, NULL, OPT_NODE_RECEIVE},
	        {"node-digest", required_argument, NULL, OPT_NODE_DIGEST},
	        {"node-env", no_argument, NULL, OPT_NODE_ENV},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	const char **inc = calloc((size_t)argc, sizeof *inc);
	if (!inc)
		return EXIT_IO;
	stg_stage_opts so;
	stg_stage_opts_init(&so);
	int json = 0, c, rc, all = 0, probe = 0;
	const char *receive = NULL, *digest_hex = NULL;
	while ((c = getopt_long(argc, argv, "i:hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			goto done;
		if (rc == -2)
			continue;
		switch (c) {
		case 'i': inc[so.n_include++] = optarg; break;
		case OPT_VERIFY: so.verify = 1; break;
		case OPT_COPY: so.copy = 1; break;
		case OPT_NOPIN: so.no_pin = 1; break;
		case OPT_JSON: json = 1; break;
		case OPT_ALLNODES: all = 1; break;
		case OPT_NODE_PROBE: probe = 1; break;
		case OPT_NODE_RECEIVE: receive = optarg; break;
		case OPT_NODE_DIGEST: digest_hex = optarg; break;
		case OPT_NODE_ENV: so.cache_only = so.env = 1; break;
		default: rc = cli_usage("unexpected option"); goto done;
		}
	}
	int nargs = argc - optind;
	if (nargs < 1 || nargs > 2) {
		rc = cli_usage(nargs < 1 ? "what to stage? stager stage SRC [DEST]"
		                         : "too many arguments");
		goto done;
	}
	so.include = inc;
	if (nargs == 2)
		so.dest = argv[optind + 1];
	if (so.dest && !*so.dest) {
		rc = cli_usage("DEST is an empty string: name where to put the dataset");
		goto done;
	}
	if (so.env && !probe && !receive) {
		rc = cli_usage("--node-env: only for the tasks of `stager env --all-nodes`");
		goto done;
	}
	const char *src = argv[optind];
	/* the other nodes start in the same directory; absolute is clearer */
	char abs_src[4096];
	if (all && src[0] != '/' && getcwd(abs_src, sizeof abs_src) &&
	    strlen(abs_src) + strlen(src) + 2 < sizeof abs_src) {
		strcat(abs_src, "/");
		strcat(abs_src, src);
		src = abs_src;
	}
	if (probe || receive) {
		/* say which node a message comes from */
		static char who[128];
		char me[72];
		snprintf(who, sizeof who, "stage on %s", stg_node_name(me, sizeof me));
		g_cmd = who;
	}
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	uint8_t digest[STG_DIGEST_LEN];
	if (cache && (probe || receive) && stg_digest_parse(digest_hex, digest)) {
		rc = cli_usage("--node-digest: not a digest");
	} else if (cache && (probe || receive)) {
		stg_err err = probe ? stg_node_probe(ctx, cache, src, &so, digest, STDOUT_FILENO)
		                    : stg_node_receive(ctx, cache, src, &so, receive, digest,
		                                       STDIN_FILENO, STDOUT_FILENO);
		rc = err ? cli_fail(ctx, err) : EXIT_OK;
	} else if (cache && all && stg_job_nodes() != 1) {
		rc = stage_all_nodes(ctx, cache, src, &so, json);
	} else if (cache) {
		rc = stage_here(ctx, cache, src, &so, json);
	}
	stg_cache_close(cache);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
done:
	free(inc);
	return rc;
}
