#!/usr/bin/env bash
# bench/scale.sh - costs that grow as they should (issue 18): stager pack and
# a cold stager stage over a growing number of files and a growing number of
# bytes.  `make bench-scale` runs it.
#
#   B=build bash bench/scale.sh [--quick] [--max-files N] [--max-gib N]
#
# File-count axis: 1,000, 10,000, 100,000 and 1,000,000 small files
# (bench/gendata images --sizes 1K-4K: uniform sizes, incompressible, 1,000
# files a folder).  Size axis: 1, 10 and 50 GiB in files of 1 GiB
# (bench/gendata shards --bits 2: two random bits a byte, which zstd
# compresses to about a third by entropy coding alone, so that the 50 GiB
# source and its pack fit on the disk together).  For each dataset:
#   pack    stager pack on the local disk (the tree just generated, in the
#           page cache as far as it fits): wall time, peak RSS, pack size,
#           and the manifest's size (the trailer's body, decoded, from the
#           pack's 48-byte footer; also compressed, as stored)
#   stage   stager stage of the pack through bench/sharedfs (the emulated
#           NFS of bench/run.sh: 0.5 ms per metadata operation, 1 GiB/s, a
#           1 s attribute cache), cold: the cache emptied with
#           `stager clean --all`, a pause longer than the attribute cache,
#           the counters reset; wall time, peak RSS, metadata operations and
#           bytes read on the shared filesystem.  The stager's scratch root
#           (its cache, where a stage extracts to) is a tmpfs for the
#           file-count axis (root: mounted with size= under the work
#           directory; else the disk) and the disk for the size axis.
#   mount   (file-count axis) stager mount of the same pack through
#           sharedfs, cold, and cat of one of its files: the time to the
#           first file, which must stay under a second at any size
# The size axis's source is removed once packed (before the stage), to keep
# the disk free: the stage is checked against the pack's file count and
# bytes (stager checks every file's XXH3 as it extracts); the file-count
# axis is also compared with diff -r up to 100,000 files.
# Before each size, the free disk is checked: a size that does not fit is
# skipped and the results say so.
#
# Results: bench/results-scale.md (per axis: the figures, per-file or
# per-GiB cost, the log-log slope from the size before, and the check
# peak RSS - manifest <= 64 MiB) and a chart bench/results-scale.png
# (gnuplot, bench/plot-scale.gp); printed too.  One run of each command
# (the 1M-file and 50 GiB points cost minutes; the smaller points are
# noisy in absolute terms, the slopes say how costs grow).
# --quick: 1,000 and 10,000 files, 128 and 512 MiB, in
# bench/work-scale-quick/ (results-scale-quick.md and .png there): proves
# the harness in under a minute, asserts nothing.
# --max-files N, --max-gib N: leave out the larger points (a shorter run;
# the results say what was left out).
#
# Environment: B (build directory, default build), BENCH_DELAY_MS (0.5),
# BENCH_BW (1G), BENCH_ATTR_TIMEOUT (1), KEEP=1 (keep the work directory).
# Needs /dev/fuse and fusermount3; gnuplot is optional (no chart).
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

QUICK=0
MAX_FILES=
MAX_GIB=
num() { [[ $2 =~ ^[0-9]+$ ]] || { echo "scale.sh: $1 wants a number, not '$2'" >&2; exit 1; }; }
while (($#)); do
	case $1 in
	--quick) QUICK=1 ;;
	--max-files) [[ $# -ge 2 ]] || { echo "scale.sh: --max-files needs a value" >&2; exit 1; }
		num --max-files "$2"; MAX_FILES=$2; shift ;;
	--max-files=*) MAX_FILES=${1#*=}; num --max-files "$MAX_FILES" ;;
	--max-gib) [[ $# -ge 2 ]] || { echo "scale.sh: --max-gib needs a value" >&2; exit 1; }
		num --max-gib "$2"; MAX_GIB=$2; shift ;;
	--max-gib=*) MAX_GIB=${1#*=}; num --max-gib "$MAX_GIB" ;;
	-h | --help) usage; exit 0 ;;
	*) echo "scale.sh: unknown argument '$1' (try --help)" >&2; exit 1 ;;
	esac
	shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
cd "$ROOT"
B=${B:-build}
[[ $B == /* ]] || B=$ROOT/$B
STAGER=$B/stager GENDATA=$B/gendata RUNSTAT=$B/runstat SHAREDFS=$B/sharedfs
for x in "$STAGER" "$GENDATA" "$RUNSTAT" "$SHAREDFS"; do
	[[ -x $x ]] || { echo "scale.sh: $x missing (make all $B/gendata $B/runstat $B/sharedfs)" >&2; exit 1; }
done
[[ -e /dev/fuse ]] && command -v fusermount3 >/dev/null ||
	{ echo "scale.sh: needs /dev/fuse and fusermount3 (the emulated shared filesystem)" >&2; exit 1; }
HAVE_GNUPLOT=0
command -v gnuplot >/dev/null && HAVE_GNUPLOT=1
DELAY_MS=${BENCH_DELAY_MS:-0.5}
BW=${BENCH_BW:-1G}
ATTR=${BENCH_ATTR_TIMEOUT:-1}
SETTLE=$(awk -v a="$ATTR" 'BEGIN { print a + 0.1 }')
KEEP=${KEEP:-0}
MiB=1048576 GiB=1073741824

if ((QUICK)); then
	COUNTS=(1000 10000)
	SIZES_MIB=(128 512) FILE_MIB=64
	W=$ROOT/bench/work-scale-quick
	RESULTS=$W/results-scale-quick.md CHART=$W/results-scale-quick.png
	TMPFS_SIZE=1G
else
	COUNTS=(1000 10000 100000 1000000)
	SIZES_MIB=(1024 10240 51200) FILE_MIB=1024
	W=$ROOT/bench/work-scale
	RESULTS=$ROOT/bench/results-scale.md CHART=$ROOT/bench/results-scale.png
	TMPFS_SIZE=10G
fi
LEFT_OUT=()
if [[ -n $MAX_FILES ]]; then
	kept=()
	for n in "${COUNTS[@]}"; do
		if ((n <= MAX_FILES)); then kept+=("$n"); else LEFT_OUT+=("$n files (--max-files $MAX_FILES)"); fi
	done
	COUNTS=("${kept[@]}")
fi
if [[ -n $MAX_GIB ]]; then
	kept=()
	for m in "${SIZES_MIB[@]}"; do
		if ((m <= MAX_GIB * 1024)); then kept+=("$m"); else LEFT_OUT+=("$((m / 1024)) GiB (--max-gib $MAX_GIB)"); fi
	done
	SIZES_MIB=("${kept[@]}")
fi

BACK=$W/back SHARED=$W/shared OUT=$W/out DISK=$W/disk TMP=$W/tmp
log() { echo "scale.sh: $*" >&2; }
cleanup() {
	set +e
	mountpoint -q "$W/mnt" 2>/dev/null && { "$STAGER" umount "$W/mnt" 2>/dev/null || fusermount3 -u -z "$W/mnt"; }
	mountpoint -q "$SHARED" 2>/dev/null && { fusermount3 -u "$SHARED" 2>/dev/null || umount -l "$SHARED"; }
	chmod -R u+w "$OUT" "$DISK" 2>/dev/null
	mountpoint -q "$OUT" 2>/dev/null && umount "$OUT"
	if ((KEEP)); then
		log "kept $W"
	elif ! mountpoint -q "$SHARED" 2>/dev/null && ! mountpoint -q "$OUT" 2>/dev/null; then
		# the quick run keeps its results and chart
		find "$W" -mindepth 1 -maxdepth 1 ! -name 'results-scale-quick.*' -exec rm -rf {} +
	fi
}
if mountpoint -q "$SHARED" 2>/dev/null || mountpoint -q "$OUT" 2>/dev/null; then
	log "$SHARED or $OUT is mounted: another scale.sh running? (fusermount3 -u / umount it)"
	exit 1
fi
rm -rf "$W"
mkdir -p "$BACK" "$SHARED" "$OUT" "$DISK" "$TMP"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

UPTIME_START=$(uptime)
START_S=$(date +%s)
OUT_DESC="the work directory's disk"
if (($(id -u) == 0)) && mount -t tmpfs -o "size=$TMPFS_SIZE" tmpfs "$OUT" 2>/dev/null; then
	OUT_DESC="a tmpfs of $TMPFS_SIZE"
fi

# stager's settings: nothing from this machine's files or environment.  A
# stage pins its entry for its parent process: every stage runs under
# runstat, gone right after, so `stager clean --all` can empty the cache.
bench_clean_env
export STAGER_SITE_CONFIG=/dev/null STAGER_SLOT_DIR=$W/slots XDG_CONFIG_HOME=$W/no-config

"$SHAREDFS" --delay-ms "$DELAY_MS" --bw "$BW" --attr-timeout "$ATTR" "$BACK" "$SHARED"
mountpoint -q "$SHARED" || { log "sharedfs did not mount on $SHARED"; exit 1; }
STATS=$SHARED/.sharedfs-stats
stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$STATS"; }
quiet_fs() {
	local i
	for i in $(seq 1 200); do [[ $(stat_of open_now) == 0 ]] && return; sleep 0.05; done
}
field() { sed -n "s/.*$2=\\([0-9.]*\\).*/\\1/p" "$1" | tail -1; }
free_bytes() { df --output=avail -B1 "$1" | tail -1 | tr -d ' '; }
hb() { awk -v b="$1" 'BEGIN { if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else printf "%.1f KiB", b / 1024 }'; }
count() { printf "%'d" "$1"; }

# failed KEY WHAT: recorded for the results (with stager's message), the
# cache emptied; the run goes on with the next size
failed() {
	log "$1: $2"
	echo "- $1: $2: $(head -n 2 "$TMP/$1.err" 2>/dev/null | tr '\n' ' ')" >>"$TMP/failures"
	"$STAGER" clean --all --quiet >/dev/null 2>&1 || true
	rm -f "$W/dest"
}

# ---- one dataset: pack it, then stage it cold ------------------------------------
# measure KEY SRC SCRATCH: figures to $TMP/KEY.*; the pack is $BACK/KEY.tar.zst.
# RMSRC=1: the source is removed after the pack (before the stage).
measure() {
	local key=$1 src=$2 scratch=$3 pack=$BACK/$1.tar.zst
	log "$key: pack"
	sync
	"$RUNSTAT" -o "$TMP/$key.pack.rs" -- "$STAGER" pack -q --json "$src" -o "$pack" >"$TMP/$key.pack.json" \
		2>"$TMP/$key.err" || { failed "$key" "stager pack failed"; return 1; }
	# the footer: data size, body size (compressed), body size (decoded)
	tail -c 48 "$pack" | od -An -t u8 -w24 -N 24 | awk '{ print $1, $2, $3 }' >"$TMP/$key.footer"
	if ((${RMSRC:-0})); then
		chmod -R u+w "$src"
		rm -rf "$src"
	fi

	export STAGER_SCRATCH_ROOT=$scratch
	mkdir -p "$scratch"
	"$STAGER" clean --all --quiet >/dev/null
	rm -f "$W/dest"
	# as in run.sh: the backing file in memory, as an NFS server's cache
	# would hold it; the cost model is sharedfs's, not this disk's
	cat "$pack" >/dev/null
	sfs_forget "$BACK" "$SHARED"
	sync
	sleep "$SETTLE"
	quiet_fs
	echo reset >"$STATS"
	log "$key: stage"
	"$RUNSTAT" -o "$TMP/$key.stage.rs" -- "$STAGER" stage --json -q "$SHARED/$key.tar.zst" "$W/dest" \
		>"$TMP/$key.stage.json" 2>"$TMP/$key.err" || { failed "$key" "stager stage failed"; return 1; }
	quiet_fs
	cp "$STATS" "$TMP/$key.stats"
	[[ $(json_field "$TMP/$key.stage.json" hit) == false ]] ||
		{ failed "$key" "the stage was not cold (\"hit\" is not false)"; return 1; }
	local pf sf pc sc
	pf=$(json_field "$TMP/$key.pack.json" files) sf=$(json_field "$TMP/$key.stage.json" files)
	pc=$(json_field "$TMP/$key.pack.json" content_size) sc=$(json_field "$TMP/$key.stage.json" content_bytes)
	[[ $pf == "$sf" && $pc == "$sc" ]] ||
		{ failed "$key" "staged $sf files, $sc bytes; the pack holds $pf, $pc"; return 1; }
	echo "$sf files, $sc bytes as in the pack" >"$TMP/$key.check"
	if [[ -d $src ]] && ((sf <= 100000)); then
		diff -r "$src" "$W/dest/" >/dev/null || { failed "$key" "the staged tree differs from the source"; return 1; }
		echo "identical (diff -r)" >"$TMP/$key.check"
	fi
	"$STAGER" clean --all --quiet >/dev/null
	rm -f "$W/dest"
	# the file-count axis: stager mount of the same pack, cold, until a
	# file of it has been read (no index is built: a trailer read)
	if [[ $key == files-* && -d $src ]]; then
		local one
		one=$(cd "$src" && find . -type f -print -quit)
		mkdir -p "$W/mnt"
		sleep "$SETTLE"
		quiet_fs
		"$RUNSTAT" -o "$TMP/$key.mount.rs" -- sh -c '"$1" mount -q "$2" "$3" && cat "$3/$4" >/dev/null' \
			sh "$STAGER" "$SHARED/$key.tar.zst" "$W/mnt" "$one" 2>"$TMP/$key.err" ||
			{ failed "$key" "stager mount failed"; return 1; }
		cmp -s "$W/mnt/$one" "$src/$one" || { failed "$key" "the mount's '$one' differs"; return 1; }
		"$STAGER" umount "$W/mnt" 2>>"$TMP/$key.err" || { failed "$key" "stager umount failed"; return 1; }
	fi
	touch "$TMP/$key.ok"
	log "$key: pack $(field "$TMP/$key.pack.rs" wall) s, stage $(field "$TMP/$key.stage.rs" wall) s," \
		"$(stat_of meta_ops) meta ops"
}

# ---- file-count axis ------------------------------------------------------------------
for n in "${COUNTS[@]}"; do
	key=files-$n
	log "$key: generating $(count "$n") files"
	classes=$(((n + 999) / 1000))
	"$GENDATA" images "$W/$key" --files "$n" --classes "$classes" --sizes 1K-4K --seed 1 2>"$TMP/$key.gen"
	RMSRC=0 measure "$key" "$W/$key" "$OUT/scratch" || true
	echo "$(du -s --apparent-size -B1 "$W/$key" | cut -f1)" >"$TMP/$key.bytes"
	rm -rf "${W:?}/$key" "$BACK/$key.tar.zst"
done

# ---- size axis --------------------------------------------------------------------------
SKIPPED=()
# min_free's default, 5% of the file system (12.6 GiB of this VM's 252 GB
# disk), would refuse the 50 GiB stage beside its pack on an 80 GB disk
export STAGER_MIN_FREE=1G
for m in "${SIZES_MIB[@]}"; do
	key=size-$m
	bytes=$((m * MiB))
	# the source and its pack (a quarter, and some), with 4 GiB to spare;
	# then the pack and the staged copy (the source is removed first)
	need=$((bytes + bytes * 3 / 10 + 4 * GiB))
	have=$(free_bytes "$W")
	if ((have < need)); then
		SKIPPED+=("$(hb "$bytes"): $(hb "$have") free on the disk, $(hb "$need") needed")
		log "$key: skipped, $(hb "$have") free, $(hb "$need") needed"
		continue
	fi
	log "$key: generating $(hb "$bytes")"
	"$GENDATA" shards "$W/$key" --count $((m / FILE_MIB)) --size "${FILE_MIB}M" --bits 2 --seed 1 2>"$TMP/$key.gen"
	echo "$bytes" >"$TMP/$key.bytes"
	RMSRC=1 measure "$key" "$W/$key" "$DISK/scratch" || true
	chmod -R u+w "$W/$key" 2>/dev/null || true
	rm -rf "${W:?}/$key" "$BACK/$key.tar.zst"
done
UPTIME_END=$(uptime)
END_S=$(date +%s)

# ---- report ------------------------------------------------------------------------------
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memtotal=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
fstype=$(df --output=fstype "$W" | tail -1)
stager_v=$("$STAGER" --version 2>&1 | head -1)
zstd_v=$(pkg-config --modversion libzstd 2>/dev/null || echo '?')
archive_v=$(pkg-config --modversion libarchive 2>/dev/null || echo '?')
gnuplot_v=$(gnuplot --version 2>/dev/null || echo 'not installed')

# row figures of KEY as shell variables
figures() {
	local k=$1
	P_S=$(printf '%.3f' "$(field "$TMP/$k.pack.rs" wall)") P_RSS=$(field "$TMP/$k.pack.rs" maxrss_kib)
	S_S=$(printf '%.3f' "$(field "$TMP/$k.stage.rs" wall)") S_RSS=$(field "$TMP/$k.stage.rs" maxrss_kib)
	PACK_B=$(json_field "$TMP/$k.pack.json" pack_size)
	read -r _ MAN_Z MAN_RAW <"$TMP/$k.footer"
	META=$(awk '$1 == "meta_ops" { print $2 }' "$TMP/$k.stats")
	READ_B=$(awk '$1 == "bytes_read" { print $2 }' "$TMP/$k.stats")
	DATA_B=$(cat "$TMP/$k.bytes")
}
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# within RSS_KIB MANIFEST_BYTES: "yes (x MiB)" when RSS - manifest <= 64 MiB
within() { awk -v r="$1" -v m="$2" 'BEGIN { d = r / 1024 - m / 1048576; printf "%s (%.1f MiB)", (d <= 64 ? "yes" : "**NO**"), d }'; }
slope() { # T1 T0 X1 X0: the log-log slope, or — for the first point
	[[ -z $2 ]] && { echo "—"; return; }
	awk -v a="$1" -v b="$2" -v x="$3" -v y="$4" 'BEGIN { printf "%.2f", log(a / b) / log(x / y) }'
}
: >"$TMP/count.dat"
: >"$TMP/size.dat"
{
	echo "# Costs that grow as they should: stager over 1k to 1M files and 1 to 50 GiB"
	echo
	((QUICK)) && { echo "**--quick**: small data, proves the harness only."; echo; }
	echo "Generated by \`bench/scale.sh$( ((QUICK)) && echo ' --quick')${MAX_FILES:+ --max-files $MAX_FILES}${MAX_GIB:+ --max-gib $MAX_GIB}\`" \
		"on $(date -u '+%Y-%m-%d %H:%M UTC'), stager commit \`$commit\`, in $(((END_S - START_S) / 60)) min $(((END_S - START_S) % 60)) s." \
		"One run of each command. *pack*: \`stager pack\` on the local disk; *stage*: \`stager stage\` of the pack," \
		"cold, through the emulated NFS (\`bench/sharedfs\`, ${DELAY_MS} ms per metadata operation, $BW/s," \
		"${ATTR} s attribute cache). *RSS*: peak resident set. *manifest*: the pack's trailer body decoded" \
		"(frame table, manifest, names: what a reader holds), from the footer; stored compressed in the pack." \
		"*slope*: log(t₁/t₀)/log(x₁/x₀) from the size before: 1 is linear, below 1 a fixed cost still shows, above 1 super-linear." \
		"*RSS − manifest ≤ 64 MiB*: the issue's bound, for stage and for pack."
	echo
	echo "## Number of files (1 to 4 KiB each, 1,000 a folder; stage onto $OUT_DESC)"
	echo
	echo "| files | data | pack | pack time | µs/file | slope | pack RSS | manifest (stored) | pack RSS − manifest ≤ 64 MiB | stage time | µs/file | slope | stage RSS | stage RSS − manifest ≤ 64 MiB | meta ops | read from shared FS | mount + first file (< 1 s) | check |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	p0= s0= x0=
	for n in "${COUNTS[@]}"; do
		[[ -e $TMP/files-$n.ok ]] || continue
		figures "files-$n"
		echo "| $(count "$n") | $(hb "$DATA_B") | $(hb "$PACK_B") | ${P_S} s |" \
			"$(awk -v t="$P_S" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / n }') | $(slope "$P_S" "$p0" "$n" "$x0") |" \
			"$(mib "$P_RSS") MiB | $(hb "$MAN_RAW") ($(hb "$MAN_Z")) | $(within "$P_RSS" "$MAN_RAW") |" \
			"${S_S} s | $(awk -v t="$S_S" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / n }') | $(slope "$S_S" "$s0" "$n" "$x0") |" \
			"$(mib "$S_RSS") MiB | $(within "$S_RSS" "$MAN_RAW") | $META | $(hb "$READ_B") |" \
			"$(awk -v t="$(field "$TMP/files-$n.mount.rs" wall)" 'BEGIN { if (t == "") print "—"; else printf "%.3f s%s", t, (t < 1 ? "" : " **over**") }') |" \
			"$(cat "$TMP/files-$n.check") |"
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$P_S" "$S_S" "$(mib "$P_RSS")" "$(mib "$S_RSS")" \
			"$(awk -v m="$MAN_RAW" 'BEGIN { printf "%.3f", m / 1048576 }')" "$META" >>"$TMP/count.dat"
		p0=$P_S s0=$S_S x0=$n
	done
	echo
	echo "## Size (files of $(hb $((FILE_MIB * MiB))), 2 random bits a byte; stage onto the disk)"
	echo
	echo "| data | files | pack | pack time | s/GiB | slope | pack RSS | manifest (stored) | pack RSS − manifest ≤ 64 MiB | stage time | s/GiB | slope | stage RSS | stage RSS − manifest ≤ 64 MiB | meta ops | read from shared FS | check |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	p0= s0= x0=
	for m in "${SIZES_MIB[@]}"; do
		[[ -e $TMP/size-$m.ok ]] || continue
		figures "size-$m"
		g=$(awk -v m="$m" 'BEGIN { printf "%g", m / 1024 }')
		echo "| $(hb "$DATA_B") | $((m / FILE_MIB)) | $(hb "$PACK_B") | ${P_S} s |" \
			"$(awk -v t="$P_S" -v g="$g" 'BEGIN { printf "%.2f", t / g }') | $(slope "$P_S" "$p0" "$g" "$x0") |" \
			"$(mib "$P_RSS") MiB | $(hb "$MAN_RAW") ($(hb "$MAN_Z")) | $(within "$P_RSS" "$MAN_RAW") |" \
			"${S_S} s | $(awk -v t="$S_S" -v g="$g" 'BEGIN { printf "%.2f", t / g }') | $(slope "$S_S" "$s0" "$g" "$x0") |" \
			"$(mib "$S_RSS") MiB | $(within "$S_RSS" "$MAN_RAW") | $META | $(hb "$READ_B") | $(cat "$TMP/size-$m.check") |"
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$g" "$P_S" "$S_S" "$(mib "$P_RSS")" "$(mib "$S_RSS")" "$META" >>"$TMP/size.dat"
		p0=$P_S s0=$S_S x0=$g
	done
	for s in "${SKIPPED[@]}"; do echo; echo "Skipped: $s."; done
	for s in "${LEFT_OUT[@]}"; do echo; echo "Left out: $s."; done
	if [[ -s $TMP/failures ]]; then
		echo
		echo "**Failed** (no row):"
		echo
		cat "$TMP/failures"
	fi
	echo
	echo "Chart: CHART_NOTE"
	echo
	echo "## Method"
	echo
	echo "- Machine: $(nproc) CPUs ($model), $memtotal RAM, Linux $(uname -r); work directory on $fstype."
	echo "- Load: \`uptime\` at the start: \`$UPTIME_START\`; at the end: \`$UPTIME_END\` (the" \
		"benchmark's own: it keeps both CPUs busy)."
	echo "- Tools: $stager_v (\`$STAGER\`, built \`-O2 -g\`); libzstd $zstd_v; libarchive $archive_v; $gnuplot_v."
	echo "- Datasets (\`bench/gendata\`, seed 1): \`gendata images DIR --files N --classes N/1000 --sizes 1K-4K\`" \
		"(incompressible); \`gendata shards DIR --count G --size ${FILE_MIB}M --bits 2\` (each byte two random" \
		"bits: zstd gets it to 31% by entropy coding, with no repeats to find; so 50 GiB packs to 15.5 GiB" \
		"and the source and its pack fit on an 80 GB disk together). The size axis's source is removed after" \
		"the pack, before the stage (its stage goes to the disk: a tmpfs could not hold 50 GiB)."
	echo "- Commands: \`stager pack -q --json SRC -o BACK/KEY.tar.zst\` (default level 3, every CPU);" \
		"\`stager clean --all --quiet\`, \`cat PACK >/dev/null\` (the backing file in memory, as an NFS" \
		"server's cache would hold it, as in run.sh), \`sync\`, \`sleep $SETTLE\`, \`echo reset > MNT/.sharedfs-stats\`," \
		"then \`stager stage --json -q MNT/KEY.tar.zst DEST\` (its \"hit\" must be false), then the counters of" \
		"\`MNT/.sharedfs-stats\` once no file is open. Both under \`bench/runstat\` (wall time from" \
		"CLOCK_MONOTONIC, peak RSS from wait4). STAGER_SCRATCH_ROOT: $OUT_DESC for the file-count axis," \
		"the disk for the size axis; STAGER_MIN_FREE=1G for the size axis (the default, 5% of the disk, would refuse the 50 GiB" \
		"stage beside its pack); STAGER_SITE_CONFIG=/dev/null; other STAGER_* and SLURM_* unset."
	echo "- Shared filesystem: \`bench/sharedfs --delay-ms $DELAY_MS --bw $BW --attr-timeout $ATTR BACK MNT\`;" \
		"every operation but read, write, flush and release is a metadata operation. Of a stage's" \
		"getattr, about one a second of reading comes from the kernel, not from stager: the FUSE client" \
		"revalidates the open pack's attributes once the ${ATTR} s attribute cache has expired (as an NFS" \
		"client does every acregmin to acregmax seconds); stager itself makes one stat and three fstat of" \
		"the pack (strace of a 4 GiB stage: 4 calls, 12 getattr in 8.2 s). So the count follows the stage's" \
		"duration, not the number of files."
	echo "- The pack reads the tree just generated: in the page cache where it fits (every file-count" \
		"dataset, the smaller sizes); the 50 GiB one partly from the disk (24 GiB of RAM)."
	echo
	echo "## Raw data"
	echo
	echo "Shared-FS counters of each stage:"
	echo
	for k in "${COUNTS[@]/#/files-}" "${SIZES_MIB[@]/#/size-}"; do
		[[ -e $TMP/$k.stats ]] || continue
		echo "    $k: $(grep -v '^open_' "$TMP/$k.stats" | awk '$2 != 0' | tr '\n' ' ' | sed 's/ $//')"
	done
	echo
	echo "stager's own reports (\`--json\`):"
	echo
	for k in "${COUNTS[@]/#/files-}" "${SIZES_MIB[@]/#/size-}"; do
		[[ -e $TMP/$k.stats ]] || continue
		echo "    $k pack: $(sed 's/"pack":"[^"]*",//' "$TMP/$k.pack.json")"
		echo "    $k stage: $(sed 's/"path":"[^"]*",//' "$TMP/$k.stage.json")"
	done
} >"$TMP/results.md"

CHART_NOTE="not drawn: gnuplot is not installed"
if ((HAVE_GNUPLOT)); then
	subtitle="$(nproc) CPUs, $memtotal RAM; stage through bench/sharedfs (${DELAY_MS} ms a metadata op, $BW/s), cold; commit $commit"
	((QUICK)) && subtitle="--quick (proves the harness only): $subtitle"
	if gnuplot -e "countfile='$TMP/count.dat'; sizefile='$TMP/size.dat'; outfile='$TMP/chart.png'; subtitle='$subtitle'" \
		"$ROOT/bench/plot-scale.gp" 2>"$TMP/gnuplot.err"; then
		mv "$TMP/chart.png" "$CHART"
		CHART_NOTE="[$(basename "$CHART")]($(basename "$CHART"))"
	else
		CHART_NOTE="**gnuplot failed**: $(head -n 3 "$TMP/gnuplot.err" | tr '\n' ' ')"
	fi
fi
sed "s|^Chart: CHART_NOTE\$|Chart: $CHART_NOTE|" "$TMP/results.md" >"$RESULTS"
cat "$RESULTS"
log "results written to ${RESULTS#"$ROOT"/}$([[ -f $CHART ]] && echo ", chart to ${CHART#"$ROOT"/}")"
[[ ! -s $TMP/failures ]] || { log "some runs failed: see ${RESULTS#"$ROOT"/}"; exit 1; }
