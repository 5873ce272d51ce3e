#!/usr/bin/env bats
# stager under a real Slurm: slurmctld and slurmd started here (one node,
# scripts/slurm-test-cluster.sh), jobs submitted with sbatch, the epilog of
# scripts/slurm-epilog.sh installed.

load helpers

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	export SL=$(mktemp -d /tmp/stager-slurm.XXXXXX)
	mkdir -p "$SL/shared" "$SL/out"
	chmod 0755 "$SL"
	# the site configuration every job, the epilog and the tests see
	echo "scratch_root = $SL/scratch/\$USER" >"$SL/stager.conf"
	export STAGER_SITE_CONFIG="$SL/stager.conf" STAGER_BIN="$STAGER"
	unset STAGER_SCRATCH_ROOT SLURM_TMPDIR SLURM_JOB_ID
	export SLURM_CONF
	# Slurm gives an epilog a bare environment: where a site has
	# /etc/stager.conf and stager on PATH, the test says where they are
	cat >"$SL/epilog" <<EPI
#!/bin/sh
export STAGER_SITE_CONFIG="$SL/stager.conf" STAGER_BIN="$STAGER"
exec "$top/scripts/slurm-epilog.sh"
EPI
	chmod +x "$SL/epilog"
	SLURM_CONF=$("$top/scripts/slurm-test-cluster.sh" start "$SL/cluster" "$SL/epilog")
	# a dataset on the "shared filesystem"
	mkdir -p "$SL/shared/ds/sub"
	head -c 80000000 /dev/urandom >"$SL/shared/ds/sub/big.bin"
	for i in $(seq 1 50); do echo "$i" >"$SL/shared/ds/f$i"; done
	"$STAGER" pack -q "$SL/shared/ds" -o "$SL/shared/ds.tar.zst" >/dev/null
	# a job that runs into its time limit (killed 62-83 s after it starts):
	# submitted now, checked by the last test
	# (a pack of its own, so its pin does not hold the other tests' entry)
	mkdir -p "$SL/shared/limit"
	echo limit >"$SL/shared/limit/f"
	"$STAGER" pack -q "$SL/shared/limit" -o "$SL/shared/limit.tar.zst" >/dev/null
	cat >"$SL/limit.sh" <<JOB
#!/bin/bash
"$STAGER" stage -q "$SL/shared/limit.tar.zst" >"$SL/out/limit.path"
sleep 600
JOB
	sbatch --parsable --time=1 -n1 --mem=200 -o "$SL/out/limit.log" "$SL/limit.sh" |
		cut -d';' -f1 >"$SL/limit.id"
	# the same for `stager run`, with the early warning 50 s before the
	# limit: the command checkpoints at SIGUSR1 and at SIGTERM
	cat >"$SL/limit-run.sh" <<JOB
#!/bin/bash
#SBATCH --signal=B:USR1@50
exec "$STAGER" run --stage "$SL/shared/limit.tar.zst" --collect out:"$SL/out/limit-results" -- bash -c '
	trap "echo warned >\$STAGER_OUT/warned" USR1
	trap "echo term >\$STAGER_OUT/term; exit 0" TERM
	cp "\$STAGER_DATA/f" "\$STAGER_OUT/data-f"
	while :; do sleep 0.2; done'
JOB
	sbatch --parsable --time=1 -n1 --mem=200 -o "$SL/out/limit-run.log" "$SL/limit-run.sh" |
		cut -d';' -f1 >"$SL/limit-run.id"
}

teardown_file() {
	[ -n "${SL:-}" ] || return 0
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	# jobs still running (a filtered run) end with the cluster
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	for _ in $(seq 1 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
	"$top/scripts/slurm-test-cluster.sh" stop "$SL/cluster" || true
	pkill -f "$SL/" 2>/dev/null || true
	chmod -R u+w "$SL" 2>/dev/null || true
	rm -rf "$SL"
}

setup() { cd "$SL"; }
teardown() { :; }

# Wait until none of the given jobs is in the queue (at most $2 seconds).
wait_gone() {
	for _ in $(seq 1 $((${2:-60} * 5))); do
		[ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}

submit() { sbatch --parsable -o "$SL/out/%j.log" "$@" | cut -d';' -f1; }

# How many pins job ID holds on this node (alive or not), from stager status.
pins_of_job() {
	"$STAGER" status --json >"$SL/status.json" || return
	jq --arg o "job-$1" '[.entries[].pins[] | select(.owner == $o)] | length' "$SL/status.json"
}

@test "an array job of 4 tasks on one node reads the pack once" {
	cat >array.sh <<JOB
#!/bin/bash
"$STAGER" stage --json -q "$SL/shared/ds.tar.zst" "$SL/out/arr-\$SLURM_ARRAY_TASK_ID" \
	>"$SL/out/arr-\$SLURM_ARRAY_TASK_ID.json"
JOB
	id=$(submit --array=1-4 -n1 --mem=200 array.sh)
	wait_gone "$id" 120
	cat out/arr-*.json
	[ "$(ls out/arr-*.json | wc -l)" -eq 4 ]
	[ "$(cat out/arr-*.json | jq -s 'map(select(.hit == false)) | length')" -eq 1 ]
	[ "$(cat out/arr-*.json | jq -s 'map(.source_bytes) | add')" -lt 90000000 ]
	for i in 1 2 3 4; do diff -r shared/ds "out/arr-$i"; done
}

@test "a running job's pins hold against clean; scancel and the epilog release them" {
	cat >hold.sh <<JOB
#!/bin/bash
"$STAGER" stage -q "$SL/shared/ds.tar.zst" >"$SL/out/hold.path"
sleep 300
JOB
	id=$(submit -n1 --mem=200 hold.sh)
	for _ in $(seq 1 150); do [ -s out/hold.path ] && break; sleep 0.2; done
	path=$(cat out/hold.path)
	# no $SLURM_TMPDIR on this cluster: a job directory under the scratch root
	[[ "$path" == "$SL/scratch/root/jobs/job-$id/ds/" ]]
	"$STAGER" status --json >status.json
	jq -e --arg o "job-$id" '[.entries[].pins[] | select(.owner == $o and .alive)] | length == 1' status.json
	run "$STAGER" clean --all
	[ "$status" -eq 0 ]
	diff -r shared/ds "$path" # kept: the job is running
	scancel "$id"
	wait_gone "$id" 60
	# the epilog ran clean --job as the job's user: pin and job directory gone
	for _ in $(seq 1 50); do [ ! -e "$SL/scratch/root/jobs/job-$id" ] && break; sleep 0.2; done
	[ ! -e "$SL/scratch/root/jobs/job-$id" ]
	n=$(pins_of_job "$id")
	[ "$n" -eq 0 ]
	# nothing holds the entry now
	key=$("$STAGER" status --json | jq -r --arg s "$SL/shared/ds.tar.zst" '.entries[] | select(.source == $s) | .key')
	"$STAGER" clean -q --all
	[ ! -e "$SL/scratch/root/cache/$key" ]
}

@test "clean asks Slurm: a finished job's leftovers go, a running job's stay" {
	cat >short.sh <<JOB
#!/bin/bash
"$STAGER" stage -q --no-pin "$SL/shared/ds.tar.zst" >/dev/null
"$STAGER" stage -q "$SL/shared/ds.tar.zst" "$SL/out/short-dest" >/dev/null
JOB
	cat >long.sh <<JOB
#!/bin/bash
"$STAGER" stage -q "$SL/shared/ds.tar.zst" "$SL/out/long-dest" >/dev/null
sleep 300
JOB
	# the epilog would clean the short job at once: run it without one by
	# leaving a pin behind by hand for a job id that has ended
	long=$(submit -n1 --mem=200 long.sh)
	short=$(submit -n1 --mem=200 short.sh)
	wait_gone "$short" 60
	for _ in $(seq 1 150); do [ -e out/long-dest ] && break; sleep 0.2; done
	key=$("$STAGER" status --json | jq -r --arg s "$SL/shared/ds.tar.zst" '.entries[] | select(.source == $s) | .key')
	touch "$SL/scratch/root/pins/$key/job-999999"
	run "$STAGER" clean --dry-run
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "job-999999"
	[[ "$output" != *"job-$long"* ]]
	"$STAGER" clean -q
	[ ! -e "$SL/scratch/root/pins/$key/job-999999" ]
	[ -e "$SL/scratch/root/pins/$key/job-$long" ]
	scancel "$long"
	wait_gone "$long" 60
}

@test "a job killed at its time limit leaves nothing behind (epilog)" {
	id=$(cat "$SL/limit.id")
	for _ in $(seq 1 150); do [ -s out/limit.path ] && break; sleep 0.2; done
	path=$(cat out/limit.path)
	[[ "$path" == "$SL/scratch/root/jobs/job-$id/limit/" ]]
	wait_gone "$id" 150
	for _ in $(seq 1 50); do [ ! -e "$SL/scratch/root/jobs/job-$id" ] && break; sleep 0.2; done
	[ ! -e "$SL/scratch/root/jobs/job-$id" ]
	n=$(pins_of_job "$id")
	[ "$n" -eq 0 ]
}

@test "stager run under scancel: the command is stopped, results collected (exit 5)" {
	cat >cancel.sh <<JOB
#!/bin/bash
exec "$STAGER" run --stage "$SL/shared/ds.tar.zst" --collect out:"$SL/out/cancel-results" -- bash -c '
	echo started >\$STAGER_OUT/started
	ls "\$STAGER_DATA" >\$STAGER_OUT/listing
	trap "echo term >\$STAGER_OUT/term; exit 0" TERM
	while :; do sleep 0.2; done'
JOB
	id=$(submit -n1 --mem=200 cancel.sh)
	for _ in $(seq 1 300); do
		ls "$SL"/scratch/root/jobs/job-"$id"/out/started >/dev/null 2>&1 && break
		sleep 0.1
	done
	scancel "$id"
	wait_gone "$id" 60
	cat "out/$id.log"
	[ "$(cat out/cancel-results/started)" = started ]
	[ "$(cat out/cancel-results/term)" = term ]
	grep -q sub out/cancel-results/listing
	grep -q "stopped by a signal; results collected" "out/$id.log"
	# run exited 5 (interrupted), as Slurm saw it: the test cluster has no
	# accounting (sacct knows nothing), but scontrol keeps a finished job
	# for MinJobAge
	scontrol -o show job "$id" >"out/$id.scontrol"
	grep -o 'ExitCode=[^ ]*' "out/$id.scontrol"
	grep -q ' ExitCode=5:0 ' "out/$id.scontrol"
	# run removed its job directory; the epilog the rest
	[ ! -e "$SL/scratch/root/jobs/job-$id" ]
}

@test "stager run --every: a job killed with SIGKILL keeps what was collected" {
	cat >every.sh <<JOB
#!/bin/bash
exec "$STAGER" run --every 1 --collect out:"$SL/out/every-results" -- bash -c '
	i=0; while :; do i=\$((i+1)); echo \$i >\$STAGER_OUT/step-\$i; sleep 0.2; done'
JOB
	id=$(submit -n1 --mem=200 every.sh)
	# collected at least once; the command goes on past that
	wait_until 60 test -e out/every-results/step-5
	wait_until 60 test -e "$SL/scratch/root/jobs/job-$id/out/step-10"
	scancel -s KILL "$id"
	wait_gone "$id" 60
	n=$(ls out/every-results | grep -c step-)
	echo "$n steps collected"
	[ "$n" -ge 5 ]
	for f in out/every-results/step-*; do [ "$(cat "$f")" = "${f#out/every-results/step-}" ]; done
}

@test "stager run at the time limit: early warning (B:USR1) and SIGTERM both collect" {
	id=$(cat "$SL/limit-run.id")
	wait_gone "$id" 150
	cat "out/limit-run.log"
	[ "$(cat out/limit-results/data-f)" = limit ]
	[ "$(cat out/limit-results/warned)" = warned ]
	[ "$(cat out/limit-results/term)" = term ]
	# the early warning collected while the command was still running
	grep -n "early warning" out/limit-run.log
	w=$(grep -n "early warning" out/limit-run.log | head -1 | cut -d: -f1)
	t=$(grep -n "Terminated" out/limit-run.log | head -1 | cut -d: -f1)
	[ "$w" -lt "$t" ]
}

@test "the example batch scripts run as written (single node, array sweep)" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	mkdir -p bin ex
	ln -sf "$STAGER" bin/stager
	# a stand-in for `python train.py --data D --output O [--lr X]`
	cat >bin/python <<'PY'
#!/bin/bash
shift
while [ $# -gt 0 ]; do
	case $1 in --data) d=$2; shift ;; --output) o=$2; shift ;; --lr) lr=$2; shift ;; esac
	shift
done
(cd "$d" && find . | sort) >"$o/listing"
echo "${lr:-none}" >"$o/lr"
PY
	chmod +x bin/python
	# this cluster has no GPUs and small nodes
	for f in single-node single-node-explicit array-sweep array-sweep-explicit; do
		sed -e '/--gres/d' -e '/--cpus-per-task/d' -e 's/--array=0-31/--array=0-3/' \
			"$top/scripts/examples/$f.sh" >"ex/$f.sh"
	done
	export PATH="$SL/bin:$PATH" DATASET="$SL/shared/ds.tar.zst"
	a=$(RESULTS="$SL/out/ex-single" submit --mem=200 ex/single-node.sh)
	b=$(RESULTS="$SL/out/ex-explicit" submit --mem=200 ex/single-node-explicit.sh)
	c=$(RESULTS="$SL/out/ex-sweep" submit --mem=200 ex/array-sweep.sh)
	d=$(RESULTS="$SL/out/ex-sweep-explicit" submit --mem=200 ex/array-sweep-explicit.sh)
	for j in "$a" "$b" "$c" "$d"; do wait_gone "$j" 120; done
	cat out/*.log | tail -40
	want=$(cd shared/ds && find . | sort)
	[ "$(cat out/ex-single/listing)" = "$want" ]
	[ "$(cat out/ex-explicit/listing)" = "$want" ]
	# the sweeps: one verified pack of results per task, each its own lr
	for s in ex-sweep ex-sweep-explicit; do
		ls -R "out/$s"
		for i in 0 1 2 3; do
			"$STAGER" verify -q "out/$s/task-$i.tar.zst"
			rm -rf check && "$STAGER" unpack -q "out/$s/task-$i.tar.zst" check
			[ "$(cat check/listing)" = "$want" ]
			lrs+=("$(cat check/lr)")
		done
	done
	[ "$(printf '%s\n' "${lrs[@]}" | sort -u | wc -l)" -eq 4 ]
}
