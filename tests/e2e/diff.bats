#!/usr/bin/env bats
# stager diff: what changed between two packs, from their trailers.

load helpers
bats_require_minimum_version 1.5.0

make_versions() {
	mkdir -p v1/sub
	for i in 1 2 3; do echo "$i" >"v1/f$i"; done
	echo s >v1/sub/s
	head -c 20000000 /dev/urandom >v1/big
	ln -s f1 v1/l
	cp -a v1 v2
	echo changed >v2/f2
	rm v2/f3
	echo new >v2/new
	mkdir v2/newdir
	chmod 600 v2/f1
	touch -d '2001-01-01' v2/sub/s # an mtime alone is no change
	ln -sf f2 v2/l
	stager pack -q v1 -o v1.tar.zst >/dev/null
	stager pack -q v2 -o v2.tar.zst >/dev/null
}

@test "diff lists added, removed and changed entries, and what changed" {
	make_versions
	run stager diff v1.tar.zst v2.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	out=$(stager diff v1.tar.zst v2.tar.zst 2>/dev/null)
	[ "$out" = "$(printf '%s\n' 'M f1 (mode)' 'M f2 (content)' 'M l (link)' 'A new' 'A newdir/' 'D f3')" ]
	echo "$output" | grep -q "2 added (4 B), 1 removed (2 B), 3 changed (8 B now)"
	# the reverse
	stager diff v2.tar.zst v1.tar.zst 2>/dev/null >rev.txt
	grep -qx 'A f3' rev.txt
	grep -qx 'D new' rev.txt
	# the same pack: nothing
	same=$(stager diff v1.tar.zst v1.tar.zst 2>/dev/null)
	[ -z "$same" ]
}

@test "diff --json" {
	make_versions
	stager diff --json v1.tar.zst v2.tar.zst 2>/dev/null >d.json
	jq -e '.added | map(.path) == ["new", "newdir"]' d.json
	jq -e '.removed == [{"path": "f3", "size": 2}]' d.json
	jq -e '.changed | map(.path) == ["f1", "f2", "l"]' d.json
	jq -e '.changed[1] == {"path": "f2", "size": 8, "old_size": 2, "what": ["content"]}' d.json
	jq -e '.unchanged == 3 and .changed_bytes == 8' d.json
	stager pack -q v2 -o again.tar.zst >again.out
	[ "$(jq -r .new d.json)" = "$(cut -d' ' -f1 again.out)" ]
}

@test "diff reads the trailers only, not the data" {
	make_versions
	ASAN_OPTIONS=detect_leaks=0 strace -f -y -e trace=read,pread64 -e signal=none -o trace "$STAGER" diff v1.tar.zst v2.tar.zst >/dev/null 2>&1
	# every read of either pack, read() or pread64()
	grep -E '^[0-9]+ +(read|pread64)\([0-9]+<[^>]*/v[12]\.tar\.zst>' trace >reads
	bytes=$(sed -n 's/.* = \([0-9][0-9]*\)$/\1/p' reads | paste -sd+ | bc)
	echo "read $bytes bytes of packs of $(stat -c %s v1.tar.zst) and $(stat -c %s v2.tar.zst)"
	# both trailers were read; nothing like the data (20 MB each)
	grep -q '/v1\.tar\.zst>' reads
	grep -q '/v2\.tar\.zst>' reads
	[ "$bytes" -gt 0 ]
	[ "$bytes" -lt 3000000 ]
}

@test "diff of a missing or damaged pack: exit 2 or 4, named" {
	make_versions
	run stager diff v1.tar.zst nowhere.tar.zst
	[ "$status" -eq 2 ]
	echo "$output" | grep -q nowhere.tar.zst
	cp v2.tar.zst bad.tar.zst
	size=$(stat -c %s bad.tar.zst)
	flip_byte bad.tar.zst $((size - 100))
	run stager diff v1.tar.zst bad.tar.zst
	[ "$status" -eq 4 ]
	echo "$output" | grep -q bad.tar.zst
	run stager diff v1.tar.zst
	[ "$status" -eq 1 ]
}

@test "diff shows control bytes of names as \\xNN, one line each" {
	mkdir v1 v2
	echo a >v1/a
	echo a >v2/a
	echo x >"v2/new
line"
	echo y >"v2/$(printf '\033')[2J"
	stager pack -q v1 -o v1.tar.zst >/dev/null
	stager pack -q v2 -o v2.tar.zst >/dev/null
	run --separate-stderr stager diff v1.tar.zst v2.tar.zst
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	[ "${lines[0]}" = 'A \x1b[2J' ]
	[ "${lines[1]}" = 'A new\x0aline' ]
}
