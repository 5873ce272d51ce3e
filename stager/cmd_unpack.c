/*
 * cmd_unpack.c - stager unpack PACK DIR [--include GLOB]...
 */
#include "cli.h"

#include <stdlib.h>
#include <time.h>

int cmd_unpack(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"include", required_argument, NULL, 'i'},
	        {"threads", required_argument, NULL, 'j'},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	const char **inc = calloc((size_t)argc, sizeof *inc);
	size_t n_inc = 0;
	int threads = 0, c, rc;
	if (!inc)
		return EXIT_IO;
	while ((c = getopt_long(argc, argv, "i:j:hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			goto done;
		if (rc == -2)
			continue;
		switch (c) {
		case 'i': inc[n_inc++] = optarg; break;
		case 'j':
			if (cli_parse_threads(optarg, &threads)) {
				rc = cli_usage("--threads must be 0 to 64, not '%s'", optarg);
				goto done;
			}
			break;
		default: rc = cli_usage("unexpected option"); goto done;
		}
	}
	if (argc - optind != 2) {
		rc = cli_usage(argc - optind < 2 ? "stager unpack PACK DIR" : "too many arguments");
		goto done;
	}
	if ((rc = cli_check_globals()))
		goto done;
	const char *path = argv[optind], *dir = argv[optind + 1];
	if (!*dir) {
		rc = cli_usage("DIR is an empty string: name the directory to make");
		goto done;
	}
	stg_ctx *ctx = cli_ctx();
	stg_set_threads(ctx, threads);
	stg_pack *pack = NULL;
	stg_unpack_stats stats;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	stg_err err = stg_pack_open(ctx, path, &pack);
	if (!err) {
		stg_unpack_opts uo;
		stg_unpack_opts_init(&uo);
		uo.include = inc;
		uo.n_include = n_inc;
		err = stg_unpack(ctx, pack, dir, &uo, &stats);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (err) {
		rc = cli_fail(ctx, err);
	} else {
		char a[16];
		cli_info("unpacked '%s' into '%s': %llu files, %s verified, %llu of %llu "
		         "frames decoded, %.1f s",
		         path, dir, (unsigned long long)stats.files,
		         stg_format_size(stats.bytes, a, sizeof a),
		         (unsigned long long)stats.frames_read,
		         (unsigned long long)stats.frames_total,
		         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
		rc = EXIT_OK;
	}
	stg_pack_close(pack);
	cli_ctx_done(ctx);
done:
	free(inc);
	return rc;
}
