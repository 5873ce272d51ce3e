/*
 * cmd_verify.c - stager verify PACK [--json]
 */
#include "cli.h"

enum { OPT_JSON = OPT_FIRST_LOCAL };

int cmd_verify(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"threads", required_argument, NULL, 'j'},
	        {"json", no_argument, NULL, OPT_JSON},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int threads = 0, json = 0, c;
	while ((c = getopt_long(argc, argv, "j:hqv", lo, NULL)) != -1) {
		int rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case 'j':
			if (cli_parse_threads(optarg, &threads))
				return cli_usage("--threads must be 0 to 64, not '%s'", optarg);
			break;
		case OPT_JSON: json = 1; break;
		default: return cli_usage("unexpected option");
		}
	}
	if (argc - optind != 1)
		return cli_usage(argc - optind < 1 ? "which pack? stager verify PACK"
		                                   : "too many arguments");
	int rc = cli_check_globals();
	if (rc)
		return rc;
	const char *path = argv[optind];
	stg_ctx *ctx = cli_ctx();
	stg_set_threads(ctx, threads);
	stg_pack *pack = NULL;
	stg_err err = stg_pack_open(ctx, path, &pack);
	if (!err)
		err = stg_verify(ctx, pack);
	if (json) {
		cli_progress_end();
		printf("{\"pack\":");
		json_str(stdout, path);
		printf(",\"ok\":%s", err ? "false" : "true");
		if (pack) {
			stg_pack_info info;
			stg_pack_get_info(pack, &info);
			printf(",\"digest\":");
			json_hex(stdout, info.digest, STG_DIGEST_LEN);
			printf(",\"files\":%llu,\"content_size\":%llu",
			       (unsigned long long)(info.files + info.hardlinks),
			       (unsigned long long)info.content_size);
		}
		if (err) {
			printf(",\"error\":");
			json_str(stdout, stg_errmsg(ctx));
		}
		printf("}\n");
	}
	if (err) {
		rc = cli_fail(ctx, err);
	} else {
		stg_pack_info info;
		stg_pack_get_info(pack, &info);
		char hex[STG_DIGEST_HEXLEN + 1], a[16];
		stg_digest_hex(info.digest, hex);
		if (!json)
			printf("%s: OK\n", path);
		cli_info("'%s' is intact: %llu files, %s, sha256 %s", path,
		         (unsigned long long)(info.files + info.hardlinks),
		         stg_format_size(info.content_size, a, sizeof a), hex);
		rc = EXIT_OK;
	}
	stg_pack_close(pack);
	cli_ctx_done(ctx);
	return rc;
}
