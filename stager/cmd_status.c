/*
 * cmd_status.c - stager status [PACK]... [--json]: the cache, its pins, the
 * space and every effective setting with its origin; or, for packs, whether
 * this node caches them and which older versions they have deltas from.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { OPT_JSON = OPT_FIRST_LOCAL };

/* The notes in the user's home of results kept on other nodes (this
 * node's are in kept/): how a login node knows where they are. */
static size_t other_notes(stg_kept_note **v)
{
	stg_ctx *ctx = stg_ctx_new();
	size_t n = 0;
	if (!ctx || stg_kept_notes_elsewhere(ctx, NULL, v, &n))
		*v = NULL, n = 0;
	stg_ctx_free(ctx);
	return n;
}

static void print_notes_text(void)
{
	stg_kept_note *v;
	size_t n = other_notes(&v);
	if (n)
		printf("\nkept results on other nodes (from ~/.local/state/stager/kept)\n");
	for (size_t i = 0; i < n; i++) {
		char a[16];
		printf("  %s: job %s, %s for %s in %s: `srun -w %s -N1 -n1 stager collect "
		       "--kept`\n",
		       v[i].node, v[i].job, stg_format_size(v[i].bytes, a, sizeof a), v[i].dest,
		       v[i].path, v[i].node);
	}
	stg_kept_notes_free(v, n);
}

/* (declared in cli.h: collect --kept --json prints the same) */
void cli_kept_notes_json(const stg_kept_note *v, size_t n)
{
	printf(",\"kept_elsewhere\":[");
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"node\":", i ? "," : "");
		json_str(stdout, v[i].node);
		printf(",\"job\":");
		json_str(stdout, v[i].job);
		printf(",\"path\":");
		json_str(stdout, v[i].path);
		printf(",\"dest\":");
		json_str(stdout, v[i].dest);
		printf(",\"bytes\":%llu,\"since\":%lld}", (unsigned long long)v[i].bytes,
		       (long long)v[i].since);
	}
	printf("]");
}

static void print_notes_json(void)
{
	stg_kept_note *v;
	size_t n = other_notes(&v);
	cli_kept_notes_json(v, n);
	stg_kept_notes_free(v, n);
}

/* Results that finished jobs could not collect (kept/), in text. */
static void print_kept_text(const stg_kept *k, size_t n)
{
	print_notes_text();
	if (!n)
		return;
	printf("\nkept results (jobs that ended before their results were collected; "
	       "`stager collect --kept` sends them)\n");
	for (size_t i = 0; i < n; i++) {
		char when[32];
		time_t t = (time_t)k[i].since;
		struct tm tm;
		localtime_r(&t, &tm);
		strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
		printf("  %s  kept %s, for %s\n", k[i].path, when,
		       k[i].dest ? k[i].dest : "(DEST not known)");
	}
}

static void print_kept_json(const stg_kept *k, size_t n)
{
	print_notes_json();
	printf(",\"kept\":[");
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"path\":", i ? "," : "");
		json_str(stdout, k[i].path);
		printf(",\"dest\":");
		if (k[i].dest)
			json_str(stdout, k[i].dest);
		else
			printf("null");
		printf(",\"since\":%lld}", (long long)k[i].since);
	}
	printf("]");
}

/* What `stager status` shows of a node. */
typedef struct status_view {
	const stg_cache_info *in;
	const stg_config *cfg;
	const stg_kept *kept;
	size_t nk;
	const stg_holder *holders;
	size_t nh;
	const stg_mount_info *mounts;
	size_t nm;
} status_view;

static void when_text(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!t || !localtime_r(&tt, &tm))
		snprintf(buf, len, "?");
	else
		strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static void print_holders_text(const stg_holder *h, size_t n)
{
	if (!n)
		return;
	printf("\nshared-FS slots in use\n");
	for (size_t i = 0; i < n; i++) {
		char since[32];
		when_text(h[i].since, since, sizeof since);
		printf("  %-7s %-3u %s%s%s pid %d (%s) since %s\n", h[i].kind, h[i].index,
		       h[i].user[0] ? h[i].user : "unknown", h[i].host[0] ? "@" : "", h[i].host,
		       h[i].pid, h[i].what[0] ? h[i].what : "?", since);
	}
}

static void print_holders_json(const stg_holder *h, size_t n)
{
	printf(",\"slots\":[");
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"kind\":\"%s\",\"index\":%u,\"pid\":%d,\"uid\":%u,\"user\":",
		       i ? "," : "", h[i].kind, h[i].index, h[i].pid, h[i].uid);
		json_str(stdout, h[i].user);
		printf(",\"host\":");
		json_str(stdout, h[i].host);
		printf(",\"what\":");
		json_str(stdout, h[i].what);
		printf(",\"since\":%lld}", (long long)h[i].since);
	}
	printf("]");
}

/* Mounts made by stager mount, and the servers of envs (stager env, run
 * --env: one line for each job's), live or left by a process that died;
 * the Slurm job of each made in one, and whether it is over. */
static void print_mounts_text(const stg_mount_info *m, size_t n)
{
	if (n)
		printf("\nmounts\n");
	for (size_t i = 0; i < n; i++) {
		char more[48] = "";
		if (m[i].n_packs > 1)
			snprintf(more, sizeof more, " and %zu more packs", m[i].n_packs - 1);
		/* an env, served at its own path, by a server of each job using it */
		printf("  %s  %s%s%s (%s)\n", m[i].mountpoint, m[i].env ? "env from " : "",
		       m[i].pack, more,
		       m[i].alive
		               ? "served"
		               : "its process died: `stager umount` or `stager clean` removes it");
		if (m[i].job)
			printf("    job %s (%s)\n", m[i].job,
			       m[i].job_over > 0    ? "over: `stager clean` removes the mount"
			       : m[i].job_over == 0 ? "running"
			                            : "state unknown: Slurm did not answer");
	}
}

static void print_mounts_json(const stg_mount_info *m, size_t n)
{
	printf(",\"mounts\":[");
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"mountpoint\":", i ? "," : "");
		json_str(stdout, m[i].mountpoint);
		printf(",\"pack\":");
		json_str(stdout, m[i].pack);
		printf(",\"packs\":%zu,\"env\":%s,\"digest\":\"%s\",\"owner\":", m[i].n_packs,
		       m[i].env ? "true" : "false", m[i].digest);
		json_str(stdout, m[i].owner);
		printf(",\"alive\":%s,\"mounted\":%s,\"job\":", m[i].alive ? "true" : "false",
		       m[i].mounted ? "true" : "false");
		if (m[i].job)
			json_str(stdout, m[i].job);
		else
			printf("null");
		printf(",\"job_over\":%s}", m[i].job_over > 0    ? "true"
		                            : m[i].job_over == 0 ? "false"
		                                                 : "null");
	}
	printf("]");
}

static void print_text(const status_view *sv)
{
	const stg_cache_info *in = sv->in;
	const stg_config *cfg = sv->cfg;
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
	print_kept_text(sv->kept, sv->nk);
	print_holders_text(sv->holders, sv->nh);
	print_mounts_text(sv->mounts, sv->nm);
	printf("\nsettings\n");
	for (size_t i = 0; i < stg_config_count(); i++) {
		const char *origin;
		const char *k = stg_config_key(i, NULL);
		const char *v = stg_config_get(cfg, k, &origin);
		printf("  %-21s %-12s (%s)\n", k, *v ? v : "-", origin);
	}
}

static void print_json(const status_view *sv)
{
	const stg_cache_info *in = sv->in;
	const stg_config *cfg = sv->cfg;
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
	printf("]");
	print_kept_json(sv->kept, sv->nk);
	print_holders_json(sv->holders, sv->nh);
	print_mounts_json(sv->mounts, sv->nm);
	printf(",\"settings\":{");
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

/* One delta of a pack: where its file is and whether a stage here can use it. */
typedef struct delta_state {
	char hex[STG_DIGEST_HEXLEN + 1];
	const char *name;
	char path[4096];
	int base_cached;
	uint64_t size;
	const char *problem; /* NULL: usable */
	char why[256];
} delta_state;

static void delta_look(stg_ctx *ctx, stg_cache *cache, const char *pack, const stg_pack *p,
                       size_t i, const uint8_t digest[STG_DIGEST_LEN], delta_state *d)
{
	uint8_t base[STG_DIGEST_LEN], b2[STG_DIGEST_LEN], t2[STG_DIGEST_LEN];
	stg_pack_delta(p, i, base, &d->name);
	stg_digest_hex(base, d->hex);
	d->base_cached = stg_stage_cached(cache, base, NULL);
	const char *slash = strrchr(pack, '/');
	snprintf(d->path, sizeof d->path, "%.*s%s", slash ? (int)(slash - pack + 1) : 0, pack,
	         d->name);
	d->size = 0;
	d->problem = NULL;
	int fd = open(d->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(d->why, sizeof d->why, "missing: %s", strerror(errno));
		d->problem = d->why;
		return;
	}
	if (stg_delta_read_header(ctx, fd, b2, t2, &d->size)) {
		snprintf(d->why, sizeof d->why, "%s", stg_errmsg(ctx));
		d->problem = d->why;
	} else if (memcmp(b2, base, STG_DIGEST_LEN) || memcmp(t2, digest, STG_DIGEST_LEN)) {
		d->problem = "for another pair of versions";
	}
	close(fd);
}

/* status PACK...: per pack, its digest, whether it is cached here, its
 * deltas, and what a stage here would read. */
static int pack_status(stg_ctx *ctx, stg_cache *cache, char **packs, int n, int json)
{
	int rc = EXIT_OK;
	if (json)
		printf("{\"packs\":[");
	for (int k = 0; k < n; k++) {
		stg_pack *p;
		stg_err err = stg_pack_open(ctx, packs[k], &p);
		if (err) {
			rc = cli_fail(ctx, err);
			continue;
		}
		stg_pack_info info;
		stg_pack_get_info(p, &info);
		char hex[STG_DIGEST_HEXLEN + 1], a[16], b[16];
		stg_digest_hex(info.digest, hex);
		int cached = stg_stage_cached(cache, info.digest, NULL);
		/* what a stage here reads: nothing, the pack's end (one read of
		 * at least 1 MiB, for the trailer) and a usable delta, or the pack */
		uint64_t reads = cached ? 0 : info.pack_size;
		uint64_t tail = info.pack_size - info.data_size;
		if (tail < (1u << 20))
			tail = info.pack_size < (1u << 20) ? info.pack_size : (1u << 20);
		char via[STG_DIGEST_HEXLEN + 1] = "";
		if (json) {
			printf("%s{\"pack\":", k ? "," : "");
			json_str(stdout, packs[k]);
			printf(",\"digest\":\"%s\",\"pack_size\":%llu,\"cached\":%s,\"deltas\":[",
			       hex, (unsigned long long)info.pack_size, cached ? "true" : "false");
		} else {
			printf("%s%s\n  digest       %s\n  size         %s\n  cached here  %s\n",
			       k ? "\n" : "", packs[k], hex,
			       stg_format_size(info.pack_size, a, sizeof a), cached ? "yes" : "no");
			printf("  deltas       %llu\n", (unsigned long long)info.deltas);
		}
		for (size_t i = 0; i < info.deltas; i++) {
			delta_state d;
			delta_look(ctx, cache, packs[k], p, i, info.digest, &d);
			if (!cached && !via[0] && d.base_cached && !d.problem) {
				reads = tail + d.size;
				memcpy(via, d.hex, sizeof via);
			}
			if (json) {
				printf("%s{\"base\":\"%s\",\"file\":", i ? "," : "", d.hex);
				json_str(stdout, d.name);
				printf(",\"bytes\":%llu,\"base_cached\":%s,\"usable\":%s,"
				       "\"problem\":",
				       (unsigned long long)d.size, d.base_cached ? "true" : "false",
				       d.problem ? "false" : "true");
				if (d.problem)
					json_str(stdout, d.problem);
				else
					printf("null");
				printf("}");
			} else {
				printf("    from %.12s  %s  %s  base %s%s%s\n", d.hex, d.name,
				       d.problem ? "-" : stg_format_size(d.size, a, sizeof a),
				       d.base_cached ? "cached here" : "not cached here",
				       d.problem ? "; " : "", d.problem ? d.problem : "");
			}
		}
		if (json) {
			printf("],\"stage_reads\":%llu,\"stage_via\":", (unsigned long long)reads);
			if (via[0])
				printf("\"%s\"}", via);
			else
				printf("%s}", cached ? "\"cache\"" : "\"pack\"");
		} else if (cached) {
			printf("  a stage here reads nothing (cached)\n");
		} else {
			printf("  a stage here reads about %s (%s%.12s)\n",
			       stg_format_size(reads, b, sizeof b),
			       via[0] ? "the pack's trailer and the delta from " : "the whole pack",
			       via);
		}
		stg_pack_close(p);
	}
	if (json)
		printf("]}\n");
	return rc;
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
	if ((rc = cli_check_globals()))
		return rc;
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (cache && optind < argc) {
		rc = pack_status(ctx, cache, argv + optind, argc - optind, json);
		stg_cache_close(cache);
	} else if (cache) {
		stg_cache_info *info = NULL;
		stg_kept *kept = NULL;
		stg_holder *holders = NULL;
		stg_mount_info *mounts = NULL;
		size_t nk = 0, nh = 0, nm = 0;
		stg_err err = stg_cache_status(ctx, cache, &info);
		if (!err)
			err = stg_kept_list(ctx, cache, &kept, &nk);
		if (!err)
			err = stg_slot_holders(ctx, cache, &holders, &nh);
		if (!err)
			err = stg_mount_list(ctx, cache, &mounts, &nm);
		if (err) {
			rc = cli_fail(ctx, err);
		} else {
			status_view sv = {info, cfg, kept, nk, holders, nh, mounts, nm};
			if (json)
				print_json(&sv);
			else
				print_text(&sv);
			rc = EXIT_OK;
		}
		if (info)
			stg_cache_info_free(info);
		stg_kept_free(kept, nk);
		free(holders);
		stg_mount_list_free(mounts, nm);
		stg_cache_close(cache);
	}
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return rc;
}
