#!/usr/bin/env bats
# Batch jobs that cannot lose results, under a real Slurm (one node, its
# own cluster, KillWait 5 s) as a site runs it (tests/e2e/site.bash):
# stager installed, the installed hooks in slurm.conf with nothing around
# them, jobs of an ordinary user.  A final collect cut short by SIGKILL
# (kept; the site's STAGER_EPILOG_SEND_TIME=0 leaves the sending to
# `collect --kept`), the time budget of the last collect, temporaries left
# on the shared filesystem.
#
# The user is this file's own (not realsite.bats's stgjob1): the test
# files run side by side, and each site_stop ends its users' processes.

load helpers
bats_require_minimum_version 1.5.0
load site

U=stgjobs
SITE_USERS=$U

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	command -v useradd >/dev/null || skip "needs useradd"
	D=$(reachable_mktemp stager-jobs)
	export D
	# the epilog keeps what a job did not collect and sends nothing
	SITE_SEND_TIME=0 site_start "$D"
	# slurm.conf names the installed hooks themselves, no wrapper
	grep -qx "Epilog=$D/prefix/libexec/stager/epilog" "$SLURM_CONF"
	grep -qx "STAGER_EPILOG_SEND_TIME=0" "$D/prefix/etc/default/stager"
	# the node's reader slots, this cluster's own
	install -d -m 1777 "$D/slots"
	echo "slot_dir = $D/slots" >>"$D/stager.conf"
	S="$D/shared/$U"
	install -d -o "$U" -m 0755 "$S/out"
	# the jobs that run into their time limit (60-90 s) start now, and
	# are checked by their tests
	# 4 MB/s measured by the first periodic collect (at 20 s); 80 MB more
	# at 22 s, due at 40 s, would need ~20 s and KillWait gives 5: run must
	# warn and collect on its own before the limit
	cat >"$S/budget.sh" <<JOB
#!/bin/bash
exec stager run --bwlimit 4M --every 20 --collect out:"$S/out/budget-results" -- bash -c '
	head -c 8000000 /dev/urandom >\$STAGER_OUT/first
	sleep 22
	head -c 80000000 /dev/urandom >\$STAGER_OUT/big.tmp && mv \$STAGER_OUT/big.tmp \$STAGER_OUT/big
	trap "exit 0" TERM
	while :; do sleep 0.2; done'
JOB
	site_submit "$U" -o "$S/out/%j.log" -n1 --mem=300 --time=1 "$S/budget.sh" >"$D/budget.id"
	[ -s "$D/budget.id" ]
}

teardown_file() {
	[ -n "${D:-}" ] || return 0
	site_stop "$D"
}

setup() {
	S="$D/shared/$U"
	cd "$S"
}
teardown() { :; }

submit() { site_submit "$U" -o "$S/out/%j.log" "$@"; }

# CMD as the user, as on a login node (the site's settings), exec'd rather
# than forked as runuser does, so that in the background $! is CMD's pid.
# It replaces the shell it runs in: only in the background or under run.
as_user_exec() {
	local u=$1
	shift
	exec setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
		env -i HOME="/home/$u" USER="$u" LOGNAME="$u" SHELL=/bin/bash \
		PATH="$SITE/prefix/bin:/usr/local/bin:/usr/bin:/bin" SLURM_CONF="$SLURM_CONF" \
		STAGER_SITE_CONFIG="$SITE/stager.conf" "$@"
}

@test "a final collect cut short by KillWait's SIGKILL: clean keeps the results, collect --kept sends them" {
	# 48 MB of checkpoint at 4 MB/s needs 12 s; KillWait gives 5
	# (no node slots: the other tests' jobs must not hold this one back)
	cat >kw.sh <<JOB
#!/bin/bash
export STAGER_MAX_READERS_PER_NODE=0
exec stager run --bwlimit 4M --every 0 --collect out:"$S/out/kw-results" -- bash -c '
	echo small >\$STAGER_OUT/small
	head -c 48000000 /dev/urandom >\$STAGER_OUT/ckpt.tmp && mv \$STAGER_OUT/ckpt.tmp \$STAGER_OUT/ckpt
	trap "exit 0" TERM
	while :; do sleep 0.2; done'
JOB
	id=$(submit -n1 --mem=200 kw.sh)
	[ -n "$id" ]
	# run's job directory is the job's $SLURM_TMPDIR
	wait_until 60 test -e "$D/jobs/$id/out/ckpt"
	cp "$D/jobs/$id/out/ckpt" "$D/ckpt.orig"
	scancel "$id"
	wait_until 60 job_gone "$id"
	cat "out/$id.log"
	# the final collect began, and SIGKILL ended it before the checkpoint was sent
	grep -q "collecting" "out/$id.log"
	[ ! -e out/kw-results/ckpt ]
	# the epilog's clean --job removed the temporary the killed collect
	# left on the shared filesystem, and its marker
	[ -z "$(find out/kw-results -name '.stager-*')" ]
	# the epilog ran clean --job: the results were kept (moved out of the
	# job's directory), not removed; the directory is gone
	wait_until 30 sh -c "[ ! -e '$D/jobs/$id' ]"
	grep -q "were never fully collected" "out/$id.log"
	run login_stager "$U" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.kept | length == 1'
	kept=$(echo "$output" | jq -r '.kept[0].path')
	cmp "$kept/ckpt" "$D/ckpt.orig"
	# clean --dry-run shows them, and clean leaves them
	run login_stager "$U" clean --dry-run
	[ "$status" -eq 0 ]
	[[ "$output" == *"$kept"* ]]
	run login_stager "$U" clean
	[ "$status" -eq 0 ]
	[ -e "$kept/ckpt" ]
	# collect --kept sends them to the DEST the job named
	run login_stager "$U" collect --kept
	echo "$output"
	[ "$status" -eq 0 ]
	cmp out/kw-results/ckpt "$D/ckpt.orig"
	[ "$(cat out/kw-results/small)" = small ]
	run login_stager "$U" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.kept | length == 0'
}

@test "with exec and the early warning, run reads the warning from the script and is quiet about exec" {
	cat >withexec.sh <<JOB
#!/bin/bash
#SBATCH --signal=B:USR1@50
exec stager run -v --collect out:"$S/out/withexec-results" -- bash -c 'echo x >\$STAGER_OUT/x; sleep 2'
JOB
	id=$(submit -n1 --mem=200 --time=5 withexec.sh)
	[ -n "$id" ]
	wait_until 60 job_gone "$id"
	cat "out/$id.log"
	run -1 grep -c "not the batch script's main process" "out/$id.log"
	[ "$output" = 0 ]
	[ "$(cat out/withexec-results/x)" = x ]
	# periodic collects are on by default in a job with a time limit
	grep -q "collecting every" "out/$id.log"
}

@test "the time budget: a last collect that cannot fit in KillWait is announced early and started in time" {
	id=$(cat "$D/budget.id")
	wait_until 150 job_gone "$id"
	cat "out/$id.log"
	grep -q "the last collect would need about" "out/$id.log"
	# its figures true: KillWait's 5 s are from SIGTERM at the limit to
	# SIGKILL (not after the limit), and the moment run starts collecting
	# on its own is not before the job began
	grep -q "but the job has 5 s from SIGTERM at its time limit ([0-9:]*) to SIGKILL (KillWait 5 s): " "out/$id.log"
	from=$(sed -n 's/.*stager collects on its own from \([0-9:]*\|now\);.*/\1/p' "out/$id.log" | head -n 1)
	start=$(scontrol show job "$id" | sed -n 's/.* StartTime=\([0-9T:-]*\) .*/\1/p' | head -n 1)
	[ -n "$from" ]
	[ -n "$start" ]
	[ "$from" = now ] || [ "$(date -d "${start%T*} $from" +%s)" -ge "$(date -d "${start/T/ }" +%s)" ]
	# the job's checkpoint pattern (big.tmp renamed to big) is no warning
	run -1 grep -c "disappeared before" "out/$id.log"
	[ "$output" = 0 ]
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
	run login_stager "$U" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.kept | length == 0'
}

@test "a collect killed on one node: the next collect into that DEST, on another node, removes its temporary" {
	# a job that has ended, as squeue sees it
	id=$(submit -n1 --mem=50 --wrap true)
	[ -n "$id" ]
	wait_until 30 job_gone "$id"
	as_job_user "$U" sh -c 'mkdir -p big-src other-src && head -c 20000000 /dev/urandom >big-src/big && echo other >other-src/other'
	as_user_exec "$U" env SLURM_JOB_ID="$id" SLURMD_NODENAME=nodea STAGER_MAX_READERS_PER_NODE=0 \
		stager --scratch "$S/node-a" collect --bwlimit 4M big-src out/swept 3>&- &
	pid=$!
	wait_until 20 sh -c 'find out/swept -name ".stager-tmp.nodea.*" | grep -q .'
	kill -9 "$pid"
	rc=0
	wait_pid "$pid" 10 || rc=$?
	[ "$rc" -eq 137 ]
	[ -n "$(find out/swept -maxdepth 1 -name ".stager-collecting.nodea.$pid.$id")" ]
	# another node, another user of the DEST: the writer's job is gone
	run as_user_exec "$U" env SLURMD_NODENAME=nodeb stager --scratch "$S/node-b" collect other-src out/swept
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed 1 temporary that a collect killed on nodea"* ]]
	[ -z "$(find out/swept -name '.stager-*')" ]
	[ "$(cat out/swept/other)" = other ]
	# a marker whose job still runs is left alone
	live=$(submit -n1 --mem=50 --wrap "sleep 60")
	[ -n "$live" ]
	wait_until 30 sh -c "squeue -h -j $live -o %T | grep -q RUNNING"
	as_job_user "$U" touch "out/swept/.stager-collecting.nodec.1.$live" "out/swept/.stager-tmp.nodec.1.0"
	run as_user_exec "$U" env SLURMD_NODENAME=nodeb stager --scratch "$S/node-b" collect other-src out/swept
	[ "$status" -eq 0 ]
	[ -e "out/swept/.stager-tmp.nodec.1.0" ]
	scancel "$live"
}
