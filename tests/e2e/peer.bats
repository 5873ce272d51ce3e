#!/usr/bin/env bats
# A hostile far end for push, pull and serve: fakepeer.py (beside this
# file) speaks the protocol and lies - as the transport of a pull (a lying
# server) and as a client of the real `stager serve` (a lying pusher).
# Memory stays bounded (peak RSS printed), a stalled peer is given up on
# after io_timeout, sizes that add past 2^64 are refused for space, the
# peer's text reaches the terminal escaped; and real users: a FIFO that
# another user put inside DEST does not hang push or pull, and a pull
# during a push waits for its switch.

load helpers
bats_require_minimum_version 1.5.0

FAKE="$BATS_TEST_DIRNAME/fakepeer.py"

# pull from the fake server: fpull MODE [ARGS...]; output in $T/err, and
# the peak RSS (KiB) of stager in $T/rss
fpull() {
	local mode=$1
	shift
	STAGER_IO_TIMEOUT=${IO:-120} /usr/bin/time -o "$T/rss" -f '%M' \
		"$STAGER" pull --rsh "python3 $FAKE server $mode" "$@" host:/far/ds out 2>"$T/err"
}

# no raw control byte (C0 but tab and newline, ESC, DEL, C1 raw or as
# UTF-8) in FILE
no_raw_controls() {
	run ! grep -qaP '[\x00-\x08\x0b-\x1f\x7f]' "$1"
	run ! grep -qaP '\x9b' "$1"
	run ! grep -qaP '\xc2[\x80-\x9f]' "$1"
	run ! grep -qaP '\e' "$1"
}

nothing_written() {
	[ ! -e out ]
	[ -z "$(ls -A . | grep -v '^err$\|^rss$' || true)" ]
}

@test "pull: a server that sends 400k entries of 4000-byte paths is refused in bounded memory, nothing written" {
	command -v zstd >/dev/null || skip "needs the zstd command"
	local rc=0
	fpull bloat || rc=$?
	cat err
	[ "$rc" -eq 4 ]
	grep -q "refusing a manifest of over .* MiB of path names" err
	grep -q "nothing was written" err
	echo "peak RSS of the client: $(($(tail -1 rss) / 1024)) MiB (3 GB before the cap)" >&3
	[ "$(tail -1 rss)" -lt $((400 * 1024)) ]
	nothing_written
}

@test "serve: a client that pushes 400k entries of 4000-byte paths is refused in bounded memory, nothing written" {
	command -v zstd >/dev/null || skip "needs the zstd command"
	mkdir remote
	run python3 "$FAKE" client bloat "$STAGER" "$T/remote/ds"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"serve: exit 4 "* ]]
	[[ "$output" == *"refusing a manifest of over"* ]]
	kib=$(echo "$output" | sed -n 's/.*peak RSS \([0-9]*\) KiB.*/\1/p')
	echo "peak RSS of serve: $((kib / 1024)) MiB" >&3
	[ "$kib" -gt 0 ]
	[ "$kib" -lt $((400 * 1024)) ]
	[ -z "$(ls -A remote)" ]
}

@test "pull: a server that stops in the middle of a frame is given up on after io_timeout (2 s)" {
	local rc=0 t0=$SECONDS
	IO=2 fpull stall || rc=$?
	cat err
	echo "gave up after $((SECONDS - t0)) s" >&3
	[ "$rc" -eq 6 ]
	# the 2 s, not the default 120 s (the message below names the 2 s);
	# the time also holds both ends' start, which a loaded machine slows
	[ $((SECONDS - t0)) -lt 60 ]
	grep -q "the far end sent nothing for 2 s in the middle of a message" err
	nothing_written
}

@test "pull: a protocol 3 server that falls silent between frames (no keepalive) is given up on after io_timeout" {
	local rc=0 t0=$SECONDS
	IO=2 fpull stall-idle || rc=$?
	cat err
	[ "$rc" -eq 6 ]
	[ $((SECONDS - t0)) -lt 60 ] # the 2 s, not the default 120 s (as above)
	grep -q "the far end sent nothing for 2 s: the connection is stalled" err
}

@test "serve: a client that stops mid-frame, or never says HELLO, is given up on after io_timeout (2 s)" {
	mkdir remote
	for mode in stall stall-hello; do
		STAGER_IO_TIMEOUT=2 run python3 "$FAKE" client "$mode" "$STAGER" "$T/remote/ds"
		echo "$output"
		[ "$status" -eq 0 ]
		secs=$(echo "$output" | sed -n 's/.*after \([0-9.]*\) s.*/\1/p')
		echo "$mode: serve gave up after $secs s" >&3
		[ "${secs%.*}" -le 4 ]
		[[ "$output" != *"serve: exit 0 "* ]]
	done
	[ -z "$(ls -A remote)" ]
}

@test "pull: two files of 2^63 bytes do not add up to 0: refused for space before anything is written" {
	local rc=0
	fpull overflow || rc=$?
	cat err
	[ "$rc" -eq 3 ]
	grep -q "not enough space for 'out': need more than 16 EiB" err
	nothing_written
}

@test "pull: ESC and C1 bytes in a path and in the far end's message reach the terminal escaped" {
	local rc=0
	fpull escape-path || rc=$?
	cat -v err
	[ "$rc" -eq 4 ]
	grep -qF "'evil\\x1b[2J\\x9b31m\\xc2\\x9bcaf" err
	# valid UTF-8 stays readable
	grep -qF "caf$(printf '\303\251')' twice in the manifest" err
	no_raw_controls err
	rc=0
	fpull escape-msg || rc=$?
	cat -v err
	[ "$rc" -eq 7 ]
	grep -qF "the far end: boom evil\\x1b[2J\\x9b31m\\xc2\\x9b" err
	grep -qF '\x07\x7f end' err
	no_raw_controls err
}

# ---- two real users ------------------------------------------------------

# alice runs stager; bob is the other user
two_users() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to make two users"
	command -v useradd >/dev/null && command -v runuser >/dev/null || skip "needs useradd and runuser"
	for u in stgalice stgbob; do
		id "$u" >/dev/null 2>&1 || useradd -M -N -s /bin/sh "$u"
	done
	mkdir -p bin home-stgalice
	cp "$STAGER" bin/stager
	chmod 0755 bin bin/stager
	chown stgalice home-stgalice
	printf '#!/bin/sh\nshift\nexec "$@"\n' >rsh
	chmod 0755 rsh
	runuser -u stgalice -- test -x "$T/bin/stager" || skip "the users cannot reach $T"
}

alice() {
	runuser -u stgalice -- env HOME="$T/home-stgalice" STAGER_IO_TIMEOUT=20 "$@"
}
apush() { alice timeout 60 "$T/bin/stager" push --rsh "$T/rsh" --remote-stager "$T/bin/stager" "$@"; }
apull() { alice timeout 60 "$T/bin/stager" pull --rsh "$T/rsh" --remote-stager "$T/bin/stager" "$@"; }

@test "push and pull: a FIFO that another user put inside DEST neither hangs them nor is read" {
	two_users
	mkdir -p src/shared remote local
	echo old >src/shared/old
	chmod 0777 src/shared
	chown -R stgalice src remote local
	apush src "host:$T/remote/ds"
	apull "host:$T/remote/ds" "$T/local/ds"
	[ "$(stat -c %a remote/ds/shared)" = 777 ]
	# alice adds a file; bob has put a FIFO at its path in both DESTs
	alice sh -c "echo new >$T/src/shared/new"
	runuser -u stgbob -- mkfifo remote/ds/shared/new local/ds/shared/new
	local t0=$SECONDS
	apush src "host:$T/remote/ds"
	echo "push with a FIFO in DEST: $((SECONDS - t0)) s" >&3
	[ -f remote/ds/shared/new ]
	[ "$(cat remote/ds/shared/new)" = new ]
	t0=$SECONDS
	apull "host:$T/remote/ds" "$T/local/ds"
	echo "pull with a FIFO in DEST: $((SECONDS - t0)) s" >&3
	[ -f local/ds/shared/new ]
	[ "$(cat local/ds/shared/new)" = new ]
	# a FIFO in the tree a pull reads: skipped, at once, and said
	runuser -u stgbob -- mkfifo remote/ds/shared/fifo
	t0=$SECONDS
	run apull "host:$T/remote/ds" "$T/local/ds"
	echo "$output"
	[ "$status" -eq 0 ]
	[ $((SECONDS - t0)) -lt 60 ] # an open of the FIFO would wait for ever
	[[ "$output" == *"skipping 'shared/fifo': not a file"* ]]
	[ ! -e local/ds/shared/fifo ]
}

@test "pull during a push to its tree waits for the switch and gets the whole new version" {
	two_users
	mkdir -p src remote local
	echo v1 >src/a
	chown -R stgalice src remote local
	apush src "host:$T/remote/ds"
	# version 2: 6 MB that a push at 2 MB/s takes 3 s to send
	alice sh -c "head -c 6000000 /dev/urandom >$T/src/big; echo v2 >$T/src/a"
	apush --bwlimit 2M src "host:$T/remote/ds" &
	local push=$!
	wait_until 10 test -d remote/.stager-partial.ds
	local t0=$SECONDS
	apull "host:$T/remote/ds" "$T/local/ds"
	echo "the pull waited and took $((SECONDS - t0)) s" >&3
	wait_pid "$push" 30
	diff <(tree_sig src) <(tree_sig local/ds)
	diff <(tree_sig src) <(tree_sig remote/ds)
}

@test "pull into the very tree it reads: its own lock is not waited for; it ends at once, the tree unchanged" {
	two_users
	mkdir -p src remote
	echo v1 >src/a
	chown -R stgalice src remote
	apush src "host:$T/remote/ds"
	local t0=$SECONDS
	run apull "host:$T/remote/ds" "$T/remote/ds"
	echo "$output"
	[ "$status" -eq 0 ]
	[ $((SECONDS - t0)) -lt 10 ]
	diff <(tree_sig src) <(tree_sig remote/ds)
}

@test "push and pull: a .stager-published.NAME another user made in a sticky directory is refused, naming them; nothing is lost" {
	two_users
	local bob
	bob="stgbob (uid $(id -u stgbob))"
	mkdir -p src remote local
	echo a >src/a
	chmod 1777 remote local
	chown -R stgalice src
	# bob makes the name first, beside where alice pushes: a file only he
	# may write, then one anyone may write, then a link of his
	for how in "echo mine >$T/remote/.stager-published.ds" \
		"echo mine >$T/remote/.stager-published.ds && chmod 0666 $T/remote/.stager-published.ds" \
		"ln -s $T/remote/bobs $T/remote/.stager-published.ds"; do
		rm -f remote/.stager-published.ds
		runuser -u stgbob -- sh -c "$how"
		run apush src "host:$T/remote/ds"
		echo "$output"
		[ "$status" -eq 1 ]
		[[ "$output" == *"'$T/remote/.stager-published.ds' is "*" of another user, $bob"* ]]
		[[ "$output" == *"nothing was changed"* ]]
		[[ "$output" != *"Permission denied"* ]]
		# nothing made beside it, and bob's is as he left it
		[ "$(ls -A remote | xargs)" = .stager-published.ds ]
		[ "$(stat -c %U remote/.stager-published.ds)" = stgbob ]
	done
	[ ! -e remote/bobs ]
	[ "$(cat src/a)" = a ]
	# a pull into a sticky directory: the same, before anything is read
	rm -f remote/.stager-published.ds
	apush src "host:$T/remote/ds"
	runuser -u stgbob -- sh -c "echo mine >$T/local/.stager-published.ds"
	run apull "host:$T/remote/ds" "$T/local/ds"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"'$T/local/.stager-published.ds' is a file of another user, $bob"* ]]
	[ "$(ls -A local | xargs)" = .stager-published.ds ]
	[ "$(cat local/.stager-published.ds)" = mine ]
	# alice's own record is hers to use: the push goes on as before
	echo b >src/b
	chown stgalice src/b
	apush src "host:$T/remote/ds"
	[ "$(cat remote/ds/b)" = b ]
}
