#!/usr/bin/env bash
# bench/multinode.sh - fan-out of a pack to 2, 4 and 8 Slurm nodes on this
# machine, measured three ways (and rsync), fitted to a model and projected
# to 1,000 nodes.
#
#   B=build bash bench/multinode.sh [--files N] [--reps R] [--rsync-all]
#
# A Slurm cluster of 8 nodes (scripts/slurm-test-cluster.sh: slurmd daemons
# in their own mount and UTS namespaces, each with a private node-local
# scratch; slurm.conf sets no TreeWidth, so Slurm's default of 50) and the
# emulated NFS of bench/sharedfs (0.5 ms per metadata operation, 1 GB/s
# shared, no page cache) holding an image-folder dataset (gendata images,
# default 5,000 files) as a tree and as a pack.  For N = 2, 4 and 8 nodes a
# job of N nodes puts the pack on every node, every node's scratch emptied
# first, R times (default 3; medians reported):
#   all-nodes   stager stage --all-nodes (one read, sbcast to the others,
#               each node stages from its copy)
#   sbcast      sbcast of the pack from the shared FS to every node, nothing
#               more (the transport alone, no stage)
#   per-node    srun --ntasks-per-node=1 stager stage (every node reads the
#               shared FS)
#   rsync       srun: rsync -a of the tree on every node (N = 2 only: it is
#               by far the slowest; --rsync-all for 4 and 8 too)
# and the mount's counters give metadata operations and bytes read on the
# shared filesystem; the job's wall time is measured around the step.
#
# Components, for the model (same reps): an sbcast of a 1-byte file to 2, 4
# and 8 nodes (the per-node fixed cost of the transport), an empty step
# (srun true) on 2, 4 and 8 nodes (step launch), one node reading the pack
# from the shared FS (dd) and one node staging the pack from its own
# scratch (the local stage).  Least squares t = a + b*N on each way's
# medians; the 1,000-node projection uses the measured parts and the
# assumed real-cluster figures set below (LINK_GBIT, NFS_GBYTE, TREEWIDTH,
# SBCAST_THREADS, BLOCK_MIB), each stated in bench/multinode.md.
# Results: bench/multinode.md (also printed).  Needs root, /dev/fuse,
# slurm-wlm, munge and rsync; takes about 5 minutes on 2 cores.
set -euo pipefail
B=${B:-build}
FILES=5000 REPS=3 RSYNC_ALL=
while [ $# -gt 0 ]; do
	case $1 in
	--files) FILES=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--rsync-all) RSYNC_ALL=1; shift ;;
	*) echo "usage: bench/multinode.sh [--files N] [--reps R] [--rsync-all]" >&2; exit 1 ;;
	esac
done
# assumed for a real cluster (not measurable here: every node shares this
# machine's 2 cores and loopback)
LINK_GBIT=${LINK_GBIT:-25}       # each node's link, Gb/s, non-blocking fabric
NFS_GBYTE=${NFS_GBYTE:-5}        # the NFS server's bandwidth, GB/s, shared by readers
TREEWIDTH=${TREEWIDTH:-50}       # slurm.conf TreeWidth (Slurm's default)
SBCAST_THREADS=${SBCAST_THREADS:-8} # sbcast's fanout: threads of the sender (default and maximum 8)
BLOCK_MIB=${BLOCK_MIB:-8}        # sbcast's block (default: the file or 8 MB)
BIG_GIB=${BIG_GIB:-100}          # the second projection's pack
PROJ_N=${PROJ_N:-1000}

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
SCRATCH=$W/scratch SHARED=$W/shared NFS=$W/nfs
mkdir -p "$W/backing" "$SHARED" "$NFS" "$SCRATCH" "$W/out"
cleanup() {
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	"$top/scripts/slurm-test-cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
	for m in "$SHARED" "$NFS"; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$W"
}
trap cleanup EXIT
T0=$SECONDS

"$top/$B/gendata" images "$W/backing/images" --files "$FILES" >/dev/null
"$STAGER" pack -q "$W/backing/images" -o "$W/backing/images.tar.zst" >/dev/null
printf x >"$W/backing/tiny"
pack_size=$(stat -c %s "$W/backing/images.tar.zst")
tree_size=$(du -sb "$W/backing/images" | cut -f1)
"$top/$B/sharedfs" --delay-ms 0.5 --bw 1G --direct-io "$W/backing" "$SHARED"
# sbcast mmaps its source, which a direct-I/O FUSE mount refuses ("Can't
# mmap file ..., No such device"): the sbcast ways read a second mount of
# the same emulated NFS with NFS's own caching (page cache dropped at each
# open, close-to-open), and count there
"$top/$B/sharedfs" --delay-ms 0.5 --bw 1G "$W/backing" "$NFS"
printf 'scratch_root = %s/$USER\nslot_dir = %s/slots\n' "$SCRATCH" "$SCRATCH" >"$W/stager.conf"
export STAGER_SITE_CONFIG=$W/stager.conf
unset STAGER_SCRATCH_ROOT SLURM_TMPDIR SLURM_JOB_ID SBCAST_FANOUT
SLURM_CONF=$(NODES=8 SCRATCH="$SCRATCH" "$top/scripts/slurm-test-cluster.sh" start "$W/cluster")
export SLURM_CONF
tw_conf=$(awk -F= '$1 == "TreeWidth" { print $2 }' "$SLURM_CONF")

# One measurement: N nodes, a way; prints "ops bytes seconds rc".
measure() {
	local n=$1 way=$2 pre=: fs=$SHARED
	rm -rf "$W"/cluster/nodes/n*/root "$W"/cluster/nodes/n*/rsync "$W"/cluster/nodes/n*/x \
		"$W"/cluster/nodes/n*/ds "$W"/cluster/nodes/n*/p.tar.zst
	sync # the last run's writes go to disk now, not during this one
	case $way in
	rsync) step="srun --ntasks-per-node=1 rsync -a $SHARED/images/ $SCRATCH/rsync/" ;;
	per-node) step="srun --ntasks-per-node=1 $STAGER stage -q $SHARED/images.tar.zst $SCRATCH/ds" ;;
	all-nodes) step="$STAGER stage --verbose --progress=none --all-nodes $SHARED/images.tar.zst $SCRATCH/ds 2>$W/out/step.err" ;;
	sbcast) fs=$NFS step="sbcast --compress=none -f $NFS/images.tar.zst $SCRATCH/x" ;;
	sbcast-1B) fs=$NFS step="sbcast --compress=none -f $NFS/tiny $SCRATCH/x" ;;
	launch) step="srun --ntasks-per-node=1 true" ;;
	read) step="dd if=$SHARED/images.tar.zst of=/dev/null bs=4M status=none" ;;
	local)
		pre="cp $W/backing/images.tar.zst $SCRATCH/p.tar.zst && sync"
		step="$STAGER stage -q $SCRATCH/p.tar.zst $SCRATCH/ds"
		;;
	esac
	cat >"$W/job.sh" <<JOB
#!/bin/bash
$pre
sleep 1.5   # past the mount's attribute cache
echo reset >"$fs/.sharedfs-stats"
t0=\$(date +%s.%N)
$step >/dev/null
rc=\$?
t1=\$(date +%s.%N)
sb=\$(sed -n 's/.*with sbcast in \([0-9.]*\) s.*/\1/p' "$W/out/step.err" 2>/dev/null | head -n 1)
echo "\$(awk '\$1 == "meta_ops" {print \$2}' "$fs/.sharedfs-stats") \$(awk '\$1 == "bytes_read" {print \$2}' "$fs/.sharedfs-stats") \$(awk -v a=\$t0 -v b=\$t1 'BEGIN { print b - a }') \$rc \${sb:--}" >"$W/out/result"
JOB
	chmod +x "$W/job.sh"
	rm -f "$W/out/result" "$W/out/step.err"
	local id
	id=$(sbatch --parsable -N "$n" --mem=500 -o "$W/out/job.log" "$W/job.sh" | cut -d';' -f1)
	for _ in $(seq 1 3000); do
		[ -z "$(squeue -h -j "$id" 2>/dev/null)" ] && break
		sleep 0.2
	done
	[ -s "$W/out/result" ] || { cat "$W/out/job.log" >&2; echo "- - - failed -"; return; }
	cat "$W/out/result"
}

# every run: "way N rep ops bytes seconds rc sbcast-seconds" (the last
# from all-nodes' own log, "-" for the other ways)
R=$W/runs
: >"$R"
run() {
	local way=$1 n=$2 rep=$3 ops bytes secs rc sb
	read -r ops bytes secs rc sb < <(measure "$n" "$way")
	echo "$way $n $rep $ops $bytes $secs ${rc:-1} ${sb:--}" | tee -a "$R" >&2
}
# the runs of one way and size are spread over the bench (round after
# round), so that a slow spell of the machine does not land on one of them
for rep in $(seq 1 "$REPS"); do
	run read 1 "$rep"
	run local 1 "$rep"
	for n in 2 4 8; do
		for way in all-nodes sbcast per-node sbcast-1B launch; do
			run "$way" "$n" "$rep"
		done
		if [ "$n" -eq 2 ] || [ -n "$RSYNC_ALL" ]; then run rsync "$n" "$rep"; fi
	done
done
elapsed=$((SECONDS - T0))

# medians: "way N median_seconds median_ops median_bytes ok_runs runs"
M=$W/medians
awk '
	{ k = $1 " " $2; n[k]++; if ($7 == "0" && $6 != "-") { ok[k]++; s[k, ok[k]] = $6; o[k, ok[k]] = $4; b[k, ok[k]] = $5 } }
	function med(arr, k, c,   i, j, t, v) {
		for (i = 1; i <= c; i++) v[i] = arr[k, i]
		for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
		return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
	}
	END { for (k in n) if (ok[k]) print k, med(s, k, ok[k]), med(o, k, ok[k]), med(b, k, ok[k]), ok[k], n[k]; else print k, "-", "-", "-", 0, n[k] }
' "$R" | sort -k1,1 -k2,2n >"$M"
med() { awk -v w="$1" -v n="$2" '$1 == w && $2 == n { print $3 }' "$M"; }
f3() { awk -v x="$1" 'BEGIN { if (x == "" || x == "-") print "failed"; else printf "%.3f", x }'; }
# least squares t = a + b*N over the medians at 2, 4, 8: "a b"
fit() {
	awk -v w="$1" '$1 == w && $2 > 1 && $3 != "-" { n++; x += $2; y += $3; xx += $2 * $2; xy += $2 * $3 }
		END { if (n < 2) { print "- -"; exit } b = (n * xy - x * y) / (n * xx - x * x); printf "%.4f %.4f\n", (y - b * x) / n, b }' "$M"
}
read -r a_all b_all < <(fit all-nodes)
read -r a_sb b_sb < <(fit sbcast)
read -r a_pn b_pn < <(fit per-node)
read -r a_t1 b_t1 < <(fit sbcast-1B)
read -r a_ln b_ln < <(fit launch)
# the per-hop fixed cost: a 1-byte sbcast to one level of nodes (the fit
# at N = 1; the slope alone is within the noise)
c_hop=$(awk -v a="$a_t1" -v b="$b_t1" 'BEGIN { c = a + (b > 0 ? b : 0); if (c < 0) c = 0; printf "%.4f", c }')
t_read=$(med read 1) t_local=$(med local 1)

out=$top/bench/multinode.md
{
	echo "# Multi-node fan-out: 2, 4 and 8 nodes, measured, fitted, projected to $PROJ_N"
	echo
	echo "$(date -u +%Y-%m-%d), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GiB," \
		"Slurm $(sinfo -V | awk '{ print $2 }'), TreeWidth ${tw_conf:-not set (default 50)}." \
		"Image-folder dataset (gendata images): $FILES files," \
		"$((tree_size / 1048576)) MiB as a tree, $(awk -v s="$pack_size" 'BEGIN { printf "%.1f", s / 1048576 }') MiB as a pack (P)." \
		"Emulated NFS (bench/sharedfs): 0.5 ms per metadata operation, 1 GB/s shared, no page cache;" \
		"the sbcast ways read a second mount of it with a page cache dropped at each open, as NFS does" \
		"(sbcast mmaps its source, which a direct-I/O FUSE mount refuses: \"Can't mmap file ..., No such device\")." \
		"Slurm with N nodes on one machine (slurmd in namespaces, each with its own scratch):" \
		"sbcast runs over loopback and all nodes share the same $(nproc) cores, so seconds here are" \
		"CPU-bound: what N nodes do in parallel on a cluster is done one after the other here." \
		"Each figure is the median of $REPS runs, taken round after round (every way and size once a round), each after a sync; the whole bench took $((elapsed / 60)) min $((elapsed % 60)) s" \
		"(\`make bench-multinode\`, bench/multinode.sh)."
	echo
	echo "## Measured"
	echo
	echo "| nodes | way | shared-FS metadata ops | shared-FS MiB read | seconds (median) | runs ok |"
	echo "|---:|---|---:|---:|---:|---:|"
	for n in 2 4 8; do
		for way in all-nodes sbcast per-node rsync; do
			awk -v w="$way" -v n="$n" '$1 == w && $2 == n {
				if ($3 == "-") printf "| %d | %s | failed | | | 0 of %d |\n", n, w, $7
				else printf "| %d | %s | %d | %.1f | %.2f | %d of %d |\n", n, w, $4, $5 / 1048576, $3, $6, $7 }' "$M"
		done
	done
	echo
	echo "rsync (every node copies the tree, about 3 metadata operations per file) runs at N = 2 only" \
		"unless \`--rsync-all\`: its cost is in the operation counts, which grow as N times the files," \
		"and each run takes several times longer than the other ways."
	echo
	echo "Components (medians, seconds):"
	echo
	echo "| what | 2 nodes | 4 nodes | 8 nodes |"
	echo "|---|---:|---:|---:|"
	for w in sbcast-1B launch; do
		printf '| %s | %s | %s | %s |\n' "$(case $w in sbcast-1B) echo 'sbcast of a 1-byte file (per-node fixed cost of the transport)' ;; launch) echo 'empty step, srun --ntasks-per-node=1 true (step launch)' ;; esac)" \
			"$(f3 "$(med $w 2)")" "$(f3 "$(med $w 4)")" "$(f3 "$(med $w 8)")"
	done
	echo
	echo "One node: reading the pack from the shared FS (dd) $(f3 "$t_read") s; staging it from a copy on its own scratch" \
		"(\`stager stage\` of a local pack: decompress, check, write $FILES files) $(f3 "$t_local") s."
	echo
	echo "## Fitted: t(N) = a + b·N, least squares over the medians at N = 2, 4, 8"
	echo
	echo "| way | a (s) | b (s per node) | N=2 measured / model | N=4 measured / model | N=8 measured / model |"
	echo "|---|---:|---:|---|---|---|"
	for w in all-nodes sbcast per-node sbcast-1B launch; do
		read -r a b < <(fit "$w")
		[ "$a" = - ] && { echo "| $w | failed | | | | |"; continue; }
		printf '| %s | %.3f | %.4f' "$w" "$a" "$b"
		for n in 2 4 8; do
			m=$(med "$w" "$n")
			awk -v m="$m" -v a="$a" -v b="$b" -v n="$n" 'BEGIN { if (m == "-" || m == "") printf " | failed"; else printf " | %.2f / %.2f", m, a + b * n }'
		done
		echo " |"
	done
	echo
	echo "Inside all-nodes: the seconds of its sbcast (from stager's --verbose log, median), against an sbcast"
	echo "alone to the same N − 1 nodes (the fit above), and the rest: the probe and fan-out steps, the lead's"
	echo "checked copy of the pack (read from the shared FS, SHA-256, written to its scratch) and the stages"
	echo "from the copies, which check it again (digest, SHA-256, every file's XXH3)."
	echo
	echo "| nodes | all-nodes | its sbcast | sbcast alone to N − 1 (fit) | the rest |"
	echo "|---:|---:|---:|---:|---:|"
	for n in 2 4 8; do
		sbin=$(awk -v n="$n" '$1 == "all-nodes" && $2 == n && $7 == "0" && $8 != "-" { print $8 }' "$R" | sort -g |
			awk '{ v[NR] = $1 } END { if (NR) print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; else print "-" }')
		awk -v n="$n" -v m="$(med all-nodes "$n")" -v sbin="$sbin" -v as="$a_sb" -v bs="$b_sb" 'BEGIN {
			if (m == "-" || m == "") { printf "| %d | failed | | | |\n", n; exit }
			printf "| %d | %.2f | %s | %.2f | %s |\n", n, m, sbin == "-" ? "not logged" : sprintf("%.2f", sbin), as + bs * (n - 1),
				sbin == "-" ? "" : sprintf("%.2f", m - sbin) }'
	done
	echo
	awk -v bsb="$b_sb" -v bt1="$b_t1" -v chop="$c_hop" -v a1="$a_t1" -v p="$pack_size" -v bl="$b_ln" -v ba="$b_all" -v bp="$b_pn" -v tl="$t_local" 'BEGIN {
		perbyte = bsb - bt1
		printf "What the slopes say about this machine.  sbcast: each more node costs %.3f s with the pack,", bsb
		printf " %.4f s with 1 byte; the difference, %.3f s per node for %.1f MiB, is an effective", bt1, perbyte, p / 1048576
		if (perbyte > 0) printf " %.2f GB/s per copy", p / perbyte / 1e9; else printf " rate too fast to resolve"
		printf " (sending, receiving and writing every copy on the same 2 cores over loopback; at 8 nodes and TreeWidth 50"
		printf " the tree is flat, depth 1: the sender sends every copy itself).  The per-hop fixed cost"
		printf " of a 1-byte sbcast to one level of nodes, its fit at N = 1, is c_hop = %.3f s: an upper bound for one block'"'"'s round trip", chop
		printf " through one level, since it also holds the start of sbcast and its credential from slurmctld (the slope per node, %.4f s, is within the noise).", bt1
		printf "  A step launch costs %.3f s more per node.", bl
		printf "  all-nodes costs %.3f s per node and per-node %.3f s per node, against %.2f s for one node'"'"'s stage alone:", ba, bp, tl
		printf " the nodes'"'"' stages overlap on this machine, each waiting on writing its files more than computing, so the slopes are"
		printf " the part of each node'"'"'s work that does not overlap here (CPU on 2 shared cores, the sender'"'"'s copies); on a cluster"
		printf " each node has its own cores and disk.\n"
	}'
	echo
	# ---------------------------------------------------------------- model
	echo "## Model for a real cluster, and $PROJ_N nodes"
	echo
	echo "Assumed (not measurable on one machine; change them with the variables in bench/multinode.sh):"
	echo
	echo "- each node's link L = $LINK_GBIT Gb/s, non-blocking fabric (a node can send L while others send too);"
	echo "- the NFS server serves $NFS_GBYTE GB/s in total, shared by its readers; one reader gets min(L, NFS);"
	echo "  metadata is negligible for packs (a handful of operations a node, measured above);"
	echo "- Slurm's sbcast: the file goes in blocks of $BLOCK_MIB MiB, one block at a time (each block acknowledged"
	echo "  by every node before the next is read); the sender splits the nodes into $SBCAST_THREADS groups (\`sbcast --fanout\`,"
	echo "  default and maximum 8) and sends each block to one head per group \"along with\" the rest of the group"
	echo "  (seen on this Slurm 22.05.8 with \`sbcast -vvvv\`: with --fanout 1 on 8 nodes, \"Tree sending to n1 along"
	echo "  with n[2-8]\"; with 2, n1 with n[2-5] and n6 with n[7-8]; with 8, each node alone). A head forwards to"
	echo "  its group through slurmd's message tree, up to TreeWidth = $TREEWIDTH nodes directly, each of those to its share"
	echo "  of the rest (store and forward; this part is Slurm's documented TreeWidth, not observed here, where a"
	echo "  group of 8 nodes never needs it). So the sender's link carries d1 = min(N, $SBCAST_THREADS) copies of every block,"
	echo "  a head's d2 = min(g, $TREEWIDTH) for its g = ceil(N/d1) − 1 nodes, and a node below it k = ceil((g − d2)/d2);"
	echo "  up to 8 nodes the sender sends every copy itself (depth 1), as in every run above;"
	echo "- per block and per tree level a fixed cost c_hop (measured: a 1-byte sbcast to one level; the sender's"
	echo "  threads reach the children of a level at once, so it is counted once a level, not once a node),"
	echo "  and sbcast0 = c_hop once more per sbcast (its start and credential);"
	echo "- each node stages its copy in the measured local stage time, scaled by bytes for a larger pack"
	echo "  (the same CPU as here), all nodes at once; step launch is the measured 8-node empty step"
	echo "  (Slurm launches over the same tree);"
	echo "- the lead's checked copy (all-nodes) reads the pack once at one reader's speed."
	echo
	echo "Then, for a pack of S bytes on N nodes (nb = ceil(S / block)):"
	echo
	echo "- tree(N, S) = nb·h·c_hop + S·(d1 + d2 + k)/L   (h the depth; the levels follow one another block by block)"
	echo "- all-nodes: T = 2·launch + sbcast0 + S/min(L, NFS) + tree(N − 1, S) + local(S)   (probe and fan-out steps, one read, the lead's own stage in parallel with the others')"
	echo "- sbcast alone: T = sbcast0 + S/min(L, NFS) + tree(N, S)   (no stage)"
	echo "- every node reads NFS: T = launch + max(S/L, N·S/NFS) + local(S)"
	echo
	awk -v N="$PROJ_N" -v P="$pack_size" -v G="$BIG_GIB" -v L="$LINK_GBIT" -v F="$NFS_GBYTE" -v TW="$TREEWIDTH" \
		-v TH="$SBCAST_THREADS" -v BLK="$BLOCK_MIB" -v chop="$c_hop" -v sb0="$c_hop" -v launch="$(med launch 8)" -v tl="$t_local" \
		-v a_all="$a_all" -v b_all="$b_all" -v a_sb="$a_sb" -v b_sb="$b_sb" -v a_pn="$a_pn" -v b_pn="$b_pn" '
	function ceil(x) { return x == int(x) ? x : int(x) + 1 }
	function min(a, b) { return a < b ? a : b }
	function max(a, b) { return a > b ? a : b }
	# d1 heads (one per sender thread), g nodes under each head, d2 of them
	# reached by the head directly, k more by each of those
	function shape(n) {
		d1 = min(n, TH); g = ceil(n / d1) - 1; d2 = min(g, TW); k = d2 > 0 ? ceil(max(0, g - d2) / d2) : 0
		h = 1 + (d2 > 0) + (k > 0)
	}
	function tree(n, s,   nb) {
		shape(n); nb = ceil(s / (BLK * 1048576))
		return nb * h * chop + s * (d1 + d2 + k) / Lb
	}
	function loc(s) { return tl * s / P }
	function all(n, s) { return 2 * launch + sb0 + s / min(Lb, Fb) + tree(n - 1, s) + loc(s) }
	function sb(n, s) { return sb0 + s / min(Lb, Fb) + tree(n, s) }
	function pn(n, s) { return launch + max(s / Lb, n * s / Fb) + loc(s) }
	function hms(t) { return t < 120 ? sprintf("%.1f s", t) : t < 7200 ? sprintf("%.1f min", t / 60) : sprintf("%.1f h", t / 3600) }
	BEGIN {
		Lb = L * 1e9 / 8; Fb = F * 1e9
		shape(N)
		printf "At N = %d: the sender sends every block to d1 = %d heads, each head to d2 = %d of its g = %d nodes, each of those to k = %d more: depth %d, %d copies of the pack on the busiest path.\n\n", N, d1, d2, g, k, h, d1 + d2 + k
		printf "| pack | all-nodes | sbcast alone | every node reads NFS | shared-FS bytes: all-nodes / sbcast / every node |\n"
		printf "|---|---:|---:|---:|---|\n"
		printf "| P = %.1f MiB | %s | %s | %s | %.2f GB / %.2f GB / %.1f GB |\n", P / 1048576, hms(all(N, P)), hms(sb(N, P)), hms(pn(N, P)), P / 1e9, P / 1e9, N * P / 1e9
		S = G * 1073741824
		printf "| %d GiB | %s | %s | %s | %.0f GB / %.0f GB / %.0f GB |\n", G, hms(all(N, S)), hms(sb(N, S)), hms(pn(N, S)), S / 1e9, S / 1e9, N * S / 1e9
		printf "\nThe same model at the sizes measured, with L and NFS as assumed (a real cluster, not this machine): "
		for (n = 2; n <= 8; n *= 2) printf "N = %d: all-nodes %s, sbcast %s, every node %s%s", n, hms(all(n, P)), hms(sb(n, P)), hms(pn(n, P)), n < 8 ? "; " : ".\n"
		printf "\nA straight line through this machine'"'"'s points, for contrast (every node'"'"'s work on 2 shared cores, so it only bounds the CPU cost): "
		printf "all-nodes %s, sbcast %s, per-node %s at N = %d.\n", hms(a_all + b_all * N), hms(a_sb + b_sb * N), hms(a_pn + b_pn * N), N
	}'
	echo
	echo "What it says: for one pack on $PROJ_N nodes the shared filesystem is what every-node-reads spends"
	echo "(N·S bytes against the server's bandwidth), while all-nodes reads one pack and spends sbcast's tree"
	echo "and the stage: the busiest links carry d1 + d2 + k copies of the pack one level after another, so the"
	echo "fan-out costs about (d1 + d2 + k)·S/L, not log(N) hops of S/L; a smaller TreeWidth (Slurm advises about"
	echo "√N) shortens it. The local stage, scaled by bytes from this machine, is the other large term for a big pack."
	echo
	echo "Raw runs (way, nodes, run, metadata ops, bytes read, seconds, exit status, all-nodes: its sbcast's seconds):"
	echo
	echo '```'
	cat "$R"
	echo '```'
} | tee "$out"
