/*
 * fuzz_trailer.c - libFuzzer target for everything a pack's reader parses:
 * the footer, the trailer body and manifest (stg_pack_open_mem), and then
 * the frames themselves (stg_verify).  Built by `make fuzz` with clang;
 * replayed over tests/fuzz/corpus by `make test` (replay.c).
 */
#include <stddef.h>
#include <stdint.h>

#include "libstage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stg_ctx *ctx = stg_ctx_new();
	if (!ctx)
		return 0;
	stg_set_threads(ctx, 1);
	stg_pack *p = NULL;
	if (stg_pack_open_mem(ctx, data, size, &p) == STG_OK) {
		stg_pack_info info;
		stg_pack_get_info(p, &info);
		size_t n = stg_pack_count(p);
		for (size_t i = 0; i < n; i++) {
			stg_entry e;
			stg_pack_entry(p, i, &e);
		}
		stg_verify(ctx, p);
		stg_pack_close(p);
	}
	stg_ctx_free(ctx);
	return 0;
}
