/*
 * fuzz_delta.c - libFuzzer target for the delta reader: the input is a
 * delta file, applied (stg__delta_apply) to a fixed base and target built
 * once per process in a temporary directory (a tree with a changed, a new,
 * a renamed, a removed, an empty, a hardlinked file and a symlink), each
 * input building into a directory of its own.  Built by `make fuzz` with
 * clang; replayed over tests/fuzz/corpus/delta by `make test` (replay.c).
 * An input that starts with "BODY" is a decoded body instead, preceded by
 * n_records and n_removed (8 bytes each): the target wraps it in a valid
 * header and zstd frame, so that mutations reach the record parser rather
 * than stop at the checksums.  With FUZZ_DELTA_SEED=FILE set, it first
 * writes the fixture's real delta there (tests/fuzz/delta-seeds.sh records
 * the seeds so).
 */
#include <xxhash.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "delta.h"
#include "fsutil.h"
#include "manifest.h"

#include <zstd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fixture {
	bool ready, failed;
	char dir[4096];
	stg_pack *target;
	uint8_t base[STG_DIGEST_LEN];
	stg_manifest man;
	int basefd;
} fx;

static void put(const char *dir, const char *name, const char *text, size_t len)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		return;
	size_t tl = strlen(text);
	for (size_t i = 0; i < len; i++)
		fputc(text[i % tl] + (int)(i * 7 / 1000 % 3), f);
	fclose(f);
	struct timespec ts[2] = {{1600000000, 0}, {1600000000, 0}};
	utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
	chmod(path, 0644);
}

static void make_tree(const char *dir, int version)
{
	char p[4200];
	mkdir(dir, 0755);
	snprintf(p, sizeof p, "%s/sub", dir);
	mkdir(p, 0755);
	put(dir, "sub/same", "unchanged content ", 5000);
	put(dir, "changed", version ? "new version text " : "old version text ", 20000);
	put(dir, version ? "renamed" : "original", "moved around ", 3000);
	put(dir, "empty", "", 0);
	if (version)
		put(dir, "added", "brand new file ", 4000);
	else
		put(dir, "removed", "going away ", 2000);
	snprintf(p, sizeof p, "%s/link", dir);
	symlink("sub/same", p);
	char q[4200];
	snprintf(p, sizeof p, "%s/sub/same", dir);
	snprintf(q, sizeof q, "%s/hard", dir);
	link(p, q);
	/* fixed times: the same packs, so the same digests, in every run */
	struct timespec ts[2] = {{1600000000, 0}, {1600000000, 0}};
	snprintf(p, sizeof p, "%s/sub", dir);
	utimensat(AT_FDCWD, p, ts, 0);
	snprintf(p, sizeof p, "%s/link", dir);
	utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
}

static void cleanup(void)
{
	stg_pack_close(fx.target);
	stg__manifest_free(&fx.man);
	if (fx.basefd >= 0)
		close(fx.basefd);
	char cmd[8400];
	snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", fx.dir, fx.dir);
	if (fx.dir[0] && system(cmd)) {
		/* best effort */
	}
}

static bool setup(stg_ctx *ctx)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(fx.dir, sizeof fx.dir, "%s/stager-fuzz-delta.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(fx.dir))
		return false;
	atexit(cleanup);
	umask(022);
	char v1[4200], v2[4200], p1[4200], p2[4200], ent[4200];
	snprintf(v1, sizeof v1, "%s/v1", fx.dir);
	snprintf(v2, sizeof v2, "%s/v2", fx.dir);
	snprintf(p1, sizeof p1, "%s/v1.tar.zst", fx.dir);
	snprintf(p2, sizeof p2, "%s/v2.tar.zst", fx.dir);
	snprintf(ent, sizeof ent, "%s/entry", fx.dir);
	make_tree(v1, 0);
	make_tree(v2, 1);
	stg_pack *base = NULL;
	fx.basefd = -1;
	stg_unpack_opts uo;
	stg_unpack_opts_init(&uo);
	uo.read_only = 1;
	if (stg_pack_dir(ctx, v1, p1, NULL, NULL) || stg_pack_dir(ctx, v2, p2, NULL, NULL) ||
	    stg_pack_open(ctx, p1, &base) || stg_pack_open(ctx, p2, &fx.target) ||
	    stg_unpack(ctx, base, ent, &uo, NULL))
		return false;
	memcpy(fx.base, base->t.digest, STG_DIGEST_LEN);
	/* the base entry's manifest, as the cache keeps it */
	int dfd = open(fx.dir, O_RDONLY | O_DIRECTORY);
	char mpath[4200];
	snprintf(mpath, sizeof mpath, "%s/manifest", fx.dir);
	FILE *m = NULL;
	bool ok = dfd >= 0 && stg__manifest_write(dfd, base, NULL) == 0 &&
	          (m = fopen(mpath, "r")) && stg__manifest_load(m, &fx.man) == 0;
	if (m)
		fclose(m);
	if (dfd >= 0)
		close(dfd);
	const char *seed_path = getenv("FUZZ_DELTA_SEED");
	if (ok && seed_path) {
		int fd = open(seed_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		ok = fd >= 0 && stg_delta_write(ctx, base, fx.target, v2, fd, NULL) == STG_OK;
		if (fd >= 0)
			close(fd);
	}
	stg_pack_close(base);
	fx.basefd = open(ent, O_RDONLY | O_DIRECTORY);
	return ok && fx.basefd >= 0;
}

/* A delta file around a decoded body (FORMAT.md); malloc'ed. */
static uint8_t *wrap_body(const uint8_t *data, size_t size, size_t *len)
{
	if (size < 20)
		return NULL;
	size_t cap = ZSTD_compressBound(size - 20);
	uint8_t *out = malloc(128 + cap);
	if (!out)
		return NULL;
	size_t z = ZSTD_compress(out + 128, cap, data + 20, size - 20, 1);
	if (ZSTD_isError(z)) {
		free(out);
		return NULL;
	}
	memset(out, 0, 128);
	memcpy(out, "STGDELTA", 8);
	stg__put32(out + 8, 1);
	memcpy(out + 16, fx.base, STG_DIGEST_LEN);
	memcpy(out + 48, fx.target->t.digest, STG_DIGEST_LEN);
	memcpy(out + 80, data + 4, 16); /* n_records, n_removed */
	stg__put64(out + 96, z);
	stg__put64(out + 104, XXH3_64bits(out + 128, z));
	stg__put64(out + 120, XXH3_64bits(out, 120));
	*len = 128 + z;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stg_ctx *ctx = stg_ctx_new();
	if (!ctx)
		return 0;
	stg_set_threads(ctx, 1);
	if (!fx.ready && !fx.failed) {
		fx.ready = setup(ctx);
		fx.failed = !fx.ready;
		if (fx.failed) {
			fprintf(stderr, "fuzz_delta: cannot set up the fixture: %s\n",
			        stg_errmsg(ctx));
			abort();
		}
	}
	if (fx.ready) {
		char out[4200];
		snprintf(out, sizeof out, "%s/out.XXXXXX", fx.dir);
		if (mkdtemp(out)) {
			int ofd = open(out, O_RDONLY | O_DIRECTORY);
			stg_delta_src src = {.fd = -1, .mem = data, .len = size};
			uint8_t *wrapped = NULL;
			if (size >= 4 && !memcmp(data, "BODY", 4) &&
			    (wrapped = wrap_body(data, size, &src.len)))
				src.mem = wrapped;
			stg_delta_stats st;
			if (ofd >= 0) {
				stg_err err = stg__delta_apply(ctx, &src, fx.target, fx.base,
				                               &fx.man, fx.basefd, ofd, &st);
				if (getenv("FUZZ_DELTA_VERBOSE"))
					fprintf(stderr, "fuzz_delta: %s\n",
					        err ? stg_errmsg(ctx) : "applied");
				close(ofd);
			}
			stg__rmtree(out);
			free(wrapped);
		}
	}
	stg_ctx_free(ctx);
	return 0;
}
