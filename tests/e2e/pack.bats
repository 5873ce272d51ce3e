#!/usr/bin/env bats
# stager pack, and what plain tar and zstd make of a pack.

load helpers
bats_require_minimum_version 1.5.0

@test "pack round trip keeps everything, and tar reads the pack identically" {
	make_awkward_tree src
	mkfifo src/fifo
	run stager pack src -o p.tar.zst --progress=none
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "warning: skipping 'fifo'"
	[[ "${lines[0]}" =~ ^[0-9a-f]{64}\ \ p.tar.zst$ ]] || echo "$output" | grep -qE '^[0-9a-f]{64}  p.tar.zst$'
	rm src/fifo

	stager unpack p.tar.zst out -q
	mkdir tar1 tar2
	tar --zstd -xf p.tar.zst -C tar1 2>/dev/null
	zstd -dc p.tar.zst 2>/dev/null | tar -xf - -C tar2 2>/dev/null
	[ "$(tree_sig src)" = "$(tree_sig out)" ]
	[ "$(tree_sig src)" = "$(tree_sig tar1)" ]
	[ "$(tree_sig src)" = "$(tree_sig tar2)" ]
	[ "$(tree_sig_ns src)" = "$(tree_sig_ns out)" ]
	[ "$(link_groups src)" = "$(link_groups out)" ]
	[ "$(link_groups src)" = "$(link_groups tar1)" ]
}

@test "packing the same tree twice gives the same digest" {
	make_awkward_tree src
	stager pack -q src -o one.tar.zst >one.out
	stager pack -q src -o two.tar.zst --threads 1 >two.out
	d1=$(cut -d' ' -f1 one.out)
	d2=$(cut -d' ' -f1 two.out)
	[[ "$d1" =~ ^[0-9a-f]{64}$ ]]
	[ "$d1" = "$d2" ]
	cmp one.tar.zst two.tar.zst
}

@test "the default output is DIR.tar.zst beside DIR" {
	mkdir -p data/ds && echo x >data/ds/f
	run stager pack -q data/ds/
	[ "$status" -eq 0 ]
	[ -f data/ds.tar.zst ]
	(cd data/ds && stager pack -q .)
	[ -f data/ds.tar.zst ]
}

@test "a pack written inside the tree does not contain itself" {
	mkdir src && echo a >src/a
	stager pack -q src -o src/self.tar.zst
	stager pack -q src -o src/self.tar.zst
	run stager ls src/self.tar.zst
	[ "$status" -eq 0 ]
	[ "$output" = "a" ]
}

@test "pack --json prints one object" {
	mkdir src && echo a >src/a && mkdir src/d
	run stager pack -q src -o p.tar.zst --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.files == 1 and .dirs == 1 and (.digest | length) == 64 and .pack == "p.tar.zst"'
}

@test "a pack too quick to time shows no rate on its bar, never 0 B/s" {
	mkdir src
	echo a >src/a
	head -c 100000 /dev/urandom >src/b
	run --separate-stderr stager --progress=bar pack src -o p.tar.zst
	[ "$status" -eq 0 ]
	printf '%s' "$stderr" | tr '\r' '\n'
	[[ "$stderr" == *"[##############################] 100% 97.7 KiB / 97.7 KiB"* ]]
	[[ "$stderr" != *" 0 B/s"* ]]
}

@test "frames are independent and cut at the frame size" {
	mkdir src
	head -c 5000000 /dev/urandom >src/a
	for i in $(seq 1 200); do echo "$i" >"src/f$i"; done
	stager pack -q src -o p.tar.zst --frame-size 256K
	stager ls --json p.tar.zst >ls.json
	frames=$(jq .frames ls.json)
	[ "$frames" -ge 19 ]
	# concatenated independent frames: zstd lists them all, and the
	# trailer as one skippable frame
	zstd -lv p.tar.zst >zstd.txt 2>&1
	cat zstd.txt
	zframes=$(sed -n 's/^# Zstandard Frames: *\([0-9][0-9]*\)$/\1/p' zstd.txt)
	[ "$zframes" -gt 1 ]
	[ "$zframes" -eq "$frames" ]
	grep -qx '# Skippable Frames: 1' zstd.txt
}

@test "pack of a missing or non-directory source exits 2" {
	run stager pack no-such-dir
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "no-such-dir"
	echo x >file
	run stager pack file -o f.tar.zst
	[ "$status" -eq 2 ]
	[ ! -e f.tar.zst ]
}

@test "a failed pack leaves the old output and no temporary file" {
	mkdir src && echo a >src/a
	stager pack -q src -o p.tar.zst
	cp p.tar.zst before.tar.zst
	# an output directory that cannot be written
	mkdir ro && chmod 0500 ro
	if [ "$(id -u)" -ne 0 ]; then
		run stager pack src -o ro/p.tar.zst
		[ "$status" -ne 0 ]
	fi
	# interrupt a pack of a big tree: exit 5, old pack intact
	seq 1 8000000 >src/big
	"$STAGER" pack -q src -o p.tar.zst --level 19 --threads 1 >/dev/null &
	pid=$!
	# signalled while it writes the new pack
	wait_until 30 compgen -G '.stager-tmp.p.tar.zst.*'
	kill -TERM $pid
	st=0
	wait_pid $pid 30 || st=$?
	[ "$st" -eq 5 ]
	cmp p.tar.zst before.tar.zst
	[ -z "$(ls -A . | grep stager-tmp)" ]
}

@test "pack -o an existing directory is refused (exit 1): the directory stays, with all it holds" {
	mkdir src && echo a >src/a
	mkdir results && echo precious >results/model.pt
	run stager pack src -o results
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "'results' is a directory"
	[ "$(cat results/model.pt)" = precious ]
	[ "$(ls -A results)" = model.pt ]
	# the tree itself given as the output
	run stager pack src -o src
	[ "$status" -eq 1 ]
	[ "$(cat src/a)" = a ]
	[ -z "$(ls -A | grep stager)" ]
	run --separate-stderr stager pack --json src -o results/
	[ "$status" -eq 1 ]
	jq -e '.ok == false and .exit == 1' <<<"$output"
}

@test "pack onto a full filesystem: exit 3 naming the pack and the figures; nothing left" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs"
	mkdir src small
	head -c 3000000 /dev/urandom >src/r
	mount -t tmpfs -o size=1m tmpfs small || skip "cannot mount tmpfs"
	run stager pack src -o small/p.tar.zst
	left=$(ls -A small)
	umount small
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -Eq "not enough space for 'small/p.tar.zst': the filesystem filled after [0-9.]+ [KM]iB of the pack, [0-9.]+ [KM]iB free without it"
	[ -z "$left" ]
}

@test "pack of a directory it cannot reach says why, not that it is missing" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to act as another user"
	as_user_setup
	mkdir -p priv/ds && echo a >priv/ds/a && chmod 0700 priv
	run as_user "$AS_USER_STAGER" pack priv/ds -o "$T/p.tar.zst"
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "cannot read 'priv/ds': Permission denied"
}
