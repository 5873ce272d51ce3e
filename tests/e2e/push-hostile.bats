#!/usr/bin/env bats
# push, pull and serve against hostile ends: --rsh stand-ins that damage
# or cut the stream either way, and a hostile client talking to serve
# directly.  (Apart from push.bats, with the same sshd set-up in
# push.bash: together the file neared its time limit on a loaded machine.)

load helpers
load push
bats_require_minimum_version 1.5.0

# a transport that runs the real serve but damages one direction of the
# stream: it flips one byte at offset $FLIP_AT, or cuts it at $CUT_AT
# (unbuffered: a transport that held bytes back would deadlock anything)
make_hostile_rsh() {
	cat >"$T/damage" <<-'EOF'
		#!/usr/bin/perl
		binmode STDIN; binmode STDOUT;
		my ($at, $cut, $pos) = ($ENV{FLIP_AT} // -1, $ENV{CUT_AT} // -1, 0);
		while ((my $n = sysread(STDIN, my $b, 65536)) > 0) {
			if ($at >= $pos && $at < $pos + $n) {
				substr($b, $at - $pos, 1) = chr(ord(substr($b, $at - $pos, 1)) ^ 0x5a);
			}
			if ($cut >= 0 && $pos + $n >= $cut) {
				syswrite(STDOUT, substr($b, 0, $cut - $pos));
				exit 0;
			}
			$pos += $n;
			syswrite(STDOUT, $b);
		}
	EOF
	chmod +x "$T/damage"
	# DAMAGE=out damages what serve sends, else what it receives
	cat >"$T/hostile-rsh" <<-EOF
		#!/bin/sh
		shift
		if [ "\${DAMAGE:-in}" = out ]; then
			"\$@" | "$T/damage"
		else
			"$T/damage" | "\$@"
		fi
	EOF
	chmod +x "$T/hostile-rsh"
}

hpush() { stager push --rsh "$T/hostile-rsh" --remote-stager "$STAGER" "$@"; }

@test "push: damaged frames from a hostile transport: exit 4 or 6, a message, nothing published" {
	make_hostile_rsh
	make_files old 1 1000
	make_files src 20 30000
	mkdir remote
	spush old "127.0.0.1:$T/remote/ds"
	before=$(tree_sig remote/ds)
	# a byte in the manifest, in a frame header, deep in file data
	for at in 60 200 1500 150000 400000; do
		FLIP_AT=$at run hpush src "x:$T/remote/ds"
		echo "flip at $at: status $status: $output"
		[ "$status" -eq 4 ] || [ "$status" -eq 6 ]
		[ -n "$output" ]
		[ "$(tree_sig remote/ds)" = "$before" ]
		# what was checked stays for a resume; start afresh for the next offset
		rm -rf remote/.stager-partial.ds
	done
	# a first push damaged: nothing appears at all
	FLIP_AT=300000 run hpush src "x:$T/remote/new"
	[ "$status" -eq 4 ] || [ "$status" -eq 6 ]
	[ ! -e remote/new ]
}

@test "push: a stream cut short: exit 6, nothing published" {
	make_hostile_rsh
	make_files src 20 30000
	mkdir remote
	for cut in 3 100 5000 300000; do
		CUT_AT=$cut run hpush src "x:$T/remote/ds"
		echo "cut at $cut: status $status: $output"
		[ "$status" -eq 6 ]
		[ ! -e remote/ds ]
	done
}

@test "pull: damaged frames from the far end: exit 4 or 6, LOCAL as it was" {
	make_hostile_rsh
	make_files src 20 30000
	mkdir remote
	spush src "127.0.0.1:$T/remote/ds"
	make_files local 1 1000
	before=$(tree_sig local)
	for at in 30 70 1000 100000 500000; do
		DAMAGE=out FLIP_AT=$at run stager pull --replace --rsh "$T/hostile-rsh" \
			--remote-stager "$STAGER" "x:$T/remote/ds" local
		echo "flip at $at: status $status: $output"
		[ "$status" -eq 4 ] || [ "$status" -eq 6 ]
		[ "$(tree_sig local)" = "$before" ]
		rm -rf .stager-partial.local
	done
}

# frames by hand: type, then payload (perl pack templates and values)
frame() { # type payload-bytes-file
	perl -e 'local $/; binmode STDIN; binmode STDOUT; my $p = <STDIN>;
		print pack("CV", $ARGV[0], length $p), $p' "$1" <"$2"
}
hello() { # path
	perl -e 'binmode STDOUT; print "STGWIRE1", pack("VCC", 1, 1, 0), $ARGV[0]' "$1" >"$T/p"
	frame 1 "$T/p"
}
entry() { # type path [link]: a batch of one entry, not compressed
	perl -e 'binmode STDOUT; my ($t, $p, $l) = @ARGV; $l //= "";
		my $e = pack("CVQ<q<V", $t, 0644, 0, 0, 0) . "\0" x 16 .
		        pack("vv", length $p, length $l) . $p . $l;
		print "\0", pack("v", length $e), $e' "$@" >"$T/p"
	frame 4 "$T/p"
}

# nothing outside remote/ changed: outside/ holds secret alone, its one link
# and its content; no escape anywhere under $T; serve left nothing in remote/
nothing_escaped() {
	[ "$(ls -A outside)" = secret ]
	[ "$(stat -c %h outside/secret)" -eq 1 ]
	[ "$(cat outside/secret)" = "not for the client" ]
	run find "$T" -name escape
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run grep -rl "not for the client" remote
	[ "$status" -eq 1 ]
	[ -z "$(ls -A remote)" ]
}

@test "serve: refuses paths outside PATH, whatever the client sends" {
	mkdir remote outside
	echo "not for the client" >outside/secret
	# the same streams with clean paths get past the entries to the end of
	# the stream (6): so a 4 below is serve refusing the path, nothing else
	{ hello "$T/remote/ds"; entry 1 f; entry 4 h f; } >"$T/stream"
	run "$STAGER" serve <"$T/stream"
	[ "$status" -eq 6 ]
	[[ "$output" != *refusing* ]]
	for bad in "../escape" "$T/outside/escape" "a/../../escape" "." ""; do
		{ hello "$T/remote/ds"; entry 1 "$bad"; } >"$T/stream"
		run "$STAGER" serve <"$T/stream"
		echo "'$bad': status $status: $output"
		[ "$status" -eq 4 ]
		[[ "$output" == *"refusing the path '$bad'"* ]]
		nothing_escaped
	done
	# through a symlink of the tree: the parent must be a directory entry
	{
		hello "$T/remote/ds"
		entry 3 l "$T/outside"
		entry 1 l/escape
	} >"$T/stream"
	run "$STAGER" serve <"$T/stream"
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"refusing 'l/escape'"* ]]
	nothing_escaped
	# a hardlink to something outside (relative to PATH or to its parent,
	# or absolute): never linked to, never read
	for target in ../outside/secret ../../outside/secret "$T/outside/secret"; do
		{
			hello "$T/remote/ds"
			entry 1 f
			entry 4 h "$target"
		} >"$T/stream"
		run "$STAGER" serve <"$T/stream"
		echo "'$target': status $status: $output"
		[ "$status" -eq 4 ]
		[[ "$output" == *"'h': a hardlink to a bad path"* ]]
		nothing_escaped
	done
}

@test "serve: garbage, a wrong version or an oversize frame is a protocol error" {
	printf 'SSH-2.0-not-stager\r\n' >"$T/stream"
	run "$STAGER" serve <"$T/stream"
	[ "$status" -eq 6 ]
	perl -e 'binmode STDOUT; print "STGWIRE1", pack("VCC", 0, 1, 0), "/tmp/x"' >"$T/p"
	frame 1 "$T/p" >"$T/stream"
	run "$STAGER" serve <"$T/stream"
	[ "$status" -eq 6 ]
	run -6 "$STAGER" serve <"$T/stream"
	strings <<<"$output" | grep -q 'protocol version 0 at the client'
	# a newer client is answered in this end's version (4), and may speak it
	perl -e 'binmode STDOUT; print "STGWIRE1", pack("VCC", 99, 2, 0), "'"$T"'"' >"$T/p"
	frame 1 "$T/p" >"$T/stream"
	# (it then reads the tree, and the stream ends)
	local rc=0
	"$STAGER" serve <"$T/stream" >"$T/out" 2>/dev/null || rc=$?
	[ $rc -eq 6 ]
	[ "$(head -c 17 "$T/out" | od -An -tx1 | tr -d ' \n')" = "020c0000005354475749524531""04000000" ]
	perl -e 'binmode STDOUT; print pack("CV", 4, 0x7fffffff)' >"$T/stream"
	run "$STAGER" serve <"$T/stream"
	[ "$status" -eq 6 ]
}
