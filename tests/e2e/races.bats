#!/usr/bin/env bats
# Races: a stage beside `clean --all`, a stage while its pack is replaced
# (renamed over, or rewritten in place).  Each stage ends with a correct
# tree or a clear error, never a wrong tree.  (Two users staging one pack
# at once: users.bats.)

load helpers

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch STAGER_SLOT_DIR=$T/slots
	pids=()
}

teardown() {
	# the loops stop at their next turn (killing a loop would leave its
	# stager running, writing in $T while it is removed)
	: >"$T/stop"
	for p in "${pids[@]}"; do wait_pid "$p" 30 || true; done
	cd /
	rm -rf "$T"
}

mkver() { # DIR SEED: a small dataset whose content depends on SEED
	"$GENDATA" images "$1" --files 300 --classes 3 --seed "$2" >/dev/null
}

@test "stages beside clean --all in a loop: every stage gives the right tree" {
	mkver v1 1
	stager pack -q v1 -o v1.tar.zst >/dev/null
	# another process cleans everything it may, again and again
	(
		exec 3>&-
		while [ ! -e "$T/stop" ]; do "$STAGER" clean --all -q >/dev/null 2>&1; done
	) &
	pids+=($!)
	for i in $(seq 1 12); do
		# pinned (the default): clean --all never takes it away, also not
		# between the build, the publish and the pin: every stage succeeds
		# and gives the right tree
		rc=0
		d=$("$STAGER" stage v1.tar.zst "$T/d$i" 2>err) || rc=$?
		cat err
		echo "stage $i: status $rc"
		[ "$rc" -eq 0 ]
		"$STAGER" clean --all -q
		diff -r v1 "$d"
	done
}

@test "a stage while its pack is replaced (renamed over, or rewritten in place): one version whole, or a clear error" {
	mkver v1 1
	mkver v2 2
	stager pack -q v1 -o v1.tar.zst >/dev/null
	stager pack -q v2 -o v2.tar.zst >/dev/null
	cp v1.tar.zst ds.tar.zst
	# the writer: atomic replacements by rename, and in-place rewrites
	(
		exec 3>&-
		n=0
		while [ ! -e stop ]; do
			n=$((n + 1))
			if [ $((n % 2)) -eq 0 ]; then
				cp v2.tar.zst .ds.new && mv -f .ds.new ds.tar.zst
			else
				cat v1.tar.zst >ds.tar.zst
			fi
		done
	) &
	pids+=($!)
	good=0
	for i in $(seq 1 20); do
		rc=0
		d=$("$STAGER" stage --bwlimit 20M ds.tar.zst "$T/d$i" 2>err) || rc=$?
		if [ "$rc" -eq 0 ]; then
			if diff -rq v1 "$d" >/dev/null; then
				good=$((good + 1))
			else
				diff -r v2 "$d"
				good=$((good + 1))
			fi
		else
			cat err
			[ "$rc" -lt 128 ]
			[ -s err ]
		fi
	done
	# the writer ends after its current write (a kill would leave that
	# write going on)
	touch stop
	wait_pid "${pids[0]}" 30
	echo "$good of 20 staged whole"
	# and once the pack is still again, a stage gives it
	cp v2.tar.zst ds.tar.zst
	run stager stage ds.tar.zst "$T/final"
	[ "$status" -eq 0 ]
	diff -r v2 final
}
