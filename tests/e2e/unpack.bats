#!/usr/bin/env bats
# stager unpack: atomic, verified, secure.

load helpers

@test "unpack into a new directory; an existing non-empty one is refused" {
	make_awkward_tree src
	stager pack -q src -o p.tar.zst
	run stager unpack p.tar.zst out
	[ "$status" -eq 0 ]
	[ "$(tree_sig src)" = "$(tree_sig out)" ]
	run stager unpack p.tar.zst out
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "exists"
	[ "$(tree_sig src)" = "$(tree_sig out)" ]
	mkdir emptydir
	stager unpack -q p.tar.zst emptydir
	[ "$(tree_sig src)" = "$(tree_sig emptydir)" ]
	[ -z "$(ls -A | grep '^\.stager')" ]
}

@test "--include extracts a subset and decodes only its frames" {
	mkdir -p src/keep src/skip
	head -c 3000000 /dev/urandom >src/skip/big
	for i in 1 2 3; do echo "$i" >"src/keep/f$i"; done
	stager pack -q src -o p.tar.zst --frame-size 256K
	run stager unpack p.tar.zst out --include 'keep/*'
	[ "$status" -eq 0 ]
	[ -f out/keep/f2 ]
	[ ! -e out/skip/big ]
	# damage a frame of the skipped file: the subset still unpacks
	flip_byte p.tar.zst 1500000
	run stager unpack p.tar.zst out2 --include keep
	[ "$status" -eq 0 ]
	run stager unpack p.tar.zst out3
	[ "$status" -eq 4 ]
	[ ! -e out3 ]
	run stager unpack p.tar.zst out4 --include 'nothing*'
	[ "$status" -eq 1 ]
}

@test "setuid and setgid bits are dropped" {
	mkdir src && echo x >src/s && chmod 6755 src/s
	stager pack -q src -o p.tar.zst
	stager unpack -q p.tar.zst out
	[ "$(stat -c %a out/s)" = "755" ]
}

@test "symlinks that leave the destination are refused, nothing written" {
	mkdir -p src/d
	ln -s ../../../../etc/passwd src/d/evil
	stager pack -q src -o up.tar.zst
	run stager unpack up.tar.zst out
	[ "$status" -eq 4 ]
	echo "$output" | grep -q "outside"
	[ ! -e out ]
	rm src/d/evil && ln -s /etc/passwd src/abs
	stager pack -q src -o abs.tar.zst
	run stager unpack abs.tar.zst out
	[ "$status" -eq 4 ]
	[ ! -e out ]
	[ -z "$(ls -A | grep '^\.stager')" ]
}

@test "a damaged pack publishes nothing" {
	mkdir src
	head -c 2000000 /dev/urandom >src/a
	echo b >src/b
	stager pack -q src -o p.tar.zst --frame-size 256K
	flip_byte p.tar.zst 1000000
	run stager unpack p.tar.zst out
	[ "$status" -eq 4 ]
	echo "$output" | grep -q "frame"
	[ ! -e out ]
	[ -z "$(ls -A | grep '^\.stager')" ]
}

# Files the unpack into out has written to so far (in its temporary sibling).
unpacked() { find . -maxdepth 2 -path './.stager-unpack.out.*' -type f -size +0 2>/dev/null | wc -l; }

# The unpack PID is stopped half-way: frozen (SIGSTOP) while it has made
# some of the 40 files, not all.  Missed (not started or done): 1.
stop_half_way() {
	local n
	wait_until 30 eval '[ "$(unpacked)" -gt 0 ] || ! running '"$1"
	kill -STOP "$1" 2>/dev/null || return 1
	n=$(unpacked)
	echo "stopped with $n files made" >&2
	if [ "$n" -gt 0 ] && [ "$n" -lt 40 ] && [ ! -e out ]; then return 0; fi
	kill -CONT "$1"
	return 1
}

@test "an interrupted unpack exits 5 and publishes nothing" {
	mkdir src
	for i in $(seq 1 40); do head -c 5000000 /dev/urandom >"src/f$i"; done
	stager pack -q src -o p.tar.zst
	for sig in INT TERM; do
		# signalled while it is half-way; it takes a fraction of a second,
		# so freeze it there first (a few tries to find it half-way)
		for try in 1 2 3 4 5 6 7 8 9 10; do
			rm -rf out .stager-unpack.*
			# (a background job starts with SIGINT ignored, and stager
			# leaves a signal ignored at its start alone)
			env --default-signal=INT "$STAGER" unpack -q p.tar.zst out --threads 1 &
			pid=$!
			if stop_half_way $pid; then break; fi
			wait_pid $pid 30
			pid=
		done
		[ -n "$pid" ]
		kill -$sig $pid
		kill -CONT $pid
		st=0
		wait_pid $pid 30 || st=$?
		echo "$sig (try $try): exit $st"
		[ "$st" -eq 5 ]
		[ ! -e out ]
		[ -z "$(ls -A | grep '^\.stager')" ]
	done
}

@test "kill -9 during unpack never leaves a partial tree at DIR" {
	mkdir src
	for i in $(seq 1 20); do head -c 5000000 /dev/urandom >"src/f$i"; done
	stager pack -q src -o p.tar.zst
	# a whole unpack's time here, the faster of two (one slowed by a busy
	# machine would put most kills after the end): the kills come within it
	base=$(time_ms "$STAGER" unpack -q p.tar.zst out)
	rm -rf out
	again=$(time_ms "$STAGER" unpack -q p.tar.zst out)
	[ "$again" -ge "$base" ] || base=$again
	kill_seed
	mid=0
	rounds=0
	# six rounds, and more (up to twelve) until three cut the unpack
	# mid-work: on a loaded machine the first unpack may be slower than
	# the later ones, whose kills then come after their end
	for round in $(seq 1 12); do
		if [ "$rounds" -ge 6 ] && [ "$mid" -ge 3 ]; then break; fi
		rounds=$round
		rm -rf out .stager-unpack.*
		# a moment within it, 10-90 %: the seed repeats where the kills
		# fall within the work, whatever this machine's speed
		permille=$((100 + RANDOM % 800))
		ms=$((base * permille / 1000))
		"$STAGER" unpack -q p.tar.zst out 3>&- &
		kill_after $! "$ms"
		echo "round $round: killed at $permille/1000 of a whole unpack ($ms of $base ms): status $KILL_RC"
		[ "$KILL_RC" -eq 137 ] || [ "$KILL_RC" -eq 0 ] # killed, or done before
		mid=$((mid + KILL_MID))
		# done before the kill: the machine is faster now, and so are
		# the next rounds' moments
		[ "$KILL_RC" -eq 0 ] && base=$((base * 3 / 4))
		if [ -e out ]; then
			[ "$(tree_sig src)" = "$(tree_sig out)" ]
		fi
	done
	# half the rounds, at least, cut the unpack mid-work
	echo "# $mid of $rounds rounds killed mid-work (at least 3 must)" >&3
	[ "$mid" -ge 3 ]
}

@test "unpack where it does not fit: exit 3 with the figures, before anything is written" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs"
	mkdir src small
	head -c 3000000 /dev/urandom >src/r
	echo b >src/b
	stager pack -q src -o p.tar.zst
	mount -t tmpfs -o size=1m tmpfs small || skip "cannot mount tmpfs"
	run stager unpack p.tar.zst small/out
	left=$(ls -A small)
	used=$(df --output=used -B1K small | tail -1 | tr -d ' ')
	# a part that fits does unpack
	stager unpack -q p.tar.zst small/part --include b
	part=$(cat small/part/b)
	umount small
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -Eq "not enough space to unpack into 'small/out': need 2\.9 MiB, [0-9.]+ [KM]iB free there"
	[ -z "$left" ]
	[ "$used" -lt 100 ]
	[ "$part" = b ]
}
