#!/usr/bin/env bats
# stager on a real multi-node Slurm, as a site runs it
# (tests/e2e/site.bash): three slurmd daemons n1..n3 on this machine, each
# in its own mount and UTS namespace with a private node-local disk at the
# same path, SCRATCH (scripts/slurm-test-cluster.sh with NODES=3); stager
# installed with `make install`, the installed prolog, task prolog and
# epilog named in slurm.conf with nothing around them; every job an
# ordinary user's, whose scripts call `stager` by name; and the "shared
# filesystem" an emulated NFS (bench/sharedfs) whose counters say how much
# was read from it.
#
# Each node's disk is prepared as an administrator would: world-writable
# (each user's scratch root), with the prolog's base (the site's
# STAGER_JOB_TMP_BASE, moved onto it) and the reader slots made once.
# The user is this file's own (not realsite.bats's stgjob1): the test
# files run side by side, and each site_stop ends its users' processes.

load helpers
load site

U=stgmulti
SITE_USERS=$U

setup_file() {
	command -v slurmctld >/dev/null && command -v unshare >/dev/null &&
		[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] || skip "needs root, slurm-wlm and /dev/fuse"
	command -v useradd >/dev/null || skip "needs useradd"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	: "${SHAREDFS:=$top/${B:-build}/sharedfs}"
	D=$(reachable_mktemp stager-mn)
	export D
	export SCRATCH="$D/scratch" SHARED="$D/shared"
	mkdir -p "$D/backing" "$SHARED" "$D/bin"
	# the shared filesystem, mounted before the nodes start (they see it);
	# site_start makes the users' directories on it
	"$SHAREDFS" --delay-ms 0 --attr-timeout 0 --direct-io "$D/backing" "$SHARED"
	# each node's disk, bind-mounted at SCRATCH on that node
	for n in n1 n2 n3; do
		install -d -m 1777 "$D/cluster/nodes/$n"
		install -d -m 0755 "$D/cluster/nodes/$n/jobs"
		install -d -m 1777 "$D/cluster/nodes/$n/slots"
	done
	# sbcast as Slurm's, logging what it was asked; told to, it damages
	# the copy one node received (a network or disk fault)
	real=$(command -v sbcast)
	install -m 0755 /dev/null "$D/bin/sbcast"
	cat >"$D/bin/sbcast" <<SB
#!/bin/bash
printf '%s\n' "\$*" >>"$D/sbcast.log"
for a; do case \$a in [0-9]*.[0-9]*) target=\$a ;; esac; done
scontrol show step "\$target" 2>/dev/null | grep -o ' NodeList=[^ ]*' >>"$D/sbcast.log"
[ -s "$D/fail-sbcast" ] && { echo "sbcast: error: injected" >&2; exit 1; }
"$real" "\$@" || exit
if [ -s "$D/damage-on" ]; then
	dest=\${@: -1}
	f="$D/cluster/nodes/\$(cat "$D/damage-on")/\${dest#$SCRATCH/}"
	printf '\\377\\377\\377\\377' | dd of="\$f" bs=1 seek=3000 conv=notrunc status=none
	echo "damaged \$f" >>"$D/sbcast.log"
fi
SB
	NODES=3 site_start "$D"
	# slurm.conf names the installed hooks themselves, no wrapper
	grep -qx "Epilog=$D/prefix/libexec/stager/epilog" "$SLURM_CONF"
	# the prolog's per-job directories on each node's own disk
	sed -i "s|^STAGER_JOB_TMP_BASE=.*|STAGER_JOB_TMP_BASE=$SCRATCH/jobs|" "$D/prefix/etc/default/stager"
	grep -qx "STAGER_JOB_TMP_BASE=$SCRATCH/jobs" "$D/prefix/etc/default/stager"
	echo "slot_dir = $SCRATCH/slots" >>"$D/stager.conf"
	# what the user's jobs write outside the emulated NFS (read here
	# without touching its counters): logs, outputs, sbcast's log
	install -d -o "$U" -m 0755 "$D/out"
	install -o "$U" -m 0644 /dev/null "$D/sbcast.log"
}

teardown_file() {
	[ -n "${D:-}" ] || return 0
	fusermount3 -u "$D/shared" 2>/dev/null || true
	site_stop "$D"
}

setup() {
	SH="$SHARED/$U"      # the user's directory on the shared filesystem
	BK="$D/backing/$U"   # the same, read behind the filesystem's back
	cd "$D"
}
teardown() { :; }

# A dataset NAME on the shared filesystem, the user's, packed.
make_dataset() {
	local d="$BK/$1"
	mkdir -p "$d/sub"
	head -c 24000000 /dev/urandom >"$d/sub/big.bin"
	for i in $(seq 1 40); do echo "$1 $i" >"$d/f$i"; done
	ln -s sub/big.bin "$d/link"
	chown -R -h "$U" "$d"
	as_job_user "$U" stager pack -q "$d" -o "$BK/$1.tar.zst" >/dev/null
}

# A directory the user's jobs write into, on the shared filesystem.
user_dir() { install -d -o "$U" -m 0755 "$BK/$1"; }

stat_of() { awk -v k="$1" '$1 == k {print $2}' "$SHARED/.sharedfs-stats"; }

submit() { site_submit "$U" "$@"; }

# Submit a 3-node job running the script text on stdin; wait for it.
run_job() {
	local name=$1
	{
		echo '#!/bin/bash'
		echo "export PATH=\"$D/bin:\$PATH\""
		cat
	} >"$D/$name.sh"
	local id
	id=$(submit -N3 --mem=300 -o "$D/out/$name.log" "$D/$name.sh")
	# (returns, not only fails: callers run it in $(...), where errexit is off)
	[ -n "$id" ] || return 1
	wait_until 120 job_gone "$id" || return 1
	cat "$D/out/$name.log" >&2
	echo "$id"
}

# The tree of cache entry DIGEST on node N.
entry_of() { echo "$D/cluster/nodes/$1/$U/cache/$2/data"; }

# Pack NAME's digest and size into $digest and $size.
pack_facts() {
	login_stager "$U" ls --json "$BK/$1.tar.zst" >"$D/ls.json"
	digest=$(jq -r .digest "$D/ls.json")
	size=$(stat -c %s "$BK/$1.tar.zst")
	[ -n "$digest" ] # check-tests: the function's status
}

# A 3-node job: stage --all-nodes of pack NAME, JSON and "rc=N" in
# out/NAME.json, the counters reset first.
stage_all() {
	echo reset >"$SHARED/.sharedfs-stats"
	run_job "$1" <<JOB
stager stage --all-nodes --json "$SH/$1.tar.zst" >"$D/out/$1.json"
echo "rc=\$?" >>"$D/out/$1.json"
JOB
	cat "out/$1.json"
}

# "node=how,..." of stage_all NAME's JSON.
hows() { head -1 "out/$1.json" | jq -r '.nodes | map(.node + "=" + .how) | sort | join(",")'; }

# Every node's entry of pack NAME is its tree.
trees_ok() {
	for n in n1 n2 n3; do diff -r "$BK/$1" "$(entry_of $n "$digest")"; done
}

# The prolog's directory of job ID is gone from every node.
jobdirs_gone() {
	for n in n1 n2 n3; do
		wait_until 10 sh -c "[ ! -e '$D/cluster/nodes/$n/jobs/$1' ]" || return 1
	done
}

@test "the test cluster: three nodes, each with its own scratch and name" {
	run as_job_user "$U" srun -N3 -l sh -c 'hostname; id -un; echo "$SLURM_TMPDIR"; touch "$SLURM_TMPDIR/mine"; ls "$SLURM_TMPDIR"'
	echo "$output"
	[ "$status" -eq 0 ]
	for n in n1 n2 n3; do echo "$output" | grep -qx "[0-9]: $n"; done
	# the user's tasks
	[ "$(echo "$output" | grep -c ": $U$")" -eq 3 ]
	# the prolog's per-job directory, node-local, exported by the task prolog
	echo "$output" | grep -q ": $SCRATCH/jobs/[0-9]*$"
	[ "$(echo "$output" | grep -c ': mine$')" -eq 3 ]
}

@test "stage --all-nodes: the shared filesystem is read once, every node's tree verifies" {
	make_dataset ds1
	pack_facts ds1
	echo reset >"$SHARED/.sharedfs-stats"
	id=$(run_job ds1 <<JOB
stager stage --all-nodes --json "$SH/ds1.tar.zst" >"$D/out/ds1.json"
echo "rc=\$?" >>"$D/out/ds1.json"
srun -N3 --ntasks-per-node=1 sh -c 'readlink "\$SLURM_TMPDIR/ds1"; ls "\$SLURM_TMPDIR/ds1/" | wc -l' >"$D/out/ds1.links"
JOB
	)
	[ -n "$id" ]
	cat out/ds1.json out/ds1.links
	grep -qx "rc=0" out/ds1.json
	[ "$(hows ds1)" = "n1=read,n2=sbcast,n3=sbcast" ]
	# a pack is compressed already: sbcast is told not to compress it again
	grep -q -- "--compress=none" sbcast.log
	# one read of the pack, from one node
	read=$(stat_of bytes_read)
	echo "read $read of a $size-byte pack"
	[ "$read" -ge "$size" ]
	[ "$read" -le $((size + size / 10)) ]
	# every node: its own entry, the same tree as the source, linked at
	# $SLURM_TMPDIR/ds1 (removed with the job by the epilog)
	trees_ok ds1
	[ "$(grep -c "/cache/$digest/data" out/ds1.links)" -eq 3 ]
	[ "$(grep -cx 42 out/ds1.links)" -eq 3 ]
	# nothing left of the copies
	[ -z "$(find "$D/cluster/nodes" -path '*bcast*' -type f)" ]
	jobdirs_gone "$id"
}

@test "stage --all-nodes: a copy damaged on one node is detected and that node reads it itself" {
	make_dataset ds2
	pack_facts ds2
	echo n3 >"$D/damage-on"
	stage_all ds2
	: >"$D/damage-on"
	grep -q "damaged .*/n3/" sbcast.log
	grep -qx "rc=0" out/ds2.json
	[ "$(hows ds2)" = "n1=read,n2=sbcast,n3=shared" ]
	# the warning names the node and the fault
	grep -q "stage on n3: .*cannot be used" out/ds2.log
	# two reads: the lead's, and n3's own
	read=$(stat_of bytes_read)
	[ "$read" -ge $((2 * size)) ]
	[ "$read" -le $((2 * size + size / 5)) ]
	trees_ok ds2
}

@test "stage --all-nodes: if sbcast fails, the nodes read the shared filesystem themselves" {
	make_dataset ds9
	pack_facts ds9
	echo yes >"$D/fail-sbcast"
	stage_all ds9
	: >"$D/fail-sbcast"
	grep -qx "rc=0" out/ds9.json
	[ "$(hows ds9)" = "n1=read,n2=shared,n3=shared" ]
	grep -q "sbcast to .* failed" out/ds9.log
	read=$(stat_of bytes_read)
	echo "read $read of a $size-byte pack"
	# three reads of the pack, and of its trailer (a 1 MiB read at the end)
	# a few times
	[ "$read" -ge $((3 * size)) ]
	[ "$read" -le $((3 * size + size / 10 + (6 << 20))) ]
	trees_ok ds9
}

@test "stage --all-nodes: a node that has the entry receives nothing" {
	make_dataset ds3
	pack_facts ds3
	# n2 stages it first, on its own
	id=$(submit -N1 -w n2 --mem=200 -o "$D/out/pre3.log" --wrap "stager stage -q \"$SH/ds3.tar.zst\"")
	[ -n "$id" ]
	wait_until 60 job_gone "$id"
	cat out/pre3.log
	[ -d "$(entry_of n2 "$digest")" ]
	: >sbcast.log
	stage_all ds3
	cat sbcast.log
	grep -qx "rc=0" out/ds3.json
	[ "$(hows ds3)" = "n1=read,n2=cached,n3=sbcast" ]
	# sbcast went to a step on n3 alone
	grep -qx " NodeList=n3" sbcast.log
	trees_ok ds3
	# all three have it now: a second stage reads only the pack's trailer
	: >sbcast.log
	stage_all ds3
	[ "$(hows ds3)" = "n1=cached,n2=cached,n3=cached" ]
	[ ! -s sbcast.log ]
	[ "$(stat_of bytes_read)" -lt $((2 << 20)) ]
}

@test "stage --all-nodes: outside an allocation it says so; a directory is staged by each node" {
	run login_stager "$U" stage --all-nodes "$SH/ds1.tar.zst"
	[ "$status" -eq 1 ]
	[[ "$output" == *"inside a Slurm allocation"* ]]
	mkdir -p "$BK/plain/d"
	echo x >"$BK/plain/d/x"
	chown -R "$U" "$BK/plain"
	run_job plain <<JOB
stager stage --all-nodes "$SH/plain" "\$SLURM_TMPDIR/plain" >"$D/out/plain.path"
echo "rc=\$?" >>"$D/out/plain.path"
srun -N3 --ntasks-per-node=1 cat "\$SLURM_TMPDIR/plain/d/x" >"$D/out/plain.cat"
JOB
	grep -qx "rc=0" out/plain.path
	grep -q "is not a pack" out/plain.log
	[ "$(grep -cx x out/plain.cat)" -eq 3 ]
}

@test "run --all-nodes: stages on every node, the command's tasks see it, each node's results are collected" {
	make_dataset ds4
	user_dir res4
	echo reset >"$SHARED/.sharedfs-stats"
	size=$(stat -c %s "$BK/ds4.tar.zst")
	run_job run4 <<JOB
stager run --all-nodes --stage "$SH/ds4.tar.zst" --collect "out:$SH/res4/%N" \
	--collect "out2:$SH/res4/merged" -- \
	srun -N3 --ntasks-per-node=1 sh -c 'n=\$SLURMD_NODENAME
		cmp "\$STAGER_DATA/sub/big.bin" "$BK/ds4/sub/big.bin" && echo same >"\$STAGER_OUT/check"
		echo "\$n" >"\$STAGER_OUT_2/from-\$n"
		mkdir -p "\$STAGER_OUT/deep/er" && echo "\$n" >"\$STAGER_OUT/deep/er/node"'
echo "rc=\$?" >"$D/out/run4.rc"
JOB
	cat out/run4.rc
	grep -qx "rc=0" out/run4.rc
	for n in n1 n2 n3; do
		[ "$(cat "$BK/res4/$n/check")" = same ]
		[ "$(cat "$BK/res4/$n/deep/er/node")" = "$n" ]
		[ "$(cat "$BK/res4/merged/from-$n")" = "$n" ]
	done
	# no temporaries left in the shared destinations
	[ -z "$(find "$BK/res4" -name '.stager*')" ]
	# the staging line, as on one node, with how each node came by the
	# data: read once (by the lead), sent to the others
	grep -Eq "^stager: run: staged '$SH/ds4\.tar\.zst' at '[^']+/ds4' on 3 nodes \([0-9.]+ s\): (n[123] (cached|sbcast|shared|read)(, |\$)){3}" out/run4.log
	[ "$(grep -c "^stager: run: staged '$SH/ds4" out/run4.log)" -eq 1 ]
	grep "^stager: run: staged '$SH/ds4" out/run4.log | grep -q " sbcast"
	# the dataset crossed the shared filesystem once
	read=$(stat_of bytes_read)
	[ "$read" -le $((size + size / 10)) ]
}

@test "run --all-nodes under scancel: every node's results are collected" {
	user_dir res5
	cat >"$D/run5.sh" <<JOB
#!/bin/bash
exec stager run --all-nodes --collect "out:$SH/res5/%N" -- \
	srun -N3 --ntasks-per-node=1 sh -c 'echo "\$SLURMD_NODENAME" >"\$STAGER_OUT/early"; sleep 300'
JOB
	id=$(submit -N3 --mem=300 -o "$D/out/run5.log" "$D/run5.sh")
	[ -n "$id" ]
	# wait until every node's command has written its file (on the
	# node's disk, in the job's $SLURM_TMPDIR)
	wait_until 30 sh -c "[ \"\$(ls '$D'/cluster/nodes/n*/jobs/'$id'/out/early 2>/dev/null | wc -l)\" -eq 3 ]"
	scancel "$id"
	wait_until 60 job_gone "$id"
	cat out/run5.log
	for n in n1 n2 n3; do [ "$(cat "$BK/res5/$n/early")" = "$n" ]; done
	# the epilog removed the job's directory on every node
	jobdirs_gone "$id"
}

@test "run --all-nodes --pack needs %N or %n in DEST (one pack per node)" {
	run_job run6 <<JOB
stager run --all-nodes --pack --collect "out:$SH/res6" -- true 2>"$D/out/run6.err"
echo "rc=\$?" >"$D/out/run6.rc"
JOB
	grep -qx "rc=1" out/run6.rc
	grep -q "%n" out/run6.err
}

@test "the multi-node example batch scripts run as written (run --all-nodes, explicit steps)" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	make_dataset ds7
	# a stand-in for torchrun, where the job's user can run it: every
	# node lists the dataset it sees
	cat >"$D/bin/torchrun" <<'PY'
#!/bin/bash
while [ $# -gt 0 ]; do
	case $1 in --data) data=$2; shift ;; --output) out=$2; shift ;; esac
	shift
done
(cd "$data" && find . | sort) >"$out/listing"
echo "$MASTER_ADDR:$MASTER_PORT" >"$out/master"
PY
	chmod 0755 "$D/bin/torchrun"
	mkdir -p "$D/ex"
	# this cluster has no GPUs, small nodes, and three of them
	for f in multi-node multi-node-explicit; do
		sed -e '/--gres/d' -e '/--cpus-per-task/d' -e 's/--nodes=4/--nodes=3/' \
			"$top/scripts/examples/$f.sh" >"$D/ex/$f.sh"
	done
	want=$(cd "$BK/ds7" && find . | sort)
	# the user's PATH, with the stand-in first; the installed stager is on it
	p="$D/bin:$SITE/prefix/bin:/usr/local/bin:/usr/bin:/bin"
	for f in multi-node multi-node-explicit; do
		echo reset >"$SHARED/.sharedfs-stats"
		id=$(submit --export="ALL,PATH=$p,DATASET=$SH/ds7.tar.zst,RESULTS=$SH/ex-$f" \
			--mem=300 -o "$D/out/$f.log" "$D/ex/$f.sh")
		[ -n "$id" ]
		wait_until 120 job_gone "$id"
		cat "$D/out/$f.log"
		for n in n1 n2 n3; do
			[ "$(cat "$BK/ex-$f/$n/listing")" = "$want" ]
			[ "$(cat "$BK/ex-$f/$n/master")" = "n1:29500" ]
		done
		# one read of the pack for the three nodes (the second script finds
		# it cached on every node and reads only the trailer)
		size=$(stat -c %s "$BK/ds7.tar.zst")
		[ "$(stat_of bytes_read)" -le $((size + size / 10)) ]
	done
}

@test "run --all-nodes: the early warning (B:USR1) has every node collect at once" {
	user_dir res8
	cat >"$D/run8.sh" <<JOB
#!/bin/bash
exec stager run --all-nodes --collect "out:$SH/res8/%N" -- \
	srun -N3 --ntasks-per-node=1 sh -c 'trap "" USR1; sleep 1; echo "\$SLURMD_NODENAME" >"\$STAGER_OUT/early"; sleep 300'
JOB
	id=$(submit -N3 --mem=300 -o "$D/out/run8.log" "$D/run8.sh")
	[ -n "$id" ]
	wait_until 30 sh -c "[ \"\$(ls '$D'/cluster/nodes/n*/jobs/'$id'/out/early 2>/dev/null | wc -l)\" -eq 3 ]"
	# (the collectors' first round, at their start, found nothing)
	[ "$(ls "$BK"/res8/n*/early 2>/dev/null | wc -l)" -eq 0 ]
	scancel --batch --signal=USR1 "$id"
	wait_until 20 sh -c "[ \"\$(ls '$BK'/res8/n*/early 2>/dev/null | wc -l)\" -eq 3 ]"
	# collected while the job still runs
	[ -n "$(squeue -h -j "$id")" ]
	for n in n1 n2 n3; do [ "$(cat "$BK/res8/$n/early")" = "$n" ]; done
	scancel "$id"
	wait_until 60 job_gone "$id"
	cat out/run8.log
}
