/*
 * cmd_pack.c - stager pack DIR [-o OUT] [--base OLD]... [--level N] [--threads N] [--json]
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { OPT_JSON = OPT_FIRST_LOCAL, OPT_FRAME, OPT_BASE, OPT_FSYNC };

/* DIR.tar.zst beside DIR (the real name, when DIR is "." or ends in "/"). */
static char *default_output(const char *dir)
{
	char *real = realpath(dir, NULL);
	if (!real)
		return NULL;
	if (!strcmp(real, "/")) {
		free(real);
		return NULL;
	}
	size_t n = strlen(real) + sizeof ".tar.zst";
	char *out = malloc(n);
	if (out)
		snprintf(out, n, "%s.tar.zst", real);
	free(real);
	return out;
}

/* The deltas written, for the report at the end. */
typedef struct deltas {
	size_t n;
	char **base;
	stg_delta_info *info;
	char **name;
} deltas;

static void on_delta(void *arg, const char *base, const stg_delta_info *info)
{
	deltas *d = arg;
	d->base[d->n] = strdup(base);
	d->name[d->n] = strdup(info->name);
	d->info[d->n] = *info;
	d->info[d->n].name = d->name[d->n];
	d->n++;
}

static void report_deltas(const deltas *d, int json)
{
	char a[16], b[16];
	for (size_t i = 0; i < d->n; i++) {
		const stg_delta_info *x = &d->info[i];
		char hex[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(x->base_digest, hex);
		if (json) {
			printf("%s{\"base\":", i ? "," : "");
			json_str(stdout, d->base[i]);
			printf(",\"base_digest\":\"%s\",\"file\":", hex);
			json_str(stdout, d->name[i]);
			printf(",\"bytes\":%llu,\"unchanged\":%llu,\"copied\":%llu,"
			       "\"patched\":%llu,\"added\":%llu,\"removed\":%llu,"
			       "\"patched_bytes\":%llu,\"added_bytes\":%llu}",
			       (unsigned long long)x->size, (unsigned long long)x->unchanged,
			       (unsigned long long)x->copied, (unsigned long long)x->patched,
			       (unsigned long long)x->added, (unsigned long long)x->removed,
			       (unsigned long long)x->patched_bytes,
			       (unsigned long long)x->added_bytes);
			continue;
		}
		cli_info("delta from '%s' (%.12s): %s in '%s': %llu changed (%s), %llu added, "
		         "%llu renamed or copied, %llu removed, %llu unchanged",
		         d->base[i], hex, stg_format_size(x->size, a, sizeof a), d->name[i],
		         (unsigned long long)x->patched,
		         stg_format_size(x->patched_bytes, b, sizeof b),
		         (unsigned long long)x->added, (unsigned long long)x->copied,
		         (unsigned long long)x->removed, (unsigned long long)x->unchanged);
	}
}

static void deltas_free(deltas *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->base[i]);
		free(d->name[i]);
	}
	free(d->base);
	free(d->name);
	free(d->info);
}

static double elapsed(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static int pack_cmd(int argc, char **argv, const char **bases, deltas *d)
{
	static const struct option lo[] = {
	        {"output", required_argument, NULL, 'o'},
	        {"level", required_argument, NULL, 'l'},
	        {"threads", required_argument, NULL, 'j'},
	        {"frame-size", required_argument, NULL, OPT_FRAME},
	        {"json", no_argument, NULL, OPT_JSON},
	        {"base", required_argument, NULL, OPT_BASE},
	        {"fsync", no_argument, NULL, OPT_FSYNC},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	const char *out = NULL;
	int threads = 0, json = 0, c;
	stg_pack_opts po;
	stg_pack_opts_init(&po);
	po.bases = bases;
	po.delta_done = on_delta;
	po.delta_arg = d;
	while ((c = getopt_long(argc, argv, "o:l:j:hqv", lo, NULL)) != -1) {
		int rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case 'o': out = optarg; break;
		case 'l':
			if (cli_parse_level(optarg, &po.level))
				return cli_usage("--level must be 1 to 19, not '%s'", optarg);
			break;
		case 'j':
			if (cli_parse_threads(optarg, &threads))
				return cli_usage("--threads must be 0 to 64, not '%s'", optarg);
			break;
		case OPT_FRAME: {
			uint64_t v;
			if (stg_parse_size(optarg, &v) || v < 65536 || v > (32u << 20))
				return cli_usage("--frame-size must be 64K to 32M, not '%s'",
				                 optarg);
			po.frame_size = (size_t)v;
			break;
		}
		case OPT_JSON: json = 1; break;
		case OPT_FSYNC: po.fsync = 1; break;
		case OPT_BASE: bases[po.n_bases++] = optarg; break;
		default: return cli_usage("unexpected option");
		}
	}
	if (argc - optind != 1)
		return cli_usage(argc - optind < 1 ? "which directory? stager pack DIR"
		                                   : "too many arguments");
	int rc = cli_check_globals();
	if (rc)
		return rc;
	const char *dir = argv[optind];
	if (out && !*out)
		return cli_usage("-o is an empty string: name the pack file");
	struct stat st;
	if (stat(dir, &st)) {
		cli_error("cannot read '%s': %s", dir,
		          errno == ENOENT ? "no such directory" : strerror(errno));
		return EXIT_SOURCE;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_error("'%s' is not a directory (stager pack packs a directory tree)", dir);
		return EXIT_SOURCE;
	}
	char *def = NULL;
	if (!out) {
		if (!(def = default_output(dir))) {
			cli_error("cannot name the output for '%s'; give one with -o", dir);
			return EXIT_USAGE;
		}
		out = def;
	}
	stg_ctx *ctx = cli_ctx();
	stg_set_threads(ctx, threads);
	stg_pack_info info;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	stg_err err = stg_pack_dir(ctx, dir, out, &po, &info);
	double secs = elapsed(&t0);
	if (err) {
		rc = cli_fail(ctx, err);
		cli_ctx_done(ctx);
		free(def);
		return rc;
	}
	cli_ctx_done(ctx);
	char hex[STG_DIGEST_HEXLEN + 1], a[16], b[16];
	stg_digest_hex(info.digest, hex);
	if (json) {
		printf("{\"pack\":");
		json_str(stdout, out);
		printf(",\"digest\":\"%s\",\"pack_size\":%llu,\"content_size\":%llu,"
		       "\"tar_size\":%llu,\"files\":%llu,\"dirs\":%llu,\"symlinks\":%llu,"
		       "\"hardlinks\":%llu,\"frames\":%llu,\"seconds\":%.3f,\"deltas\":[",
		       hex, (unsigned long long)info.pack_size,
		       (unsigned long long)info.content_size, (unsigned long long)info.tar_size,
		       (unsigned long long)info.files, (unsigned long long)info.dirs,
		       (unsigned long long)info.symlinks, (unsigned long long)info.hardlinks,
		       (unsigned long long)info.frames, secs);
		report_deltas(d, 1);
		printf("]}\n");
	} else {
		printf("%s  %s\n", hex, out);
		cli_info("packed %llu files (%s) into '%s': %s in %llu frames, %.1f s",
		         (unsigned long long)(info.files + info.hardlinks),
		         stg_format_size(info.content_size, a, sizeof a), out,
		         stg_format_size(info.pack_size, b, sizeof b),
		         (unsigned long long)info.frames, secs);
		report_deltas(d, 0);
	}
	free(def);
	return EXIT_OK;
}

int cmd_pack(int argc, char **argv)
{
	/* at most one --base per argument */
	const char **bases = calloc((size_t)argc, sizeof *bases);
	deltas d = {0};
	d.base = calloc((size_t)argc, sizeof *d.base);
	d.name = calloc((size_t)argc, sizeof *d.name);
	d.info = calloc((size_t)argc, sizeof *d.info);
	int rc = EXIT_IO;
	if (bases && d.base && d.name && d.info)
		rc = pack_cmd(argc, argv, bases, &d);
	else
		cli_error("out of memory");
	deltas_free(&d);
	free(bases);
	return rc;
}
