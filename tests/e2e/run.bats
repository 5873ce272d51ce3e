#!/usr/bin/env bats
# stager run: stage, run a command, pass signals on, collect, clean up
# (outside Slurm here; tests/e2e/slurm.bats runs it under a real Slurm).

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SLOT_DIR="$T/slots"
	unset SLURM_JOB_ID SLURM_TMPDIR
	mkdir -p ds/sub && echo hello >ds/a && head -c 100000 /dev/urandom >ds/sub/b
	stager pack -q ds -o ds.tar.zst >/dev/null
}

# Wait until file $1 exists (at most $2 tenths of a second).
wait_for() {
	for _ in $(seq 1 "${2:-100}"); do [ -e "$1" ] && return 0; sleep 0.1; done
	return 1
}

# A file matching the pattern exists (e.g. the job directory's, whose name
# is not known in advance).
exists() { compgen -G "$1" >/dev/null; }

# As root, run a command as user 65534 (nobody); as anyone else, as is.

@test "run stages, exports, runs, collects and cleans what it made" {
	run stager run --stage ds.tar.zst --stage ds:mine --collect out:results -- \
		bash -c 'diff -r ds "$STAGER_DATA" && diff -r ds "$STAGER_DATA_2" &&
			echo "$STAGER_DATA|$STAGER_DATA_2|$STAGER_OUT|$STAGER_JOB_DIR" >"$STAGER_OUT/env" &&
			cp -r "$STAGER_DATA/sub" "$STAGER_OUT/"'
	echo "$output"
	[ "$status" -eq 0 ]
	IFS='|' read -r d1 d2 out job <results/env
	[[ "$d1" == "$job/ds/" ]]
	[[ "$d2" == "$job/mine/" ]]
	[[ "$out" == "$job/out" ]]
	diff -r ds/sub results/sub
	# the job directory, its links and the collected output are gone; no pins
	[ ! -e "$job" ]
	[ -z "$(find scratch/pins -mindepth 2)" ]
	# the cache entries stay, for the next job
	[ -n "$(ls scratch/cache)" ]
}

@test "the command's exit status is run's; a signal's is 128+N" {
	run stager run -q -- sh -c 'exit 3'
	[ "$status" -eq 3 ]
	run stager run -q -- sh -c 'kill -KILL $$'
	[ "$status" -eq 137 ]
	run -127 stager run -q -- /nonexistent/cmd
	[ "$status" -eq 127 ]
	echo "$output" | grep -q "/nonexistent/cmd"
}

@test "a staging failure: the command does not run (exit 2)" {
	run stager run --stage missing.tar.zst -- touch ran
	[ "$status" -eq 2 ]
	[ ! -e ran ]
	echo "$output" | grep -q "missing.tar.zst"
	# a DEST that was never staged is not run's to remove: a link of the
	# user's by that name, here, stays
	ln -s ds mine
	ln -s ds later
	run stager run --stage missing.tar.zst:mine --stage ds.tar.zst:later -- touch ran
	[ "$status" -eq 2 ]
	[ "$(readlink mine)" = ds ]
	[ "$(readlink later)" = ds ]
}

@test "SIGTERM: passed to the command, results collected, exit 5" {
	"$STAGER" run --collect out:results -- bash -c '
		trap "echo saved >\$STAGER_OUT/at-term; exit 0" TERM
		echo started >$STAGER_OUT/started
		while :; do sleep 0.1; done' 2>err &
	pid=$!
	wait_until 30 exists 'scratch/jobs/*/out/started'
	kill -TERM "$pid"
	status=0
	wait_pid "$pid" 30 || status=$?
	cat err
	[ "$status" -eq 5 ]
	[ "$(cat results/started)" = started ]
	[ "$(cat results/at-term)" = saved ]
}

@test "SIGUSR1 (early warning) collects while the command goes on" {
	"$STAGER" run --collect out:results -- bash -c '
		trap "echo warned >\$STAGER_OUT/warned" USR1
		echo partial >$STAGER_OUT/partial
		while [ ! -e '"$T"'/go ]; do sleep 0.1; done
		echo final >$STAGER_OUT/final' 2>err &
	pid=$!
	wait_until 30 exists 'scratch/jobs/*/out/partial'
	kill -USR1 "$pid"
	wait_for results/partial 100
	[ "$(cat results/partial)" = partial ]
	[ ! -e results/final ]
	running "$pid" # still running
	touch go
	wait_pid "$pid" 30
	[ "$(cat results/final)" = final ]
	[ "$(cat results/warned)" = warned ]
}

@test "SIGUSR1 does not kill a command that does not handle it" {
	# like `python train.py` with no handler: the default action of
	# SIGUSR1 would end it (and the job) at the early warning
	"$STAGER" run --collect out:results -- bash -c '
		echo partial >$STAGER_OUT/partial
		exec sh -c "while [ ! -e '"$T"'/go ]; do sleep 0.1; done; echo final >\$STAGER_OUT/final"' 2>err &
	pid=$!
	wait_until 30 exists 'scratch/jobs/*/out/partial'
	# the exec'd sh is in place (the command, run's child, is sh now)
	wait_until 30 pgrep -x -P "$pid" sh
	kill -USR1 "$pid"
	wait_for results/partial 100
	running "$pid"
	touch go
	wait_pid "$pid" 30 # status 0: the command was not killed
	[ "$(cat results/final)" = final ]
	grep -q "not passed to the command" err
}

@test "--every: after kill -9 of everything, results at most one interval old are safe" {
	# its own process group, so that one kill -9 reaches all of it at once
	setsid "$STAGER" run --every 1 --collect out:results -- bash -c '
		i=0; while :; do i=$((i+1)); echo $i >$STAGER_OUT/step-$i; sleep 0.2; done' 2>err &
	pid=$!
	# collected at least once; the command goes on past that
	wait_until 30 test -e results/step-5
	wait_until 30 exists 'scratch/jobs/*/out/step-12'
	kill -KILL -- -"$pid"
	st=0
	wait_pid "$pid" 30 || st=$?
	[ "$st" -eq 137 ]
	cat err
	n=$(ls results | grep -c step-)
	[ "$n" -ge 5 ]
	# every collected file is whole, none is half-written
	for f in results/step-*; do [ "$(cat "$f")" = "${f#results/step-}" ]; done
	# a collect of what the job left completes DEST and removes temporaries
	out=$(ls -d scratch/jobs/*/out)
	stager collect -q "$out" results
	[ "$(ls results | grep -c step-)" -eq "$(ls "$out" | wc -l)" ]
	[ -z "$(find results -name '.stager*')" ]
}

@test "results that cannot be collected are moved out of the job's scratch and kept 14 days (exit 7)" {
	[ "$(id -u)" -ne 0 ] || command -v setpriv >/dev/null || skip "needs setpriv"
	mkdir results
	chmod -R a+rwX "$T"
	chmod 0555 results
	# (DEST is the user's: collect writes into no one else's directory)
	[ "$(id -u)" -ne 0 ] || chown 65534 results
	as_user_setup
	run as_user env HOME="$T" STAGER_SCRATCH_ROOT="$T/scratch2" "$AS_USER_STAGER" run \
		--collect out:results -- sh -c 'echo precious >"$STAGER_OUT/r"'
	echo "$output"
	[ "$status" -eq 7 ]
	# out of the job's scratch (removed with the job), into kept/
	kept=$(find scratch2/kept -name r)
	[ "$(cat "$kept")" = precious ]
	[ -z "$(find scratch2/jobs -name r)" ]
	echo "$output" | grep -q "moved to '$T/scratch2/kept/pid[0-9]*-out.[0-9]*' on .*kept 14 days"
	# clean leaves them alone for 14 days, then removes them
	as_user env HOME="$T" STAGER_SCRATCH_ROOT="$T/scratch2" "$AS_USER_STAGER" clean -q
	[ "$(cat "$kept")" = precious ]
	# the results, and beside them their DEST (NAME.EPOCH.to)
	k=$(ls scratch2/kept | grep -v '[.]to$')
	[ "$(cat "scratch2/kept/$k.to")" = "$T/results" ]
	old=${k%.*}.$(($(date +%s) - 15 * 86400))
	mv "scratch2/kept/$k" "scratch2/kept/$old"
	mv "scratch2/kept/$k.to" "scratch2/kept/$old.to"
	as_user env HOME="$T" STAGER_SCRATCH_ROOT="$T/scratch2" "$AS_USER_STAGER" clean -q
	[ -z "$(ls scratch2/kept)" ]
}

# Results an earlier job on this node could not collect, kept for DEST:
# MiB of random data in SCRATCH_ROOT/kept (a copy of them in ./kept-copy).
make_kept() { # DEST MiB
	stager status >/dev/null
	k="$T/scratch/kept/pid1-out.$(date +%s)"
	mkdir -p "$k"
	head -c "$(($2 * 1048576))" /dev/urandom >"$k/r"
	echo small >"$k/s"
	cp -r "$k" kept-copy
	echo "$1" >"$k.to"
}

@test "kept results that run announces are collected before it exits" {
	make_kept "$T/earlier" 3
	# at 1 MiB/s, sending them takes longer than the command
	run stager run --bwlimit 1M --collect out:results -- true
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"1 kept result of earlier jobs on this node: collecting them to their destinations"* ]]
	[[ "$output" == *"kept results '$k' (from an earlier job) collected to '$T/earlier'"* ]]
	diff -r kept-copy earlier
	[ ! -e "$k" ]
	[ -z "$(ls scratch/kept)" ]
}

@test "a stop signal while run waits for kept results: it says what is left, and where" {
	make_kept "$T/earlier" 3
	"$STAGER" run --bwlimit 256K --collect out:results -- true 2>err &
	pid=$!
	wait_until 30 grep -q "waiting for the kept results of earlier jobs" err
	kill -TERM "$pid"
	st=0
	wait_pid "$pid" 30 || st=$?
	cat err
	[ "$st" -eq 5 ]
	grep -q "the kept results of earlier jobs were not all collected; what is left stays in '$T/scratch/kept'" err
	# what was not sent is still kept, whole
	diff -r kept-copy "$k"
}

@test "usage errors exit 1" {
	run stager run
	[ "$status" -eq 1 ]
	run stager run --collect nodest -- true
	[ "$status" -eq 1 ]
	run stager run --every 1m -- true
	[ "$status" -eq 1 ]
}

@test "--stage: a source whose name has a colon, with and without DEST" {
	cp ds.tar.zst 'ds:v2.tar.zst'
	run stager run -q --stage 'ds:v2.tar.zst' -- sh -c 'diff -r ds "$STAGER_DATA" && echo "$STAGER_DATA"'
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q '/ds:v2/$'
	run stager run -q --stage 'ds:v2.tar.zst:mine' -- sh -c 'diff -r ds "$STAGER_DATA" && echo "$STAGER_DATA"'
	[ "$status" -eq 0 ]
	echo "$output" | grep -q '/mine/$'
}

@test "a command that fails, with nothing to collect, is told as failed with its status, not as collected" {
	run --separate-stderr stager run -- sh -c 'exit 3'
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the command failed (exit 3)"* ]]
	[[ "$stderr" != *"results collected"* ]]
	run --separate-stderr stager run --collect out:res -- sh -c 'exit 4'
	[ "$status" -eq 4 ]
	[[ "$stderr" == *"the command failed (exit 4); results collected"* ]]
}
