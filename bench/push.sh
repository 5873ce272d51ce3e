#!/usr/bin/env bash
# bench/push.sh - stager push against scp -r and rsync -az, over one real
# sshd on localhost (Debian's openssh-server, started here with its own
# host key, config and port, key authentication).  `make bench` runs it
# after bench/run.sh; it also runs alone:
#
#   B=build bash bench/push.sh [--reps N] [--files N]
#
# Dataset: bench/gendata's image folder (20,000 incompressible files in 100
# folders, about 256 MiB), pushed from a local directory to a new remote
# directory (first), then again after 1% of the files (every 100th in name
# order) were rewritten (changed).  scp has no delta: its second run copies
# everything again, as a user would.  Figures: wall time, and bytes on the
# wire as ssh itself counts them ("Transferred: sent N, received M bytes",
# the encrypted traffic both ways, LogLevel VERBOSE), summed over the ssh
# connections the tool opened.  Medians over the repetitions, tools in a
# rotating order.  Results to bench/results-push.md (and printed).
# PUSH_TOOLS (default "stager scp rsync") runs a subset.
set -euo pipefail

REPS=3
FILES=20000
while (($#)); do
	case $1 in
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
STAGER=$B/stager GENDATA=$B/gendata
for x in "$STAGER" "$GENDATA" /usr/sbin/sshd; do
	[[ -x $x ]] || { echo "push.sh: $x missing (make all $B/gendata; openssh-server)" >&2; exit 1; }
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
SRC=$W/src
"$GENDATA" images "$SRC" --files "$FILES" --classes 100 --seed 1
NFILES=$(find "$SRC" -type f | wc -l)
NBYTES=$(find "$SRC" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
change() { # every 100th file rewritten (new content, new mtime)
	local k=0 f
	CHANGED=0
	while IFS= read -r f; do
		if ((k % 100 == 0)); then
			"$GENDATA" file "$f" --size "$(stat -c %s "$f")" --seed $((900 + k)) 2>/dev/null
			touch "$f"
			CHANGED=$((CHANGED + 1))
		fi
		k=$((k + 1))
	done < <(find "$SRC" -type f | LC_ALL=C sort)
}

# run LABEL CMD...: wall seconds and wire bytes appended to $W/LABEL.{wall,wire}
run() {
	local label=$1 t0 t1
	shift
	export WIRE_LOG=$W/wire.log
	: >"$WIRE_LOG"
	sync
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; log "$label failed"; exit 1; }
	t1=$(date +%s.%N)
	sleep 0.2 # the last ssh's log line
	echo "$t1 - $t0" | bc -l >>"$W/$label.wall"
	awk '{ gsub(/,/, ""); s += $3 + $5 } END { printf "%.0f\n", s }' "$WIRE_LOG" >>"$W/$label.wire"
}
same() { # the copy is the source (content and names)
	diff <(cd "$SRC" && find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2) \
		<(cd "$1" && find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2) >/dev/null ||
		{ log "$1 differs from the source"; exit 1; }
}

tool_stager() { # PHASE REP
	run "$1_stager" "$STAGER" push -q --progress=none --rsh "$W/ssh" --remote-stager "$STAGER" \
		"$SRC" "127.0.0.1:$W/dst/stager-$2"
}
tool_scp() {
	# scp -r into an existing directory nests: copy the contents
	if [[ $1 == first ]]; then
		mkdir -p "$W/dst/scp-$2"
	fi
	run "$1_scp" scp -r -S "$W/ssh" "$SRC/." "127.0.0.1:$W/dst/scp-$2/"
}
tool_rsync() {
	run "$1_rsync" rsync -az --delete -e "$W/ssh" "$SRC/" "127.0.0.1:$W/dst/rsync-$2/"
}
TOOLS=(stager scp)
((HAVE_RSYNC)) && TOOLS+=(rsync)
# PUSH_TOOLS="stager rsync": a subset
[[ -n ${PUSH_TOOLS:-} ]] && read -r -a TOOLS <<<"$PUSH_TOOLS"
log "dataset: $NFILES files, $NBYTES bytes; sshd on port $PORT; $REPS repetitions"
orig=$W/orig
cp -a "$SRC" "$orig"
for ((i = 1; i <= REPS; i++)); do
	rm -rf "$SRC" && cp -a "$orig" "$SRC"
	mkdir -p "$W/dst"
	n=${#TOOLS[@]}
	for phase in first changed; do
		[[ $phase == changed ]] && change
		for ((k = 0; k < n; k++)); do
			t=${TOOLS[$(((k + i) % n))]}
			"tool_$t" "$phase" "$i"
		done
		[[ -d $W/dst/stager-$i ]] && same "$W/dst/stager-$i"
		[[ -d $W/dst/rsync-$i ]] && same "$W/dst/rsync-$i"
		log "rep $i/$REPS $phase done"
	done
	rm -rf "$W/dst"
done

# ---- report ---------------------------------------------------------------------
median() { sort -g "$1" | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.10g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
out=$ROOT/bench/results-push.md
{
	echo "# stager push vs scp -r and rsync -az, over ssh to localhost"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null)," \
		"$(nproc) CPUs ($(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo))," \
		"$(ssh -V 2>&1), $(rsync --version 2>/dev/null | sed -n '1{s/  */ /g;p}')."
	echo "Dataset: \`gendata images\`, $NFILES incompressible files, $(mib "$NBYTES");" \
		"the change rewrites every 100th file ($CHANGED files). Medians of $REPS repetitions;" \
		"bytes on the wire as ssh counts them (both directions, encrypted)."
	echo
	echo "| run | tool | time | bytes on the wire | time vs stager | bytes vs stager |"
	echo "|---|---|---|---|---|---|"
	for phase in first changed; do
		sw=$(median "$W/${phase}_stager.wall") sb=$(median "$W/${phase}_stager.wire")
		for t in "${TOOLS[@]}"; do
			tw=$(median "$W/${phase}_$t.wall") tb=$(median "$W/${phase}_$t.wire")
			case $t in stager) d="\`stager push\`" ;; scp) d="\`scp -r\`" ;; rsync) d="\`rsync -az\`" ;; esac
			echo "| ${phase/changed/re-push after 1% changed} | $d | $(printf '%.2f s' "$tw") |" \
				"$(mib "$tb") | $(ratio "$tw" "$sw")× | $(ratio "$tb" "$sb")× |"
		done
	done
	fb=$(median "$W/first_stager.wire") cb=$(median "$W/changed_stager.wire")
	echo
	echo "stager's re-push after a 1% change sent $(awk -v a="$cb" -v b="$fb" 'BEGIN { printf "%.2f%%", 100 * a / b }')" \
		"of its first push's bytes."
} >"$out"
cat "$out"
