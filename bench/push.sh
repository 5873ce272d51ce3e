#!/usr/bin/env bash
# bench/push.sh - stager push and pull against scp -r and rsync -az, over
# one real sshd on localhost (Debian's openssh-server, started here with
# its own host key, config and port, key authentication).  `make bench`
# runs it after bench/run.sh; it also runs alone:
#
#   B=build bash bench/push.sh [--quick] [--reps N] [--files N]
#
# Dataset: bench/gendata's image folder (20,000 incompressible files in 100
# folders, about 256 MiB).  Phases, each tool in each repetition:
#   first push    a local directory to a new remote directory
#   re-push, nothing changed
#                 the same again at once (push_same)
#   re-push       the same again after 1% of the local files (every 100th
#                 in name order) were rewritten (changed)
#   first pull    a remote copy of the dataset (made untimed, beside the
#                 pushes) to a new local directory
#   re-pull, nothing changed
#                 the same again at once (pull_same)
#   re-pull       the same again into that local copy after 1% of the remote
#                 files were rewritten; stager pull replaces its own earlier
#                 pull atomically, rsync updates it in place
#   one big file  a directory holding one incompressible file of BIG_SIZE
#                 (default 500M) pushed to a new remote directory (scp
#                 copies the file itself): the link's speed, where
#                 compression cannot pay
# scp has no delta: its second runs copy everything again, as a user would.
# Figures: wall time; bytes on the wire as ssh itself counts them
# ("Transferred: sent N, received M bytes", the encrypted traffic both ways,
# LogLevel VERBOSE), summed over the ssh connections the tool opened; peak
# RSS of the local side (ru_maxrss from wait4 via bench/runstat: the largest
# single process among the tool and the children it waited for, ssh
# included).  Time and bytes are medians over the repetitions, peak RSS the
# largest; tools in a rotating order.  Every copy is checked against its
# source (sha256sum, untimed).  A run that fails (or whose copy differs)
# is left out of the figures and listed at the end of the results; the
# script goes on, and exits 1.  Results to bench/results-push.md (and
# printed).
# --quick: a 200-file dataset and 1 repetition, results only printed (it
# proves the harness works, it measures nothing); --reps and --files given
# after it override it.  PUSH_TOOLS (default "stager scp rsync") runs a
# subset.  Needs B/stager, B/gendata, B/runstat (make all B/gendata
# B/runstat) and /usr/sbin/sshd (run as root: sshd needs /run/sshd).
# PUSH_PHASES (default "push_first push_same push_changed pull_first
# pull_same pull_changed push_big") runs a subset.  stager's indexes (the
# sender's, on both ends) are kept under the run's directory
# (XDG_CACHE_HOME), as a user's would be under ~/.cache.
set -euo pipefail

QUICK=0
REPS=3
FILES=20000
while (($#)); do
	case $1 in
	--quick) QUICK=1 REPS=1 FILES=200 BIG_SIZE=${BIG_SIZE:-20M} ;;
	--reps) REPS=$2; shift ;;
	--files) FILES=$2; shift ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "push.sh: unknown argument '$1'" >&2; exit 1 ;;
	esac
	shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
[[ $B == /* ]] || B=$ROOT/$B
B=$(cd "$B" && pwd)
STAGER=$B/stager GENDATA=$B/gendata RUNSTAT=$B/runstat
for x in "$STAGER" "$GENDATA" "$RUNSTAT" /usr/sbin/sshd; do
	[[ -x $x ]] || { echo "push.sh: $x missing (make all $B/gendata $B/runstat; openssh-server)" >&2; exit 1; }
done
HAVE_RSYNC=0
command -v rsync >/dev/null && HAVE_RSYNC=1
W=$(mktemp -d "${TMPDIR:-/tmp}/stager-bench-push.XXXXXX")
SSHD_PID=
cleanup() {
	[[ -n $SSHD_PID ]] && kill "$SSHD_PID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
log() { echo "push.sh: $*" >&2; }

# ---- the sshd ------------------------------------------------------------------
ssh-keygen -q -t ed25519 -N '' -f "$W/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$W/client_key"
cp "$W/client_key.pub" "$W/authorized_keys"
mkdir -p /run/sshd
for _ in 1 2 3 4 5; do
	PORT=$((20000 + RANDOM % 30000))
	cat >"$W/sshd_config" <<-EOF
		Port $PORT
		ListenAddress 127.0.0.1
		HostKey $W/host_key
		PidFile $W/sshd.pid
		AuthorizedKeysFile $W/authorized_keys
		StrictModes no
		UsePAM no
		PermitRootLogin prohibit-password
		PasswordAuthentication no
		Subsystem sftp /usr/lib/openssh/sftp-server
		LogLevel ERROR
	EOF
	/usr/sbin/sshd -D -f "$W/sshd_config" -E "$W/sshd.log" &
	SSHD_PID=$!
	# a transport that records ssh's own byte counts
	printf '%s\n' '#!/bin/bash' \
		"exec ssh -p $PORT -i $W/client_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=VERBOSE \"\$@\" 2> >(grep -E '^Transferred:' >>\"\$WIRE_LOG\")" \
		>"$W/ssh"
	chmod +x "$W/ssh"
	ok=0
	for _ in $(seq 1 50); do
		if WIRE_LOG=/dev/null "$W/ssh" 127.0.0.1 true 2>/dev/null; then ok=1; break; fi
		kill -0 "$SSHD_PID" 2>/dev/null || break
		sleep 0.1
	done
	((ok)) && break
	kill "$SSHD_PID" 2>/dev/null || true
	SSHD_PID=
done
[[ -n $SSHD_PID ]] || { cat "$W/sshd.log" >&2; echo "push.sh: cannot start sshd" >&2; exit 1; }

# ---- the runs --------------------------------------------------------------------
SRC=$W/src       # the local dataset that is pushed
REMOTE=$W/remote # the remote dataset that is pulled
"$GENDATA" images "$SRC" --files "$FILES" --classes 100 --seed 1
BIG=$W/big # one incompressible file
mkdir -p "$BIG"
"$GENDATA" file "$BIG/big.bin" --size "${BIG_SIZE:-500M}" --seed 2 >/dev/null
BIG_BYTES=$(stat -c %s "$BIG/big.bin")
NFILES=$(find "$SRC" -type f | wc -l)
NBYTES=$(find "$SRC" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
change() { # DIR: every 100th file rewritten (new content, new mtime)
	local k=0 f
	CHANGED=0
	while IFS= read -r f; do
		if ((k % 100 == 0)); then
			"$GENDATA" file "$f" --size "$(stat -c %s "$f")" --seed $((900 + k)) 2>/dev/null
			touch "$f"
			CHANGED=$((CHANGED + 1))
		fi
		k=$((k + 1))
	done < <(find "$1" -type f | LC_ALL=C sort)
}

# what a phase and a tool are called in the results
phase_desc() {
	case $1 in
	push_first) echo "first push" ;;
	push_same) echo "re-push, nothing changed" ;;
	push_changed) echo "re-push after 1% changed" ;;
	pull_first) echo "first pull" ;;
	pull_same) echo "re-pull, nothing changed" ;;
	pull_changed) echo "re-pull after 1% changed" ;;
	push_big) echo "push of one $((BIG_BYTES >> 20)) MiB file" ;;
	esac
}
tool_desc() { # PHASE TOOL
	case $2 in
	stager) echo "\`stager ${1%%_*}\`" ;;
	scp) if [[ $1 == push_big ]]; then echo "\`scp\`"; else echo "\`scp -r\`"; fi ;;
	rsync) echo "\`rsync -az\`" ;;
	esac
}
# fail LABEL WHY: a failed (or wrong) run, listed at the end of the results
declare -A OK
fail() {
	local p=${1%_*} t=${1##*_}
	echo "- $(tool_desc "$p" "$t"), $(phase_desc "$p"): $2" >>"$W/failures"
	log "$1: $2"
	OK[$1]=0
}

# run LABEL CMD...: CMD under runstat.  On success its wall seconds, peak RSS
# (KiB) and bytes on the wire are appended to $W/LABEL.{wall,rss,wire}; on
# failure it leaves no figures, only a line in $W/failures.
run() {
	local label=$1 rs=$W/runstat.line rc=0 wall rss
	shift
	export WIRE_LOG=$W/wire.log
	: >"$WIRE_LOG"
	: >"$rs"
	sync
	"$RUNSTAT" -o "$rs" -- "$@" >/dev/null 2>"$W/err" || rc=$?
	sleep 0.2 # the last ssh's log line
	if ((rc)); then
		sed "s/^/[$label] /" "$W/err" >&2
		fail "$label" "failed, exit status $rc$(grep -m 1 . "$W/err" | sed 's/^/: /')"
		return 0
	fi
	wall=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$rs")
	rss=$(sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' "$rs")
	[[ -n $wall && -n $rss ]] || { fail "$label" "cannot parse runstat's '$(cat "$rs")'"; return 0; }
	echo "$wall" >>"$W/$label.wall"
	echo "$rss" >>"$W/$label.rss"
	awk '{ gsub(/,/, ""); s += $3 + $5 } END { printf "%.0f\n", s }' "$WIRE_LOG" >>"$W/$label.wire"
	OK[$label]=1
}
# check LABEL REF COPY: the copy is REF (content and names); if not, the
# run's figures are dropped and it counts as failed
check() {
	local label=$1 k
	((${OK[$label]:-0})) || return 0
	if ! diff <(cd "$2" && find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2) \
		<(cd "$3" && find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2) >/dev/null; then
		for k in wall rss wire; do sed -i '$d' "$W/$label.$k"; done
		fail "$label" "the copy differs from its source"
	fi
}

# the far end's stager keeps its index under the run's directory too
export XDG_CACHE_HOME=$W/xdg
printf '#!/bin/sh\nXDG_CACHE_HOME=%s/xdg-remote exec %s "$@"\n' "$W" "$STAGER" >"$W/stager-remote"
chmod +x "$W/stager-remote"
STAGER_OPTS=(-q --progress=none --rsh "$W/ssh" --remote-stager "$W/stager-remote")
tool_stager() { # PHASE REP
	case $1 in
	push_big) run "$1_stager" "$STAGER" push "${STAGER_OPTS[@]}" "$BIG" "127.0.0.1:$W/dstbig/stager-$2" ;;
	push_*) run "$1_stager" "$STAGER" push "${STAGER_OPTS[@]}" "$SRC" "127.0.0.1:$W/dst/stager-$2" ;;
	pull_*) run "$1_stager" "$STAGER" pull "${STAGER_OPTS[@]}" "127.0.0.1:$REMOTE" "$W/pulled/stager-$2" ;;
	esac
}
tool_scp() {
	# scp -r into an existing directory nests: copy the contents
	case $1 in
	push_first) mkdir -p "$W/dst/scp-$2" ;;
	pull_first) mkdir -p "$W/pulled/scp-$2" ;;
	push_big) mkdir -p "$W/dstbig/scp-$2" ;;
	esac
	case $1 in
	push_big) run "$1_scp" scp -S "$W/ssh" "$BIG/big.bin" "127.0.0.1:$W/dstbig/scp-$2/" ;;
	push_*) run "$1_scp" scp -r -S "$W/ssh" "$SRC/." "127.0.0.1:$W/dst/scp-$2/" ;;
	pull_*) run "$1_scp" scp -r -S "$W/ssh" "127.0.0.1:$REMOTE/." "$W/pulled/scp-$2/" ;;
	esac
}
tool_rsync() {
	case $1 in
	push_big) run "$1_rsync" rsync -az -e "$W/ssh" "$BIG/" "127.0.0.1:$W/dstbig/rsync-$2/" ;;
	push_*) run "$1_rsync" rsync -az --delete -e "$W/ssh" "$SRC/" "127.0.0.1:$W/dst/rsync-$2/" ;;
	pull_*) run "$1_rsync" rsync -az --delete -e "$W/ssh" "127.0.0.1:$REMOTE/" "$W/pulled/rsync-$2/" ;;
	esac
}
TOOLS=(stager scp)
((HAVE_RSYNC)) && TOOLS+=(rsync)
# PUSH_TOOLS="stager rsync": a subset
[[ -n ${PUSH_TOOLS:-} ]] && read -r -a TOOLS <<<"$PUSH_TOOLS"
PHASES=(push_first push_same push_changed pull_first pull_same pull_changed push_big)
[[ -n ${PUSH_PHASES:-} ]] && read -r -a PHASES <<<"$PUSH_PHASES"
log "dataset: $NFILES files, $NBYTES bytes; sshd on port $PORT; $REPS repetitions"
orig=$W/orig
cp -a "$SRC" "$orig"
for ((i = 1; i <= REPS; i++)); do
	rm -rf "$SRC" "$REMOTE"
	cp -a "$orig" "$SRC"
	cp -a "$orig" "$REMOTE"
	mkdir -p "$W/dst" "$W/pulled" "$W/dstbig"
	n=${#TOOLS[@]}
	for phase in "${PHASES[@]}"; do
		case $phase in
		push_big) ref=$BIG copies=$W/dstbig ;;
		push_*) ref=$SRC copies=$W/dst ;;
		pull_*) ref=$REMOTE copies=$W/pulled ;;
		esac
		[[ $phase == *_changed ]] && change "$ref"
		for ((k = 0; k < n; k++)); do
			t=${TOOLS[$(((k + i) % n))]}
			"tool_$t" "$phase" "$i"
		done
		for t in "${TOOLS[@]}"; do
			check "${phase}_$t" "$ref" "$copies/$t-$i"
		done
		log "rep $i/$REPS $phase done"
	done
	rm -rf "$W/dst" "$W/pulled" "$W/dstbig"
done

# ---- report ---------------------------------------------------------------------
# over a LABEL's runs (file $W/LABEL.KIND, one number a line); NA: none
median() { [[ -s $1 ]] || { echo NA; return; }; sort -g "$1" | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.10g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
maxof() { [[ -s $1 ]] || { echo NA; return; }; sort -g "$1" | tail -n 1; }
secs() { awk -v s="$1" 'BEGIN { if (s == "NA") print "—"; else printf "%.2f s", s }'; }
mib() { awk -v b="$1" 'BEGIN { if (b == "NA") print "—"; else if (b < 1048576) printf "%.1f KiB", b / 1024; else printf "%.1f MiB", b / 1048576 }'; }
kib() { [[ $1 == NA ]] && echo — || mib $(($1 * 1024)); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b <= 0) print "—"; else printf "%.2f×", a / b }'; }
percent() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b <= 0) print "—"; else printf "%.2f%%", 100 * a / b }'; }
if ((QUICK)); then out=$W/results-push.md; else out=$ROOT/bench/results-push.md; fi
{
	echo "# stager push and pull vs scp -r and rsync -az, over ssh to localhost"
	echo
	((QUICK)) && echo "**--quick**: a harness check on tiny data; the figures mean nothing." && echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null)," \
		"$(nproc) CPUs ($(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo))," \
		"$(ssh -V 2>&1), $(rsync --version 2>/dev/null | sed -n '1{s/  */ /g;p}')."
	echo "Dataset: \`gendata images\`, $NFILES incompressible files, $(mib "$NBYTES");" \
		"the change rewrites every 100th file (${CHANGED:-?} files), of the local copy before the re-push," \
		"of the remote one before the re-pull. Time and bytes: medians of $REPS repetition$( ((REPS > 1)) && echo s);" \
		"bytes on the wire as ssh counts them (both directions, encrypted); peak RSS: the local side's" \
		"largest process (the tool or its ssh), the largest over the repetitions." \
		"Both ends' files on $(stat -f -c %T "$W") (TMPDIR=$(dirname "$W"))."
	echo
	echo "| run | tool | time | bytes on the wire | peak RSS | time vs stager | bytes vs stager |"
	echo "|---|---|---|---|---|---|---|"
	for phase in "${PHASES[@]}"; do
		sw=$(median "$W/${phase}_stager.wall") sb=$(median "$W/${phase}_stager.wire")
		for t in "${TOOLS[@]}"; do
			tw=$(median "$W/${phase}_$t.wall") tb=$(median "$W/${phase}_$t.wire")
			echo "| $(phase_desc "$phase") | $(tool_desc "$phase" "$t") | $(secs "$tw") |" \
				"$(mib "$tb") | $(kib "$(maxof "$W/${phase}_$t.rss")") | $(ratio "$tw" "$sw") | $(ratio "$tb" "$sb") |"
		done
	done
	echo
	[[ " ${PHASES[*]} " == *" push_changed "* ]] &&
	echo "stager's re-push after a 1% change sent" \
		"$(percent "$(median "$W/push_changed_stager.wire")" "$(median "$W/push_first_stager.wire")")" \
		"of its first push's bytes, its re-pull" \
		"$(percent "$(median "$W/pull_changed_stager.wire")" "$(median "$W/pull_first_stager.wire")")" \
		"of its first pull's."
	if [[ -s $W/failures ]]; then
		echo
		echo "Failed runs (not in the figures):"
		echo
		cat "$W/failures"
	fi
} >"$out"
cat "$out"
[[ ! -s $W/failures ]] || exit 1
