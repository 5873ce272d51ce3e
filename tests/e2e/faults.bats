#!/usr/bin/env bats
# Faults on the destination of collect and push: a read-only filesystem, a
# full one, a quota (sharedfs injects EDQUOT), DEST removed while it is
# written.  Each gets a clear error; nothing is lost on either side; the
# next run completes.  (Transient errors and retries: collect.bats.)

load helpers

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch STAGER_REMOTE_STAGER=$STAGER STAGER_MAX_READERS_PER_NODE=0
	mkdir src
	head -c 4000000 /dev/urandom >src/big
	echo small >src/small
	# the far end of push, run here (push.bats goes through a real sshd)
	local_rsh
	mounts=()
	pids=()
}

teardown() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
	cd /
	rm -rf "$T"
}

readonly_dir() { # DIR: DIR made a read-only bind mount of a new directory
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount"
	mkdir -p "$1" "$1.backing"
	mount --bind "$1.backing" "$1" || skip "cannot bind-mount here"
	mounts+=("$T/$1")
	mount -o remount,bind,ro "$1"
}

@test "a read-only DEST: collect and push say so, write nothing, and the next run after it is writable completes" {
	readonly_dir ro
	run stager collect src ro/res
	echo "$output"
	[ "$status" -eq 7 ]
	[[ "$output" == *"Read-only file system"* ]]
	run stager push --rsh ./rsh src "h:$T/ro/pushed"
	echo "$output"
	[ "$status" -eq 7 ]
	[[ "$output" == *"Read-only file system"* ]]
	[ -z "$(ls -A ro.backing)" ]
	# writable again: both complete
	mount -o remount,bind,rw ro
	run stager collect src ro/res
	[ "$status" -eq 0 ]
	diff -r src ro/res
	run stager push --rsh ./rsh src "h:$T/ro/pushed"
	[ "$status" -eq 0 ]
	diff -r src ro/pushed
}

@test "a full DEST: exit 3 with the figures, nothing partial under a final name, the next run completes" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs"
	mkdir full
	mount -t tmpfs -o size=2m tmpfs full || skip "cannot mount a tmpfs here"
	mounts+=("$T/full")
	run stager collect src full/res
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"cannot take the results"*"free at least"* ]]
	run stager push --rsh ./rsh src "h:$T/full/pushed"
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"not enough space"* ]]
	[ ! -e full/res/big ]
	[ ! -e full/pushed ]
	mount -o remount,size=20m full
	run stager collect src full/res
	[ "$status" -eq 0 ]
	diff -r src full/res
	run stager push --rsh ./rsh src "h:$T/full/pushed"
	[ "$status" -eq 0 ]
	diff -r src full/pushed
}

@test "DEST removed while collect and push write it: a clear error, and the next run sends everything" {
	mkdir dst
	stager collect --bwlimit 1M src dst/res 2>collect.err 3>&- &
	pids+=($!)
	wait_until 20 sh -c 'ls -A dst/res 2>/dev/null | grep -q stager-tmp'
	rm -rf dst/res
	rc=0
	wait_pid "${pids[0]}" 30 || rc=$?
	cat collect.err
	[ "$rc" -eq 7 ]
	grep -q "was removed while it was collected: nothing more sent; collect again" collect.err
	run stager collect src dst/res
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r src dst/res
	# push: the far end's partial directory removed under it
	stager push --bwlimit 1M --rsh ./rsh src "h:$T/dst/pushed" 2>push.err 3>&- &
	pids+=($!)
	wait_until 20 test -d dst/.stager-partial.pushed
	rm -rf dst/.stager-partial.pushed
	rc=0
	wait_pid "${pids[1]}" 30 || rc=$?
	cat push.err
	[ "$rc" -ne 0 ]
	[ "$rc" -ne 137 ]
	[ -s push.err ]
	[ ! -e dst/pushed ]
	run stager push --rsh ./rsh src "h:$T/dst/pushed"
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r src dst/pushed
	# the source was never touched
	[ "$(cat src/small)" = small ]
	[ "$(stat -c %s src/big)" -eq 4000000 ]
}

@test "a quota hit in the middle of a collect (EDQUOT from the shared filesystem): exit 3, the next collect completes" {
	[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] || skip "needs root and /dev/fuse"
	: "${SHAREDFS:=$BATS_TEST_DIRNAME/../../build/sharedfs}"
	mkdir backing mnt
	"$SHAREDFS" --delay-ms 0 --attr-timeout 0 backing mnt
	mounts+=("$T/mnt")
	for i in 1 2 3; do head -c 200000 /dev/urandom >"src/q$i"; done
	echo "fail write EDQUOT 1" >mnt/.sharedfs-stats
	run stager collect src mnt/res
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"quota"* ]]
	[ -z "$(find backing -name '.stager-tmp*')" ]
	run stager collect src mnt/res
	[ "$status" -eq 0 ]
	diff -r src mnt/res
	# a quota that stays hit until files are removed
	echo "fail write EDQUOT 100000" >mnt/.sharedfs-stats
	run stager push --rsh ./rsh src "h:$T/mnt/pushed"
	echo "$output"
	[ "$status" -eq 3 ]
	[ ! -e mnt/pushed ]
	echo "fail write EDQUOT 0" >mnt/.sharedfs-stats
	run stager push --rsh ./rsh src "h:$T/mnt/pushed"
	[ "$status" -eq 0 ]
	diff -r src mnt/pushed
}
