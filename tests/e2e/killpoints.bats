#!/usr/bin/env bats
# kill -9 at random moments of stage, collect, push, pull and clean, in
# turn: after each kill, what the operation publishes is whole or absent,
# and the same operation run again completes and is right.
#
# KILL_ROUNDS rounds (default 25, a short form for `make test`; `make
# soak` runs 320, of which over 200 kill midway).  KILL_SEED makes a run
# repeatable.

load helpers

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch STAGER_SLOT_DIR=$T/slots STAGER_REMOTE_STAGER=$STAGER
	local_rsh
	"$GENDATA" images ds --files 400 --classes 4 >/dev/null
	stager pack -q ds -o ds.tar.zst >/dev/null
}

# CMD...: run CMD in the background and kill -9 it after a random 0-600 ms
# (drawn here, in the test's shell: kill_seed's seed repeats it), or let it
# finish; rc is its exit status, 137 if killed, and mid 1 if the kill cut it
# mid-work
kill_at_random() {
	local ms=$((RANDOM % 600))
	"$@" >/dev/null 2>>"$T/log" 3>&- &
	kill_after $! "$ms"
	rc=$KILL_RC mid=$KILL_MID
}

# DIR: every file in DIR is whole: absent, or the same as in ds
whole_or_absent() {
	local f
	while IFS= read -r f; do
		cmp -s "ds/$f" "$1/$f" || { echo "torn: $1/$f"; return 1; }
	done < <(cd "$1" && find . -type f ! -name '.stager*' | sed 's|^\./||')
}

@test "kill -9 at random moments of stage, collect, push, pull and clean: published whole or not at all, and the next run completes" {
	rounds=${KILL_ROUNDS:-25}
	kill_seed
	echo "seed $KILL_SEED, $rounds kills"
	declare -A killed
	for i in $(seq 1 "$rounds"); do
		op=$((i % 6))
		case $op in
		0) # a cold stage of a pack (the cache emptied first)
			"$STAGER" clean --all -q
			kill_at_random "$STAGER" --bwlimit 10M stage --no-pin ds.tar.zst "$T/s$i"
			[ ! -e "s$i" ] || [ "$rc" -ne 137 ] || whole_or_absent "s$i"
			run stager stage --no-pin ds.tar.zst "$T/s$i.again"
			[ "$status" -eq 0 ]
			diff -r ds "s$i.again"
			name=stage
			;;
		1) # a stage --copy of a directory
			kill_at_random "$STAGER" --bwlimit 10M stage --copy ds "$T/c$i"
			if [ -e "c$i" ]; then diff -r ds "c$i"; fi
			run stager stage --copy ds "$T/c$i.again"
			[ "$status" -eq 0 ]
			diff -r ds "c$i.again"
			name=stage-dir
			;;
		2) # collect
			kill_at_random "$STAGER" collect --bwlimit 10M ds "$T/col$i"
			[ ! -e "col$i" ] || whole_or_absent "col$i"
			run stager collect ds "$T/col$i"
			[ "$status" -eq 0 ]
			diff -r ds "col$i"
			[ -z "$(find "col$i" -name '.stager-*')" ]
			name=collect
			;;
		3) # push, then pull back
			kill_at_random "$STAGER" push --bwlimit 10M --rsh ./rsh ds "h:$T/pushed$i"
			[ ! -e "pushed$i" ] || [ "$rc" -ne 137 ] || diff -r ds "pushed$i"
			run stager push --rsh ./rsh ds "h:$T/pushed$i"
			[ "$status" -eq 0 ]
			diff -r ds "pushed$i"
			name=push
			;;
		4)
			kill_at_random "$STAGER" pull --bwlimit 10M --rsh ./rsh "h:$T/ds" "$T/pulled$i"
			[ ! -e "pulled$i" ] || [ "$rc" -ne 137 ] || diff -r ds "pulled$i"
			run stager pull --rsh ./rsh "h:$T/ds" "$T/pulled$i"
			[ "$status" -eq 0 ]
			diff -r ds "pulled$i"
			name=pull
			;;
		5) # clean with something to remove, while a pinned stage stays
			# (in a scratch root of its own: this shell's pins last)
			export STAGER_SCRATCH_ROOT=$T/scratch-clean
			run stager stage ds.tar.zst "$T/pinned$i"
			[ "$status" -eq 0 ]
			"$STAGER" stage -q --no-pin ds "$T/loose$i" >/dev/null 2>&1
			kill_at_random "$STAGER" clean --all
			diff -r ds "pinned$i"
			run stager clean --all
			[ "$status" -eq 0 ]
			diff -r ds "pinned$i"
			export STAGER_SCRATCH_ROOT=$T/scratch
			name=clean
			;;
		esac
		[ "$rc" -eq 0 ] || [ "$rc" -eq 137 ] || { echo "round $i ($name): exit $rc"; cat log; false; }
		if [ "$mid" -eq 1 ]; then killed[$name]=$((${killed[$name]:-0} + 1)); fi
		rm -rf "s$i" "s$i.again" "c$i" "c$i.again" "col$i" "pushed$i" "pulled$i" "pinned$i" "loose$i"
	done
	for k in "${!killed[@]}"; do echo "$k: killed ${killed[$k]} times"; done
	# a third of the rounds, at least, cut their operation mid-work (was
	# still running when killed): not "finished before the kill" each time
	n=0
	for k in "${!killed[@]}"; do n=$((n + killed[$k])); done
	echo "# $n of $rounds rounds killed mid-work (at least $((rounds / 3)) must)" >&3
	[ "$n" -ge $((rounds / 3)) ]
}
