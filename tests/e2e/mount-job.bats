#!/usr/bin/env bats
# stager mount inside real Slurm jobs of an ordinary user (tests/e2e/site.bash:
# stager installed, the prolog and task prolog in slurm.conf, one node,
# proctrack/pgid) with NO epilog: the mount's process leaves the job's
# process group (setsid), so Slurm does not kill it, and nothing but its
# own watch of the job ends it.
#
# The user mounts through libfuse, which opens /dev/fuse itself: Debian
# (udev) makes it 0666; where a test machine has it root's alone, it is
# made as Debian has it.

load helpers
bats_require_minimum_version 1.5.0
load site

U=stgmount
SITE_USERS=$U

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	command -v useradd >/dev/null || skip "needs useradd"
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	fuse_for_users
	D=$(reachable_mktemp stager-mountjob)
	export D
	SITE_NO_EPILOG=1 site_start "$D" 2>"$D/start.err" || {
		cat "$D/start.err" >&2
		return 1
	}
	! grep -q '^Epilog=' "$SLURM_CONF" || false
	S="$D/shared/$U"
	mkdir -p "$S/ds" "$S/out"
	for i in $(seq 1 20); do echo "$i" >"$S/ds/f$i"; done
	chown -R "$U" "$S"
	as_job_user "$U" stager pack -q "$S/ds" -o "$S/ds.tar.zst" >/dev/null
}

teardown_file() {
	if [ -z "${D:-}" ]; then return 0; fi
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	# what a failed test left: its mounts, then their processes (by pid)
	awk -v t="$D/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo |
		xargs -r -n1 umount -l 2>/dev/null || true
	site_stop "$D"
}

setup() {
	# (here, not in setup_file: bats 1.8 fails a teardown_file after a
	# skip there)
	user_fuse_unmount_or_skip
	S="$D/shared/$U"
	M="$D/scratch/$U/mounts"
	cd "$S"
}
teardown() { :; }

submit() { site_submit "$U" -o "$S/out/%j.log" -n1 --mem=200 "$@"; }
# stager as the user on a login node
ustager() { login_stager "$U" "$@"; }
# A mount point of the user's.
mountpoint_of_user() { install -d -o "$U" -m 0755 "$S/$1"; }

mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
gone() { ! running "$1"; }
# The pid of the process serving the mount at DIR (from its record).
server_pid() {
	local r
	for r in "$M"/pid-*; do
		if [ "$(head -1 "$r" 2>/dev/null)" = "$1" ]; then
			r=${r##*/pid-}
			echo "${r%%-*}"
			return 0
		fi
	done
	return 1
}
no_record() { ! grep -qx "$1" "$M"/pid-* 2>/dev/null; }

@test "a job's mount ends when the job is cancelled, with no epilog: the mount's own watch of the batch shell" {
	mountpoint_of_user m1
	cat >m1.sh <<JOB
#!/bin/bash
stager mount "$S/ds.tar.zst" "$S/m1" || exit
cat "$S/m1/f7" >"$S/out/m1.read"
sleep 300
JOB
	id=$(submit m1.sh)
	wait_until 60 test -s out/m1.read
	[ "$(cat out/m1.read)" = 7 ]
	pid=$(server_pid "$S/m1")
	running "$pid"
	run ustager status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r '.mounts[0].job')" = "$id" ]
	[ "$(echo "$output" | jq '.mounts[0].job_over')" = false ]
	scancel "$id"
	# the report's machine took over 50 s and never got there
	wait_until 15 gone "$pid"
	! mounted "$S/m1" || false
	no_record "$S/m1"
	rmdir m1
	grep -q "job $id is over (its batch shell, process [0-9]*, ended): unmounting '$S/m1'" \
		"$M/log"
}

@test "srun stager mount: the mount outlives its step, lives as long as the job, and ends with it" {
	mountpoint_of_user m2
	cat >m2.sh <<JOB
#!/bin/bash
srun -n1 stager mount "$S/ds.tar.zst" "$S/m2" || exit
touch "$S/out/m2.stepdone"
sleep 300
JOB
	id=$(submit m2.sh)
	wait_until 60 test -e out/m2.stepdone
	pid=$(server_pid "$S/m2")
	# the step is over; its mount is still served
	[ -z "$(squeue -h -s -j "$id" -o %i | grep "^$id\.0$")" ]
	sleep 2.5 # check-tests: the mount must not follow the step (a /proc poll is 2 s)
	running "$pid"
	[ "$(as_job_user "$U" cat "$S/m2/f3")" = 3 ]
	scancel "$id"
	wait_until 15 gone "$pid"
	! mounted "$S/m2" || false
	no_record "$S/m2"
	grep -q "job $id is over (its batch shell, process [0-9]*, ended): unmounting '$S/m2'" \
		"$M/log"
}

@test "salloc's own command (no batch step on any node): Slurm is asked, the mount ends within 30 s of the job" {
	mountpoint_of_user m3
	# (salloc's own command runs where salloc does, with no task prolog:
	# the site's settings as on a login node)
	as_job_user "$U" env STAGER_SITE_CONFIG="$SITE/stager.conf" \
		salloc -n1 --mem=100 stager mount "$S/ds.tar.zst" "$S/m3" 3>&- 2>"$D/salloc.err"
	pid=$(server_pid "$S/m3")
	[ "$(as_job_user "$U" cat "$S/m3/f1")" = 1 ]
	# salloc released the job when its command returned: status says so
	over() {
		ustager status --json >"$D/st.json" &&
			jq -e '.mounts[] | select(.job_over == true)' "$D/st.json" >/dev/null
	}
	wait_until 20 over
	id=$(jq -r '.mounts[0].job' "$D/st.json")
	[ -n "$id" ]
	run -0 ustager status
	echo "$output" | grep -q "job $id (over"
	# the mount's process sees it at its next look (every 30 s)
	wait_until 40 gone "$pid"
	! mounted "$S/m3" || false
	no_record "$S/m3"
	grep -q "job $id is over (Slurm says so): unmounting '$S/m3'" "$M/log"
}
