#!/usr/bin/env bats
# A site as its administrator first sets it up (issue #37): stager
# installed with `make install`, the hooks in slurm.conf as the admin
# guide says, the site's settings written once (scratch_root =
# SCRATCH/stager/$USER, slot_dir on the node's disk), and nothing else:
# three nodes whose node-local disk (SCRATCH, private to each node) has a
# top of root's, mode 0755, with no shared parent of the scratch roots, no
# reader slots, no job base on it; nobody ran `stager doctor` there.  An
# ordinary user's first job must stage, plain and --all-nodes, and
# `find "$DATA"` must see every file; the epilog must remove the job's
# directory and say nothing false.  The user is this file's own (the
# realsite*.bats files run side by side).

load helpers
load site

U=stgfresh
SITE_USERS=$U

setup_file() {
	command -v slurmctld >/dev/null && command -v unshare >/dev/null &&
		[ "$(id -u)" -eq 0 ] || skip "needs root and slurm-wlm"
	command -v useradd >/dev/null || skip "needs useradd"
	D=$(reachable_mktemp stager-fresh)
	export D
	# each node's disk, bind-mounted at SCRATCH on that node (made by
	# slurm-test-cluster.sh: root's, 0755, empty)
	export SCRATCH="$D/node-scratch"
	for n in n1 n2 n3; do install -d -m 0755 "$D/cluster/nodes/$n"; done
	NODES=3 site_start "$D" 2>"$D/start.err" || {
		cat "$D/start.err" >&2
		if grep -q '^slurm-test-cluster: cannot' "$D/start.err"; then
			SITE_SKIP=$(grep -m1 '^slurm-test-cluster: cannot' "$D/start.err")
			export SITE_SKIP
			return 0
		fi
		return 1
	}
	# the admin guide's setup: the site's settings once, in one place
	printf 'scratch_root = %s/stager/$USER\nslot_dir = %s/slots\n' "$SCRATCH" "$SCRATCH" >"$D/stager.conf"
	sed -i "s|^STAGER_JOB_TMP_BASE=.*|STAGER_JOB_TMP_BASE=$SCRATCH/jobs|" "$D/prefix/etc/default/stager"
	grep -qx "STAGER_JOB_TMP_BASE=$SCRATCH/jobs" "$D/prefix/etc/default/stager"
	# a dataset on the shared filesystem, the user's
	S="$D/shared/$U"
	mkdir -p "$S/ds/sub/deeper"
	head -c 3000000 /dev/urandom >"$S/ds/sub/big"
	for i in $(seq 1 30); do echo "$i" >"$S/ds/f$i"; done
	echo deep >"$S/ds/sub/deeper/x"
	ln -s f1 "$S/ds/link"
	install -d -m 0755 "$S/out"
	chown -R "$U" "$S"
	as_job_user "$U" stager pack -q "$S/ds" -o "$S/ds.tar.zst" >/dev/null
	find "$S/ds" -type f | wc -l >"$D/nfiles"
}

teardown_file() {
	[ -n "${D:-}" ] || return 0
	site_stop "$D"
}

setup() {
	[ -z "${SITE_SKIP:-}" ] || skip "$SITE_SKIP"
	S="$D/shared/$U"
	N=$(cat "$D/nfiles")
	cd "$D"
}

# Node N's disk, as the host sees it.
disk() { echo "$D/cluster/nodes/$1"; }

# Submit JOB (the script text on stdin) as the user with sbatch ARGS;
# wait for it; its id.
job() {
	local name=$1 id
	shift
	{
		echo '#!/bin/bash'
		cat
	} >"$S/$name.sh"
	chown "$U" "$S/$name.sh"
	id=$(site_submit "$U" -o "$S/out/$name.log" --mem=200 "$@" "$S/$name.sh")
	[ -n "$id" ] || return 1
	wait_until 180 job_gone "$id" || return 1
	cat "$S/out/$name.log" >&2
	echo "$id"
}

# The job's log says nothing of stager's epilog or of a failure: no
# "could not be kept", no "cannot create", no "leaving" (grep finds none).
log_clean() {
	run grep -E "stager epilog|could not be kept|cannot create|leaving|nothing to keep" "$S/out/$1.log"
	[ "$status" -eq 1 ]
}

# Node N is as the administrator left it: its disk's top root's 0755,
# nothing on it.
fresh() {
	[ "$(stat -c %U:%a "$(disk "$1")")" = root:755 ]
	[ -z "$(ls -A "$(disk "$1")")" ]
}

@test "a fresh node: an ordinary user's first job stages, find sees every file, the epilog removes the job's directory and says nothing" {
	fresh n1
	id=$(job plain -w n1 -N1 -n1 <<JOB
DATA=\$(stager stage "$S/ds.tar.zst")
echo "rc=\$?"
echo "data=\$DATA"
echo "files=\$(find "\$DATA" -type f | wc -l)"
stager stage --json "$S/ds.tar.zst" >"$S/out/plain.json"
JOB
	)
	[ -n "$id" ]
	grep -qx "rc=0" "$S/out/plain.log"
	grep -qx "data=$SCRATCH/jobs/$id/ds/" "$S/out/plain.log"
	grep -qx "files=$N" "$S/out/plain.log"
	# --json's path: the same, with its '/'
	jq -e --arg p "$SCRATCH/jobs/$id/ds/" '.path == $p' "$S/out/plain.json"
	# what the prolog made, as root, from the site's settings
	[ "$(stat -c %U:%a "$(disk n1)/stager")" = root:1777 ]
	[ "$(stat -c %U:%a "$(disk n1)/slots")" = root:1777 ]
	[ "$(stat -c %U:%a "$(disk n1)/stager/$U")" = "$U:700" ]
	# the epilog: the job's directory gone, nothing said
	wait_until 30 sh -c "[ ! -e '$(disk n1)/jobs/$id' ]"
	log_clean plain
}

@test "fresh nodes: --all-nodes, --json and run --stage on two nodes give the path with its '/', and find sees every file on each" {
	fresh n2
	fresh n3
	id=$(job all -w n2,n3 -N2 --ntasks-per-node=1 <<JOB
DATA=\$(stager stage --all-nodes "$S/ds.tar.zst")
echo "rc=\$?"
echo "data=\$DATA"
srun -N2 --ntasks-per-node=1 sh -c 'echo "found \$SLURMD_NODENAME \$(find "\$0" -type f | wc -l)"' "\$DATA"
stager stage --all-nodes --json "$S/ds.tar.zst" >"$S/out/all.json"
stager run --all-nodes --stage "$S/ds.tar.zst" -- \
	srun -N2 --ntasks-per-node=1 sh -c 'echo "run \$SLURMD_NODENAME \$STAGER_DATA \$(find "\$STAGER_DATA" -type f | wc -l)"'
echo "run rc=\$?"
JOB
	)
	[ -n "$id" ]
	grep -qx "rc=0" "$S/out/all.log"
	grep -qx "run rc=0" "$S/out/all.log"
	grep -qx "data=$SCRATCH/jobs/$id/ds/" "$S/out/all.log"
	for n in n2 n3; do
		grep -qx "found $n $N" "$S/out/all.log"
		grep -Eqx "run $n $SCRATCH/jobs/$id/[^ ]+/ $N" "$S/out/all.log"
		[ "$(stat -c %U:%a "$(disk $n)/stager")" = root:1777 ]
		[ "$(stat -c %U:%a "$(disk $n)/slots")" = root:1777 ]
	done
	jq -e --arg p "$SCRATCH/jobs/$id/ds/" '.path == $p and (.nodes | length) == 2' "$S/out/all.json"
	for n in n2 n3; do wait_until 30 sh -c "[ ! -e '$(disk $n)/jobs/$id' ]"; done
	log_clean all
}

@test "a node whose prolog is not installed: the user's stage says what the administrator must run; root's doctor makes it and says so" {
	# a node the prolog never ran on: its disk as the host sees it, with
	# the site's settings (the same path as every node's)
	local d="$D/bare"
	install -d -m 0755 "$d"
	printf 'scratch_root = %s/stager/$USER\nslot_dir = %s/slots\n' "$d" "$d" >"$D/bare.conf"
	run as_job_user "$U" env STAGER_SITE_CONFIG="$D/bare.conf" stager stage "$S/ds.tar.zst" "$S/bare-dest"
	echo "$output"
	[ "$status" -eq 7 ]
	[[ "$output" == *"cannot create '$d/stager', the shared parent of the scratch roots: Permission denied"*"install -d -m 1777 '$d/stager'"* ]]
	# the user's doctor: the same, as a failed check with the fix
	run as_job_user "$U" env STAGER_SITE_CONFIG="$D/bare.conf" stager doctor "$S"
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "^FAIL  scratch parent .*'$d/stager'.*does not exist"
	echo "$output" | grep -q -- "-> as root: \`install -d -m 1777 '$d/stager'\`"
	# root's doctor makes it, and says it did
	run env -u STAGER_SLOT_DIR STAGER_SITE_CONFIG="$D/bare.conf" "$STAGER" doctor --prepare
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^ok    scratch parent .*created '$d/stager' (root's, 1777)"
	echo "$output" | grep -q "^ok    reader slots .*created '$d/slots' (root's, 1777)"
	[ "$(stat -c %U:%a "$d/stager")" = root:1777 ]
	run as_job_user "$U" env STAGER_SITE_CONFIG="$D/bare.conf" stager stage -q "$S/ds.tar.zst" "$S/bare-dest"
	[ "$status" -eq 0 ]
	[ "$(find "$S/bare-dest/" -type f | wc -l)" -eq "$N" ]
}
