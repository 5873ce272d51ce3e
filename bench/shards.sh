#!/usr/bin/env bash
# bench/shards.sh - `stager mount` of a dataset as 100 shard packs against
# the same dataset as one pack, through the emulated shared filesystem
# (bench/sharedfs, as bench/mount.sh).  `make bench-mount` runs it:
#
#   B=build bash bench/shards.sh [--quick] [--reps N]
#
# The dataset is images (bench/gendata: 20,000 files in 100 folders, 256
# MiB); "one" is its pack, "shards" is 100 packs, one per folder (each
# holding class_NNN/...), so that both mounts show the same tree.  Each
# repetition, for each of the two, cold (stager's scratch emptied, no
# mount left, sharedfs's attribute cache expired, its counters reset):
#   mount   `stager mount PACK... MNT` + cat of the first file, timed
#   random  randread (bench/randread.c) on a mount just made: RR_COUNT
#           open + 4 KiB pread + close, 1 and 2 threads (fixed seed)
# and the shared filesystem's metadata operations and bytes read.  What
# was read is checked untimed (randread --verify, diff of one folder).
# Results to bench/results-shards.md; --quick (2,000 files, 1 repetition:
# proves the harness, asserts nothing) to bench/work-shards/results-quick.md.
# Needs root (a tmpfs for the scratch), /dev/fuse and fusermount3.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
QUICK=0 REPS=3
while (($#)); do
	case $1 in
	--quick) QUICK=1 REPS=1 ;;
	--reps) REPS=$2; shift ;;
	*) echo "usage: bench/shards.sh [--quick] [--reps N]" >&2; exit 2 ;;
	esac
	shift
done
TIMEOUT=${BENCH_TIMEOUT:-300}
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_clean_env
STAGER=$PWD/$B/stager GENDATA=$PWD/$B/gendata RUNSTAT=$PWD/$B/runstat
SHAREDFS=$PWD/$B/sharedfs RANDREAD=$PWD/$B/randread
for x in "$STAGER" "$GENDATA" "$RUNSTAT" "$SHAREDFS" "$RANDREAD"; do
	[[ -x $x ]] || { echo "$x missing: make bench-mount" >&2; exit 2; }
done
FILES=20000 RR_COUNT=${RR_COUNT:-2000} ATTR_TIMEOUT=1 SETTLE=1.2
((QUICK)) && FILES=2000 RR_COUNT=200 ATTR_TIMEOUT=0.2 SETTLE=0.3
WORK=$PWD/bench/work-shards
OUT=$PWD/bench/results-shards.md
((QUICK)) && OUT=$WORK/results-quick.md
BACK=$WORK/back SHARED=$WORK/shared SFS_STATS=$WORK/shared/.sharedfs-stats
TMP=$WORK/tmp MS=$WORK/mnt
FAILED=()
log() { echo "shards: $*" >&2; }
die() { echo "shards: $*" >&2; exit 1; }
fail() { FAILED+=("$1: ${2:0:200}"); log "FAILED $1: ${2:0:200}"; LAST_OK=0; }
sfs_quiesce() { sleep 0.1; }

cleanup() {
	stager_umount
	umount_fuse "$SHARED"
	mountpoint -q "$WORK/scratch" && umount "$WORK/scratch"
	[[ ${KEEP:-0} = 1 ]] || rm -rf "$WORK/src" "$BACK"
}
trap cleanup EXIT
mkdir -p "$WORK" "$BACK/shards" "$SHARED" "$TMP" "$MS" "$WORK/scratch"
rm -f "$TMP"/*
mountpoint -q "$WORK/scratch" || mount -t tmpfs -o size=2g tmpfs "$WORK/scratch"
export STAGER_SCRATCH_ROOT=$WORK/scratch/root STAGER_SITE_CONFIG=/dev/null
export XDG_CONFIG_HOME=$WORK/config STAGER_SLOT_DIR=$WORK/scratch/slots

started=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
if [[ ! -d $WORK/src || $(cat "$WORK/src.files" 2>/dev/null) != "$FILES" ]]; then
	log "making the dataset ($FILES files in 100 folders)"
	rm -rf "$WORK/src"
	"$GENDATA" images "$WORK/src" --files "$FILES" --classes 100 >/dev/null
	echo "$FILES" >"$WORK/src.files"
fi
(cd "$WORK/src" && find . -type f -printf '%s %P\n' | sort -k2) >"$WORK/list"
"$STAGER" pack -q "$WORK/src" -o "$BACK/one.tar.zst"
rm -rf "$WORK/split" "$BACK/shards"/*
mkdir -p "$WORK/split"
for d in "$WORK/src"/*/; do
	c=$(basename "$d")
	mkdir -p "$WORK/split/$c"
	cp -al "$d" "$WORK/split/$c/$c"
	"$STAGER" pack -q "$WORK/split/$c" -o "$BACK/shards/$c.tar.zst"
done
rm -rf "$WORK/split"
n_shards=$(find "$BACK/shards" -name '*.tar.zst' | wc -l)
one_size=$(stat -c %s "$BACK/one.tar.zst")
shards_size=$(du -cb "$BACK/shards"/*.tar.zst | tail -1 | cut -f1)
"$SHAREDFS" --delay-ms 0.5 --bw 1G --attr-timeout "$ATTR_TIMEOUT" "$BACK" "$SHARED" ||
	die "sharedfs could not mount $SHARED"
first=$(sed -n '1s/^[0-9]* //p' "$WORK/list")

packs_of() { # one|shards
	if [[ $1 = one ]]; then echo "$SHARED/one.tar.zst"; else
		printf '%s\n' "$SHARED"/shards/*.tar.zst
	fi
}
cold() {
	stager_umount
	"$STAGER" clean -q --all >/dev/null 2>&1 || true
	sleep "$SETTLE"
	echo reset >"$SFS_STATS"
}
counters() { # LABEL
	awk '$1 == "meta_ops" { print $2 }' "$SFS_STATS" >>"$TMP/$1.meta"
	awk '$1 == "bytes_read" { print $2 }' "$SFS_STATS" >>"$TMP/$1.rd"
}
# mount PACK... and read the first file: one command, for runstat
MOUNT_AND_READ='"$0" mount -q "${@:3}" "$1" && cat "$1/$2" >/dev/null'

for ((rep = 1; rep <= REPS; rep++)); do
	for kind in $(order "$rep" one shards); do
		mapfile -t packs < <(packs_of "$kind")
		cold
		LAST_OK=0
		timed "mount_$kind" bash -c "$MOUNT_AND_READ" "$STAGER" "$MS" "$first" "${packs[@]}"
		((LAST_OK)) && counters "mount_$kind"
		if ((rep == 1)) && ((LAST_OK)); then
			diff -r "$WORK/src/class_042" "$MS/class_042" >/dev/null ||
				fail "mount_$kind" "class_042 differs from the source"
		fi
		for th in 1 2; do
			cold
			"$STAGER" mount -q "${packs[@]}" "$MS" || { fail "rr${th}_$kind" "mount failed"; continue; }
			echo reset >"$SFS_STATS"
			LAST_OK=0
			timed "rr${th}_$kind" "$RANDREAD" --threads "$th" --count "$RR_COUNT" --seed 1 "$MS" "$WORK/list"
			if ((LAST_OK)); then
				sed -n 's/.*reads_per_s=\([0-9.]*\).*/\1/p' "$TMP/rr${th}_$kind.out" >>"$TMP/rr${th}_$kind.rate"
				counters "rr${th}_$kind"
				"$RANDREAD" --count 50 --seed 2 --verify "$WORK/src" "$MS" "$WORK/list" >/dev/null 2>&1 ||
					fail "rr${th}_$kind" "randread --verify found a wrong byte"
			fi
		done
	done
done
stager_umount

fmt_s() { awk -v s="$1" 'BEGIN { if (s == "NA") print "NA"; else if (s < 1) printf "%.1f ms\n", s * 1000; else printf "%.3f s\n", s }'; }
mib() { awk -v b="$1" 'BEGIN { if (b == "NA") print "NA"; else printf "%.1f MiB\n", b / 1048576 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.2f\n", a / b }'; }
m1=$(median "$TMP/mount_one.wall") ms=$(median "$TMP/mount_shards.wall")
mmax=$(maxof "$TMP/mount_shards.wall")
{
	echo "# stager mount of 100 shard packs against one pack"
	echo
	echo "Generated by \`bench/shards.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), stager commit" \
		"\`$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\`; medians of $REPS repetitions" \
		"(min-max in brackets), the order rotated. Load average at the start: $load_start;" \
		"at the end: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; $(nproc) CPUs); the run took" \
		"$(($(date +%s) - started)) s."
	echo
	echo "Dataset: images, $FILES files in 100 folders; *one*: its pack ($(mib "$one_size"));" \
		"*shards*: $n_shards packs, one per folder, each holding \`class_NNN/...\`" \
		"($(mib "$shards_size") in all), so that both mounts show the same tree. Every pack is read" \
		"through \`bench/sharedfs\` (0.5 ms per metadata operation, 1 GiB/s, attribute cache" \
		"$ATTR_TIMEOUT s), cold: scratch emptied, attribute cache expired, counters reset."
	echo
	echo "| run | one pack | $n_shards shards | shards ÷ one | meta ops (one / shards) | read (one / shards) |"
	echo "|---|---|---|---|---|---|"
	echo "| \`stager mount\` + cat of the first file | $(fmt_s "$m1") ($(fmt_s "$(minof "$TMP/mount_one.wall")")–$(fmt_s "$(maxof "$TMP/mount_one.wall")")) |" \
		"$(fmt_s "$ms") ($(fmt_s "$(minof "$TMP/mount_shards.wall")")–$(fmt_s "$mmax")) | $(ratio "$ms" "$m1")× |" \
		"$(median "$TMP/mount_one.meta") / $(median "$TMP/mount_shards.meta") |" \
		"$(mib "$(median "$TMP/mount_one.rd")") / $(mib "$(median "$TMP/mount_shards.rd")") |"
	for th in 1 2; do
		r1=$(median "$TMP/rr${th}_one.rate") rs=$(median "$TMP/rr${th}_shards.rate")
		echo "| random 4 KiB reads, $th thread$( ((th > 1)) && echo s), reads/s | $r1/s | $rs/s | $(ratio "$rs" "$r1")× |" \
			"$(median "$TMP/rr${th}_one.meta") / $(median "$TMP/rr${th}_shards.meta") |" \
			"$(mib "$(median "$TMP/rr${th}_one.rd")") / $(mib "$(median "$TMP/rr${th}_shards.rd")") |"
	done
	echo
	echo "### Targets"
	echo
	echo "| target | measured | met |"
	echo "|---|---|---|"
	met() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN { if (a == "NA") print "**no** (not measured)"; else if ((op == "<" && a < b) || (op == ">=" && a >= b)) print "yes"; else print "**no**" }'; }
	echo "| mounting $n_shards shards (+ the first file) well under 2 s | $(fmt_s "$mmax") (slowest repetition) | $(met "$mmax" "<" 2) |"
	for th in 1 2; do
		q=$(ratio "$(median "$TMP/rr${th}_shards.rate")" "$(median "$TMP/rr${th}_one.rate")")
		echo "| random reads over the shards ≥ 0.8× one pack's rate, $th thread$( ((th > 1)) && echo s) | ${q}× | $(met "$q" ">=" 0.8) |"
	done
	if ((${#FAILED[@]})); then
		echo
		echo "Failed runs (left out of the figures):"
		printf -- '- %s\n' "${FAILED[@]}"
	fi
} >"$OUT"
cat "$OUT"
((${#FAILED[@]} == 0))
