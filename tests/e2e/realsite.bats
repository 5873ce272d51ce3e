#!/usr/bin/env bats
# A real site: stager installed with `make install`, the installed prolog,
# task prolog and epilog in slurm.conf as the README says (slurmd runs
# them as root with no PATH, and nothing here adds one), jobs of ordinary
# users (tests/e2e/site.bash).  Each job pattern that used to lose
# results: a time limit during a background `collect --every` beside an
# exec'd program, a plain collect as the last line cut by KillWait,
# `stager run` without exec under an early warning, results the epilog
# cannot send; and two users' jobs on one node.

load helpers
load site

# realsite-cgroup.bats is this file under proctrack/cgroup, and
# realsite-container.bats under job_container/tmpfs (each job a private
# /tmp and /dev/shm; links to it): the same job patterns, with users of
# their own (the files run side by side, and site_stop ends its users'
# processes)
# The jobs write their results in OUT, under $SLURM_TMPDIR (the prolog's,
# on the node's disk: not the private /tmp of job_container/tmpfs, which
# Slurm removes before the epilog; see the last test).
OUT='$SLURM_TMPDIR/out'
case $BATS_TEST_FILENAME in
*-cgroup.bats) export PROCTRACK=cgroup U1=stgcg1 U2=stgcg2 ;;
*-container.bats) export JOB_CONTAINER=tmpfs U1=stgct1 U2=stgct2 ;;
*) U1=stgjob1 U2=stgjob2 ;;
esac
SITE_USERS="$U1 $U2"
export U1 U2

setup_file() {
	command -v slurmctld >/dev/null && [ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	command -v useradd >/dev/null || skip "needs useradd"
	D=$(mktemp -d /var/tmp/stager-site.XXXXXX)
	chmod 0755 "$D"
	export D
	# job_container/tmpfs's BasePath: a directory per job, outside /tmp
	[ -z "${JOB_CONTAINER:-}" ] || export JOB_CONTAINER_BASE="$D/jc"
	# the jobs' $SLURM_TMPDIR on a filesystem of its own, as on many
	# sites: results kept from there are copied to the scratch root
	mkdir -p "$D/jobs"
	# (a reason to skip goes to setup(): bats 1.8 fails a teardown_file
	# after a skip in setup_file)
	if ! mount -t tmpfs -o size=400m,mode=0755 tmpfs "$D/jobs"; then
		export SITE_SKIP="cannot mount a tmpfs"
		return 0
	fi
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
	head -c 3000000 /dev/urandom >"$S1/ds/sub/big"
	for i in $(seq 1 20); do echo "$i" >"$S1/ds/f$i"; done
	chown -R $U1 "$S1"
	as_job_user $U1 stager pack -q "$S1/ds" -o "$S1/ds.tar.zst" >/dev/null
	# the time limit hits while a background collect --every runs beside
	# an exec'd "training": checkpoints of 12 MB every 6 s, sent at 1 MB/s
	# (the collect never catches up; KillWait gives it 5 s at the end)
	cat >"$S1/limit.sh" <<JOB
#!/bin/bash
OUT=$OUT
mkdir -p "\$OUT"
stager collect --every 10s --bwlimit 1M "\$OUT" "$S1/limit-results" &
exec bash -c '
	i=0
	while :; do
		i=\$((i + 1))
		head -c 12000000 /dev/urandom >"\$0/.ckpt.tmp" && mv "\$0/.ckpt.tmp" "\$0/ckpt-\$i"
		echo "ckpt-\$i \$(sha256sum <"\$0/ckpt-\$i" | cut -c1-64)" >>"$S1/limit.written"
		sleep 6
	done' "\$OUT"
JOB
	site_submit $U1 -o "$S1/limit.log" -n1 --mem=200 --time=1 "$S1/limit.sh" >"$D/limit.id"
}

teardown_file() {
	if [ -z "${D:-}" ]; then return 0; fi
	site_stop "$D"
}

setup() {
	[ -z "${SITE_SKIP:-}" ] || skip "$SITE_SKIP"
	S1="$D/shared/$U1"
	S2="$D/shared/$U2"
	cd "$D"
}

submit1() { site_submit $U1 -o "$S1/%j.log" -n1 --mem=200 "$@"; }

@test "an ordinary user's job: the installed epilog, run as slurmd runs it, drops its pins and removes its directories; another user's job is untouched" {
	cat >"$S1/hold.sh" <<JOB
#!/bin/bash
echo "\$SLURM_TMPDIR" >"$S1/hold.tmpdir"
stager stage -q "$S1/ds.tar.zst" >"$S1/hold.path"
sleep 300
JOB
	install -m 0755 -o $U2 /dev/null "$S2/other.sh"
	cat >"$S2/other.sh" <<JOB
#!/bin/bash
echo "\$SLURM_TMPDIR" >"$S2/other.tmpdir"
echo mine >"\$SLURM_TMPDIR/mine"
sleep 300
JOB
	other=$(site_submit $U2 -o "$S2/%j.log" -n1 --mem=100 "$S2/other.sh")
	id=$(submit1 "$S1/hold.sh")
	wait_until 60 test -s "$S1/hold.path"
	wait_until 60 test -s "$S2/other.tmpdir"
	# the prolog's directory, exported by the task prolog
	[ "$(cat "$S1/hold.tmpdir")" = "$D/jobs/$id" ]
	[ "$(stat -c %U "$D/jobs/$id")" = $U1 ]
	[ "$(cat "$S1/hold.path")" = "$D/jobs/$id/ds/" ]
	n=$(pins_of $U1 "$id")
	[ "$n" -eq 1 ]
	scancel "$id"
	wait_until 60 job_gone "$id"
	# the epilog ran stager as the job's user: pin and directory gone
	wait_until 30 sh -c "[ ! -e '$D/jobs/$id' ]"
	n=$(pins_of $U1 "$id")
	[ "$n" -eq 0 ]
	# the other user's running job kept its directory and files
	[ "$(cat "$D/jobs/$other/mine")" = mine ]
	scancel "$other"
	wait_until 60 job_gone "$other"
	wait_until 30 sh -c "[ ! -e '$D/jobs/$other' ]"
}

@test "a plain collect as the job's last line, cut short by scancel and KillWait: the epilog keeps the results and sends them" {
	cat >"$S1/last.sh" <<JOB
#!/bin/bash
OUT=$OUT
mkdir -p "\$OUT"
head -c 30000000 /dev/urandom >"\$OUT/big"
echo small >"\$OUT/small"
sha256sum <"\$OUT/big" | cut -c1-64 >"$S1/last.sum"
stager collect --bwlimit 2M "\$OUT" "$S1/last-results"
JOB
	id=$(submit1 "$S1/last.sh")
	wait_until 60 sh -c "ls -a '$S1/last-results' 2>/dev/null | grep -q stager-tmp"
	scancel "$id"
	wait_until 60 job_gone "$id"
	wait_until 60 sh -c "[ ! -e '$D/jobs/$id' ]"
	cat "$S1/$id.log"
	[ "$(cat "$S1/last-results/small")" = small ]
	[ "$(sha256sum <"$S1/last-results/big" | cut -c1-64)" = "$(cat "$S1/last.sum")" ]
	# the job's log says what the epilog did
	grep -q "stager epilog" "$S1/$id.log"
	grep -q "collected kept results" "$S1/$id.log"
	# nothing stays kept, nothing of stager's in DEST
	run login_stager $U1 status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq '.kept | length')" -eq 0 ]
	[ -z "$(find "$S1/last-results" -name '.stager*')" ]
}

@test "stager run without exec under --signal=B:USR1: refused at once with the fix; with the signal trapped it runs" {
	cat >"$S1/noexec.sh" <<JOB
#!/bin/bash
#SBATCH --signal=B:USR1@50
stager run --collect out:"$S1/noexec-results" -- bash -c 'echo hi >\$STAGER_OUT/hi'
echo "run exited \$?" >"$S1/noexec.rc"
JOB
	cat >"$S1/trapped.sh" <<JOB
#!/bin/bash
#SBATCH --signal=B:USR1@50
trap '' USR1
stager run --collect out:"$S1/trapped-results" -- bash -c 'echo hi >\$STAGER_OUT/hi'
echo "run exited \$?" >"$S1/trapped.rc"
JOB
	a=$(submit1 --time=5 "$S1/noexec.sh")
	b=$(submit1 --time=5 "$S1/trapped.sh")
	wait_until 60 job_gone "$a"
	wait_until 60 job_gone "$b"
	cat "$S1/$a.log" "$S1/$b.log"
	[ "$(cat "$S1/noexec.rc")" = "run exited 1" ]
	grep -q "batch shell dies of the early warning" "$S1/$a.log"
	grep -q "exec stager run" "$S1/$a.log"
	[ ! -e "$S1/noexec-results" ]
	[ "$(cat "$S1/trapped.rc")" = "run exited 0" ]
	[ "$(cat "$S1/trapped-results/hi")" = hi ]
}

@test "results the epilog cannot send: the job's log and stager status on a login node say where they are; the one command brings them back" {
	cat >"$S1/nosend.sh" <<JOB
#!/bin/bash
OUT=$OUT
mkdir -p "\$OUT"
echo first >"\$OUT/first"
stager collect "\$OUT" "$S1/nosend-results"
# DEST can no longer be written (a quota, a read-only export ...)
chmod 0555 "$S1/nosend-results"
echo second >"\$OUT/second"
touch "$S1/nosend.ready"
sleep 300
JOB
	id=$(submit1 "$S1/nosend.sh")
	wait_until 60 test -e "$S1/nosend.ready"
	scancel "$id"
	wait_until 60 job_gone "$id"
	wait_until 90 grep -q "are kept on" "$S1/$id.log"
	cat "$S1/$id.log"
	node=$(scontrol -o show job "$id" | grep -o ' NodeList=[^ ]*' | cut -d= -f2)
	[ -n "$node" ]
	line=$(grep "are kept on" "$S1/$id.log")
	[[ "$line" == *"$S1/nosend-results"*"kept on $node"*"srun -w $node -N1 -n1 stager collect --kept"* ]]
	# on a login node (another host name): status names the node and job
	run unshare --uts sh -c "hostname login1 && $(declare -f as_job_user login_stager); SITE='$SITE' SLURM_CONF='$SLURM_CONF' login_stager $U1 status --json"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r '.kept_elsewhere[0].node')" = "$node" ]
	[ "$(echo "$output" | jq -r '.kept_elsewhere[0].job')" = "$id" ]
	[ "$(echo "$output" | jq -r '.kept_elsewhere[0].dest')" = "$S1/nosend-results" ]
	# the user mends DEST and runs the command the log gave
	chmod 0755 "$S1/nosend-results"
	cmd=$(echo "$line" | sed 's/.*`\(srun [^`]*\)`.*/\1/')
	run as_job_user $U1 $cmd
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(cat "$S1/nosend-results/second")" = second ]
	[ "$(cat "$S1/nosend-results/first")" = first ]
	run login_stager $U1 status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq '.kept | length')" -eq 0 ]
	[ -z "$(ls -A /home/$U1/.local/state/stager/kept)" ]
}

@test "the time limit hits during a background collect --every beside an exec'd program: every checkpoint written reaches DEST" {
	id=$(cat "$D/limit.id")
	wait_until 150 job_gone "$id"
	wait_until 90 sh -c "[ ! -e '$D/jobs/$id' ]"
	cat "$S1/limit.log"
	n=$(wc -l <"$S1/limit.written")
	echo "$n checkpoints written"
	[ "$n" -ge 5 ]
	while read -r name sum; do
		[ "$(sha256sum <"$S1/limit-results/$name" | cut -c1-64)" = "$sum" ]
	done <"$S1/limit.written"
	grep -q "collected kept results" "$S1/limit.log"
}

@test "a collect from the job's /tmp: under job_container/tmpfs, said at once that Slurm removes it before the epilog; elsewhere nothing to say" {
	rm -rf "/tmp/out-$U1" "/tmp/cache-$U1"
	cat >"$S1/private.sh" <<JOB
#!/bin/bash
mkdir -p /tmp/out-$U1
echo x >/tmp/out-$U1/x
stager collect /tmp/out-$U1 "$S1/private-results"
echo "rc=\$?" >"$S1/private.rc"
# under job_container/tmpfs the job's /tmp is its own
[ -e "/tmp/private-probe-$U1" ] && echo "host /tmp seen" >>"$S1/private.rc"
# a cache there would go with each job: doctor says so
STAGER_SCRATCH_ROOT=/tmp/cache-$U1 stager doctor >"$S1/private.doctor" 2>&1
JOB
	touch "/tmp/private-probe-$U1"
	id=$(submit1 "$S1/private.sh")
	wait_until 60 job_gone "$id"
	rm -f "/tmp/private-probe-$U1"
	cat "$S1/$id.log" "$S1/private.rc"
	[ "$(cat "$S1/private-results/x")" = x ]
	warning="warning: '/tmp/out-$U1' is on '/tmp', a mount of this job's own that Slurm removes with the job, before the epilog"
	fail="^FAIL  scratch root .*'/tmp/cache-$U1' is on '/tmp', a mount of this job's own (job_container/tmpfs)"
	if [ -n "${JOB_CONTAINER:-}" ]; then
		[ "$(cat "$S1/private.rc")" = rc=0 ]
		grep -q "$warning" "$S1/$id.log"
		grep -q "$fail" "$S1/private.doctor"
		# nothing of it is kept, and the host's /tmp never saw it
		[ ! -e "/tmp/out-$U1" ]
	else
		# the host's /tmp: a plain collect, nothing to warn of
		[ "$(cat "$S1/private.rc")" = "rc=0
host /tmp seen" ]
		! grep -q "a mount of this job's own" "$S1/$id.log" || false
		! grep -q "a mount of this job's own" "$S1/private.doctor" || false
		[ "$(stat -c %U "/tmp/out-$U1/x")" = "$U1" ]
	fi
	rm -rf "/tmp/out-$U1" "/tmp/cache-$U1"
}

@test "a scancel'ed job that had a plain stager mount: the mount and its process are gone, the job's directories too" {
	[ -e /dev/fuse ] && command -v fusermount3 >/dev/null || skip "needs /dev/fuse and fusermount3"
	user_fuse_unmount_or_skip
	# (libfuse opens /dev/fuse as the user: Debian makes it 0666)
	fuse_for_users
	install -d -o $U1 "$S1/mnt"
	cat >"$S1/mount.sh" <<JOB
#!/bin/bash
stager mount "$S1/ds.tar.zst" "$S1/mnt" || exit
cmp "$S1/mnt/sub/big" "$S1/ds/sub/big" && echo same >"$S1/mount.read"
grep " $S1/mnt " /proc/self/mountinfo >"$S1/mount.info"
sleep 300
JOB
	id=$(submit1 "$S1/mount.sh")
	wait_until 60 test -s "$S1/mount.read"
	[ "$(cat "$S1/mount.read")" = same ]
	# its server: the user's process that holds the mount (its record)
	pid=$(grep -lx "$S1/mnt" "$D/scratch/$U1/mounts"/pid-* | sed 's|.*/pid-||; s|-.*||')
	running "$pid"
	[ "$(stat -c %U /proc/"$pid")" = $U1 ]
	scancel "$id"
	wait_until 60 job_gone "$id"
	wait_until 30 sh -c "[ ! -e '$D/jobs/$id' ]"
	wait_until 15 sh -c "! kill -0 $pid 2>/dev/null"
	! awk -v m="$S1/mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo || false
	[ -z "$(ls -A "$S1/mnt")" ]
	run login_stager $U1 status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq '.mounts | length')" -eq 0 ]
	# no pin of the job's is left on the pack's entry
	[ "$(pins_of $U1 "$id")" -eq 0 ]
}
