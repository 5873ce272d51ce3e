#!/usr/bin/env bats
# stager collect: results back to the "shared filesystem", incremental,
# atomic, checked for space first.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SLOT_DIR="$T/slots"
}

teardown() {
	cd /
	for m in "$T"/mnt*; do
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }
	done
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

# Files under DEST, without stager's own, sorted.
files_of() { (cd "$1" && find . -mindepth 1 ! -name '.stager*' -printf '%P\n' | LC_ALL=C sort); }

# A temporary of collect's with data in it, under DIR (not SRC or scratch).
tmp_written() { [ -n "$(find "$1" -path ./src -prune -o -path ./scratch -prune -o -name '.stager-tmp.*' -size +0 -print 2>/dev/null)" ]; }

@test "progress: a rate once a step takes a measurable time; none, not 0 B/s, before" {
	mkdir src
	head -c 100000 /dev/urandom >src/small
	run --separate-stderr stager --progress=bar collect src quick
	[ "$status" -eq 0 ]
	printf '%s' "$stderr" | tr '\r' '\n'
	[[ "$stderr" == *"100% 97.7 KiB / 97.7 KiB"* ]]
	[[ "$stderr" != *" 0 B/s"* ]]
	# 2 MB at 1 MiB/s: its rate, measured
	head -c 2000000 /dev/urandom >src/big
	run --separate-stderr stager --progress=bar collect --bwlimit 1M src slow
	[ "$status" -eq 0 ]
	printf '%s' "$stderr" | tr '\r' '\n' | grep -Eq '100% .* [0-9.]+ (KiB|MiB)/s'
}

@test "collect copies a tree like rsync -a (modes, mtimes, links, awkward names)" {
	make_awkward_tree src
	(umask 002 && echo gw >src/group-writable && chmod 0664 src/group-writable)
	umask 022 # the copy keeps 0664 all the same
	run stager collect src dest
	[ "$status" -eq 0 ]
	[ "$(tree_sig src)" = "$(tree_sig dest)" ]
	diff <(tree_sig_ns src) <(tree_sig_ns dest)
	rsync -a src/ rsync-dest/
	[ "$(tree_sig rsync-dest)" = "$(tree_sig dest)" ]
	# nothing of stager's is left in DEST
	[ -z "$(find dest -name '.stager*')" ]
}

@test "an unchanged re-run makes no reads or writes on DEST (strace)" {
	make_awkward_tree src
	stager collect -q src "$T/dest"
	ASAN_OPTIONS=detect_leaks=0 strace -f -y -o trace -e trace=%file,%desc "$STAGER" collect --json src "$T/dest" >out.json
	jq -e '.sent_files == 0 and .unchanged > 5' out.json
	# every call naming DEST: only the stat that checks it is still the
	# directory collected to
	grep "$T/dest" trace | grep -v execve >calls || true
	cat calls
	[ "$(grep -cv -E '^[0-9]+ +(newfstatat|statx|stat)\(' calls)" -eq 0 ]
	[ "$(wc -l <calls)" -le 1 ]
}

@test "a changed file alone is sent again; a touched file is hashed, not sent" {
	mkdir src
	for i in $(seq 1 100); do head -c 2000 /dev/urandom >"src/f$i"; done
	stager collect -q src dest
	echo changed >>src/f7
	stager collect --json src dest 2>/dev/null >c.json
	jq -e '.sent_files == 1 and .unchanged == 99' c.json
	cmp src/f7 dest/f7
	touch src/f8
	stager collect --json src dest 2>/dev/null >c.json
	jq -e '.sent_files == 0' c.json
	# a file removed from SRC stays in DEST
	rm src/f9
	stager collect -q src dest
	[ -e dest/f9 ]
}

@test "DEST removed or replaced since: everything is sent again" {
	mkdir src && echo a >src/a && echo b >src/b
	stager collect -q src dest
	rm -rf dest
	stager collect --json src dest 2>/dev/null >c.json
	jq -e '.sent_files == 2' c.json
	[ "$(cat dest/b)" = b ]
}

@test "kill -9 at random moments never leaves a partial file under its final name" {
	mkdir src
	for i in $(seq 1 12); do head -c 1500000 /dev/urandom >"src/f$i"; done
	kill_seed
	for round in 1 2 3 4 5; do
		rm -rf dest "$STAGER_SCRATCH_ROOT"
		ms=$((100 + RANDOM % 900))
		"$STAGER" collect -q --bwlimit 12M src dest 3>&- &
		kill_after $! "$ms"
		# killed mid-way, every round (18 MB at 12 MB/s take longer than
		# the sleep)
		[ "$KILL_MID" -eq 1 ]
		# every file under its final name is whole
		for f in $(files_of dest 2>/dev/null); do cmp "src/$f" "dest/$f"; done
		# the next collect completes it and leaves nothing of its own
		stager collect -q src dest
		[ "$(tree_sig src)" = "$(tree_sig dest)" ]
		[ -z "$(find dest -name '.stager*')" ]
	done
}

@test "clean removes what a killed collect left in DEST once its source is gone" {
	mkdir -p src/sub && head -c 30000000 /dev/urandom >src/sub/ckpt
	for mode in tree pack; do
		rm -rf dest dest.tar.zst "$STAGER_SCRATCH_ROOT"
		opt=
		[ "$mode" = pack ] && opt=--pack
		"$STAGER" collect -q $opt --bwlimit 10M src dest &
		pid=$!
		# killed while it writes a temporary in DEST
		wait_until 30 tmp_written .
		kill -9 "$pid"
		st=0
		wait_pid "$pid" 30 || st=$?
		[ "$st" -eq 137 ]
		left=$(find . -path ./src -prune -o -path "./scratch" -prune -o -name '.stager-tmp.*' -print)
		echo "$mode: left $left"
		[ -n "$left" ]
		# the job ended: its scratch (SRC) is gone, and so is the record
		mv src src.away
		run stager clean
		echo "$output"
		[ "$status" -eq 0 ]
		[ -z "$(find . -path ./src.away -prune -o -path ./scratch -prune -o -name '.stager-tmp.*' -print)" ]
		[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/collect" 2>/dev/null | grep -v '^\.')" ]
		mv src.away src
	done
}

@test "a DEST too small: exit 3 with the figures, before writing anything" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a tmpfs"
	mkdir src mnt
	for i in 1 2 3; do head -c 1000000 /dev/urandom >"src/f$i"; done
	mount -t tmpfs -o size=1m tmpfs mnt
	run stager collect src mnt/dest
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -q "need"
	echo "$output" | grep -q "MiB"
	[ -z "$(ls -A mnt)" ]
	umount mnt
	# out of inodes
	mkdir src2
	for i in $(seq 1 60); do echo "$i" >"src2/f$i"; done
	mount -t tmpfs -o size=10m,nr_inodes=20 tmpfs mnt
	run stager collect src2 mnt/dest
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -q "files free"
	umount mnt
}

@test "--pack writes one verified pack; unchanged re-runs write nothing" {
	make_awkward_tree src
	run stager collect --pack --json src out/res
	[ "$status" -eq 0 ]
	[ -f out/res.tar.zst ]
	stager verify out/res.tar.zst
	stager unpack -q out/res.tar.zst back
	[ "$(tree_sig src)" = "$(tree_sig back)" ]
	[ "$(ls -A out)" = res.tar.zst ]
	before=$(stat -c %i:%Y out/res.tar.zst)
	stager collect --pack --json src out/res.tar.zst 2>/dev/null >c.json
	jq -e '.sent_files == 0' c.json
	[ "$(stat -c %i:%Y out/res.tar.zst)" = "$before" ]
	# a removed file makes a new pack without it
	rm src/zero
	stager collect -q --pack src out/res
	stager ls out/res.tar.zst >ls.txt
	run ! grep -qx 'zero' ls.txt
	grep -qx 'a/hello.txt' ls.txt
}

@test "--pack keeps the results' links to elsewhere (absolute, upward) as they are" {
	mkdir src
	echo w >src/weights
	ln -s /scratch/job42/ckpt src/latest # dangling after the job: still a result
	ln -s ../../shared/config.yaml src/config.yaml
	run stager collect --pack src out/res
	echo "$output"
	[ "$status" -eq 0 ]
	mkdir back && tar --zstd -xf out/res.tar.zst -C back
	[ "$(readlink back/latest)" = /scratch/job42/ckpt ]
	[ "$(readlink back/config.yaml)" = ../../shared/config.yaml ]
	[ "$(cat back/weights)" = w ]
}

@test "kill -9 of collect --pack leaves the old pack whole" {
	mkdir src
	head -c 20000000 /dev/urandom >src/a
	stager collect -q --pack src out/res
	old=$(sha256sum <out/res.tar.zst)
	head -c 20000000 /dev/urandom >src/a
	"$STAGER" collect -q --pack --bwlimit 10M src out/res &
	pid=$!
	# killed while it writes the new pack beside the old one
	wait_until 30 tmp_written out
	kill -9 "$pid"
	st=0
	wait_pid "$pid" 30 || st=$?
	[ "$st" -eq 137 ]
	[ "$(sha256sum <out/res.tar.zst)" = "$old" ]
	stager collect -q --pack src out/res
	stager verify out/res.tar.zst
	[ -z "$(find out -name '.stager*')" ]
}

@test "--every collects periodically and once more when stopped" {
	mkdir src
	"$STAGER" collect --every 1 --json src dest >every.json &
	pid=$!
	echo one >src/one
	for _ in $(seq 1 50); do [ -e dest/one ] && break; sleep 0.1; done
	[ "$(cat dest/one)" = one ]
	echo two >src/two
	kill -TERM "$pid"
	wait_pid "$pid" 30
	[ "$(cat dest/two)" = two ]
	jq -e '.status == 0 and .rounds >= 2' every.json
}

@test "bad input: clear messages and exit statuses, nothing written" {
	run stager collect nowhere dest
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "nowhere"
	[ ! -e dest ]
	echo x >file
	run stager collect file dest
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "not a directory"
	mkdir src && echo a >src/a
	run stager collect src src/inside
	[ "$status" -eq 1 ]
	run stager collect src
	[ "$status" -eq 1 ]
	run stager collect --every soon src dest
	[ "$status" -eq 1 ]
}

# As root, run a command as user 65534 (nobody); as anyone else, as is.

@test "a file that cannot be written is named; the others are collected (exit 7)" {
	[ "$(id -u)" -ne 0 ] || command -v setpriv >/dev/null || skip "needs setpriv"
	mkdir -p src/sub && echo a >src/a && echo b >src/sub/b
	mkdir -p dest/sub
	chmod -R a+rwX "$T"
	chmod 0555 dest/sub
	# (DEST is the user's: collect writes into no one else's directory)
	[ "$(id -u)" -ne 0 ] || chown -R 65534 dest
	as_user_setup
	run as_user env HOME="$T" STAGER_SCRATCH_ROOT="$T/scratch2" "$AS_USER_STAGER" collect src dest
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "sub/b"
	[ "$(cat dest/a)" = a ]
	[ -z "$(find dest -name '.stager*')" ]
}

@test "a damaged record is rebuilt, and collect still does the right thing" {
	mkdir src && echo a >src/a && echo b >src/b
	stager collect -q src dest
	rec=$(ls "$STAGER_SCRATCH_ROOT"/collect/*)
	printf 'garbage\0line\nf 1 2' >>"$rec"
	echo changed >src/b
	stager collect -q src dest
	[ "$(cat dest/b)" = changed ]
	stager collect --json src dest 2>/dev/null >c.json
	jq -e '.sent_files == 0' c.json
}

@test "clean removes the records of sources that are gone, not the others, and free lock files" {
	mkdir src keep && echo a >src/a && echo k >keep/k
	stager collect -q src dest
	stager collect -q keep dest2
	[ "$(ls "$STAGER_SCRATCH_ROOT/collect" | wc -l)" -eq 2 ]
	rm -rf src
	run stager clean --dry-run
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "record"
	[ "$(ls "$STAGER_SCRATCH_ROOT/collect" | wc -l)" -eq 2 ]
	[ "$(ls "$STAGER_SCRATCH_ROOT/locks" | grep -c '^collect-')" -eq 2 ]
	stager clean -q
	[ "$(ls "$STAGER_SCRATCH_ROOT/collect" | wc -l)" -eq 1 ]
	# and the lock files nobody holds
	[ "$(ls "$STAGER_SCRATCH_ROOT/locks" | grep -c -v -x -e cache -e index)" -eq 0 ]
	# the remaining record still works: nothing to send
	stager collect --json keep dest2 2>/dev/null >c.json
	jq -e '.sent_files == 0' c.json
}

@test "clean running beside a collect --pack leaves the pack being made alone" {
	mkdir src
	for i in 1 2 3 4 5 6; do head -c 12M /dev/urandom >"src/f$i"; done
	"$STAGER" collect -q --pack src dest &
	pid=$!
	n=0
	while running "$pid"; do
		"$STAGER" clean -q
		n=$((n + 1))
	done
	wait_pid "$pid" 30
	echo "clean ran $n times"
	[ "$n" -gt 0 ]
	"$STAGER" verify -q dest.tar.zst
	# what a killed collect left (no lock held) does go
	id=$(ls "$STAGER_SCRATCH_ROOT/collect")
	: >"$STAGER_SCRATCH_ROOT/collect/.stager-tmp.$id.tar.zst.99999.0"
	stager clean -q
	[ "$(ls -A "$STAGER_SCRATCH_ROOT/collect")" = "$id" ]
}

# Mount the emulated shared filesystem (bench/sharedfs) over $T/backing at
# $T/mnt-shared; sets MNT.
mount_shared() {
	[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] || skip "needs root and /dev/fuse"
	: "${SHAREDFS:=$BATS_TEST_DIRNAME/../../build/sharedfs}"
	mkdir -p "$T/backing" "$T/mnt-shared"
	"$SHAREDFS" --delay-ms 0 --attr-timeout 0 "$T/backing" "$T/mnt-shared"
	MNT="$T/mnt-shared"
}

@test "transient errors (ESTALE, EIO, EAGAIN) are retried and reported; ENOSPC is not" {
	mount_shared
	mkdir src
	for i in 1 2 3 4; do head -c 300000 /dev/urandom >"src/f$i"; done
	echo "fail write ESTALE 2" >"$MNT/.sharedfs-stats"
	echo "fail rename EIO 1" >"$MNT/.sharedfs-stats"
	# (the first create is collect's marker, .stager-collecting.HOST.PID, best effort)
	echo "fail create EAGAIN 2" >"$MNT/.sharedfs-stats"
	run "$STAGER" collect --json src "$MNT/dest"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "retrying"
	echo "$output" | grep '^{' | jq -e '.retries == 4 and .failed == 0 and .sent_files == 4'
	for i in 1 2 3 4; do cmp "src/f$i" "$MNT/dest/f$i"; done
	[ -z "$(find "$T/backing" -name '.stager*')" ]
	# a fault that lasts: named, exit 7, the other files collected
	echo more >>src/f2
	echo more >>src/f3
	echo "fail rename EIO 9" >"$MNT/.sharedfs-stats"
	run "$STAGER" collect src "$MNT/dest"
	echo "$output"
	[ "$status" -eq 7 ]
	echo "$output" | grep -q "could not be collected"
	echo "fail rename EIO 0" >"$MNT/.sharedfs-stats"
	# quota: not retried, exit 3, nothing partial
	echo "fail write EDQUOT 1" >"$MNT/.sharedfs-stats"
	echo more >>src/f4
	run "$STAGER" collect src "$MNT/dest"
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -q "quota"
	run "$STAGER" collect src "$MNT/dest"
	[ "$status" -eq 0 ]
	for i in 1 2 3 4; do cmp "src/f$i" "$MNT/dest/f$i"; done
	[ -z "$(find "$T/backing" -name '.stager*')" ]
}

@test "a file rewritten while it is collected never replaces DEST's copy torn" {
	mkdir src
	head -c 32M /dev/zero | tr '\0' a >src/ckpt
	head -c 32M /dev/zero | tr '\0' b >"$T/b"
	run stager collect src dest
	[ "$status" -eq 0 ]
	# a training loop saving its checkpoint over and over, in place
	(
		while :; do
			dd if="$T/b" of=src/ckpt bs=1M conv=notrunc status=none
			head -c 32M /dev/zero | tr '\0' a | dd of=src/ckpt bs=1M conv=notrunc status=none
		done
	) &
	writer=$!
	for i in 1 2 3 4 5 6; do
		run stager collect --json src dest
		[ "$status" -eq 0 ]
		# the copy in DEST is one whole version, never a mix of two
		[ "$(stat -c %s dest/ckpt)" -eq 33554432 ]
		n_a=$(tr -cd a <dest/ckpt | wc -c)
		[ "$n_a" -eq 0 ] || [ "$n_a" -eq 33554432 ]
		[ -z "$(find dest -name '.stager*')" ]
	done
	kill "$writer"
	wait_pid "$writer" 30 || true # killed: 143
	run stager collect src dest
	[ "$status" -eq 0 ]
	cmp src/ckpt dest/ckpt
}

@test "a checkpoint renamed into place while a collect runs (NAME.tmp to NAME): no warning, and NAME collected by that collect" {
	mkdir src
	head -c 4M /dev/urandom >src/a-big
	echo step-1 >src/ckpt.pt.tmp
	# a-big comes first in the walk's order and takes about 4 s at 1 MiB/s:
	# ckpt.pt.tmp is listed, and renamed before its turn
	"$STAGER" --bwlimit 1M collect src dest 2>err &
	pid=$!
	wait_until 30 tmp_written .
	mv src/ckpt.pt.tmp src/ckpt.pt
	rc=0
	wait_pid "$pid" 60 || rc=$?
	cat err
	[ "$rc" -eq 0 ]
	[ -z "$(grep -e disappeared -e 'removed or renamed' -e warning err)" ]
	cmp src/ckpt.pt dest/ckpt.pt
	cmp src/a-big dest/a-big
	[ ! -e dest/ckpt.pt.tmp ]
	[ "$(files_of dest)" = "$(printf 'a-big\nckpt.pt')" ]
	# said with --verbose only: the same race once more
	echo step-2 >src/ckpt.pt.tmp
	head -c 4M /dev/urandom >src/a-big
	"$STAGER" --verbose --bwlimit 1M collect src dest 2>err &
	pid=$!
	wait_until 30 tmp_written .
	mv src/ckpt.pt.tmp src/ckpt.pt
	rc=0
	wait_pid "$pid" 60 || rc=$?
	[ "$rc" -eq 0 ]
	grep -q "'ckpt.pt.tmp' was removed or renamed before it could be collected" err
	cmp src/ckpt.pt dest/ckpt.pt
}
