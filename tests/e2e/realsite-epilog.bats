#!/usr/bin/env bats
# The hooks of a real site (tests/e2e/site.bash) where a job's end meets
# bad luck: a controller that does not answer while a user cleans, an
# epilog's clean that runs out of time, read-only directories in the job's
# directory, a leftover of an earlier job with the same id.  Users of
# this file's own (the realsite*.bats files run beside it).

load helpers
load site

U1=stgep1
U2=stgep2
SITE_USERS="$U1 $U2"
export U1 U2
OUT='$SLURM_TMPDIR/out'

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	command -v useradd >/dev/null || skip "needs useradd"
	D=$(mktemp -d /var/tmp/stager-epsite.XXXXXX)
	chmod 0755 "$D"
	export D
	site_start "$D" 2>"$D/start.err" || {
		cat "$D/start.err" >&2
		if grep -q '^slurm-test-cluster: cannot' "$D/start.err"; then
			SITE_SKIP=$(grep -m1 '^slurm-test-cluster: cannot' "$D/start.err")
			export SITE_SKIP
			return 0
		fi
		return 1
	}
	S1="$D/shared/$U1"
	mkdir -p "$S1/ds/sub"
	for i in $(seq 1 5); do echo "$i" >"$S1/ds/f$i"; done
	# a dataset whose directories are read-only (as many shared ones are)
	echo hi >"$S1/ds/sub/f"
	chmod 0555 "$S1/ds/sub"
	chown -R $U1 "$S1"
	as_job_user $U1 stager pack -q "$S1/ds" -o "$S1/ds.tar.zst" >/dev/null
}

teardown_file() {
	if [ -z "${D:-}" ]; then return 0; fi
	# a stopped controller must not outlive a failed test
	if [ -f "$D/cluster/slurmctld.pid" ]; then
		kill -CONT "$(cat "$D/cluster/slurmctld.pid")" 2>/dev/null || true
	fi
	site_stop "$D"
}

setup() {
	[ -z "${SITE_SKIP:-}" ] || skip "$SITE_SKIP"
	S1="$D/shared/$U1"
	S2="$D/shared/$U2"
	cd "$D"
}

submit1() { site_submit $U1 -o "$S1/%j.log" -n1 --mem=200 "$@"; }

@test "slurmctld does not answer (busy, restarting): a clean on the node leaves a running job's pins and results alone" {
	cat >"$S1/busy.sh" <<JOB
#!/bin/bash
OUT=$OUT
mkdir -p "\$OUT"
echo first >"\$OUT/first"
stager stage -q "$S1/ds.tar.zst" >"$S1/busy.path"
stager collect -q "\$OUT" "$S1/busy-results"
echo second >"\$OUT/second"
touch "$S1/busy.ready"
sleep 300
JOB
	id=$(submit1 "$S1/busy.sh")
	wait_until 60 test -e "$S1/busy.ready"
	n=$(pins_of $U1 "$id")
	[ "$n" -eq 1 ]
	ctl=$(cat "$D/cluster/slurmctld.pid")
	kill -STOP "$ctl"
	run login_stager $U1 clean
	kill -CONT "$ctl"
	echo "$output"
	[ "$status" -eq 0 ]
	# squeue could not say: the job counts as alive
	n=$(pins_of $U1 "$id")
	[ "$n" -eq 1 ]
	[ "$(cat "$D/jobs/$id/out/second")" = second ]
	[ -z "$(ls -A "$D/scratch/$U1/kept" 2>/dev/null)" ]
	scancel "$id"
	wait_until 60 job_gone "$id"
	wait_until 60 sh -c "[ ! -e '$D/jobs/$id' ]"
	[ "$(cat "$S1/busy-results/second")" = second ]
}

@test "the epilog's clean runs out of time (another clean holds the user's cache): the job's uncollected results are not removed, and the log says where they are" {
	echo STAGER_EPILOG_CLEAN_TIME=3 >>"$D/prefix/etc/default/stager"
	cat >"$S1/slow.sh" <<JOB
#!/bin/bash
OUT=$OUT
mkdir -p "\$OUT"
echo first >"\$OUT/first"
stager collect -q "\$OUT" "$S1/slow-results"
echo second >"\$OUT/second"
touch "$S1/slow.ready"
sleep 300
JOB
	id=$(submit1 "$S1/slow.sh")
	wait_until 60 test -e "$S1/slow.ready"
	lock="$D/scratch/$U1/locks/cache"
	as_job_user $U1 flock "$lock" sleep 15 >/dev/null 2>&1 &
	holder=$!
	# (probed as the user: a lock file root made would be root's)
	wait_until 10 sh -c "! runuser -u $U1 -- flock -n '$lock' true"
	scancel "$id"
	wait_until 60 job_gone "$id"
	sed -i '/^STAGER_EPILOG_CLEAN_TIME=/d' "$D/prefix/etc/default/stager"
	cat "$S1/$id.log"
	[ "$(cat "$D/jobs/$id/out/second")" = second ]
	grep -q "stager clean --job took more than 3 s" "$S1/$id.log"
	grep -q "stay in $D/jobs/$id" "$S1/$id.log"
	wait_pid "$holder" 30 || true
	# the user's next clean on the node keeps them; collect --kept sends them
	run login_stager $U1 clean
	echo "$output"
	[ "$status" -eq 0 ]
	run login_stager $U1 collect --kept
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(cat "$S1/slow-results/second")" = second ]
	rm -rf "${D:?}/jobs/$id"
}

@test "a job's directory with read-only directories in it (an unpacked dataset): the epilog removes it all the same" {
	cat >"$S1/ro.sh" <<JOB
#!/bin/bash
stager unpack -q "$S1/ds.tar.zst" "\$SLURM_TMPDIR/ds"
chmod 0500 "\$SLURM_TMPDIR/ds" "\$SLURM_TMPDIR"
stat -c %a "\$SLURM_TMPDIR/ds/sub" >"$S1/ro.mode"
JOB
	id=$(submit1 "$S1/ro.sh")
	wait_until 60 job_gone "$id"
	cat "$S1/$id.log"
	[ "$(cat "$S1/ro.mode")" = 555 ]
	wait_until 30 sh -c "[ ! -e '$D/jobs/$id' ]"
}

@test "the prolog, for a job id an earlier job of another user left a directory of (read-only directories in it): removed as its owner, made afresh, the node not drained" {
	job=4294960001
	left="$D/jobs/$job"
	install -d -m 0700 -o $U1 "$left"
	as_job_user $U1 stager unpack -q "$S1/ds.tar.zst" "$left/ds"
	as_job_user $U1 chmod 0500 "$left/ds"
	run env -i SLURM_JOB_ID=$job SLURM_JOB_UID="$(id -u $U2)" SLURM_JOB_GID="$(id -g $U2)" \
		"$D/prefix/libexec/stager/prolog"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c %U:%a "$left")" = "$U2:700" ]
	[ -z "$(ls -A "$left")" ]
	rmdir "$left"
}

@test "the epilog's clean fails for a reason that is not about results (a scratch root that cannot be made): 'nothing to keep', and the job's directory is removed all the same" {
	job=4294960002
	dir="$D/jobs/$job"
	install -d -m 0700 -o $U1 "$dir"
	as_job_user $U1 sh -c "echo x >'$dir/f'"
	# the user's own settings name a scratch root under a file
	touch "$D/notadir"
	as_job_user $U1 sh -c "mkdir -p ~/.config/stager && echo 'scratch_root = $D/notadir/\$USER' >~/.config/stager/config"
	run env -i SLURM_JOB_ID=$job SLURM_JOB_USER=$U1 "$D/prefix/libexec/stager/epilog"
	as_job_user $U1 sh -c 'rm ~/.config/stager/config'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"stager epilog: job $job on "*": nothing to keep; clean failed: "*"'$D/notadir' is not a directory"* ]]
	[[ "$output" != *"could not be kept"* ]]
	[ ! -e "$dir" ]
}

@test "the epilog's clean fails after it opened the scratch root (its lock cannot be taken): the job's directory stays, said as what it is" {
	job=4294960004
	dir="$D/jobs/$job"
	install -d -m 0700 -o $U1 "$dir"
	as_job_user $U1 sh -c "echo x >'$dir/f'"
	# the user's scratch root opens, but clean cannot lock it: whether
	# the job left results it did not collect is unknown
	as_job_user $U1 env STAGER_SITE_CONFIG="$D/stager.conf" stager status -q
	as_job_user $U1 chmod 000 "$D/scratch/$U1/locks"
	run env -i SLURM_JOB_ID=$job SLURM_JOB_USER=$U1 "$D/prefix/libexec/stager/epilog"
	as_job_user $U1 chmod 700 "$D/scratch/$U1/locks"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"stager clean --job failed (exit 7): "*"cannot lock the cache"* ]]
	[[ "$output" == *"leaving $dir: results the job did not collect may be in it"* ]]
	[[ "$output" != *"nothing to keep"* ]]
	[[ "$output" != *"could not be kept"* ]]
	[ -f "$dir/f" ]
	rm -rf "$dir"
}

@test "results the epilog's clean cannot keep (kept/ is a file): said, and the job's directory with them stays" {
	job=4294960003
	dir="$D/jobs/$job"
	install -d -m 0700 -o $U1 "$dir"
	# a collect of the job's, then a result it never collected
	as_job_user $U1 env SLURM_JOB_ID=$job STAGER_SITE_CONFIG="$D/stager.conf" sh -c \
		"mkdir '$dir/out' && echo a >'$dir/out/a' && stager collect -q '$dir/out' '$S1/nk-results' && echo b >'$dir/out/b'"
	as_job_user $U1 sh -c "rm -rf '$D/scratch/$U1/kept' && touch '$D/scratch/$U1/kept'"
	run env -i SLURM_JOB_ID=$job SLURM_JOB_USER=$U1 "$D/prefix/libexec/stager/epilog"
	as_job_user $U1 rm "$D/scratch/$U1/kept"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"results not collected could not be kept; leaving $dir"* ]]
	[[ "$output" != *"nothing to keep"* ]]
	[ "$(cat "$dir/out/b")" = b ]
	rm -rf "${dir:?}"
}
