#!/usr/bin/env bats
# stager on a real multi-node Slurm: three slurmd daemons n1..n3 on this
# machine, each in its own mount and UTS namespace with a private
# node-local scratch at the same path (scripts/slurm-test-cluster.sh with
# NODES=3), the site's prolog, task prolog and epilog installed, and the
# "shared filesystem" an emulated NFS (bench/sharedfs) whose counters say
# how much was read from it.

load helpers

setup_file() {
	command -v slurmctld >/dev/null && command -v unshare >/dev/null &&
		[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] || skip "needs root, slurm-wlm and /dev/fuse"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	: "${SHAREDFS:=$top/build/sharedfs}"
	export ML=$(mktemp -d /tmp/stager-mn.XXXXXX)
	chmod 0755 "$ML"
	export SCRATCH="$ML/scratch" SHARED="$ML/shared"
	mkdir -p "$ML/backing" "$SHARED" "$ML/out" "$ML/bin" "$SCRATCH"
	# the shared filesystem, mounted before the nodes start (they see it)
	"$SHAREDFS" --delay-ms 0 --attr-timeout 0 --direct-io "$ML/backing" "$SHARED"
	# the site configuration: node-local cache and slots
	cat >"$ML/stager.conf" <<CONF
scratch_root = $SCRATCH/\$USER
slot_dir = $SCRATCH/slots
CONF
	# Slurm gives its scripts a bare environment: where a site has
	# /etc/stager.conf and stager on PATH, the test says where they are
	for s in prolog task-prolog epilog; do
		cat >"$ML/$s" <<SCRIPT
#!/bin/sh
export STAGER_SITE_CONFIG="$ML/stager.conf" STAGER_BIN="$STAGER" STAGER_JOB_TMP_BASE="$SCRATCH/jobs-tmp"
exec "$top/scripts/slurm-$s.sh"
SCRIPT
		chmod +x "$ML/$s"
	done
	# sbcast as Slurm's, logging what it was asked; told to, it damages
	# the copy one node received (a network or disk fault)
	real=$(command -v sbcast)
	cat >"$ML/bin/sbcast" <<SB
#!/bin/bash
printf '%s\n' "\$*" >>"$ML/sbcast.log"
for a; do case \$a in [0-9]*.[0-9]*) target=\$a ;; esac; done
scontrol show step "\$target" 2>/dev/null | grep -o ' NodeList=[^ ]*' >>"$ML/sbcast.log"
[ -s "$ML/fail-sbcast" ] && { echo "sbcast: error: injected" >&2; exit 1; }
"$real" "\$@" || exit
if [ -s "$ML/damage-on" ]; then
	dest=\${@: -1}
	f="$ML/cluster/nodes/\$(cat "$ML/damage-on")/\${dest#$SCRATCH/}"
	printf '\\377\\377\\377\\377' | dd of="\$f" bs=1 seek=3000 conv=notrunc status=none
	echo "damaged \$f" >>"$ML/sbcast.log"
fi
SB
	chmod +x "$ML/bin/sbcast"
	export STAGER_SITE_CONFIG="$ML/stager.conf"
	unset STAGER_SCRATCH_ROOT SLURM_TMPDIR SLURM_JOB_ID
	SLURM_CONF=$(NODES=3 SCRATCH="$SCRATCH" PROLOG="$ML/prolog" \
		TASK_PROLOG="$ML/task-prolog" "$top/scripts/slurm-test-cluster.sh" \
		start "$ML/cluster" "$ML/epilog")
	export SLURM_CONF
}

teardown_file() {
	[ -n "${ML:-}" ] || return 0
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	for _ in $(seq 1 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
	"$top/scripts/slurm-test-cluster.sh" stop "$ML/cluster" || true
	fusermount3 -u "$ML/shared" 2>/dev/null || umount -l "$ML/shared" 2>/dev/null || true
	pkill -f "$ML/" 2>/dev/null || true
	rm -rf "$ML"
}

setup() { cd "$ML"; }
teardown() { :; }

wait_gone() {
	for _ in $(seq 1 $((${2:-60} * 5))); do
		[ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}

# A dataset NAME on the shared filesystem, packed: prints the pack's path.
make_dataset() {
	local d="$ML/backing/$1"
	mkdir -p "$d/sub"
	head -c 24000000 /dev/urandom >"$d/sub/big.bin"
	for i in $(seq 1 40); do echo "$1 $i" >"$d/f$i"; done
	ln -s sub/big.bin "$d/link"
	"$STAGER" pack -q "$d" -o "$ML/backing/$1.tar.zst" >/dev/null
}

stat_of() { awk -v k="$1" '$1 == k {print $2}' "$SHARED/.sharedfs-stats"; }

# Submit a 3-node job running the script text on stdin; wait for it.
run_job() {
	local name=$1
	{
		echo '#!/bin/bash'
		echo "export PATH=\"$ML/bin:\$PATH\""
		cat
	} >"$ML/$name.sh"
	local id
	id=$(sbatch --parsable -N3 --mem=300 -o "$ML/out/$name.log" "$ML/$name.sh" | cut -d';' -f1)
	# (returns, not only fails: callers run it in $(...), where errexit is off)
	[ -n "$id" ] || return 1
	wait_gone "$id" 120 || return 1
	cat "$ML/out/$name.log" >&2
	echo "$id"
}

# The tree of cache entry DIGEST on node N.
entry_of() { echo "$ML/cluster/nodes/$1/root/cache/$2/data"; }

# Pack NAME's digest and size into $digest and $size.
pack_facts() {
	digest=$("$STAGER" ls --json "$ML/backing/$1.tar.zst" | jq -r .digest)
	size=$(stat -c %s "$ML/backing/$1.tar.zst")
}

# A 3-node job: stage --all-nodes of pack NAME, JSON and "rc=N" in
# out/NAME.json, the counters reset first.
stage_all() {
	echo reset >"$SHARED/.sharedfs-stats"
	run_job "$1" <<JOB
"$STAGER" stage --all-nodes --json "$SHARED/$1.tar.zst" >"$ML/out/$1.json"
echo "rc=\$?" >>"$ML/out/$1.json"
JOB
	cat "out/$1.json"
}

# "node=how,..." of stage_all NAME's JSON.
hows() { head -1 "out/$1.json" | jq -r '.nodes | map(.node + "=" + .how) | sort | join(",")'; }

# Every node's entry of pack NAME is its tree.
trees_ok() {
	for n in n1 n2 n3; do diff -r "$ML/backing/$1" "$(entry_of $n "$digest")"; done
}

@test "the test cluster: three nodes, each with its own scratch and name" {
	run srun -N3 -l sh -c 'hostname; echo "$SLURM_TMPDIR"; touch "$SLURM_TMPDIR/mine"; ls "$SLURM_TMPDIR"'
	echo "$output"
	[ "$status" -eq 0 ]
	for n in n1 n2 n3; do echo "$output" | grep -qx "[0-9]: $n"; done
	# the prolog's per-job directory, node-local, exported by the task prolog
	echo "$output" | grep -q "$SCRATCH/jobs-tmp/"
	[ "$(echo "$output" | grep -c ': mine$')" -eq 3 ]
}

@test "stage --all-nodes: the shared filesystem is read once, every node's tree verifies" {
	make_dataset ds1
	pack_facts ds1
	echo reset >"$SHARED/.sharedfs-stats"
	id=$(run_job ds1 <<JOB
"$STAGER" stage --all-nodes --json "$SHARED/ds1.tar.zst" >"$ML/out/ds1.json"
echo "rc=\$?" >>"$ML/out/ds1.json"
srun -N3 --ntasks-per-node=1 sh -c 'readlink "\$SLURM_TMPDIR/ds1"; ls "\$SLURM_TMPDIR/ds1/" | wc -l' >"$ML/out/ds1.links"
JOB
	)
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
	[ -z "$(find "$ML/cluster/nodes" -path '*bcast*' -type f)" ]
	for n in n1 n2 n3; do
		for _ in $(seq 1 50); do [ ! -e "$ML/cluster/nodes/$n/jobs-tmp/$id" ] && break; sleep 0.2; done
		[ ! -e "$ML/cluster/nodes/$n/jobs-tmp/$id" ]
	done
}

@test "stage --all-nodes: a copy damaged on one node is detected and that node reads it itself" {
	make_dataset ds2
	pack_facts ds2
	echo n3 >"$ML/damage-on"
	stage_all ds2
	: >"$ML/damage-on"
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
	echo yes >"$ML/fail-sbcast"
	stage_all ds9
	: >"$ML/fail-sbcast"
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
	id=$(sbatch --parsable -N1 -w n2 --mem=200 -o "$ML/out/pre3.log" \
		--wrap "\"$STAGER\" stage -q \"$SHARED/ds3.tar.zst\"" | cut -d';' -f1)
	wait_gone "$id" 60
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
	run "$STAGER" stage --all-nodes "$SHARED/ds1.tar.zst"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "inside a Slurm allocation"
	mkdir -p "$ML/backing/plain/d" && echo x >"$ML/backing/plain/d/x"
	run_job plain <<JOB
"$STAGER" stage --all-nodes "$SHARED/plain" "\$SLURM_TMPDIR/plain" >"$ML/out/plain.path"
echo "rc=\$?" >>"$ML/out/plain.path"
srun -N3 --ntasks-per-node=1 cat "\$SLURM_TMPDIR/plain/d/x" >"$ML/out/plain.cat"
JOB
	grep -qx "rc=0" out/plain.path
	grep -q "is not a pack" out/plain.log
	[ "$(grep -cx x out/plain.cat)" -eq 3 ]
}

@test "run --all-nodes: stages on every node, the command's tasks see it, each node's results are collected" {
	make_dataset ds4
	mkdir -p "$ML/backing/res4"
	echo reset >"$SHARED/.sharedfs-stats"
	size=$(stat -c %s "$ML/backing/ds4.tar.zst")
	run_job run4 <<JOB
"$STAGER" run --all-nodes --stage "$SHARED/ds4.tar.zst" --collect "out:$SHARED/res4/%N" \
	--collect "out2:$SHARED/res4/merged" -- \
	srun -N3 --ntasks-per-node=1 sh -c 'n=\$SLURMD_NODENAME
		cmp "\$STAGER_DATA/sub/big.bin" "$ML/backing/ds4/sub/big.bin" && echo same >"\$STAGER_OUT/check"
		echo "\$n" >"\$STAGER_OUT_2/from-\$n"
		mkdir -p "\$STAGER_OUT/deep/er" && echo "\$n" >"\$STAGER_OUT/deep/er/node"'
echo "rc=\$?" >"$ML/out/run4.rc"
JOB
	cat out/run4.rc
	grep -qx "rc=0" out/run4.rc
	for n in n1 n2 n3; do
		[ "$(cat "$ML/backing/res4/$n/check")" = same ]
		[ "$(cat "$ML/backing/res4/$n/deep/er/node")" = "$n" ]
		[ "$(cat "$ML/backing/res4/merged/from-$n")" = "$n" ]
	done
	# no temporaries left in the shared destinations
	[ -z "$(find "$ML/backing/res4" -name '.stager*')" ]
	# the dataset crossed the shared filesystem once
	read=$(stat_of bytes_read)
	[ "$read" -le $((size + size / 10)) ]
}

@test "run --all-nodes under scancel: every node's results are collected" {
	mkdir -p "$ML/backing/res5"
	cat >"$ML/run5.sh" <<JOB
#!/bin/bash
exec "$STAGER" run --all-nodes --collect "out:$SHARED/res5/%N" -- \
	srun -N3 --ntasks-per-node=1 sh -c 'echo "\$SLURMD_NODENAME" >"\$STAGER_OUT/early"; sleep 300'
JOB
	id=$(sbatch --parsable -N3 --mem=300 -o "$ML/out/run5.log" "$ML/run5.sh" | cut -d';' -f1)
	# wait until every node's command has written its file (on scratch)
	for _ in $(seq 1 150); do
		[ "$(ls "$ML"/cluster/nodes/n*/jobs-tmp/"$id"/out/early 2>/dev/null | wc -l)" -eq 3 ] && break
		sleep 0.2
	done
	scancel "$id"
	wait_gone "$id" 60
	cat out/run5.log
	for n in n1 n2 n3; do [ "$(cat "$ML/backing/res5/$n/early")" = "$n" ]; done
	# the epilog removed the job's scratch on every node
	for n in n1 n2 n3; do
		for _ in $(seq 1 50); do [ ! -e "$ML/cluster/nodes/$n/jobs-tmp/$id" ] && break; sleep 0.2; done
		[ ! -e "$ML/cluster/nodes/$n/jobs-tmp/$id" ]
	done
}

@test "run --all-nodes --pack needs %N or %n in DEST (one pack per node)" {
	run_job run6 <<JOB
"$STAGER" run --all-nodes --pack --collect "out:$SHARED/res6" -- true 2>"$ML/out/run6.err"
echo "rc=\$?" >"$ML/out/run6.rc"
JOB
	grep -qx "rc=1" out/run6.rc
	grep -q "%n" out/run6.err
}

@test "the multi-node example batch scripts run as written (run --all-nodes, explicit steps)" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	make_dataset ds7
	# a stand-in for torchrun: every node lists the dataset it sees
	cat >"$ML/bin/torchrun" <<'PY'
#!/bin/bash
while [ $# -gt 0 ]; do
	case $1 in --data) data=$2; shift ;; --output) out=$2; shift ;; esac
	shift
done
(cd "$data" && find . | sort) >"$out/listing"
echo "$MASTER_ADDR:$MASTER_PORT" >"$out/master"
PY
	chmod +x "$ML/bin/torchrun"
	ln -sf "$STAGER" "$ML/bin/stager"
	mkdir -p "$ML/ex"
	# this cluster has no GPUs, small nodes, and three of them
	for f in multi-node multi-node-explicit; do
		sed -e '/--gres/d' -e '/--cpus-per-task/d' -e 's/--nodes=4/--nodes=3/' \
			"$top/scripts/examples/$f.sh" >"$ML/ex/$f.sh"
	done
	want=$(cd "$ML/backing/ds7" && find . | sort)
	for f in multi-node multi-node-explicit; do
		echo reset >"$SHARED/.sharedfs-stats"
		id=$(PATH="$ML/bin:$PATH" DATASET="$SHARED/ds7.tar.zst" RESULTS="$SHARED/ex-$f" \
			sbatch --parsable --mem=300 -o "$ML/out/$f.log" "$ML/ex/$f.sh" | cut -d';' -f1)
		wait_gone "$id" 120
		cat "$ML/out/$f.log"
		for n in n1 n2 n3; do
			[ "$(cat "$ML/backing/ex-$f/$n/listing")" = "$want" ]
			[ "$(cat "$ML/backing/ex-$f/$n/master")" = "n1:29500" ]
		done
		# one read of the pack for the three nodes (the second script finds
		# it cached on every node and reads only the trailer)
		size=$(stat -c %s "$ML/backing/ds7.tar.zst")
		[ "$(stat_of bytes_read)" -le $((size + size / 10)) ]
	done
}

@test "run --all-nodes: the early warning (B:USR1) has every node collect at once" {
	mkdir -p "$ML/backing/res8"
	cat >"$ML/run8.sh" <<JOB
#!/bin/bash
exec "$STAGER" run --all-nodes --collect "out:$SHARED/res8/%N" -- \
	srun -N3 --ntasks-per-node=1 sh -c 'trap "" USR1; sleep 1; echo "\$SLURMD_NODENAME" >"\$STAGER_OUT/early"; sleep 300'
JOB
	id=$(sbatch --parsable -N3 --mem=300 -o "$ML/out/run8.log" "$ML/run8.sh" | cut -d';' -f1)
	for _ in $(seq 1 150); do
		[ "$(ls "$ML"/cluster/nodes/n*/jobs-tmp/"$id"/out/early 2>/dev/null | wc -l)" -eq 3 ] && break
		sleep 0.2
	done
	# (the collectors' first round, at their start, found nothing)
	[ "$(ls "$ML"/backing/res8/n*/early 2>/dev/null | wc -l)" -eq 0 ]
	scancel --batch --signal=USR1 "$id"
	for _ in $(seq 1 100); do
		[ "$(ls "$ML"/backing/res8/n*/early 2>/dev/null | wc -l)" -eq 3 ] && break
		sleep 0.2
	done
	# collected while the job still runs
	[ -n "$(squeue -h -j "$id")" ]
	for n in n1 n2 n3; do [ "$(cat "$ML/backing/res8/$n/early")" = "$n" ]; done
	scancel "$id"
	wait_gone "$id" 60
	cat out/run8.log
}
