/*
 * cmd_ls.c - stager ls PACK [--long] [--json]: the manifest, from the
 * trailer alone.
 */
#include "cli.h"

#include <time.h>

enum { OPT_JSON = OPT_FIRST_LOCAL };

static const char *type_name(stg_type t)
{
	switch (t) {
	case STG_FILE: return "file";
	case STG_DIR: return "dir";
	case STG_SYMLINK: return "symlink";
	case STG_HARDLINK: return "hardlink";
	}
	return "unknown";
}

static void mode_string(const stg_entry *e, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	out[0] = e->type == STG_DIR        ? 'd'
	         : e->type == STG_SYMLINK  ? 'l'
	         : e->type == STG_HARDLINK ? 'h'
	                                   : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (e->mode & (0400u >> i)) ? rwx[i] : '-';
	if (e->mode & 01000)
		out[9] = (e->mode & 1) ? 't' : 'T';
	out[10] = '\0';
}

static void print_json(const stg_pack *pack, int lng)
{
	stg_pack_info info;
	stg_pack_get_info(pack, &info);
	printf("{\"digest\":");
	json_hex(stdout, info.digest, STG_DIGEST_LEN);
	printf(",\"format\":%u,\"pack_size\":%llu,\"content_size\":%llu,\"tar_size\":%llu,"
	       "\"files\":%llu,\"dirs\":%llu,\"symlinks\":%llu,\"hardlinks\":%llu,"
	       "\"frames\":%llu,\"deltas\":[",
	       info.format_version, (unsigned long long)info.pack_size,
	       (unsigned long long)info.content_size, (unsigned long long)info.tar_size,
	       (unsigned long long)info.files, (unsigned long long)info.dirs,
	       (unsigned long long)info.symlinks, (unsigned long long)info.hardlinks,
	       (unsigned long long)info.frames);
	for (size_t i = 0; i < info.deltas; i++) {
		uint8_t base[STG_DIGEST_LEN];
		const char *name;
		stg_pack_delta(pack, i, base, &name);
		printf("%s{\"base\":", i ? "," : "");
		json_hex(stdout, base, STG_DIGEST_LEN);
		printf(",\"file\":");
		json_str(stdout, name);
		printf("}");
	}
	printf("]");
	if (lng) {
		printf(",\"frame_table\":[");
		for (size_t i = 0; i < info.frames; i++) {
			uint64_t off, size, toff, tsize;
			stg_pack_frame(pack, i, &off, &size, &toff, &tsize);
			printf("%s{\"offset\":%llu,\"size\":%llu,\"tar_offset\":%llu,\"tar_size\":%"
			       "llu}",
			       i ? "," : "", (unsigned long long)off, (unsigned long long)size,
			       (unsigned long long)toff, (unsigned long long)tsize);
		}
		printf("]");
	}
	printf(",\"entries\":[");
	size_t n = stg_pack_count(pack);
	for (size_t i = 0; i < n; i++) {
		stg_entry e;
		stg_pack_entry(pack, i, &e);
		printf("%s\n{\"path\":", i ? "," : "");
		json_str(stdout, e.path);
		printf(",\"type\":\"%s\",\"size\":%llu,\"mode\":\"%04o\",\"mtime\":%lld.%09u",
		       type_name(e.type), (unsigned long long)e.size, e.mode, (long long)e.mtime,
		       e.mtime_nsec);
		if (e.link) {
			printf(",\"link\":");
			json_str(stdout, e.link);
		}
		if (e.type == STG_FILE) {
			printf(",\"xxh3\":");
			json_hex(stdout, e.xxh3, 16);
		}
		printf("}");
	}
	printf("]}\n");
}

int cmd_ls(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"long", no_argument, NULL, 'l'},
	        {"json", no_argument, NULL, OPT_JSON},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int lng = 0, json = 0, c;
	while ((c = getopt_long(argc, argv, "lhqv", lo, NULL)) != -1) {
		int rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case 'l': lng = 1; break;
		case OPT_JSON: json = 1; break;
		default: return cli_usage("unexpected option");
		}
	}
	if (argc - optind != 1)
		return cli_usage(argc - optind < 1 ? "which pack? stager ls PACK"
		                                   : "too many arguments");
	int rc = cli_check_globals();
	if (rc)
		return rc;
	stg_ctx *ctx = cli_ctx();
	stg_pack *pack = NULL;
	stg_err err = stg_pack_open(ctx, argv[optind], &pack);
	if (err) {
		rc = cli_fail(ctx, err);
		cli_ctx_done(ctx);
		return rc;
	}
	if (json) {
		print_json(pack, lng);
	} else {
		size_t n = stg_pack_count(pack);
		for (size_t i = 0; i < n; i++) {
			stg_entry e;
			stg_pack_entry(pack, i, &e);
			const char *slash = e.type == STG_DIR ? "/" : "";
			if (!lng) {
				cli_put_name(stdout, e.path);
				printf("%s\n", slash);
				continue;
			}
			char mode[11], when[32];
			mode_string(&e, mode);
			time_t t = (time_t)e.mtime;
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
			printf("%s %12llu %s ", mode, (unsigned long long)e.size, when);
			cli_put_name(stdout, e.path);
			fputs(slash, stdout);
			if (e.type == STG_SYMLINK || e.type == STG_HARDLINK) {
				fputs(e.type == STG_SYMLINK ? " -> " : " link to ", stdout);
				cli_put_name(stdout, e.link);
			}
			putchar('\n');
		}
	}
	stg_pack_close(pack);
	cli_ctx_done(ctx);
	if (fflush(stdout)) {
		cli_error("cannot write the listing");
		return EXIT_IO;
	}
	return EXIT_OK;
}
