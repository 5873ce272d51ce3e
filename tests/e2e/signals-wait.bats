#!/usr/bin/env bats
# stager mount stopped while it waits for a reader slot (every node slot
# held by another process): each stop signal ends it within a second with
# status 5 (interrupted), whatever dispositions it started with, in the
# foreground and in the background (where the process that would serve
# is told to give up), and nothing is mounted, recorded or left running
# afterwards, not even once the slot comes free.

load helpers

setup() {
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	T=$(reachable_mktemp stager-sigwait)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch STAGER_MAX_READERS_PER_NODE=1
	mkdir src mnt && echo x >src/f
	stager pack -q src -o "$T/p.tar.zst"
	stager stage -q "$T/p.tar.zst" staged >/dev/null # makes the slot files
	# another process holds the node's only slot (no flock(1) parent: the
	# holder is the process killed at the end)
	bash -c 'exec 9<"$1" && flock 9 && exec sleep 300' _ "$STAGER_SLOT_DIR/slot.0" 3>&- &
	holder=$!
	PIDS=$holder
	wait_until 30 slot_held "$STAGER_SLOT_DIR/slot.0"
}

teardown() {
	cd /
	local m p
	for m in $(awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo); do
		fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"
	done
	for p in $PIDS $(pgrep -f "mount.*$T/p.tar.zst"); do kill -9 "$p" 2>/dev/null || true; done
	if awk -v t="$T/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		return 0 # never rm through a mount
	fi
	rm -rf "$T"
}

slot_held() { # SLOT: someone holds its flock
	if flock -n "$1" true; then return 1; fi
}
mounted() { awk -v m="$T/mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
# a process of this test's mount (the command, or one that would serve)
mount_procs() { pgrep -f "mount.*$T/p.tar.zst"; }
# a record of a live mount (SCRATCH_ROOT/mounts/pid-*)
records() { ls "$STAGER_SCRATCH_ROOT/mounts" 2>/dev/null | grep '^pid-'; }

# in the test's output, and in the TAP stream (the times of each case)
say() { echo "$*" && echo "# $*" >&3; }

# Nothing of the mount is there: no mount, no record, no process.
nothing_left() {
	if mounted; then echo "mounted"; return 1; fi
	if records; then echo "a record is left"; return 1; fi
	if mount_procs; then echo "a process is left"; return 1; fi
}

# The bit of SIGNAL in a /proc/PID/status mask line (SigIgn, SigCgt).
sig_bit() { # PID LINE SIGNAL
	local mask
	mask=$(awk -v l="$2:" '$1 == l { print $2 }' "/proc/$1/status")
	echo $(((16#$mask >> ($(kill -l "$3") - 1)) & 1))
}

# Start stager mount [--foreground] with SIGHUP ignored or default (HUP:
# ign|dfl), wait for it to wait for the slot, send SIG, and check: status
# 5 within ~1 s, nothing left.  Prints the time taken.
stop_case() { # MODE(fg|bg) HUP SIG
	local mode=$1 hup=$2 sig=$3 opt= log="$T/$1-$2-$3.log" pid rc t0 t
	[ "$mode" = fg ] && opt=--foreground
	local how=--default-signal=HUP
	[ "$hup" = ign ] && how=--ignore-signal=HUP
	env "$how" "$STAGER" mount $opt "$T/p.tar.zst" "$T/mnt" 2>"$log" 3>&- &
	pid=$!
	PIDS="$holder $pid"
	wait_until 20 grep -q "waiting for a shared-FS slot" "$log"
	t0=$(date +%s.%N)
	kill -"$sig" "$pid"
	rc=0
	wait_pid "$pid" 10 || rc=$?
	t=$(echo "$(date +%s.%N) - $t0" | bc -l)
	say "mount $opt, SIGHUP $hup at start, SIG$sig: exit $rc after $t s"
	cat "$log"
	[ "$rc" -eq 5 ]
	faster_than "$t" "$(signal_limit 1)"
	grep -q "interrupted" "$log"
	nothing_left
}

@test "mount waiting for a reader slot: SIGINT, SIGTERM, SIGHUP end it within a second (status 5), SIGHUP ignored or not at start, foreground or not; nothing appears later" {
	command -v env >/dev/null && env --default-signal=HUP true 2>/dev/null ||
		skip "env has no --default-signal (coreutils < 8.31)"
	# the dispositions env sets are the ones stager starts with
	env --ignore-signal=HUP sleep 5 &
	s=$!
	PIDS="$holder $s"
	# (once env has set it and become sleep)
	wait_until 5 sh -c "[ \"\$(cat /proc/$s/comm)\" = sleep ]"
	[ "$(sig_bit "$s" SigIgn HUP)" -eq 1 ]
	kill "$s"
	wait_pid "$s" 5 || true
	for mode in fg bg; do
		for hup in ign dfl; do
			for sig in INT TERM HUP; do
				stop_case "$mode" "$hup" "$sig"
			done
		done
	done
	# a process that would serve, left waiting, would mount once the slot
	# is free: free it, and give it the time
	kill "$holder"
	wait_pid "$holder" 10 || [ $? -eq 143 ]
	sleep 3 # check-tests: the time a left-over process would take to mount
	nothing_left
}

@test "mount waiting for a reader slot under timeout 5: back within 7 s, and nothing is mounted later" {
	t0=$(date +%s.%N)
	rc=0
	timeout 5 "$STAGER" mount "$T/p.tar.zst" "$T/mnt" 2>t.log 3>&- || rc=$?
	t=$(echo "$(date +%s.%N) - $t0" | bc -l)
	say "timeout 5 stager mount: exit $rc after $t s"
	cat t.log
	[ "$rc" -eq 124 ]
	faster_than "$t" 7 # timeout's SIGTERM at 5 s, and 2 s for a loaded machine
	nothing_left
	sleep 3 # check-tests: the time a left-over process would take to mount
	nothing_left
	kill "$holder"
	wait_pid "$holder" 10 || [ $? -eq 143 ]
	sleep 3 # check-tests: the same, once the slot is free
	nothing_left
}

@test "mount waiting for a reader slot, its caller killed (SIGKILL): the process that would serve gives up at once" {
	"$STAGER" mount "$T/p.tar.zst" "$T/mnt" 2>k.log 3>&- &
	pid=$!
	PIDS="$holder $pid"
	wait_until 20 grep -q "waiting for a shared-FS slot" k.log
	[ "$(mount_procs | wc -l)" -eq 2 ] # the caller and its child
	t0=$(date +%s.%N)
	kill -9 "$pid"
	wait_pid "$pid" 10 || true
	wait_until 2 eval '! mount_procs >/dev/null'
	t=$(echo "$(date +%s.%N) - $t0" | bc -l)
	say "the child ended $t s after its caller's SIGKILL"
	kill "$holder"
	wait_pid "$holder" 10 || [ $? -eq 143 ]
	sleep 3 # check-tests: the time a left-over process would take to mount
	nothing_left
}
