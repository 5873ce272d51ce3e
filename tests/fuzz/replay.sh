#!/bin/sh
# Replay every fuzz target's corpus (tests/fuzz/corpus/NAME/) through the
# target built without libFuzzer ($FUZZ_DIR/replay_NAME).
set -u
: "${FUZZ_DIR:?}"
top=$(dirname "$0")
status=0
for c in "$top"/corpus/*/; do
	name=$(basename "$c")
	"$FUZZ_DIR/replay_$name" "$c"* || status=1
done
exit $status
