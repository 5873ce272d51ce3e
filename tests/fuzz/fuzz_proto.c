/*
 * fuzz_proto.c - libFuzzer target for what serve reads from a client (and
 * push and pull from a server): frames, every message decoder, librsync
 * signatures and deltas in DATA and SIG frames, and then the receiver
 * itself building a tree from the stream in a temporary directory.  Built
 * by `make fuzz` with clang; replayed over tests/fuzz/corpus/proto by
 * `make test` (replay.c).  Seeds are recorded client streams.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a directory per input, removed after it (libFuzzer may end the
	 * process without running atexit handlers) */
	char dir[4096];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/stager-fuzz-proto.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return 0;
	stg_ctx *ctx = stg_ctx_new();
	if (ctx)
		stg__proto_replay(ctx, data, size, dir);
	stg_ctx_free(ctx);
	rmdir(dir);
	return 0;
}
