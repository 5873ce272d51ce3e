#!/usr/bin/env bats
# stager verify and ls, on good and bad packs.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	PACKDIR=$(mktemp -d)
	export PACKDIR
	mkdir "$PACKDIR/src"
	head -c 2000000 /dev/urandom >"$PACKDIR/src/big"
	for i in $(seq 1 100); do echo "file $i" >"$PACKDIR/src/f$i"; done
	"$STAGER" pack -q "$PACKDIR/src" -o "$PACKDIR/p.tar.zst" --frame-size 256K >/dev/null
}

teardown_file() { rm -rf "$PACKDIR"; }

@test "an intact pack verifies" {
	run stager verify "$PACKDIR/p.tar.zst"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "OK"
	run stager verify --json -q "$PACKDIR/p.tar.zst"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.ok == true'
}

@test "verify --progress=bar on a terminal: the bar is ended before the result, which has its own line" {
	command -v script >/dev/null || skip "needs script (util-linux)"
	cp "$PACKDIR/p.tar.zst" p.tar.zst
	# stdout and stderr on one terminal (a pty), as a user sees them
	run script -qec "\"$STAGER\" verify --progress=bar p.tar.zst" /dev/null
	printf '%s' "$output" | od -c | tail -8
	[ "$status" -eq 0 ]
	[[ "$output" == *"[##############################] 100%"* ]]
	# what the terminal shows: each piece between carriage returns and
	# line feeds, without its escape sequences; the result alone on one
	ok=$(printf '%s' "$output" | tr '\r' '\n' | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' | grep -F ': OK')
	[ "$ok" = "p.tar.zst: OK" ]
}

@test "a flipped bit anywhere gives exit 4 with the problem named" {
	size=$(stat -c %s "$PACKDIR/p.tar.zst")
	for off in 0 1000 700000 1500000 $((size / 2)) $((size - 3000)) $((size - 100)) $((size - 49)) $((size - 1)); do
		cp "$PACKDIR/p.tar.zst" bad.tar.zst
		flip_byte bad.tar.zst "$off"
		run stager verify bad.tar.zst
		[ "$status" -eq 4 ] || { echo "offset $off: status $status: $output"; false; }
		echo "$output" | grep -qE "damaged|mismatch|not a stager pack"
	done
}

@test "truncated, empty and foreign files are refused with exit 4" {
	head -c 1000000 "$PACKDIR/p.tar.zst" >trunc.tar.zst
	: >empty.tar.zst
	tar --zstd -cf foreign.tar.zst -C "$PACKDIR" src
	head -c 100000 /dev/urandom >random.bin
	for f in trunc.tar.zst empty.tar.zst foreign.tar.zst random.bin; do
		run stager verify "$f"
		[ "$status" -eq 4 ]
		run stager ls "$f"
		[ "$status" -eq 4 ]
		run stager unpack "$f" out
		[ "$status" -eq 4 ]
		[ ! -e out ]
	done
}

@test "a missing or unreadable pack exits 2" {
	run stager verify nope.tar.zst
	[ "$status" -eq 2 ]
	run stager verify "$PACKDIR"
	[ "$status" -eq 2 ]
	run stager ls nope.tar.zst
	[ "$status" -eq 2 ]
}

@test "ls lists the pack from its end alone" {
	run stager ls "$PACKDIR/p.tar.zst"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 101 ]
	run stager ls --long "$PACKDIR/p.tar.zst"
	[ "$status" -eq 0 ]
	echo "$output" | grep -qE '^-rw-r--r-- +2000000 .* big$'
	run stager ls --json "$PACKDIR/p.tar.zst"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.files == 101 and (.entries | length) == 101 and (.entries[0].xxh3 | length) == 32'
	# one read of the file's end: strace sees at most 2 reads on the pack,
	# none of them at the start
	command -v strace >/dev/null || skip "no strace"
	ASAN_OPTIONS=detect_leaks=0 strace -f -y -e trace=read,pread64 -o trace "$STAGER" ls "$PACKDIR/p.tar.zst" >/dev/null
	grep 'p.tar.zst>' trace >reads
	cat reads
	n=$(wc -l <reads)
	[ "$n" -ge 1 ]
	[ "$n" -le 2 ]
	# pread64(fd, buf, count, offset): none at offset 0
	run ! grep -qE ', 0\) += ' reads
}

@test "ls shows control bytes and backslashes of names as \\xNN, one line each; --json keeps them" {
	mkdir src
	echo x >"src/a
b"
	echo y >"src/$(printf '\033')[31mred"
	echo z >'src/back\slash'
	stager pack -q src -o p.tar.zst
	run --separate-stderr stager ls p.tar.zst
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	[ "${lines[0]}" = '\x1b[31mred' ]
	[ "${lines[1]}" = 'a\x0ab' ]
	[ "${lines[2]}" = 'back\x5cslash' ]
	run --separate-stderr stager ls --long p.tar.zst
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	[[ "$output" != *$'\033'* ]]
	[[ "${lines[1]}" == *' a\x0ab' ]]
	stager ls --json p.tar.zst >ls.json
	[ "$(jq -r '.entries[1].path' ls.json)" = "$(printf 'a\nb')" ]
}
