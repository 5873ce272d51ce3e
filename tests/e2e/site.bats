#!/usr/bin/env bats
# The Slurm prolog, task prolog and epilog of scripts/, run by hand as
# Slurm runs them (root, with Slurm's variables): what they make, and what
# they refuse to touch.  (tests/e2e/multinode.bats runs them under Slurm.)

load helpers

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root"
	T=$(reachable_mktemp stager-site)
	chmod 0755 "$T"
	cd "$T"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	# the hooks and the stager they run as the job's user are copied where
	# that user reaches them: the checkout may be private (a clone under
	# /root, a home of mode 0700)
	reachable_copy "$T/hooks" "$top"/scripts/slurm-*.sh "$STAGER"
	export SLURM_JOB_ID=4242 SLURM_JOB_UID=65534 SLURM_JOB_GID=65534 SLURM_JOB_USER=nobody
	export STAGER_JOB_TMP_BASE="$T/jobs" STAGER_BIN="$T/hooks/stager"
	# the site's scratch, where the job's user reaches it (not $TMPDIR,
	# which may be private to the one running the tests)
	mkdir -m 1777 "$T/scratch"
	echo "scratch_root = $T/scratch/\$USER" >"$T/stager.conf"
	export STAGER_SITE_CONFIG="$T/stager.conf"
}

prolog() { sh "$T/hooks/slurm-prolog.sh"; }
epilog() { sh "$T/hooks/slurm-epilog.sh"; }

@test "prolog makes the job's directory, the task prolog exports it, the epilog removes it" {
	prolog
	[ "$(stat -c '%U %a' "$T/jobs")" = "root 755" ]
	[ "$(stat -c '%U %a' "$T/jobs/4242")" = "nobody 700" ]
	run setpriv --reuid=65534 --regid=65534 --clear-groups sh "$T/hooks/slurm-task-prolog.sh"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | grep SLURM_TMPDIR)" = "export SLURM_TMPDIR=$T/jobs/4242" ]
	[ "$(echo "$output" | grep STAGER_SITE_CONFIG)" = "export STAGER_SITE_CONFIG=$T/stager.conf" ]
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "mkdir -p '$T/jobs/4242/a/b' && echo x >'$T/jobs/4242/a/b/f'"
	epilog
	[ ! -e "$T/jobs/4242" ]
	[ -d "$T/jobs" ]
}

@test "prolog refuses a base that a user could have planted (link, not root's, writable)" {
	mkdir "$T/precious"
	echo keep >"$T/precious/f"
	chmod 0700 "$T/precious"
	ln -s "$T/precious" "$T/jobs"
	run prolog
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "must be a directory owned by root"
	[ "$(stat -c '%U %a' "$T/precious")" = "root 700" ]
	[ ! -e "$T/precious/4242" ]
	rm "$T/jobs"
	mkdir -m 0777 "$T/jobs"
	run prolog
	[ "$status" -eq 1 ]
	rmdir "$T/jobs"
	mkdir "$T/jobs"
	chown 65534 "$T/jobs"
	run prolog
	[ "$status" -eq 1 ]
	[ ! -e "$T/jobs/4242" ]
}

@test "prolog: a leftover with the job's id is removed as its owner, links in it are not followed" {
	mkdir -m 0755 "$T/jobs"
	mkdir "$T/outside"
	echo keep >"$T/outside/f"
	mkdir "$T/jobs/4242"
	ln -s "$T/outside" "$T/jobs/4242/link"
	echo old >"$T/jobs/4242/old"
	chown -h -R 65534:65534 "$T/jobs/4242"
	prolog
	[ "$(cat "$T/outside/f")" = keep ]
	[ -z "$(ls -A "$T/jobs/4242")" ]
	[ "$(stat -c '%U %a' "$T/jobs/4242")" = "nobody 700" ]
}

@test "epilog leaves alone what is not the job's directory" {
	mkdir -m 0755 "$T/jobs"
	mkdir "$T/elsewhere"
	echo keep >"$T/elsewhere/f"
	ln -s "$T/elsewhere" "$T/jobs/4242"
	run epilog
	[ "$status" -eq 0 ]
	[ "$(cat "$T/elsewhere/f")" = keep ]
	rm "$T/jobs/4242"
	mkdir "$T/jobs/4242"
	echo root >"$T/jobs/4242/f" # root's, not the job user's
	run epilog
	[ "$status" -eq 0 ]
	[ "$(cat "$T/jobs/4242/f")" = root ]
}

@test "epilog takes STAGER_BIN and the base from /etc/default/stager" {
	unshare -m true 2>/dev/null || skip "needs mount namespaces (unshare -m)"
	mkdir -m 0755 "$T/jobs" "$T/default"
	mkdir "$T/jobs/4242"
	chown 65534:65534 "$T/jobs/4242"
	# a stager that is on no PATH: the epilog finds it only through the file
	printf '#!/bin/sh\necho "$*" >>%s/called\n' "$T" >"$T/my-stager"
	chmod 0755 "$T/my-stager"
	touch "$T/called"
	chmod 0666 "$T/called"
	printf 'STAGER_BIN=%s\nSTAGER_JOB_TMP_BASE=%s\n' "$T/my-stager" "$T/jobs" >"$T/default/stager"
	run env -u STAGER_BIN -u STAGER_JOB_TMP_BASE PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		unshare -m sh -c "mount --bind '$T/default' /etc/default && sh '$T/hooks/slurm-epilog.sh'"
	[ "$status" -eq 0 ]
	grep -q -- "clean --quiet --job 4242" "$T/called"
	[ ! -e "$T/jobs/4242" ]
}
