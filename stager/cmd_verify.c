/*
 * cmd_verify.c - stager verify PACK [--json]: the pack, and the delta files
 * its trailer lists (as far as they can be checked without their bases).
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { OPT_JSON = OPT_FIRST_LOCAL };

/* The state of delta i of pack (at path): 0 intact, 1 missing, -1 damaged
 * (the reason on ctx); its file's path into out. */
static int check_delta(stg_ctx *ctx, stg_pack *pack, const char *path, size_t i, char *out,
                       size_t len)
{
	uint8_t base[STG_DIGEST_LEN];
	const char *name;
	stg_pack_delta(pack, i, base, &name);
	const char *slash = strrchr(path, '/');
	snprintf(out, len, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path, name);
	int fd = open(out, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return errno == ENOENT
		               ? 1
		               : (cli_error("cannot read '%s': %s", out, strerror(errno)), -1);
	int rc = 0;
	uint8_t got[STG_DIGEST_LEN];
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		cli_error("'%s' is not a regular file", out);
		rc = -1;
	} else if (stg_delta_check(ctx, pack, fd, got, NULL)) {
		cli_error("'%s': %s", out, stg_errmsg(ctx));
		rc = -1;
	} else if (memcmp(got, base, STG_DIGEST_LEN)) {
		cli_error("'%s' is a delta from another version than the pack says", out);
		rc = -1;
	}
	close(fd);
	return rc;
}

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
	/* the deltas beside it: damaged ones fail the verification, missing
	 * ones only cost their users the full read */
	stg_pack_info pi = {0};
	if (pack)
		stg_pack_get_info(pack, &pi);
	int *dstate = calloc(pi.deltas ? pi.deltas : 1, sizeof *dstate);
	char(*dpath)[4096] = calloc(pi.deltas ? pi.deltas : 1, sizeof *dpath);
	int bad_deltas = 0;
	if (!dstate || !dpath) {
		free(dstate);
		free(dpath);
		stg_pack_close(pack);
		cli_ctx_done(ctx);
		cli_error("out of memory");
		return EXIT_IO;
	}
	for (size_t i = 0; !err && i < pi.deltas; i++) {
		dstate[i] = check_delta(ctx, pack, path, i, dpath[i], sizeof dpath[i]);
		if (dstate[i] > 0)
			cli_error("warning: '%s', a delta the pack lists, is missing: nodes that "
			          "cache its base will read the whole pack",
			          dpath[i]);
		bad_deltas += dstate[i] < 0;
	}
	if (json) {
		cli_progress_end();
		printf("{\"pack\":");
		json_str(stdout, path);
		printf(",\"ok\":%s", err || bad_deltas ? "false" : "true");
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
		printf(",\"deltas\":[");
		for (size_t i = 0; !err && i < pi.deltas; i++) {
			printf("%s{\"file\":", i ? "," : "");
			json_str(stdout, dpath[i]);
			printf(",\"state\":\"%s\"}", dstate[i] == 0  ? "ok"
			                             : dstate[i] > 0 ? "missing"
			                                             : "damaged");
		}
		printf("]}\n");
	}
	if (err) {
		rc = cli_fail(ctx, err);
	} else if (bad_deltas) {
		cli_error("the pack is intact; %d of its delta files %s damaged: make them again "
		          "with stager pack --base, or remove them",
		          bad_deltas, bad_deltas == 1 ? "is" : "are");
		rc = stg_exit_status(STG_ECORRUPT);
	} else {
		stg_pack_info info;
		stg_pack_get_info(pack, &info);
		char hex[STG_DIGEST_HEXLEN + 1], a[16];
		stg_digest_hex(info.digest, hex);
		if (!json) {
			printf("%s: OK\n", path);
			for (size_t i = 0; i < pi.deltas; i++)
				if (!dstate[i])
					printf("%s: OK\n", dpath[i]);
		}
		cli_info("'%s' is intact: %llu files, %s, sha256 %s", path,
		         (unsigned long long)(info.files + info.hardlinks),
		         stg_format_size(info.content_size, a, sizeof a), hex);
		rc = EXIT_OK;
	}
	free(dstate);
	free(dpath);
	stg_pack_close(pack);
	cli_ctx_done(ctx);
	return rc;
}
