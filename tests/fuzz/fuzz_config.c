/*
 * fuzz_config.c - libFuzzer target for the configuration readers: the
 * input is parsed as a configuration file from memory
 * (stg_config_load_mem) and from a real file (stg_config_load_file, which
 * adds the open, type, size and read checks), the settings it left are read
 * back as stager reads them, and the input as one string is given to every
 * key as a value (what STAGER_<KEY> variables and flags go through) and to
 * the size and duration parsers.  Built by `make fuzz` with clang; replayed
 * over tests/fuzz/corpus/config by `make test` (replay.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One file per process, rewritten for each input. */
static const char *scratch_file(void)
{
	static char path[4096];
	if (!path[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(path, sizeof path, "%s/stager-fuzz-config.%d", tmp && *tmp ? tmp : "/tmp",
		         (int)getpid());
	}
	return path;
}

static void read_back(const stg_config *cfg)
{
	for (size_t i = 0; i < stg_config_count(); i++) {
		const char *origin, *k = stg_config_key(i, NULL);
		const char *v = stg_config_get(cfg, k, &origin);
		if (!v || !origin)
			abort();
		stg__config_bytes(cfg, k, (uint64_t)1 << 40);
		stg__config_count(cfg, k);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stg_ctx *ctx = stg_ctx_new();
	stg_config *cfg = stg_config_new();
	char *s = malloc(size + 1);
	if (!ctx || !cfg || !s)
		goto out;

	if (stg_config_load_mem(ctx, cfg, data, size, "fuzz") == STG_OK)
		read_back(cfg);
	else if (!*stg_errmsg(ctx))
		abort(); /* every error is explained */

	const char *path = scratch_file();
	FILE *f = fopen(path, "wb");
	if (f) {
		size_t w = fwrite(data, 1, size, f);
		if (fclose(f) == 0 && w == size) {
			stg_config *c2 = stg_config_new();
			if (c2 && stg_config_load_file(ctx, c2, path, 1) == STG_OK)
				read_back(c2);
			stg_config_free(c2);
		}
		unlink(path);
	}

	/* the input up to its first NUL as a value, as from the environment */
	memcpy(s, data, size);
	s[size] = '\0';
	for (size_t i = 0; i < stg_config_count(); i++)
		stg_config_set(ctx, cfg, stg_config_key(i, NULL), s, "fuzz");
	read_back(cfg);
	uint64_t n;
	stg_parse_size(s, &n);
	stg_parse_duration(s, &n);
out:
	free(s);
	stg_config_free(cfg);
	stg_ctx_free(ctx);
	return 0;
}
