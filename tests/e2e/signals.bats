#!/usr/bin/env bats
# Every long command answers SIGTERM and SIGINT within a second, exits 5,
# and leaves nothing half-made under a final name.

load helpers

setup_file() {
	D=$(mktemp -d "${BATS_TMPDIR:-/tmp}/stager-sig.XXXXXX")
	export D
	"$GENDATA" images "$D/ds" --files 3000 --classes 10 >/dev/null
	"$STAGER" pack -q "$D/ds" -o "$D/ds.tar.zst" >/dev/null
	# one large file, for verify (many small ones take it a tenth of a second)
	mkdir "$D/dsbig"
	"$GENDATA" file "$D/dsbig/f" --size 400M >/dev/null
	"$STAGER" pack -q "$D/dsbig" -o "$D/dsbig.tar.zst" >/dev/null
}

teardown_file() {
	[ -z "${D:-}" ] || rm -rf "$D"
}

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch STAGER_MAX_READERS_PER_NODE=0 STAGER_REMOTE_STAGER=$STAGER
	local_rsh
}

# SIG CMD...: start CMD, catch it at work (stopped once it has a file of
# the dataset open, or when $when says), send SIG and let it go on: it must end with exit 5
# within a second (DESIGN.md; five under the sanitizers, which slow
# everything), timed from the signal, as signal_limit scales it for a
# loaded machine (a CPU-bound step such as a level-19 frame takes longer)
stops() {
	local sig=$1 limit=1
	shift
	[ -z "$SAN_FLAGS" ] || limit=5
	limit=$(signal_limit "$limit")
	env --default-signal=INT "$@" >out 2>err 3>&- &
	local pid=$!
	# (polled without a pause: a short command could end between polls)
	local t_end=$((SECONDS + 20))
	until sh -c "${when:-ls -l /proc/$pid/fd 2>/dev/null | grep -q '$D/ds'}"; do
		[ "$SECONDS" -lt "$t_end" ] || { echo "never caught at work"; return 1; }
	done
	kill -STOP "$pid"
	local t0 t1 rc=0
	kill -"$sig" "$pid"
	t0=$(date +%s.%N)
	kill -CONT "$pid"
	wait_pid "$pid" 30 || rc=$?
	t1=$(date +%s.%N)
	cat err
	echo "exit $rc after $(echo "$t1 - $t0" | bc) s (at most $limit s)"
	[ "$rc" -eq 5 ]
	awk -v a="$t0" -v b="$t1" -v l="$limit" 'BEGIN { exit !(b - a < l) }'
}

@test "pack --level 19 (seconds per frame) stops within a second, no pack left" {
	stops TERM "$STAGER" pack "$D/ds" -o p.tar.zst --level 19
	[ ! -e p.tar.zst ]
	[ -z "$(ls -A | grep stager-tmp)" ]
	stops INT "$STAGER" pack "$D/ds" -o p.tar.zst --level 19
	[ ! -e p.tar.zst ]
}

@test "stage and unpack stop within a second, no tree left under the name" {
	stops TERM "$STAGER" --bwlimit 4M stage "$D/ds.tar.zst" "$T/st"
	[ ! -e st ]
	stops INT "$STAGER" --bwlimit 4M stage --copy "$D/ds" "$T/st2"
	[ ! -e st2 ]
	stops TERM "$STAGER" unpack --threads 1 "$D/ds.tar.zst" un
	[ ! -e un ]
}

@test "verify stops within a second" {
	stops TERM "$STAGER" verify --threads 1 "$D/dsbig.tar.zst"
}

@test "collect and collect --pack stop within a second, nothing partial under a final name" {
	stops TERM "$STAGER" collect --bwlimit 4M "$D/ds" res
	# an interrupted collect removes its temporary and its marker
	[ -z "$(find res -name '.stager-*')" ]
	run stager collect "$D/ds" res
	[ "$status" -eq 0 ]
	diff -r "$D/ds" res
	stops INT "$STAGER" collect --pack --level 19 "$D/ds" resp
	[ ! -e resp.tar.zst ]
}

@test "push and pull stop within a second; the next one completes" {
	stops TERM "$STAGER" push --bwlimit 4M --rsh ./rsh "$D/ds" "h:$T/pushed"
	[ ! -e pushed ]
	run stager push --rsh ./rsh "$D/ds" "h:$T/pushed"
	[ "$status" -eq 0 ]
	diff -r "$D/ds" pushed
	when="ls -A $T | grep -q stager-partial.pulled"
	stops INT "$STAGER" pull --bwlimit 4M --rsh ./rsh "h:$D/ds" pulled
	[ ! -e pulled ]
}
