#!/usr/bin/env bash
# bench/env.sh - a job's Python environment off the shared filesystem
# (issue 38): `import torch, numpy` from a venv on the emulated shared
# filesystem, plain and through `stager run --env`.  `make bench-env` runs
# it, and `make bench` (bench/run.sh):
#
#   B=build bash bench/env.sh [--quick] [--reps N]
#
# The env: make_venv ENV --torch (tests/e2e/envs.bash: Debian's torch and
# numpy copied into a venv as pip lays them out, torch's libraries in
# torch/lib), made THROUGH a bench/sharedfs mount (--delay-ms 0.5 --bw 1G
# --attr-timeout 1, counters in .sharedfs-stats), so its paths, shebangs
# and pyvenv.cfg name the shared ones; then `stager pack ENV` beside it.
# A copy made with make_venv on the local disk (bench/work-env) is the
# local reference: the same env at the same path cannot be on both.
# Each process runs `ENV/bin/python -c 'import torch, numpy'` (printing
# where they came from, checked):
#   plain   on the shared filesystem, nothing else
#   cold    `stager --scratch S run --env ENV -- ENV/bin/python -c ...`,
#           S a new, empty scratch (the pack read through the node cache)
#   warm    the same again, S filled, the env served by nothing else
#   local   the local copy (one untimed run first: a node's page cache)
# and a DataLoader over a small dataset, 4 workers started with spawn
# (bench/env_loader.py: each worker imports torch from the env again),
# plain and served (warm).  Figures: the shared filesystem's metadata
# operations and bytes read over the whole run (stager's own included),
# the process's wall time (bench/runstat; inside `stager run`, the
# command's own under a second runstat, and the whole run's), medians and
# min-max of the repetitions.  Each run starts cold on the shared
# filesystem: its page cache of the env's large files dropped, a pause
# longer than the attribute cache, counters reset; the backing files read
# untimed before (an NFS server's cache).  Repetitions rotate the order.
# Targets: warm ≤ 60 shared-FS operations a process; warm import ≤ 1.2×
# local; the first job on a node (cold, whole run) ≤ 2× a plain import.
# Results to bench/results-env.md (and printed); --quick (a venv without
# torch importing numpy, a spawn Pool instead of the DataLoader, one
# repetition, a 0.2 s attribute cache: proves the harness works, asserts
# nothing) to bench/work-env/results-quick.md.
#
# Until stager has `run --env`, the stager runs cannot be made: the plain
# and local runs are measured and reported, the rest says "stager run
# --env not available", and the exit status is 2.  A run that fails is
# recorded, left out of the figures and listed; the exit status is then 1.
#
# Environment: B (build directory, default build), BENCH_TIMEOUT (seconds
# a command may take, default 300), BENCH_DELAY_MS (0.5), BENCH_BW (1G),
# BENCH_ATTR_TIMEOUT (1; 0.2 with --quick), KEEP=1 (keep the envs).
# Needs /dev/fuse, fusermount3, /usr/bin/python3 with numpy (and torch),
# cc and Python's headers (envs.bash's C extension).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_args 5 "$@"
# shellcheck source=tests/e2e/envs.bash
. "$ROOT/tests/e2e/envs.bash"
cd "$ROOT"
B=${B:-build}
[[ $B == /* ]] || B=$ROOT/$B
die() {
	echo "env.sh: $*" >&2
	exit 1
}
log() { echo "env.sh: $*" >&2; }
[[ -d $B ]] || die "build directory '$B' not found (run make, or set B=)"
B=$(cd "$B" && pwd)
STAGER=$B/stager RUNSTAT=$B/runstat SHAREDFS=$B/sharedfs
for x in "$STAGER" "$RUNSTAT" "$SHAREDFS"; do
	[[ -x $x ]] || die "$x missing: run 'make all $B/runstat $B/sharedfs' (or make bench-env)"
done
PY=$ENVS_PY
LOADER=$ROOT/bench/env_loader.py
for tool in fusermount3 mountpoint timeout awk sort cc tar; do
	command -v "$tool" >/dev/null || die "'$tool' is needed and not installed"
done
[[ -e /dev/fuse ]] || die "/dev/fuse is missing"
"$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (python3-numpy)"

TIMEOUT=${BENCH_TIMEOUT:-300}
DELAY_MS=${BENCH_DELAY_MS:-0.5}
BW=${BENCH_BW:-1G}
KEEP=${KEEP:-0}
WORKERS=4
if ((QUICK)); then
	ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-0.2}
	TORCH=0
	mkdir -p "$ROOT/bench/work-env"
	WORK=$(mktemp -d "$ROOT/bench/work-env/quick.XXXXXX")
	RESULTS=$ROOT/bench/work-env/results-quick.md
	SAMPLES=64
else
	ATTR_TIMEOUT=${BENCH_ATTR_TIMEOUT:-1}
	TORCH=1
	"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (python3-torch)"
	WORK=$ROOT/bench/work-env/full
	RESULTS=$ROOT/bench/results-env.md
	SAMPLES=512
fi
if ((TORCH)); then
	MODS="torch, numpy"
	CODE='import torch, numpy; print(torch.__file__, numpy.__file__)'
	LOADER_ARGS=(--workers "$WORKERS" --samples "$SAMPLES")
else
	MODS="numpy"
	CODE='import numpy; print(numpy.__file__)'
	LOADER_ARGS=(--workers "$WORKERS" --samples "$SAMPLES" --no-torch)
fi
SETTLE=$(awk -v a="$ATTR_TIMEOUT" 'BEGIN { print a + 0.1 }')

BACK=$WORK/back     # the shared filesystem's backing directory
SHARED=$WORK/shared # where sharedfs mounts it
SFS_STATS=$SHARED/.sharedfs-stats
ENV=$SHARED/env      # the env, on the shared filesystem
LOCAL=$WORK/local    # its local copy: LOCAL/env
SCR=$WORK/scratch    # the scratch roots of the stager runs
TMP=$WORK/tmp
MS=$ENV # where stager serves the env (lib.sh's stager_umount)

# the env served over its own path, if a run left it (stager umount, else
# fusermount3), then the shared filesystem
unmount_all() {
	local i
	for ((i = 0; i < 3; i++)); do
		mountpoint -q "$ENV" 2>/dev/null || break
		"$STAGER" umount -q "$ENV" >/dev/null 2>&1 || umount_fuse "$ENV"
		sleep 0.2
	done
	umount_fuse "$SHARED"
}
# never delete through a mount
rm_work() { # DIR...
	local d m
	for m in "$ENV" "$SHARED"; do
		mountpoint -q "$m" 2>/dev/null && die "refusing to remove $*: $m is still mounted"
	done
	for d; do
		chmod -R u+w "$d" 2>/dev/null || true
		rm -rf "$d"
	done
}

mkdir -p "$WORK"
unmount_all # leftovers of an interrupted run
rm_work "$BACK" "$LOCAL" "$SCR" "$TMP"
mkdir -p "$BACK" "$LOCAL" "$SCR" "$TMP" "$SHARED"

CUR_PGID=
cleanup() {
	local rc=$?
	if [[ -n ${CUR_PGID:-} ]]; then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	unmount_all
	local m
	for m in "$ENV" "$SHARED"; do
		if mountpoint -q "$m" 2>/dev/null; then
			log "WARNING: could not unmount $m: nothing removed"
			exit "$rc"
		fi
	done
	if ((rc == 1)) && [[ -d $TMP ]]; then
		rm -rf "$WORK/tmp.failed"
		mv "$TMP" "$WORK/tmp.failed" && log "the raw measurements are kept in $WORK/tmp.failed"
		((QUICK)) && KEEP=1
	fi
	rm_work "$TMP" "$SCR" "$WORK/no-config"
	if [[ $KEEP == 1 ]]; then
		log "KEEP=1: the envs kept in $BACK and $LOCAL"
	else
		rm_work "$BACK" "$LOCAL"
		rmdir "$SHARED" 2>/dev/null || true
		((QUICK)) && rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# stager's settings: nothing from this machine's files or environment;
# each stager run gets its own --scratch
bench_clean_env
export STAGER_SITE_CONFIG=/dev/null XDG_CONFIG_HOME=$WORK/no-config

LOAD_START=$(uptime | sed 's/.*load average: *//')
T_START=$(date +%s)

# ---- helpers ----------------------------------------------------------------------

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
drop_last() { # LABEL: the last run's figures leave the medians
	local k
	for k in wall rd meta import; do [[ -s $TMP/$1.$k ]] && sed -i '$d' "$TMP/$1.$k"; done
	return 0
}
# imported_ok LABEL PREFIX: the run printed the modules' files, under PREFIX
imported_ok() {
	((LAST_OK)) || return 0
	local want=$PREFIX_SITE got
	want=${want/#"$ENV"/$2}
	got=$(grep -F '/__init__.py' "$TMP/$1.out" | tail -n 1)
	if ((TORCH)); then
		[[ $got == "$want/torch/__init__.py $want/numpy/__init__.py" ]] && return 0
	else
		[[ $got == "$want/numpy/__init__.py" ]] && return 0
	fi
	drop_last "$1"
	fail "$1" "imported from elsewhere than $want: '$got'"
}
loader_ok() { # LABEL: the DataLoader read every sample, from the env
	((LAST_OK)) || return 0
	local n from
	n=$(sed -n 's/.*"samples": *\([0-9]*\).*/\1/p' "$TMP/$1.out" | tail -n 1)
	from=$(sed -n 's/.*"from": *"\([^"]*\)".*/\1/p' "$TMP/$1.out" | tail -n 1)
	if [[ $n == "$SAMPLES" && $from == "$PREFIX_SITE"/* ]]; then return 0; fi
	drop_last "$1"
	fail "$1" "the loader read ${n:-no} samples (not $SAMPLES) from '${from:-?}'"
}
# inner LABEL: the wall time of the command inside `stager run` (its own
# runstat's line in $TMP/inner.line) to $TMP/LABEL.import
inner() {
	((LAST_OK)) || return 0
	local w
	w=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$TMP/inner.line" | tail -n 1)
	if [[ -z $w ]]; then
		drop_last "$1"
		fail "$1" "no time from the command inside stager run"
		return 0
	fi
	echo "$w" >>"$TMP/$1.import"
}
served_clean() { # LABEL: nothing left mounted on the env after a stager run
	if mountpoint -q "$ENV" 2>/dev/null; then
		fail "$1" "$ENV is still mounted after stager run ended"
		unmount_all_env
	fi
}
unmount_all_env() { "$STAGER" umount -q "$ENV" >/dev/null 2>&1 || umount_fuse "$ENV"; }
before_run() { # what every run on the shared filesystem starts from
	warm "$BACK" # the file server's cache
}

nlines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
raw() { if [[ -s $1 ]]; then paste -sd' ' "$1"; else echo "(none)"; fi; }
bytes_h() { awk -v b="$1" 'BEGIN { if (b == "NA" || b == "") print "—"; else if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else if (b >= 1024) printf "%.1f KiB", b / 1024; else printf "%d B", b }'; }
count() { awk -v n="$1" 'BEGIN { if (n == "NA") print "—"; else { s = sprintf("%.0f", n); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o } }'; }
asecs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else if (s < 0.1) printf "%.1f ms", s * 1000; else if (s < 10) printf "%.2f s", s; else printf "%.1f s", s }'; }
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
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b <= 0) print "NA"; else printf "%.10g\n", a / b }'; }
md() { median "$TMP/$1.$2"; }
xr() { awk -v r="$1" 'BEGIN { if (r == "NA") print "—"; else printf "%.2f×", r }'; }
# verdict MEASURED OP LIMIT: PASS or MISS (quick: asserts nothing; the
# stager runs not made: not measured)
verdict() {
	if ((!STAGER_ENV)); then
		echo "not measured: stager run --env not available"
	elif ((QUICK)); then
		echo "(quick)"
	elif [[ $1 == NA ]]; then
		echo "**MISS** (no figure: its runs failed)"
	else
		awk -v m="$1" -v l="$3" -v op="$2" 'BEGIN { ok = (op == "<=") ? m <= l : m < l; print ok ? "PASS" : "**MISS**" }'
	fi
}
NA_STAGER="not measured: stager run --env not available"
cell() { # LABEL KIND FMT: spread, or why there is none
	case $1 in cold | warm | loader_served) ((STAGER_ENV)) || { echo "$NA_STAGER"; return; } ;; esac
	spread "$@"
}

# ---- the envs ---------------------------------------------------------------------

"$SHAREDFS" --delay-ms "$DELAY_MS" --bw "$BW" --attr-timeout "$ATTR_TIMEOUT" "$BACK" "$SHARED" 2>"$TMP/sharedfs.err" ||
	die "sharedfs could not mount $SHARED: $(head -n 2 "$TMP/sharedfs.err" | tr '\n' ' ')"
mountpoint -q "$SHARED" && [[ -r $SFS_STATS ]] || die "sharedfs did not mount $SHARED"
log "sharedfs: $BACK on $SHARED, ${DELAY_MS} ms per metadata operation, $BW/s, attribute cache ${ATTR_TIMEOUT} s"

venv_args=()
((TORCH)) && venv_args=(--torch)
log "make_venv $ENV ${venv_args[*]} (through sharedfs)"
echo reset >"$SFS_STATS"
t0=$(date +%s.%N)
make_venv "$ENV" "${venv_args[@]}" || die "make_venv $ENV failed"
t1=$(date +%s.%N)
MAKE_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
MAKE_META=$(sfs_stat meta_ops)
log "made in $MAKE_S s, $MAKE_META metadata operations; make_venv $LOCAL/env (local disk)"
make_venv "$LOCAL/env" "${venv_args[@]}" || die "make_venv $LOCAL/env failed"
PREFIX_SITE=$(envs_site "$ENV")
ENV_FILES=$(find "$BACK/env" ! -type d | wc -l)
ENV_DIRS=$(find "$BACK/env" -type d | wc -l)
ENV_B=$(du -sb "$BACK/env" | cut -f1)

STAGER_ENV=0
STAGER_NOTE=
if "$STAGER" run --help 2>&1 | grep -q -- '--env'; then
	STAGER_ENV=1
else
	STAGER_NOTE="stager run --env not available ($("$STAGER" --version 2>&1 | sed -n 1p))"
	log "$STAGER_NOTE: the cold, warm and served runs are not measured"
fi
PACK_S=NA PACK_B=NA
if ((STAGER_ENV)); then
	log "stager pack $ENV (through sharedfs)"
	t0=$(date +%s.%N)
	"$STAGER" pack -q "$ENV" >"$TMP/pack.out" 2>"$TMP/pack.err" || die "stager pack $ENV failed: $(head -n 2 "$TMP/pack.err")"
	t1=$(date +%s.%N)
	PACK_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	PACK_B=$(stat -c %s "$BACK/env.tar.zst")
fi

# ---- the runs ---------------------------------------------------------------------

# one repetition's scratch root: new and empty for the cold run, the
# warm and served runs after it reuse it
SCR_I=
served() { # LABEL CMD...: `stager run --env ENV -- runstat CMD` on the mount
	local label=$1
	shift
	: >"$TMP/inner.line"
	sfs_timed "$label" "$STAGER" --scratch "$SCR_I" run --env "$ENV" -- "$RUNSTAT" -o "$TMP/inner.line" -- "$@"
	served_clean "$label"
}
run_plain() {
	before_run
	sfs_timed plain "$ENV/bin/python" -c "$CODE"
	imported_ok plain "$ENV"
}
run_local() {
	limited "$LOCAL/env/bin/python" -c "$CODE" >/dev/null 2>&1 # the page cache, as a node's
	timed local "$LOCAL/env/bin/python" -c "$CODE"
	imported_ok local "$LOCAL/env"
}
run_served() { # cold then warm, in a new scratch root
	SCR_I=$SCR/rep$1
	rm -rf "$SCR_I"
	mkdir -p "$SCR_I"
	SERVED_OK=1
	if ! served_check "$SCR_I.check"; then
		SERVED_OK=0
		fail cold "not run: the check before it failed"
		fail warm "not run: the check before it failed"
		return 0
	fi
	before_run
	served cold "$ENV/bin/python" -c "$CODE"
	inner cold
	imported_ok cold "$ENV"
	before_run
	served warm "$ENV/bin/python" -c "$CODE"
	inner warm
	imported_ok warm "$ENV"
}
# served_check SCRATCH: inside `stager run --env` (in a scratch root of its
# own, removed after: the timed cold run's stays empty), ENV is another
# filesystem than the shared one, whatever serves it; untimed
served_check() {
	local outside inside scr=$1
	mkdir -p "$scr"
	outside=$(stat -c %d "$ENV")
	limited "$STAGER" --scratch "$scr" run --env "$ENV" -- stat -c %d "$ENV" >"$TMP/check.out" 2>"$TMP/check.err"
	inside=$(tail -n 1 "$TMP/check.out")
	served_clean served_check
	rm -rf "$scr"
	if ((LIMIT_RC)) || [[ -z $inside ]]; then
		fail served_check "stager run --env ENV -- stat ENV: exit status $LIMIT_RC: $(head -n 1 "$TMP/check.err")"
		return 1
	fi
	if [[ $inside == "$outside" ]]; then
		fail served_check "ENV was not served: inside stager run it is on the shared filesystem (device $inside)"
		return 1
	fi
	return 0
}
run_loader_plain() {
	before_run
	sfs_timed loader_plain "$ENV/bin/python" "$LOADER" "${LOADER_ARGS[@]}"
	loader_ok loader_plain
}
run_loader_served() { # warm: after run_served's runs, in their scratch
	if ((!SERVED_OK)); then
		fail loader_served "not run: the check before the served runs failed"
		rm -rf "$SCR_I"
		return 0
	fi
	before_run
	served loader_served "$ENV/bin/python" "$LOADER" "${LOADER_ARGS[@]}"
	inner loader_served
	loader_ok loader_served
	rm -rf "$SCR_I"
}

for ((i = 1; i <= REPS; i++)); do
	for t in $(order "$i" plain local served loader_plain); do
		msg=
		case $t in
		plain) run_plain ;;
		local) run_local ;;
		loader_plain) run_loader_plain ;;
		served)
			if ((STAGER_ENV)); then
				run_served "$i"
				run_loader_served
			fi
			;;
		esac
		for l in plain local cold warm loader_plain loader_served; do
			case $t:$l in plain:plain | local:local | loader_plain:loader_plain | served:cold | served:warm | served:loader_served)
				[[ -s $TMP/$l.wall ]] && msg+=" $l $(asecs "$(tail -n 1 "$TMP/$l.wall")") $(tail -n 1 "$TMP/$l.meta" 2>/dev/null || echo -) ops,"
				;;
			esac
		done
		[[ -n $msg ]] && log "rep $i/$REPS:${msg%,}"
	done
done

# ---- results ----------------------------------------------------------------------

LOAD_END=$(uptime | sed 's/.*load average: *//')
T_RUN=$(($(date +%s) - T_START))
model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memtotal=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
stager_v=$("$STAGER" --version 2>&1 | sed -n 1p)
if ((TORCH)); then
	py_v=$("$PY" -c 'import sys, torch, numpy; print("Python %s, torch %s, numpy %s" % (sys.version.split()[0], torch.__version__, numpy.__version__))')
else
	py_v=$("$PY" -c 'import sys, numpy; print("Python %s, numpy %s" % (sys.version.split()[0], numpy.__version__))')
fi

WARM_OPS=$(md warm meta)
WARM_IMPORT=$(md warm import)
LOCAL_S=$(md local wall)
PLAIN_S=$(md plain wall)
COLD_S=$(md cold wall)
R_IMPORT=$(per "$WARM_IMPORT" "$LOCAL_S")
R_FIRST=$(per "$COLD_S" "$(awk -v p="$PLAIN_S" 'BEGIN { if (p == "NA") print "NA"; else print 2 * p }')")
LOADER_PROCS=$((WORKERS + 1))

{
	echo "# A job's Python environment off the shared filesystem: \`stager run --env\`"
	echo
	if ((QUICK)); then
		echo "**--quick run: a venv without torch (\`import numpy\`), one repetition; the figures prove that the harness works, nothing more.**"
		echo
	fi
	if ((!STAGER_ENV)); then
		echo "**$STAGER_NOTE**: the plain and local runs are measured; the cold, warm and served runs are not, and" \
			"their targets are not assessed."
		echo
	fi
	echo "\`ENV/bin/python -c 'import $MODS'\` from a venv made by \`make_venv ENV$( ((TORCH)) && echo " --torch")\`" \
		"(tests/e2e/envs.bash: Debian's packages copied in as pip lays them out; $(count "$ENV_FILES") files and" \
		"links in $(count "$ENV_DIRS") directories, $(bytes_h "$ENV_B")$( [[ $PACK_B != NA ]] && echo "; its pack $(bytes_h "$PACK_B")"))" \
		"made through bench/sharedfs (an NFS-like cost model: ${DELAY_MS} ms a metadata operation, $BW/s," \
		"attribute cache ${ATTR_TIMEOUT} s) at $ENV, so that its paths are the shared ones. *ops* and *read*:" \
		"the shared filesystem's metadata operations and bytes read during the whole run (stager's own included);" \
		"*process*: the Python process's wall time; *whole run*: \`stager run\`'s, from its start to its end." \
		"Medians (min–max) of $REPS repetitions."
	echo
	echo "| run | ops | read | process | whole run |"
	echo "|---|---|---|---|---|"
	echo "| plain: the env on the shared filesystem | $(cell plain meta count) | $(cell plain rd bytes_h) | $(cell plain wall asecs) | — |"
	for l in cold warm; do
		if [[ $l == cold ]]; then name="cold: \`stager run --env ENV\`, empty cache (the pack read)"; else name="warm: the same again, cache filled"; fi
		if ((!STAGER_ENV)); then
			echo "| $name | $NA_STAGER | | | |"
		else
			echo "| $name | $(cell $l meta count) | $(cell $l rd bytes_h) | $(cell $l import asecs) | $(cell $l wall asecs) |"
		fi
	done
	echo "| local: a copy made by make_venv on the local disk | — | — | $(cell local wall asecs) | — |"
	echo
	echo "### A DataLoader with $WORKERS workers started with spawn"
	echo
	echo "\`ENV/bin/python bench/env_loader.py ${LOADER_ARGS[*]}\`: $( ((TORCH)) && echo "\`torch.utils.data.DataLoader\` over a \`TensorDataset\` of $SAMPLES samples (batches of 16), \`multiprocessing_context=\"spawn\"\`" || echo "a spawn \`multiprocessing.Pool($WORKERS)\` over $SAMPLES items, numpy imported in each worker"), read once; each worker is a new" \
		"\`ENV/bin/python\` that imports $MODS from the env again. Served: warm (after the cold and warm runs above, in" \
		"their scratch). *ops / process*: over the $LOADER_PROCS processes."
	echo
	echo "| run | ops | ops / process | read | process | whole run |"
	echo "|---|---|---|---|---|---|"
	for l in loader_plain loader_served; do
		if [[ $l == loader_plain ]]; then name="plain: the env on the shared filesystem"; else name="served: \`stager run --env ENV\`, warm"; fi
		if [[ $l == loader_served ]] && ((!STAGER_ENV)); then
			echo "| $name | $NA_STAGER | | | | |"
			continue
		fi
		whole="—"
		[[ $l == loader_served ]] && whole=$(cell "$l" wall asecs)
		proc=$(cell "$l" wall asecs)
		[[ $l == loader_served ]] && proc=$(cell "$l" import asecs)
		echo "| $name | $(cell "$l" meta count) | $(count "$(per "$(md "$l" meta)" "$LOADER_PROCS")") | $(cell "$l" rd bytes_h) | $proc | $whole |"
	done
	echo
	echo "### Targets"
	echo
	echo "| target | measured | result |"
	echo "|---|---|---|"
	echo "| a warm run costs the shared filesystem ≤ 60 metadata operations a process | $(count "$WARM_OPS") | $(verdict "$WARM_OPS" "<=" 60) |"
	echo "| warm import ≤ 1.2× the local disk's | $(xr "$R_IMPORT") ($(asecs "$WARM_IMPORT") vs $(asecs "$LOCAL_S")) | $(verdict "$R_IMPORT" "<=" 1.2) |"
	echo "| the first job on a node (cold, whole run: pack read + serve + import) ≤ 2 plain imports | $(xr "$R_FIRST") of two ($(asecs "$COLD_S") vs 2 × $(asecs "$PLAIN_S")) | $(verdict "$R_FIRST" "<=" 1) |"
	echo
	echo "## Method"
	echo
	echo "- Machine: $(nproc) CPUs ($model), $memtotal RAM, Linux $(uname -r); load average $LOAD_START at" \
		"the start, $LOAD_END at the end (another agent builds and tests on the same machine)."
	echo "- Tools: $stager_v (commit \`$commit\`, binary $B/stager); $py_v ($PY)."
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); \`B=${B#"$ROOT"/} bash bench/env.sh$( ((QUICK)) && echo " --quick")$( [[ $REPS != 5 ]] && ! ((QUICK)) && echo " --reps $REPS")\`" \
		"(or \`make bench-env\`), $T_RUN s."
	echo "- The env: \`make_venv $ENV$( ((TORCH)) && echo " --torch")\` through the mount: $MAKE_S s, $(count "$MAKE_META")" \
		"metadata operations$( [[ $PACK_S != NA ]] && echo "; \`stager pack -q ENV\` (ENV.tar.zst beside it, through the mount): $PACK_S s")." \
		"The local copy: \`make_venv $LOCAL/env$( ((TORCH)) && echo " --torch")\` (the work directory's disk)."
	echo "- Each run on the shared filesystem: the backing files read (untimed: the server's cache), the mount's" \
		"page cache of the large files dropped (an open each), \`sync\`, a pause of $SETTLE s (the attribute" \
		"cache forgotten), the counters reset; after it the counters read once no file is open." \
		"Commands under bench/runstat and \`timeout $TIMEOUT\`; inside \`stager --scratch S run --env ENV --\`," \
		"the command under a runstat of its own (*process*). cold: S new and empty; warm and the served" \
		"DataLoader: the same S. local: one untimed run first (a node's page cache). Each repetition runs" \
		"plain, local, served (cold, warm, DataLoader) and the plain DataLoader in a rotated order."
	echo "- Checks: every run printed the files of $MODS under the env it was given (the env's own path for" \
		"plain, cold and warm; the copy's for local), every DataLoader read its $SAMPLES samples from the env," \
		"inside \`stager run --env\` ENV was on another filesystem (device) than the shared one (untimed, once" \
		"a repetition, in a scratch of its own), and nothing was left mounted on ENV after a \`stager run\`."
	echo
	echo "## Raw data"
	echo
	echo "In repetition order (wall and process seconds, bytes read, metadata operations):"
	echo
	for l in plain cold warm local loader_plain loader_served; do
		[[ -s $TMP/$l.wall ]] || continue
		echo "    $l: wall $(raw "$TMP/$l.wall")$( [[ -s $TMP/$l.import ]] && echo "; process $(raw "$TMP/$l.import")")$( [[ -s $TMP/$l.rd ]] && echo "; read $(raw "$TMP/$l.rd"); ops $(raw "$TMP/$l.meta")")"
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
if ((!STAGER_ENV)); then
	log "$STAGER_NOTE: only the plain and local runs were measured"
	exit 2
fi
