#!/usr/bin/env bats
# stager mount PACK... MOUNTPOINT: the shards of a dataset as one tree, real
# FUSE mounts (CI runs as root and has /dev/fuse); and run --mount of
# several packs (a pattern, or one DIR given to several).

load helpers
load mount_helpers
bats_require_minimum_version 1.5.0

# Three shards of one dataset: shardN.tar.zst of sN/ (train/cN/img, 300 kB
# of noise, and val/vN.txt), and all/, the three trees in one.
make_shards() {
	local s
	mkdir all
	for s in 1 2 3; do
		mkdir -p "s$s/train/c$s" "s$s/val"
		head -c 300000 /dev/urandom >"s$s/train/c$s/img"
		echo "v$s" >"s$s/val/v$s.txt"
		stager pack -q "s$s" -o "shard$s.tar.zst" --frame-size 64K
		cp -a "s$s/." all/
	done
}

@test "mount PACK...: the shards as one tree, each directory once, every byte right, concurrent readers" {
	make_shards
	run -0 stager mount shard1.tar.zst shard2.tar.zst shard3.tar.zst mnt
	echo "$output" | grep -q "mounted 'shard1.tar.zst' and 2 more packs at 'mnt'"
	diff -r all mnt
	[ "$(ls mnt/train | tr '\n' ' ')" = "c1 c2 c3 " ]
	[ "$(ls mnt/val | tr '\n' ' ')" = "v1.txt v2.txt v3.txt " ]
	# one directory, its links counting every pack's subdirectories
	[ "$(stat -c %h mnt/train)" -eq 5 ]
	pids=
	for s in 3 1 2 3 2 1; do
		cmp "all/train/c$s/img" "mnt/train/c$s/img" &
		pids="$pids $!"
	done
	for p in $pids; do wait_pid "$p" 30; done
	run -0 stager status --json
	[ "$(echo "$output" | jq '.mounts[0].packs')" -eq 3 ]
	run -0 stager status
	echo "$output" | grep -q "shard1.tar.zst and 2 more packs (served)"
	umount_gone
	# many small shards: each its own pack, 120 of them
	mkdir many
	for i in $(seq 1 120); do
		mkdir -p "m$i/part"
		echo "$i" >"m$i/part/f$i"
		stager pack -q "m$i" -o "many/p$i.tar.zst"
	done
	run -0 stager mount many/*.tar.zst mnt
	[ "$(ls mnt/part | wc -l)" -eq 120 ]
	[ "$(cat mnt/part/f77)" = 77 ]
	umount_gone
}

@test "mount PACK...: a file two packs hold, a pack given twice, an old format among several: refused, named, nothing mounted" {
	make_shards
	mkdir other && echo clash >other/val && stager pack -q other -o clash.tar.zst
	run stager mount shard1.tar.zst clash.tar.zst mnt
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "'val' is in both 'shard1.tar.zst' and 'clash.tar.zst'"
	! mounted mnt || false
	mkdir -p dup/val && echo again >dup/val/v1.txt && stager pack -q dup -o dup.tar.zst
	run stager mount shard2.tar.zst shard1.tar.zst dup.tar.zst mnt
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "'val/v1.txt' is in both 'shard1.tar.zst' and 'dup.tar.zst'"
	run stager mount shard1.tar.zst ./shard1.tar.zst mnt
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "'./shard1.tar.zst' is given twice"
	cp "$FIXTURES/format2.tar.zst" old.tar.zst
	run stager mount shard1.tar.zst old.tar.zst mnt
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "'old.tar.zst' is a pack of format 2: packs of formats 1 and 2 are mounted one at a time"
	run stager mount shard1.tar.zst missing.tar.zst mnt
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "missing.tar.zst"
	echo junk >junk.tar.zst
	run stager mount shard1.tar.zst junk.tar.zst mnt
	[ "$status" -eq 4 ]
	echo "$output" | grep -q "junk.tar.zst"
	! mounted mnt || false
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" 2>/dev/null | grep pid-)" ]
	# and the one pack alone still mounts
	stager mount old.tar.zst mnt
	umount_gone
}

@test "mount PACK...: a damaged frame of one shard fails its reads only, named by that shard and its own frame" {
	make_shards
	stager ls --long --json shard2.tar.zst >ls.json
	off=$(jq '.frame_table[2].offset + 100' ls.json)
	flip_byte shard2.tar.zst "$off"
	stager mount shard1.tar.zst shard2.tar.zst shard3.tar.zst mnt
	cmp all/train/c1/img mnt/train/c1/img
	cmp all/train/c3/img mnt/train/c3/img
	run cat mnt/train/c2/img
	[ "$status" -ne 0 ]
	echo "$output" | grep -q "Input/output error"
	grep -q "shard2.tar.zst': frame 2 is damaged" "$STAGER_SCRATCH_ROOT/mounts/log"
	[ "$(cat mnt/val/v2.txt)" = v2 ]
	umount_gone
}

@test "mount PACK... in a job: clean --job drops the pins of every pack and ends it" {
	make_shards
	# staged first: the mount serves the node cache's entries and pins them
	for s in 1 2 3; do stager stage -q "shard$s.tar.zst" "staged$s" >/dev/null; done
	job=$((800000 + RANDOM))
	SLURM_JOB_ID=$job stager mount shard1.tar.zst shard2.tar.zst shard3.tar.zst mnt
	pid=$(server_pid)
	diff -r all mnt
	fake_slurm
	export SLURM_STATE=RUNNING SLURM_CTL=UP PATH="$T/bin:$PATH"
	run -0 stager status --json
	[ "$(echo "$output" | jq "[.entries[].pins[] | select(.owner | startswith(\"pid-$pid-\"))] | length")" -eq 3 ]
	run -0 stager clean --job "$job"
	echo "$output" | grep -q "removed mount .* $T/mnt$"
	wait_until 5 gone "$pid"
	! mounted mnt || false
	run -0 stager status --json
	[ "$(echo "$output" | jq "[.entries[].pins[] | select(.owner | startswith(\"pid-$pid-\"))] | length")" -eq 0 ]
	[ "$(echo "$output" | jq '.mounts | length')" -eq 0 ]
}

@test "run --mount: a pattern, or several packs at one DIR, make one tree; a pattern that matches nothing is an error" {
	make_shards
	run -0 stager run --mount 'shard*.tar.zst:data' -- sh -c 'diff -r all "$STAGER_MOUNT" && echo "$STAGER_MOUNT" >where'
	echo "$output" | grep -q "mounted '.*shard1.tar.zst' and 2 more packs at"
	[ ! -e "$(cat where)/train" ]
	run -0 stager run --mount shard1.tar.zst:d --mount shard3.tar.zst:d --mount shard2.tar.zst -- \
		sh -c 'ls "$STAGER_MOUNT/train" >one; ls "$STAGER_MOUNT_2/train" >two'
	[ "$(tr '\n' ' ' <one)" = "c1 c3 " ]
	[ "$(tr '\n' ' ' <two)" = "c2 " ]
	run stager run --mount 'nothing*.tar.zst:data' -- true
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "'nothing\*.tar.zst' matches no pack"
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" 2>/dev/null | grep pid-)" ]
}
