#!/bin/bash
# tests/run.sh - run every test and close with one line "N passed, N failed".
#
# The unit tests (cmocka), the Python tests (tests/python), the fuzz corpus
# replay, the benchmark harness,
# scripts/check-layers (the library's floors, no cycle, the tool on the
# public API), the checks of the tests themselves (scripts/check-tests: no check that
# cannot fail; scripts/check-options: every option of --help tested) and
# each bats file are independent jobs, run TEST_JOBS at a time (default 4:
# most end-to-end tests wait on daemons, sleeps and I/O, not on the two
# cores).  Each job's TAP output is printed whole when it ends; the counts
# come from the TAP lines.  A skipped test is counted apart from the passed
# ones; under CI (CI=true) or with NO_SKIP=1 a skip fails the run, since
# CI's machine has everything a test needs.  Each job has a time limit
# (JOB_TIMEOUT seconds, default 900), so a hung test fails instead of
# hanging the run; bench-quick, which runs every benchmark harness (the
# shared-FS ones, push, delta, ...) one after the other, has twice that:
# beside another `make test` on a 2-core machine it took 907 s.  The ten
# slowest tests are listed at the end.
#
# B is the build directory (default build).  Arguments, if any, name the
# jobs to run (e.g. `tests/run.sh push.bats test_path`).
set -u
B=${B:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
export SAN_FLAGS="${SAN_FLAGS:-}"
export STAGER="$top/$B/stager" GENDATA="$top/$B/gendata" RUNSTAT="$top/$B/runstat"
export PACKBOMB="$top/$B/packbomb" SHAREDFS="$top/$B/sharedfs" FUZZ_DIR="$top/$B/fuzz" CORPUS="$top/../shared/corpus"
JOBS=${TEST_JOBS:-4}
JOB_TIMEOUT=${JOB_TIMEOUT:-900}
no_skip=${NO_SKIP:-}
[ "${CI:-}" = true ] && no_skip=${NO_SKIP:-1}

out=$(mktemp -d "${TMPDIR:-/tmp}/stager-tests.XXXXXX")
trap 'rm -rf "$out"' EXIT
export out

# Debian's python3 for the tests that import the module (tests/python,
# docs.bats, install.bats): under ASan, through a wrapper that puts the
# module's ASan runtime first in the process (and leaves Python's own
# allocations at exit alone)
PY3=/usr/bin/python3
case "$SAN_FLAGS" in
*address*)
	PY3=$out/python3
	# (libstdc++ too: ASan's __cxa_throw must find the real one, or the
	# first C++ exception torch throws and catches itself aborts)
	printf '#!/bin/sh\nLD_PRELOAD="%s %s" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" exec /usr/bin/python3 "$@"\n' \
		"$(${CC:-cc} -print-file-name=libasan.so)" "$(${CC:-cc} -print-file-name=libstdc++.so.6)" >"$PY3"
	chmod 755 "$PY3"
	;;
esac
export PY3

# the jobs, longest first (from the last run here, else a fixed guess), so
# the long ones do not start last
jobs=()
for t in "$B"/tests/test_*; do
	case "$t" in *.d) continue ;; esac
	[ -x "$t" ] && jobs+=("$(basename "$t")")
done
jobs+=(fuzz-replay bench-quick check-tests check-options check-layers python)
for f in tests/e2e/*.bats; do jobs+=("$(basename "$f")"); done
if [ $# -gt 0 ]; then jobs=("$@"); fi
hist="$top/$B/test-times"
guess() { # name: the seconds it took last time here, else a rough guess
	local s
	s=$(awk -v n="$1" '$1 == n { s = $2 } END { if (s != "") print s }' "$hist" 2>/dev/null)
	[ -n "$s" ] && { echo "$s"; return; }
	case "$1" in
	slurm.bats | realsite*.bats | jobs.bats | push*.bats) echo 100 ;;
	doctor-hooks.bats | multinode.bats | resume.bats | delta.bats | delta-fallback.bats | delta-base.bats | corpus.bats | bench-quick | python) echo 65 ;;
	*.bats | bench-quick) echo 30 ;;
	*) echo 5 ;;
	esac
}
ordered=$(for j in "${jobs[@]}"; do echo "$(guess "$j") $j"; done | sort -rn | awk '{ print $2 }')

# the processes under PID, a tree, "# "-prefixed
tree_of() {
	ps -eo pid=,ppid=,etimes=,args= | awk -v root="$1" '
		{ pid[NR] = $1; pp[NR] = $2; line[$1] = $0; kids[$2] = kids[$2] " " $1 }
		function walk(p, d,   n, k, i) {
			printf "#   %*s%s\n", 2 * d, "", substr(line[p], 1, 200)
			n = split(kids[p], k, " ")
			for (i = 1; i <= n; i++) walk(k[i], d + 1)
		}
		END { if (root in line) walk(root, 0) }'
}

run_job() { # name: run one job, print its output whole when it ends
	local name=$1 t0 t1 rc watch me=$BASHPID limit=$JOB_TIMEOUT
	[ "$name" = bench-quick ] && limit=$((2 * JOB_TIMEOUT))
	t0=$(date +%s.%N)
	# 5 s before its time limit, what the job still runs (pid, ppid,
	# seconds, command): where a hang is
	(
		trap 'kill $s 2>/dev/null; exit 0' TERM
		sleep $((limit - 5)) &
		s=$!
		wait $s
		echo "# still running 5 s before the time limit:"
		tree_of "$me"
	) >"$out/$name.hung" &
	watch=$!
	# the node-wide reader slots are the machine's: jobs running side by
	# side would take each other's (a test that needs them sets its own)
	export STAGER_SLOT_DIR=$out/slots.$name
	case "$name" in
	test_*) timeout -k 10 "$limit" "$B/tests/$name" ;;
	fuzz-replay) timeout -k 10 "$limit" sh tests/fuzz/replay.sh ;;
	python) # import stager, with Debian's python3 (tests/python/run.py)
		timeout -k 10 "$limit" env PYTHONPATH="$PWD/$B/python" PYTHONDONTWRITEBYTECODE=1 \
			"$PY3" tests/python/run.py
		;;
	bench-quick) # the benchmark harness works (asserts nothing about speed)
		echo "1..1"
		if timeout -k 10 "$limit" bash bench/run.sh --quick >"$out/$name.bench" 2>&1; then
			echo "ok 1 bench/run.sh --quick"
		else
			cat "$out/$name.bench"
			echo "not ok 1 bench/run.sh --quick"
		fi
		;;
	check-tests | check-options | check-layers) # the tests themselves (checks that can
		# fail, options tested) and the library's floors
		[ "$name" = check-layers ] && echo "1..2" || echo "1..1"
		case "$name" in
		check-options) arg=$B/stager ;;
		check-layers) arg=$B ;;
		*) arg= ;;
		esac
		# check-tests first checks itself: each weak line of its
		# fixtures flagged, no good one
		if { [ "$name" != check-tests ] || sh scripts/check-tests --self-test; } >"$out/$name.out" 2>&1 &&
			sh "scripts/$name" $arg >>"$out/$name.out" 2>&1; then
			echo "ok 1 scripts/$name"
		else
			sed 's/^/# /' "$out/$name.out"
			echo "not ok 1 scripts/$name"
		fi
		# the checker itself fails on a made-up cycle and upward include
		if [ "$name" = check-layers ]; then
			if sh scripts/check-layers --self-test >"$out/$name.self" 2>&1; then
				echo "ok 2 scripts/check-layers --self-test"
			else
				sed 's/^/# /' "$out/$name.self"
				echo "not ok 2 scripts/check-layers --self-test"
			fi
		fi
		;;
	*.bats) timeout -k 10 "$limit" bats --tap --timing "tests/e2e/$name" ;;
	*) echo "not ok 1 no such test job: $name" ;;
	esac >"$out/$name.tap" 2>&1 </dev/null
	rc=$?
	kill "$watch" 2>/dev/null
	wait "$watch" 2>/dev/null
	t1=$(date +%s.%N)
	# a crash, a time-out or a non-zero exit without a TAP failure line fails
	if [ $rc -ne 0 ] && ! grep -q '^not ok' "$out/$name.tap"; then
		[ $rc -eq 124 ] && { echo "# timed out after $limit s"; cat "$out/$name.hung"; } >>"$out/$name.tap"
		echo "not ok - $name exited with status $rc" >>"$out/$name.tap"
	fi
	awk -v a="$t0" -v b="$t1" -v n="$name" 'BEGIN { printf "%s %.1f\n", n, b - a }' >"$out/$name.time"
	{
		flock 9
		echo "# $name ($(cut -d' ' -f2 "$out/$name.time") s)"
		cat "$out/$name.tap"
	} 9>"$out/.lock"
}
export -f run_job tree_of
export B JOB_TIMEOUT

start=$(date +%s)
printf '%s\n' $ordered | xargs -P "$JOBS" -I{} bash -c 'run_job "$1"' _ {}
wall=$(($(date +%s) - start))

cat "$out"/*.tap >"$out/all" 2>/dev/null
# TAP: "ok N name # skip reason" is a skip, not a pass (cmocka writes a
# skipped test as "not ok N # SKIP": a skip, not a failure)
skipped=$(grep -c -i -E '^(not )?ok .*# skip' "$out/all")
passed=$(grep -c -i -E '^ok ' "$out/all")
passed=$((passed - $(grep -c -i -E '^ok .*# skip' "$out/all")))
failed=$(grep '^not ok' "$out/all" | grep -c -v -i '# skip')
# bats --timing ends each line with "in N ms"; unit tests are timed whole
cat "$out"/*.time >"$hist.new" 2>/dev/null && mv "$hist.new" "$hist"
echo
echo "# the ten slowest tests (and jobs):"
{
	for f in "$out"/*.bats.tap; do
		[ -f "$f" ] || continue
		sed -n "s/^\(not \)\{0,1\}ok [0-9]* \(.*\) in \([0-9]*\)ms$/\3 $(basename "$f" .tap): \2/p" "$f"
	done
	for f in "$out"/*.time; do
		case "$f" in *.bats.time) continue ;; esac
		awk '{ printf "%d %s (whole job)\n", $2 * 1000, $1 }' "$f"
	done
} | sort -rn | head -10 | awk '{ ms = $1; $1 = ""; printf "#   %6.1f s %s\n", ms / 1000, $0 }'
echo "# wall time: $wall s, $JOBS jobs at a time"
if [ "$skipped" -gt 0 ]; then
	echo "# skipped:"
	grep -h -i -E '^(not )?ok .*# skip' "$out"/*.tap | sed 's/^/#   /'
fi
echo
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] || exit 1
if [ "$skipped" -gt 0 ] && [ -n "$no_skip" ]; then
	echo "tests: $skipped skipped: under CI every test must run (NO_SKIP)" >&2
	exit 1
fi
exit 0
