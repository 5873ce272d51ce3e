#!/usr/bin/env bats
# stager stage against the corpus of 444 real, often malformed archives
# (../shared/corpus): no crash, no hang, a clean exit status, nothing
# written outside.  A file of its own: on a loaded 2-core machine it
# takes minutes, which stage.bats's other tests need for themselves
# within one job's time limit.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SITE_CONFIG=/dev/null HOME="$T"
	unset SLURM_TMPDIR SLURM_JOB_ID
}

teardown() {
	cd /
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

@test "the corpus of 444 malformed archives: no crash, no hang, 0 or 4, nothing outside" {
	[ -d "$CORPUS/libarchive-tests" ] || skip "no corpus"
	export STAGER_STALL_TIMEOUT=3
	mkdir out
	touch marker
	bad=0
	for f in "$CORPUS"/libarchive-tests/*; do
		b=$(basename "$f")
		st=0
		timeout -k 5 60 "$STAGER" stage -q "$f" "out/$b" </dev/null >/dev/null 2>>err.log || st=$?
		if [ "$st" -ne 0 ] && [ "$st" -ne 4 ]; then
			echo "$b: exit $st"
			bad=$((bad + 1))
		fi
	done
	tail -5 err.log
	[ "$bad" -eq 0 ]
	# nothing was written outside the scratch root and out/
	[ -z "$(find "$T" -newer marker -not -path "$T/scratch*" -not -path "$T/out*" -not -name err.log -not -path "$T")" ]
}
