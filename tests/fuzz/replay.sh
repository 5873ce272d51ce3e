#!/bin/sh
# Replay the fuzz corpus through the target (built without libFuzzer).
set -u
: "${FUZZ_REPLAY:?}"
dir=$(dirname "$0")/corpus
exec "$FUZZ_REPLAY" "$dir"/*
