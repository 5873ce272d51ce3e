#!/usr/bin/env bash
# bench/delta.sh - a new dataset version on a node that has the old one:
# stager stage of the new pack (which reads the delta from the cached old
# version) against a full stage (the cache lacks the old version) and
# against rsync -a of the new tree into a copy of the old one, on the
# emulated shared filesystem (bench/sharedfs, the cost model of run.sh).
# `make bench` runs it after bench/run.sh; it also runs alone:
#
#   B=build bash bench/delta.sh [--reps N] [--quick]
#
# Datasets (bench/gendata, incompressible): the image folder (20,000 files,
# 256 MiB) whose v2 has 1% of its files changed in place (4 KiB each), 20
# removed and 20 added; and a 1 GiB container image whose v2 has 3 regions
# of 1 MiB rewritten (0.3%).  v1 and v2 are packed (v2 with --base v1: the
# time and the delta's size are reported) into the shared filesystem's
# backing directory, the trees are kept there too for rsync.
# Each repetition, in a rotating order: `stager stage v2` with v1 in the
# cache (the delta path), `stager stage v2` with an empty cache (the full
# read), `rsync -a v2/ DEST/` where DEST holds v1's tree, and for the
# image `dd` of its size from /dev/zero into the scratch (the write alone:
# the floor of any way to make v2 there).  Figures: wall time, bytes
# read and metadata operations on the shared filesystem (sharedfs's
# counters), medians.  The image runs again (delta, full, dd; no rsync)
# with the node's scratch on each real filesystem of BENCH_SCRATCH (default
# "tmpfs ext4 xfs"; "tmpfs" alone with --quick): a loop-mounted image file
# under bench/work (bench/lib.sh), made before the runs and removed after,
# also on failure; BENCH_DISK_SIZE its size (default 6G, sparse).  Results
# to bench/results-delta.md (and printed), with a table by filesystem;
# --quick (tiny data, 1 repetition) to a temporary file.
# Needs /dev/fuse (the mount); rsync is optional; root for the tmpfs and
# the loop mounts.
set -euo pipefail

REPS=3
QUICK=0
while (($#)); do
	case $1 in
	--reps) REPS=$2; shift ;;
	--quick) QUICK=1; REPS=1 ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "delta.sh: unknown argument '$1'" >&2; exit 1 ;;
	esac
	shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
B=${B:-build}
[[ $B == /* ]] || B=$ROOT/$B
B=$(cd "$B" && pwd)
STAGER=$B/stager GENDATA=$B/gendata RUNSTAT=$B/runstat SHAREDFS=$B/sharedfs
for x in "$STAGER" "$GENDATA" "$RUNSTAT" "$SHAREDFS"; do
	[[ -x $x ]] || { echo "delta.sh: $x missing (make all $B/gendata $B/runstat $B/sharedfs)" >&2; exit 1; }
done
[[ -e /dev/fuse ]] || { echo "delta.sh: needs /dev/fuse (the mount)" >&2; exit 1; }
HAVE_RSYNC=0
command -v rsync >/dev/null && HAVE_RSYNC=1
DELAY_MS=${BENCH_DELAY_MS:-0.5}
BW=${BENCH_BW:-1G}
ATTR=${BENCH_ATTR_TIMEOUT:-1}
W=$(mktemp -d "${TMPDIR:-/tmp}/stager-bench-delta.XXXXXX")
BACK=$W/back SHARED=$W/shared OUT=$W/out
mkdir -p "$BACK" "$SHARED" "$OUT"
# the scratch filesystems' images: under bench/work, on the disk that
# run.sh's work directory is on
DW=
cleanup() {
	local fs left=0
	mountpoint -q "$SHARED" 2>/dev/null && { fusermount3 -u "$SHARED" 2>/dev/null || umount -l "$SHARED"; }
	mountpoint -q "$OUT" 2>/dev/null && umount "$OUT"
	if [[ -n $DW ]]; then
		for fs in ext4 xfs; do scratch_fs_umount "$DW/$fs.img" "$DW/$fs" || left=1; done
		((left)) || rm -rf "$DW"
	fi
	if ! mountpoint -q "$SHARED" 2>/dev/null && ! mountpoint -q "$OUT" 2>/dev/null && ((!left)); then
		chmod -R u+w "$W" 2>/dev/null || true
		rm -rf "$W"
	fi
}
trap cleanup EXIT
log() { echo "delta.sh: $*" >&2; }
# the node's scratch (the cache, the DESTs, rsync's copy): a tmpfs as in
# run.sh when root, so that the figures are the tools', not this VM's disk
# (whose writeback made one run of the same stage 0.7 s and the next 2.5 s)
OUT_DESC="the disk"
if (($(id -u) == 0)) && mount -t tmpfs -o size=8G tmpfs "$OUT" 2>/dev/null; then
	OUT_DESC="a tmpfs"
fi
# The large image is staged again with the scratch on each real
# filesystem of BENCH_SCRATCH (tmpfs, ext4, xfs: default all three, tmpfs
# alone with --quick), the filesystems of nodes' local scratch: an image
# file under bench/work, loop-mounted (bench/lib.sh).  On XFS a patched
# file shares the cached old version's unchanged blocks (reflink), where
# on a tmpfs or ext4 every byte of the new version is written again.  Root
# needed; a filesystem that cannot be made is skipped, and said so.
declare -A FS_DESC=()
DISK_FS=()
if ((QUICK)); then scratch_list=${BENCH_SCRATCH:-tmpfs}; else scratch_list=${BENCH_SCRATCH:-tmpfs ext4 xfs}; fi
for fs in $scratch_list; do
	case $fs in
	tmpfs) ;;
	ext4 | xfs)
		[[ -n $DW ]] || { mkdir -p "$ROOT/bench/work" && DW=$(mktemp -d "$ROOT/bench/work/delta-scratch.XXXXXX"); }
		if scratch_fs_mount "$fs" "$DW/$fs.img" "$DW/$fs" "${BENCH_DISK_SIZE:-6G}"; then
			DISK_FS+=("$fs")
			FS_DESC[$fs]=$(scratch_fs_desc "$fs" "$DW/$fs.img")
		else
			FS_DESC[$fs]="skipped: $SCRATCH_FS_WHY"
			log "WARNING: the image with the scratch on $fs is skipped: $SCRATCH_FS_WHY"
		fi
		;;
	*) log "BENCH_SCRATCH: unknown filesystem '$fs' (tmpfs, ext4, xfs)"; exit 1 ;;
	esac
done

bench_clean_env
export STAGER_SCRATCH_ROOT=$OUT/scratch STAGER_SITE_CONFIG=/dev/null
export STAGER_SLOT_DIR=$W/slots XDG_CONFIG_HOME=$W/no-config

if ((QUICK)); then
	N_IMAGES=400 BIG=16M REGIONS=2
else
	N_IMAGES=20000 BIG=1G REGIONS=3
fi

# ---- datasets: v1 and v2 of each, packed, in the backing directory -------------
log "generating the datasets under $BACK"
"$GENDATA" images "$BACK/images-v1" --files "$N_IMAGES" --classes 100 --seed 1 >/dev/null
cp -a "$BACK/images-v1" "$BACK/images-v2"
k=0 CHANGED=0
while IFS= read -r f; do
	if ((k % 100 == 0)); then
		"$GENDATA" file "$W/chunk" --size 4K --seed $((500 + k)) >/dev/null
		dd if="$W/chunk" of="$f" bs=4096 seek=1 conv=notrunc status=none
		touch "$f"
		CHANGED=$((CHANGED + 1))
	elif ((k % 1000 == 1)); then
		rm "$f"
	fi
	k=$((k + 1))
done < <(find "$BACK/images-v2" -type f | LC_ALL=C sort)
mkdir -p "$BACK/images-v2/new"
for i in $(seq 1 20); do
	"$GENDATA" file "$BACK/images-v2/new/img_$i.jpg" --size 13K --seed $((700 + i)) >/dev/null
done
mkdir -p "$BACK/image-v1" "$BACK/image-v2"
"$GENDATA" file "$BACK/image-v1/container.sif" --size "$BIG" --seed 2 >/dev/null
cp "$BACK/image-v1/container.sif" "$BACK/image-v2/container.sif"
big_bytes=$(stat -c %s "$BACK/image-v1/container.sif")
for r in $(seq 1 "$REGIONS"); do
	"$GENDATA" file "$W/chunk" --size 1M --seed $((800 + r)) >/dev/null
	dd if="$W/chunk" of="$BACK/image-v2/container.sif" bs=1M seek=$((big_bytes / 1048576 * r / (REGIONS + 1))) \
		conv=notrunc status=none
done

# the page cache holds the backing files, as in run.sh: the cost model is
# sharedfs's, not this machine's disk
declare -A DELTA_B PACK_B
for ds in images image; do
	"$STAGER" pack -q "$BACK/$ds-v1" -o "$BACK/$ds-v1.tar.zst" >/dev/null
	# pack v2 with and without --base, alternating, medians (untimed removal)
	for ((i = 1; i <= REPS; i++)); do
		for k in 0 1; do
			rm -f "$BACK/$ds-v2.tar.zst"*
			warm "$BACK/$ds-v2" "$BACK/$ds-v1.tar.zst"
			if (((i + k) % 2)); then
				"$RUNSTAT" -o "$W/rs" -- "$STAGER" pack -q "$BACK/$ds-v2" -o "$BACK/$ds-v2.tar.zst" >/dev/null
				sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$W/rs" | tail -1 >>"$W/${ds}_pack.wall"
			else
				"$RUNSTAT" -o "$W/rs" -- "$STAGER" pack -q "$BACK/$ds-v2" -o "$BACK/$ds-v2.tar.zst" \
					--base "$BACK/$ds-v1.tar.zst" >/dev/null
				sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$W/rs" | tail -1 >>"$W/${ds}_packbase.wall"
			fi
		done
	done
	[[ -e $(echo "$BACK/$ds-v2.tar.zst".delta-*) ]] ||
		"$STAGER" pack -q "$BACK/$ds-v2" -o "$BACK/$ds-v2.tar.zst" --base "$BACK/$ds-v1.tar.zst" >/dev/null
	DELTA_B[$ds]=$(stat -c %s "$BACK/$ds-v2.tar.zst".delta-*)
	PACK_B[$ds]=$(stat -c %s "$BACK/$ds-v2.tar.zst")
done

"$SHAREDFS" --delay-ms "$DELAY_MS" --bw "$BW" --attr-timeout "$ATTR" "$BACK" "$SHARED"
mountpoint -q "$SHARED" || { log "sharedfs did not mount"; exit 1; }
STATS=$SHARED/.sharedfs-stats
stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$STATS"; }
quiet_fs() {
	local i
	for i in $(seq 1 100); do [[ $(stat_of open_now) == 0 ]] && return; sleep 0.05; done
}

# run LABEL CMD...: on a cold shared filesystem; wall, bytes read, metadata ops
run() {
	local label=$1
	shift
	sfs_forget "$BACK" "$SHARED"
	sync
	sleep "$(awk -v a="$ATTR" 'BEGIN { print a + 0.1 }')"
	quiet_fs
	echo reset >"$STATS"
	: >"$W/rs"
	fresh_pages
	"$RUNSTAT" -o "$W/rs" -- "$@" >"$W/$label.out" 2>"$W/err" || { cat "$W/err" >&2; log "$label failed"; exit 1; }
	quiet_fs
	sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$W/rs" >>"$W/$label.wall"
	sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' "$W/rs" >>"$W/$label.rss"
	stat_of bytes_read >>"$W/$label.rd"
	stat_of meta_ops >>"$W/$label.meta"
}
same() { diff -r "$1/" "$2/" >/dev/null || { log "$2 differs from $1"; exit 1; }; }
# A run's dataset D ("image@ext4": the image, with the scratch on ext4)
# sets DS (the data), FS (the scratch's filesystem), S (the scratch) and L
# (the label: image_ext4)
use() {
	DS=${1%@*} FS=tmpfs S=$OUT L=$1
	if [[ $1 == *@* ]]; then FS=${1#*@} S=$DW/$FS L=${DS}_$FS; fi
	export STAGER_SCRATCH_ROOT=$S/scratch
}
clean_cache() { chmod -R u+w "$S/scratch" 2>/dev/null || true; rm -rf "$S/scratch" "$S"/d-*; }

tool_delta() { # D: v1 cached, then v2 through the delta
	use "$1"
	clean_cache
	"$STAGER" stage -q "$SHARED/$DS-v1.tar.zst" "$S/d-v1" >/dev/null
	warm "$BACK/$DS-v2.tar.zst"*
	run "${L}_delta" "$STAGER" stage --json -q "$SHARED/$DS-v2.tar.zst" "$S/d-v2"
	grep -q '"delta":true' "$W/${L}_delta.out" || { log "$L: the stage did not use the delta"; exit 1; }
	same "$BACK/$DS-v2" "$S/d-v2"
}
tool_full() { # D: an empty cache
	use "$1"
	clean_cache
	warm "$BACK/$DS-v2.tar.zst"*
	run "${L}_full" "$STAGER" stage --json -q "$SHARED/$DS-v2.tar.zst" "$S/d-v2"
	same "$BACK/$DS-v2" "$S/d-v2"
}
tool_rsync() { # D: v1's tree at DEST, then rsync -a of v2's
	use "$1"
	rm -rf "$S/r"
	cp -a "$BACK/$DS-v1" "$S/r"
	warm "$BACK/$DS-v2"
	run "${L}_rsync" rsync -a --delete "$SHARED/$DS-v2/" "$S/r/"
	same "$BACK/$DS-v2" "$S/r"
	rm -rf "$S/r"
}
# the floor of any way to make v2's image on the node: its bytes written
# into a new file on the scratch, from memory (dd from /dev/zero), with no
# reading, hashing or patching; on a tmpfs this VM's page allocation sets it
tool_write() { # D: the image only
	use "$1"
	[[ $DS == image ]] || return 0
	rm -f "$S/w.img"
	run "${L}_write" dd if=/dev/zero of="$S/w.img" bs=4M count=$((big_bytes / 4194304)) status=none
	rm -f "$S/w.img"
}
TOOLS=(delta full write)
((HAVE_RSYNC)) && TOOLS+=(rsync)
RUNS=(images image)
for fs in "${DISK_FS[@]}"; do RUNS+=("image@$fs"); done
# the tools of run D: rsync on the tmpfs only (the real disks are there
# for the delta against the full stage; rsync would add a minute each)
tools_of() { if [[ $1 == *@* ]]; then echo delta full write; else echo "${TOOLS[@]}"; fi; }
for ((i = 1; i <= REPS; i++)); do
	for d in "${RUNS[@]}"; do
		read -ra tl <<<"$(tools_of "$d")"
		n=${#tl[@]}
		for ((k = 0; k < n; k++)); do "tool_${tl[$(((k + i) % n))]}" "$d"; done
	done
	log "repetition $i/$REPS done"
done

# ---- report ----------------------------------------------------------------------
hb() { awk -v b="$1" 'BEGIN { if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else printf "%.1f KiB", b / 1024 }'; }
spread() { sort -g "$1" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f–%.3f s", lo, hi }'; }
meets() { if ((QUICK)); then echo "(quick)"; else awk -v r="$1" -v t="$2" 'BEGIN { print (r != "—" && r + 0 <= t + 0) ? "yes" : "**no**" }'; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3g", a / b; else print "—" }'; }
if ((QUICK)); then out=$W/results-delta.md; else out=$ROOT/bench/results-delta.md; fi
{
	echo "# A new version on a node that has the old one: delta stage vs full stage vs rsync"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null)," \
		"$(nproc) CPUs ($(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo))," \
		"$(rsync --version 2>/dev/null | sed -n '1{s/  */ /g;p}')."
	echo "Shared filesystem: bench/sharedfs, ${DELAY_MS} ms per metadata operation, $BW/s," \
		"attribute cache ${ATTR} s, cold before each run (the backing files in the page cache, as in run.sh);" \
		"scratch (cache and destinations) on $OUT_DESC, and for *image on ext4* (XFS) on the filesystem the table below names." \
		"Medians of $REPS repetitions, the tools in a rotating order; peak RSS the largest; packing timed alternately with and without --base."
	echo "images: $N_IMAGES files (gendata), v2 with $CHANGED files changed in place (4 KiB each)," \
		"$(find "$BACK/images-v1" -type f | wc -l) → $(find "$BACK/images-v2" -type f | wc -l) files." \
		"image: one $(hb "$big_bytes") container image, v2 with $REGIONS regions of 1 MiB rewritten."
	echo
	echo "| dataset | v2 pack | delta file | pack v2 | pack v2 --base v1 |"
	echo "|---|---|---|---|---|"
	for ds in images image; do
		echo "| $ds | $(hb "${PACK_B[$ds]}") | $(hb "${DELTA_B[$ds]}") ($(awk -v a="${DELTA_B[$ds]}" -v b="${PACK_B[$ds]}" 'BEGIN { printf "%.2f%%", 100 * a / b }')) |" \
			"$(printf '%.2f s' "$(median "$W/${ds}_pack.wall")") | $(printf '%.2f s' "$(median "$W/${ds}_packbase.wall")") |"
	done
	echo
	echo "| dataset | how v2 gets to the node | time | read from the shared FS | metadata ops | peak RSS | time vs delta | bytes vs delta |"
	echo "|---|---|---|---|---|---|---|---|"
	for d in "${RUNS[@]}"; do
		use "$d"
		ds=$L name=${d/@/ on }
		dw=$(median "$W/${ds}_delta.wall") dr=$(median "$W/${ds}_delta.rd")
		for t in $(tools_of "$d"); do
			[[ $t == write && $DS != image ]] && continue
			case $t in
			delta) how="\`stager stage\`, v1 cached (delta)" ;;
			full) how="\`stager stage\`, empty cache" ;;
			rsync) how="\`rsync -a\` onto v1's tree" ;;
			write) how="(floor) \`dd\` of $(hb "$big_bytes") from /dev/zero into the scratch" ;;
			esac
			tw=$(median "$W/${ds}_$t.wall") tr=$(median "$W/${ds}_$t.rd") tm=$(median "$W/${ds}_$t.meta")
			trss=$(sort -g "$W/${ds}_$t.rss" | tail -1)
			echo "| $name | $how | $(printf '%.3f s' "$tw") | $(hb "$tr") | $tm | $(hb $((trss * 1024))) | $(ratio "$tw" "$dw")× | $( ((tr > 0)) && echo "$(ratio "$tr" "$dr")×" || echo —) |"
		done
	done
	echo
	echo "Targets (time: medians; spread: fastest–slowest repetition):"
	echo
	echo "| target | measured | met |"
	echo "|---|---|---|"
	for d in "${RUNS[@]}"; do
		use "$d"
		ds=$L name=${d/@/ on }
		dw=$(median "$W/${ds}_delta.wall") fw=$(median "$W/${ds}_full.wall")
		r=$(ratio "$dw" "$fw")
		want=1.0
		[[ $DS == image ]] && want=0.5
		[[ $DS == image && $FS != tmpfs ]] && want=0.7 # a real disk: issue 31
		echo "| $name: the delta stage ≤ $want × the full stage | $r ($(spread "$W/${ds}_delta.wall") against $(spread "$W/${ds}_full.wall")) | $(meets "$r" "$want") |"
	done
	for d in "${RUNS[@]}"; do
		use "$d"
		[[ $DS == image ]] || continue
		echo "| (no target) ${d/@/ on }: the delta stage against writing the image alone | $(ratio "$(median "$W/${L}_delta.wall")" "$(median "$W/${L}_write.wall")") ($(spread "$W/${L}_write.wall") for the write) | — |"
	done
	r=$(ratio "$(median "$W/image_packbase.wall")" "$(median "$W/image_pack.wall")")
	echo "| image: \`pack --base\` ≤ 2 × a plain pack | $r | $(meets "$r" 2) |"
	echo
	echo "The image by scratch filesystem (ratios of medians within each filesystem's runs; load average" \
		"at the end: $(cut -d' ' -f1-3 /proc/loadavg)):"
	echo
	echo "| scratch | delta stage | full stage | delta / full | target | met | \`dd\` of the image (floor) | delta / dd |"
	echo "|---|---|---|---|---|---|---|---|"
	for d in "${RUNS[@]}"; do
		use "$d"
		[[ $DS == image ]] || continue
		dw=$(median "$W/${L}_delta.wall") fw=$(median "$W/${L}_full.wall") ww=$(median "$W/${L}_write.wall")
		want=0.7
		[[ $FS == tmpfs ]] && want=0.5
		r=$(ratio "$dw" "$fw")
		echo "| $FS | $(printf '%.3f s' "$dw") ($(spread "$W/${L}_delta.wall")) | $(printf '%.3f s' "$fw") ($(spread "$W/${L}_full.wall")) |" \
			"$r | ≤ $want | $(meets "$r" "$want") | $(printf '%.3f s' "$ww") | $(ratio "$dw" "$ww") |"
	done
	echo
	echo "- tmpfs: $OUT_DESC."
	for fs in ${scratch_list/tmpfs/}; do echo "- $fs: ${FS_DESC[$fs]:-not run}."; done
} >"$out"
cat "$out"
