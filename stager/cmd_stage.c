/*
 * cmd_stage.c - stager stage SRC [DEST] [--include GLOB]... [--verify]
 *                             [--copy] [--no-pin] [--json]
 */
#include "cli.h"

#include <stdlib.h>

enum { OPT_JSON = OPT_FIRST_LOCAL, OPT_VERIFY, OPT_COPY, OPT_NOPIN, OPT_ALLNODES };

int cmd_stage(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"include", required_argument, NULL, 'i'},
	        {"verify", no_argument, NULL, OPT_VERIFY},
	        {"copy", no_argument, NULL, OPT_COPY},
	        {"no-pin", no_argument, NULL, OPT_NOPIN},
	        {"json", no_argument, NULL, OPT_JSON},
	        {"all-nodes", no_argument, NULL, OPT_ALLNODES},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	const char **inc = calloc((size_t)argc, sizeof *inc);
	if (!inc)
		return EXIT_IO;
	stg_stage_opts so;
	stg_stage_opts_init(&so);
	int json = 0, c, rc;
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
		case OPT_ALLNODES:
			cli_error("--all-nodes (multi-node fan-out) is not built yet in this "
			          "version");
			rc = EXIT_USAGE;
			goto done;
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
	const char *src = argv[optind];
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (cache) {
		stg_stage_result res;
		stg_err err = stg_stage(ctx, cache, src, &so, &res);
		if (err) {
			rc = cli_fail(ctx, err);
		} else {
			char hex[STG_DIGEST_HEXLEN + 1], a[16], b[16];
			stg_digest_hex(res.digest, hex);
			if (json) {
				printf("{\"path\":");
				json_str(stdout, res.path);
				printf(",\"digest\":\"%s\",\"kind\":\"%s\",\"hit\":%s,\"waited\":%"
				       "s,"
				       "\"source_bytes\":%llu,\"content_bytes\":%llu,\"files\":%"
				       "llu,"
				       "\"seconds\":%.3f}\n",
				       hex, res.kind, res.hit ? "true" : "false",
				       res.waited ? "true" : "false",
				       (unsigned long long)res.source_bytes,
				       (unsigned long long)res.content_bytes,
				       (unsigned long long)res.files, res.seconds);
			} else {
				printf("%s\n", res.path);
			}
			cli_info("%s '%s' at '%s': %llu files, %s; %s read from the source, %.2f s",
			         res.hit ? (res.waited ? "reused (built by another stager)"
			                               : "cached")
			                 : "staged",
			         src, res.path, (unsigned long long)res.files,
			         stg_format_size(res.content_bytes, a, sizeof a),
			         stg_format_size(res.source_bytes, b, sizeof b), res.seconds);
			stg_stage_result_free(&res);
			rc = EXIT_OK;
		}
		stg_cache_close(cache);
	}
	stg_config_free(cfg);
	cli_ctx_done(ctx);
done:
	free(inc);
	return rc;
}
