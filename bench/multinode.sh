#!/usr/bin/env bash
# bench/multinode.sh - shared-filesystem load of a multi-node job, measured
# on a real Slurm of 1 to 4 nodes on this machine, set against the model in
# docs/benchmarks.md ("Multi-node: scale on paper").
#
#   B=build bash bench/multinode.sh [--files N]
#
# A Slurm cluster of 4 nodes (scripts/slurm-test-cluster.sh: slurmd
# daemons in their own mount and UTS namespaces, each with a private
# node-local scratch) and the emulated NFS of bench/sharedfs (0.5 ms per
# metadata operation, 1 GB/s shared, no page cache: the nodes share this
# machine's, which would hide their reads) holding an image-folder dataset
# (gendata images, default 5,000 files) as a tree and as a pack.  For N = 1
# to 4 nodes, a job of N nodes stages the dataset on every node three ways,
# each node's scratch emptied first:
#   rsync       srun: rsync -a of the tree on every node (what scripts do)
#   per-node    srun: stager stage of the pack on every node
#   all-nodes   stager stage --all-nodes (one read, sbcast to the others)
# and the mount's counters give metadata operations and bytes read on the
# shared filesystem; the job's wall time is measured around the step.
# Results: bench/multinode.md (also printed).  Needs root, /dev/fuse,
# slurm-wlm, munge and rsync; takes a few minutes.
set -euo pipefail
B=${B:-build}
FILES=5000
while [ $# -gt 0 ]; do
	case $1 in
	--files) FILES=$2; shift 2 ;;
	*) echo "usage: bench/multinode.sh [--files N]" >&2; exit 1 ;;
	esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
STAGER=$top/$B/stager
for t in "$STAGER" "$top/$B/sharedfs" "$top/$B/gendata"; do
	[ -x "$t" ] || { echo "bench/multinode: $t missing: make all $B/sharedfs $B/gendata" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] && command -v slurmctld >/dev/null ||
	{ echo "bench/multinode: needs root, /dev/fuse and slurm-wlm" >&2; exit 1; }

W=$(mktemp -d /tmp/stager-bench-mn.XXXXXX)
chmod 0755 "$W"
SCRATCH=$W/scratch SHARED=$W/shared
mkdir -p "$W/backing" "$SHARED" "$SCRATCH" "$W/out"
cleanup() {
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	"$top/scripts/slurm-test-cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
	fusermount3 -u "$SHARED" 2>/dev/null || umount -l "$SHARED" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT

"$top/$B/gendata" images "$W/backing/images" --files "$FILES" >/dev/null
"$STAGER" pack -q "$W/backing/images" -o "$W/backing/images.tar.zst" >/dev/null
pack_size=$(stat -c %s "$W/backing/images.tar.zst")
tree_size=$(du -sb "$W/backing/images" | cut -f1)
"$top/$B/sharedfs" --delay-ms 0.5 --bw 1G --direct-io "$W/backing" "$SHARED"
printf 'scratch_root = %s/$USER\nslot_dir = %s/slots\n' "$SCRATCH" "$SCRATCH" >"$W/stager.conf"
export STAGER_SITE_CONFIG=$W/stager.conf
unset STAGER_SCRATCH_ROOT SLURM_TMPDIR SLURM_JOB_ID
SLURM_CONF=$(NODES=4 PORT=16980 SCRATCH="$SCRATCH" "$top/scripts/slurm-test-cluster.sh" start "$W/cluster")
export SLURM_CONF


# One measurement: N nodes, a way; prints "ops bytes seconds".
measure() {
	local n=$1 way=$2
	rm -rf "$W"/cluster/nodes/n*/root "$W"/cluster/nodes/n*/rsync
	case $way in
	rsync) step="srun --ntasks-per-node=1 rsync -a $SHARED/images/ $SCRATCH/rsync/" ;;
	per-node) step="srun --ntasks-per-node=1 $STAGER stage -q $SHARED/images.tar.zst $SCRATCH/ds" ;;
	all-nodes) step="$STAGER stage -q --all-nodes $SHARED/images.tar.zst $SCRATCH/ds" ;;
	esac
	cat >"$W/job.sh" <<JOB
#!/bin/bash
sleep 1.5   # past the mount's attribute cache
echo reset >"$SHARED/.sharedfs-stats"
t0=\$(date +%s.%N)
$step >/dev/null
rc=\$?
t1=\$(date +%s.%N)
echo "\$(awk '\$1 == "meta_ops" {print \$2}' "$SHARED/.sharedfs-stats") \$(awk '\$1 == "bytes_read" {print \$2}' "$SHARED/.sharedfs-stats") \$(awk -v a=\$t0 -v b=\$t1 'BEGIN { print b - a }') \$rc" >"$W/out/result"
JOB
	chmod +x "$W/job.sh"
	rm -f "$W/out/result"
	local id
	id=$(sbatch --parsable -N "$n" --mem=500 -o "$W/out/job.log" "$W/job.sh" | cut -d';' -f1)
	for _ in $(seq 1 3000); do
		[ -z "$(squeue -h -j "$id" 2>/dev/null)" ] && break
		sleep 0.2
	done
	[ -s "$W/out/result" ] || { cat "$W/out/job.log" >&2; echo "- - - failed"; return; }
	cat "$W/out/result"
}

out=$top/bench/multinode.md
{
	echo "# Multi-node staging: shared-filesystem load, measured"
	echo
	echo "$(date -u +%Y-%m-%d), $(nproc) cores. Image-folder dataset: $FILES files," \
		"$((tree_size / 1048576)) MiB as a tree, $((pack_size / 1048576)) MiB as a pack." \
		"Emulated NFS: 0.5 ms per metadata operation, 1 GB/s shared, no page cache." \
		"Slurm with N nodes on one machine (namespaces; sbcast runs over loopback," \
		"and all nodes share the same 2 cores, so seconds favour fewer steps)."
	echo
	echo "| nodes | way | shared-FS metadata ops | shared-FS MiB read | seconds |"
	echo "|---:|---|---:|---:|---:|"
	for n in 1 2 3 4; do
		for way in rsync per-node all-nodes; do
			[ "$n" -eq 1 ] && [ "$way" = all-nodes ] && continue
			read -r ops bytes secs rc < <(measure "$n" "$way")
			if [ "$ops" = - ] || [ "${rc:-1}" != 0 ]; then
				echo "| $n | $way | failed | | |"
				continue
			fi
			printf '| %d | %s | %d | %.1f | %.2f |\n' "$n" "$way" "$ops" \
				"$(awk -v b="$bytes" 'BEGIN { print b / 1048576 }')" "$secs"
		done
	done
} | tee "$out"
