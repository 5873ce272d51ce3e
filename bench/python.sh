#!/usr/bin/env bash
# bench/python.sh - one shuffled epoch in Python (torch.utils.data.DataLoader,
# 0, 2 and 4 workers, batches of 64, a collate_fn that keeps the list) from
# a stager pack through stager.torch, against the same files staged first,
# read through `stager mount`, and read as a plain tar.zst with tarfile (as
# WebDataset does), on the emulated shared filesystem of bench/run.sh.
# `make bench-python` runs it:
#
#   B=build bash bench/python.sh [--quick] [--reps N]
#
# Dataset (bench/gendata, incompressible): images, 20,000 files of 10-15
# KiB in 100 folders; packed (`stager pack`, level 3) and as a plain
# tar.zst (`tar --sort=name -I 'zstd -3' -cf`) in a backing directory under
# bench/work-python/ that bench/sharedfs (--delay-ms 0.5 --bw 1G
# --attr-timeout 1, with counters) mounts on bench/work-python/.../shared.
# Methods (bench/python_epoch.py, Debian's /usr/bin/python3):
#   pack    PackDataset(SHARED/images.tar.zst) + PackSampler(shuffle=True,
#           seed=0): the epoch's order
#   staged  `stager stage SHARED/images.tar.zst DEST` (DEST on a tmpfs;
#           timed on its own, empty cache), then open() + read() of each
#           file of DEST in the pack's epoch order
#   mount   `stager mount SHARED/images.tar.zst MNT` (made untimed, fresh
#           for each run), then open() + read() of each file, same order
#   tar     tarfile.open(mode='r|') over `zstd -dc SHARED/images-tar.tar.zst`,
#           in archive order (a tar cannot be read shuffled; one shard, so
#           worker 0 reads it and the other workers have nothing to do)
# A run's time is the epoch's, measured in Python from making the dataset
# (opening the pack) to the last batch, not Python's start nor its imports.
# Every run starts cold (stager's cache emptied, no mount left, a pause
# longer than sharedfs's attribute cache, its counters reset); the bytes
# read from the shared filesystem and its metadata operations are recorded
# after each run.  Each process reports its memory (VmRSS, VmHWM from
# /proc/self/status, private bytes from smaps_rollup) when it starts,
# after its first file and at the end of the epoch.  Shuffle quality:
# classes per batch of PackSampler's order against a true permutation on
# the images set and on 200,000 files of 50-200 B (100 folders; 5,000 with
# --quick), and the pack's bytes fetched and decoded in an epoch.  Memory
# at scale:
# PackDataset over packs of 10k, 100k and 1M files of 100 bytes (on the
# tmpfs, not through sharedfs), 0 and 2 workers.  Checks (untimed, once a
# method): an order-independent checksum of every (name, data) against the
# source's.  Repetitions rotate the order of the methods; medians and
# min-max.  Results to bench/results-python.md (and printed); --quick (tiny
# data, 1 repetition, 0.2 s attribute cache: proves the harness works,
# asserts nothing) to bench/work-python/results-quick.md.
#
# Environment: B (build directory, default build), BENCH_TIMEOUT (seconds a
# command may take, default 600), BENCH_DELAY_MS (0.5), BENCH_BW (1G),
# BENCH_ATTR_TIMEOUT (1; 0.2 with --quick), PY_MEM_FILES (the file counts
# of the memory runs, default "10000 100000 1000000"), KEEP=1 (keep the
# datasets).  Needs root (tmpfs), /dev/fuse, fusermount3, zstd, tar,
# /usr/bin/python3 with torch.  A run that fails is recorded, left out of
# the figures and listed in the results; the script goes on and exits 1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_args 3 "$@"
cd "$ROOT"
B=${B:-build}
[[ $B == /* ]] || B=$ROOT/$B
die() {
	echo "python.sh: $*" >&2
	exit 1
}
log() { echo "python.sh: $*" >&2; }
[[ -d $B ]] || die "build directory '$B' not found (run make, or set B=)"
B=$(cd "$B" && pwd)
STAGER=$B/stager GENDATA=$B/gendata RUNSTAT=$B/runstat SHAREDFS=$B/sharedfs
for x in "$STAGER" "$GENDATA" "$RUNSTAT" "$SHAREDFS"; do
	[[ -x $x ]] || die "$x missing: run 'make all python $B/gendata $B/runstat $B/sharedfs' (or make bench-python)"
done
PY=/usr/bin/python3 # Debian's: torch is installed for it (another python3 may come first on PATH)
PYE=$ROOT/bench/python_epoch.py
[[ -x $PY ]] || die "$PY is needed"
[[ -e $B/python/stager/__init__.py ]] || die "$B/python missing: run 'make python'"
export PYTHONPATH=$B/python
"$PY" -c 'import stager, stager.torch, torch' 2>/dev/null || die "$PY cannot import stager.torch and torch (PYTHONPATH=$B/python)"
for tool in fusermount3 tar zstd mountpoint timeout awk sort; do
	command -v "$tool" >/dev/null || die "'$tool' is needed and not installed"
done
[[ -e /dev/fuse ]] || die "/dev/fuse is missing"
(($(id -u) == 0)) || die "needs root (the tmpfs for destinations)"

TIMEOUT=${BENCH_TIMEOUT:-600}
DELAY_MS=${BENCH_DELAY_MS:-0.5}
BW=${BENCH_BW:-1G}
KEEP=${KEEP:-0}
WORKERS=(0 2 4)
BATCH=64
if ((QUICK)); then
	ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-0.2}
	N_IMAGES=400 N_CLASSES=8 N_TINY=5000
	read -r -a MEM_FILES <<<"${PY_MEM_FILES:-1000 5000}"
	OUT_SIZE=1g
	mkdir -p "$ROOT/bench/work-python"
	WORK=$(mktemp -d "$ROOT/bench/work-python/quick.XXXXXX")
	RESULTS=$ROOT/bench/work-python/results-quick.md
else
	ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-1}
	N_IMAGES=20000 N_CLASSES=100 N_TINY=200000
	read -r -a MEM_FILES <<<"${PY_MEM_FILES:-10000 100000 1000000}"
	OUT_SIZE=10g # 1M files of 100 bytes take a page each on a tmpfs: 4 GiB
	WORK=$ROOT/bench/work-python/full
	RESULTS=$ROOT/bench/results-python.md
fi
SIZES=10K-15K
SETTLE=$(awk -v a="$ATTR_TIMEOUT" 'BEGIN { print a + 0.1 }')

SRC=$WORK/src       # the dataset's tree (the reference)
BACK=$WORK/back     # pack and tar.zst: sharedfs's backing directory
SHARED=$WORK/shared # where sharedfs mounts it
SFS_STATS=$SHARED/.sharedfs-stats
OUT=$WORK/out # a tmpfs: stage destination, stager's scratch root, memory packs
MS=$WORK/mnt-stager
TMP=$WORK/tmp

unmount_all() {
	if mountpoint -q "$MS" 2>/dev/null; then
		"$STAGER" umount -q "$MS" 2>/dev/null || true
		umount_fuse "$MS"
	fi
	umount_fuse "$SHARED"
	if mountpoint -q "$OUT" 2>/dev/null; then
		chmod -R u+w "$OUT" 2>/dev/null || true
		umount "$OUT" 2>/dev/null || umount -l "$OUT" || true
	fi
}
# never delete through a mount
rm_work() { # DIR...
	local d m
	for m in "$SHARED" "$MS" "$OUT"; do
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
mkdir -p "$SRC" "$BACK" "$TMP" "$OUT" "$SHARED" "$MS"

CUR_PGID=
cleanup() {
	local rc=$?
	if [[ -n ${CUR_PGID:-} ]]; then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	unmount_all
	local m
	for m in "$MS" "$SHARED" "$OUT"; do
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
		rmdir "$SHARED" "$MS" 2>/dev/null || true
		((QUICK)) && rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount -t tmpfs -o size=$OUT_SIZE,nr_inodes=0 tmpfs "$OUT" || die "cannot mount a tmpfs on $OUT"

# stager's settings: nothing from this machine's files or environment (as
# in run.sh and mount.sh)
bench_clean_env
SCRATCH=$OUT/scratch
export STAGER_SCRATCH_ROOT=$SCRATCH STAGER_SITE_CONFIG=/dev/null
export STAGER_SLOT_DIR=$WORK/slots XDG_CONFIG_HOME=$WORK/no-config
mkdir -p "$SCRATCH"

LOAD_START=$(uptime | sed 's/.*load average: *//')
T_START=$(date +%s)

# ---- helpers (those of mount.sh) -------------------------------------------------

fail() { # LABEL WHY: a failed run (left out of the figures)
	echo "$2" >>"$TMP/$1.fail"
	echo "- $1: $2" >>"$TMP/failures"
	log "WARNING: $1: $2"
	LAST_OK=0
}
sfs_stat() { awk -v k="$1" '$1 == k { print $2; exit }' "$SFS_STATS"; }
sfs_quiesce() { # release reaches sharedfs after close(2) returns
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
	"$STAGER" status 2>/dev/null | grep -q '^cache .* in 0 entries' ||
		log "WARNING: the cache is not empty after stager clean --all: $("$STAGER" status 2>&1 | grep '^cache')"
}
settle_mounts() { stager_umount; sfs_quiesce 0; }
cold_hit() { # LABEL: a timed stage must have read the pack
	((LAST_OK)) || return 0
	grep -q '"hit": *false' "$TMP/$1.out" && return 0
	local k
	for k in wall rd meta; do [[ -s $TMP/$1.$k ]] && sed -i '$d' "$TMP/$1.$k"; done
	fail "$1" "the stage found the pack cached: $(head -c 200 "$TMP/$1.out")"
}

# pyfacts LABEL: what an epoch's JSON ($TMP/LABEL.out) says, appended to
# $TMP/LABEL.KEY: secs, samples, bytes, hwm (the largest VmHWM at the end of
# the epoch over the processes that read: the workers, else the main
# process), priv (the largest private bytes at the end), rss0 and rss1
# (the largest VmRSS after the first file and at the end)
pyfacts() {
	local label=$1
	"$PY" - "$TMP/$label.out" "$TMP/$label" <<'EOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
base = sys.argv[2]
procs = [p for p in d["procs"] if p.get("end")]
def mx(key, when):
    v = [p[when][key] for p in procs if p.get(when) and key in p[when]]
    return max(v) if v else "NA"
vals = {"secs": d["seconds"], "samples": d["samples"], "bytes": d["bytes"],
        "hwm": mx("VmHWM", "end"), "priv": mx("private", "end"),
        "rss0": mx("VmRSS", "first"), "rss1": mx("VmRSS", "end")}
for k, v in vals.items():
    with open(base + "." + k, "a") as f:
        f.write("%s\n" % v)
EOF
}

nlines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
raw() { if [[ -s $1 ]]; then paste -sd' ' "$1"; else echo "(none)"; fi; }
bytes_h() { awk -v b="$1" 'BEGIN { if (b == "NA" || b == "") print "—"; else if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else if (b >= 1024) printf "%.1f KiB", b / 1024; else printf "%d B", b }'; }
count() { awk -v n="$1" 'BEGIN { if (n == "NA") print "—"; else { s = sprintf("%.0f", n); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o } }'; }
asecs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s < 0.1) printf "%.1f ms", s * 1000; else if (s < 10) printf "%.3f s", s; else printf "%.1f s", s }'; }
spread() { # LABEL KIND FMT: "median (min–max)" with FMT, or the failures
	local f=$TMP/$1.$2 fmt=$3 n nf s
	nf=$(nlines "$TMP/$1.fail")
	n=$(nlines "$f")
	if ((n == 0)); then
		if ((nf)); then echo "**failed** ($nf runs)"; else echo "—"; fi
		return
	fi
	if ((n > 1)); then
		s="$($fmt "$(median "$f")") ($($fmt "$(minof "$f")")–$($fmt "$(maxof "$f")"))"
	else
		s=$($fmt "$(median "$f")")
	fi
	((nf)) && s+=" **$nf failed**"
	echo "$s"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "NA" && b != "NA" && b > 0) { r = a / b; printf (r >= 100 ? "%.0f×" : r >= 10 ? "%.1f×" : "%.2f×"), r } else print "—" }'; }
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b <= 0) print "NA"; else printf "%.10g\n", a / b }'; }
plus() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA") print "NA"; else printf "%.10g\n", a + b }'; }
md() { median "$TMP/$1.$2"; }
rate_h() { awk -v r="$1" 'BEGIN { if (r == "NA") print "—"; else printf "%.0f/s", r }'; }
mbs() { awk -v r="$1" 'BEGIN { if (r == "NA") print "—"; else printf "%.0f MB/s", r / 1e6 }'; }
mib() { awk -v b="$1" 'BEGIN { if (b == "NA" || b == "") print "—"; else printf "%.0f MiB", b / 1048576 }'; }

# ---- the dataset ----------------------------------------------------------------

log "generating $N_IMAGES files of $SIZES in $N_CLASSES folders under $SRC"
"$GENDATA" images "$SRC/images" --files "$N_IMAGES" --classes "$N_CLASSES" --sizes "$SIZES" --seed 1 2>/dev/null
log "packing"
"$STAGER" pack -q "$SRC/images" -o "$BACK/images.tar.zst" >/dev/null
(cd "$SRC/images" && LC_ALL=C tar --sort=name -I 'zstd -3' -cf "$BACK/images-tar.tar.zst" -- *)
PACK_B=$(stat -c %s "$BACK/images.tar.zst")
TAR_B=$(stat -c %s "$BACK/images-tar.tar.zst")
PACK_FR=$("$STAGER" ls --json "$BACK/images.tar.zst" | sed -n 's/.*"frames": *\([0-9]*\).*/\1/p' | sed -n 1p)
FILES_N=$(find "$SRC/images" -type f | wc -l)
DATA_B=$(find "$SRC/images" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }')
# the epoch's order: PackSampler(shuffle=True, seed=0), epoch 0, as names
"$PY" "$PYE" order "$BACK/images.tar.zst" "$TMP/order.txt" --seed 0
[[ $(wc -l <"$TMP/order.txt") == "$FILES_N" ]] || die "the order has $(wc -l <"$TMP/order.txt") names, not $FILES_N"
# the reference for the checks
"$PY" "$PYE" sums "$SRC/images" --order "$TMP/order.txt" >"$TMP/ref.json"
REF_SUM=$(sed -n 's/.*"checksum": *"\([0-9a-f]*\)".*/\1/p' "$TMP/ref.json")

"$SHAREDFS" --delay-ms "$DELAY_MS" --bw "$BW" --attr-timeout "$ATTR_TIMEOUT" "$BACK" "$SHARED" 2>"$TMP/sharedfs.err" ||
	die "sharedfs could not mount $SHARED: $(head -n 2 "$TMP/sharedfs.err" | tr '\n' ' ')"
mountpoint -q "$SHARED" && [[ -r $SFS_STATS ]] || die "sharedfs did not mount $SHARED"
log "sharedfs: $BACK on $SHARED, ${DELAY_MS} ms per metadata operation, $BW/s, attribute cache ${ATTR_TIMEOUT} s"

# ---- the methods ------------------------------------------------------------------

epoch_ok() { # LABEL: the run read every file
	((LAST_OK)) || return 0
	local n
	n=$(sed -n 's/.*"samples": *\([0-9]*\).*/\1/p' "$TMP/$1.out" | tail -n 1)
	if [[ $n != "$FILES_N" ]]; then
		local k
		for k in wall rd meta; do [[ -s $TMP/$1.$k ]] && sed -i '$d' "$TMP/$1.$k"; done
		fail "$1" "the epoch read ${n:-no} samples, not $FILES_N"
		return 0
	fi
	pyfacts "$1"
}
run_pack() { # WORKERS [CACHE_MIB]: PackDataset's cache_bytes (default 64 MiB, its default)
	local label=pack_$1 cache=${2:-64}
	[[ $cache == 64 ]] || label=pack${cache}_$1
	warm "$BACK/images.tar.zst"
	sfs_timed "$label" "$PY" "$PYE" epoch pack "$SHARED/images.tar.zst" --workers "$1" --batch "$BATCH" --seed 0 \
		--cache-mib "$cache" --expect "$FILES_N"
	epoch_ok "$label"
}
run_pack256() { run_pack "$1" 256; }
run_tar() {
	local label=tar_$1
	warm "$BACK/images-tar.tar.zst"
	sfs_timed "$label" "$PY" "$PYE" epoch tar "$SHARED/images-tar.tar.zst" --workers "$1" --batch "$BATCH" --expect "$FILES_N"
	epoch_ok "$label"
}
run_mount() {
	local label=mount_$1
	empty_cache
	warm "$BACK/images.tar.zst"
	if ! "$STAGER" mount -q "$SHARED/images.tar.zst" "$MS" 2>"$TMP/mount.err"; then
		fail "$label" "stager mount failed: $(head -n 1 "$TMP/mount.err")"
		return 0
	fi
	OPEN_BEFORE=1 OPEN_AFTER=1 sfs_timed "$label" "$PY" "$PYE" epoch files "$MS" --order "$TMP/order.txt" --workers "$1" --batch "$BATCH" --expect "$FILES_N"
	epoch_ok "$label"
	stager_umount
}
# staged: one cold stage (timed), then an epoch with each number of workers
run_staged() {
	local w
	empty_cache
	warm "$BACK/images.tar.zst"
	sfs_timed stage "$STAGER" stage -q --json --no-pin "$SHARED/images.tar.zst" "$OUT/dest"
	cold_hit stage
	if ((!LAST_OK)); then
		for w in "${WORKERS[@]}"; do fail "staged_$w" "the stage failed"; done
		empty_cache
		return 0
	fi
	for w in "${WORKERS[@]}"; do
		sfs_timed "staged_$w" "$PY" "$PYE" epoch files "$OUT/dest" --order "$TMP/order.txt" --workers "$w" --batch "$BATCH" --expect "$FILES_N"
		epoch_ok "staged_$w"
	done
	empty_cache
}

for ((i = 1; i <= REPS; i++)); do
	for t in $(order "$i" pack staged mount tar pack256); do
		settle_mounts
		msg=
		case $t in
		staged)
			run_staged
			[[ -s $TMP/stage.wall ]] && msg+=" stage $(asecs "$(tail -n 1 "$TMP/stage.wall")"),"
			;;
		*)
			for w in "${WORKERS[@]}"; do
				"run_$t" "$w"
			done
			;;
		esac
		for w in "${WORKERS[@]}"; do
			[[ -s $TMP/${t}_$w.secs ]] && msg+=" $w workers $(asecs "$(tail -n 1 "$TMP/${t}_$w.secs")"),"
		done
		log "$t, rep $i/$REPS:${msg%,}"
	done
done

# ---- checks (untimed): the checksum of every (name, data), 2 workers ----------------

check_run() { # METHOD CMD...: the epoch again with --check
	local m=$1 got
	shift
	limited "$@" --workers 2 --batch "$BATCH" --check >"$TMP/check.out" 2>"$TMP/check.err"
	if ((LIMIT_RC)); then
		echo "**failed** (exit status $LIMIT_RC)" >"$TMP/check_$m"
		fail "check_$m" "exit status $LIMIT_RC: $(head -n 1 "$TMP/check.err")"
		return 0
	fi
	got=$(sed -n 's/.*"checksum": *"\([0-9a-f]*\)".*/\1/p' "$TMP/check.out")
	if [[ $got == "$REF_SUM" ]]; then
		echo identical >"$TMP/check_$m"
	else
		echo "**differs from the source** ($got, not $REF_SUM)" >"$TMP/check_$m"
		fail "check_$m" "checksum $got, the source's $REF_SUM"
	fi
}
settle_mounts
check_run pack "$PY" "$PYE" epoch pack "$SHARED/images.tar.zst" --seed 0
check_run tar "$PY" "$PYE" epoch tar "$SHARED/images-tar.tar.zst"
empty_cache
if "$STAGER" stage -q --no-pin "$SHARED/images.tar.zst" "$OUT/dest" >/dev/null 2>"$TMP/stage.err"; then
	check_run staged "$PY" "$PYE" epoch files "$OUT/dest" --order "$TMP/order.txt"
else
	fail check_staged "stager stage failed: $(head -n 1 "$TMP/stage.err")"
fi
empty_cache
if "$STAGER" mount -q "$SHARED/images.tar.zst" "$MS" 2>"$TMP/mount.err"; then
	check_run mount "$PY" "$PYE" epoch files "$MS" --order "$TMP/order.txt"
	stager_umount
else
	fail check_mount "stager mount failed: $(head -n 1 "$TMP/mount.err")"
fi
log "checks: pack $(cat "$TMP/check_pack" 2>/dev/null), staged $(cat "$TMP/check_staged" 2>/dev/null), mount $(cat "$TMP/check_mount" 2>/dev/null), tar $(cat "$TMP/check_tar" 2>/dev/null)"

# ---- memory at scale: PackDataset over 10k to 1M files of 100 bytes -------------------

declare -A MEM_PACK_B MEM_GEN_S MEM_PACK_S
for n in "${MEM_FILES[@]}"; do
	classes=$((n / 1000))
	((classes >= 1)) || classes=1
	log "memory: $n files of 100 bytes in $classes folders"
	t0=$(date +%s.%N)
	"$GENDATA" images "$OUT/mem-src" --files "$n" --classes "$classes" --sizes 100-100 --seed 3 2>/dev/null
	t1=$(date +%s.%N)
	"$STAGER" pack -q "$OUT/mem-src" -o "$OUT/mem-$n.tar.zst" >/dev/null
	t2=$(date +%s.%N)
	rm -rf "$OUT/mem-src"
	MEM_GEN_S[$n]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	MEM_PACK_S[$n]=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')
	MEM_PACK_B[$n]=$(stat -c %s "$OUT/mem-$n.tar.zst")
	for w in 0 2; do
		label=mem_${n}_$w
		timed "$label" "$PY" "$PYE" epoch pack "$OUT/mem-$n.tar.zst" --workers "$w" --batch "$BATCH" --seed 0 --expect "$n"
		((LAST_OK)) || continue
		n_read=$(sed -n 's/.*"samples": *\([0-9]*\).*/\1/p' "$TMP/$label.out" | tail -n 1)
		[[ $n_read == "$n" ]] || fail "$label" "the epoch read ${n_read:-no} samples, not $n"
		log "memory, $n files, $w workers: $(asecs "$LAST_WALL")"
	done
	rm -f "$OUT/mem-$n.tar.zst"
done

# ---- shuffle quality: classes per batch on class-sorted trees (tmpfs, not sharedfs) ---

quality() { # LABEL PACK TEXT
	timed "quality_$1" "$PY" "$PYE" quality "$2" --batch "$BATCH" --seed 0 --workers 0,2,4 --label "$3"
	((LAST_OK)) && log "shuffle quality, $3: $("$PY" "$PYE" quality-table "$TMP/quality_$1.out" | head -n 1)"
	return 0
}
quality images "$BACK/images.tar.zst" "$(count "$FILES_N") files of 10-15 KiB"
log "shuffle quality: $N_TINY files of 50-200 bytes in 100 folders"
"$GENDATA" images "$OUT/tiny-src" --files "$N_TINY" --classes 100 --sizes 50-200 --seed 2 2>/dev/null
"$STAGER" pack -q "$OUT/tiny-src" -o "$OUT/tiny.tar.zst" >/dev/null
rm -rf "$OUT/tiny-src"
quality tiny "$OUT/tiny.tar.zst" "$(count "$N_TINY") files of 50-200 B"
rm -f "$OUT/tiny.tar.zst"

# ---- results ----------------------------------------------------------------------

LOAD_END=$(uptime | sed 's/.*load average: *//')
T_RUN=$(($(date +%s) - T_START))
model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memtotal=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
stager_v=$("$STAGER" --version 2>&1 | sed -n 1p)
py_v=$("$PY" -c 'import sys, torch; print("Python %s, torch %s" % (sys.version.split()[0], torch.__version__))')
zstd_v=$(zstd --version | sed -n '1{s/^\** *//;s/ *\**$//;p}')

method_name() {
	case $1 in
	pack) echo "pack: \`PackDataset\` + \`PackSampler\` (through sharedfs)" ;;
	staged) echo "staged tree: open() + read() (tmpfs; stage not counted)" ;;
	staged_total) echo "staged tree, stage included" ;;
	mount) echo "\`stager mount\` (through sharedfs): open() + read()" ;;
	tar) echo "tar.zst: \`tarfile\` over \`zstd -dc\` (through sharedfs, archive order)" ;;
	pack256) echo "pack, \`PackDataset(cache_bytes=256 MiB)\` (through sharedfs)" ;;
	esac
}
# the stage's time, median, added to each epoch time of the staged tree
STAGE_S=$(md stage wall)
for w in "${WORKERS[@]}"; do
	: >"$TMP/staged_total_$w.secs"
	if [[ -s $TMP/staged_$w.secs && $STAGE_S != NA ]]; then
		while read -r s; do plus "$s" "$STAGE_S"; done <"$TMP/staged_$w.secs" >"$TMP/staged_total_$w.secs"
	fi
	: >"$TMP/staged_total_$w.rd"
	[[ -s $TMP/stage.rd ]] && median "$TMP/stage.rd" >"$TMP/staged_total_$w.rd"
done

{
	echo "# One shuffled epoch in Python: stager.torch against a staged tree, stager mount and tarfile"
	echo
	if ((QUICK)); then
		echo "**--quick run: tiny data, one repetition; the figures prove that the harness works, nothing more.**"
		echo
	fi
	echo "$(count "$FILES_N") files of 10-15 KiB in $N_CLASSES folders ($(bytes_h "$DATA_B"); pack $(bytes_h "$PACK_B")," \
		"$PACK_FR frames; plain tar.zst $(bytes_h "$TAR_B")), read once each through" \
		"\`torch.utils.data.DataLoader\` (batch_size $BATCH, a collate_fn that returns the list, default" \
		"fork start method) with 0, 2 and 4 workers on a $(nproc)-CPU machine. The pack, the stage's source, the" \
		"mount's pack and the tar.zst are on bench/sharedfs (an NFS-like cost model: ${DELAY_MS} ms a metadata" \
		"operation, $BW/s). pack, staged tree and mount read the same files in the same order, the order" \
		"of \`PackSampler(shuffle=True, seed=0)\` (windows of frames that fit half the cache, each drawn from" \
		"all over the pack, their files shuffled together;" \
		"with workers, the pack's sampler is also given the loader's batch_size and num_workers, and deals" \
		"each worker the batches of frames of its own);" \
		"tarfile reads the archive in its order. Time: from making the dataset (opening the pack) to the" \
		"last batch, in Python (its start and imports not counted); medians (min–max) of $REPS repetitions."
	echo "*read* is what the run read from the shared filesystem (its counters), *× pack* that over the pack's" \
		"size. *peak RSS* is the largest VmHWM at the end of the epoch among the processes that read" \
		"(the workers; the main process with 0 workers), *private* their largest private memory then" \
		"(smaps_rollup: what a worker does not share with the others)."
	echo
	echo "| method | workers | epoch | samples/s | MB/s | pack ÷ this (speed) | read from shared FS | × pack | meta ops | peak RSS | private |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for m in pack staged staged_total mount tar pack256; do
		for w in "${WORKERS[@]}"; do
			l=${m}_$w
			s=$(md "$l" secs)
			ps=$(md "pack_$w" secs)
			if [[ $m == staged_total ]]; then rss="—" priv="—" meta=$(md stage meta); else rss=$(mib "$(md "$l" hwm)") priv=$(mib "$(md "$l" priv)") meta=$(md "$l" meta); fi
			echo "| $(method_name "$m") | $w | $(spread "$l" secs asecs) | $(rate_h "$(per "$FILES_N" "$s")") |" \
				"$(mbs "$(per "$DATA_B" "$s")") | $(ratio "$s" "$ps") | $(bytes_h "$(md "$l" rd)") |" \
				"$(ratio "$(md "$l" rd)" "$PACK_B") | $(count "$meta") | $rss | $priv |"
		done
	done
	echo
	echo "\`stager stage\` of the pack (cold: empty cache, to a tmpfs): $(spread stage wall asecs)," \
		"$(bytes_h "$(md stage rd)") read ($(ratio "$(md stage rd)" "$PACK_B") the pack), $(count "$(md stage meta)") metadata operations."
	echo
	echo "### Targets"
	echo
	echo "| target | workers | measured | met |"
	echo "|---|---|---|---|"
	for w in "${WORKERS[@]}"; do
		for base in staged staged_total; do
			r=$(per "$(md "staged_$w" secs)" "$(md "pack_$w" secs)")
			[[ $base == staged_total ]] && r=$(per "$(md "staged_total_$w" secs)" "$(md "pack_$w" secs)")
			if ((QUICK)); then met="(quick)"; else met=$(awk -v r="$r" 'BEGIN { if (r == "NA") print "—"; else print (r >= 0.5) ? "yes" : "**no**" }'); fi
			if [[ $base == staged ]]; then what="shuffled epoch from the pack ≥ 0.5× the speed of the staged tree (stage excluded)"; else what="the same, the stage's time included"; fi
			echo "| $what | $w | $(awk -v r="$r" 'BEGIN { if (r == "NA") print "—"; else printf "%.2f×", r }') | $met |"
		done
	done
	for w in "${WORKERS[@]}"; do
		r=$(per "$(md "pack_$w" rd)" "$PACK_B")
		if ((QUICK)); then met="(quick)"; else met=$(awk -v r="$r" 'BEGIN { if (r == "NA") print "—"; else print (r <= 1.2) ? "yes" : "**no**" }'); fi
		echo "| the pack read about once: ≤ 1.2× its size from the shared FS | $w | $(awk -v r="$r" 'BEGIN { if (r == "NA") print "—"; else printf "%.2f×", r }') | $met |"
	done
	for q in images tiny; do
		[[ -s $TMP/quality_$q.out && ! -s $TMP/quality_$q.fail ]] || continue
		"$PY" "$PYE" quality-table --targets --quick "$QUICK" "$TMP/quality_$q.out"
	done
	echo
	echo "## Shuffle quality on class-sorted trees"
	echo
	echo "The order a loop receives from \`PackSampler(shuffle=True, seed=0)\` (given the batch size and W" \
		"workers when W > 1) on packs of CLASS/NAME files packed in sorted order, against a true permutation" \
		"(\`random.shuffle\`): the mean number of classes in a batch of $BATCH and the mean share of its most" \
		"frequent class. Then one epoch read in the order of W = 0 in one process (\`PackDataset\`, its" \
		"default 64 MiB cache, on the tmpfs): the pack's bytes fetched over its size, its frames' bytes" \
		"decoded over their size (\`Pack.stats()\`), and the epoch's time."
	echo
	echo "| set | files | frames | classes | workers | classes a batch | permutation's | ratio | top class share | permutation's | fetched × pack | decoded × frames | epoch |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	qj=()
	for q in images tiny; do [[ -s $TMP/quality_$q.out && ! -s $TMP/quality_$q.fail ]] && qj+=("$TMP/quality_$q.out"); done
	((${#qj[@]})) && "$PY" "$PYE" quality-table "${qj[@]}"
	echo
	echo "## Memory of PackDataset: 10k to 1M files"
	echo
	echo "Packs of files of 100 bytes (\`gendata images --sizes 100-100\`, 1,000 a folder), on a tmpfs (not" \
		"sharedfs), one epoch of \`PackDataset\` + \`PackSampler\` with 0 and 2 workers. *first*: after the" \
		"process read its first file (the pack open, its manifest loaded); ¼, ½, ¾: after that share of the" \
		"files the process reads (private memory); *end*: after the last batch. With 2 workers, the largest" \
		"of the two. The main process with 0 workers holds torch (about 230 MiB); a worker shares it with" \
		"the main process (fork), so its *private* memory is what it costs."
	echo
	echo "| files | pack | workers | epoch | RSS first | RSS end | VmHWM end | private: first | ¼ | ½ | ¾ | end |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	for n in "${MEM_FILES[@]}"; do
		for w in 0 2; do
			l=mem_${n}_$w
			if [[ ! -s $TMP/$l.out ]] || [[ -s $TMP/$l.fail ]]; then
				echo "| $(count "$n") | $(bytes_h "${MEM_PACK_B[$n]:-NA}") | $w | **failed** | | | | | | | | |"
				continue
			fi
			"$PY" - "$TMP/$l.out" "$n" "$(bytes_h "${MEM_PACK_B[$n]}")" "$w" <<'EOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
procs = [p for p in d["procs"] if p.get("end")]
def mx(when, key):
    v = [p[when][key] for p in procs if p.get(when) and key in p[when]]
    return "%.0f MiB" % (max(v) / 1048576) if v else "—"
def tr(q):
    v = [p["trace"][q]["private"] for p in procs if len(p.get("trace", [])) > q]
    return "%.0f MiB" % (max(v) / 1048576) if v else "—"
n = int(sys.argv[2])
secs = d["seconds"]
print("| {:,} | {} | {} | {:.2f} s ({:,.0f}/s) | {} | {} | {} | {} | {} | {} | {} | {} |".format(
    n, sys.argv[3], sys.argv[4], secs, n / secs, mx("first", "VmRSS"), mx("end", "VmRSS"),
    mx("end", "VmHWM"), mx("first", "private"), tr(0), tr(1), tr(2), mx("end", "private")))
EOF
		done
	done
	echo
	echo "## Reading the figures"
	echo
	echo "- pack: each DataLoader worker opens the pack itself (PackDataset reopens it after the fork) and" \
		"keeps its own cache of decoded frames (cache_bytes, 64 MiB by default). The DataLoader hands batch k" \
		"to worker k % W; told the batch size and W, PackSampler cuts the epoch's frames into one run a" \
		"worker and deals the batches so that each worker reads its own frames (\`Pack.stats()\` of each" \
		"worker in the raw data): the pack is fetched and decoded about once in all, not W times."
	echo "- Within one process, a frame decoded in part is charged its compressed bytes too until it is" \
		"decoded whole; PackSampler's windows take half the cache (window_bytes), each frame counted at" \
		"its decoded plus compressed bytes, so that a window fits it. The" \
		"\`cache_bytes=256 MiB\` rows show what a larger cache changes."
	echo "- staged tree: files on a tmpfs, read by open() + read(); the stage (read the pack, write" \
		"$(count "$FILES_N") files) is paid once per node and job."
	echo "- mount: each open() and read() is a FUSE request to \`stager mount\`'s process, which fetches," \
		"checks and decodes whole frames (256 MiB of them kept). Its *read* counts from after the mount was" \
		"made: what \`stager mount\` read to start (the pack's trailer) is not in it."
	echo "- tar: \`tarfile\` in streaming mode over \`zstd -dc\`; one shard, so with workers only worker 0" \
		"reads (WebDataset gives each worker whole shards); the order is the archive's, not shuffled."
	echo
	echo "## Method"
	echo
	echo "- Machine: $(nproc) CPUs ($model), $memtotal RAM, Linux $(uname -r); load average $LOAD_START at" \
		"the start, $LOAD_END at the end."
	echo "- Tools: $stager_v (commit \`$commit\`, binary $B/stager, module $B/python); $py_v (/usr/bin/python3); $zstd_v."
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); \`B=${B#"$ROOT"/} bash bench/python.sh$( ((QUICK)) && echo " --quick")$( [[ $REPS != 3 ]] && ! ((QUICK)) && echo " --reps $REPS")\`" \
		"(or \`make bench-python\`), $T_RUN s."
	echo "- Dataset: \`gendata images DIR --files $N_IMAGES --classes $N_CLASSES --sizes $SIZES --seed 1\`" \
		"(incompressible); \`stager pack -q DIR -o images.tar.zst\`; \`cd DIR && tar --sort=name -I 'zstd -3'" \
		"-cf images-tar.tar.zst -- *\`."
	echo "- Shared filesystem: \`bench/sharedfs --delay-ms $DELAY_MS --bw $BW --attr-timeout $ATTR_TIMEOUT BACK SHARED\`;" \
		"before each run the pack's and tar's page cache on the mount dropped (an open each), \`sync\`, a pause" \
		"of $SETTLE s, its counters reset; the backing files read untimed before (an NFS server's cache)."
	echo "- Commands (each under bench/runstat and \`timeout $TIMEOUT\`; PYTHONPATH=$B/python):" \
		"\`python3 bench/python_epoch.py epoch pack SHARED/images.tar.zst --workers W --batch $BATCH --seed 0\`;" \
		"\`... epoch files DEST --order ORDER\` after \`stager stage -q --json --no-pin SHARED/images.tar.zst DEST\`" \
		"(timed on its own; \"hit\": false required); \`... epoch files MNT --order ORDER\` on a fresh" \
		"\`stager mount -q SHARED/images.tar.zst MNT\` (made untimed; \`stager clean --all\` before);" \
		"\`... epoch tar SHARED/images-tar.tar.zst\`. ORDER: \`python_epoch.py order PACK\`, the names in" \
		"PackSampler's order. Each repetition runs the methods in a rotated order."
	echo "- Checks (untimed, 2 workers, once a method): a sum of crc32(name, data) over the epoch against the" \
		"source tree's: pack $(cat "$TMP/check_pack" 2>/dev/null || echo "not checked"), staged" \
		"$(cat "$TMP/check_staged" 2>/dev/null || echo "not checked"), mount $(cat "$TMP/check_mount" 2>/dev/null || echo "not checked")," \
		"tar $(cat "$TMP/check_tar" 2>/dev/null || echo "not checked"); every timed run read $(count "$FILES_N") samples."
	echo "- Memory datasets: generated in $(for n in "${MEM_FILES[@]}"; do printf '%s s (%s files), ' "${MEM_GEN_S[$n]:-?}" "$(count "$n")"; done | sed 's/, $//'); packed in" \
		"$(for n in "${MEM_FILES[@]}"; do printf '%s s, ' "${MEM_PACK_S[$n]:-?}"; done | sed 's/, $//')."
	echo
	echo "## Raw data"
	echo
	echo "Epoch seconds, bytes read from the shared FS, in repetition order:"
	echo
	for l in $(cd "$TMP" && ls ./*.secs 2>/dev/null | sed 's|^\./||; s/\.secs$//' | grep -v '^staged_total' | sort); do
		echo "    $l: $(raw "$TMP/$l.secs") s (read $(raw "$TMP/$l.rd"); meta ops $(raw "$TMP/$l.meta"); peak RSS $(raw "$TMP/$l.hwm"))"
	done
	echo "    stage: $(raw "$TMP/stage.wall") s (read $(raw "$TMP/stage.rd"); meta ops $(raw "$TMP/stage.meta"))"
	echo
	echo "\`Pack.stats()\` of each reading process (worker -1: the main process), the last repetition of each pack run:"
	echo
	for l in $(for m in pack pack256; do for w in "${WORKERS[@]}"; do echo "${m}_$w"; done; done); do
		[[ -s $TMP/$l.out ]] || continue
		"$PY" - "$TMP/$l.out" "$l" <<'EOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
for p in d["procs"]:
    s = p.get("pack_stats")
    if s:
        print("    %s worker %s: %s" % (sys.argv[2], p["worker"], " ".join("%s=%s" % kv for kv in s.items())))
EOF
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
