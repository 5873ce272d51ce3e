#!/usr/bin/env bash
# bench/run.sh - stager against rsync, tar + zstd and cp, on an emulated
# shared filesystem and on the local disk.  `make bench` runs it.
#
#   B=build bash bench/run.sh [--quick] [--reps N]
#
# Shared filesystem: the datasets live in a backing directory under
# bench/work/ that bench/sharedfs (a FUSE passthrough with an NFS-like cost
# model: a delay per metadata operation, one bandwidth shared by all
# readers and writers, a 1 s attribute cache, the page cache dropped at
# each open) mounts on bench/work/shared.  Every command reads its source
# through that mount, or for collect writes its destination there; local
# destinations are a tmpfs.  Before each run: a pause longer than the
# attribute cache, so it starts cold, as a job on another node would (the
# page cache is not dropped: see the notes in the results), and the
# mount's counters are reset; after it they are read: metadata operations,
# bytes read and bytes written on the shared filesystem.  Scenarios:
#   stage cold   stager stage of the dataset's pack (cache emptied with
#                `stager clean --all`) vs rsync -a of the tree vs
#                tar -I zstd -xf of the pack vs cp -r of the tree vs
#                cat of the pack to /dev/null (the link alone), for the
#                image-folder dataset (20,000 files, 256 MiB), 8 large
#                shards (8 x 256 MiB) and a 1 GiB container image
#   stage warm   the same datasets again on the same node: stager stage to
#                a new DEST (cache filled) vs an rsync -a re-run into a
#                complete copy
#   concurrent   4 stages of the images' pack at once on one node (single
#                flight: the pack is read once) vs 4 rsync -a at once
#   collect      a results directory (checkpoints + logs) from local
#                scratch to the shared filesystem: stager collect SRC DEST
#                vs rsync -a SRC/ DEST/, first copy, unchanged re-run, and
#                re-run after 1% of the files changed
#   scratch disk the container image's cold stage again (stager vs cp -r
#                vs cat) with the node's scratch on ext4 and on XFS, each
#                an image file under bench/work on a loop device
#                (bench/lib.sh), made for its run and removed after
#                (BENCH_SCRATCH)
# A new version (bench/delta.sh, --quick too): stager stage of v2 through
# its delta from a cached v1 vs a full stage vs rsync -a onto v1's tree, to
# bench/results-delta.md.  A job's Python environment (bench/env.sh, --quick
# too): import torch from a venv on the shared filesystem, plain vs
# `stager run --env`, to bench/results-env.md.
# Over ssh (bench/push.sh; --quick runs its harness on tiny data when
# there is an sshd and we are root): stager push and pull vs scp -r vs
# rsync -az of the image-folder dataset, first copy and after 1% changed,
# time, bytes on the wire and peak RSS, to bench/results-push.md.
# Local disk (no mount): pack (stager pack vs tar -I 'zstd -T0 -3' -cf),
# unpack (stager unpack vs tar -I zstd -xf of the same pack), ls of the
# container image's pack (time and read calls, strace), peak RSS.
#
# Each repetition runs every tool of a comparison, rotating and reversing
# the order from one repetition to the next; reported numbers are medians
# over the repetitions, and ratios of medians.  Results go to
# bench/results.md and a chart (gnuplot, bench/plot.gp) to bench/results.png;
# with --quick (tiny data, 1 repetition, a 0.2 s attribute cache: proves the
# harness works, asserts nothing about speed; each in a work directory of
# its own) to bench/work-quick/results-quick.md and .png.  The results are
# also printed.  The raw figures of a run that fails are kept in
# bench/work/tmp.failed.
# Datasets are removed at the end unless KEEP=1.
#
# Environment: B (build directory, default build), BENCH_TIMEOUT (seconds a
# command may take before it counts as failed, default 300), BENCH_DELAY_MS
# (default 0.5), BENCH_BW (default 1G, bytes/s), BENCH_ATTR_TIMEOUT (default
# 1; 0.2 with --quick), KEEP=1, BENCH_SCRATCH (the scratch filesystems of
# the container's cold stage: default "tmpfs ext4 xfs", "tmpfs" with
# --quick), BENCH_DISK_REPS (their repetitions, default the same as the
# rest), BENCH_DISK_SIZE (the images' size, default 6G, sparse).  Needs
# root for the tmpfs and the loop mounts (else the disk is used, and the
# ext4 and XFS runs are skipped, which the results say) and /dev/fuse with fusermount3 for the mount (without them --quick
# skips the shared-FS benchmarks, as tests/e2e/sharedfs.bats does; a full
# run stops); rsync and gnuplot are optional (their rows, or the chart, are
# skipped).
#
# A command that fails or runs longer than BENCH_TIMEOUT seconds is recorded
# as failed, the suite goes on, the results say so and the exit status is 1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_args 5 "$@"
cd "$ROOT"
B=${B:-build}
KEEP=${KEEP:-0}
TIMEOUT=${BENCH_TIMEOUT:-300}
DELAY_MS=${BENCH_DELAY_MS:-0.5}
BW=${BENCH_BW:-1G}
if ((QUICK)); then ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-0.2}; else ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-1}; fi
# before each run on the mount: long enough for the kernel to forget every
# name and attribute an earlier run looked up (each run starts as a job
# on another node, or later, would)
SETTLE=$(awk -v a="$ATTR_TIMEOUT" 'BEGIN { print a + 0.1 }')

die() {
	echo "run.sh: $*" >&2
	exit 1
}
log() { echo "run.sh: $*" >&2; }

[[ -d $B ]] || die "build directory '$B' not found (run make, or set B=)"
B=$(cd "$B" && pwd)
STAGER=$B/stager
GENDATA=$B/gendata
RUNSTAT=$B/runstat
SHAREDFS=$B/sharedfs
for bin in "$STAGER" "$GENDATA" "$RUNSTAT" "$SHAREDFS"; do
	[[ -x $bin ]] || die "$bin missing: run 'make all $B/gendata $B/runstat $B/sharedfs' (or make bench)"
done
for tool in tar zstd strace sync awk sort find diff timeout cp mountpoint; do
	command -v "$tool" >/dev/null || die "'$tool' is needed and not installed"
done
# the shared-FS benchmarks need FUSE; --quick (inside `make test`) goes on
# without them where there is none, as tests/e2e/sharedfs.bats skips
SFS_NOTE=
if [[ ! -e /dev/fuse ]]; then
	SFS_NOTE="/dev/fuse is missing"
elif ! command -v fusermount3 >/dev/null; then
	SFS_NOTE="fusermount3 is not installed"
fi
if [[ -n $SFS_NOTE ]] && ((!QUICK)); then
	die "the shared-FS benchmarks need FUSE: $SFS_NOTE"
fi
# rsync is optional: without it the rsync rows are skipped
HAVE_RSYNC=0
command -v rsync >/dev/null && HAVE_RSYNC=1
RSYNC_NOTE="skipped: rsync is not installed"
HAVE_GNUPLOT=0
command -v gnuplot >/dev/null && HAVE_GNUPLOT=1

if ((QUICK)); then
	N_IMAGES=500
	SHARD_COUNT=4 SHARD_SIZE=4M
	BIG_SIZE=16M
	CKPT_COUNT=2 CKPT_SIZE=1M N_LOGS=98
	OUT_SIZE=2g
	# a directory of its own for each quick run: `make test` may run one
	# in several build trees at once, or beside a full run
	mkdir -p "$ROOT/bench/work-quick"
	WORK=$(mktemp -d "$ROOT/bench/work-quick/run.XXXXXX")
	RESULTS=$ROOT/bench/work-quick/results-quick.md
	CHART=$ROOT/bench/work-quick/results-quick.png
else
	N_IMAGES=20000
	SHARD_COUNT=8 SHARD_SIZE=256M
	BIG_SIZE=1G
	CKPT_COUNT=8 CKPT_SIZE=32M N_LOGS=1992
	OUT_SIZE=8g
	WORK=$ROOT/bench/work
	RESULTS=$ROOT/bench/results.md
	CHART=$ROOT/bench/results.png
fi
N_CLASSES=100
CONC=4 # concurrent stages on one node

BACK=$WORK/back     # the shared filesystem's backing directory (local disk)
SHARED=$WORK/shared # where sharedfs mounts it
SFS_STATS=$SHARED/.sharedfs-stats
TMP=$WORK/tmp
OUT=$WORK/out # local destinations: a tmpfs when root

unmount_all() {
	local fs
	for fs in ext4 xfs; do
		[[ -e $WORK/scratch-$fs.img ]] || mountpoint -q "$WORK/scratch-$fs" 2>/dev/null || continue
		scratch_fs_umount "$WORK/scratch-$fs.img" "$WORK/scratch-$fs" ||
			log "WARNING: could not unmount $WORK/scratch-$fs"
	done
	if mountpoint -q "$SHARED" 2>/dev/null; then
		fusermount3 -u "$SHARED" 2>/dev/null || umount "$SHARED" 2>/dev/null || umount -l "$SHARED" || true
	fi
	if mountpoint -q "$OUT" 2>/dev/null; then
		chmod -R u+w "$OUT" 2>/dev/null || true
		umount "$OUT" 2>/dev/null || umount -l "$OUT" || true
	fi
}
# never delete through a mount
rm_work() { # DIR...
	local d
	for d; do
		mountpoint -q "$SHARED" 2>/dev/null && die "refusing to remove $d: $SHARED is still mounted"
		chmod -R u+w "$d" 2>/dev/null || true
		rm -rf "$d"
	done
}

mkdir -p "$WORK"
unmount_all # leftovers of an interrupted run
rm_work "$BACK" "$TMP" "$OUT"
mkdir -p "$BACK" "$TMP" "$OUT" "$SHARED"

cleanup() {
	local rc=$?
	if [[ -n ${CUR_PGID:-} ]]; then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	unmount_all
	if mountpoint -q "$SHARED" 2>/dev/null; then
		log "WARNING: could not unmount $SHARED: nothing removed"
		exit "$rc"
	fi
	# the measurements of a run that broke down are kept (small files)
	if ((rc)) && [[ -d $TMP ]]; then
		rm -rf "$WORK/tmp.failed"
		mv "$TMP" "$WORK/tmp.failed" && log "the raw measurements are kept in $WORK/tmp.failed"
		((QUICK)) && KEEP=1
	fi
	rm_work "$TMP" "$OUT" "$WORK/slots" "$WORK/no-config"
	if [[ $KEEP == 1 ]]; then
		log "KEEP=1: datasets kept in $BACK"
	else
		rm_work "$BACK"
		rmdir "$SHARED" 2>/dev/null || true
		((QUICK)) && rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Local destinations (unpack, stage, tar -x, rsync, cp; collect's source):
# node-local scratch is an SSD; on this kind of VM disk, creating files right
# after deleting tens of thousands swings 5x from run to run, which measures
# the disk, not the tools.  As root, every tool writes to the same tmpfs
# instead (BENCH_OUT=disk keeps the disk).
OUT_DESC="the work directory's disk"
if [[ ${BENCH_OUT:-tmpfs} == tmpfs && $(id -u) == 0 ]]; then
	if mount -t tmpfs -o size=$OUT_SIZE tmpfs "$OUT" 2>/dev/null; then
		OUT_DESC="a tmpfs (the same for every tool)"
	fi
fi

# The real filesystems that the container's cold stage also runs on
# (BENCH_SCRATCH, a list of tmpfs, ext4, xfs: default all three, tmpfs
# alone with --quick; tmpfs is the run above), with BENCH_DISK_REPS
# repetitions (default REPS) and an image of BENCH_DISK_SIZE (default 6G,
# sparse; 4 GiB is used at most)
DISK_FS=() SCRATCH_FS=
if ((QUICK)); then scratch_list=${BENCH_SCRATCH:-tmpfs}; else scratch_list=${BENCH_SCRATCH:-tmpfs ext4 xfs}; fi
for fs in $scratch_list; do
	case $fs in
	tmpfs) ;;
	ext4 | xfs) DISK_FS+=("$fs") ;;
	*) die "BENCH_SCRATCH: unknown filesystem '$fs' (tmpfs, ext4, xfs)" ;;
	esac
done
DISK_REPS=${BENCH_DISK_REPS:-$REPS}
DISK_SIZE=${BENCH_DISK_SIZE:-6G}
declare -A DISK_NOTE=()

# stager's settings: nothing from this machine's files or environment; a
# scratch root (per-node cache, collect records) and slot directory of the
# benchmark's own.  A stage pins its cache entry for its parent process (or
# the Slurm job, hence the unset): every stage below runs under runstat or
# timeout, gone right after, so `stager clean --all` can empty the cache.
bench_clean_env
SCRATCH=$OUT/scratch
export STAGER_SCRATCH_ROOT=$SCRATCH STAGER_SITE_CONFIG=/dev/null
export STAGER_SLOT_DIR=$WORK/slots XDG_CONFIG_HOME=$WORK/no-config
mkdir -p "$SCRATCH"

# ---- helpers ------------------------------------------------------------------

# limited, warm, order, json_field, median, minof, maxof: bench/lib.sh

# timed LABEL CMD...: sync (unless NOSYNC=1), run CMD under runstat (and
# timeout).  On success append its wall seconds to $TMP/LABEL.wall and its
# peak RSS (KiB) to $TMP/LABEL.rss and set LAST_OK=1; on failure append the
# reason to $TMP/LABEL.fail and $TMP/failures, and set LAST_OK=0.  stdout
# goes to $TMP/LABEL.out; stderr is shown.  LAST_WALL is a display string.
timed() {
	local label=$1 rs=$TMP/runstat.line rc=0
	shift
	: >"$rs"
	[[ ${NOSYNC:-0} == 1 ]] || sync
	limited "$RUNSTAT" -o "$rs" -- "$@" >"$TMP/$label.out" 2>"$TMP/$label.err"
	rc=$LIMIT_RC
	if [[ -s $TMP/$label.err ]]; then
		sed "s/^/[$label] /" "$TMP/$label.err" >&2
	fi
	local line wall rss why
	line=$(cat "$rs")
	if ((rc)); then
		if [[ -z $line ]] && ((rc == 124 || rc == 137)); then
			why="timed out after ${TIMEOUT}s"
		elif ((rc > 128 && rc < 160)); then
			why="killed by signal $((rc - 128))"
		else
			why="exit status $rc"
		fi
		echo "$why" >>"$TMP/$label.fail"
		{
			echo "- $label: $why: \`$*\`"
			head -n 3 "$TMP/$label.err" | sed 's/^/    /'
		} >>"$TMP/failures"
		LAST_OK=0
		LAST_WALL="FAILED ($why)"
		return 0
	fi
	wall=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' <<<"$line")
	rss=$(sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' <<<"$line")
	[[ -n $wall && -n $rss ]] || die "cannot parse runstat output '$line'"
	echo "$wall" >>"$TMP/$label.wall"
	echo "$rss" >>"$TMP/$label.rss"
	LAST_OK=1
	LAST_WALL=$wall
}

# reject LABEL WHY: the last run of LABEL succeeded but measured the wrong
# thing: its figures leave the medians and it counts as failed
reject() {
	local label=$1 why=$2 f
	for f in wall rss meta rd wr; do
		[[ -s $TMP/$label.$f ]] && sed -i '$d' "$TMP/$label.$f"
	done
	echo "$why" >>"$TMP/$label.fail"
	echo "- $label: $why" >>"$TMP/failures"
	log "WARNING: $label: $why"
	LAST_OK=0
	LAST_WALL="FAILED ($why)"
}

# the shared filesystem's counters
sfs_stat() { awk -v k="$1" '$1 == k { print $2; exit }' "$SFS_STATS"; }
# release reaches sharedfs after close(2) returns: wait for the last one
sfs_quiesce() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ $(sfs_stat open_now) == 0 ]] && return 0
		sleep 0.05
	done
	log "WARNING: files still open on the shared filesystem: $(sfs_stat open_now)"
}
# sfs_timed LABEL CMD...: timed, on a shared filesystem whose caches hold
# nothing from earlier runs and whose counters start at 0; then append the
# run's metadata operations, bytes read and bytes written on it to
# $TMP/LABEL.meta, .rd and .wr, and its operations by kind to $TMP/LABEL.ops
# (the last run only)
sfs_timed() {
	local label=$1
	sfs_forget "$BACK" "$SHARED"
	sync
	sleep "$SETTLE"
	sfs_quiesce
	echo reset >"$SFS_STATS"
	NOSYNC=1 timed "$@"
	((LAST_OK)) || return 0
	sfs_quiesce
	cat "$SFS_STATS" >"$TMP/stats.now"
	awk '$1 == "meta_ops" { print $2 }' "$TMP/stats.now" >>"$TMP/$label.meta"
	awk '$1 == "bytes_read" { print $2 }' "$TMP/stats.now" >>"$TMP/$label.rd"
	awk '$1 == "bytes_written" { print $2 }' "$TMP/stats.now" >>"$TMP/$label.wr"
	# per operation, metadata ones only (not read, write, flush, release*)
	awk 'NR > 9 && $2 > 0 && $1 !~ /^(read|write|flush|release|releasedir)$/' "$TMP/stats.now" |
		sort -k2,2nr -k1,1 | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 } END { print "" }' \
		>"$TMP/$label.ops"
}

# stats over a LABEL's runs (file $TMP/LABEL.KIND, one number a line)
med() { median "$TMP/$1.$2"; }
nlines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
nfail() { nlines "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "NA" && b != "NA" && b > 0) printf "%.3f", a / b; else print "—" }'; }
# speedup BASE STAGER: how many times faster stager was
speedup() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "NA" && b != "NA" && b > 0) { r = a / b; printf (r >= 100 ? "%.0f×" : r >= 10 ? "%.1f×" : "%.2f×"), r } else print "—" }'; }
# formatters: a number, or NA (no successful run)
secs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s ~ /^FAILED/) print s; else printf "%.3f s", s }'; }
msecs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s ~ /^FAILED/) print s; else printf "%.1f ms", s * 1000 }'; }
asecs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s ~ /^FAILED/) print s; else if (s < 0.1) printf "%.1f ms", s * 1000; else if (s < 10) printf "%.3f s", s; else printf "%.1f s", s }'; }
mib() { awk -v k="$1" 'BEGIN { if (k == "NA") print "—"; else printf "%.1f MiB", k / 1024 }'; }
count() { awk -v n="$1" 'BEGIN { if (n == "NA") print "—"; else { s = sprintf("%.0f", n); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o } }'; }
bytes_h() { awk -v b="$1" 'BEGIN { if (b == "NA" || b == "") print "—"; else if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else if (b >= 1024) printf "%.1f KiB", b / 1024; else printf "%d B", b }'; }
# cell FMT LABEL: the formatted median of LABEL's runs, noting failed runs
cell() {
	local fmt=$1 label=$2 f
	f=$(nfail "$TMP/$label.fail")
	if ((f)); then
		echo "**failed in $f of $((f + $(nlines "$TMP/$label.wall"))) runs** ($($fmt "$(median "$TMP/$label.wall")") median of the rest)"
	elif (($(nlines "$TMP/$label.wall") > 1)); then
		echo "$($fmt "$(median "$TMP/$label.wall")") ($($fmt "$(minof "$TMP/$label.wall")")–$($fmt "$(maxof "$TMP/$label.wall")"))"
	else
		$fmt "$(median "$TMP/$label.wall")"
	fi
}
rsscell() {
	local label=$1
	if (($(nfail "$TMP/$label.fail"))); then
		echo "$(mib "$(maxof "$TMP/$label.rss")") (successful runs)"
	else
		mib "$(maxof "$TMP/$label.rss")"
	fi
}
raw() { if [[ -s $1 ]]; then paste -sd' ' "$1"; else echo "(none)"; fi; }
# met RATIO TARGET LABEL...: yes/no for RATIO <= TARGET, "(quick)" in quick
# mode (which asserts nothing), "**no**" as well when any LABEL failed
# pairs LABEL: the median of $TMP/LABEL.ratio and its range
pairs() {
	local f=$TMP/$1.ratio
	[[ -s $f ]] || { echo "—"; return; }
	echo "median $(median "$f"), $(minof "$f")–$(maxof "$f")"
}
met() {
	local r=$1 t=$2 label
	shift 2
	for label; do
		if (($(nfail "$TMP/$label.fail"))); then echo "**no** (failed runs)"; return; fi
	done
	if ((QUICK)); then echo "(quick)"; return; fi
	awk -v r="$r" -v t="$t" 'BEGIN { if (r == "—" || r == "NA") print "—"; else print (r + 0 <= t + 0) ? "yes" : "**no**" }'
}
empty_cache() {
	limited "$STAGER" clean --all --quiet >"$TMP/clean.out" 2>"$TMP/clean.err"
	if ((LIMIT_RC)); then
		log "WARNING: stager clean --all failed (status $LIMIT_RC):"
		head -n 3 "$TMP/clean.err" >&2
	fi
}
# same_tree LABEL A B: diff -r A B, once per LABEL (untimed); the verdict
# goes to $TMP/LABEL.check
same_tree() {
	local label=$1 a=$2 b=$3
	[[ -e $TMP/$label.check ]] && return 0
	if diff -r "$a" "$b" >"$TMP/diff" 2>&1; then
		echo "identical" >"$TMP/$label.check"
	else
		echo "**differs from the source**" >"$TMP/$label.check"
		log "WARNING: $label: the copy differs from the source:"
		head -n 5 "$TMP/diff" >&2
	fi
}
check_of() { if [[ -s $TMP/$1.check ]]; then cat "$TMP/$1.check"; else echo "not checked"; fi; }

# ---- datasets -----------------------------------------------------------------

IMG=$BACK/images        # image folder: a tree of small files
SHARDS=$BACK/shards     # a few large files
BIGDIR=$BACK/container  # one large file, the container image
BIG=$BIGDIR/container.img
log "generating $N_IMAGES images, $SHARD_COUNT shards of $SHARD_SIZE and a $BIG_SIZE file under $BACK"
"$GENDATA" images "$IMG" --files "$N_IMAGES" --classes "$N_CLASSES" --seed 1
"$GENDATA" shards "$SHARDS" --count "$SHARD_COUNT" --size "$SHARD_SIZE" --seed 3
"$GENDATA" file "$BIG" --size "$BIG_SIZE" --seed 2
# (awk here is often mawk: integers past 2^31 must go through printf %.0f)
tree_bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
tree_files() { find "$1" -type f | wc -l; }
IMG_BYTES=$(tree_bytes "$IMG")
IMG_FILES=$(tree_files "$IMG")
SHARDS_BYTES=$(tree_bytes "$SHARDS")
BIG_BYTES=$(stat -c %s "$BIG")

# ---- local disk: pack -------------------------------------------------------------

SPACK=$BACK/images.tar.zst # the last stager pack: unpack and the stage benchmarks use it
TPACK=$BACK/tar.tar.zst
# Each tool's previous output is removed (untimed) right before its own run,
# the same for both: on a VM, writing into freshly freed page-cache memory
# is much cheaper than into memory the host must back anew, and leaving one
# tool's old output in place would favour the other.
local_pack_stager() {
	rm -f "$SPACK"
	timed pack_stager "$STAGER" pack "$IMG" -o "$SPACK" --quiet --progress=none
}
local_pack_tar() {
	rm -f "$TPACK"
	timed pack_tar tar -I 'zstd -T0 -3' -cf "$TPACK" -C "$BACK" images
}

warm "$IMG"
# each repetition's pair too: stager's time over tar's, the two run one
# after the other (the load of a shared machine drifts between repetitions)
for ((i = 1; i <= REPS; i++)); do
	msg=
	declare -A pw=()
	for t in $(order "$i" stager tar); do
		"local_pack_$t"
		msg+=" $t $(secs "$LAST_WALL"),"
		((LAST_OK)) && pw[$t]=$LAST_WALL
	done
	if [[ -n ${pw[stager]:-} && -n ${pw[tar]:-} ]]; then
		ratio "${pw[stager]}" "${pw[tar]}" >>"$TMP/pack_pair.ratio"
		echo >>"$TMP/pack_pair.ratio"
	fi
	unset pw
	log "pack   rep $i/$REPS:${msg%,}"
done
# the last stager pack must be good: unpack and stage use it
if ! "$STAGER" verify -q "$SPACK" >/dev/null 2>&1; then
	local_pack_stager
fi
SPACK_BYTES=$(stat -c %s "$SPACK" 2>/dev/null || echo 0)
TPACK_BYTES=$(stat -c %s "$TPACK" 2>/dev/null || echo 0)
rm -f "$TPACK"
[[ -f $SPACK ]] || die "every stager pack failed: nothing to unpack or stage"

# ---- local disk: unpack -----------------------------------------------------------

SOUT=$OUT/out-stager
TOUT=$OUT/out-tar
# stager drops the pack from the page cache after reading it (so that
# staging does not evict a job's working set): put it back before each
# tool's run, so both read it from memory
local_unpack_stager() {
	rm -rf "$SOUT" "$OUT"/.stager-unpack.*
	warm "$SPACK"
	timed unpack_stager "$STAGER" unpack "$SPACK" "$SOUT" --quiet --progress=none
	((LAST_OK)) && same_tree unpack_stager "$IMG" "$SOUT"
	rm -rf "$SOUT"
}
local_unpack_tar() {
	rm -rf "$TOUT"
	mkdir "$TOUT"
	warm "$SPACK"
	timed unpack_tar tar -I zstd -xf "$SPACK" -C "$TOUT"
	((LAST_OK)) && same_tree unpack_tar "$IMG" "$TOUT"
	rm -rf "$TOUT"
}

for ((i = 1; i <= REPS; i++)); do
	msg=
	for t in $(order "$i" stager tar); do
		"local_unpack_$t"
		msg+=" $t $(secs "$LAST_WALL"),"
	done
	log "unpack rep $i/$REPS:${msg%,}"
done

# ---- local disk: ls ---------------------------------------------------------------

BPACK=$BACK/container.tar.zst
log "packing the $BIG_SIZE file (for ls and stage) and the shards (for stage)"
timed pack_big "$STAGER" pack "$BIGDIR" -o "$BPACK" --quiet --progress=none
[[ -f $BPACK ]] || die "stager could not pack the $BIG_SIZE file"
BPACK_BYTES=$(stat -c %s "$BPACK")
local_ls_stager() { timed ls_stager "$STAGER" ls "$BPACK"; }
local_ls_tar() { timed ls_tar tar -I zstd -tf "$BPACK"; }
warm "$BPACK"
for ((i = 1; i <= REPS; i++)); do
	msg=
	for t in $(order "$i" stager tar); do
		"local_ls_$t"
		msg+=" $t $(msecs "$LAST_WALL"),"
	done
	log "ls     rep $i/$REPS:${msg%,}"
done

# read/pread64 calls on the pack's fd: strace -y prints fds as N</path>
BPACK_REAL=$(readlink -f "$BPACK")
# (LeakSanitizer cannot run under ptrace: an ASan build's leak check is off)
limited env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	strace -f -y -e trace=read,pread64 -e signal=none -o "$TMP/strace.ls" \
	"$STAGER" ls "$BPACK" >/dev/null
LS_STRACE_OK=$((LIMIT_RC == 0))
read -r LS_READS LS_BYTES < <(awk -v p="<$BPACK_REAL>" '
	{
		pid = ""; line = $0
		if (match(line, /^[0-9]+ +/)) { pid = substr(line, 1, RLENGTH - 1) + 0; line = substr(line, RLENGTH + 1) }
		if (line ~ /^(read|pread64)\(/ && index(line, p)) {
			n++
			if (line ~ /<unfinished \.\.\.>$/) pending[pid] = 1
			else if (match(line, /= [0-9]+$/)) b += substr(line, RSTART + 2)
		} else if (line ~ /^<\.\.\. (read|pread64) resumed>/ && (pid in pending)) {
			delete pending[pid]
			if (match(line, /= [0-9]+$/)) b += substr(line, RSTART + 2)
		}
	}
	END { printf "%d %.0f\n", n, b }' "$TMP/strace.ls")

SHPACK=$BACK/shards.tar.zst
limited "$STAGER" pack "$SHARDS" -o "$SHPACK" --quiet --progress=none >/dev/null
((LIMIT_RC == 0)) || die "stager could not pack the shards (status $LIMIT_RC)"
SHPACK_BYTES=$(stat -c %s "$SHPACK")

# ---- the shared filesystem ------------------------------------------------------

mkdir -p "$BACK/collect"
SFS_OK=0
if [[ -z $SFS_NOTE ]]; then
	if ! "$SHAREDFS" --delay-ms "$DELAY_MS" --bw "$BW" --attr-timeout "$ATTR_TIMEOUT" "$BACK" "$SHARED" 2>"$TMP/sharedfs.err"; then
		SFS_NOTE="sharedfs could not mount $SHARED: $(head -n 2 "$TMP/sharedfs.err" | tr '\n' ' ')"
	elif ! mountpoint -q "$SHARED"; then
		SFS_NOTE="sharedfs did not mount $SHARED"
	elif [[ ! -r $SFS_STATS ]]; then
		SFS_NOTE="no $SFS_STATS on the mount"
	else
		SFS_OK=1
	fi
fi
if ((SFS_OK)); then
	log "sharedfs: $BACK on $SHARED, ${DELAY_MS} ms per metadata operation, $BW/s, attribute cache ${ATTR_TIMEOUT} s"
elif ((QUICK)); then
	log "WARNING: the shared-FS benchmarks are skipped: $SFS_NOTE"
else
	die "$SFS_NOTE"
fi

STAGE_OPTS=(--json --quiet --progress=none)
SDEST=$OUT/stage-cold # stager's DEST: a symbolic link into the cache
WDEST=$OUT/stage-warm # removed before each warm stage, so always a new DEST
ROUT=$OUT/out-rsync
TOUT=$OUT/out-tar
COUT=$OUT/out-cp
CDEST=$OUT/stage-conc # CDEST.1 ... CDEST.4

COLD_TOOLS=(stager tar cp cat)
WARM_TOOLS=(stager)
if ((HAVE_RSYNC)); then
	COLD_TOOLS=(stager rsync tar cp cat)
	WARM_TOOLS=(stager rsync)
fi

# The dataset of the stage benchmarks: DS is its name; DS_TREE the tree and
# DS_PACK its stager pack, both through the mount; DS_BACK the tree in the
# backing directory (for the checks)
use_dataset() {
	DS=$1
	DS_BACK=$BACK/$1
	DS_TREE=$SHARED/$1
	DS_PACK=$SHARED/$1.tar.zst
	DS_BACK_PACK=$BACK/$1.tar.zst
	DSL=$1${SCRATCH_FS:+_$SCRATCH_FS} # the labels: container_ext4 on ext4
}
# The backing files are read into memory (untimed) right before each run
# that reads them, as the server's cache would hold a dataset being staged:
# the emulated link is then the shared filesystem's only cost.  Once is not
# enough: this kind of VM pages out page cache left unused for about a
# minute (DAMON), so a run after a long one would read the disk.
warm_pack() { warm "$DS_BACK_PACK"; }
warm_tree() { warm "$DS_BACK"; }

# stage, cold: after `stager clean --all` (the cache empty), to a new DEST;
# every tool's output is removed (untimed) after its check
cold_stager() {
	local label=cold_${DSL}_stager hit
	empty_cache
	rm -f "$SDEST"
	warm_pack
	sfs_timed "$label" "$STAGER" stage "$DS_PACK" "$SDEST" "${STAGE_OPTS[@]}"
	if ((LAST_OK)); then
		hit=$(json_field "$TMP/$label.out" hit)
		if [[ $hit != false ]]; then
			reject "$label" "not cold: \"hit\" was '${hit:-missing}' after stager clean --all"
		else
			json_field "$TMP/$label.out" source_bytes >"$TMP/$label.source_bytes"
			same_tree "$label" "$DS_BACK" "$SDEST"
		fi
	fi
	rm -f "$SDEST"
	empty_cache
}
cold_rsync() {
	rm -rf "$ROUT"
	warm_tree
	sfs_timed "cold_${DSL}_rsync" rsync -a "$DS_TREE/" "$ROUT/"
	((LAST_OK)) && same_tree "cold_${DSL}_rsync" "$DS_BACK" "$ROUT"
	rm -rf "$ROUT"
}
cold_tar() {
	rm -rf "$TOUT"
	mkdir "$TOUT"
	warm_pack
	sfs_timed "cold_${DSL}_tar" tar -I zstd -xf "$DS_PACK" -C "$TOUT"
	((LAST_OK)) && same_tree "cold_${DSL}_tar" "$DS_BACK" "$TOUT"
	rm -rf "$TOUT"
}
# the link's speed: one sequential read of the pack, nothing written
cold_cat() {
	warm_pack
	sfs_timed "cold_${DSL}_cat" sh -c 'cat "$1" >/dev/null' cat "$DS_PACK"
}
cold_cp() {
	rm -rf "$COUT"
	warm_tree
	sfs_timed "cold_${DSL}_cp" cp -r "$DS_TREE" "$COUT"
	((LAST_OK)) && same_tree "cold_${DSL}_cp" "$DS_BACK" "$COUT"
	rm -rf "$COUT"
}

# stage, warm: the cache holds the entry (stager) and the copy is complete
# (rsync); stager stages to a new DEST, rsync re-runs into its copy
warm_stager() {
	local label=warm_${DS}_stager hit
	rm -f "$WDEST"
	sfs_timed "$label" "$STAGER" stage "$DS_PACK" "$WDEST" "${STAGE_OPTS[@]}"
	((LAST_OK)) || return 0
	hit=$(json_field "$TMP/$label.out" hit)
	[[ $hit == true ]] || reject "$label" "not warm: \"hit\" was '${hit:-missing}'"
}
warm_rsync() { sfs_timed "warm_${DS}_rsync" rsync -a "$DS_TREE/" "$ROUT/"; }

# One untimed round of the fast tools before the timed ones.  In the run of
# 2026-11-23 the first repetitions were the slowest by far (images, cold:
# stager 2.18 s, then 0.64-1.02 s; tar 1.89 and 1.86 s, then 0.92-1.12 s):
# whichever tool ran first after a pause paid a cost of its own, which can
# turn one run's stager/tar ratio into another's.  The likely cause: this
# kind of VM hands memory it has not used for a while back to its host
# (free page reporting), and touching it again is slow.
warmup_round() { # [TOOL...]: stager tar cat unless told
	local t tools=("$@")
	((QUICK)) && return 0
	((${#tools[@]})) || tools=(stager tar cat)
	for t in "${tools[@]}"; do "cold_$t"; done
	for t in "${tools[@]}"; do rm -f "$TMP/cold_${DSL}_$t".{wall,rss,meta,rd,wr,ops}; done
	log "$DS: warm-up round done (untimed)"
}

stage_benchmarks() { # DATASET
	local t i msg
	use_dataset "$1"
	warmup_round
	for ((i = 1; i <= REPS; i++)); do
		msg=
		for t in $(order "$i" "${COLD_TOOLS[@]}"); do
			"cold_$t"
			msg+=" $t $(asecs "$LAST_WALL"),"
		done
		log "$DS: stage cold rep $i/$REPS:${msg%,}"
	done
	# fill the cache and complete the rsync copy (untimed)
	empty_cache
	rm -rf "$WDEST" "$ROUT"
	limited "$STAGER" stage "$DS_PACK" "$WDEST" "${STAGE_OPTS[@]}" >/dev/null 2>"$TMP/fill.err"
	((LIMIT_RC == 0)) || { log "WARNING: filling the cache failed (status $LIMIT_RC):"; head -n 3 "$TMP/fill.err" >&2; }
	if ((HAVE_RSYNC)); then
		limited rsync -a "$DS_TREE/" "$ROUT/"
		((LIMIT_RC == 0)) || log "WARNING: completing the rsync copy failed (status $LIMIT_RC)"
	fi
	for ((i = 1; i <= REPS; i++)); do
		msg=
		for t in $(order "$i" "${WARM_TOOLS[@]}"); do
			"warm_$t"
			msg+=" $t $(asecs "$LAST_WALL"),"
		done
		log "$DS: stage warm rep $i/$REPS:${msg%,}"
	done
	rm -rf "$WDEST" "$ROUT"
	empty_cache
}

# 4 stages of one pack at once on one node (as 4 jobs starting together
# would): the makespan, the shared filesystem's counters for all of them,
# the largest RSS of one of them.  Each stager prints its --json to
# $TMP/conc.K.json
conc_stager() {
	local label=conc_${DS}_stager k readers=0 waited=0 hit w
	empty_cache
	rm -f "$CDEST".* "$TMP"/conc.*.json
	warm_pack
	# shellcheck disable=SC2016
	sfs_timed "$label" bash -c 'n=$1; stager=$2; pack=$3; dest=$4; json=$5; shift 5
		pids=()
		for ((k = 1; k <= n; k++)); do "$stager" stage "$pack" "$dest.$k" "$@" >"$json.$k.json" & pids+=($!); done
		rc=0
		for p in "${pids[@]}"; do wait "$p" || rc=1; done
		exit $rc' conc "$CONC" "$STAGER" "$DS_PACK" "$CDEST" "$TMP/conc" "${STAGE_OPTS[@]}"
	if ((LAST_OK)); then
		for ((k = 1; k <= CONC; k++)); do
			hit=$(json_field "$TMP/conc.$k.json" hit)
			w=$(json_field "$TMP/conc.$k.json" waited)
			[[ $hit == false ]] && readers=$((readers + 1))
			[[ $w == true ]] && waited=$((waited + 1))
		done
		echo "$readers" >>"$TMP/$label.readers"
		echo "$waited" >>"$TMP/$label.waited"
		# every DEST, once
		if [[ ! -e $TMP/$label.check ]]; then
			for ((k = 1; k <= CONC; k++)); do
				rm -f "$TMP/$label.check"
				same_tree "$label" "$DS_BACK" "$CDEST.$k"
				[[ $(cat "$TMP/$label.check") == identical ]] || break
			done
		fi
	fi
	rm -f "$CDEST".*
	empty_cache
}
conc_rsync() {
	local label=conc_${DS}_rsync
	rm -rf "$ROUT".*
	warm_tree
	# shellcheck disable=SC2016
	sfs_timed "$label" bash -c 'n=$1; src=$2; dest=$3
		pids=()
		for ((k = 1; k <= n; k++)); do rsync -a "$src/" "$dest.$k/" & pids+=($!); done
		rc=0
		for p in "${pids[@]}"; do wait "$p" || rc=1; done
		exit $rc' conc "$CONC" "$DS_TREE" "$ROUT"
	rm -rf "$ROUT".*
}
conc_benchmarks() { # DATASET
	local t i msg
	use_dataset "$1"
	for ((i = 1; i <= REPS; i++)); do
		msg=
		for t in $(order "$i" "${WARM_TOOLS[@]}"); do
			"conc_$t"
			msg+=" $t $(asecs "$LAST_WALL"),"
		done
		log "$DS: $CONC concurrent stages rep $i/$REPS:${msg%,}"
	done
}

# collect: a training run's results on local scratch (checkpoints and
# logs) to the shared filesystem, a new DEST in each repetition.  Phases:
# first (DEST empty), unchanged (a re-run), changed (1% of the files: a
# checkpoint rewritten, logs appended to)
RES=$OUT/results
gen_results() {
	local k
	rm -rf "$RES"
	mkdir -p "$RES/checkpoints" "$RES/logs"
	for ((k = 0; k < CKPT_COUNT; k++)); do
		"$GENDATA" file "$(printf '%s/checkpoints/step_%06d.pt' "$RES" $(((k + 1) * 1000)))" \
			--size "$CKPT_SIZE" --seed $((100 + k)) 2>/dev/null
	done
	# logs: 20 to 400 lines of text each
	awk -v dir="$RES/logs" -v n="$N_LOGS" 'BEGIN {
		srand(7)
		for (f = 0; f < n; f++) {
			name = sprintf("%s/worker_%04d.log", dir, f)
			lines = 20 + int(rand() * 380)
			for (l = 0; l < lines; l++)
				printf "step %d rank %d loss %.6f lr %.3e throughput %.1f samples/s\n", l * 10, f, 2.5 / (1 + l * 0.01) + rand() * 0.01, 3e-4, 900 + rand() * 100 >name
			close(name)
		}
	}'
	RES_FILES=$(tree_files "$RES")
	RES_BYTES=$(tree_bytes "$RES")
}
# 1% of the files (every 100th in name order) change, as a running
# training changes them: a checkpoint rewritten, logs appended to
change_results() {
	local f k=0
	CHANGED=0
	while IFS= read -r f; do
		if ((k % 100 == 0)); then
			case $f in
			*.pt)
				"$GENDATA" file "$f" --size "$CKPT_SIZE" --seed $((500 + k)) 2>/dev/null
				touch "$f" # gendata's fixed mtime: a new one, as a real rewrite
				;;
			*) echo "step 99999 rank 0 loss 0.100000 (appended)" >>"$f" ;;
			esac
			CHANGED=$((CHANGED + 1))
		fi
		k=$((k + 1))
	done < <(find "$RES" -type f | LC_ALL=C sort)
}
collect_stager() { # PHASE REP
	local label=collect_$1_stager
	sfs_timed "$label" "$STAGER" collect "$RES" "$SHARED/collect/stager-$2" --json --quiet --progress=none
	((LAST_OK)) && json_field "$TMP/$label.out" sent_files >>"$TMP/$label.sent"
	return 0
}
collect_rsync() { # PHASE REP
	sfs_timed "collect_$1_rsync" rsync -a "$RES/" "$SHARED/collect/rsync-$2/"
}
collect_benchmarks() {
	local i t phase msg
	for ((i = 1; i <= REPS; i++)); do
		gen_results
		for phase in first unchanged changed; do
			[[ $phase == changed ]] && change_results
			msg=
			for t in $(order "$i" "${WARM_TOOLS[@]}"); do
				"collect_$t" "$phase" "$i"
				msg+=" $t $(asecs "$LAST_WALL"),"
			done
			log "collect $phase rep $i/$REPS:${msg%,}"
		done
		# the copies, compared in the backing directory (untimed, once)
		[[ -d $BACK/collect/stager-$i ]] && same_tree collect_stager "$RES" "$BACK/collect/stager-$i"
		if ((HAVE_RSYNC)) && [[ -d $BACK/collect/rsync-$i ]]; then
			same_tree collect_rsync "$RES" "$BACK/collect/rsync-$i"
		fi
		# removed in the backing directory: costs nothing on the mount
		rm -rf "$BACK/collect/stager-$i" "$BACK/collect/rsync-$i"
	done
	rm -rf "$RES"
}

# The container image's cold stage again, with the node's scratch (the
# cache, every tool's DEST) on each real filesystem of BENCH_SCRATCH: an
# image file under bench/work, loop-mounted (bench/lib.sh), made anew for
# each and removed after.  stager against cp -r of the tree and cat of the
# pack, as above; labels cold_container_FS_TOOL
disk_benchmarks() { # FS
	local fs=$1 i t msg img=$WORK/scratch-$1.img mnt=$WORK/scratch-$1
	if ! scratch_fs_mount "$fs" "$img" "$mnt" "$DISK_SIZE"; then
		DISK_NOTE[$fs]="skipped: $SCRATCH_FS_WHY"
		echo "- scratch on $fs: $SCRATCH_FS_WHY" >>"$TMP/failures"
		log "WARNING: the benchmarks with the scratch on $fs are skipped: $SCRATCH_FS_WHY"
		return 0
	fi
	DISK_NOTE[$fs]=$(scratch_fs_desc "$fs" "$img")
	log "scratch on $fs: ${DISK_NOTE[$fs]}"
	SCRATCH_FS=$fs SDEST=$mnt/stage-cold COUT=$mnt/out-cp STAGER_SCRATCH_ROOT=$mnt/scratch
	mkdir -p "$STAGER_SCRATCH_ROOT"
	use_dataset container
	warmup_round stager cp cat
	for ((i = 1; i <= DISK_REPS; i++)); do
		msg=
		for t in $(order "$i" stager cp cat); do
			"cold_$t"
			msg+=" $t $(asecs "$LAST_WALL"),"
		done
		log "$DSL: stage cold rep $i/$DISK_REPS:${msg%,}"
	done
	empty_cache
	SCRATCH_FS='' SDEST=$OUT/stage-cold COUT=$OUT/out-cp STAGER_SCRATCH_ROOT=$SCRATCH
	scratch_fs_umount "$img" "$mnt" || log "WARNING: could not unmount $mnt"
}

if ((SFS_OK)); then
	stage_benchmarks images
	conc_benchmarks images
	stage_benchmarks shards
	stage_benchmarks container
	collect_benchmarks
	for fs in "${DISK_FS[@]}"; do disk_benchmarks "$fs"; done
fi

# ---- report -----------------------------------------------------------------------

PS=$(med pack_stager wall); PT=$(med pack_tar wall)
US=$(med unpack_stager wall); UT=$(med unpack_tar wall)
LS=$(med ls_stager wall); LT=$(med ls_tar wall)
PR=$(ratio "$PS" "$PT"); UR=$(ratio "$US" "$UT"); LR=$(ratio "$LS" "$LT")
LS_CALLS="$LS_READS, $(bytes_h "$LS_BYTES") read"
((LS_STRACE_OK)) || LS_CALLS="$LS_CALLS (**stager ls failed under strace**)"

fstype=$(stat -f -c %T "$WORK")
if command -v findmnt >/dev/null && mnt=$(findmnt -n -o FSTYPE -T "$WORK" 2>/dev/null); then
	fstype="$fstype (mounted as $mnt)"
fi
model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memtotal=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
stager_v=$("$STAGER" --version 2>&1 | sed -n 1p)
stager_bin="sha256 $(sha256sum "$STAGER" | cut -c1-12), built $(date -u -r "$STAGER" '+%Y-%m-%d %H:%M:%S UTC')"
tar_v=$(tar --version | sed -n 1p)
zstd_v=$(zstd --version | sed -n '1{s/^\** *//; s/ *\**$//; s/, by .*//; p}')
rsync_v="rsync not installed"
((HAVE_RSYNC)) && rsync_v=$(rsync --version | sed -n '1{s/  */ /g; p}')
cp_v=$(cp --version | sed -n 1p)
IMG_DESC="$(count "$IMG_FILES") files in $N_CLASSES folders, $(bytes_h "$IMG_BYTES")"
SHARDS_DESC="$SHARD_COUNT × $(bytes_h $((SHARDS_BYTES / SHARD_COUNT)))"
BIG_DESC="one file, $(bytes_h "$BIG_BYTES")"
BW_DESC=$(awk -v b="$BW" 'BEGIN { m = 1; u = substr(b, length(b)); if (u ~ /[KkMmGgTt]/) { b = substr(b, 1, length(b) - 1); m = (u ~ /[Kk]/) ? 1024 : (u ~ /[Mm]/) ? 1048576 : (u ~ /[Gg]/) ? 1073741824 : 1099511627776 } v = b * m; if (v == 0) print "unlimited"; else if (v >= 1073741824) printf "%g GiB/s", v / 1073741824; else printf "%g MiB/s", v / 1048576 }')
COST_MODEL="${DELAY_MS} ms per metadata operation, $BW_DESC shared by all readers and writers, attribute and name cache ${ATTR_TIMEOUT} s, page cache dropped at each open"

# the tools' descriptions in the tables
tool_desc() { # SCENARIO TOOL
	case $1:$2 in
	cold:stager | warm:stager) echo "\`stager stage\` of the pack" ;;
	cold:rsync) echo "\`rsync -a\` of the tree" ;;
	warm:rsync) echo "\`rsync -a\` re-run into a complete copy" ;;
	cold:tar) echo "\`tar -I zstd -xf\` of the pack" ;;
	cold:cp) echo "\`cp -r\` of the tree" ;;
	cold:cat) echo "\`cat\` of the pack to /dev/null (the link alone)" ;;
	conc:stager) echo "$CONC × \`stager stage\` of the pack" ;;
	conc:rsync) echo "$CONC × \`rsync -a\` of the tree" ;;
	collect_*:stager) echo "\`stager collect SRC DEST\`" ;;
	collect_*:rsync) echo "\`rsync -a SRC/ DEST/\`" ;;
	esac
}
# row SCENARIO_TEXT SCENARIO DATASET TOOL: one line of the shared-FS table;
# the label is SCENARIO_DATASET_TOOL (collect: SCENARIO_TOOL)
row() {
	local text=$1 scen=$2 ds=$3 tool=$4 label base sp
	if [[ -n $ds ]]; then label=${scen}_${ds}_$tool base=${scen}_${ds}_stager; else label=${scen}_$tool base=${scen}_stager; fi
	if [[ $tool == rsync ]] && ((!HAVE_RSYNC)); then
		echo "| $text | $(tool_desc "$scen" "$tool") | — ($RSYNC_NOTE) | — | — | — | — | — |"
		return
	fi
	sp="—"
	[[ $tool != stager ]] && sp=$(speedup "$(med "$label" wall)" "$(med "$base" wall)")
	echo "| $text | $(tool_desc "$scen" "$tool") | $(cell asecs "$label") | $sp | $(count "$(med "$label" meta)") | $(bytes_h "$(med "$label" rd)") | $(bytes_h "$(med "$label" wr)") | $(rsscell "$label") |"
}

# targets
T_COLD_SP=$(awk -v r="$(med cold_images_rsync wall)" -v s="$(med cold_images_stager wall)" 'BEGIN { if (r == "NA" || s == "NA" || s <= 0) print "NA"; else printf "%.1f", r / s }')
T_COLD_OPS=$(maxof "$TMP/cold_images_stager.meta")
T_WARM_OPS=$(maxof "$TMP/warm_images_stager.meta")
T_WARM_OPS_ALL=$({ cat "$TMP"/warm_{images,shards,container}_stager.meta 2>/dev/null || true; } | sort -g | tail -n 1)
T_CONC_READ=$(awk -v b="$(maxof "$TMP/conc_images_stager.rd")" -v p="$SPACK_BYTES" 'BEGIN { if (b == "NA" || p <= 0) print "NA"; else printf "%.3f", b / p }')
T_CONC_READERS=$(maxof "$TMP/conc_images_stager.readers")
T_CONC_READERS_MIN=$(minof "$TMP/conc_images_stager.readers")
met_ge() { # VALUE TARGET LABEL...: VALUE >= TARGET
	local v=$1 t=$2 label
	shift 2
	for label; do
		if (($(nfail "$TMP/$label.fail"))); then echo "**no** (failed runs)"; return; fi
	done
	if ((QUICK)); then echo "(quick)"; return; fi
	awk -v v="$v" -v t="$t" 'BEGIN { if (v == "NA") print "—"; else print (v + 0 >= t + 0) ? "yes" : "**no**" }'
}
if ((QUICK)); then
	T_CONC_MET="(quick)"
elif [[ $T_CONC_READERS == NA ]]; then
	T_CONC_MET="**no** (no successful run)"
elif [[ $T_CONC_READERS == 1 && $T_CONC_READERS_MIN == 1 ]] && awk -v r="$T_CONC_READ" 'BEGIN { exit !(r < 2) }'; then
	T_CONC_MET=yes
else
	T_CONC_MET="**no**"
fi
((!$(nfail "$TMP/conc_images_stager.fail"))) || T_CONC_MET="**no** (failed runs)"
SCS=$(med cold_images_stager wall); SCT=$(med cold_images_tar wall)
SCTR=$(ratio "$SCS" "$SCT")
# large files: stager against cp -r of the tree and against one read of the pack
for ds in shards container; do
	printf -v "LCP_$ds" %s "$(ratio "$(med "cold_${ds}_stager" wall)" "$(med "cold_${ds}_cp" wall)")"
	printf -v "LCAT_$ds" %s "$(ratio "$(med "cold_${ds}_stager" wall)" "$(med "cold_${ds}_cat" wall)")"
done

# the chart's data: median seconds, then median metadata operations
# (a 0 cannot be drawn on a log scale: left out) of stager, rsync, tar, cp
plotval() { # LABEL KIND
	local v
	v=$(med "$1" "$2")
	awk -v v="$v" 'BEGIN { if (v == "NA" || v <= 0) print "?"; else print v }'
}
plotline() { # TEXT LABEL_PREFIX LABEL_SUFFIX
	local t line=$1 k
	for k in wall meta; do
		for t in stager rsync tar cp; do line+=$'\t'$(plotval "$2$t$3" "$k"); done
	done
	echo "$line"
}
{
	echo "# scenario, seconds of stager rsync tar cp, shared-FS metadata operations of stager rsync tar cp"
	plotline '"images\ncold"' cold_images_ ""
	plotline '"images\nwarm"' warm_images_ ""
	plotline "\"images\\n$CONC concurrent\"" conc_images_ ""
	plotline '"shards\ncold"' cold_shards_ ""
	plotline '"shards\nwarm"' warm_shards_ ""
	plotline '"container\ncold"' cold_container_ ""
	plotline '"container\nwarm"' warm_container_ ""
	plotline '"collect\nfirst"' collect_first_ ""
	plotline '"collect\nunchanged"' collect_unchanged_ ""
	plotline '"collect\n1% changed"' collect_changed_ ""
} >"$TMP/plot.dat"
CHART_NOTE="not drawn: gnuplot is not installed"
((SFS_OK)) || CHART_NOTE="not drawn: no shared-FS benchmarks"
if ((HAVE_GNUPLOT && SFS_OK)); then
	subtitle="${DELAY_MS} ms per metadata operation, $BW_DESC shared, ${ATTR_TIMEOUT} s attribute cache; medians of $REPS run$( ((REPS > 1)) && echo s); $(nproc) CPUs"
	((QUICK)) && subtitle="--quick, tiny data (proves the harness only): $subtitle"
	if gnuplot -e "datafile='$TMP/plot.dat'; outfile='$TMP/chart.png'; subtitle='$subtitle'" \
		"$ROOT/bench/plot.gp" 2>"$TMP/gnuplot.err"; then
		mv "$TMP/chart.png" "$CHART"
		CHART_NOTE="[${CHART#"$ROOT"/bench/}](${CHART#"$ROOT"/bench/})"
		((QUICK)) && CHART_NOTE=${CHART#"$ROOT"/}
	else
		CHART_NOTE="**gnuplot failed**: $(head -n 3 "$TMP/gnuplot.err" | tr '\n' ' ')"
		echo "- chart: gnuplot failed: $(head -n 1 "$TMP/gnuplot.err")" >>"$TMP/failures"
	fi
fi

ops_line() { # TEXT LABEL
	if [[ -s $TMP/$2.ops ]]; then
		echo "    $1: $(cat "$TMP/$2.ops")"
	elif [[ $2 == *rsync* ]] && ((!HAVE_RSYNC)); then
		:
	else
		echo "    $1: (no successful run)"
	fi
}
raw_line() { # TEXT LABEL
	[[ $2 == *rsync* ]] && ((!HAVE_RSYNC)) && return 0
	echo "    $1: s $(raw "$TMP/$2.wall") | ops $(raw "$TMP/$2.meta")"
}

{
	if ((QUICK)); then
		echo "# stager benchmarks (--quick: tiny data, proves the harness only)"
	else
		echo "# stager benchmarks"
	fi
	echo
	echo "Generated by \`bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), stager commit \`$commit\`;" \
		"medians of $REPS repetition$( ((REPS > 1)) && echo s), every tool of a comparison in each, the order rotated."
	echo
	echo "## Through an emulated shared filesystem (NFS)"
	echo
	echo "Cost model (\`bench/sharedfs\`, a FUSE passthrough): **$COST_MODEL**" \
		"(close-to-open, as NFS). Sources are read through the mount; stage destinations and collect's" \
		"source are on $OUT_DESC. *Speed-up* = the tool's median time / stager's (higher: stager faster);" \
		"*meta ops* = the metadata operations the shared filesystem served (each one round trip);" \
		"read and written = bytes through the emulated link; medians over the repetitions, and in" \
		"parentheses the fastest and the slowest repetition (the spread)."
	echo
	((SFS_OK)) || { echo "**Skipped**: $SFS_NOTE."; echo; }
	echo "| dataset, scenario | tool | time | stager speed-up | meta ops | read | written | peak RSS |"
	echo "|---|---|---|---|---|---|---|---|"
	for ds in images shards container; do
		case $ds in
		images) dd="images ($IMG_DESC)" ;;
		shards) dd="shards ($SHARDS_DESC)" ;;
		container) dd="container image ($BIG_DESC)" ;;
		esac
		for t in "${COLD_TOOLS[@]}"; do row "$dd: stage, cold" cold "$ds" "$t"; done
		((HAVE_RSYNC)) || row "$dd: stage, cold" cold "$ds" rsync
		row "$dd: stage, warm" warm "$ds" stager
		row "$dd: stage, warm" warm "$ds" rsync
		if [[ $ds == images ]]; then
			row "$dd: $CONC at once, one node" conc "$ds" stager
			row "$dd: $CONC at once, one node" conc "$ds" rsync
		fi
	done
	rd="results ($(count "${RES_FILES:-0}") files, $(bytes_h "${RES_BYTES:-0}"): $CKPT_COUNT checkpoints, $N_LOGS logs)"
	row "$rd: collect, first" collect_first "" stager
	row "$rd: collect, first" collect_first "" rsync
	row "$rd: collect, unchanged re-run" collect_unchanged "" stager
	row "$rd: collect, unchanged re-run" collect_unchanged "" rsync
	row "$rd: collect, 1% of the files (${CHANGED:-?}) changed" collect_changed "" stager
	row "$rd: collect, 1% of the files (${CHANGED:-?}) changed" collect_changed "" rsync
	echo
	echo "Chart: $CHART_NOTE"
	echo
	echo "### Targets"
	echo
	echo "| target | measured | met |"
	echo "|---|---|---|"
	echo "| cold stage of the images through the emulated NFS ≥ 20× faster than \`rsync -a\` of the tree | $( [[ $T_COLD_SP == NA ]] && echo — || echo "${T_COLD_SP}×") (medians) | $(met_ge "$T_COLD_SP" 20 cold_images_stager cold_images_rsync) |"
	echo "| cold stage of the images ≤ 30 shared-FS metadata operations | $(count "$T_COLD_OPS") (largest of the repetitions) | $(met "$T_COLD_OPS" 30 cold_images_stager) |"
	echo "| warm stage ≤ 3 metadata operations | $(count "$T_WARM_OPS") for the images ($(count "${T_WARM_OPS_ALL:-NA}") the largest over the three datasets; largest of the repetitions) | $(met "$T_WARM_OPS" 3 warm_images_stager) |"
	if [[ $T_CONC_READERS_MIN == "$T_CONC_READERS" ]]; then readers="$T_CONC_READERS of $CONC in every repetition"; else readers="$T_CONC_READERS_MIN to $T_CONC_READERS of $CONC"; fi
	echo "| $CONC concurrent stages of the images on one node read the pack once | $(awk -v r="$T_CONC_READ" 'BEGIN { if (r == "NA") print "—"; else printf "%.3f×", r }') the pack's size read from the shared FS (largest of the repetitions); stages that read the pack (\"hit\": false): $readers, the others \"waited\" for it | $T_CONC_MET |"
	echo "| cold stage ≤ 0.8 × \`tar -I zstd -x\` of the same pack (images) | $SCTR | $(met "$SCTR" 0.8 cold_images_stager cold_images_tar) |"
	for ds in shards container; do
		lcp=LCP_$ds lcat=LCAT_$ds
		echo "| cold stage of the $ds ≤ 1.0 × \`cp -r\` of the tree | ${!lcp} | $(met "${!lcp}" 1.0 "cold_${ds}_stager" "cold_${ds}_cp") |"
		echo "| cold stage of the $ds ≤ 1.2 × \`cat\` of the pack | ${!lcat} | $(met "${!lcat}" 1.2 "cold_${ds}_stager" "cold_${ds}_cat") |"
	done
	for fs in "${DISK_FS[@]}"; do
		lcp=$(ratio "$(med "cold_container_${fs}_stager" wall)" "$(med "cold_container_${fs}_cp" wall)")
		lcat=$(ratio "$(med "cold_container_${fs}_stager" wall)" "$(med "cold_container_${fs}_cat" wall)")
		echo "| scratch on $fs: cold stage of the container ≤ 1.0 × \`cp -r\` of the tree | $lcp | $(met "$lcp" 1.0 "cold_container_${fs}_stager" "cold_container_${fs}_cp") |"
		echo "| scratch on $fs: cold stage of the container ≤ 1.2 × \`cat\` of the pack | $lcat | $(met "$lcat" 1.2 "cold_container_${fs}_stager" "cold_container_${fs}_cat") |"
	done
	if ((${#DISK_FS[@]})); then
		echo
		echo "### The container image with the scratch on a real disk"
		echo
		echo "The cold stage of the container image ($BIG_DESC) through the emulated NFS, as above, with the" \
			"node's scratch (stager's cache and every tool's DEST) on each filesystem in turn: tmpfs (the table" \
			"above, $REPS repetitions), then each other one on an image file under bench/work, made, mounted and" \
			"removed for its run ($DISK_REPS repetitions, after an untimed round; stager, \`cp -r\` and \`cat\`" \
			"in a rotating order). Ratios of medians within each filesystem's run; in parentheses the fastest" \
			"and slowest repetition. Load average at the end of the runs: $(cut -d' ' -f1-3 /proc/loadavg)."
		echo
		echo "| scratch | \`stager stage\` | \`cp -r\` of the tree | \`cat\` of the pack | stager / cp -r (≤ 1.0) | stager / cat (≤ 1.2) |"
		echo "|---|---|---|---|---|---|"
		for fs in tmpfs "${DISK_FS[@]}"; do
			l=container_$fs
			[[ $fs == tmpfs ]] && l=container
			echo "| $fs | $(cell asecs "cold_${l}_stager") | $(cell asecs "cold_${l}_cp") | $(cell asecs "cold_${l}_cat") |" \
				"$(ratio "$(med "cold_${l}_stager" wall)" "$(med "cold_${l}_cp" wall)") |" \
				"$(ratio "$(med "cold_${l}_stager" wall)" "$(med "cold_${l}_cat" wall)") |"
		done
		echo
		echo "- tmpfs: $OUT_DESC."
		for fs in "${DISK_FS[@]}"; do echo "- $fs: ${DISK_NOTE[$fs]:-not run}."; done
	fi
	echo
	echo "## Local disk"
	echo
	echo "Ratio = stager / baseline (lower is better)."
	echo
	echo "| benchmark | stager | baseline | ratio | target | met |"
	echo "|---|---|---|---|---|---|"
	echo "| pack: images, $IMG_DESC | $(cell secs pack_stager) | $(cell secs pack_tar) (\`tar -I 'zstd -T0 -3' -c\`) | $PR (each repetition's pair: $(pairs pack_pair)) | ≤ 1.0 | $(met "$PR" 1.0 pack_stager pack_tar) |"
	echo "| unpack: the same dataset's stager pack | $(cell secs unpack_stager) | $(cell secs unpack_tar) (\`tar -I zstd -x\`) | $UR | ≤ 0.8 | $(met "$UR" 0.8 unpack_stager unpack_tar) |"
	echo "| ls: pack of the container image, $(bytes_h "$BIG_BYTES") | $(cell msecs ls_stager) | $(cell msecs ls_tar) (\`tar -I zstd -t\`) | $LR | — | — |"
	echo "| ls: read/pread64 calls on the pack | $LS_CALLS | — | — | — | — |"
	echo "| peak RSS, pack | $(rsscell pack_stager) | $(rsscell pack_tar) (largest of tar, zstd) | — | — | — |"
	echo "| peak RSS, unpack | $(rsscell unpack_stager) | $(rsscell unpack_tar) (largest of tar, zstd) | — | — | — |"
	echo
	echo "## Method"
	echo
	echo "- Machine: $(nproc) CPUs ($model), $memtotal RAM, Linux $(uname -r); bench/work on $fstype."
	echo "- Tools: $stager_v (binary $stager_bin); $rsync_v; $tar_v; $zstd_v; $cp_v."
	echo "- Datasets (incompressible, reproducible: \`bench/gendata\`): images, $IMG_DESC (lognormal sizes," \
		"median 8 KiB, seed 1); shards, $SHARDS_DESC; container image, $BIG_DESC. Results for collect:" \
		"$CKPT_COUNT checkpoints of $CKPT_SIZE (incompressible) and $N_LOGS text logs of 20 to 400 lines," \
		"made anew on the local side for each repetition; the change rewrites every 100th file in name" \
		"order (a checkpoint gets new contents and mtime, logs get a line appended)."
	echo "- Packs (\`stager pack\`, level 3): images $(bytes_h "$SPACK_BYTES") (tar + zstd: $(bytes_h "$TPACK_BYTES"))," \
		"shards $(bytes_h "$SHPACK_BYTES"), container image $(bytes_h "$BPACK_BYTES")."
	echo "- Shared filesystem: \`bench/sharedfs --delay-ms $DELAY_MS --bw $BW --attr-timeout $ATTR_TIMEOUT\`" \
		"over a directory on bench/work's disk. Every operation but read, write, flush and release is a" \
		"metadata operation (LOOKUP and GETATTR both arrive as getattr) and sleeps $DELAY_MS ms; up to 10" \
		"are served at once. Before each run: \`sync\`, then a pause of ${SETTLE} s so that the kernel's" \
		"attribute and name cache holds nothing from earlier runs, then \`echo reset\` to the counters" \
		"(after every file of the earlier run was released); after it, the counters are read once its last file is released." \
		"sharedfs uses libfuse's high-level API, which follows each create, mkdir, chmod and utimens with a" \
		"getattr that an NFS client gets in the reply: runs that write (collect) count about 3 operations" \
		"per file more than NFS would send, for both tools alike."
	echo "- Caches: \`echo 3 > /proc/sys/vm/drop_caches\` is **not** used. The client side is cold by" \
		"construction: the mount drops a file's page cache at each open and forgets names and attributes" \
		"after ${ATTR_TIMEOUT} s, so every run reads everything through the emulated link (see *read*)." \
		"The kernel drops that page cache inside the open(2), so before each run every large file (over" \
		"1 MiB) is opened once through the mount, untimed: otherwise the tool after one that read a 2 GiB" \
		"file through the cache (\`cat\`, \`tar\`, \`cp\`) paid about 0.4 s in its open for the other's pages," \
		"which a fresh node never does." \
		"The backing files are kept in memory, as an NFS server's cache would hold a dataset being" \
		"staged, so that the cost model is the shared filesystem's only cost, not this VM's disk:" \
		"they are read (untimed) right before each run that reads them, since this VM pages out" \
		"page cache left unused for about a minute (DAMON). stager's cache is emptied with \`stager clean --all\`" \
		"before and after each cold stage (untimed; each cold run's \`--json\` must say \"hit\": false," \
		"each warm one \"hit\": true); the other tools' outputs are removed after each run (untimed)."
	echo "- stager runs with its scratch root (STAGER_SCRATCH_ROOT: cache, collect records) on the same tmpfs, STAGER_SLOT_DIR and" \
		"XDG_CONFIG_HOME private to the benchmark, STAGER_SITE_CONFIG=/dev/null, other STAGER_* and" \
		"SLURM_* variables unset: built-in defaults (max_readers_per_node 2, no bandwidth or operations limit)."
	echo "- Warm: the cache holds the entry (filled once, untimed), each stager run stages to a new DEST;" \
		"rsync re-runs into a complete copy (nothing to transfer)."
	echo "- Concurrent: $CONC \`stager stage\` (or \`rsync -a\`) started together by one shell, each to" \
		"its own DEST; time = until the last one exits; counters for all of them; peak RSS = the" \
		"largest single process. A stage that finds another building the same entry waits for it" \
		"(\"waited\": true) and reads only the pack's trailer (about 1 MiB) to learn its digest."
	echo "- Collect: SRC on $OUT_DESC, DEST a new directory on the mount in each repetition," \
		"removed afterwards through the backing directory (untimed). stager keeps its record of DEST" \
		"on scratch; sent files per phase (medians): first $(median "$TMP/collect_first_stager.sent")," \
		"unchanged $(median "$TMP/collect_unchanged_stager.sent"), changed $(median "$TMP/collect_changed_stager.sent")."
	echo "- Checks (\`diff -r\` against the source, untimed, once per tool and scenario): $(
		for l in cold_images_stager cold_images_rsync cold_images_tar cold_images_cp cold_shards_stager cold_shards_rsync cold_shards_tar cold_shards_cp \
			cold_container_stager cold_container_rsync cold_container_tar cold_container_cp \
			$(for fs in "${DISK_FS[@]}"; do echo "cold_container_${fs}_stager cold_container_${fs}_cp"; done) conc_images_stager collect_stager collect_rsync unpack_stager unpack_tar; do
			[[ $l == *rsync* ]] && ((!HAVE_RSYNC)) && continue
			printf '%s %s; ' "$l" "$(check_of "$l")"
		done | sed 's/; $//')."
	echo "- Local disk: packs on bench/work's disk, extraction to $OUT_DESC; the page cache warm for" \
		"both tools alike (stager drops the pack from it after reading: it is read back before each" \
		"unpack). Both tools use every CPU for packing (stager's default, \`zstd -T0\`); zstd" \
		"decompression in tar's pipeline is single-threaded. stager unpack also verifies every file's" \
		"XXH3 and the pack's SHA-256. ls calls counted with \`strace -f -y -e trace=read,pread64\`" \
		"on the pack's descriptor."
	echo "- Wall time from CLOCK_MONOTONIC and peak RSS (largest over the repetitions) from wait4, via \`bench/runstat\`."
	if ((!HAVE_RSYNC)); then
		echo "- rsync is not installed: the rsync comparisons were skipped."
	fi
	echo
	echo "## Raw data"
	echo
	echo "Shared-FS metadata operations by kind, last repetition:"
	echo
	for ds in images shards container; do
		for t in "${COLD_TOOLS[@]}"; do ops_line "cold $ds $t" "cold_${ds}_$t"; done
		for t in "${WARM_TOOLS[@]}"; do ops_line "warm $ds $t" "warm_${ds}_$t"; done
	done
	for t in "${WARM_TOOLS[@]}"; do ops_line "$CONC concurrent images $t" "conc_images_$t"; done
	for p in first unchanged changed; do
		for t in "${WARM_TOOLS[@]}"; do ops_line "collect $p $t" "collect_${p}_$t"; done
	done
	echo
	echo "Wall times (s) and metadata operations, in repetition order:"
	echo
	for ds in images shards container; do
		for t in "${COLD_TOOLS[@]}"; do raw_line "cold $ds $t" "cold_${ds}_$t"; done
		for t in "${WARM_TOOLS[@]}"; do raw_line "warm $ds $t" "warm_${ds}_$t"; done
	done
	for t in "${WARM_TOOLS[@]}"; do raw_line "$CONC concurrent images $t" "conc_images_$t"; done
	for p in first unchanged changed; do
		for t in "${WARM_TOOLS[@]}"; do raw_line "collect $p $t" "collect_${p}_$t"; done
	done
	for fs in "${DISK_FS[@]}"; do
		for t in stager cp cat; do raw_line "cold container, scratch on $fs, $t" "cold_container_${fs}_$t"; done
	done
	echo "    pack stager: $(raw "$TMP/pack_stager.wall")"
	echo "    pack tar: $(raw "$TMP/pack_tar.wall")"
	echo "    unpack stager: $(raw "$TMP/unpack_stager.wall")"
	echo "    unpack tar: $(raw "$TMP/unpack_tar.wall")"
	echo "    ls stager: $(raw "$TMP/ls_stager.wall")"
	echo "    ls tar -t: $(raw "$TMP/ls_tar.wall")"
	if [[ -s $TMP/failures ]]; then
		echo
		echo "Failed runs (not in the medians):"
		echo
		cat "$TMP/failures"
	fi
} >"$TMP/results.md"
mv "$TMP/results.md" "$RESULTS"
cat "$RESULTS"
log "results written to ${RESULTS#"$ROOT"/}$( ((HAVE_GNUPLOT && SFS_OK)) && [[ -f $CHART ]] && echo ", chart to ${CHART#"$ROOT"/}")"
# push and pull over ssh against scp and rsync: bench/push.sh, with an sshd
# of its own; --quick runs its harness on tiny data, where there is an sshd
# and we are root (it starts sshd), and skips it otherwise
if ((QUICK)); then
	if [[ -x /usr/sbin/sshd ]] && (($(id -u) == 0)); then
		B=$B bash "$ROOT/bench/push.sh" --quick >/dev/null ||
			echo "- bench/push.sh --quick failed" >>"$TMP/failures"
	else
		log "no /usr/sbin/sshd or not root: the push benchmark's harness check is skipped"
	fi
else
	if [[ -x /usr/sbin/sshd ]]; then
		B=$B bash "$ROOT/bench/push.sh" --reps "$REPS" ||
			echo "- bench/push.sh failed" >>"$TMP/failures"
	else
		log "no /usr/sbin/sshd (openssh-server): the push benchmark is skipped"
	fi
fi
# a new version of a dataset staged through its delta: bench/delta.sh (on a
# sharedfs mount of its own; --quick runs its harness on tiny data)
if ((SFS_OK)); then
	if ((QUICK)); then
		B=$B bash "$ROOT/bench/delta.sh" --quick >/dev/null ||
			echo "- bench/delta.sh --quick failed" >>"$TMP/failures"
	else
		B=$B bash "$ROOT/bench/delta.sh" --reps "$REPS" ||
			echo "- bench/delta.sh failed" >>"$TMP/failures"
	fi
fi
# a job's Python environment off the shared filesystem: bench/env.sh (a
# sharedfs mount of its own; --quick: a venv without torch).  Until stager
# has `run --env` it measures the plain and local runs alone and exits 2,
# which is a failure here: the env benchmark is not done
if ((SFS_OK)); then
	rc_env=0
	if ((QUICK)); then
		B=$B bash "$ROOT/bench/env.sh" --quick >/dev/null || rc_env=$?
	else
		B=$B bash "$ROOT/bench/env.sh" --reps "$REPS" || rc_env=$?
	fi
	case $rc_env in
	0) ;;
	2) echo "- bench/env.sh: stager run --env not available (plain and local runs only)" >>"$TMP/failures" ;;
	*) echo "- bench/env.sh$( ((QUICK)) && echo " --quick") failed" >>"$TMP/failures" ;;
	esac
fi
if [[ -s $TMP/failures ]]; then
	# push.sh, delta.sh and env.sh ran after the report was written: add theirs
	grep -vxF -f "$RESULTS" "$TMP/failures" >>"$RESULTS" || true
	log "some runs failed: see the end of ${RESULTS#"$ROOT"/}"
	exit 1
fi
