#!/usr/bin/env bats
# stager under a real Slurm (one node), as a site runs it: stager
# installed with `make install`, the installed prolog, task prolog and
# epilog named in slurm.conf with nothing around them (slurmd runs them
# with its own bare environment), and every job submitted by an ordinary
# user (tests/e2e/site.bash), whose scripts call `stager` by name.
#
# The user is this file's own (not realsite.bats's stgjob1): the test
# files run side by side, and each site_stop ends its users' processes.

load helpers
load site

U=stgslurm
SITE_USERS=$U

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	command -v useradd >/dev/null || skip "needs useradd"
	D=$(reachable_mktemp stager-slurm)
	export D
	site_start "$D"
	# slurm.conf names the installed hooks themselves, no wrapper
	grep -qx "Epilog=$D/prefix/libexec/stager/epilog" "$SLURM_CONF"
	# the node's reader slots, this cluster's own (the machine's are
	# shared with every other test run)
	install -d -m 1777 "$D/slots"
	echo "slot_dir = $D/slots" >>"$D/stager.conf"
	S="$D/shared/$U"
	install -d -o "$U" -m 0755 "$S/out"
	# a dataset on the "shared filesystem", the user's
	mkdir -p "$S/ds/sub"
	head -c 80000000 /dev/urandom >"$S/ds/sub/big.bin"
	for i in $(seq 1 50); do echo "$i" >"$S/ds/f$i"; done
	# a job that runs into its time limit (killed 62-83 s after it starts):
	# submitted now, checked by its test
	# (a pack of its own, so its pin does not hold the other tests' entry)
	mkdir -p "$S/limit"
	echo limit >"$S/limit/f"
	chown -R "$U" "$S/ds" "$S/limit"
	as_job_user "$U" stager pack -q "$S/ds" -o "$S/ds.tar.zst" >/dev/null
	as_job_user "$U" stager pack -q "$S/limit" -o "$S/limit.tar.zst" >/dev/null
	cat >"$S/limit.sh" <<JOB
#!/bin/bash
stager stage -q "$S/limit.tar.zst" >"$S/out/limit.path"
sleep 600
JOB
	site_submit "$U" --time=1 -n1 --mem=200 -o "$S/out/limit.log" "$S/limit.sh" >"$D/limit.id"
	# the same for `stager run`, with the early warning 50 s before the
	# limit: the command checkpoints at SIGUSR1 and at SIGTERM
	cat >"$S/limit-run.sh" <<JOB
#!/bin/bash
#SBATCH --signal=B:USR1@50
exec stager run --stage "$S/limit.tar.zst" --collect out:"$S/out/limit-results" -- bash -c '
	trap "echo warned >\$STAGER_OUT/warned" USR1
	trap "echo term >\$STAGER_OUT/term; exit 0" TERM
	cp "\$STAGER_DATA/f" "\$STAGER_OUT/data-f"
	while :; do sleep 0.2; done'
JOB
	site_submit "$U" --time=1 -n1 --mem=200 -o "$S/out/limit-run.log" "$S/limit-run.sh" >"$D/limit-run.id"
	[ -s "$D/limit.id" ]
	[ -s "$D/limit-run.id" ]
}

teardown_file() {
	[ -n "${D:-}" ] || return 0
	site_stop "$D"
}

setup() {
	S="$D/shared/$U"
	SCR="$D/scratch/$U"
	cd "$S"
}
teardown() { :; }

submit() { site_submit "$U" -o "$S/out/%j.log" "$@"; }

# stager status --json of the user, on the login node, into status.json
status_json() { login_stager "$U" status --json >"$D/status.json"; }

# How many pins job ID holds on this node (alive or not), from stager status.
pins_of_job() {
	status_json || return
	jq --arg o "job-$1" '[.entries[].pins[] | select(.owner == $o)] | length' "$D/status.json"
}

# The cache key of the user's dataset ds.tar.zst.
ds_key() {
	status_json || return
	jq -r --arg s "$S/ds.tar.zst" '.entries[] | select(.source == $s) | .key' "$D/status.json"
}

@test "an array job of 4 tasks on one node reads the pack once" {
	cat >array.sh <<JOB
#!/bin/bash
stager stage --json -q "$S/ds.tar.zst" "$S/out/arr-\$SLURM_ARRAY_TASK_ID" \
	>"$S/out/arr-\$SLURM_ARRAY_TASK_ID.json"
JOB
	id=$(submit --array=1-4 -n1 --mem=200 array.sh)
	[ -n "$id" ]
	wait_until 120 job_gone "$id"
	cat out/arr-*.json
	[ "$(ls out/arr-*.json | wc -l)" -eq 4 ]
	[ "$(cat out/arr-*.json | jq -s 'map(select(.hit == false)) | length')" -eq 1 ]
	[ "$(cat out/arr-*.json | jq -s 'map(.source_bytes) | add')" -lt 90000000 ]
	for i in 1 2 3 4; do diff -r ds "out/arr-$i"; done
}

@test "a running job's pins hold against clean; scancel and the epilog release them" {
	cat >hold.sh <<JOB
#!/bin/bash
stager stage -q "$S/ds.tar.zst" >"$S/out/hold.path"
sleep 300
JOB
	id=$(submit -n1 --mem=200 hold.sh)
	[ -n "$id" ]
	wait_until 60 test -s out/hold.path
	path=$(cat out/hold.path)
	# linked in the prolog's directory, the job's $SLURM_TMPDIR
	[ "$path" = "$D/jobs/$id/ds/" ]
	status_json
	jq -e --arg o "job-$id" '[.entries[].pins[] | select(.owner == $o and .alive)] | length == 1' "$D/status.json"
	run login_stager "$U" clean --all
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r ds "$path" # kept: the job is running
	scancel "$id"
	wait_until 60 job_gone "$id"
	# the epilog ran clean --job as the job's user: pin and job directory gone
	wait_until 30 sh -c "[ ! -e '$D/jobs/$id' ]"
	[ ! -e "$SCR/jobs/job-$id" ]
	n=$(pins_of_job "$id")
	[ "$n" -eq 0 ]
	# nothing holds the entry now
	key=$(ds_key)
	[ -n "$key" ]
	[ -e "$SCR/cache/$key" ]
	run login_stager "$U" clean -q --all
	[ "$status" -eq 0 ]
	[ ! -e "$SCR/cache/$key" ]
}

@test "clean asks Slurm: a finished job's leftovers go, a running job's stay" {
	cat >short.sh <<JOB
#!/bin/bash
stager stage -q --no-pin "$S/ds.tar.zst" >/dev/null
stager stage -q "$S/ds.tar.zst" "$S/out/short-dest" >/dev/null
JOB
	cat >long.sh <<JOB
#!/bin/bash
stager stage -q "$S/ds.tar.zst" "$S/out/long-dest" >/dev/null
sleep 300
JOB
	# the epilog would clean the short job at once: run it without one by
	# leaving a pin behind by hand for a job id that has ended
	long=$(submit -n1 --mem=200 long.sh)
	short=$(submit -n1 --mem=200 short.sh)
	[ -n "$long" ]
	[ -n "$short" ]
	wait_until 60 job_gone "$short"
	wait_until 30 test -e out/long-dest
	key=$(ds_key)
	[ -n "$key" ]
	as_job_user "$U" touch "$SCR/pins/$key/job-999999"
	run login_stager "$U" clean --dry-run
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"job-999999"* ]]
	[[ "$output" != *"job-$long"* ]]
	run login_stager "$U" clean -q
	[ "$status" -eq 0 ]
	[ ! -e "$SCR/pins/$key/job-999999" ]
	[ -e "$SCR/pins/$key/job-$long" ]
	scancel "$long"
	wait_until 60 job_gone "$long"
}

@test "a job killed at its time limit leaves nothing behind (epilog)" {
	id=$(cat "$D/limit.id")
	wait_until 60 test -s out/limit.path
	path=$(cat out/limit.path)
	[ "$path" = "$D/jobs/$id/limit/" ]
	wait_until 150 job_gone "$id"
	cat out/limit.log
	wait_until 30 sh -c "[ ! -e '$D/jobs/$id' ]"
	[ ! -e "$SCR/jobs/job-$id" ]
	n=$(pins_of_job "$id")
	[ "$n" -eq 0 ]
}

@test "stager run under scancel: the command is stopped, results collected (exit 5)" {
	cat >cancel.sh <<JOB
#!/bin/bash
exec stager run --stage "$S/ds.tar.zst" --collect out:"$S/out/cancel-results" -- bash -c '
	echo started >\$STAGER_OUT/started
	ls "\$STAGER_DATA" >\$STAGER_OUT/listing
	trap "echo term >\$STAGER_OUT/term; exit 0" TERM
	while :; do sleep 0.2; done'
JOB
	id=$(submit -n1 --mem=200 cancel.sh)
	[ -n "$id" ]
	# run's job directory is the job's $SLURM_TMPDIR
	wait_until 30 test -e "$D/jobs/$id/out/started"
	scancel "$id"
	wait_until 60 job_gone "$id"
	cat "out/$id.log"
	[ "$(cat out/cancel-results/started)" = started ]
	[ "$(cat out/cancel-results/term)" = term ]
	grep -q sub out/cancel-results/listing
	grep -q "stopped by a signal; results collected" "out/$id.log"
	# run exited 5 (interrupted), as Slurm saw it: the test cluster has no
	# accounting (sacct knows nothing), but scontrol keeps a finished job
	# for MinJobAge
	[ "$(job_exit "$id")" = 5:0 ]
	# run's job directory, the job's $SLURM_TMPDIR: removed by the epilog
	wait_until 30 sh -c "[ ! -e '$D/jobs/$id' ]"
	[ ! -e "$SCR/jobs/job-$id" ]
}

@test "stager run --every: a job killed with SIGKILL keeps what was collected" {
	cat >every.sh <<JOB
#!/bin/bash
exec stager run --every 1 --collect out:"$S/out/every-results" -- bash -c '
	i=0; while :; do i=\$((i+1)); echo \$i >\$STAGER_OUT/step-\$i; sleep 0.2; done'
JOB
	id=$(submit -n1 --mem=200 every.sh)
	[ -n "$id" ]
	# collected at least once; the command goes on past that
	wait_until 60 test -e out/every-results/step-5
	wait_until 60 test -e "$D/jobs/$id/out/step-10"
	scancel -s KILL "$id"
	wait_until 60 job_gone "$id"
	n=$(ls out/every-results | grep -c step-)
	echo "$n steps collected"
	[ "$n" -ge 5 ]
	for f in out/every-results/step-*; do [ "$(cat "$f")" = "${f#out/every-results/step-}" ]; done
}

@test "stager run at the time limit: early warning (B:USR1) and SIGTERM both collect" {
	id=$(cat "$D/limit-run.id")
	wait_until 150 job_gone "$id"
	cat out/limit-run.log
	[ "$(cat out/limit-results/data-f)" = limit ]
	[ "$(cat out/limit-results/warned)" = warned ]
	[ "$(cat out/limit-results/term)" = term ]
	# the early warning collected while the command was still running
	grep -n "early warning" out/limit-run.log
	w=$(grep -n "early warning" out/limit-run.log | head -1 | cut -d: -f1)
	t=$(grep -n "Terminated" out/limit-run.log | head -1 | cut -d: -f1)
	[ -n "$t" ]
	[ "$w" -lt "$t" ]
}

@test "the example batch scripts run as written (single node, array sweep)" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	# a stand-in for `python train.py --data D --output O [--lr X]`, where
	# the job's user can run it
	mkdir -p "$D/bin" ex
	cat >"$D/bin/python" <<'PY'
#!/bin/bash
shift
while [ $# -gt 0 ]; do
	case $1 in --data) d=$2; shift ;; --output) o=$2; shift ;; --lr) lr=$2; shift ;; esac
	shift
done
(cd "$d" && find . | sort) >"$o/listing"
echo "${lr:-none}" >"$o/lr"
PY
	chmod 0755 "$D/bin" "$D/bin/python"
	# this cluster has no GPUs and small nodes
	for f in single-node single-node-explicit array-sweep array-sweep-explicit; do
		sed -e '/--gres/d' -e '/--cpus-per-task/d' -e 's/--array=0-31/--array=0-3/' \
			"$top/scripts/examples/$f.sh" >"ex/$f.sh"
	done
	# the user's PATH, with the stand-in first; the installed stager is on it
	p="$D/bin:$SITE/prefix/bin:/usr/local/bin:/usr/bin:/bin"
	env_of() { echo "ALL,PATH=$p,DATASET=$S/ds.tar.zst,RESULTS=$S/out/$1"; }
	a=$(submit --export="$(env_of ex-single)" --mem=200 ex/single-node.sh)
	b=$(submit --export="$(env_of ex-explicit)" --mem=200 ex/single-node-explicit.sh)
	c=$(submit --export="$(env_of ex-sweep)" --mem=200 ex/array-sweep.sh)
	d=$(submit --export="$(env_of ex-sweep-explicit)" --mem=200 ex/array-sweep-explicit.sh)
	for j in "$a" "$b" "$c" "$d"; do
		[ -n "$j" ]
		wait_until 120 job_gone "$j"
	done
	cat out/*.log | tail -40
	want=$(cd ds && find . | sort)
	[ "$(cat out/ex-single/listing)" = "$want" ]
	[ "$(cat out/ex-explicit/listing)" = "$want" ]
	# the sweeps: one verified pack of results per task, each its own lr
	for s in ex-sweep ex-sweep-explicit; do
		ls -R "out/$s"
		for i in 0 1 2 3; do
			login_stager "$U" verify -q "out/$s/task-$i.tar.zst"
			rm -rf check
			login_stager "$U" unpack -q "out/$s/task-$i.tar.zst" check
			[ "$(cat check/listing)" = "$want" ]
			lrs+=("$(cat check/lr)")
		done
	done
	[ "$(printf '%s\n' "${lrs[@]}" | sort -u | wc -l)" -eq 4 ]
}
