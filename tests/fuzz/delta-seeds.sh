#!/bin/sh
# Record the seeds of the delta fuzz target (tests/fuzz/corpus/delta/): the
# fixture's real delta, and cut and damaged copies of it.
# Usage: tests/fuzz/delta-seeds.sh REPLAY_DELTA (build/fuzz/replay_delta)
set -eu
out=$(cd "$(dirname "$0")" && pwd)/corpus/delta
mkdir -p "$out"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
: >"$T/empty"
FUZZ_DELTA_SEED="$out/real" "$1" "$T/empty" >/dev/null
size=$(stat -c %s "$out/real")
head -c 128 "$out/real" >"$out/header-only"
head -c $((size / 2)) "$out/real" >"$out/half"
cp "$out/real" "$out/flipped"
printf '\377' | dd of="$out/flipped" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
# the real body, decoded, for the inputs that start with "BODY"
{
	printf 'BODY'
	dd if="$out/real" bs=1 skip=80 count=16 2>/dev/null
	tail -c +129 "$out/real" | zstd -dq
} >"$out/body-real"
