#!/usr/bin/env bats
# Delta packs: `pack --base` writes a delta beside the new pack; `stage` of
# the new pack on a node that caches the old one reads only the delta
# (counted with strace), builds the new tree and checks it; anything wrong
# with the delta falls back to the full read (delta-fallback.bats,
# delta-base.bats).

load helpers
load delta
bats_require_minimum_version 1.5.0

@test "pack --base writes the delta beside the pack, lists it, and changes nothing else" {
	make_v1 v1 200
	make_v2 v1 v2 200
	"$STAGER" pack -q v1 -o shared/v1.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o plain.tar.zst >/dev/null
	run "$STAGER" pack v2 -o shared/v2.tar.zst --base shared/v1.tar.zst
	[ "$status" -eq 0 ]
	echo "$output"
	d1=$(digest_of shared/v2.tar.zst)
	[[ "$output" == *"$d1  shared/v2.tar.zst"* ]]
	delta=$(ls shared/ | grep '^v2\.tar\.zst\.delta-')
	[ "$(echo "$delta" | wc -l)" -eq 1 ]
	[[ "$output" == *"delta from 'shared/v1.tar.zst'"* ]]
	# 2 images and hello.txt changed; 2 added; 2 removed and 1 renamed
	[[ "$output" == *"3 changed"* ]]
	[[ "$output" == *"2 added"* ]]
	[[ "$output" == *"3 removed"* ]]
	[[ "$output" == *"1 renamed or copied"* ]]
	# the pack is what it would be without --base (the same digest: the
	# same frames), its trailer lists the delta
	[ "$d1" = "$(digest_of plain.tar.zst)" ]
	deltas_are shared/v2.tar.zst --arg d "$delta" '.deltas == [{"base": .deltas[0].base, "file": $d}]'
	deltas_are plain.tar.zst '.deltas == []'
	"$STAGER" verify shared/v2.tar.zst
	mkdir x
	tar --zstd -xf shared/v2.tar.zst -C x
	same_tree v2 x
	# the delta is small: the changed bytes, the new files, a few headers
	size=$(stat -c %s "shared/$delta")
	echo "delta: $size bytes"
	[ "$size" -lt 200000 ]
	# --json says the same
	run "$STAGER" pack -q v2 -o shared/v2.tar.zst --base shared/v1.tar.zst --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.deltas | length == 1'
	echo "$output" | jq -e '.deltas[0] | .patched == 3 and .added == 2 and .removed == 3 and .copied == 1'
	echo "$output" | jq -e --arg d "$delta" '.deltas[0].file == $d'
}

@test "staging v2 with v1 cached reads the delta only (strace): 1% changed, <= 10% read" {
	make_v1 v1 300
	make_v2 v1 v2 300
	"$STAGER" pack -q v1 -o shared/v1.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o shared/v2.tar.zst --base shared/v1.tar.zst >/dev/null
	"$STAGER" stage -q shared/v1.tar.zst s1 >/dev/null
	ASAN_OPTIONS=detect_leaks=0 strace -f -y -e trace=read,pread64 -e signal=none -o trace \
		"$STAGER" stage --json shared/v2.tar.zst s2 >out.json
	cat out.json
	jq -e '.delta == true and .hit == false' out.json
	bytes=$(shared_bytes trace)
	size=$(stat -c %s shared/v2.tar.zst)
	echo "read $bytes of $size bytes from the shared directory"
	[ "$bytes" -gt 0 ] # the trace sees the reads of the delta at all
	[ "$bytes" -le $((size / 10)) ]
	[ "$(jq .source_bytes out.json)" -le $((size / 10)) ]
	# the same tree as a full read of v2, and as v2 itself
	same_tree v2 s2
	[ "$(entry_sig s2)" = "$(full_stage_sig shared/v2.tar.zst)" ]
	# the entry is a real one: a warm stage hits it, --verify re-checks it
	run "$STAGER" stage --json -q --verify shared/v2.tar.zst s3
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.hit == true'
	# unchanged files share the cached v1's blocks
	[ "$(stat -c %h s2/class_9/img_9.jpg)" -eq 2 ]
	[ "$(stat -c %i s2/class_9/img_9.jpg)" = "$(stat -c %i s1/class_9/img_9.jpg)" ]
	# and v1 stays intact
	same_tree v1 s1
}

@test "a 64 MiB image with 1 MiB changed: the delta path reads at most 8 MiB" {
	mkdir img1
	head -c 67108864 /dev/urandom >img1/image.sif
	cp -a img1 img2
	head -c 1048576 /dev/urandom | dd of=img2/image.sif bs=1M seek=40 conv=notrunc status=none
	"$STAGER" pack -q img1 -o shared/img1.tar.zst >/dev/null
	"$STAGER" pack -q img2 -o shared/img2.tar.zst --base shared/img1.tar.zst >/dev/null
	ls -l shared
	"$STAGER" stage -q shared/img1.tar.zst s1 >/dev/null
	ASAN_OPTIONS=detect_leaks=0 strace -f -y -e trace=read,pread64 -e signal=none -o trace \
		"$STAGER" stage --json shared/img2.tar.zst s2 >out.json
	cat out.json
	jq -e '.delta == true' out.json
	bytes=$(shared_bytes trace)
	echo "read $bytes bytes from the shared directory"
	[ "$bytes" -gt 0 ] # the trace sees the reads of the delta at all
	[ "$bytes" -le $((8 * 1048576)) ]
	cmp img2/image.sif s2/image.sif
}

@test "on XFS (reflink) a patched image shares the base's blocks: its changes cost disk, not its size" {
	command -v mkfs.xfs >/dev/null || skip "no mkfs.xfs (xfsprogs)"
	truncate -s 400M xfs.img
	mkfs.xfs -q xfs.img
	mkdir x
	mount -o loop xfs.img x || skip "cannot loop-mount here"
	mkdir img1
	head -c 67108864 /dev/urandom >img1/image.sif
	cp -a img1 img2
	head -c 1048576 /dev/urandom | dd of=img2/image.sif bs=1M seek=40 conv=notrunc status=none
	printf 'tail' >>img2/image.sif # and an unaligned end
	"$STAGER" pack -q img1 -o shared/img1.tar.zst >/dev/null
	"$STAGER" pack -q img2 -o shared/img2.tar.zst --base shared/img1.tar.zst >/dev/null
	STAGER_SCRATCH_ROOT="$T/x/scratch" "$STAGER" stage -q shared/img1.tar.zst s1 >/dev/null
	sync
	before=$(df -k --output=used x | tail -1)
	STAGER_SCRATCH_ROOT="$T/x/scratch" "$STAGER" stage --json shared/img2.tar.zst s2 >out.json
	sync
	after=$(df -k --output=used x | tail -1)
	cat out.json
	jq -e '.delta == true' out.json
	cmp img2/image.sif s2/image.sif
	echo "used $before KiB before, $after KiB after"
	# 64 MiB written as 1 MiB of its own and 63 shared
	[ $((after - before)) -lt 16384 ]
	filefrag -v "$(readlink -f s2)/image.sif" | grep -q shared
	STAGER_SCRATCH_ROOT="$T/x/scratch" "$STAGER" verify shared/img2.tar.zst >/dev/null
	rm -rf s1 s2 x/scratch
	umount x
}

@test "a delta that would not pay (every file changed) is passed over for the whole pack, said under -v" {
	mkdir w1
	for i in $(seq 1 40); do head -c 65536 /dev/urandom >"w1/f$i"; done
	cp -a w1 w2
	for i in $(seq 1 40); do head -c 65536 /dev/urandom >"w2/f$i"; done
	"$STAGER" pack -q w1 -o shared/w1.tar.zst >/dev/null
	"$STAGER" pack -q w2 -o shared/w2.tar.zst --base shared/w1.tar.zst >/dev/null
	"$STAGER" stage -q shared/w1.tar.zst s1 >/dev/null
	run "$STAGER" stage -v --json shared/w2.tar.zst s2
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"reading the whole pack, not the delta '"*"shared/w2.tar.zst.delta-"*"would take about"* ]]
	[[ "$output" != *"warning"* ]]
	jq -e '.delta == false' <<<"$(grep '^{' <<<"$output")"
	same_tree w2 s2
}

@test "kill -9 during delta application leaves no wrong entry; the next stage is right" {
	mkdir img1
	head -c 33554432 /dev/urandom >img1/image.sif
	for i in $(seq 1 50); do head -c 20000 /dev/urandom >"img1/f$i"; done
	cp -a img1 img2
	head -c 8388608 /dev/urandom | dd of=img2/image.sif bs=1M seek=8 conv=notrunc status=none
	for i in $(seq 1 50); do echo "$i" >>"img2/f$i"; done
	"$STAGER" pack -q img1 -o shared/img1.tar.zst >/dev/null
	"$STAGER" pack -q img2 -o shared/img2.tar.zst --base shared/img1.tar.zst >/dev/null
	"$STAGER" stage -q shared/img1.tar.zst s1 >/dev/null
	key=$(digest_of shared/img2.tar.zst)
	[ -n "$key" ]
	kill_seed
	mid=0
	for round in 1 2 3 4 5 6; do
		rm -f s2
		# the delta (about 8 MiB) at 4 MiB/s: about 2 s to kill it in
		ms=$((100 + RANDOM % 1800))
		"$STAGER" stage -q --bwlimit 4M shared/img2.tar.zst s2 >/dev/null 2>&1 3>&- &
		# the subject: a kill at a random moment of the build
		kill_after $! "$ms"
		rc=$KILL_RC
		echo "round $round: killed after $ms ms: status $rc"
		# killed (137), or done before the kill came (0)
		[ "$rc" -eq 137 ] || [ "$rc" -eq 0 ]
		mid=$((mid + KILL_MID))
		# the entry is absent or complete and right
		if [ -e "$STAGER_SCRATCH_ROOT/cache/$key" ]; then
			same_tree img2 "$STAGER_SCRATCH_ROOT/cache/$key/data"
			chmod -R u+w "$STAGER_SCRATCH_ROOT"
			rm -rf "$STAGER_SCRATCH_ROOT" s1 s2
			"$STAGER" stage -q shared/img1.tar.zst s1 >/dev/null
		fi
	done
	# half the rounds, at least, cut the build mid-work
	echo "# $mid of 6 rounds killed mid-work (at least 3 must)" >&3
	[ "$mid" -ge 3 ]
	rm -f s2
	run "$STAGER" stage --json shared/img2.tar.zst s2
	echo "$output"
	[ "$status" -eq 0 ]
	same_tree img2 s2
	no_tmp_entry
}

@test "several bases: each version in the cache is a way in" {
	make_v1 v1 100
	make_v2 v1 v2 100
	cp -a v2 v3
	echo three >v3/three.txt
	head -c 4096 /dev/urandom | dd of=v3/class_9/img_19.jpg conv=notrunc status=none
	"$STAGER" pack -q v1 -o shared/v1.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o shared/v2.tar.zst >/dev/null
	run "$STAGER" pack v3 -o shared/v3.tar.zst --base shared/v1.tar.zst --base shared/v2.tar.zst \
		--base shared/v2.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(ls shared | grep -c '^v3\.tar\.zst\.delta-')" -eq 2 ]
	"$STAGER" stage -q shared/v2.tar.zst s2 >/dev/null
	run "$STAGER" stage --json -q shared/v3.tar.zst s3
	[ "$status" -eq 0 ]
	d2=$(digest_of shared/v2.tar.zst)
	echo "$output" | jq -e --arg b "$d2" '.delta == true and .base == $b'
	same_tree v3 s3
	chmod -R u+w "$STAGER_SCRATCH_ROOT"
	rm -rf "$STAGER_SCRATCH_ROOT" s2 s3
	"$STAGER" stage -q shared/v1.tar.zst s1 >/dev/null
	run "$STAGER" stage --json -q shared/v3.tar.zst s3
	[ "$status" -eq 0 ]
	d1=$(digest_of shared/v1.tar.zst)
	echo "$output" | jq -e --arg b "$d1" '.delta == true and .base == $b'
	same_tree v3 s3
}

@test "pack --base: a missing or damaged base, the same tree, a stream output" {
	make_v1 v1 20
	"$STAGER" pack -q v1 -o v1.tar.zst >/dev/null
	run "$STAGER" pack v1 -o v2.tar.zst --base missing.tar.zst
	echo "$output"
	[ "$status" -eq 2 ]
	[[ "$output" == *"missing.tar.zst"* ]]
	[ ! -e v2.tar.zst ]
	head -c 100000 /dev/urandom >junk.tar.zst
	run "$STAGER" pack v1 -o v2.tar.zst --base junk.tar.zst
	echo "$output"
	[ "$status" -eq 4 ]
	[ ! -e v2.tar.zst ]
	# no delta and no temporary (.stager-tmp.*: hidden) left
	left=$(ls -A)
	[[ "$left" != *delta-* ]]
	[[ "$left" != *stager-tmp* ]]
	# the same tree again: no delta from itself, and a pack all the same
	run "$STAGER" pack v1 -o again.tar.zst --base v1.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"same pack"* ]]
	left=$(ls -A)
	[[ "$left" != *again.tar.zst.delta-* ]]
	[[ "$left" != *stager-tmp* ]]
	deltas_are again.tar.zst '.deltas == []'
}

@test "the stage of a delta pack through a symlink finds the delta beside the real pack" {
	make_v1 v1 50
	make_v2 v1 v2 50
	"$STAGER" pack -q v1 -o shared/v1.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o shared/v2.tar.zst --base shared/v1.tar.zst >/dev/null
	ln -s shared/v2.tar.zst latest.tar.zst
	"$STAGER" stage -q shared/v1.tar.zst s1 >/dev/null
	run "$STAGER" stage --json -q latest.tar.zst s2
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.delta == true'
	same_tree v2 s2
}

@test "status PACK: cached or not, its deltas, and what a stage here would read" {
	make_v1 v1 50
	make_v2 v1 v2 50
	"$STAGER" pack -q v1 -o shared/v1.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o shared/v2.tar.zst --base shared/v1.tar.zst >/dev/null
	d1=$(digest_of shared/v1.tar.zst)
	size=$(stat -c %s shared/v2.tar.zst)
	run "$STAGER" status --json shared/v2.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e --arg b "$d1" '.packs[0] | .cached == false and .stage_via == "pack"
		and .deltas[0].base == $b and .deltas[0].base_cached == false and .deltas[0].usable'
	"$STAGER" stage -q shared/v1.tar.zst s1 >/dev/null
	run "$STAGER" status --json shared/v2.tar.zst shared/v1.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e --arg b "$d1" --argjson s "$size" '.packs[0] | .stage_via == $b
		and .deltas[0].base_cached and .stage_reads < $s / 5'
	echo "$output" | jq -e '.packs[1] | .cached and .stage_reads == 0 and .deltas == []'
	run "$STAGER" status shared/v2.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" == *"a stage here reads about"*"the delta from ${d1:0:12}"* ]]
	# a damaged delta file is named, and the stage would read the pack
	printf 'garbage' | dd of="$(ls shared/v2.tar.zst.delta-*)" bs=1 seek=0 conv=notrunc status=none
	run -0 "$STAGER" status --json shared/v2.tar.zst
	echo "$output"
	echo "$output" | jq -e '.packs[0] | .stage_via == "pack" and (.deltas[0].usable | not)
		and (.deltas[0].problem | test("not a stager delta"))'
	# a missing pack exits 2
	run "$STAGER" status shared/nope.tar.zst
	[ "$status" -eq 2 ]
}

@test "verify checks the pack and its deltas: a damaged delta exits 4, a missing one warns" {
	make_v1 v1 50
	make_v2 v1 v2 50
	"$STAGER" pack -q v1 -o shared/v1.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o shared/v2.tar.zst --base shared/v1.tar.zst >/dev/null
	delta=$(ls shared/v2.tar.zst.delta-*)
	run "$STAGER" verify shared/v2.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"$delta: OK"* ]]
	cp "$delta" good
	size=$(stat -c %s "$delta")
	for off in 5 100 $((size / 3)) $((size - 2)); do
		cp good "$delta"
		flip_byte "$delta" "$off"
		run "$STAGER" verify --json shared/v2.tar.zst
		echo "$output"
		[ "$status" -eq 4 ]
		grep '^{' <<<"$output" | jq -e '.ok == false and .deltas[0].state == "damaged"'
	done
	rm "$delta"
	run "$STAGER" verify shared/v2.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"warning: "*"is missing"* ]]
}
