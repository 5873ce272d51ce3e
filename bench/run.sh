#!/usr/bin/env bash
# bench/run.sh - stager against tar + zstd.  `make bench` runs it.
#
#   B=build bash bench/run.sh [--quick] [--reps N]
#
# Generates an image-folder dataset (20,000 files, about 256 MiB) and a 1 GiB
# single file under bench/work/, then measures
#   pack    stager pack  vs  tar -I 'zstd -T0 -3' -cf     (target ratio <= 1.0)
#   unpack  stager unpack vs tar -I zstd -xf (same pack)   (target ratio <= 0.8)
#   ls      stager ls on the 1 GiB file's pack: wall time and the read/pread64
#           calls on the pack (strace), against tar -I zstd -tf
#   RSS     peak RSS of stager pack and unpack (and of tar's largest process)
#   stage   stager stage of the images' pack through the per-node cache (a
#           scratch root under bench/work/), cold (cache emptied with
#           `stager clean --all` before each run) against tar -I zstd -xf of
#           the same pack (target ratio <= 0.8) and against rsync -a of the
#           unpacked tree; warm (cache filled, a new DEST) against an rsync -a
#           re-run into a complete copy; and the calls naming the source on a
#           warm stage and on that rsync re-run (strace; target <= 3 for
#           stager).  Without rsync the rsync comparisons are skipped.
# Each repetition runs both tools, alternating which goes first; `sync` runs
# before every timed command; the page cache is warm for both alike.  Reported
# numbers are medians over the repetitions.  Results go to bench/results.md,
# or with --quick (tiny data, 1 rep: proves the harness works, asserts
# nothing about speed) to bench/work-quick/results-quick.md; either is also
# printed.  Datasets are removed at the end unless KEEP=1.
#
# A command that fails or runs longer than BENCH_TIMEOUT seconds (default
# 120) is recorded as failed, the suite goes on, the results say so and the
# exit status is 1.
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

QUICK=0
REPS=
while (($#)); do
	case $1 in
	--quick) QUICK=1 ;;
	--reps) [[ $# -ge 2 ]] || { echo "run.sh: --reps needs a value" >&2; exit 1; }
		REPS=$2; shift ;;
	--reps=*) REPS=${1#--reps=} ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown argument '$1' (try --help)" >&2; exit 1 ;;
	esac
	shift
done
if [[ -z $REPS ]]; then
	if ((QUICK)); then REPS=1; else REPS=5; fi
fi
if ! [[ $REPS =~ ^[1-9][0-9]*$ ]]; then
	echo "run.sh: --reps wants a positive integer, not '$REPS'" >&2
	exit 1
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
B=${B:-build}
KEEP=${KEEP:-0}
TIMEOUT=${BENCH_TIMEOUT:-120}

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
for bin in "$STAGER" "$GENDATA" "$RUNSTAT"; do
	[[ -x $bin ]] || die "$bin missing: run 'make all $B/gendata $B/runstat' (or make bench)"
done
for tool in tar zstd strace sync awk sort find diff timeout; do
	command -v "$tool" >/dev/null || die "'$tool' is needed and not installed"
done
# rsync is optional: without it the stage benchmarks skip their rsync rows
HAVE_RSYNC=0
command -v rsync >/dev/null && HAVE_RSYNC=1

# quick runs (make test) get their own work directory, so they never
# disturb a full run going on beside them
if ((QUICK)); then
	N_IMAGES=500
	BIG_SIZE=20M
	WORK=$ROOT/bench/work-quick
	RESULTS=$WORK/results-quick.md
else
	N_IMAGES=20000
	BIG_SIZE=1G
	WORK=$ROOT/bench/work
	RESULTS=$ROOT/bench/results.md
fi
N_CLASSES=100

DATA=$WORK/data
TMP=$WORK/tmp
mkdir -p "$WORK"
# stager's cache entries are read-only: make them writable so rm can go
chmod -R u+w "$DATA" 2>/dev/null || true
rm -rf "$DATA" "$TMP"
mkdir -p "$DATA" "$TMP"

# Where extraction writes (unpack, stage, tar -x, rsync): node-local scratch
# is an SSD; on this kind of VM disk, creating files right after deleting
# tens of thousands swings 5x from run to run, which measures the disk, not
# the tools.  As root, every tool writes to the same tmpfs instead
# (BENCH_OUT=disk keeps the disk).
OUT=$DATA
OUT_DESC="the work directory's disk"
if [[ ${BENCH_OUT:-tmpfs} == tmpfs && $(id -u) == 0 ]]; then
	mkdir -p "$WORK/out"
	mountpoint -q "$WORK/out" && umount "$WORK/out"
	if mount -t tmpfs -o size=6g tmpfs "$WORK/out" 2>/dev/null; then
		OUT=$WORK/out
		OUT_DESC="a tmpfs (the same for every tool)"
	fi
fi

cleanup() {
	local rc=$?
	if [[ -n ${CUR_PGID:-} ]]; then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	rm -rf "$TMP"
	if [[ $OUT != "$DATA" ]]; then
		chmod -R u+w "$OUT" 2>/dev/null || true
		umount "$OUT" 2>/dev/null || true
	fi
	if [[ $KEEP == 1 ]]; then
		log "KEEP=1: datasets kept in $DATA"
	else
		chmod -R u+w "$DATA" 2>/dev/null || true
		rm -rf "$DATA"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- helpers ------------------------------------------------------------------

# limited CMD...: run CMD under timeout; LIMIT_RC is its status.  timeout
# puts itself in a process group of its own, so after a time-out (or when the
# suite is interrupted) we kill what is left of that group: a command that
# ignores SIGTERM would outlive runstat.
CUR_PGID=
limited() {
	timeout -k 10 "$TIMEOUT" "$@" </dev/null &
	CUR_PGID=$!
	LIMIT_RC=0
	wait "$CUR_PGID" || LIMIT_RC=$?
	if ((LIMIT_RC == 124 || LIMIT_RC == 137)); then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
	fi
	CUR_PGID=
}

# timed LABEL CMD...: sync, run CMD under runstat (and timeout).  On success
# append its wall seconds to $TMP/LABEL.wall and its peak RSS (KiB) to
# $TMP/LABEL.rss and set LAST_OK=1; on failure append the reason to
# $TMP/LABEL.fail and $TMP/failures, and set LAST_OK=0.  stdout goes to
# $TMP/LABEL.out; stderr is shown.  LAST_WALL is a display string.
timed() {
	local label=$1 rs=$TMP/runstat.line rc=0
	shift
	: >"$rs"
	sync
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

median() { [[ -s $1 ]] || { echo NA; return; }; sort -g "$1" | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
maxof() { [[ -s $1 ]] || { echo NA; return; }; sort -g "$1" | tail -n 1; }
nlines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
nfail() { nlines "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "NA" && b != "NA" && b > 0) printf "%.3f", a / b; else print "—" }'; }
# formatters: a number, or NA (no successful run)
secs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s ~ /^FAILED/) print s; else printf "%.3f s", s }'; }
msecs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s ~ /^FAILED/) print s; else printf "%.1f ms", s * 1000 }'; }
mib() { awk -v k="$1" 'BEGIN { if (k == "NA") print "—"; else printf "%.1f MiB", k / 1024 }'; }
# cell FMT LABEL: the formatted median of LABEL's runs, noting failed runs
cell() {
	local fmt=$1 label=$2 f
	f=$(nfail "$TMP/$label.fail")
	if ((f)); then
		echo "**failed in $f of $((f + $(nlines "$TMP/$label.wall"))) runs** ($($fmt "$(median "$TMP/$label.wall")") median of the rest)"
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
bytes_h() { awk -v b="$1" 'BEGIN { if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else if (b >= 1024) printf "%.1f KiB", b / 1024; else printf "%d B", b }'; }
raw() { if [[ -s $1 ]]; then paste -sd' ' "$1"; else echo "(none)"; fi; }
# met RATIO TARGET: yes/no, or "-" in quick mode (which asserts nothing)
# met RATIO TARGET LABEL...: "**no**" as well when any of the LABELs failed
met() {
	local r=$1 t=$2 label
	shift 2
	for label; do
		if (($(nfail "$TMP/$label.fail"))); then echo "**no** (failed runs)"; return; fi
	done
	if ((QUICK)); then echo "(quick)"; return; fi
	awk -v r="$r" -v t="$t" 'BEGIN { if (r == "—") print "—"; else print (r + 0 <= t + 0) ? "yes" : "**no**" }'
}
warm() { find "$@" -type f -exec cat {} + >/dev/null; }

# ---- datasets ---------------------------------------------------------------

IMG=$DATA/images
BIGDIR=$DATA/container
BIG=$BIGDIR/container.img
log "generating $N_IMAGES images and a $BIG_SIZE file under $DATA"
"$GENDATA" images "$IMG" --files "$N_IMAGES" --classes "$N_CLASSES" --seed 1
"$GENDATA" file "$BIG" --size "$BIG_SIZE" --seed 2
IMG_BYTES=$(find "$IMG" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
IMG_FILES=$(find "$IMG" -type f | wc -l)
BIG_BYTES=$(stat -c %s "$BIG")

# ---- pack -----------------------------------------------------------------------

SPACK=$DATA/stager.tar.zst # the last stager pack, used by unpack
TPACK=$DATA/tar.tar.zst
# Each tool's previous output is removed (untimed) right before its own run,
# the same for both: on a VM, writing into freshly freed page-cache memory
# is much cheaper than into memory the host must back anew, and leaving one
# tool's old output in place would favour the other.
pack_stager() {
	rm -f "$SPACK"
	timed pack_stager "$STAGER" pack "$IMG" -o "$SPACK" --quiet --progress=none
}
pack_tar() {
	rm -f "$TPACK"
	timed pack_tar tar -I 'zstd -T0 -3' -cf "$TPACK" -C "$DATA" images
}

warm "$IMG"
for ((i = 1; i <= REPS; i++)); do
	if ((i % 2)); then
		pack_stager; s=$LAST_WALL; pack_tar; t=$LAST_WALL
	else
		pack_tar; t=$LAST_WALL; pack_stager; s=$LAST_WALL
	fi
	log "pack   rep $i/$REPS: stager $(secs "$s"), tar $(secs "$t")"
done
# the last stager pack must be good: unpack uses it
if ! "$STAGER" verify -q "$SPACK" >/dev/null 2>&1; then
	pack_stager
fi
SPACK_BYTES=$(stat -c %s "$SPACK" 2>/dev/null || echo 0)
TPACK_BYTES=$(stat -c %s "$TPACK" 2>/dev/null || echo 0)
rm -f "$TPACK"
[[ -f $SPACK ]] || die "every stager pack failed: nothing to unpack"

# ---- unpack --------------------------------------------------------------------

SOUT=$OUT/out-stager
TOUT=$OUT/out-tar
# stager drops the pack from the page cache after reading it (so that
# staging does not evict a job's working set): put it back before each
# tool's run, so both read it from memory
unpack_stager() {
	warm "$SPACK"
	timed unpack_stager "$STAGER" unpack "$SPACK" "$SOUT" --quiet --progress=none
}
unpack_tar() {
	warm "$SPACK"
	timed unpack_tar tar -I zstd -xf "$SPACK" -C "$TOUT"
}

CHECK="not done: no stager unpack succeeded"
CHECKED=0
warm "$SPACK"
for ((i = 1; i <= REPS; i++)); do
	rm -rf "$SOUT" "$TOUT" "$OUT"/.stager-unpack.*
	mkdir "$TOUT"
	if ((i % 2)); then
		unpack_stager; s=$LAST_WALL; sok=$LAST_OK; unpack_tar; t=$LAST_WALL; tok=$LAST_OK
	else
		unpack_tar; t=$LAST_WALL; tok=$LAST_OK; unpack_stager; s=$LAST_WALL; sok=$LAST_OK
	fi
	log "unpack rep $i/$REPS: stager $(secs "$s"), tar $(secs "$t")"
	if ((!CHECKED && sok && tok)); then
		# untimed, once: both extractions must reproduce the source tree
		CHECKED=1
		CHECK="identical to the source"
		if ! diff -r "$IMG" "$SOUT" >"$TMP/diff" 2>&1; then
			CHECK="**stager unpack differs from the source**"
			log "WARNING: stager unpack output differs from the source:"
			head -n 5 "$TMP/diff" >&2
		elif ! diff -r "$IMG" "$TOUT" >"$TMP/diff" 2>&1; then
			CHECK="**tar's extraction of the stager pack differs from the source**"
			log "WARNING: tar -x of the stager pack differs from the source:"
			head -n 5 "$TMP/diff" >&2
		fi
	fi
done
rm -rf "$SOUT" "$TOUT" "$OUT"/.stager-unpack.*

# ---- ls -------------------------------------------------------------------------

BPACK=$DATA/container.tar.zst
log "packing the $BIG_SIZE file for ls"
timed pack_big "$STAGER" pack "$BIGDIR" -o "$BPACK" --quiet --progress=none
[[ -f $BPACK ]] || die "stager could not pack the $BIG_SIZE file: no ls benchmark"
BPACK_BYTES=$(stat -c %s "$BPACK")
ls_stager() { timed ls_stager "$STAGER" ls "$BPACK"; }
ls_tar() { timed ls_tar tar -I zstd -tf "$BPACK"; }
warm "$BPACK"
for ((i = 1; i <= REPS; i++)); do
	if ((i % 2)); then
		ls_stager; s=$LAST_WALL; ls_tar; t=$LAST_WALL
	else
		ls_tar; t=$LAST_WALL; ls_stager; s=$LAST_WALL
	fi
	log "ls     rep $i/$REPS: stager $(msecs "$s"), tar -t $(msecs "$t")"
done

# read/pread64 calls on the pack's fd: strace -y prints fds as N</path>
BPACK_REAL=$(readlink -f "$BPACK")
limited strace -f -y -e trace=read,pread64 -e signal=none -o "$TMP/strace.ls" \
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
	END { print n + 0, b + 0 }' "$TMP/strace.ls")

# ---- stage ----------------------------------------------------------------------

# stager stage goes through a per-node cache in a scratch root of its own.  A
# stage pins its cache entry for its parent process (or for the Slurm job,
# hence the unset): every stage below runs under runstat, strace or timeout,
# which are gone right after, so `stager clean --all` can empty the cache.
SCRATCH=$OUT/scratch
export STAGER_SCRATCH_ROOT=$SCRATCH STAGER_SITE_CONFIG=/dev/null
unset SLURM_JOB_ID SLURM_TMPDIR
mkdir -p "$SCRATCH"
SDEST=$OUT/stage-cold # stager's DEST: a symbolic link into the cache
WDEST=$OUT/stage-warm # removed before each warm stage, so always a new DEST
TSOUT=$OUT/out-stage-tar
ROUT=$OUT/out-rsync
STAGE_OPTS=(--json --quiet --progress=none)
RSYNC_NOTE="skipped: rsync is not installed"

# stage_field LABEL FIELD: a number or true/false from LABEL's last --json output
stage_field() { sed -n "s/.*\"$2\": *\\([0-9.]*\\|true\\|false\\)[,}].*/\\1/p" "$TMP/$1.out" 2>/dev/null | head -n 1; }
# reject LABEL WHY: the last run of LABEL succeeded but measured the wrong
# thing: its time leaves the medians and it counts as failed
reject() {
	local label=$1 why=$2
	sed -i '$d' "$TMP/$label.wall" "$TMP/$label.rss"
	echo "$why" >>"$TMP/$label.fail"
	echo "- $label: $why" >>"$TMP/failures"
	log "WARNING: $label: $why"
	LAST_OK=0
	LAST_WALL="FAILED ($why)"
}
empty_cache() {
	limited "$STAGER" clean --all --quiet >"$TMP/clean.out" 2>"$TMP/clean.err"
	if ((LIMIT_RC)); then
		log "WARNING: stager clean --all failed (status $LIMIT_RC):"
		head -n 3 "$TMP/clean.err" >&2
	fi
}

# stager drops the pack from the page cache after reading it
# (POSIX_FADV_DONTNEED), so whichever tool ran after it would read the pack
# from the disk: each cold run of stager and tar gets it cached (untimed)
COLD_SRC_BYTES=
stage_cold_stager() {
	empty_cache
	rm -f "$SDEST"
	warm "$SPACK"
	timed stage_cold_stager "$STAGER" stage "$SPACK" "$SDEST" "${STAGE_OPTS[@]}"
	((LAST_OK)) || return 0
	local hit
	hit=$(stage_field stage_cold_stager hit)
	if [[ $hit != false ]]; then
		reject stage_cold_stager "not cold: \"hit\" was '${hit:-missing}' after stager clean --all"
	else
		COLD_SRC_BYTES=$(stage_field stage_cold_stager source_bytes)
	fi
}
stage_cold_tar() {
	rm -rf "$TSOUT"
	mkdir "$TSOUT"
	warm "$SPACK"
	timed stage_cold_tar tar -I zstd -xf "$SPACK" -C "$TSOUT"
}
stage_cold_rsync() {
	rm -rf "$ROUT"
	timed stage_cold_rsync rsync -a "$IMG/" "$ROUT/"
}

STAGE_CHECK="not done: no cold stage succeeded"
STAGE_CHECKED=0
warm "$SPACK" "$IMG"
for ((i = 1; i <= REPS; i++)); do
	s=NA t=NA r=NA sok=0
	if ((i % 2)); then
		stage_cold_stager; s=$LAST_WALL; sok=$LAST_OK
		stage_cold_tar; t=$LAST_WALL
		if ((HAVE_RSYNC)); then stage_cold_rsync; r=$LAST_WALL; fi
	else
		if ((HAVE_RSYNC)); then stage_cold_rsync; r=$LAST_WALL; fi
		stage_cold_tar; t=$LAST_WALL
		stage_cold_stager; s=$LAST_WALL; sok=$LAST_OK
	fi
	log "stage cold rep $i/$REPS: stager $(secs "$s"), tar $(secs "$t"), rsync $(secs "$r")"
	if ((!STAGE_CHECKED && sok)); then
		# untimed, once: the staged tree must be the source tree
		STAGE_CHECKED=1
		STAGE_CHECK="identical to the source"
		if ! diff -r "$IMG" "$SDEST" >"$TMP/diff" 2>&1; then
			STAGE_CHECK="**the staged tree differs from the source**"
			log "WARNING: the tree stager staged differs from the source:"
			head -n 5 "$TMP/diff" >&2
		fi
	fi
done
rm -rf "$TSOUT"

# warm: fill the cache and complete the rsync copy (untimed; each also
# serves as a warm-up run), then time a stage of the same pack to a new
# DEST against an rsync re-run that finds nothing to copy
rm -f "$WDEST"
limited "$STAGER" stage "$SPACK" "$WDEST" "${STAGE_OPTS[@]}" >/dev/null 2>"$TMP/stage-fill.err"
((LIMIT_RC == 0)) || { log "WARNING: filling the cache failed (status $LIMIT_RC):"; head -n 3 "$TMP/stage-fill.err" >&2; }
if ((HAVE_RSYNC)); then
	limited rsync -a "$IMG/" "$ROUT/"
	((LIMIT_RC == 0)) || log "WARNING: completing the rsync copy failed (status $LIMIT_RC)"
fi
stage_warm_stager() {
	rm -f "$WDEST"
	timed stage_warm_stager "$STAGER" stage "$SPACK" "$WDEST" "${STAGE_OPTS[@]}"
	((LAST_OK)) || return 0
	local hit
	hit=$(stage_field stage_warm_stager hit)
	[[ $hit == true ]] || reject stage_warm_stager "not warm: \"hit\" was '${hit:-missing}'"
}
stage_warm_rsync() { timed stage_warm_rsync rsync -a "$IMG/" "$ROUT/"; }
for ((i = 1; i <= REPS; i++)); do
	r=NA
	if ((i % 2)); then
		stage_warm_stager; s=$LAST_WALL
		if ((HAVE_RSYNC)); then stage_warm_rsync; r=$LAST_WALL; fi
	else
		if ((HAVE_RSYNC)); then stage_warm_rsync; r=$LAST_WALL; fi
		stage_warm_stager; s=$LAST_WALL
	fi
	log "stage warm rep $i/$REPS: stager $(msecs "$s"), rsync re-run $(msecs "$r")"
done

# calls naming the source (strace -y prints fds as N</path>, and AT_FDCWD
# with the working directory): for a warm stage the lines that name the pack,
# for the rsync re-run the lines that name the image tree.  A call split in
# <unfinished ...> and <... resumed> counts once; execve (the command line,
# which strace truncates anyway) and signal or exit lines do not count.
# calls_naming TRACE PATH...: prints "N (name count, ...)"
calls_naming() {
	local trace=$1
	shift
	awk -v pats="$(printf '%s\n' "$@")" '
	BEGIN { np = split(pats, p, "\n") }
	function names(s, k) { for (k = 1; k <= np; k++) if (p[k] != "" && index(s, p[k])) return 1; return 0 }
	function count(name) { n++; if (!(name in c)) order[++k] = name; c[name]++ }
	{
		pid = ""; line = $0
		if (match(line, /^[0-9]+ +/)) { pid = substr(line, 1, RLENGTH - 1) + 0; line = substr(line, RLENGTH + 1) }
		if (line ~ /^(\+\+\+|---) /) next
		if (line ~ /^<\.\.\. [A-Za-z0-9_]+ resumed>/) {
			name = substr(line, 6); sub(/ .*/, "", name)
			hit = (pid in pending) ? pending[pid] : 0
			delete pending[pid]
			if (name != "execve" && (hit || names(line))) count(name)
			next
		}
		name = line; sub(/\(.*/, "", name)
		if (name == "execve") next
		if (line ~ /<unfinished \.\.\.>$/) { pending[pid] = names(line); next }
		if (names(line)) count(name)
	}
	END {
		out = ""
		for (shown = 0; shown < 5; shown++) {
			best = ""
			for (i = 1; i <= k; i++) if (!(order[i] in done) && (best == "" || c[order[i]] > c[best])) best = order[i]
			if (best == "") break
			done[best] = 1
			out = out (shown ? ", " : "") best " " c[best]
		}
		if (k > 5) out = out ", ..."
		printf "%d%s\n", n, (n ? " (" out ")" : "")
	}' "$trace"
}

rm -f "$WDEST"
limited strace -f -y -o "$TMP/strace.stage" "$STAGER" stage "$SPACK" "$WDEST" "${STAGE_OPTS[@]}" \
	>"$TMP/strace_stage.out" 2>"$TMP/strace_stage.err"
STAGE_CALLS_N=NA
if ((LIMIT_RC)); then
	STAGE_CALLS="**stager stage failed under strace** (status $LIMIT_RC)"
elif [[ $(stage_field strace_stage hit) != true ]]; then
	STAGE_CALLS="**not a warm stage** (\"hit\": $(stage_field strace_stage hit))"
else
	STAGE_CALLS=$(calls_naming "$TMP/strace.stage" "$SPACK" "$(readlink -f "$SPACK")")
	STAGE_CALLS_N=${STAGE_CALLS%% *}
fi
if ((HAVE_RSYNC)); then
	limited strace -f -y -o "$TMP/strace.rsync" rsync -a "$IMG/" "$ROUT/"
	if ((LIMIT_RC)); then
		RSYNC_CALLS="**rsync failed under strace** (status $LIMIT_RC)"
	else
		RSYNC_CALLS=$(calls_naming "$TMP/strace.rsync" "$IMG" "$(readlink -f "$IMG")")
	fi
else
	RSYNC_CALLS="— ($RSYNC_NOTE)"
fi
if [[ $STAGE_CALLS_N == NA ]]; then
	STAGE_CALLS_MET="**no** (no warm stage under strace)"
elif ((STAGE_CALLS_N <= 3)); then
	STAGE_CALLS_MET=yes
else
	STAGE_CALLS_MET="**no**"
fi
rm -rf "$ROUT" "$SDEST" "$WDEST"

# ---- report -----------------------------------------------------------------------

PS=$(median "$TMP/pack_stager.wall"); PT=$(median "$TMP/pack_tar.wall")
US=$(median "$TMP/unpack_stager.wall"); UT=$(median "$TMP/unpack_tar.wall")
LS=$(median "$TMP/ls_stager.wall");     LT=$(median "$TMP/ls_tar.wall")
PR=$(ratio "$PS" "$PT"); UR=$(ratio "$US" "$UT"); LR=$(ratio "$LS" "$LT")
SCS=$(median "$TMP/stage_cold_stager.wall"); SCT=$(median "$TMP/stage_cold_tar.wall")
SCR=$(median "$TMP/stage_cold_rsync.wall")
SWS=$(median "$TMP/stage_warm_stager.wall"); SWR=$(median "$TMP/stage_warm_rsync.wall")
SCTR=$(ratio "$SCS" "$SCT"); SCRR=$(ratio "$SCS" "$SCR"); SWRR=$(ratio "$SWS" "$SWR")
if ((HAVE_RSYNC)); then
	RSYNC_COLD_CELL="$(cell secs stage_cold_rsync) (\`rsync -a\` of the unpacked tree)"
	RSYNC_WARM_CELL="$(cell msecs stage_warm_rsync) (\`rsync -a\` re-run into a complete copy)"
else
	RSYNC_COLD_CELL="— ($RSYNC_NOTE)"
	RSYNC_WARM_CELL="— ($RSYNC_NOTE)"
fi
if [[ -n $COLD_SRC_BYTES ]]; then
	COLD_READ="$(bytes_h "$COLD_SRC_BYTES") (\"source_bytes\" of the last cold stage)"
else
	COLD_READ="unknown (no cold stage succeeded)"
fi
LS_CALLS="$LS_READS, $(bytes_h "$LS_BYTES") read"
((LS_STRACE_OK)) || LS_CALLS="$LS_CALLS (**stager ls failed under strace**)"

fstype=$(stat -f -c %T "$WORK")
if command -v findmnt >/dev/null && mnt=$(findmnt -n -o FSTYPE -T "$WORK" 2>/dev/null); then
	fstype="$fstype (mounted as $mnt)"
fi
model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memtotal=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
stager_v=$("$STAGER" --version 2>&1 | head -n 1)
stager_bin="sha256 $(sha256sum "$STAGER" | cut -c1-12), built $(date -u -r "$STAGER" '+%Y-%m-%d %H:%M:%S UTC')"
tar_v=$(tar --version | head -n 1)
zstd_v=$(zstd --version | head -n 1 | sed 's/^\** *//; s/ *\**$//; s/, by .*//')
IMG_DESC="$(printf "%'d" "$IMG_FILES" 2>/dev/null || echo "$IMG_FILES") images in $N_CLASSES classes, $(bytes_h "$IMG_BYTES")"

{
	if ((QUICK)); then
		echo "# stager benchmarks (--quick: tiny data, proves the harness only)"
	else
		echo "# stager benchmarks"
	fi
	echo
	echo "Generated by \`bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), stager commit \`$commit\`."
	echo "Medians of $REPS repetition$( ((REPS > 1)) && echo s); ratio = stager / baseline (lower is better)."
	echo
	echo "| benchmark | stager | baseline | ratio | target | met |"
	echo "|---|---|---|---|---|---|"
	echo "| pack: $IMG_DESC | $(cell secs pack_stager) | $(cell secs pack_tar) (\`tar -I 'zstd -T0 -3' -c\`) | $PR | ≤ 1.0 | $(met "$PR" 1.0 pack_stager pack_tar) |"
	echo "| unpack: the same dataset's stager pack | $(cell secs unpack_stager) | $(cell secs unpack_tar) (\`tar -I zstd -x\`) | $UR | ≤ 0.8 | $(met "$UR" 0.8 unpack_stager unpack_tar) |"
	echo "| ls: pack of one $(bytes_h "$BIG_BYTES") file | $(cell msecs ls_stager) | $(cell msecs ls_tar) (\`tar -I zstd -t\`) | $LR | — | — |"
	echo "| ls: read/pread64 calls on the pack | $LS_CALLS | — | — | — | — |"
	echo "| stage, cold (emptied cache): the same stager pack | $(cell secs stage_cold_stager) | $(cell secs stage_cold_tar) (\`tar -I zstd -x\` of the pack) | $SCTR | ≤ 0.8 | $(met "$SCTR" 0.8 stage_cold_stager stage_cold_tar) |"
	echo "| stage, cold: against rsync | $(cell secs stage_cold_stager) | $RSYNC_COLD_CELL | $SCRR | — | — |"
	echo "| stage, warm: same pack, new DEST | $(cell msecs stage_warm_stager) | $RSYNC_WARM_CELL | $SWRR | — | — |"
	echo "| stage, warm: calls naming the source (strace) | $STAGE_CALLS | $RSYNC_CALLS | — | ≤ 3 | $STAGE_CALLS_MET |"
	echo "| peak RSS, pack | $(rsscell pack_stager) | $(rsscell pack_tar) (largest of tar, zstd) | — | — | — |"
	echo "| peak RSS, unpack | $(rsscell unpack_stager) | $(rsscell unpack_tar) (largest of tar, zstd) | — | — | — |"
	echo
	echo "- Machine: $(nproc) CPUs ($model), $memtotal RAM, Linux $(uname -r); bench/work on $fstype."
	echo "- Tools: $stager_v (binary $stager_bin); $tar_v; $zstd_v."
	echo "- Data: $IMG_DESC (lognormal sizes, median 8 KiB, incompressible, seed 1);" \
		"one $(bytes_h "$BIG_BYTES") incompressible file for ls."
	echo "- Packs: stager $(bytes_h "$SPACK_BYTES"), tar + zstd $(bytes_h "$TPACK_BYTES");" \
		"stager pack of the single file $(bytes_h "$BPACK_BYTES")."
	echo "- Extraction (unpack, stage, \`tar -x\`, rsync) writes to $OUT_DESC; packs are written to bench/work."
	echo "- Method: each repetition runs both tools, alternating which goes first; \`sync\` before" \
		"every timed command; the page cache is warm for both tools alike (inputs read" \
		"once beforehand, nothing dropped). Wall time from CLOCK_MONOTONIC and peak RSS" \
		"(largest over the repetitions) from wait4 via \`runstat\`. Output trees are removed" \
		"between repetitions, untimed. Both tools use every CPU for packing (stager's default," \
		"\`zstd -T0\`); zstd decompression in tar's pipeline is single-threaded. stager unpack" \
		"also verifies every file's XXH3 and the pack's SHA-256; tar checks nothing beyond zstd's frame checksums."
	echo "- Check: stager unpack and \`tar -x\` of the stager pack were compared with \`diff -r\`" \
		"against the source (once, in the first repetition where both succeeded): $CHECK."
	echo "- ls syscalls counted with \`strace -f -y -e trace=read,pread64 -e signal=none\`," \
		"calls on the pack's file descriptor only (pack size $(bytes_h "$BPACK_BYTES"))."
	echo "- Stage: \`stager stage PACK DEST\` of the images' stager pack ($(bytes_h "$SPACK_BYTES"))" \
		"with STAGER_SCRATCH_ROOT under bench/work and STAGER_SITE_CONFIG=/dev/null. Cold: the cache" \
		"emptied with \`stager clean --all\` and DEST removed before each run (untimed; each run's" \
		"\`--json\` must say \"hit\": false); the tar and rsync outputs are removed before their runs;" \
		"the pack is read into the page cache before each cold run of stager and of tar, as stager" \
		"drops it from the cache (POSIX_FADV_DONTNEED) after reading it." \
		"Warm: the cache holds the entry, DEST is new (\"hit\": true required), and the rsync re-run goes" \
		"into a complete copy (nothing to transfer). The cold stage read $COLD_READ; staged tree" \
		"compared with \`diff -r\` against the source (once): $STAGE_CHECK."
	echo "- Stage calls counted with \`strace -f -y\` (default string length): lines naming the pack" \
		"(warm stage) or the image tree (rsync re-run, whose cwd is the tree, so AT_FDCWD calls count)," \
		"one per call (unfinished/resumed pairs once), execve and signal/exit lines left out."
	if ((!HAVE_RSYNC)); then
		echo "- rsync is not installed: the rsync comparisons were skipped."
	fi
	echo
	echo "Raw wall times (s), in repetition order:"
	echo
	echo "    pack    stager: $(raw "$TMP/pack_stager.wall")"
	echo "    pack    tar:    $(raw "$TMP/pack_tar.wall")"
	echo "    unpack  stager: $(raw "$TMP/unpack_stager.wall")"
	echo "    unpack  tar:    $(raw "$TMP/unpack_tar.wall")"
	echo "    ls      stager: $(raw "$TMP/ls_stager.wall")"
	echo "    ls      tar -t: $(raw "$TMP/ls_tar.wall")"
	echo "    stage cold stager: $(raw "$TMP/stage_cold_stager.wall")"
	echo "    stage cold tar:    $(raw "$TMP/stage_cold_tar.wall")"
	echo "    stage cold rsync:  $(raw "$TMP/stage_cold_rsync.wall")"
	echo "    stage warm stager: $(raw "$TMP/stage_warm_stager.wall")"
	echo "    stage warm rsync:  $(raw "$TMP/stage_warm_rsync.wall")"
	if [[ -s $TMP/failures ]]; then
		echo
		echo "Failed runs (not in the medians):"
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
