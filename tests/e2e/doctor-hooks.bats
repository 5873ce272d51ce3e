#!/usr/bin/env bats
# stager doctor's check of the Slurm hooks: each hook run for a fake job
# the way slurmd runs it (root, no PATH, no HOME, cwd /; the task prolog
# as the job's user), each file checked for who can change it, and what
# the round trip leaves removed.  The hooks are written here (good ones,
# and each way of going wrong), copied from an install (make install), or
# named by a real Slurm's slurm.conf.

load helpers

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (the hooks run as root and as nobody)"
	T=$(reachable_mktemp stager-hooks)
	cd "$T"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SLOT_DIR="$T/slots"
	unset SLURM_JOB_ID SLURM_TMPDIR SLURM_CONF
	install -d -m 0755 "$T/jobs" "$T/hooks"
	# what the hooks saw, written by root and by the job's user
	for f in prolog task-prolog epilog; do
		install -m 0666 /dev/null "$T/seen.$f"
	done
}

teardown() {
	cd /
	if [ -f "$T/cluster/slurm.conf" ]; then "$top/scripts/slurm-test-cluster.sh" stop "$T/cluster"; fi
	if [ -s "$T/child.pid" ]; then kill -9 "$(cat "$T/child.pid")" 2>/dev/null || true; fi
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

# DIR: a prolog, task prolog and epilog that work with slurmd's bare
# environment (every command by its full path), the job's directory under
# $T/jobs; each writes down who ran it, where, and with what environment.
good_hooks() {
	local d=$1
	mkdir -p "$d"
	cat >"$d/prolog" <<-EOF
		#!/bin/sh
		{ /usr/bin/id -u; /bin/pwd; /usr/bin/env; } >$T/seen.prolog
		/usr/bin/install -d -m 0700 -o "\$SLURM_JOB_UID" -g "\$SLURM_JOB_GID" "$T/jobs/\$SLURM_JOB_ID"
	EOF
	cat >"$d/task-prolog" <<-EOF
		#!/bin/sh
		{ /usr/bin/id -u; /bin/pwd; /usr/bin/env; } >$T/seen.task-prolog
		echo "export SLURM_TMPDIR=$T/jobs/\$SLURM_JOB_ID"
	EOF
	cat >"$d/epilog" <<-EOF
		#!/bin/sh
		{ /usr/bin/id -u; /bin/pwd; /usr/bin/env; } >$T/seen.epilog
		dir="$T/jobs/\$SLURM_JOB_ID"
		[ -d "\$dir" ] || exit 0
		/usr/bin/setpriv --reuid="\$SLURM_JOB_UID" --regid="\$SLURM_JOB_GID" --clear-groups \\
			/usr/bin/find "\$dir" -xdev -mindepth 1 -delete && /bin/rmdir "\$dir"
	EOF
	chmod 0755 "$d"/*
}

# The fake job's id in doctor's output.
job_id() { echo "$output" | sed -n 's/.* for job \([0-9]*\):.*/\1/p' | head -n 1; }

@test "good hooks: each run as slurmd runs it, the job's directory made, exported and removed; JSON" {
	good_hooks "$T/hooks"
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^ok    slurm hooks .*'$T/hooks' (--hooks)"
	echo "$output" | grep -q "^ok    prolog  .*'$T/hooks/prolog' (root's, mode 0755)"
	echo "$output" | grep -q "^ok    prolog run .* as root for job 4294967[0-9]*: exit 0"
	echo "$output" | grep -q "^ok    task-prolog run .* as nobody .*exports SLURM_TMPDIR=$T/jobs/4294967[0-9]* (nobody's, mode 0700)"
	echo "$output" | grep -q "^ok    epilog run .* as root .*: exit 0"
	echo "$output" | grep -q "^ok    job directory .*the job's files put in it, removed by the epilog"
	id=$(job_id)
	[ "$id" -ge 4294967000 ]
	[ "$id" -le 4294967255 ]
	# as slurmd runs them: root (the task prolog: the job's user), cwd /,
	# the job's variables and no PATH, no HOME
	[ "$(sed -n 1p "$T/seen.prolog")" = 0 ]
	[ "$(sed -n 1p "$T/seen.task-prolog")" = 65534 ]
	[ "$(sed -n 1p "$T/seen.epilog")" = 0 ]
	[ "$(sed -n 2p "$T/seen.prolog")" = / ]
	grep -qx "SLURM_JOB_ID=$id" "$T/seen.prolog"
	grep -qx "SLURM_JOB_USER=nobody" "$T/seen.epilog"
	grep -qx "SLURM_JOB_UID=65534" "$T/seen.task-prolog"
	grep -qx "SLURM_SCRIPT_CONTEXT=epilog_slurmd" "$T/seen.epilog"
	run grep -hE '^(PATH|HOME|USER|STAGER_[A-Z_]*)=' "$T/seen.prolog" "$T/seen.task-prolog" "$T/seen.epilog"
	[ "$status" -eq 1 ]
	[ -z "$(ls -A "$T/jobs")" ]
	# JSON: each hook's run, with what it printed and exported
	"$STAGER" doctor --json --hooks "$T/hooks" "$T" >doctor.json
	jq -e '.failed == 0 and .warnings == 0' doctor.json
	jq -e --arg t "$T" '[.checks[] | select(.check == "task-prolog run")][0].hook
		| .user == "nobody" and .exit == 0 and .ran and .timed_out == false
		and (.exports.SLURM_TMPDIR | startswith($t + "/jobs/4294967"))
		and .job_dir == .exports.SLURM_TMPDIR' doctor.json
	jq -e '[.checks[] | select(.check == "epilog run")][0].hook | .user == "root" and .stderr == []' doctor.json
	jq -e '[.checks[] | select(.check == "job directory")][0].job_dir.left == false' doctor.json
	jq -e --arg t "$T" '[.checks[] | select(.check == "epilog")][0].hook
		| .ran == false and .mode == "0755" and .owner == 0 and .path == $t + "/hooks/epilog"' doctor.json
}

@test "the epilog of before the fix (timeout runuser, with no PATH) leaves the job's directory: FAIL, and doctor removes it" {
	good_hooks "$T/hooks"
	# scripts/slurm-epilog.sh as it was (39bc389): runuser is in /usr/sbin,
	# which timeout's execvp does not search without a PATH (exit 127,
	# said to /dev/null); root's rmdir then fails on what the job left
	cat >"$T/hooks/epilog" <<-EOF
		#!/bin/sh
		[ -n "\${SLURM_JOB_ID:-}" ] && [ -n "\${SLURM_JOB_USER:-}" ] || exit 0
		base=$T/jobs
		as_user() {
			if [ "\$(id -u)" -eq 0 ] && [ "\$SLURM_JOB_USER" != root ]; then
				timeout 120 runuser -u "\$SLURM_JOB_USER" -- "\$@"
			else
				timeout 120 "\$@"
			fi
		}
		case \$SLURM_JOB_ID in *[!0-9]*) exit 0 ;; esac
		dir="\$base/\$SLURM_JOB_ID"
		if [ -d "\$dir" ] && [ ! -L "\$dir" ] &&
			[ "\$(stat -c %U "\$dir" 2>/dev/null)" = "\$SLURM_JOB_USER" ]; then
			as_user rm -rf --one-file-system -- "\$dir" >/dev/null 2>&1
			rmdir "\$dir" 2>/dev/null
		fi
		exit 0
	EOF
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 7 ]
	id=$(job_id)
	echo "$output" | grep -q "^ok    epilog run " # exit 0, nothing said: only the round trip tells
	echo "$output" | grep -q "^FAIL  job directory  *'$T/jobs/$id' still there after the epilog; doctor removed it"
	echo "$output" | grep -q -- "-> the epilog must remove it.*env -i SLURM_JOB_ID=$id SLURM_JOB_UID=65534 SLURM_JOB_GID=65534 SLURM_JOB_USER=nobody $T/hooks/epilog"
	# doctor removed what the job left, and nothing else
	[ ! -e "$T/jobs/$id" ]
	[ -d "$T/jobs" ]
	[ -f "$T/hooks/epilog" ]
	"$STAGER" doctor --json --hooks "$T/hooks" "$T" >doctor.json || true
	jq -e '.failed == 1 and ([.checks[] | select(.check == "job directory")][0]
		| .status == "fail" and .job_dir.left)' doctor.json
}

@test "a hook that exits 127 (a command not on slurmd's PATH): FAIL, its stderr shown, the fix said" {
	good_hooks "$T/hooks"
	cat >"$T/hooks/prolog" <<-EOF
		#!/bin/sh
		exec /usr/bin/timeout 5 runuser -u "\$SLURM_JOB_USER" -- /bin/true
	EOF
	# from a root shell it works: only slurmd's bare environment breaks it
	env -i PATH=/usr/sbin:/usr/bin:/bin SLURM_JOB_USER=nobody "$T/hooks/prolog"
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "^FAIL  prolog run .*'$T/hooks/prolog' as root for job [0-9]*: exit 127 in [0-9.]* s; 1 line on stderr"
	echo "$output" | grep -q "^      | /usr/bin/timeout: failed to run command 'runuser'"
	echo "$output" | grep -q -- "-> a command was not found: slurmd gives hooks no PATH"
	# the rest of the round trip still ran (the prolog made no directory)
	echo "$output" | grep -q "^FAIL  task-prolog run .*exports SLURM_TMPDIR=$T/jobs/[0-9]*, which does not exist"
	echo "$output" | grep -q "^ok    epilog run"
	"$STAGER" doctor --json --hooks "$T/hooks" "$T" >doctor.json || true
	jq -e '[.checks[] | select(.check == "prolog run")][0]
		| .status == "fail" and .hook.exit == 127 and (.hook.stderr | length) == 1
		and (.hook.stderr[0] | test("runuser"))' doctor.json
}

@test "a hook that others can change is a root hole: FAIL and not run (writable, not root's, in a writable directory, missing)" {
	good_hooks "$T/hooks"
	for h in prolog task-prolog epilog; do
		printf '#!/bin/sh\ntouch %s/ran.%s\n' "$T" "$h" >"$T/hooks/$h"
	done
	chmod 0757 "$T/hooks/prolog"
	chmod 0755 "$T/hooks/task-prolog" "$T/hooks/epilog"
	chown 65534 "$T/hooks/task-prolog"
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "^FAIL  prolog  *'$T/hooks/prolog' is mode 0757, owner 0: .*root on this node (not run)"
	echo "$output" | grep -q "^FAIL  task-prolog  *'$T/hooks/task-prolog' is mode 0755, owner 65534"
	echo "$output" | grep -q -- "-> chown root:root it and chmod go-w it"
	echo "$output" | grep -q "^ok    epilog  *'$T/hooks/epilog' (root's, mode 0755)"
	[ ! -e "$T/ran.prolog" ]
	[ ! -e "$T/ran.task-prolog" ]
	[ -e "$T/ran.epilog" ] # the one that is safe ran
	"$STAGER" doctor --json --hooks "$T/hooks" "$T" >doctor.json || true
	jq -e '[.checks[] | select(.check == "prolog")][0] | .status == "fail" and .hook.mode == "0757" and .hook.ran == false' doctor.json
	jq -e '[.checks[] | select(.check == "task-prolog")][0].hook.owner == 65534' doctor.json
	jq -e '[.checks[] | select(.check == "prolog run" or .check == "task-prolog run")] == []' doctor.json
	# a directory others can write: any of its hooks can be replaced
	rm -f "$T"/ran.*
	chown 0 "$T/hooks/task-prolog"
	chmod 0755 "$T/hooks/prolog"
	chmod 0777 "$T/hooks"
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 7 ]
	[ "$(echo "$output" | grep -c "is in '$T/hooks' (mode 0777, owner 0), which others can change")" -eq 3 ]
	for h in prolog task-prolog epilog; do
		[ ! -e "$T/ran.$h" ]
	done
	# a hook that is not there
	chmod 0755 "$T/hooks"
	rm "$T/hooks/task-prolog"
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "^FAIL  task-prolog  *'$T/hooks/task-prolog': No such file or directory"
	[ -e "$T/ran.prolog" ]
}

@test "an epilog that says something on stderr fails, though it exits 0" {
	good_hooks "$T/hooks"
	printf 'echo "stager epilog: job $SLURM_JOB_ID: something went wrong" >&2\nexit 0\n' >>"$T/hooks/epilog"
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "^FAIL  epilog run .*: exit 0 in [0-9.]* s; 1 line on stderr"
	echo "$output" | grep -q "^      | stager epilog: job 4294967[0-9]*: something went wrong"
	# the directory was removed all the same
	echo "$output" | grep -q "^ok    job directory"
	[ -z "$(ls -A "$T/jobs")" ]
}

@test "a hook that hangs is killed after 60 s with what it started; a child that keeps its stdout holds nothing" {
	good_hooks "$T/hooks"
	cat >"$T/hooks/prolog" <<-EOF
		#!/bin/sh
		/bin/sleep 1000 &
		echo \$! >$T/child.pid
		exec /bin/sleep 1000
	EOF
	start=$(date +%s)
	run timeout 120 "$STAGER" doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "^FAIL  prolog run .*: still running after 60 s: killed"
	echo "$output" | grep -q -- "-> find what it waits for"
	# its whole process group is gone
	child=$(cat "$T/child.pid")
	wait_until 10 eval "! running $child"
	if [ -z "$SAN_FLAGS" ]; then [ $(($(date +%s) - start)) -lt 90 ]; fi
	# a hook whose child keeps stdout open: its exit is what counts
	cat >"$T/hooks/prolog" <<-EOF
		#!/bin/sh
		/bin/sleep 1000 &
		echo \$! >$T/child.pid
		/usr/bin/install -d -m 0700 -o "\$SLURM_JOB_UID" -g "\$SLURM_JOB_GID" "$T/jobs/\$SLURM_JOB_ID"
	EOF
	start=$(date +%s)
	run stager doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^ok    prolog run .*: exit 0"
	if [ -z "$SAN_FLAGS" ]; then [ $(($(date +%s) - start)) -lt 20 ]; fi
}

@test "--hook-user: the fake job is that user's; an unknown user is a usage error" {
	good_hooks "$T/hooks"
	run stager doctor --hook-user daemon --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^ok    task-prolog run .* as daemon .*(daemon's, mode 0700)"
	grep -qx "SLURM_JOB_USER=daemon" "$T/seen.prolog"
	grep -qx "SLURM_JOB_UID=$(id -u daemon)" "$T/seen.epilog"
	[ "$(sed -n 1p "$T/seen.task-prolog")" = "$(id -u daemon)" ]
	run stager doctor --hook-user no-such-user-here --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "no user 'no-such-user-here'"
}

@test "not root: one line says the hooks were skipped, and none ran" {
	good_hooks "$T/hooks"
	as_user_setup
	install -d -m 0700 -o 65534 "$T/scratch-nobody"
	install -d -m 1777 "$T/slots-nobody"
	run as_user env HOME="$T" STAGER_SCRATCH_ROOT="$T/scratch-nobody" STAGER_SLOT_DIR="$T/slots-nobody" \
		"$AS_USER_STAGER" doctor --hooks "$T/hooks" "$T"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^ok    slurm hooks  *skipped: run as root to check the Slurm hooks$"
	[ "$(echo "$output" | grep -cE "^(ok|warn|FAIL) +(prolog|task-prolog|epilog) run ")" -eq 0 ]
	[ ! -s "$T/seen.prolog" ]
}

@test "the hooks slurm.conf names, from a real Slurm: found through scontrol, a glob's every file run; no Slurm: a warning" {
	command -v slurmctld >/dev/null || skip "needs slurm-wlm"
	good_hooks "$T/hooks"
	mkdir "$T/hooks/epilog.d"
	mv "$T/hooks/epilog" "$T/hooks/epilog.d/10-clean"
	printf '#!/bin/sh\necho "$SLURM_JOB_ID" >%s/second-epilog\n' "$T" >"$T/hooks/epilog.d/20-note"
	chmod 0755 "$T/hooks/epilog.d/20-note"
	SLURM_CONF=$(PROLOG="$T/hooks/prolog" TASK_PROLOG="$T/hooks/task-prolog" \
		"$top/scripts/slurm-test-cluster.sh" start "$T/cluster" "$T/hooks/epilog.d/*")
	export SLURM_CONF
	wait_until 20 scontrol show config >/dev/null
	run stager doctor "$T"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^ok    slurm hooks  *slurm.conf (scontrol show config) names Prolog, TaskProlog, Epilog"
	echo "$output" | grep -q "^ok    epilog run  *'$T/hooks/epilog.d/10-clean'"
	echo "$output" | grep -q "^ok    epilog run  *'$T/hooks/epilog.d/20-note'"
	echo "$output" | grep -q "^ok    job directory .*removed by the epilog"
	[ "$(cat "$T/second-epilog")" = "$(job_id)" ]
	# what slurmd would tell them of the cluster
	grep -qx "SLURM_CLUSTER_NAME=stagertest" "$T/seen.prolog"
	grep -qx "SLURM_CONF=$SLURM_CONF" "$T/seen.prolog"
	# a Slurm that cannot be asked (no scontrol here): said, with what to
	# do.  (scontrol itself may take a minute to give up on a slurm.conf
	# that is gone: not tested here.)
	: >"$T/seen.prolog"
	PATH=/nonexistent run "$STAGER" doctor "$T"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^warn  slurm hooks  *Slurm is not reachable (\`scontrol show config\` could not run)"
	echo "$output" | grep -q -- "-> run doctor where scontrol reaches Slurm, or name the hooks: stager doctor --hooks DIR"
	[ ! -s "$T/seen.prolog" ]
}

# THE INSTALLED HOOKS: `make install` puts scripts/slurm-*.sh in
# PREFIX/libexec/stager with this install's paths written in; run as
# slurmd runs them (their settings from SYSCONFDIR/default/stager, as on a
# site), every check must pass.  This is the test of the real hooks: it
# fails while they are broken under slurmd (as of 08586cf the epilog's
# `rm -rf` of the job's directory, run as the job's user, cannot remove
# the directory itself from the root-owned base, and says "cannot remove"
# on stderr for every job, though root's rmdir then removes it).
@test "the installed hooks (make install) pass the round trip as slurmd runs them" {
	make -s -C "$top" B="${B:-build}" install PREFIX="$T/prefix" SYSCONFDIR="$T/prefix/etc" >/dev/null
	install -d -m 0755 "$T/prefix/etc/default"
	install -d -m 1777 "$T/site-scratch" "$T/site-slots"
	printf 'scratch_root = %s/site-scratch/$USER\nslot_dir = %s/site-slots\n' "$T" "$T" >"$T/stager.conf"
	printf 'STAGER_JOB_TMP_BASE=%s/jobs\nSTAGER_SITE_CONFIG=%s/stager.conf\n' "$T" "$T" \
		>"$T/prefix/etc/default/stager"
	run stager doctor --hooks "$T/prefix/libexec/stager" "$T"
	echo "$output"
	echo "$output" | grep -q "^ok    prolog run "
	echo "$output" | grep -q "^ok    task-prolog run .*exports SLURM_TMPDIR=$T/jobs/[0-9]* (nobody's, mode 0700)"
	echo "$output" | grep -q "^ok    job directory .*removed by the epilog"
	echo "$output" | grep -q "^ok    epilog run "
	[ "$status" -eq 0 ]
	[ -z "$(ls -A "$T/jobs")" ]
}

# Data gravity's step of the installed epilog needs the node's name in
# Slurm, which only slurmd gives: on a host that is no Slurm node (no
# cluster here: `scontrol show node` knows nothing) doctor says the step
# is skipped, the epilog passes, and nothing is left in the state
# directory (before, `scontrol show node HOST` failed on the epilog's
# stderr and node-features.HOST.lock stayed).
@test "off a Slurm node: the installed epilog with node_features = yes passes, its features step skipped with a note, no lock file" {
	make -s -C "$top" B="${B:-build}" install PREFIX="$T/prefix" SYSCONFDIR="$T/prefix/etc" >/dev/null
	install -d -m 0755 "$T/prefix/etc/default"
	install -d -m 1777 "$T/site-scratch" "$T/site-slots"
	printf 'scratch_root = %s/site-scratch/$USER\nslot_dir = %s/site-slots\nnode_features = yes\n' \
		"$T" "$T" >"$T/stager.conf"
	printf 'STAGER_JOB_TMP_BASE=%s/jobs\nSTAGER_SITE_CONFIG=%s/stager.conf\nSTAGER_STATE_DIR=%s/state\n' \
		"$T" "$T" "$T" >"$T/prefix/etc/default/stager"
	host=$(hostname -s)
	run stager doctor --hooks "$T/prefix/libexec/stager" "$T"
	echo "$output"
	echo "$output" | grep -q "^ok    node features .*skipped: this host is not a Slurm node (\`scontrol show node $host\` does not know it)"
	echo "$output" | grep -q "^ok    epilog run "
	[ "$status" -eq 0 ]
	[ ! -e "$T/state" ]
	# root's update by hand for a node Slurm does not know: refused,
	# nothing made (no state directory, no lock)
	export STAGER_SITE_CONFIG="$T/stager.conf"
	run stager features --update --node "$host" --user nobody --state-dir "$T/state" </dev/null
	[ "$status" -eq 6 ]
	[[ $output == *"scontrol show node $host failed: is $host a node of this cluster?"* ]]
	[ ! -e "$T/state" ]
}
