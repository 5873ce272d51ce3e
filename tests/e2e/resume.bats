#!/usr/bin/env bats
# Resume within a file: a push or pull of a large file that is cut (kill -9
# of the client, kill -9 of the far end's stager serve, or the connection
# dropped: the ssh transport killed, so each end sees its stream end) keeps
# what arrived in the receiver's partial directory (.stager-resume.*), and
# the next run sends only the rest once the sender has checked the part
# kept against its own first bytes; a file that changed between the runs is
# sent whole.  Every case runs over a real sshd on localhost, started as in
# push.bats; --bwlimit makes the first run take several seconds, and the
# tests wait for the partial copy to pass half the file, never a fixed time.

load helpers
bats_require_minimum_version 1.5.0

SIZE=$((200 * 1024 * 1024))
PAST=$((SIZE * 55 / 100)) # where the first run is cut, at the earliest

setup_file() {
	export SSHD_DIR
	SSHD_DIR=$(mktemp -d "${BATS_TMPDIR:-/tmp}/stager-sshd.XXXXXX")
	local d=$SSHD_DIR
	# one random file for every test (copied: some tests change theirs)
	head -c "$SIZE" /dev/urandom >"$d/big"
	start_sshd "$d" && return 0
	cat "$d/sshd.log" >&2
	return 1
}

teardown_file() {
	if [ -f "$SSHD_DIR/sshd.bgpid" ]; then
		kill "$(cat "$SSHD_DIR/sshd.bgpid")" 2>/dev/null || true
	fi
	rm -rf "$SSHD_DIR"
}

# The transport and the far end's stager, each through a stand-in that
# writes its pid ($T/ssh.pid, $T/serve.pid) and execs the real one.
make_wrappers() {
	cat >"$T/ssh-wrap" <<-EOF
		#!/bin/sh
		echo \$\$ >"$T/ssh.pid"
		exec $RSH "\$@"
	EOF
	cat >"$T/serve-wrap" <<-EOF
		#!/bin/sh
		echo \$\$ >"$T/serve.pid"
		exec "$STAGER" "\$@"
	EOF
	chmod +x "$T/ssh-wrap" "$T/serve-wrap"
}

# a tree with the big file and a small one: src/ (push) or remote/ds (pull)
make_src() { # DIR
	mkdir -p "$1"
	cp "$SSHD_DIR/big" "$1/big"
	echo small >"$1/small"
}

xfer() { # push|pull ARGS...: over the real sshd, through the stand-ins (a
	# function: not for a background process whose pid is to be killed)
	local verb=$1
	shift
	"$STAGER" "$verb" --rsh "$T/ssh-wrap" --remote-stager "$T/serve-wrap" "$@"
}

# bytes of the partial copy kept in DIR (0: none)
kept() { # DIR
	local f
	f=$(find "$1" -maxdepth 1 -name '.stager-resume.*' ! -name '*.ck' 2>/dev/null | head -n 1)
	if [ -n "$f" ]; then stat -c %s "$f"; else echo 0; fi
}

past() { # DIR BYTES: the partial copy in DIR holds BYTES or more
	[ "$(kept "$1")" -ge "$2" ]
}

# no process has a file under DIR open any more (a far end has gone)
nothing_open_under() { # DIR
	local fds
	fds=$(find /proc/[0-9]*/fd \( -lname "$1" -o -lname "$1/*" \) 2>/dev/null || true)
	[ -z "$fds" ]
}

# Start a transfer of the tree (verb: push src to remote/ds, or pull
# remote/ds to back) at 32 MiB/s in the background, and wait until its
# partial copy is past PAST bytes.  Sets pid and part.
start_cut() { # push|pull [OPTION...]
	local verb=$1
	shift
	make_wrappers
	if [ "$verb" = push ]; then
		make_src src
		mkdir -p remote
		part=remote/.stager-partial.ds
		case " $* " in *" --pack "*) part=remote/.stager-partial.ds.tar.zst ;; esac
		"$STAGER" push --rsh "$T/ssh-wrap" --remote-stager "$T/serve-wrap" --bwlimit 32M \
			"$@" src "127.0.0.1:$T/remote/ds" 2>"$T/err" 3>&- &
	else
		make_src remote/ds
		part=.stager-partial.back
		"$STAGER" pull --rsh "$T/ssh-wrap" --remote-stager "$T/serve-wrap" --bwlimit 32M \
			"$@" "127.0.0.1:$T/remote/ds" back 2>"$T/err" 3>&- &
	fi
	pid=$! # stager's own
	wait_until 120 past "$part" "$PAST"
}

# After the cut: both ends gone, the partial copy kept past half, nothing
# published.  Sets held (its size).
after_cut() { # EXPECTED-STATUS-OF-THE-CLIENT
	local rc=0
	wait_pid "$pid" 60 || rc=$?
	cat "$T/err"
	[ "$rc" -eq "$1" ]
	wait_until 60 nothing_open_under "$T/remote"
	held=$(kept "$part")
	[ "$held" -ge "$PAST" ]
	[ "$held" -lt "$SIZE" ]
	[ ! -e remote/ds.tar.zst ]
	[ ! -e back ]
}

# The run after the cut: the same tree arrives, and on the wire no more
# than the part that was not kept (plus the manifest and framing).
check_resumed() { # JSON DEST
	local wire
	cat "$T/said"
	wire=$(echo "$1" | jq -r .wire_bytes)
	echo "kept $held of $SIZE bytes; the resumed run: $wire bytes on the wire" >&3
	[ "$wire" -lt $((SIZE - held + 1048576)) ]
	[ "$wire" -lt $((SIZE * 60 / 100)) ]
	# counted as resumed, with the bytes not sent again: neither sent
	# whole nor a delta (small was sent whole, or was there already)
	echo "$1" | jq -e --argjson held "$held" \
		'.resumed_files == 1 and .resumed_bytes == $held and .delta_files == 0 and
		 .whole_files + .reused_files == 1'
	grep -q " 1 resumed ([0-9.]* [KMG]iB saved)" "$T/said"
	cmp "$SSHD_DIR/big" "$2/big"
	[ "$(cat "$2/small")" = small ]
	# nothing of the partial copy is left, in the tree or beside it
	run find "$T" -name '.stager-resume.*'
	[ -z "$output" ]
	[ ! -e "$part" ]
}

@test "push: kill -9 of the client; the next push sends only the rest" {
	start_cut push
	kill -9 "$pid"
	after_cut 137
	out=$(xfer push --json src "127.0.0.1:$T/remote/ds" 2>"$T/said")
	check_resumed "$out" remote/ds
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
}

@test "push: kill -9 of stager serve; the next push sends only the rest" {
	start_cut push
	kill -9 "$(cat "$T/serve.pid")"
	after_cut 6
	grep -q connection "$T/err"
	out=$(xfer push --json src "127.0.0.1:$T/remote/ds" 2>"$T/said")
	check_resumed "$out" remote/ds
}

@test "push: the connection dropped (ssh killed); the next push sends only the rest" {
	start_cut push
	kill -9 "$(cat "$T/ssh.pid")"
	after_cut 6
	out=$(xfer push --json src "127.0.0.1:$T/remote/ds" 2>"$T/said")
	check_resumed "$out" remote/ds
}

@test "pull: kill -9 of the client; the next pull sends only the rest" {
	start_cut pull
	kill -9 "$pid"
	after_cut 137
	out=$(xfer pull --json "127.0.0.1:$T/remote/ds" back 2>"$T/said")
	check_resumed "$out" back
}

@test "pull: kill -9 of stager serve; the next pull sends only the rest" {
	start_cut pull
	kill -9 "$(cat "$T/serve.pid")"
	after_cut 6
	grep -q connection "$T/err"
	out=$(xfer pull --json "127.0.0.1:$T/remote/ds" back 2>"$T/said")
	check_resumed "$out" back
}

@test "pull: the connection dropped (ssh killed); the next pull sends only the rest" {
	start_cut pull
	kill -9 "$(cat "$T/ssh.pid")"
	after_cut 6
	out=$(xfer pull --json "127.0.0.1:$T/remote/ds" back 2>"$T/said")
	check_resumed "$out" back
}

@test "push --pack: a cut push resumes; the pack holds the whole file" {
	start_cut push --pack
	kill -9 "$pid"
	after_cut 137
	out=$(xfer push --pack --json src "127.0.0.1:$T/remote/ds" 2>"$T/said")
	stager verify remote/ds.tar.zst
	stager unpack remote/ds.tar.zst unpacked
	check_resumed "$out" unpacked
}

# a file that changed where the receiver's part of it lies: the sender's
# check fails and it is sent whole; the result is the new file
changed_is_sent_whole() { # JSON DEST
	local wire
	wire=$(echo "$1" | jq -r .wire_bytes)
	echo "kept $held bytes of an older version; the next run: $wire bytes on the wire" >&3
	[ "$wire" -ge "$SIZE" ]
	[ "$(echo "$1" | jq -r .whole_files)" -ge 1 ]
	echo "$1" | jq -e '.resumed_files == 0 and .resumed_bytes == 0'
	run ! grep -q resumed "$T/said"
	cmp "$3" "$2/big"
	run find "$T" -name '.stager-resume.*'
	[ -z "$output" ]
}

@test "push: a file changed between the runs is sent whole and right" {
	start_cut push
	kill -9 "$pid"
	after_cut 137
	printf 'changed' | dd of=src/big bs=1 seek=1000 conv=notrunc 2>/dev/null
	out=$(xfer push --json src "127.0.0.1:$T/remote/ds" 2>"$T/said")
	changed_is_sent_whole "$out" remote/ds src/big
}

@test "pull: a file changed between the runs is sent whole and right" {
	start_cut pull
	kill -9 "$(cat "$T/ssh.pid")"
	after_cut 6
	printf 'changed' | dd of=remote/ds/big bs=1 seek=1000 conv=notrunc 2>/dev/null
	out=$(xfer pull --json "127.0.0.1:$T/remote/ds" back 2>"$T/said")
	changed_is_sent_whole "$out" back remote/ds/big
}

# frames by hand, as a hostile peer would send them (see push.bats)
frame() { # type payload-bytes-file
	perl -e 'local $/; binmode STDIN; binmode STDOUT; my $p = <STDIN>;
		print pack("CV", $ARGV[0], length $p), $p' "$1" <"$2"
}
msg() { # type perl-expression: a frame whose payload the expression makes
	perl -e 'binmode STDOUT; print eval $ARGV[0]' "$2" >"$T/p"
	frame "$1" "$T/p"
}
hello2() { # push|pull path: a version 2 greeting
	msg 1 "'STGWIRE1' . pack('VCC', 2, $([ "$1" = push ] && echo 1 || echo 2), 0) . '$2'"
}
# serve's answer to the stream in $T/stream: its status, and the text of
# what it wrote (ERROR's message among its frames) in output
serve_says() {
	run sh -c '"$1" serve <"$2" >"$3" 2>&1' sh "$STAGER" "$T/stream" "$T/said"
	output=$(strings "$T/said")
	echo "status $status: $output"
}

@test "serve: an offer past the file's end, or an offset never offered, is a protocol error" {
	# as the sender (pull): f has 1000 bytes, entry 0 of the manifest
	mkdir -p remote/ds
	head -c 1000 /dev/urandom >remote/ds/f
	for want in "pack('VCQ<', 0, 0, 1001) . \"\\x01\" x 16" \
		"pack('VCQ<', 0, 0, 0) . \"\\x01\" x 16" "pack('VC', 0, 0)"; do
		{ hello2 pull "$T/remote/ds"; msg 6 "$want"; } >"$T/stream"
		serve_says
		[ "$status" -eq 6 ]
		[[ "$output" == *"protocol error: a"*"request"* ]]
	done
	# the same with an offer that fits gets past the request (to the end
	# of the stream)
	{ hello2 pull "$T/remote/ds"; msg 6 "pack('VCQ<', 0, 0, 1000) . \"\\x01\" x 16"; } >"$T/stream"
	serve_says
	[ "$status" -eq 6 ]
	[[ "$output" != *"protocol error"* ]]
	# as the receiver (push): no offer was made, so data from byte 7 is
	# refused, as is a FILE of version 1's shape
	for file in "pack('VCQ<', 0, 0, 7)" "pack('VC', 0, 0)"; do
		{
			hello2 push "$T/remote/new"
			msg 4 "\"\\0\" . pack('v', 46) . pack('CVQ<q<V', 1, 0644, 0, 0, 0) . \"\\0\" x 16 . pack('vv', 1, 0) . 'f'"
			msg 5 "pack('Q<', 1) . \"\\0\" x 32 . pack('VQ<', 0755, 0)"
			msg 9 "$file"
		} >"$T/stream"
		serve_says
		[ "$status" -eq 6 ]
		[[ "$output" == *"protocol error: "*"FILE"* || "$output" == *"was not asked for like this"* ]]
		[ ! -e remote/new ]
	done
}
