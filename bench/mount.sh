#!/usr/bin/env bash
# bench/mount.sh - stager mount (a read-only FUSE tree served straight from
# a pack) against squashfuse_ll of the same tree as a squashfs image,
# against archivemount of the same data as a plain tar.zst and against
# staging first (stager stage, then read the staged copy), on the emulated
# shared filesystem of bench/run.sh.  `make bench-mount` runs it:
#
#   B=build bash bench/mount.sh [--quick] [--reps N]
#
# The packs (stager pack, level 3), the squashfs images (mksquashfs -comp
# zstd -Xcompression-level 3: the pack's level; the tool's default, 15, is
# timed once on images for the table of build times, see SQ_LEVEL) and
# the tar.zst files (tar --sort=name -I 'zstd -3' -cf, the same files in
# the same order) live in a backing
# directory under bench/work-mount/ that bench/sharedfs (--delay-ms 0.5
# --bw 1G --attr-timeout 1: an NFS-like cost model, with counters) mounts
# on bench/work-mount/shared; every tool reads them through that mount.
# Stage destinations, stager's scratch root and the staged copies are a
# tmpfs.  Datasets (bench/gendata, incompressible): images, 20,000 files
# in 100 folders (256 MiB); container, one 1 GiB image; big, both in one
# pack (1.25 GiB, 20,001 files, the container image first in name order).
# Scenarios:
#   build       `stager pack` vs `mksquashfs SRC IMG -comp zstd` (wall
#               time, size), each dataset once, the source in the page
#               cache
#   first file  from starting the command to having read one file whole
#               (cat): `stager mount PACK MNT` (it returns once MNT can be
#               read) + cat, vs `squashfuse_ll IMG MNT` + cat, vs
#               `archivemount -o readonly TAR MNT` (it
#               scans the whole archive before it returns) + cat, vs
#               `stager stage PACK DEST` (empty cache) + cat; the first
#               and the last file in archive order, of images and of big
#   random      randread (bench/randread.c): N open + 4 KiB pread + close
#               at a random offset of a random file (fixed seed), 1, 2 and
#               8 threads (8: all but archivemount; 8 readers of one
#               mount, their rate over 1 reader's is the scaling), on a
#               fresh stager mount, a fresh squashfuse_ll, a fresh archivemount
#               (at most AM_SECONDS seconds of reads: each read decodes the
#               archive from its start) and a staged copy; images and the
#               container image (random offsets in one 1 GiB file); the
#               mount or the stage is made before the clock starts
#   sequential  cat of the 1 GiB container image: stager mount + cat vs
#               squashfuse_ll + cat vs stager stage + cat (empty cache) vs
#               cat of a staged copy;
#               archivemount is left out (it decodes the archive from its
#               start for every read the kernel sends, 128 KiB at most)
#   1% of files a job that reads every 100th file of images (200 files,
#               in name order) from starting the command: stager mount vs
#               squashfuse_ll vs stager stage of the whole pack vs
#               archivemount
#   find, stat  on a fresh mount (made untimed) of images: `find MNT -type
#               f | wc -l` (names) and `find MNT -type f -printf '%s\n'`
#               (a stat of every file); stager mount vs squashfuse_ll vs
#               a staged copy
# Every run starts cold: stager's cache emptied (`stager clean --all`,
# a scratch root of the benchmark's own), no mount left, a pause longer
# than sharedfs's attribute cache, its counters reset; after it, the
# shared filesystem's bytes read and metadata operations are recorded
# (for the random reads, from after the mount was made to the end).  The
# backing files are read untimed before each run so the VM's disk is not
# measured (as in run.sh).  What a run reads is checked untimed: cmp of
# the file against the source (first file, sequential, 1%), randread
# --verify (random).  Each repetition runs every tool of a comparison,
# the order rotated; medians and min-max over the repetitions.
# Results to bench/results-mount.md (and printed); --quick (tiny data, 1
# repetition, 0.2 s attribute cache: proves the harness works, asserts
# nothing) to bench/work-mount/results-quick.md.  Datasets are removed at
# the end unless KEEP=1.
#
# Environment: B (build directory, default build), BENCH_TIMEOUT (seconds a
# command may take, default 300), BENCH_DELAY_MS (0.5), BENCH_BW (1G),
# BENCH_ATTR_TIMEOUT (1; 0.2 with --quick), AM_SECONDS (10; 2 with
# --quick), RR_COUNT (random reads a run, 2000; 200 with --quick),
# SQ_LEVEL (mksquashfs's zstd level for the mounted images, 3),
# SQ_DEFAULT=0 (skip the timing of mksquashfs's default level),
# PACK_FRAME (stager pack --frame-size for every pack, e.g. 256K; default
# stager's own, 4M), RESULTS_FILE (where the results go), KEEP=1.
# Needs root (tmpfs), /dev/fuse, fusermount3, archivemount, squashfuse_ll
# and mksquashfs.  A run that
# fails is recorded, left out of the figures and listed in the results;
# the script goes on and exits 1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_args 3 "$@"
cd "$ROOT"
B=${B:-build}
[[ $B == /* ]] || B=$ROOT/$B
die() {
	echo "mount.sh: $*" >&2
	exit 1
}
log() { echo "mount.sh: $*" >&2; }
[[ -d $B ]] || die "build directory '$B' not found (run make, or set B=)"
B=$(cd "$B" && pwd)
STAGER=$B/stager GENDATA=$B/gendata RUNSTAT=$B/runstat SHAREDFS=$B/sharedfs RANDREAD=$B/randread
for x in "$STAGER" "$GENDATA" "$RUNSTAT" "$SHAREDFS" "$RANDREAD"; do
	[[ -x $x ]] || die "$x missing: run 'make all $B/gendata $B/runstat $B/sharedfs $B/randread' (or make bench-mount)"
done
for tool in archivemount squashfuse_ll mksquashfs fusermount3 tar zstd cmp mountpoint timeout awk sort; do
	command -v "$tool" >/dev/null || die "'$tool' is needed and not installed"
done
[[ -e /dev/fuse ]] || die "/dev/fuse is missing"
(($(id -u) == 0)) || die "needs root (the tmpfs for destinations)"

TIMEOUT=${BENCH_TIMEOUT:-300}
DELAY_MS=${BENCH_DELAY_MS:-0.5}
BW=${BENCH_BW:-1G}
KEEP=${KEEP:-0}
SQ_LEVEL=${SQ_LEVEL:-3}
PACK_FRAME=${PACK_FRAME:-}
PACK_OPTS=()
[[ -n $PACK_FRAME ]] && PACK_OPTS=(--frame-size "$PACK_FRAME")
FRAME_H=$(numfmt --from=iec "${PACK_FRAME:-4M}" | awk '{ if ($1 >= 1048576) printf "%g MiB", $1 / 1048576; else printf "%g KiB", $1 / 1024 }')
FRAME_X=$(numfmt --from=iec "${PACK_FRAME:-4M}" | awk '{ printf "%g", $1 / 131072 }')
SQ_DEFAULT=${SQ_DEFAULT:-1}
if ((QUICK)); then
	ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-0.2}
	AM_SECONDS=${AM_SECONDS:-2}
	RR_COUNT=${RR_COUNT:-200}
	N_IMAGES=500 BIG_SIZE=32M OUT_SIZE=2g
	mkdir -p "$ROOT/bench/work-mount"
	WORK=$(mktemp -d "$ROOT/bench/work-mount/quick.XXXXXX")
	RESULTS=$ROOT/bench/work-mount/results-quick.md
else
	ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-1}
	AM_SECONDS=${AM_SECONDS:-10}
	RR_COUNT=${RR_COUNT:-2000}
	N_IMAGES=20000 BIG_SIZE=1G OUT_SIZE=8g
	WORK=$ROOT/bench/work-mount/full
	RESULTS=$ROOT/bench/results-mount.md
fi
if [[ -n ${RESULTS_FILE:-} ]]; then
	RESULTS=$RESULTS_FILE
	[[ $RESULTS == /* ]] || RESULTS=$ROOT/$RESULTS
fi
N_CLASSES=100
SETTLE=$(awk -v a="$ATTR_TIMEOUT" 'BEGIN { print a + 0.1 }')

SRC=$WORK/src       # the datasets' trees (the reference for cmp)
BACK=$WORK/back     # packs and tar.zst files: sharedfs's backing directory
SHARED=$WORK/shared # where sharedfs mounts it
SFS_STATS=$SHARED/.sharedfs-stats
OUT=$WORK/out # a tmpfs: stage destinations, stager's scratch root
MS=$WORK/mnt-stager
MA=$WORK/mnt-archivemount
MQ=$WORK/mnt-squashfuse
TMP=$WORK/tmp

unmount_all() {
	if mountpoint -q "$MS" 2>/dev/null; then
		"$STAGER" umount -q "$MS" 2>/dev/null || true
		umount_fuse "$MS"
	fi
	umount_fuse "$MA"
	umount_fuse "$MQ"
	umount_fuse "$SHARED"
	if mountpoint -q "$OUT" 2>/dev/null; then
		chmod -R u+w "$OUT" 2>/dev/null || true
		umount "$OUT" 2>/dev/null || umount -l "$OUT" || true
	fi
}
# never delete through a mount
rm_work() { # DIR...
	local d m
	for m in "$SHARED" "$MS" "$MA" "$MQ" "$OUT"; do
		mountpoint -q "$m" 2>/dev/null && die "refusing to remove $*: $m is still mounted"
	done
	for d; do
		chmod -R u+w "$d" 2>/dev/null || true
		rm -rf "$d"
	done
}

mkdir -p "$WORK"
unmount_all # leftovers of an interrupted run
rm_work "$SRC" "$BACK" "$TMP" "$OUT"
mkdir -p "$SRC" "$BACK" "$TMP" "$OUT" "$SHARED" "$MS" "$MA" "$MQ"

CUR_PGID=
cleanup() {
	local rc=$?
	if [[ -n ${CUR_PGID:-} ]]; then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	unmount_all
	local m
	for m in "$MS" "$MA" "$MQ" "$SHARED" "$OUT"; do
		if mountpoint -q "$m" 2>/dev/null; then
			log "WARNING: could not unmount $m: nothing removed"
			exit "$rc"
		fi
	done
	if ((rc)) && [[ -d $TMP ]]; then
		rm -rf "$WORK/tmp.failed"
		mv "$TMP" "$WORK/tmp.failed" && log "the raw measurements are kept in $WORK/tmp.failed"
		((QUICK)) && KEEP=1
	fi
	rm_work "$TMP" "$OUT" "$WORK/slots" "$WORK/no-config"
	if [[ $KEEP == 1 ]]; then
		log "KEEP=1: datasets kept in $SRC and $BACK"
	else
		rm_work "$SRC" "$BACK"
		rmdir "$SHARED" "$MS" "$MA" "$MQ" 2>/dev/null || true
		((QUICK)) && rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount -t tmpfs -o size=$OUT_SIZE tmpfs "$OUT" || die "cannot mount a tmpfs on $OUT"

# stager's settings: nothing from this machine's files or environment (as
# in run.sh); the mount's process, like a stage, runs with these
bench_clean_env
SCRATCH=$OUT/scratch
export STAGER_SCRATCH_ROOT=$SCRATCH STAGER_SITE_CONFIG=/dev/null
export STAGER_SLOT_DIR=$WORK/slots XDG_CONFIG_HOME=$WORK/no-config
mkdir -p "$SCRATCH"

LOAD_START=$(uptime | sed 's/.*load average: *//')
T_START=$(date +%s)

# ---- helpers (those of run.sh) ----------------------------------------------------

# fail LABEL WHY: record a failed run (left out of the figures)
fail() {
	echo "$2" >>"$TMP/$1.fail"
	echo "- $1: $2" >>"$TMP/failures"
	log "WARNING: $1: $2"
	LAST_OK=0
}
sfs_stat() { awk -v k="$1" '$1 == k { print $2; exit }' "$SFS_STATS"; }
# release reaches sharedfs after close(2) returns: wait for the last one
sfs_quiesce() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ $(sfs_stat open_now) == "${1:-0}" ]] && return 0
		sleep 0.05
	done
	log "WARNING: files open on the shared filesystem: $(sfs_stat open_now), ${1:-0} expected"
}
empty_cache() {
	limited "$STAGER" clean --all --quiet >"$TMP/clean.out" 2>"$TMP/clean.err"
	((LIMIT_RC == 0)) || { log "WARNING: stager clean --all failed (status $LIMIT_RC)"; head -n 3 "$TMP/clean.err" >&2; }
	chmod -R u+w "$OUT/dest" 2>/dev/null || true
	rm -rf "$OUT/dest"
	# an entry left (pinned) would serve the next mount or stage
	"$STAGER" status 2>/dev/null | grep -q '^cache .* in 0 entries' ||
		log "WARNING: the cache is not empty after stager clean --all: $("$STAGER" status 2>&1 | grep '^cache')"
}
am_umount() { umount_fuse "$MA"; }
sq_umount() { umount_fuse "$MQ"; }
# pack files still open on sharedfs (a mount's process that has not ended)
# would spoil the next run's counters
settle_mounts() { stager_umount; am_umount; sq_umount; sfs_quiesce 0; }

# check LABEL A B: cmp, once per LABEL, untimed
check() {
	local label=$1
	[[ -e $TMP/$label.check ]] && return 0
	if cmp -s "$2" "$3"; then
		echo identical >"$TMP/$label.check"
	else
		echo "**differs from the source**" >"$TMP/$label.check"
		fail "$label" "$2 differs from $3"
	fi
}
# cold_hit LABEL: a timed stage must have read the pack ("hit": false in
# its --json); one that found it cached is taken out of the figures
cold_hit() {
	((LAST_OK)) || return 0
	grep -q '"hit": *false' "$TMP/$1.out" && return 0
	local k
	for k in wall rd meta; do [[ -s $TMP/$1.$k ]] && sed -i '$d' "$TMP/$1.$k"; done
	fail "$1" "the stage found the pack cached: $(head -c 200 "$TMP/$1.out")"
}
check_of() { if [[ -s $TMP/$1.check ]]; then cat "$TMP/$1.check"; else echo "not checked"; fi; }

nlines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
raw() { if [[ -s $1 ]]; then paste -sd' ' "$1"; else echo "(none)"; fi; }
bytes_h() { awk -v b="$1" 'BEGIN { if (b == "NA" || b == "") print "—"; else if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else if (b >= 1024) printf "%.1f KiB", b / 1024; else printf "%d B", b }'; }
count() { awk -v n="$1" 'BEGIN { if (n == "NA") print "—"; else { s = sprintf("%.0f", n); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o } }'; }
asecs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s < 0.1) printf "%.1f ms", s * 1000; else if (s < 10) printf "%.3f s", s; else printf "%.1f s", s }'; }
# spread LABEL KIND FMT: "median (min–max)" with FMT, or the failure count
spread() {
	local f=$TMP/$1.$2 fmt=$3 n nf
	nf=$(nlines "$TMP/$1.fail")
	n=$(nlines "$f")
	if ((n == 0)); then
		if ((nf)); then echo "**failed** ($nf runs)"; else echo "—"; fi
		return
	fi
	local s
	if ((n > 1)); then
		s="$($fmt "$(median "$f")") ($($fmt "$(minof "$f")")–$($fmt "$(maxof "$f")"))"
	else
		s=$($fmt "$(median "$f")")
	fi
	((nf)) && s+=" **$nf failed**"
	echo "$s"
}
rate() { awk -v r="$1" 'BEGIN { if (r == "NA") print "—"; else if (r >= 100) printf "%.0f/s", r; else printf "%.1f/s", r }'; }
mbs() { awk -v r="$1" 'BEGIN { if (r == "NA") print "—"; else printf "%.0f MB/s", r / 1e6 }'; }
# ratio A B: A / B, "—" when either is missing
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "NA" && b != "NA" && b > 0) { r = a / b; printf (r >= 100 ? "%.0f×" : r >= 10 ? "%.1f×" : "%.2f×"), r } else print "—" }'; }

# ---- datasets -------------------------------------------------------------------

log "generating $N_IMAGES images and a $BIG_SIZE container image under $SRC"
"$GENDATA" images "$SRC/images" --files "$N_IMAGES" --classes "$N_CLASSES" --seed 1 2>/dev/null
"$GENDATA" file "$SRC/container/container.img" --size "$BIG_SIZE" --seed 2 2>/dev/null
mkdir -p "$SRC/big"
cp -a "$SRC/container/container.img" "$SRC/big/"
cp -a "$SRC/images" "$SRC/big/images"

tree_bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
declare -A PACK_B PACK_FR TAR_B SQ_B FILES_N DATA_B
# the source is in the page cache (just written): both tools read it from
# memory; timed once each, not repeated (a build is not on a job's path)
for ds in images container big; do
	log "packing $ds (stager pack, mksquashfs)"
	sync
	timed "build_${ds}_stager" "$STAGER" pack -q "${PACK_OPTS[@]}" "$SRC/$ds" -o "$BACK/$ds.tar.zst"
	((LAST_OK)) || die "stager pack of $ds failed: $(head -n 2 "$TMP/build_${ds}_stager.err" | tr '\n' ' ')"
	sync
	timed "build_${ds}_sq" mksquashfs "$SRC/$ds" "$BACK/$ds.sqfs" -comp zstd -Xcompression-level "$SQ_LEVEL" -noappend -quiet
	((LAST_OK)) || die "mksquashfs of $ds failed: $(head -n 2 "$TMP/build_${ds}_sq.err" | tr '\n' ' ')"
	SQ_B[$ds]=$(stat -c %s "$BACK/$ds.sqfs")
	# the same files, in name order like stager's, top-level names without "./"
	(cd "$SRC/$ds" && LC_ALL=C tar --sort=name -I 'zstd -3' -cf "$BACK/$ds-tar.tar.zst" -- *)
	PACK_B[$ds]=$(stat -c %s "$BACK/$ds.tar.zst")
	PACK_FR[$ds]=$("$STAGER" ls --json "$BACK/$ds.tar.zst" | sed -n 's/.*"frames": *\([0-9]*\).*/\1/p' | sed -n 1p)
	TAR_B[$ds]=$(stat -c %s "$BACK/$ds-tar.tar.zst")
	FILES_N[$ds]=$(find "$SRC/$ds" -type f | wc -l)
	DATA_B[$ds]=$(tree_bytes "$SRC/$ds")
	# the list for randread: "SIZE PATH", from the source
	(cd "$SRC/$ds" && find . -type f -printf '%s %P\n' | LC_ALL=C sort -k2) >"$TMP/$ds.list"
done
# mksquashfs as a user runs it (its default zstd level, 15), images only:
# on incompressible data that level costs minutes for the larger trees
SQDEF_B=NA
if ((SQ_DEFAULT)); then
	log "mksquashfs -comp zstd (its default level) of images, timed"
	sync
	timed build_images_sqdef mksquashfs "$SRC/images" "$TMP/images-default.sqfs" -comp zstd -noappend -quiet
	((LAST_OK)) && SQDEF_B=$(stat -c %s "$TMP/images-default.sqfs")
	rm -f "$TMP/images-default.sqfs"
fi
# the first and the last file in archive order (regular files only)
for ds in images big; do
	"$STAGER" ls "$BACK/$ds.tar.zst" | grep -v '/$' >"$TMP/$ds.order"
	tar -tf "$BACK/$ds-tar.tar.zst" | grep -v '/$' >"$TMP/$ds.tarorder"
done
FIRST_images=$(sed -n 1p "$TMP/images.order")
LAST_images=$(tail -n 1 "$TMP/images.order")
# big: the container image comes first in name order; the first file of
# that case is the first image, a small file after 1 GiB of the pack
FIRST_big=$(grep -m 1 '^images/' "$TMP/big.order")
LAST_big=$(tail -n 1 "$TMP/big.order")
TAR_LAST_images=$(tail -n 1 "$TMP/images.tarorder")
TAR_LAST_big=$(tail -n 1 "$TMP/big.tarorder")
[[ $TAR_LAST_big == "$LAST_big" && $TAR_LAST_images == "$LAST_images" ]] ||
	log "WARNING: the tar.zst's last file ($TAR_LAST_images, $TAR_LAST_big) is not the pack's ($LAST_images, $LAST_big)"
# the job that touches 1% of the files: every 100th in name order
awk 'NR % 100 == 1 { print $2 }' "$TMP/images.list" >"$TMP/one.list"
ONE_N=$(wc -l <"$TMP/one.list")
ONE_B=$(awk 'NR % 100 == 1 { s += $1 } END { printf "%.0f\n", s }' "$TMP/images.list")
# and a job that touches 1% of the files that sit together: one folder of 100
FOLD_DIR=$(awk '{ print $2 }' "$TMP/images.list" | awk -F/ 'NF > 1 { print $1 }' | sort -u | sed -n '43p;$p' | head -n 1)
awk -v d="$FOLD_DIR/" 'index($2, d) == 1 { print $2 }' "$TMP/images.list" >"$TMP/fold.list"
FOLD_N=$(wc -l <"$TMP/fold.list")
FOLD_B=$(awk -v d="$FOLD_DIR/" 'index($2, d) == 1 { s += $1 } END { printf "%.0f\n", s }' "$TMP/images.list")

"$SHAREDFS" --delay-ms "$DELAY_MS" --bw "$BW" --attr-timeout "$ATTR_TIMEOUT" "$BACK" "$SHARED" 2>"$TMP/sharedfs.err" ||
	die "sharedfs could not mount $SHARED: $(head -n 2 "$TMP/sharedfs.err" | tr '\n' ' ')"
mountpoint -q "$SHARED" && [[ -r $SFS_STATS ]] || die "sharedfs did not mount $SHARED"
log "sharedfs: $BACK on $SHARED, ${DELAY_MS} ms per metadata operation, $BW/s, attribute cache ${ATTR_TIMEOUT} s"

# ---- scenario 1: time to the first file ---------------------------------------------

# Each command runs under `sh -c`, from its start to the end of cat.
ff_stager() { # DS WHICH FILE
	local label=ff_$1_$2_stager
	empty_cache
	warm "$BACK/$1.tar.zst"
	sfs_timed_mount "$label" sh -c '"$1" mount -q "$2" "$3" && cat "$3/$4" >/dev/null' sh \
		"$STAGER" "$SHARED/$1.tar.zst" "$MS" "$3"
	((LAST_OK)) && check "$label" "$MS/$3" "$SRC/$1/$3"
	stager_umount
}
ff_am() {
	local label=ff_$1_$2_am
	warm "$BACK/$1-tar.tar.zst"
	sfs_timed_mount "$label" sh -c 'archivemount -o readonly "$1" "$2" && cat "$2/$3" >/dev/null' sh \
		"$SHARED/$1-tar.tar.zst" "$MA" "$3"
	((LAST_OK)) && check "$label" "$MA/$3" "$SRC/$1/$3"
	am_umount
}
ff_sq() {
	local label=ff_$1_$2_sq
	warm "$BACK/$1.sqfs"
	sfs_timed_mount "$label" sh -c 'squashfuse_ll "$1" "$2" && cat "$2/$3" >/dev/null' sh \
		"$SHARED/$1.sqfs" "$MQ" "$3"
	((LAST_OK)) && check "$label" "$MQ/$3" "$SRC/$1/$3"
	sq_umount
}
ff_stage() {
	local label=ff_$1_$2_stage
	empty_cache
	warm "$BACK/$1.tar.zst"
	sfs_timed "$label" sh -c '"$1" stage -q --json "$2" "$3" && cat "$3/$4" >/dev/null' sh \
		"$STAGER" "$SHARED/$1.tar.zst" "$OUT/dest" "$3"
	cold_hit "$label"
	((LAST_OK)) && check "$label" "$OUT/dest/$3" "$SRC/$1/$3"
	empty_cache
}
# the mount's process (stager, archivemount) still holds the pack when
# the command returns: the counters are read with it open, then it goes
sfs_timed_mount() { OPEN_AFTER=1 sfs_timed "$@"; }

# ---- scenario 2: random 4 KiB reads -------------------------------------------------

RR_THREADS=(1 2 8)
rr_run() { # LABEL ROOT DS THREADS [randread options]
	local label=$1 root=$2 ds=$3 t=$4
	shift 4
	sfs_timed "$label" "$RANDREAD" --threads "$t" --count "$RR_COUNT" --seed 1 "$@" "$root" "$TMP/$ds.list"
	if ((LAST_OK)); then
		sed -n 's/.*reads_per_s=\([0-9.]*\).*/\1/p' "$TMP/$label.out" >>"$TMP/$label.rate"
		sed -n 's/.*reads=\([0-9]*\) .*/\1/p' "$TMP/$label.out" >>"$TMP/$label.reads"
		# correctness, untimed, on the same mount: other reads (seed 2)
		if [[ ! -e $TMP/$label.check ]]; then
			if "$RANDREAD" --count 50 --seed 2 --verify "$SRC/$ds" "$root" "$TMP/$ds.list" >/dev/null 2>"$TMP/verify.err"; then
				echo identical >"$TMP/$label.check"
			else
				echo "**differs from the source**" >"$TMP/$label.check"
				fail "$label" "randread --verify: $(head -n 1 "$TMP/verify.err")"
			fi
		fi
	fi
}
rr_stager() { # DS THREADS
	empty_cache
	warm "$BACK/$1.tar.zst"
	if ! "$STAGER" mount -q "$SHARED/$1.tar.zst" "$MS" 2>"$TMP/mount.err"; then
		fail "rr_$1_stager_$2" "stager mount failed: $(head -n 1 "$TMP/mount.err")"
		return 0
	fi
	OPEN_BEFORE=1 OPEN_AFTER=1 rr_run "rr_$1_stager_$2" "$MS" "$1" "$2"
	stager_umount
}
rr_am() {
	warm "$BACK/$1-tar.tar.zst"
	if ! archivemount -o readonly "$SHARED/$1-tar.tar.zst" "$MA" 2>"$TMP/mount.err"; then
		fail "rr_$1_am_$2" "archivemount failed: $(head -n 1 "$TMP/mount.err")"
		return 0
	fi
	OPEN_BEFORE=1 OPEN_AFTER=1 rr_run "rr_$1_am_$2" "$MA" "$1" "$2" --max-seconds "$AM_SECONDS"
	am_umount
}
rr_sq() {
	warm "$BACK/$1.sqfs"
	if ! squashfuse_ll "$SHARED/$1.sqfs" "$MQ" 2>"$TMP/mount.err"; then
		fail "rr_$1_sq_$2" "squashfuse_ll failed: $(head -n 1 "$TMP/mount.err")"
		return 0
	fi
	OPEN_BEFORE=1 OPEN_AFTER=1 rr_run "rr_$1_sq_$2" "$MQ" "$1" "$2"
	# how many threads serve it (Debian 12's squashfuse_ll: one)
	[[ -s $TMP/sq.threads ]] || sq_threads >"$TMP/sq.threads"
	sq_umount
}
# the threads of the squashfuse_ll process that serves MQ
sq_threads() {
	local p
	for p in $(pgrep -x squashfuse_ll); do
		if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF " $MQ"; then
			ls "/proc/$p/task" | wc -l
			return 0
		fi
	done
	echo "?"
}
rr_staged() {
	empty_cache
	if ! "$STAGER" stage -q --no-pin "$SHARED/$1.tar.zst" "$OUT/dest" >/dev/null 2>"$TMP/stage.err"; then
		fail "rr_$1_staged_$2" "stager stage failed: $(head -n 1 "$TMP/stage.err")"
		return 0
	fi
	rr_run "rr_$1_staged_$2" "$OUT/dest" "$1" "$2"
	empty_cache
}

# ---- scenario 3: sequential reads of a large file -------------------------------------

BIGF=container.img
seq_stager() {
	empty_cache
	warm "$BACK/container.tar.zst"
	sfs_timed_mount seq_stager sh -c '"$1" mount -q "$2" "$3" && cat "$3/$4" >/dev/null' sh \
		"$STAGER" "$SHARED/container.tar.zst" "$MS" "$BIGF"
	((LAST_OK)) && check seq_stager "$MS/$BIGF" "$SRC/container/$BIGF"
	stager_umount
}
seq_sq() {
	warm "$BACK/container.sqfs"
	sfs_timed_mount seq_sq sh -c 'squashfuse_ll "$1" "$2" && cat "$2/$3" >/dev/null' sh \
		"$SHARED/container.sqfs" "$MQ" "$BIGF"
	((LAST_OK)) && check seq_sq "$MQ/$BIGF" "$SRC/container/$BIGF"
	sq_umount
}
seq_stagecat() {
	empty_cache
	warm "$BACK/container.tar.zst"
	sfs_timed seq_stagecat sh -c '"$1" stage -q --json "$2" "$3" && cat "$3/$4" >/dev/null' sh \
		"$STAGER" "$SHARED/container.tar.zst" "$OUT/dest" "$BIGF"
	cold_hit seq_stagecat
	((LAST_OK)) && check seq_stagecat "$OUT/dest/$BIGF" "$SRC/container/$BIGF"
	empty_cache
}
seq_staged() {
	empty_cache
	"$STAGER" stage -q --no-pin "$SHARED/container.tar.zst" "$OUT/dest" >/dev/null 2>"$TMP/stage.err" ||
		{ fail seq_staged "stager stage failed: $(head -n 1 "$TMP/stage.err")"; return 0; }
	sfs_timed seq_staged sh -c 'cat "$1" >/dev/null' sh "$OUT/dest/$BIGF"
	((LAST_OK)) && check seq_staged "$OUT/dest/$BIGF" "$SRC/container/$BIGF"
	empty_cache
}

# ---- scenario 4: a job that reads 1% of the files ---------------------------------------

# JOB: one (every 100th file) or fold (the files of one folder); the list
# of files is $TMP/JOB.list, the labels JOB_TOOL
one_stager() {
	empty_cache
	warm "$BACK/images.tar.zst"
	sfs_timed_mount "$1_stager" sh -c '"$1" mount -q "$2" "$3" && cd "$3" && xargs -d "\n" cat <"$4" >/dev/null' sh \
		"$STAGER" "$SHARED/images.tar.zst" "$MS" "$TMP/$1.list"
	((LAST_OK)) && check_list "$1_stager" "$MS" "$1"
	stager_umount
}
one_stage() {
	empty_cache
	warm "$BACK/images.tar.zst"
	sfs_timed "$1_stage" sh -c '"$1" stage -q --json "$2" "$3" && cd "$3" && xargs -d "\n" cat <"$4" >/dev/null' sh \
		"$STAGER" "$SHARED/images.tar.zst" "$OUT/dest" "$TMP/$1.list"
	cold_hit "$1_stage"
	((LAST_OK)) && check_list "$1_stage" "$OUT/dest" "$1"
	empty_cache
}
one_am() {
	warm "$BACK/images-tar.tar.zst"
	sfs_timed_mount "$1_am" sh -c 'archivemount -o readonly "$1" "$2" && cd "$2" && xargs -d "\n" cat <"$3" >/dev/null' sh \
		"$SHARED/images-tar.tar.zst" "$MA" "$TMP/$1.list"
	((LAST_OK)) && check_list "$1_am" "$MA" "$1"
	am_umount
}
one_sq() {
	warm "$BACK/images.sqfs"
	sfs_timed_mount "$1_sq" sh -c 'squashfuse_ll "$1" "$2" && cd "$2" && xargs -d "\n" cat <"$3" >/dev/null' sh \
		"$SHARED/images.sqfs" "$MQ" "$TMP/$1.list"
	((LAST_OK)) && check_list "$1_sq" "$MQ" "$1"
	sq_umount
}
check_list() { # LABEL ROOT JOB: the files of the job, against the source
	local f
	[[ -e $TMP/$1.check ]] && return 0
	while IFS= read -r f; do
		if ! cmp -s "$2/$f" "$SRC/images/$f"; then
			echo "**differs from the source** ($f)" >"$TMP/$1.check"
			fail "$1" "$2/$f differs from the source"
			return 0
		fi
	done <"$TMP/$3.list"
	echo identical >"$TMP/$1.check"
}

# ---- scenario 5: find and stat over the whole tree -------------------------------------

# on a fresh mount of images (made untimed, cold): the names of every file
# (find; readdir, no stat: d_type says "file"), then a stat of every file
# (find -printf %s: an fstatat each).  The count is checked.
meta_run() { # LABEL ROOT KIND
	case $3 in
	find) sfs_timed "$1" sh -c 'find -H "$1" -type f | wc -l' sh "$2" ;;
	stat) sfs_timed "$1" sh -c 'find -H "$1" -type f -printf "%s\n" | wc -l' sh "$2" ;;
	esac
	if ((LAST_OK)); then
		local n
		n=$(tr -d ' ' <"$TMP/$1.out")
		if [[ $n != "${FILES_N[images]}" ]]; then
			local k
			for k in wall rd meta; do [[ -s $TMP/$1.$k ]] && sed -i '$d' "$TMP/$1.$k"; done
			fail "$1" "found $n files, not ${FILES_N[images]}"
		elif [[ ! -e $TMP/$1.check ]]; then
			echo "identical (the count)" >"$TMP/$1.check"
		fi
	fi
}
meta_stager() { # KIND
	empty_cache
	if ! "$STAGER" mount -q "$SHARED/images.tar.zst" "$MS" 2>"$TMP/mount.err"; then
		fail "meta_$1_stager" "stager mount failed: $(head -n 1 "$TMP/mount.err")"
		return 0
	fi
	OPEN_BEFORE=1 OPEN_AFTER=1 meta_run "meta_$1_stager" "$MS" "$1"
	stager_umount
}
meta_sq() {
	if ! squashfuse_ll "$SHARED/images.sqfs" "$MQ" 2>"$TMP/mount.err"; then
		fail "meta_$1_sq" "squashfuse_ll failed: $(head -n 1 "$TMP/mount.err")"
		return 0
	fi
	OPEN_BEFORE=1 OPEN_AFTER=1 meta_run "meta_$1_sq" "$MQ" "$1"
	sq_umount
}
meta_staged() {
	empty_cache
	if ! "$STAGER" stage -q --no-pin "$SHARED/images.tar.zst" "$OUT/dest" >/dev/null 2>"$TMP/stage.err"; then
		fail "meta_$1_staged" "stager stage failed: $(head -n 1 "$TMP/stage.err")"
		return 0
	fi
	# the staged tree was just written: its dentries and inodes are
	# cached, as they would be on the node after a stage
	meta_run "meta_$1_staged" "$OUT/dest" "$1"
	empty_cache
}

# ---- the runs -------------------------------------------------------------------------

for ((i = 1; i <= REPS; i++)); do
	for ds in images big; do
		for which in first last; do
			v=${which^^}_$ds
			f=${!v}
			msg=
			for t in $(order "$i" stager sq am stage); do
				settle_mounts
				case $t in
				stager) ff_stager "$ds" "$which" "$f" ;;
				sq) ff_sq "$ds" "$which" "$f" ;;
				am) ff_am "$ds" "$which" "$f" ;;
				stage) ff_stage "$ds" "$which" "$f" ;;
				esac
				((LAST_OK)) && msg+=" $t $(asecs "$LAST_WALL"),"
			done
			log "first file, $ds, $which ($f), rep $i/$REPS:${msg%,}"
		done
	done
	for ds in images container; do
		for th in "${RR_THREADS[@]}"; do
			msg=
			# archivemount: 1 and 2 threads (one global lock; 10 s a run)
			tools="stager sq am staged"
			((th > 2)) && tools="stager sq staged"
			# shellcheck disable=SC2086
			for t in $(order "$i" $tools); do
				settle_mounts
				"rr_$t" "$ds" "$th"
				((LAST_OK)) && msg+=" $t $(rate "$(tail -n 1 "$TMP/rr_${ds}_${t}_$th.rate")"),"
			done
			log "random 4 KiB reads, $ds, $th thread(s), rep $i/$REPS:${msg%,}"
		done
	done
	msg=
	for t in $(order "$i" stager sq stagecat staged); do
		settle_mounts
		"seq_$t"
		((LAST_OK)) && msg+=" $t $(asecs "$LAST_WALL"),"
	done
	log "sequential, rep $i/$REPS:${msg%,}"
	for job in one fold; do
		msg=
		for t in $(order "$i" stager sq stage am); do
			settle_mounts
			"one_$t" "$job"
			((LAST_OK)) && msg+=" $t $(asecs "$LAST_WALL"),"
		done
		log "1% of the files ($job), rep $i/$REPS:${msg%,}"
	done
	for kind in find stat; do
		msg=
		for t in $(order "$i" stager sq staged); do
			settle_mounts
			"meta_$t" "$kind"
			((LAST_OK)) && msg+=" $t $(asecs "$LAST_WALL"),"
		done
		log "$kind over images, rep $i/$REPS:${msg%,}"
	done
done
settle_mounts
LOAD_END=$(uptime | sed 's/.*load average: *//')
T_RUN=$(($(date +%s) - T_START))

# ---- report -----------------------------------------------------------------------------

model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memtotal=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
stager_v=$("$STAGER" --version 2>&1 | sed -n 1p)
am_v="$(archivemount --version 2>&1 | sed -n 1p) ($(archivemount --version 2>&1 | sed -n 2p))"
tar_v=$(tar --version | sed -n 1p)
zstd_v=$(zstd --version | sed 's/^\** *//; s/, by.*//')
fuse_v=$(fusermount3 --version 2>&1 | sed -n 1p)
md() { median "$TMP/$1.$2"; }
# per-read and per-file figures from the medians
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.10g\n", a / b }'; }
tool_name() {
	case $1 in
	stager) echo "\`stager mount\` + read" ;;
	am) echo "\`archivemount -o readonly\` + read" ;;
	sq) echo "\`squashfuse_ll\` + read" ;;
	stage) echo "\`stager stage\` (empty cache) + read" ;;
	staged) echo "staged copy (tmpfs), \`stager stage\` untimed" ;;
	stagecat) echo "\`stager stage\` (empty cache) + \`cat\`" ;;
	esac
}
# scale_n TOOL DS: the rate of 8 readers over that of 1 (medians); scaling: as text
scale_n() { per "$(md "rr_$2_$1_8" rate)" "$(md "rr_$2_$1_1" rate)"; }
scaling() { awk -v r="$(scale_n "$1" "$2")" 'BEGIN { if (r == "NA") print "—"; else printf "%.2f×", r }'; }
# judge A B COND: met or not from two medians (awk COND over a and b)
judge() {
	if ((QUICK)); then echo "(quick)"; return; fi
	awk -v a="$1" -v b="$2" "BEGIN { if (a == \"NA\" || b == \"NA\") print \"— (failed runs)\"; else if ($3) print \"yes\"; else print \"**no**\" }"
}
# (squashfuse_ll --version exits 254)
sq_v=$({ squashfuse_ll --version 2>&1 || true; } | sed -n '1{s/ (c).*//;p}')
sq_deb=$(dpkg-query -W -f '${Version}' squashfuse 2>/dev/null || echo "?")
mksq_v=$({ mksquashfs -version 2>&1 || true; } | sed -n 1p)
SQDEF_NOTE=
((SQ_DEFAULT)) && SQDEF_NOTE='; and `mksquashfs -comp zstd` (its default level, 15) of images, once'
SQ_THREADS=$(cat "$TMP/sq.threads" 2>/dev/null || echo "?")
if [[ $SQ_THREADS == 1 ]]; then
	SQ_THREADS_NOTE="one thread serves the mount: this version runs libfuse's single-threaded loop, its -s and -o max_threads are libfuse's help text only"
else
	SQ_THREADS_NOTE="$SQ_THREADS threads in its process during a random-read run"
fi
FF_MAX=NA
for ds in images big; do
	for which in first last; do
		m=$(maxof "$TMP/ff_${ds}_${which}_stager.wall")
		[[ $m == NA ]] && continue
		FF_MAX=$(awk -v a="$FF_MAX" -v b="$m" 'BEGIN { print (a == "NA" || b > a) ? b : a }')
	done
done
ff_fails=$(($(nlines "$TMP/ff_images_first_stager.fail") + $(nlines "$TMP/ff_images_last_stager.fail") + $(nlines "$TMP/ff_big_first_stager.fail") + $(nlines "$TMP/ff_big_last_stager.fail")))
ds_desc() {
	case $1 in
	images) echo "images ($(count "${FILES_N[images]}") files, $(bytes_h "${DATA_B[images]}"))" ;;
	container) echo "container image ($(bytes_h "${DATA_B[container]}"), one file)" ;;
	big) echo "big ($(count "${FILES_N[big]}") files, $(bytes_h "${DATA_B[big]}"): images + the container image)" ;;
	esac
}

{
	if ((QUICK)); then
		echo "# stager mount against squashfuse_ll, archivemount and staging first (--quick: tiny data, proves the harness only)"
	else
		echo "# stager mount against squashfuse_ll, archivemount and staging first"
	fi
	echo
	echo "Generated by \`bench/mount.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), stager commit \`$commit\`;" \
		"medians of $REPS repetition$( ((REPS > 1)) && echo s) (min–max in brackets), every tool of a" \
		"comparison in each, the order rotated. Load average at the start: $LOAD_START; at the end:" \
		"$LOAD_END (1, 5, 15 min; $(nproc) CPUs); the run took $T_RUN s."
	echo
	echo "All packs and tar.zst files are read through \`bench/sharedfs\` (an emulated NFS:" \
		"$DELAY_MS ms per metadata operation, $BW/s shared, ${ATTR_TIMEOUT} s attribute cache," \
		"page cache dropped at each open), cold before every run. *read* and *meta ops* are what" \
		"that shared filesystem served during the run (sharedfs's counters), medians."
	echo
	echo "## stager mount against squashfuse_ll"
	echo
	echo "The same trees as a squashfs image (\`mksquashfs SRC IMG -comp zstd -Xcompression-level $SQ_LEVEL\`," \
		"128 KiB blocks, small files packed in fragments) mounted with \`squashfuse_ll IMG MNT\`" \
		"($sq_v, Debian package $sq_deb; $SQ_THREADS_NOTE), read through the same emulated NFS, cold." \
		"*stager ×* is stager's speed over squashfuse_ll's (its rate over squashfuse_ll's, or" \
		"squashfuse_ll's time over stager's): above 1 stager is faster. Medians; the tables below" \
		"give the spread."
	echo
	echo "| measure | dataset | stager mount | squashfuse_ll | stager × |"
	echo "|---|---|---|---|---|"
	for ds in images container big; do
		echo "| build time (\`stager pack\` vs \`mksquashfs\`, level $SQ_LEVEL) | $ds | $(spread "build_${ds}_stager" wall asecs) | $(spread "build_${ds}_sq" wall asecs) |" \
			"$(ratio "$(md "build_${ds}_sq" wall)" "$(md "build_${ds}_stager" wall)") |"
	done
	if [[ -s $TMP/build_images_sqdef.wall ]]; then
		echo "| build time, \`mksquashfs -comp zstd\` at its default level (15) | images | $(spread build_images_stager wall asecs) | $(spread build_images_sqdef wall asecs) |" \
			"$(ratio "$(md build_images_sqdef wall)" "$(md build_images_stager wall)") |"
	fi
	for ds in images container big; do
		echo "| size (pack vs image; × : the image's size over the pack's) | $ds | $(bytes_h "${PACK_B[$ds]}") | $(bytes_h "${SQ_B[$ds]}") |" \
			"$(awk -v a="${SQ_B[$ds]}" -v b="${PACK_B[$ds]}" 'BEGIN { printf "%.4f×", a / b }') |"
	done
	if [[ $SQDEF_B != NA ]]; then
		echo "| size, \`mksquashfs -comp zstd\` at its default level (15) | images | $(bytes_h "${PACK_B[images]}") | $(bytes_h "$SQDEF_B") |" \
			"$(awk -v a="$SQDEF_B" -v b="${PACK_B[images]}" 'BEGIN { printf "%.4f×", a / b }') |"
	fi
	for ds in images big; do
		for which in first last; do
			echo "| first file (mount + cat): $which | $ds | $(spread "ff_${ds}_${which}_stager" wall asecs) | $(spread "ff_${ds}_${which}_sq" wall asecs) |" \
				"$(ratio "$(md "ff_${ds}_${which}_sq" wall)" "$(md "ff_${ds}_${which}_stager" wall)") |"
		done
	done
	for ds in images container; do
		for th in "${RR_THREADS[@]}"; do
			echo "| random 4 KiB reads, $th thread$( ((th > 1)) && echo s) | $ds | $(spread "rr_${ds}_stager_$th" rate rate) | $(spread "rr_${ds}_sq_$th" rate rate) |" \
				"$(ratio "$(md "rr_${ds}_stager_$th" rate)" "$(md "rr_${ds}_sq_$th" rate)") |"
		done
	done
	for ds in images container; do
		echo "| 8 readers of one mount: scaling (rate at 8 threads / at 1) | $ds | $(scaling stager "$ds") | $(scaling sq "$ds") |" \
			"$(ratio "$(scale_n stager "$ds")" "$(scale_n sq "$ds")") |"
	done
	echo "| sequential read (mount + cat of the $(bytes_h "${DATA_B[container]}") file) | container | $(spread seq_stager wall asecs) | $(spread seq_sq wall asecs) |" \
		"$(ratio "$(md seq_sq wall)" "$(md seq_stager wall)") |"
	echo "| \`find MNT -type f \\| wc -l\` (fresh mount) | images | $(spread meta_find_stager wall asecs) | $(spread meta_find_sq wall asecs) |" \
		"$(ratio "$(md meta_find_sq wall)" "$(md meta_find_stager wall)") |"
	echo "| stat of every file (\`find MNT -type f -printf '%s\\n'\`, fresh mount) | images | $(spread meta_stat_stager wall asecs) | $(spread meta_stat_sq wall asecs) |" \
		"$(ratio "$(md meta_stat_sq wall)" "$(md meta_stat_stager wall)") |"
	echo "| 1% of the files, spread (mount + read) | images | $(spread one_stager wall asecs) | $(spread one_sq wall asecs) |" \
		"$(ratio "$(md one_sq wall)" "$(md one_stager wall)") |"
	echo "| 1% of the files, one folder (mount + read) | images | $(spread fold_stager wall asecs) | $(spread fold_sq wall asecs) |" \
		"$(ratio "$(md fold_sq wall)" "$(md fold_stager wall)") |"
	echo
	echo "### Targets (issue 31)"
	echo
	echo "From the medians above$( ((QUICK)) && echo ' (--quick: not judged)')."
	echo
	echo "| target | measured | met |"
	echo "|---|---|---|"
	for ds in images big; do
		for which in first last; do
			a=$(md "ff_${ds}_${which}_stager" wall) b=$(md "ff_${ds}_${which}_sq" wall)
			echo "| first file ($ds, $which) within 2× of squashfuse_ll's time and under 50 ms | $(asecs "$a") vs $(asecs "$b"): $(ratio "$a" "$b") squashfuse_ll's time |" \
				"$(judge "$a" "$b" 'a <= 2 * b && a < 0.05') |"
		done
	done
	for ds in images container; do
		for th in "${RR_THREADS[@]}"; do
			a=$(md "rr_${ds}_stager_$th" rate) b=$(md "rr_${ds}_sq_$th" rate)
			echo "| random 4 KiB reads ($ds, $th thread$( ((th > 1)) && echo s)) ≥ squashfuse_ll | $(rate "$a") vs $(rate "$b") | $(judge "$a" "$b" 'a >= b') |"
		done
	done
	a=$(md seq_stager wall) b=$(md seq_sq wall)
	echo "| sequential read of the $(bytes_h "${DATA_B[container]}") file ≥ squashfuse_ll | $(mbs "$(per "${DATA_B[container]}" "$a")") vs $(mbs "$(per "${DATA_B[container]}" "$b")") | $(judge "$a" "$b" 'a <= b') |"
	for kind in find stat; do
		a=$(md "meta_${kind}_stager" wall) b=$(md "meta_${kind}_sq" wall)
		echo "| $kind over the whole tree (images) ≥ squashfuse_ll | $(asecs "$a") vs $(asecs "$b") | $(judge "$a" "$b" 'a <= b') |"
	done
	for ds in images container; do
		a=$(scale_n stager "$ds") b=$(scale_n sq "$ds")
		echo "| scaling of 8 readers ($ds) ≥ squashfuse_ll's | $(scaling stager "$ds") vs $(scaling sq "$ds") | $(judge "$a" "$b" 'a >= b') |"
	done
	echo
	echo "## Time to the first file"
	echo
	echo "From starting the command to having read the whole file with \`cat\`; the mount or stage" \
		"included. The *last* file is the last in archive order (the tar.zst holds the same files in" \
		"the same order: \`tar --sort=name\`)."
	echo
	echo "| dataset | file | tool | time | × stager's | read | meta ops |"
	echo "|---|---|---|---|---|---|---|"
	for ds in images big; do
		for which in first last; do
			v=${which^^}_$ds
			sw=$(md "ff_${ds}_${which}_stager" wall)
			for t in stager sq am stage; do
				l=ff_${ds}_${which}_$t
				echo "| $(ds_desc "$ds") | $which: \`${!v}\` ($(bytes_h "$(stat -c %s "$SRC/$ds/${!v}")")) | $(tool_name "$t") |" \
					"$(spread "$l" wall asecs) | $(ratio "$(md "$l" wall)" "$sw") | $(bytes_h "$(md "$l" rd)") | $(count "$(md "$l" meta)") |"
			done
		done
	done
	echo
	echo "### Target"
	echo
	echo "| target | measured | met |"
	echo "|---|---|---|"
	if ((QUICK)); then met="(quick)"; elif [[ $FF_MAX == NA ]] || ((ff_fails)); then met="**no** (failed runs)"; else met=$(awk -v m="$FF_MAX" 'BEGIN { print (m < 1) ? "yes" : "**no**" }'); fi
	echo "| first file read through \`stager mount\` in < 1 s whatever the pack's size | $(asecs "$FF_MAX") (the slowest run, $(bytes_h "${PACK_B[images]}") and $(bytes_h "${PACK_B[big]}") packs, first and last file) | $met |"
	echo
	echo "## Random 4 KiB reads"
	echo
	echo "\`randread\` (bench/randread.c): $(count "$RR_COUNT") reads, each an open, one 4 KiB pread at a random" \
		"offset of a random file (uniform, fixed seed), close; split over the threads. The mount (or the" \
		"stage) is made first, untimed: reads/s of a mount just made, cold. archivemount: at most" \
		"$AM_SECONDS s of reads (it decodes the archive from its start for every read), the rate is of" \
		"the reads made. *read per op* = bytes read from the shared filesystem per 4 KiB read."
	echo
	echo "| dataset | threads | tool | reads/s | stager × faster | reads made | read | read per op | meta ops |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for ds in images container; do
		for th in "${RR_THREADS[@]}"; do
			sr=$(md "rr_${ds}_stager_$th" rate)
			for t in stager sq am staged; do
				((th > 2)) && [[ $t == am ]] && continue
				l=rr_${ds}_${t}_$th
				rd=$(md "$l" rd)
				echo "| $(ds_desc "$ds") | $th | $(tool_name "$t" | sed 's/ + read//') | $(spread "$l" rate rate) |" \
					"$(ratio "$sr" "$(md "$l" rate)") | $(count "$(md "$l" reads)") | $(bytes_h "$rd") |" \
					"$(bytes_h "$(per "$rd" "$(md "$l" reads)")") | $(count "$(md "$l" meta)") |"
			done
		done
	done
	echo
	echo "## Sequential read of a large file"
	echo
	echo "\`cat\` of the $(bytes_h "${DATA_B[container]}") container image (its pack: $(bytes_h "${PACK_B[container]}"))" \
		"to /dev/null; the mount and the stage are in the time. archivemount is not measured: it" \
		"decodes the archive from its start for each read the kernel sends it (128 KiB at most), so" \
		"a 1 GiB file costs about 8,000 decodes of half a GiB on average."
	echo
	echo "| tool | time | throughput | stager × faster | read | meta ops |"
	echo "|---|---|---|---|---|---|"
	sw=$(md seq_stager wall)
	for t in stager sq stagecat staged; do
		l=seq_$t
		w=$(md "$l" wall)
		case $t in
		stager) n="\`stager mount\` + \`cat\`" ;;
		sq) n="\`squashfuse_ll\` + \`cat\`" ;;
		stagecat) n=$(tool_name stagecat) ;;
		staged) n="\`cat\` of a staged copy (tmpfs; the stage untimed)" ;;
		esac
		echo "| $n | $(spread "$l" wall asecs) | $(mbs "$(per "${DATA_B[container]}" "$w")") | $(ratio "$w" "$sw") |" \
			"$(bytes_h "$(md "$l" rd)") | $(count "$(md "$l" meta)") |"
	done
	echo
	echo "## A job that reads 1% of the files"
	echo
	echo "Two jobs, each reading its files with \`xargs cat\` from the start of the command (mount or" \
		"stage included): *spread*, every 100th file of images in name order ($(count "$ONE_N") files," \
		"$(bytes_h "$ONE_B")); *together*, the files of one folder, \`$FOLD_DIR/\` ($(count "$FOLD_N")" \
		"files, $(bytes_h "$FOLD_B"))."
	echo
	echo "| job | tool | time | stager × faster | read from the shared FS | × the bytes needed | meta ops |"
	echo "|---|---|---|---|---|---|---|"
	for job in one fold; do
		sw=$(md "${job}_stager" wall)
		if [[ $job == one ]]; then jn=spread need=$ONE_B; else jn=together need=$FOLD_B; fi
		for t in stager sq stage am; do
			l=${job}_$t
			rd=$(md "$l" rd)
			case $t in
			stage) n="\`stager stage\` (whole pack, empty cache) + read" ;;
			*) n=$(tool_name "$t") ;;
			esac
			echo "| $jn | $n | $(spread "$l" wall asecs) | $(ratio "$(md "$l" wall)" "$sw") | $(bytes_h "$rd") | $(awk -v a="$rd" -v b="$need" 'BEGIN { if (a == "NA") print "—"; else printf "%.1f×", a / b }') | $(count "$(md "$l" meta)") |"
		done
	done
	echo
	echo "## find and stat over the whole tree"
	echo
	echo "On a fresh mount of images (made untimed; nothing of the tree in the kernel's caches):" \
		"*find* is \`find MNT -type f | wc -l\` (readdir of every folder; the type comes with each" \
		"name), *stat* is \`find MNT -type f -printf '%s\\n' | wc -l\` (also an fstatat of every" \
		"file). The staged copy is a tree just written on a tmpfs (its inodes in memory), for scale."
	echo
	echo "| what | tool | time | stager × faster | files/s | meta ops |"
	echo "|---|---|---|---|---|---|"
	for kind in find stat; do
		sw=$(md "meta_${kind}_stager" wall)
		for t in stager sq staged; do
			l=meta_${kind}_$t
			w=$(md "$l" wall)
			case $t in
			stager) n="\`stager mount\`" ;;
			sq) n="\`squashfuse_ll\`" ;;
			staged) n="staged copy (tmpfs), \`stager stage\` untimed" ;;
			esac
			echo "| $kind | $n | $(spread "$l" wall asecs) | $(ratio "$w" "$sw") | $(rate "$(per "${FILES_N[images]}" "$w")") | $(count "$(md "$l" meta)") |"
		done
	done
	echo
	echo "## Reading the figures"
	echo
	echo "- A stager pack is a run of zstd frames of $FRAME_H of tar each (images: ${PACK_FR[images]:-?} frames," \
		"about $(awk -v n="${FILES_N[images]}" -v f="${PACK_FR[images]:-0}" 'BEGIN { if (f > 0) printf "%.0f", n / f; else print "?" }')" \
		"files a frame; container: ${PACK_FR[container]:-?} frames). A mount fetches, checks (XXH3-128" \
		"from the frame table) and decodes whole frames and keeps 256 MiB of them decoded: a read that" \
		"misses costs a frame from the shared filesystem (*read per op* about the pack's size over" \
		"the reads while the cache fills). A job that reads 1 file in 100 spread over the tree touches" \
		"every frame and so reads the whole pack, as a stage would: the mount saves the time of writing" \
		"the tree, not bytes; bytes are saved when the files a job reads sit together (a folder; or" \
		"\`stager stage --include\`)."
	echo "- *meta ops* of a mount: opening the pack and reading its trailer, then none per frame for a" \
		"format 3 pack (each fetched frame is checked against its XXH3-128 from the frame table; the" \
		"pack's attributes are asked only when a frame does not match, to tell a pack changed in" \
		"place, stale, from a damaged one). Packs of formats 1 and 2 have no per-frame hash: their" \
		"mount asks before and after each frame's read (about 1.5 operations per frame). The" \
		"operations that remain come from the kernel's FUSE client (a new open of the pack, lookups)."
	echo "- squashfuse_ll reads what a request needs and no more: 8 KiB metadata blocks (inodes," \
		"directories) and 128 KiB data blocks, the small files of images packed together in fragment" \
		"blocks; squashfs has no checksum to verify. A cold 4 KiB read costs it one block (*read per" \
		"op* above: with the kernel's read-ahead). A cold read through \`stager mount\` fetches, checks" \
		"(XXH3-128 of all of it) and decodes up to the read a whole frame of $FRAME_H, $FRAME_X times a" \
		"squashfs block; with 256 MiB of frames in memory a 1 GiB file's frames are fetched again and" \
		"again, from the node's page cache (not counted in *read*), each time copied, hashed and" \
		"decoded anew: the mount's CPU, not the shared filesystem, bounds its random reads."
	echo "- Listing: \`stager mount\` answers READDIRPLUS, names with their attributes (about 50 a" \
		"request; the kernel makes an inode for each), so a stat after it asks nothing more;" \
		"squashfuse_ll answers READDIR and then one LOOKUP per file stat'ed. Hence a faster *find* for" \
		"squashfuse_ll and a faster *stat* for stager."
	echo "- archivemount's time to the first file is its scan of the whole archive (it lists it before" \
		"the mount appears) plus a second decode from the start up to the file; its random reads each" \
		"decode the archive from its start, which is also why the sequential read leaves it out."
	echo
	echo "## Method"
	echo
	echo "- Machine: $(nproc) CPUs ($model), $memtotal RAM, Linux $(uname -r); bench/work-mount on" \
		"$(df -PT "$WORK" | awk 'NR == 2 { print $2 }'); load average $LOAD_START at the start, $LOAD_END at the end."
	echo "- Tools: $stager_v (commit \`$commit\`, binary $B/stager); $sq_v (squashfuse_ll; Debian package $sq_deb); $mksq_v; $am_v; $fuse_v; $tar_v; $zstd_v."
	echo "- Build times: \`stager pack -q DIR -o DS.tar.zst\` and \`mksquashfs DIR DS.sqfs -comp zstd -Xcompression-level $SQ_LEVEL -noappend -quiet\`" \
		"(both use every CPU), each once, the source tree in the page cache, under runstat$SQDEF_NOTE." \
		"squashfs images: images $(bytes_h "${SQ_B[images]}"), container $(bytes_h "${SQ_B[container]}"), big $(bytes_h "${SQ_B[big]}")."
	echo "- squashfuse_ll: \`squashfuse_ll SHARED/DS.sqfs MNT\` (its defaults: it returns once mounted), \`fusermount3 -u MNT\` after; $SQ_THREADS_NOTE." \
		"It reads the image's superblock, inode and directory tables as it needs them (metadata blocks" \
		"of 8 KiB) and the data a 128 KiB block (or a fragment block) at a time, keeping a small cache of blocks."
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); \`B=${B#"$ROOT"/} bash bench/mount.sh$( ((QUICK)) && echo " --quick")$( [[ $REPS != 3 ]] && ! ((QUICK)) && echo " --reps $REPS")\`" \
		"(or \`make bench-mount\`), $T_RUN s."
	echo "- Datasets (\`bench/gendata\`, incompressible): images \`gendata images DIR --files $N_IMAGES --classes $N_CLASSES --seed 1\`" \
		"(lognormal sizes, median 8 KiB); container \`gendata file container.img --size $BIG_SIZE --seed 2\`;" \
		"big = a copy of both in one tree (\`container.img\`, \`images/...\`)."
	echo "- Packs: \`stager pack -q${PACK_FRAME:+ --frame-size $PACK_FRAME} DIR -o DS.tar.zst\` (level 3, frames of $FRAME_H): images $(bytes_h "${PACK_B[images]}")," \
		"container $(bytes_h "${PACK_B[container]}"), big $(bytes_h "${PACK_B[big]}"). tar.zst for archivemount:" \
		"\`cd DIR && tar --sort=name -I 'zstd -3' -cf DS-tar.tar.zst -- *\`: images $(bytes_h "${TAR_B[images]}")," \
		"container $(bytes_h "${TAR_B[container]}"), big $(bytes_h "${TAR_B[big]}")."
	echo "- Shared filesystem: \`bench/sharedfs --delay-ms $DELAY_MS --bw $BW --attr-timeout $ATTR_TIMEOUT BACK SHARED\`;" \
		"before each run \`sync\`, a pause of $SETTLE s (the kernel forgets names and attributes), the" \
		"files of earlier runs released, \`echo reset > SHARED/.sharedfs-stats\`; after it the counters" \
		"are read (a mount's process still holds its pack open then: one open file expected). The" \
		"backing files are read untimed right before each run (the page cache holds them, as an NFS" \
		"server's would; the cost model is sharedfs's, not this VM's disk)."
	echo "- Commands timed (bench/runstat, CLOCK_MONOTONIC, each under \`timeout $TIMEOUT\`):"
	echo "    - first file: \`sh -c 'stager mount -q SHARED/DS.tar.zst MNT && cat MNT/FILE >/dev/null'\`;" \
		"\`sh -c 'archivemount -o readonly SHARED/DS-tar.tar.zst MNT && cat MNT/FILE >/dev/null'\`;" \
		"\`sh -c 'stager stage -q --json SHARED/DS.tar.zst DEST && cat DEST/FILE >/dev/null'\`" \
		"(the JSON must say \"hit\": false, else the run is left out)." \
		"Files: images first \`$FIRST_images\`, last \`$LAST_images\`; big first \`$FIRST_big\` (the first" \
		"small file: \`container.img\` comes before it), last \`$LAST_big\`."
	echo "    - random: \`randread --threads T --count $RR_COUNT --seed 1 [--max-seconds $AM_SECONDS] ROOT LIST\`" \
		"with ROOT the stager mount, the archivemount or the staged copy; LIST \"SIZE PATH\" of every file," \
		"made from the source; reads at any byte offset in [0, SIZE − 4096]."
	echo "    - sequential: \`sh -c 'stager mount -q SHARED/container.tar.zst MNT && cat MNT/container.img >/dev/null'\`;" \
		"\`sh -c 'stager stage -q --json SHARED/container.tar.zst DEST && cat DEST/container.img >/dev/null'\`;" \
		"\`sh -c 'cat DEST/container.img >/dev/null'\` after an untimed stage."
	echo "    - 1%: \`sh -c 'stager mount -q SHARED/images.tar.zst MNT && cd MNT && xargs -d \"\\n\" cat <LIST >/dev/null'\`," \
		"the same with \`archivemount -o readonly SHARED/images-tar.tar.zst MNT\` and with \`stager stage -q --json ... DEST\`." \
		"Untimed stages (the staged copies) use \`--no-pin\`, so that \`stager clean --all\` can empty the cache."
	echo "- Cold: \`stager clean --all\` before every stager run and after each stage (untimed); no mount" \
		"left from the run before (\`stager umount\`, \`fusermount3 -u\`; the next run waits until the" \
		"mount's process has closed the pack). stager: STAGER_SCRATCH_ROOT on a tmpfs, STAGER_SLOT_DIR" \
		"and XDG_CONFIG_HOME private, STAGER_SITE_CONFIG=/dev/null, built-in defaults (256 MiB of decoded" \
		"frames in memory for a mount, \`--cache\` off). DEST on the same tmpfs."
	echo "- archivemount: \`-o readonly\` (no write-back of the archive on unmount); other options are" \
		"the defaults (multi-threaded FUSE 2, 1 s attribute and entry caches, page cache kept until the" \
		"next open, as stager's mount). It reads the whole archive to list it before its mount appears," \
		"and for each read it opens the archive anew and decodes from the start up to the file and the" \
		"offset, under one global lock (so 2 threads cannot help it)."
	echo "- Checks (untimed, once per tool and case): cmp against the source after first-file, sequential" \
		"and 1% runs; \`randread --count 50 --seed 2 --verify SRC\` on the same mount after a random-read run: $(
			for l in ff_images_last_stager ff_images_last_am ff_images_last_stage ff_big_last_stager ff_big_last_am ff_big_last_stage \
				ff_images_last_sq ff_big_last_sq rr_images_stager_1 rr_images_sq_1 rr_images_am_1 rr_container_stager_1 rr_container_sq_1 rr_container_am_1 \
				seq_stager seq_sq seq_stagecat seq_staged one_stager one_sq one_stage one_am fold_stager fold_sq fold_stage fold_am \
				meta_find_stager meta_find_sq meta_stat_stager meta_stat_sq; do
				printf '%s %s; ' "$l" "$(check_of "$l")"
			done | sed 's/; $//')."
	echo
	echo "## Raw data"
	echo
	echo "Wall seconds (random: reads/s), in repetition order:"
	echo
	for l in $(cd "$TMP" && ls ./*.wall | sed 's|^\./||; s/\.wall$//' | sort); do
		if [[ $l == rr_* ]]; then
			echo "    $l: $(raw "$TMP/$l.rate") reads/s (reads $(raw "$TMP/$l.reads"); bytes read $(raw "$TMP/$l.rd"))"
		else
			echo "    $l: $(raw "$TMP/$l.wall") s (bytes read $(raw "$TMP/$l.rd"); meta ops $(raw "$TMP/$l.meta"))"
		fi
	done
	if [[ -s $TMP/failures ]]; then
		echo
		echo "Failed runs (not in the figures):"
		echo
		cat "$TMP/failures"
	fi
} >"$TMP/results.md"
mv "$TMP/results.md" "$RESULTS"
cat "$RESULTS"
log "results written to ${RESULTS#"$ROOT"/}"
if [[ -s $TMP/failures ]]; then
	log "some runs failed: see the end of ${RESULTS#"$ROOT"/}"
	exit 1
fi
