#!/usr/bin/env bash
# bench/env-scale.sh - an env at scale (issue 38): `stager pack ENV` and
# `stager run --env ENV` on a synthetic venv of 300,000 files / 10 GiB.
# `make bench-env-scale` runs it, and `make soak`:
#
#   B=build bash bench/env-scale.sh [--quick] [--files N] [--gib G]
#
# The env: bench/genenv.py gen (`python3 -m venv --without-pip`, its
# bin/python a link to /usr/bin/python3, out of the env; 2,000 packages
# as pip lays them out: modules and valid __pycache__/*.pyc, dist-info
# with RECORD, console scripts whose shebang names ENV/bin/python, real
# ELF .so files, versioned libraries with their soname links, links to
# directories inside the env, relative and absolute; large libraries as
# torch's, real ELF bytes, that make up the size).  --quick: 30,000 files,
# 1 GiB, 200 packages.  Then, on the local disk (the shared filesystem's
# cost is bench/env.sh's subject; here it is size):
#
#   pack    `tar -I 'zstd -T0 -3' -cf` of ENV, then `stager pack -q ENV`:
#           time, peak RSS (bench/runstat), size; the env read once
#           before, untimed, so that both find it in the page cache
#   cold    `stager --scratch S run --env ENV -- true`, S new and empty (twice)
#           (stage into the node cache + mount); warm: the same again (3
#           times); against `tar -I zstd -xf ENV.tar.zst` into an empty
#           directory (after the served runs, the cache entry removed)
#   served  inside `stager run --env ENV` (warm): `find ENV -type f | wc
#           -l`, `du -s ENV`, `ENV/bin/python -c 'import pkg0000'` (its
#           modules, subpackages and a C extension), a console script;
#           4 passes (the first, then the median of 3), and the same on
#           ENV itself with the serve ended
#   sig     `genenv.py sig ENV` inside `stager run --env ENV` and outside:
#           every entry's path, type, mode, size, mtime and link target,
#           the sha256 of every .so and of 2% of the other files; the two
#           must be equal
#   disk    the env, its pack, the cache entry (du)
#
# Checks (exit status 1 if one fails; the results say which): the served
# env is a FUSE filesystem and ENV outside is not, nothing is left mounted
# on ENV after a run, find's count, du and the imports agree, the
# signatures are equal.  Results to bench/results-env-scale.md (--quick:
# bench/work-env-scale/results-quick.md).  Needs ~3.5× the env's size free
# on the work directory's disk (env, pack, cache entry, the tar
# comparison one at a time); the work directory is removed at the end
# unless KEEP=1.
#
# Environment: B (build directory, default build), BENCH_TIMEOUT (seconds
# a command may take, default 3600), KEEP=1.  Needs /dev/fuse,
# fusermount3, /usr/bin/python3 with its headers, cc, zstd, tar.
set -euo pipefail
# run() and served() set LABEL_S and LABEL_RSS (printf -v); TIMEOUT is lib.sh's
# shellcheck disable=SC2154,SC2034

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

QUICK=0 FILES='' GIB=''
while (($#)); do
	case $1 in
	--quick) QUICK=1 ;;
	--files) [[ $# -ge 2 ]] || { echo "env-scale.sh: --files needs a value" >&2; exit 1; }
		FILES=$2; shift ;;
	--gib) [[ $# -ge 2 ]] || { echo "env-scale.sh: --gib needs a value" >&2; exit 1; }
		GIB=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "env-scale.sh: unknown argument '$1' (try --help)" >&2; exit 1 ;;
	esac
	shift
done
if ((QUICK)); then
	FILES=${FILES:-30000} GIB=${GIB:-1} PACKAGES=200
else
	FILES=${FILES:-300000} GIB=${GIB:-10} PACKAGES=2000
fi
[[ $FILES =~ ^[1-9][0-9]*$ ]] || { echo "env-scale.sh: --files wants a positive integer, not '$FILES'" >&2; exit 1; }
[[ $GIB =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "env-scale.sh: --gib wants a number, not '$GIB'" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
cd "$ROOT"
B=${B:-build}
[[ $B == /* ]] || B=$ROOT/$B
die() {
	echo "env-scale.sh: $*" >&2
	exit 1
}
log() { echo "env-scale.sh: $(date -u +%T) $*" >&2; }
[[ -d $B ]] || die "build directory '$B' not found (run make, or set B=)"
B=$(cd "$B" && pwd)
STAGER=$B/stager RUNSTAT=$B/runstat GENENV=$ROOT/bench/genenv.py
for x in "$STAGER" "$RUNSTAT"; do
	[[ -x $x ]] || die "$x missing: run 'make all $B/runstat' (or make bench-env-scale)"
done
for tool in fusermount3 mountpoint timeout cc tar zstd du find awk; do
	command -v "$tool" >/dev/null || die "'$tool' is needed and not installed"
done
[[ -e /dev/fuse ]] || die "/dev/fuse is missing"
TIMEOUT=${BENCH_TIMEOUT:-3600} # lib.sh's limited
KEEP=${KEEP:-0}

mkdir -p "$ROOT/bench/work-env-scale"
if ((QUICK)); then
	WORK=$(mktemp -d "$ROOT/bench/work-env-scale/quick.XXXXXX")
	RESULTS=$ROOT/bench/work-env-scale/results-quick.md
else
	WORK=$ROOT/bench/work-env-scale/full
	RESULTS=$ROOT/bench/results-env-scale.md
fi
ENV=$WORK/env PACK=$WORK/env.tar.zst SCR=$WORK/scratch TMP=$WORK/tmp
X=$WORK/x # tar's comparison

unmount_env() {
	local i
	for ((i = 0; i < 3; i++)); do
		mountpoint -q "$ENV" 2>/dev/null || return 0
		"$STAGER" --scratch "$SCR" umount -q "$ENV" >/dev/null 2>&1 || umount_fuse "$ENV"
		sleep 0.2
	done
}
rm_work() { # never through a mount
	mountpoint -q "$ENV" 2>/dev/null && die "refusing to remove $*: $ENV is still mounted"
	rm -rf "$@"
}
mkdir -p "$WORK"
unmount_env # an interrupted run's
rm_work "$ENV" "$PACK" "$SCR" "$TMP" "$X" "$WORK/ref.tar.zst"
mkdir -p "$TMP" "$SCR"

# the space: the env, its pack and the cache entry at once (tar's pack and
# extraction come one at a time, when the cache entry or nothing else is)
need_kib=$(awk -v g="$GIB" 'BEGIN { printf "%d", g * 3.5 * 1048576 + 1048576 }')
free_kib=$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')
((free_kib > need_kib)) || die "not enough space on $(df -P "$WORK" | awk 'NR == 2 { print $6 }'): need $((need_kib / 1048576)) GiB, $((free_kib / 1048576)) GiB free"

CUR_PGID=
cleanup() {
	local rc=$?
	if [[ -n ${CUR_PGID:-} ]]; then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	unmount_env
	if mountpoint -q "$ENV" 2>/dev/null; then
		log "WARNING: could not unmount $ENV: nothing removed"
		exit "$rc"
	fi
	if [[ $KEEP == 1 ]]; then
		log "KEEP=1: $WORK kept"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_clean_env
export STAGER_SITE_CONFIG=/dev/null XDG_CONFIG_HOME=$WORK/no-config
LOAD_START=$(uptime | sed 's/.*load average: *//')
T_START=$(date +%s)
: >"$TMP/failures"

fail() { # a check that failed
	echo "- $*" >>"$TMP/failures"
	log "FAILED: $*"
}
# run LABEL CMD...: CMD under timeout and runstat, its stdout to
# TMP/LABEL.out; LABEL_S and LABEL_RSS (KiB) set; a failure recorded
run() {
	local label=$1 rs=$TMP/$1.rs
	shift
	: >"$rs"
	limited "$RUNSTAT" -o "$rs" -- "$@" >"$TMP/$label.out" 2>"$TMP/$label.err"
	if ((LIMIT_RC)); then
		fail "$label: exit status $LIMIT_RC: \`$*\`: $(tail -n 3 "$TMP/$label.err" | tr '\n' ' ')"
	fi
	printf -v "${label}_S" '%s' "$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$rs")"
	printf -v "${label}_RSS" '%s' "$(sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' "$rs")"
}
# served LABEL CMD...: CMD inside `stager run --env ENV` (warm), timed by a
# runstat of its own: LABEL_S is the command's, LABEL_RUN_S the run's
served() {
	local label=$1
	shift
	run "${label}_RUN" "$STAGER" --scratch "$SCR" run --env "$ENV" -- "$RUNSTAT" -o "$TMP/$label.rs" -- "$@"
	mv "$TMP/${label}_RUN.out" "$TMP/$label.out"
	printf -v "${label}_S" '%s' "$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$TMP/$label.rs")"
	if mountpoint -q "$ENV" 2>/dev/null; then
		fail "$label: $ENV still mounted after stager run ended"
		unmount_env
	fi
}
secs() { awk -v s="$1" 'BEGIN { if (s == "") print "—"; else if (s < 0.1) printf "%.1f ms", s * 1000; else if (s < 10) printf "%.2f s", s; else printf "%.1f s", s }'; }
bytes_h() { awk -v b="$1" 'BEGIN { if (b == "") print "—"; else if (b >= 1073741824) printf "%.2f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576; else printf "%.1f KiB", b / 1024 }'; }
kib_h() { bytes_h "$(($1 * 1024))"; }
count() { local c; if c=$(printf "%'d" "$1" 2>/dev/null); then echo "$c"; else echo "$1"; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b <= 0) print "—"; else printf "%.2f×", a / b }'; }
rate() { awk -v b="$1" -v s="$2" 'BEGIN { if (s == "" || s <= 0) print "—"; else printf "%.0f MiB/s", b / s / 1048576 }'; }

# ---- the env ----------------------------------------------------------------------

log "genenv.py gen $ENV --files $FILES --gib $GIB --packages $PACKAGES"
run gen /usr/bin/python3 "$GENENV" gen "$ENV" --files "$FILES" --gib "$GIB" --packages "$PACKAGES"
[[ -z $(cat "$TMP/failures") ]] || die "the env could not be made: $(cat "$TMP/gen.err")"
GEN_LINE=$(tail -n 1 "$TMP/gen.err")
N_FILES=$(find "$ENV" -type f | wc -l)
N_LINKS=$(find "$ENV" -type l | wc -l)
N_DIRS=$(find "$ENV" -type d | wc -l)
N_SO=$(find "$ENV" -type f -name '*.so*' | wc -l)
N_PYC=$(find "$ENV" -type f -name '*.pyc' | wc -l)
N_EXEC=$(find "$ENV" -type f -perm -u+x | wc -l)
ENV_B=$(du -sb "$ENV" | cut -f1)
ENV_KIB=$(du -sk "$ENV" | cut -f1)
BIG=$(find "$ENV" -type f -size +100M -printf '%f %s\n' | sort -k2,2nr | awk '{ printf "%s%s %.0f MiB", (NR > 1 ? ", " : ""), $1, $2 / 1048576 }')
PYLINK=$(readlink -f "$ENV/bin/python")
[[ -L $ENV/bin/python && $PYLINK != "$ENV"/* ]] || fail "env: bin/python is not a link out of the env (it resolves to '$PYLINK')"
PYCHAIN=bin/python
p=$ENV/bin/python
while [[ -L $p ]]; do
	lt=$(readlink "$p")
	PYCHAIN+=" → $lt"
	[[ $lt == /* ]] || lt=$(dirname "$p")/$lt
	p=$lt
done
SCRIPT=$(find "$ENV/bin" -name 'pkg0000-*' | head -n 1)
[[ -n $SCRIPT ]] || die "no console script of pkg0000 in $ENV/bin"
log "made in $(secs "$gen_S"): $N_FILES files, $N_LINKS links, $N_DIRS directories, $(bytes_h "$ENV_B")"

# ---- pack -------------------------------------------------------------------------

warm "$ENV" # both tools find the env in the page cache
log "tar -I 'zstd -T0 -3' -cf (the reference)"
run tar tar -I 'zstd -T0 -3' -cf "$WORK/ref.tar.zst" -C "$WORK" env
TAR_B=$(stat -c %s "$WORK/ref.tar.zst")
rm -f "$WORK/ref.tar.zst"
warm "$ENV"
log "stager pack -q $ENV"
run pack "$STAGER" pack -q "$ENV"
[[ -f $PACK ]] || die "stager pack made no $PACK: $(tail -n 3 "$TMP/pack.err")"
PACK_B=$(stat -c %s "$PACK")
log "pack: $(secs "$pack_S"), $(bytes_h "$PACK_B"); tar: $(secs "$tar_S"), $(bytes_h "$TAR_B")"

# ---- cold and warm ----------------------------------------------------------------

: >"$TMP/cold.all"
for i in 1 2; do
	rm_work "$SCR"
	mkdir -p "$SCR"
	log "cold $i: stager run --env (empty scratch)"
	run cold "$STAGER" --scratch "$SCR" run --env "$ENV" -- true
	echo "$cold_S" >>"$TMP/cold.all"
	if mountpoint -q "$ENV" 2>/dev/null; then
		fail "cold: $ENV still mounted after stager run ended"
		unmount_env
	fi
done
COLD_S=$(median "$TMP/cold.all")
CACHE_KIB=$(du -sk "$SCR/cache" | cut -f1)
CACHE_N=$(find "$SCR/cache" -type f | wc -l)
: >"$TMP/warm.all"
for i in 1 2 3; do
	run warm "$STAGER" --scratch "$SCR" run --env "$ENV" -- true
	echo "$warm_S" >>"$TMP/warm.all"
done
WARM_S=$(median "$TMP/warm.all")
log "cold $(secs "$COLD_S"), warm $(secs "$WARM_S")"

# ---- served against the env itself --------------------------------------------------

served fstype stat -f -c %T "$ENV"
FSTYPE_IN=$(cat "$TMP/fstype.out")
FSTYPE_OUT=$(stat -f -c %T "$ENV")
[[ $FSTYPE_IN == fuse* ]] || fail "served: $ENV is on '$FSTYPE_IN' inside stager run, not FUSE"
[[ $FSTYPE_OUT != fuse* ]] || fail "outside stager run, $ENV is on '$FSTYPE_OUT'"

IMPORT="import pkg0000, sys; print(pkg0000.__file__, pkg0000._ext.__file__, sum(m.startswith('pkg0000') for m in sys.modules))"
MEASURES="find du bytes imp script"
measure() { # SIDE(in|out) PASS: each measure once, served (in) or not
	local how=served
	[[ $1 == out ]] && how=run
	$how "find_$1$2" sh -c 'find "$1" -type f | wc -l' sh "$ENV"
	$how "du_$1$2" sh -c 'du -sk "$1" | cut -f1' sh "$ENV"
	$how "bytes_$1$2" sh -c 'find "$1" -type f -printf "%s\n" | awk "{ s += \$1 } END { printf \"%.0f\\n\", s }"' sh "$ENV"
	$how "imp_$1$2" "$ENV/bin/python" -c "$IMPORT"
	$how "script_$1$2" "$SCRIPT"
	local m t
	for m in $MEASURES; do
		t=${m}_$1$2_S
		echo "${!t}" >>"$TMP/$m.$1.times"
	done
}
PASSES=4
for ((pass = 1; pass <= PASSES; pass++)); do measure in "$pass"; done
log "signature inside stager run --env"
served sig_in /usr/bin/python3 "$GENENV" sig "$ENV" -o "$TMP/sig.served"
for ((pass = 1; pass <= PASSES; pass++)); do measure out "$pass"; done
log "signature of the env itself"
run sig_out /usr/bin/python3 "$GENENV" sig "$ENV" -o "$TMP/sig.env"

declare -A SAME
same() { # KEY WHAT FILE_IN FILE_OUT: the same output served and not
	if ! cmp -s "$3" "$4"; then
		SAME[$1]="**no**"
		fail "$2 differs: served '$(head -c 200 "$3" | tr '\n' ' ')', the env itself '$(head -c 200 "$4" | tr '\n' ' ')'"
	fi
}
for m in $MEASURES; do SAME[$m]=yes; done
for ((pass = 1; pass <= PASSES; pass++)); do
	[[ -s $TMP/find_out$pass.out ]] || fail "find printed nothing"
	same find "find's count" "$TMP/find_in$pass.out" "$TMP/find_out$pass.out"
	same bytes "the files' sizes" "$TMP/bytes_in$pass.out" "$TMP/bytes_out$pass.out"
	same imp "the import" "$TMP/imp_in$pass.out" "$TMP/imp_out$pass.out"
	same script "the console script" "$TMP/script_in$pass.out" "$TMP/script_out$pass.out"
done
# du -sk counts blocks: the served files' are what the mount says
# (st_blocks), not the disk's; reported, not compared
if cmp -s "$TMP/du_in1.out" "$TMP/du_out1.out"; then SAME[du]=yes; else SAME[du]="no (blocks)"; fi
# first: the first pass; then: the median of the others
all() { local v; for v in $(cat "$TMP/$1.all"); do printf '%s, ' "$(secs "$v")"; done | sed 's/, $//'; }
first() { sed -n 1p "$TMP/$1.times"; }
then_() { sed 1d "$TMP/$1.times" >"$TMP/$1.rest"; median "$TMP/$1.rest"; }
FIND_N=$(cat "$TMP/find_out1.out")
((FIND_N == N_FILES)) || fail "find counted $FIND_N files, $N_FILES made"
IMPORTED=$(awk '{ print $3 }' "$TMP/imp_out1.out")
[[ -n $IMPORTED ]] || fail "the import printed nothing"
SIG_N=$(wc -l <"$TMP/sig.env")
SIG_HASHED=$(awk '$2 == "f" && $6 != "-"' "$TMP/sig.env" | wc -l)
SIG_DIFF=0
if [[ -s $TMP/sig.served && -s $TMP/sig.env ]]; then
	SIG_DIFF=$(diff "$TMP/sig.served" "$TMP/sig.env" | grep -c '^[<>]' || true)
	((SIG_DIFF == 0)) || fail "the signatures differ in $SIG_DIFF lines: $(diff "$TMP/sig.served" "$TMP/sig.env" | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
else
	fail "a signature is missing or empty"
fi

# ---- tar -xf, the cache entry gone -------------------------------------------------

rm_work "$SCR"
: >"$TMP/untar.all"
for i in 1 2; do
	mkdir -p "$X"
	log "tar -I zstd -xf the pack ($i)"
	run untar tar -I zstd -xf "$PACK" -C "$X"
	echo "$untar_S" >>"$TMP/untar.all"
	rm -rf "$X"
done
UNTAR_S=$(median "$TMP/untar.all")

# ---- results ----------------------------------------------------------------------

LOAD_END=$(uptime | sed 's/.*load average: *//')
T_RUN=$(($(date +%s) - T_START))
model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memtotal=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
fs=$(df -PT "$WORK" | awk 'NR == 2 { print $2 }')
PACK_KIB=$(du -sk "$PACK" | cut -f1 2>/dev/null || echo 0)
{
	echo "# An env at scale: \`stager pack\` and \`stager run --env\` on $(count "$N_FILES") files, $(bytes_h "$ENV_B")"
	echo
	((QUICK)) && echo "**--quick run: a small env; the figures prove that the harness works.**" && echo
	echo "A synthetic venv (bench/genenv.py, $(count "$PACKAGES") packages): $(count "$N_FILES") files" \
		"($(count "$N_PYC") .pyc, $(count "$N_SO") ELF .so, $(count "$N_EXEC") executables), $(count "$N_LINKS") symlinks" \
		"($PYCHAIN, out of the env), $(count "$N_DIRS") directories; $(bytes_h "$ENV_B"), of which" \
		"the large libraries: $BIG. Made in $(secs "$gen_S"). All on the local disk ($fs)."
	echo
	echo "### Pack"
	echo
	echo "| | time | peak RSS | size | ratio to the env |"
	echo "|---|---|---|---|---|"
	echo "| \`stager pack -q ENV\` | $(secs "$pack_S") ($(rate "$ENV_B" "$pack_S")) | $(kib_h "$pack_RSS") | $(bytes_h "$PACK_B") | $(ratio "$PACK_B" "$ENV_B") |"
	echo "| \`tar -I 'zstd -T0 -3' -cf\` | $(secs "$tar_S") ($(rate "$ENV_B" "$tar_S")) | $(kib_h "$tar_RSS") | $(bytes_h "$TAR_B") | $(ratio "$TAR_B" "$ENV_B") |"
	echo
	echo "stager's pack against tar's: time $(ratio "$pack_S" "$tar_S"), size $(ratio "$PACK_B" "$TAR_B")."
	echo
	echo "### Serve"
	echo
	echo "| | wall time | peak RSS |"
	echo "|---|---|---|"
	echo "| cold: \`stager --scratch S run --env ENV -- true\`, S empty (stage + mount; mean of 2: $(all cold)) | $(secs "$COLD_S") ($(rate "$ENV_B" "$COLD_S")) | $(kib_h "$cold_RSS") |"
	echo "| warm: the same again (median of 3: $(all warm)) | $(secs "$WARM_S") | $(kib_h "$warm_RSS") |"
	echo "| \`tar -I zstd -xf ENV.tar.zst\` into an empty directory (mean of 2: $(all untar)) | $(secs "$UNTAR_S") ($(rate "$ENV_B" "$UNTAR_S")) | $(kib_h "$untar_RSS") |"
	echo
	echo "Cold against tar -xf: $(ratio "$COLD_S" "$UNTAR_S")."
	echo
	echo "### The env served and the env itself"
	echo
	echo "Inside \`stager run --env ENV\` (warm; ENV on \`$FSTYPE_IN\`) and outside, the serve ended (ENV on \`$FSTYPE_OUT\`);" \
		"the command's own time: the first pass / the median of the $((PASSES - 1)) after it."
	echo
	echo "| | served | the env itself | served / itself (after the first) | same output |"
	echo "|---|---|---|---|---|"
	for m in "find:\`find ENV -type f \\| wc -l\`: $(count "$FIND_N")" \
		"du:\`du -sk ENV\`: $(count "$(cat "$TMP/du_in1.out")") KiB served, $(count "$(cat "$TMP/du_out1.out")") KiB itself" \
		"bytes:the files' sizes (\`find -printf %s\`): $(count "$(cat "$TMP/bytes_out1.out")") B" \
		"imp:\`ENV/bin/python -c 'import pkg0000'\`: $IMPORTED modules and a C extension" \
		"script:a console script, \`bin/$(basename "$SCRIPT")\`"; do
		k=${m%%:*}
		echo "| ${m#*:} | $(secs "$(first "$k.in")") / $(secs "$(then_ "$k.in")") | $(secs "$(first "$k.out")") / $(secs "$(then_ "$k.out")") | $(ratio "$(then_ "$k.in")" "$(then_ "$k.out")") | ${SAME[$k]} |"
	done
	echo
	echo "Tree signature (\`genenv.py sig\`: $(count "$SIG_N") entries' path, type, mode, size, mtime and link target;" \
		"sha256 of $(count "$SIG_HASHED") files, every .so and 2% of the rest): served $(secs "$sig_in_S")," \
		"itself $(secs "$sig_out_S"); **$( ((SIG_DIFF == 0)) && [[ -s $TMP/sig.env ]] && echo "identical" || echo "$SIG_DIFF lines differ")**."
	echo
	echo "### Disk"
	echo
	echo "| | size (du) |"
	echo "|---|---|"
	echo "| the env | $(kib_h "$ENV_KIB") |"
	echo "| its pack, ENV.tar.zst (beside it) | $(kib_h "$PACK_KIB") |"
	echo "| the node cache's entry (S/cache, $(count "$CACHE_N") files) | $(kib_h "$CACHE_KIB") |"
	echo
	if [[ -s $TMP/failures ]]; then
		echo "### Failed checks"
		echo
		cat "$TMP/failures"
		echo
	fi
	echo "## Method"
	echo
	echo "- Machine: $(nproc) CPUs ($model), $memtotal RAM, Linux $(uname -r); load average $LOAD_START at" \
		"the start, $LOAD_END at the end (another agent builds and tests on the same machine)."
	echo "- $("$STAGER" --version 2>&1 | sed -n 1p) (commit \`$commit\`); $(tar --version | sed -n 1p); $(zstd --version)."
	echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); \`bash bench/env-scale.sh$( ((QUICK)) && echo " --quick")\`" \
		"(or \`make bench-env-scale\`), $T_RUN s in all."
	echo "- genenv: $GEN_LINE"
	echo "- Page cache: not dropped (a shared machine); the env was read untimed before each pack, so both" \
		"tools read it from memory; the cold run and tar -xf read the pack just written. Times are wall" \
		"times under bench/runstat; peak RSS is runstat's (the largest of the process and the children it waited for)."
} >"$TMP/results.md"
mv "$TMP/results.md" "$RESULTS"
cat "$RESULTS"
log "results written to ${RESULTS#"$ROOT"/}"
if [[ -s $TMP/failures ]]; then
	log "some checks failed: see ${RESULTS#"$ROOT"/}"
	exit 1
fi
