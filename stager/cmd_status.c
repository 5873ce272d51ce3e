/*
 * cmd_status.c - stager status [--json]: the cache, its pins, the space and
 * every effective setting with its origin.
 */
#include "cli.h"

#include <time.h>

enum { OPT_JSON = OPT_FIRST_LOCAL };

static void print_text(const stg_cache_info *in, const stg_config *cfg)
{
	char a[16], b[16], d[16];
	printf("scratch root  %s\n", in->root);
	printf("filesystem    %s, %s free, %llu inodes free\n",
	       stg_format_size(in->fs_size, a, sizeof a), stg_format_size(in->fs_free, b, sizeof b),
	       (unsigned long long)in->fs_files_free);
	printf("cache         %s in %zu entries; cache_max %s, min_free %s\n",
	       stg_format_size(in->cache_bytes, a, sizeof a), in->n_entries,
	       in->cache_max ? stg_format_size(in->cache_max, b, sizeof b) : "none",
	       stg_format_size(in->min_free, d, sizeof d));
	if (in->n_entries)
		printf("\n%-16s %-8s %10s %8s  %-16s  %s\n", "entry", "kind", "size", "files",
		       "last use", "source");
	for (size_t i = 0; i < in->n_entries; i++) {
		const stg_cache_entry *e = &in->entries[i];
		char when[32];
		time_t t = (time_t)e->last_use;
		struct tm tm;
		localtime_r(&t, &tm);
		strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
		printf("%-16.16s %-8s %10s %8llu  %-16s  %s\n", e->key, e->kind,
		       stg_format_size(e->size, a, sizeof a), (unsigned long long)e->files, when,
		       e->source);
		for (size_t j = 0; j < e->n_pins; j++)
			printf("  pinned by %s (%s)\n", e->pins[j].owner,
			       e->pins[j].alive ? "alive" : "gone: stager clean removes the pin");
	}
	printf("\nsettings\n");
	for (size_t i = 0; i < stg_config_count(); i++) {
		const char *origin;
		const char *k = stg_config_key(i, NULL);
		const char *v = stg_config_get(cfg, k, &origin);
		printf("  %-21s %-12s (%s)\n", k, *v ? v : "-", origin);
	}
}

static void print_json(const stg_cache_info *in, const stg_config *cfg)
{
	printf("{\"scratch_root\":");
	json_str(stdout, in->root);
	printf(",\"fs_size\":%llu,\"fs_free\":%llu,\"fs_inodes_free\":%llu,\"cache_bytes\":%llu,"
	       "\"cache_max\":%llu,\"min_free\":%llu,\"entries\":[",
	       (unsigned long long)in->fs_size, (unsigned long long)in->fs_free,
	       (unsigned long long)in->fs_files_free, (unsigned long long)in->cache_bytes,
	       (unsigned long long)in->cache_max, (unsigned long long)in->min_free);
	for (size_t i = 0; i < in->n_entries; i++) {
		const stg_cache_entry *e = &in->entries[i];
		printf("%s{\"key\":\"%s\",\"kind\":\"%s\",\"source\":", i ? "," : "", e->key,
		       e->kind);
		json_str(stdout, e->source);
		printf(",\"size\":%llu,\"files\":%llu,\"last_use\":%lld,\"pins\":[",
		       (unsigned long long)e->size, (unsigned long long)e->files,
		       (long long)e->last_use);
		for (size_t j = 0; j < e->n_pins; j++) {
			printf("%s{\"owner\":", j ? "," : "");
			json_str(stdout, e->pins[j].owner);
			printf(",\"alive\":%s}", e->pins[j].alive ? "true" : "false");
		}
		printf("]}");
	}
	printf("],\"settings\":{");
	for (size_t i = 0; i < stg_config_count(); i++) {
		const char *origin;
		const char *k = stg_config_key(i, NULL);
		const char *v = stg_config_get(cfg, k, &origin);
		printf("%s\"%s\":{\"value\":", i ? "," : "", k);
		json_str(stdout, v);
		printf(",\"from\":");
		json_str(stdout, origin);
		printf("}");
	}
	printf("}}\n");
}

int cmd_status(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"json", no_argument, NULL, OPT_JSON},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int json = 0, c, rc;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		if (c == OPT_JSON)
			json = 1;
		else
			return cli_usage("unexpected option");
	}
	if (optind != argc)
		return cli_usage("stager status takes no arguments");
	if ((rc = cli_check_globals()))
		return rc;
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (cache) {
		stg_cache_info *info;
		stg_err err = stg_cache_status(ctx, cache, &info);
		if (err) {
			rc = cli_fail(ctx, err);
		} else {
			if (json)
				print_json(info, cfg);
			else
				print_text(info, cfg);
			stg_cache_info_free(info);
			rc = EXIT_OK;
		}
		stg_cache_close(cache);
	}
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return rc;
}
