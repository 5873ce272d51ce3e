#!/usr/bin/env bats
# sharedfs (bench/sharedfs.c): the FUSE passthrough that emulates a shared
# filesystem's costs.  Each test mounts its own backing directory on its own
# mount point, and teardown unmounts it even when the test failed.

SHAREDFS=${SHAREDFS:-$BATS_TEST_DIRNAME/../../build/sharedfs}
STATS=.sharedfs-stats

# helpers.bash for wait_until and wait_pid (its setup and teardown are
# replaced below); it asks for STAGER, which these tests do not run
STAGER=${STAGER:-$BATS_TEST_DIRNAME/../../build/stager}
load helpers
load timing
bats_require_minimum_version 1.5.0

setup() {
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	[ "$(id -u)" -eq 0 ] || skip "needs root (mounts with allow_other)"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	[ -x "$SHAREDFS" ] || {
		echo "sharedfs is not built: $SHAREDFS" >&2
		return 1
	}
	T=$(reachable_mktemp sharedfs-e2e)
	B=$T/back M=$T/mnt HOLDERS=
	mkdir "$B" "$M" "$T/mnt2"
}

unmount() {
	mountpoint -q "$1" 2>/dev/null || return 0
	fusermount3 -u "$1" 2>/dev/null || umount -l "$1"
}

teardown() {
	local p
	for p in $HOLDERS; do
		kill "$p" 2>/dev/null || true
		wait_pid "$p" 10 2>/dev/null || true
	done
	cd /
	[ -n "${T:-}" ] || return 0
	unmount "$M" || true
	unmount "$T/mnt2" || true
	# never delete through a mount that is still there
	if ! mountpoint -q "$M" && ! mountpoint -q "$T/mnt2"; then
		rm -rf "$T"
	fi
}

mountfs() { # [OPTIONS] BACKING MOUNTPOINT
	"$SHAREDFS" "$@" && mountpoint -q "${!#}"
}

stat_of() { # KEY [MOUNTPOINT]: one counter
	awk -v k="$1" '$1 == k { print $2; n++ } END { exit n != 1 }' "${2:-$M}/$STATS"
}

reset_stats() {
	echo reset >"${1:-$M}/$STATS"
}

# Wall-clock upper bounds hold only without sanitizers (SAN_FLAGS: the
# whole test run is slower then; high in timing.bash); the lower bounds
# always hold.
fast_enough() { # awk condition on x and y (is_true) that only speed meets
	if [ -n "${SAN_FLAGS:-}" ]; then
		echo "under sanitizers: '$1' not checked (x=$2 y=${3:-})"
		return 0
	fi
	is_true "$@"
}

# release is sent after close(2) returns; wait for it before a reset
all_closed() {
	[ "$(stat_of open_now)" -eq 0 ]
}


is_true() { # awk condition on x and y
	awk -v x="$2" -v y="${3:-0}" "BEGIN { exit !($1) }"
}

# One sorted line per entry: path, type, mode, size, link target, link
# count, mtime in ns and a content hash (directories: path, mode, mtime).
sig() {
	(
		cd "$1" &&
			find . -mindepth 1 ! -type d -printf '%P|%y|%m|%s|%l|%n|%T@|' -exec sh -c '
				if [ -f "$1" ] && [ ! -L "$1" ]; then sha256sum <"$1" | cut -c1-16
				else echo -; fi' sh {} \; &&
			find . -mindepth 1 -type d -printf '%P|d|%m|%T@\n'
	) | LC_ALL=C sort
}

make_tree() {
	local d=$1
	mkdir -p "$d/a/b/c" "$d/empty dir" "$d/deep/1/2/3/4/5/6/7/8/9"
	echo hello >"$d/a/hello.txt"
	head -c 3000000 /dev/urandom >"$d/a/b/big.bin"
	: >"$d/zero"
	echo spaces >"$d/a/with spaces.txt"
	echo newline >"$d/a/new
line"
	echo utf8 >"$d/a/caf$(printf '\303\251')"
	echo long >"$d/a/$(printf 'n%.0s' $(seq 1 200))"
	echo bottom >"$d/deep/1/2/3/4/5/6/7/8/9/file"
	ln -s a/hello.txt "$d/rel-link"
	ln -s does-not-exist "$d/dangling"
	ln "$d/a/hello.txt" "$d/a/b/hard"
	mkfifo "$d/fifo"
	chmod 0640 "$d/a/b/big.bin"
	chmod 0700 "$d/empty dir"
	# old times: rsync leaves an mtime alone when the seconds match
	find "$d" -depth -exec touch -h -d '2003-04-05 06:07:08.25' {} +
	touch -d '2001-02-03 04:05:06.123456789' "$d/zero"
	touch -h -d '2002-02-02 02:02:02' "$d/rel-link"
}

# The identity tests turn the attribute cache off: through the high-level
# FUSE API each name of a hard link is its own kernel inode, so the link
# count or size seen through one name lags changes made through another for
# up to --attr-timeout seconds.

@test "a tree written through the mount is the same tree in the backing directory" {
	mountfs --delay-ms 0 --attr-timeout 0 "$B" "$M"
	cd "$M"
	mkdir -p t/a/b "t/with space"
	echo hello >t/a/hello.txt
	head -c 300000 /dev/urandom >t/a/b/big.bin
	: >t/empty
	ln -s a/hello.txt t/rel-link
	ln -s does-not-exist t/dangling
	ln t/a/hello.txt t/hard
	echo gone >t/gone
	rm t/gone
	echo moved >t/old
	mv t/old "t/with space/new"
	mkdir t/gone-dir
	rmdir t/gone-dir
	printf more >>t/a/hello.txt
	chmod 0640 t/a/b/big.bin
	truncate -s 1000 t/empty
	truncate -s 10 t/empty
	touch -d '2001-02-03 04:05:06.123456789' t/empty
	cd /
	[ "$(sig "$M/t")" = "$(sig "$B/t")" ]
	[ ! -e "$B/t/gone" ]
	[ ! -e "$B/t/old" ]
	[ ! -e "$B/t/gone-dir" ]
	[ "$(cat "$B/t/with space/new")" = moved ]
	[ "$(cat "$B/t/hard")" = "$(printf 'hello\nmore')" ]
	[ "$(readlink "$B/t/rel-link")" = a/hello.txt ]
	[ "$(stat -c %s "$B/t/empty")" -eq 10 ]
	# inode numbers are the backing ones, so hard links show
	[ "$(stat -c %i "$M/t/hard")" = "$(stat -c %i "$B/t/a/hello.txt")" ]
	[ "$(stat -c %h "$M/t/hard")" -eq 2 ]
	# the stats file is neither listed nor in the backing directory
	[ -f "$M/$STATS" ]
	[ ! -e "$B/$STATS" ]
	listing=$(ls -A "$M")
	[ -n "$listing" ]
	[[ "$listing" != *sharedfs* ]]
}

@test "cp -a, tar and rsync round trips through the mount keep the tree" {
	make_tree "$T/src"
	want=$(sig "$T/src")
	mountfs --delay-ms 0 --attr-timeout 0 "$B" "$M"
	cp -a "$T/src" "$M/cp"
	[ "$(sig "$M/cp")" = "$want" ]
	[ "$(sig "$B/cp")" = "$want" ]
	cp -a "$M/cp" "$T/cp-back"
	[ "$(sig "$T/cp-back")" = "$want" ]
	mkdir "$M/tar"
	tar -C "$T/src" --format=posix -cf - . | tar -C "$M/tar" -xpf -
	[ "$(sig "$B/tar")" = "$want" ]
	tar -C "$M/tar" --format=posix -cf "$T/t.tar" .
	mkdir "$T/untar"
	tar -C "$T/untar" -xpf "$T/t.tar"
	[ "$(sig "$T/untar")" = "$want" ]
	if command -v rsync >/dev/null; then
		rsync -aH "$T/src/" "$M/rsync/"
		[ "$(sig "$B/rsync")" = "$want" ]
		rsync -aH "$M/rsync/" "$T/rsync-back/"
		[ "$(sig "$T/rsync-back")" = "$want" ]
	fi
}

@test "counters: creates, bytes read and written are counted, reset zeroes them" {
	head -c 1234567 /dev/urandom >"$B/in.bin"
	# the kernel checks the root's attributes on every path through the
	# mount once they are --attr-timeout old (a getattr of /, counted,
	# even to read the counters): kept for the whole test, no such getattr
	# comes between a reset and the reads after it, however slow the run
	mountfs --delay-ms 0 --attr-timeout 3600 "$B" "$M"
	mkdir "$M/d"
	wait_until 10 all_closed
	reset_stats
	for i in $(seq 1 50); do : >"$M/d/f$i"; done
	[ "$(stat_of create)" -ge 50 ]
	[ "$(stat_of meta_ops)" -ge 100 ] # a lookup and a create each
	[ "$(stat_of open_max)" -ge 1 ]
	[ "$(stat_of open_read_max)" -eq 0 ]
	wait_until 10 all_closed
	reset_stats
	cat "$M/in.bin" >"$T/out.bin"
	cmp "$B/in.bin" "$T/out.bin"
	[ "$(stat_of bytes_read)" -eq 1234567 ]
	[ "$(stat_of read_calls)" -ge 1 ]
	[ "$(stat_of read)" -eq "$(stat_of read_calls)" ]
	[ "$(stat_of bytes_written)" -eq 0 ]
	[ "$(stat_of open_read_max)" -eq 1 ]
	cp "$T/out.bin" "$M/d/copy.bin"
	cmp "$B/in.bin" "$B/d/copy.bin"
	[ "$(stat_of bytes_written)" -eq 1234567 ]
	[ "$(stat_of write_calls)" -ge 1 ]
	wait_until 10 all_closed
	reset_stats
	run cat "$M/$STATS"
	echo "$output"
	[ "$status" -eq 0 ]
	# "key value" lines, all zero, and reading them did not count
	[ "$(echo "$output" | grep -cvE '^[a-z_]+ [0-9]+$')" -eq 0 ]
	[ "$(echo "$output" | wc -l)" -ge 30 ]
	[ "$(echo "$output" | awk '$2 != 0' | wc -l)" -eq 0 ]
	[ "$(stat_of getattr)" -eq 0 ]
	sleep 1.2 # check-tests: still none past the default attribute timeout (1 s)
	[ "$(stat_of getattr)" -eq 0 ]
	[ "$(stat_of meta_ops)" -eq 0 ]
	# only "reset" may be written
	run bash -c "echo zero >'$M/$STATS'"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	run rm "$M/$STATS"
	[ "$status" -ne 0 ]
}

@test "--direct-io: readers holding a file open at once each reach the counters" {
	head -c 3000000 /dev/urandom >"$B/in.bin"
	for opt in "" --direct-io; do
		mountfs --delay-ms 0 $opt "$B" "$M"
		reset_stats
		# two readers with the file open at once (the page cache would serve
		# the second from the first's pages)
		exec {a}<"$M/in.bin" {b}<"$M/in.bin"
		cat <&$a >/dev/null
		cat <&$b >/dev/null
		exec {a}<&- {b}<&-
		got=$(stat_of bytes_read)
		echo "${opt:-cached}: $got"
		if [ -n "$opt" ]; then
			[ "$got" -eq 6000000 ]
		else
			[ "$got" -lt 6000000 ]
		fi
		wait_until 10 all_closed
		unmount "$M"
	done
}

@test "O_DIRECT reads skip the client's page cache only (as on NFS); --pass-direct hands O_DIRECT on" {
	head -c 3000000 /dev/urandom >"$B/in.bin"
	mountfs --delay-ms 0 "$B" "$M"
	reset_stats
	# unaligned offsets and sizes: the server reads its file as always
	dd if="$M/in.bin" of="$T/out" bs=1000000 iflag=direct status=none
	cmp "$B/in.bin" "$T/out"
	dd if="$M/in.bin" of="$T/part" bs=1000 skip=3 count=7 iflag=direct status=none
	cmp <(tail -c +3001 "$B/in.bin" | head -c 7000) "$T/part"
	[ "$(stat_of bytes_read)" -eq 3007000 ]
	unmount "$M"
	# handed on, the flag reaches the backing file: where it is
	# refused (a tmpfs or disk may take it), the reader sees the error
	mountfs --delay-ms 0 --pass-direct "$B" "$M"
	if dd if="$B/in.bin" of=/dev/null bs=1000 skip=3 count=1 iflag=direct status=none 2>/dev/null; then
		dd if="$M/in.bin" of="$T/part2" bs=1000 skip=3 count=7 iflag=direct status=none
		cmp "$T/part" "$T/part2"
	else
		run dd if="$M/in.bin" of=/dev/null bs=1000 skip=3 count=1 iflag=direct
		[ "$status" -ne 0 ]
		[[ "$output" == *"Invalid argument"* ]]
	fi
}

@test "delay: each metadata operation sleeps --delay-ms" {
	mkdir "$B/d"
	(cd "$B/d" && touch $(seq -f f%g 1 400))
	mountfs --delay-ms 2 --attr-timeout 0 "$B" "$M"
	mountfs --delay-ms 0 --attr-timeout 0 "$B" "$T/mnt2"
	# 400 x 2 ms slept, always; the mount without a delay saves them (not
	# a ratio of the two: a loaded machine adds the same to both), in one
	# of three pairs of runs
	for try in 1 2 3; do
		timed stat -c %i $(seq -f "$M/d/f%g" 1 400) >/dev/null
		slow=$ELAPSED
		timed stat -c %i $(seq -f "$T/mnt2/d/f%g" 1 400) >/dev/null
		fast=$ELAPSED
		echo "delay 2 ms: $slow s, no delay: $fast s"
		is_true 'x >= 0.8' "$slow"
		if is_true 'x - y >= 0.7' "$slow" "$fast"; then break; fi
	done
	[ "$(stat_of getattr)" -ge 400 ]
	fast_enough 'x - y >= 0.7' "$slow" "$fast"
}

@test "bandwidth: 40 MiB read or written at --bw 20M takes 2 s" {
	head -c 40M /dev/urandom >"$B/big"
	mountfs --delay-ms 0 --bw 20M "$B" "$M"
	mountfs --delay-ms 0 --bw 0 "$B" "$T/mnt2"
	# 2 s and 10% at most, plus what the same bytes through the unlimited
	# mount take right then (a loaded machine's share, not the limit's)
	in_band_beside 'cat "$T/mnt2/big" >/dev/null' 1.8 "$(high 2.2)" \
		sh -c 'cat "$1" >/dev/null' _ "$M/big"
	[ "$(stat_of bytes_read)" -eq $((RUNS * 41943040)) ]
	in_band_beside 'dd if="$B/big" of="$T/mnt2/out2" bs=1M status=none' 1.8 "$(high 2.2)" \
		dd if="$B/big" of="$M/out" bs=1M status=none
	[ "$(stat_of bytes_written)" -eq $((RUNS * 41943040)) ]
	cmp "$B/big" "$B/out"
	# --bw 0 limits nothing: faster than 20M could ever be (best of three)
	fastest 3 cat "$T/mnt2/big" >/dev/null
	echo "unlimited read $ELAPSED s"
	fast_enough 'x < 1.8 / 2' "$ELAPSED"
}

hold() { # REDIRECTION PATH: keep PATH open in the background until killed
	bash -c "exec 3$1\"\$1\" && exec sleep 60" _ "$2" >/dev/null 2>&1 3>&- &
	HOLDERS="$HOLDERS $!"
}

open_now_is() {
	[ "$(stat_of open_now)" -eq "$1" ]
}

@test "open_max counts handles held at once, open_read_max only read-only ones" {
	echo one >"$B/f1"
	echo two >"$B/f2"
	mountfs --delay-ms 0 "$B" "$M"
	reset_stats
	hold '<' "$M/f1"
	hold '<' "$M/f2"
	hold '>>' "$M/f3"
	wait_until 10 open_now_is 3
	cat "$M/$STATS"
	[ "$(stat_of open_max)" -ge 3 ]
	[ "$(stat_of open_read_now)" -eq 2 ]
	[ "$(stat_of open_read_max)" -eq 2 ]
	for p in $HOLDERS; do
		kill "$p"
		wait_pid "$p" 10 || [ $? -eq 143 ] # ended by the TERM
	done
	HOLDERS=
	wait_until 10 open_now_is 0
	[ "$(stat_of open_read_now)" -eq 0 ]
	[ "$(stat_of open_max)" -ge 3 ]
	reset_stats
	[ "$(stat_of open_max)" -eq 0 ]
	[ "$(stat_of open_read_max)" -eq 0 ]
}

@test "errors pass through: ENOENT, EEXIST, ENOTEMPTY, ENOTDIR" {
	mountfs --delay-ms 0 "$B" "$M"
	run cat "$M/missing"
	[ "$status" -ne 0 ]
	[[ "$output" == *"No such file or directory"* ]]
	mkdir "$M/d"
	run mkdir "$M/d"
	[ "$status" -ne 0 ]
	[[ "$output" == *"File exists"* ]]
	touch "$M/d/x"
	run ! rmdir "$M/d"
	[[ "$output" == *"Directory not empty"* ]]
	run ! ls "$M/d/x/y"
	[[ "$output" == *"Not a directory"* ]]
	run ! ln -s x "$M/d/x"
	[[ "$output" == *"File exists"* ]]
}

@test "rename flags pass through: RENAME_NOREPLACE and RENAME_EXCHANGE" {
	command -v python3 >/dev/null || skip "no python3 for renameat2"
	mountfs --delay-ms 0 "$B" "$M"
	echo a >"$M/a"
	echo b >"$M/b"
	run -0 python3 - "$M/a" "$M/b" <<-'EOF'
		import ctypes, errno, sys
		libc = ctypes.CDLL(None, use_errno=True)
		def rename2(a, b, flags):
		    r = libc.renameat2(-100, a.encode(), -100, b.encode(), flags)
		    return ctypes.get_errno() if r else 0
		print(errno.errorcode.get(rename2(sys.argv[1], sys.argv[2], 1), "ok"))  # NOREPLACE
		print(errno.errorcode.get(rename2(sys.argv[1], sys.argv[2], 2), "ok"))  # EXCHANGE
	EOF
	echo "$output"
	[ "$output" = "$(printf 'EEXIST\nok')" ]
	[ "$(cat "$B/a")" = b ]
	[ "$(cat "$B/b")" = a ]
}

@test "another user can use the mount and owns what it creates" {
	id nobody >/dev/null 2>&1 || skip "no user nobody"
	command -v runuser >/dev/null || skip "no runuser"
	mkdir -m 1777 "$B/shared"
	chmod 755 "$T"
	mountfs --delay-ms 0 "$B" "$M"
	runuser -u nobody -- sh -c "umask 027 && cd '$M/shared' && echo x >f && mkdir d && ln -s f l"
	[ "$(stat -c '%U %a' "$B/shared/f")" = "nobody 640" ]
	[ "$(stat -c '%U %a' "$B/shared/d")" = "nobody 750" ]
	[ "$(stat -c %U "$B/shared/l")" = nobody ]
	# the kernel checks permissions against the backing modes
	run runuser -u nobody -- touch "$M/not-mine"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	run runuser -u nobody -- sh -c "echo reset >'$M/$STATS'"
	[ "$status" -eq 0 ]
}

@test "many parallel operations: 2000 files copied in, out and removed with xargs -P4" {
	mkdir "$T/src" "$T/out"
	for d in $(seq 1 20); do
		mkdir "$T/src/d$d"
		for f in $(seq 1 100); do echo "$d/$f" >"$T/src/d$d/f$f"; done
	done
	mountfs "$B" "$M" # the default costs
	(cd "$T/src" && ls | xargs -P4 -I{} cp -a {} "$M/")
	diff -r "$T/src" "$B"
	(cd "$M" && ls | xargs -P4 -I{} cp -a {} "$T/out/")
	diff -r "$T/src" "$T/out"
	[ "$(stat_of create)" -ge 2000 ]
	[ "$(stat_of bytes_read)" -eq "$(stat_of bytes_written)" ]
	(cd "$M" && ls | xargs -P4 -I{} rm -r {})
	mountpoint -q "$M"
	[ -z "$(ls -A "$B")" ]
}

@test "usage: --help, bad options, --foreground exits 0 after unmount" {
	run "$SHAREDFS" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"--delay-ms"* ]]
	run "$SHAREDFS" --bogus "$B" "$M"
	[ "$status" -eq 1 ]
	run "$SHAREDFS" --bw 12X "$B" "$M"
	[ "$status" -eq 1 ]
	[[ "$output" == *"--bw"* ]]
	run "$SHAREDFS" "$B"
	[ "$status" -eq 1 ]
	run "$SHAREDFS" "$T/missing" "$M"
	[ "$status" -eq 2 ]
	run ! mountpoint -q "$M"
	"$SHAREDFS" --foreground "$B" "$M" >/dev/null 2>&1 3>&- &
	pid=$!
	HOLDERS=$pid # teardown ends it if the test does not
	wait_until 10 mountpoint -q "$M"
	fusermount3 -u "$M"
	wait_pid "$pid" 30
	HOLDERS=
}
