#!/usr/bin/env bats
# stager mount inside real Slurm jobs (one node, scripts/slurm-test-cluster.sh,
# proctrack/pgid) with NO epilog: the mount's process leaves the job's
# process group (setsid), so Slurm does not kill it, and nothing but its
# own watch of the job ends it.  The jobs are root's (/dev/fuse may be
# root's alone on a test machine).

load helpers

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	export SL=$(mktemp -d /tmp/stager-mountjob.XXXXXX)
	chmod 0755 "$SL"
	mkdir -p "$SL/shared/ds" "$SL/out"
	echo "scratch_root = $SL/scratch" >"$SL/stager.conf"
	export STAGER_SITE_CONFIG="$SL/stager.conf"
	unset STAGER_SCRATCH_ROOT SLURM_TMPDIR SLURM_JOB_ID
	for i in $(seq 1 20); do echo "$i" >"$SL/shared/ds/f$i"; done
	"$STAGER" pack -q "$SL/shared/ds" -o "$SL/shared/ds.tar.zst" >/dev/null
	SLURM_CONF=$("$top/scripts/slurm-test-cluster.sh" start "$SL/cluster")
	export SLURM_CONF
	! grep -q '^Epilog=' "$SLURM_CONF" || false
}

teardown_file() {
	[ -n "${SL:-}" ] || return 0
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	wait_until 20 sh -c '[ -z "$(squeue -h 2>/dev/null)" ]' || true
	"$top/scripts/slurm-test-cluster.sh" stop "$SL/cluster" || true
	# what a failed test left: its mounts, then their processes (by pid)
	awk -v t="$SL/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo |
		xargs -r -n1 umount -l 2>/dev/null || true
	local r p
	for r in "$SL"/scratch/mounts/pid-*; do
		[ -f "$r" ] || continue
		p=${r##*/pid-}
		kill -9 "${p%%-*}" 2>/dev/null || true
	done
	if awk -v t="$SL/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		return 0 # never rm through a mount
	fi
	rm -rf "$SL"
}

setup() { cd "$SL"; }
teardown() { :; }

submit() { sbatch --parsable -o "$SL/out/%j.log" -n1 --mem=200 "$@" | cut -d';' -f1; }

mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
gone() { ! running "$1"; }
# The pid of the process serving the mount at DIR (from its record).
server_pid() {
	local r
	for r in "$SL"/scratch/mounts/pid-*; do
		if [ "$(head -1 "$r" 2>/dev/null)" = "$1" ]; then
			r=${r##*/pid-}
			echo "${r%%-*}"
			return 0
		fi
	done
	return 1
}
no_record() { ! grep -qx "$1" "$SL"/scratch/mounts/pid-* 2>/dev/null; }

@test "a job's mount ends when the job is cancelled, with no epilog: the mount's own watch of the batch shell" {
	mkdir m1
	cat >m1.sh <<JOB
#!/bin/bash
"$STAGER" mount "$SL/shared/ds.tar.zst" "$SL/m1" || exit
cat "$SL/m1/f7" >"$SL/out/m1.read"
sleep 300
JOB
	id=$(submit m1.sh)
	wait_until 60 test -s out/m1.read
	[ "$(cat out/m1.read)" = 7 ]
	pid=$(server_pid "$SL/m1")
	running "$pid"
	run "$STAGER" status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r '.mounts[0].job')" = "$id" ]
	[ "$(echo "$output" | jq '.mounts[0].job_over')" = false ]
	scancel "$id"
	# the report's machine took over 50 s and never got there
	wait_until 15 gone "$pid"
	! mounted "$SL/m1" || false
	no_record "$SL/m1"
	rmdir m1
	grep -q "job $id is over (its batch shell, process [0-9]*, ended): unmounting '$SL/m1'" \
		scratch/mounts/log
}

@test "srun stager mount: the mount outlives its step, lives as long as the job, and ends with it" {
	mkdir m2
	cat >m2.sh <<JOB
#!/bin/bash
srun -n1 "$STAGER" mount "$SL/shared/ds.tar.zst" "$SL/m2" || exit
touch "$SL/out/m2.stepdone"
sleep 300
JOB
	id=$(submit m2.sh)
	wait_until 60 test -e out/m2.stepdone
	pid=$(server_pid "$SL/m2")
	# the step is over; its mount is still served
	[ -z "$(squeue -h -s -j "$id" -o %i | grep "^$id\.0$")" ]
	sleep 2.5 # check-tests: the mount must not follow the step (a /proc poll is 2 s)
	running "$pid"
	[ "$(cat m2/f3)" = 3 ]
	scancel "$id"
	wait_until 15 gone "$pid"
	! mounted "$SL/m2" || false
	no_record "$SL/m2"
	grep -q "job $id is over (its batch shell, process [0-9]*, ended): unmounting '$SL/m2'" \
		scratch/mounts/log
}

@test "salloc's own command (no batch step on any node): Slurm is asked, the mount ends within 30 s of the job" {
	mkdir m3
	salloc -n1 --mem=100 "$STAGER" mount "$SL/shared/ds.tar.zst" "$SL/m3" 3>&- 2>salloc.err
	pid=$(server_pid "$SL/m3")
	[ "$(cat m3/f1)" = 1 ]
	# salloc released the job when its command returned: status says so
	wait_until 20 sh -c '"$STAGER" status --json | jq -e ".mounts[] | select(.job_over == true)"'
	id=$(jq -r '.mounts[0].job' <<<"$("$STAGER" status --json)")
	[ -n "$id" ]
	run "$STAGER" status
	echo "$output" | grep -q "job $id (over"
	# the mount's process sees it at its next look (every 30 s)
	wait_until 40 gone "$pid"
	! mounted "$SL/m3" || false
	no_record "$SL/m3"
	grep -q "job $id is over (Slurm says so): unmounting '$SL/m3'" scratch/mounts/log
}
