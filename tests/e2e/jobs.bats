#!/usr/bin/env bats
# Batch jobs that cannot lose results, under a real Slurm (one node, its
# own cluster, KillWait 5 s, the epilog of scripts/slurm-epilog.sh): a
# final collect cut short by SIGKILL (kept; STAGER_EPILOG_SEND_TIME=0 leaves
# the sending to `collect --kept`), the time budget of the last collect, temporaries left on the shared filesystem.

load helpers

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	export JB=$(mktemp -d /tmp/stager-jobs.XXXXXX)
	mkdir -p "$JB/shared" "$JB/out"
	chmod 0755 "$JB"
	echo "scratch_root = $JB/scratch/\$USER" >"$JB/stager.conf"
	export STAGER_SITE_CONFIG="$JB/stager.conf" STAGER_BIN="$STAGER"
	unset STAGER_SCRATCH_ROOT SLURM_TMPDIR SLURM_JOB_ID
	export SLURM_CONF
	cat >"$JB/epilog" <<EPI
#!/bin/sh
export STAGER_SITE_CONFIG="$JB/stager.conf" STAGER_BIN="$STAGER" STAGER_EPILOG_SEND_TIME=0
exec "$top/scripts/slurm-epilog.sh"
EPI
	chmod +x "$JB/epilog"
	SLURM_CONF=$("$top/scripts/slurm-test-cluster.sh" start "$JB/cluster" "$JB/epilog")
	# the jobs that run into their time limit (60-90 s) start now, and
	# are checked by their tests
	cd "$JB"
	# 4 MB/s measured by the first periodic collect (at 20 s); 80 MB more
	# at 22 s, due at 40 s, would need ~20 s and KillWait gives 5: run must
	# warn and collect on its own before the limit
	cat >"$JB/budget.sh" <<JOB
#!/bin/bash
exec "$STAGER" run --bwlimit 4M --every 20 --collect out:"$JB/out/budget-results" -- bash -c '
	head -c 8000000 /dev/urandom >\$STAGER_OUT/first
	sleep 22
	head -c 80000000 /dev/urandom >\$STAGER_OUT/big.tmp && mv \$STAGER_OUT/big.tmp \$STAGER_OUT/big
	trap "exit 0" TERM
	while :; do sleep 0.2; done'
JOB
	sbatch --parsable -o "$JB/out/%j.log" -n1 --mem=300 --time=1 "$JB/budget.sh" | cut -d';' -f1 >"$JB/budget.id"
}

teardown_file() {
	[ -n "${JB:-}" ] || return 0
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	wait_until 10 sh -c '[ -z "$(squeue -h 2>/dev/null)" ]' || true
	"$top/scripts/slurm-test-cluster.sh" stop "$JB/cluster" || true
	pkill -f "$JB/" 2>/dev/null || true
	rm -rf "$JB"
}

setup() { cd "$JB"; }

gone() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }
submit() { sbatch --parsable -o "$JB/out/%j.log" "$@" | cut -d';' -f1; }
scratch() { echo "$JB/scratch/root"; }

@test "a final collect cut short by KillWait's SIGKILL: clean keeps the results, collect --kept sends them" {
	# 48 MB of checkpoint at 4 MB/s needs 12 s; KillWait gives 5
	# (no node slots: the other tests' jobs must not hold this one back)
	cat >kw.sh <<JOB
#!/bin/bash
export STAGER_MAX_READERS_PER_NODE=0
exec "$STAGER" run --bwlimit 4M --every 0 --collect out:"$JB/out/kw-results" -- bash -c '
	echo small >\$STAGER_OUT/small
	head -c 48000000 /dev/urandom >\$STAGER_OUT/ckpt.tmp && mv \$STAGER_OUT/ckpt.tmp \$STAGER_OUT/ckpt
	trap "exit 0" TERM
	while :; do sleep 0.2; done'
JOB
	id=$(submit -n1 --mem=200 kw.sh)
	wait_until 60 test -e "$(scratch)/jobs/job-$id/out/ckpt"
	cp "$(scratch)/jobs/job-$id/out/ckpt" "$JB/ckpt.orig"
	scancel "$id"
	wait_until 60 gone "$id"
	cat "out/$id.log"
	# the final collect began, and SIGKILL ended it before the checkpoint was sent
	grep -q "collecting" "out/$id.log"
	[ ! -e out/kw-results/ckpt ]
	# the epilog's clean --job removed the temporary the killed collect
	# left on the shared filesystem, and its marker
	[ -z "$(find out/kw-results -name '.stager-*')" ]
	# the epilog ran clean --job: the results were kept, not removed
	[ ! -e "$(scratch)/jobs/job-$id" ]
	run "$STAGER" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.kept | length == 1'
	kept=$(echo "$output" | jq -r '.kept[0].path')
	cmp "$kept/ckpt" "$JB/ckpt.orig"
	# clean --dry-run shows them, and clean leaves them
	run "$STAGER" clean --dry-run
	[ "$status" -eq 0 ]
	[[ "$output" == *"$kept"* ]]
	run "$STAGER" clean
	[ "$status" -eq 0 ]
	[ -e "$kept/ckpt" ]
	# collect --kept sends them to the DEST the job named
	run "$STAGER" collect --kept
	echo "$output"
	[ "$status" -eq 0 ]
	cmp out/kw-results/ckpt "$JB/ckpt.orig"
	[ "$(cat out/kw-results/small)" = small ]
	run "$STAGER" status --json
	echo "$output" | jq -e '.kept | length == 0'
}

@test "with exec and the early warning, run reads the warning from the script and is quiet about exec" {
	cat >withexec.sh <<JOB
#!/bin/bash
#SBATCH --signal=B:USR1@50
exec "$STAGER" run -v --collect out:"$JB/out/withexec-results" -- bash -c 'echo x >\$STAGER_OUT/x; sleep 2'
JOB
	id=$(submit -n1 --mem=200 --time=5 withexec.sh)
	wait_until 60 gone "$id"
	cat "out/$id.log"
	run grep -c "not the batch script's main process" "out/$id.log"
	[ "$output" = 0 ]
	[ "$(cat out/withexec-results/x)" = x ]
	# periodic collects are on by default in a job with a time limit
	grep -q "collecting every" "out/$id.log"
}

@test "the time budget: a last collect that cannot fit in KillWait is announced early and started in time" {
	id=$(cat "$JB/budget.id")
	wait_until 150 gone "$id"
	cat "out/$id.log"
	grep -q "the last collect would need about" "out/$id.log"
	# the warning came before the time limit's SIGTERM
	w=$(grep -n "the last collect would need" "out/$id.log" | head -1 | cut -d: -f1)
	t=$(grep -n "Terminated\|passed to the command" "out/$id.log" | head -1 | cut -d: -f1)
	[ -n "$t" ]
	[ "$w" -lt "$t" ]
	c=$(grep -n "collecting results before the time limit" "out/$id.log" | head -1 | cut -d: -f1)
	[ -n "$c" ]
	[ "$c" -lt "$t" ]
	# everything was sent: nothing kept
	[ "$(stat -c %s out/budget-results/big)" -eq 80000000 ]
	run "$STAGER" status --json
	echo "$output" | jq -e '.kept | length == 0'

}

@test "a collect killed on one node: the next collect into that DEST, on another node, removes its temporary" {
	# a job that has ended, as squeue sees it
	id=$(submit -n1 --mem=50 --wrap true)
	wait_until 30 gone "$id"
	mkdir -p big-src other-src && head -c 20000000 /dev/urandom >big-src/big && echo other >other-src/other
	env SLURM_JOB_ID="$id" SLURMD_NODENAME=nodea STAGER_MAX_READERS_PER_NODE=0 \
		"$STAGER" --scratch "$JB/node-a" collect --bwlimit 4M big-src out/swept 3>&- &
	pid=$!
	wait_until 20 sh -c 'find out/swept -name ".stager-tmp.nodea.*" | grep -q .'
	kill -9 "$pid"
	rc=0
	wait_pid "$pid" 10 || rc=$?
	[ "$rc" -eq 137 ]
	[ -n "$(find out/swept -maxdepth 1 -name ".stager-collecting.nodea.$pid.$id")" ]
	# another node, another user of the DEST: the writer's job is gone
	run env SLURMD_NODENAME=nodeb "$STAGER" --scratch "$JB/node-b" collect other-src out/swept
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed 1 temporary that a collect killed on nodea"* ]]
	[ -z "$(find out/swept -name '.stager-*')" ]
	[ "$(cat out/swept/other)" = other ]
	# a marker whose job still runs is left alone
	live=$(submit -n1 --mem=50 --wrap "sleep 60")
	wait_until 30 sh -c "squeue -h -j $live -o %T | grep -q RUNNING"
	touch "out/swept/.stager-collecting.nodec.1.$live" "out/swept/.stager-tmp.nodec.1.0"
	run env SLURMD_NODENAME=nodeb "$STAGER" --scratch "$JB/node-b" collect other-src out/swept
	[ "$status" -eq 0 ]
	[ -e "out/swept/.stager-tmp.nodec.1.0" ]
	scancel "$live"
}
