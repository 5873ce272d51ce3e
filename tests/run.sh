#!/bin/sh
# tests/run.sh - run every test and close with one line "N passed, N failed".
#
# Unit tests (cmocka) and end-to-end tests (bats) both report TAP; this
# script counts "ok" and "not ok" lines and exits non-zero on any failure.
# B is the build directory (default build).
set -u
B=${B:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
export SAN_FLAGS="${SAN_FLAGS:-}"
export STAGER="$top/$B/stager" GENDATA="$top/$B/gendata" RUNSTAT="$top/$B/runstat"
export SHAREDFS="$top/$B/sharedfs" FUZZ_DIR="$top/$B/fuzz" CORPUS="$top/../shared/corpus"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0

run() { # name, command...
	name=$1
	shift
	echo "# $name"
	"$@" >"$log.out" 2>&1
	rc=$?
	cat "$log.out"
	cat "$log.out" >>"$log"
	# a crash or non-zero exit without a TAP failure line still fails
	if [ $rc -ne 0 ] && ! grep -q '^not ok' "$log.out"; then
		echo "not ok - $name exited with status $rc" | tee -a "$log"
	fi
	[ $rc -eq 0 ] || status=1
	rm -f "$log.out"
}

for t in "$B"/tests/test_*; do
	[ -x "$t" ] && run "$(basename "$t")" "$t"
done
run fuzz-replay sh tests/fuzz/replay.sh
# the benchmark harness works (asserts nothing about speed)
bench_quick() {
	echo "1..1"
	if bash bench/run.sh --quick >"$log.bench" 2>&1; then
		echo "ok 1 - bench/run.sh --quick"
	else
		cat "$log.bench"
		echo "not ok 1 - bench/run.sh --quick"
	fi
	rm -f "$log.bench"
}
run bench-quick bench_quick
for f in tests/e2e/*.bats; do
	run "$(basename "$f")" bats --tap "$f"
done

passed=$(grep -c '^ok ' "$log")
failed=$(grep -c '^not ok' "$log")
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ $status -eq 0 ]
