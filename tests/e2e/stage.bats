#!/usr/bin/env bats
# stager stage, status and clean: the per-node cache, against real
# processes, a real small filesystem and real kill -9.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SITE_CONFIG=/dev/null HOME="$T"
	unset SLURM_TMPDIR SLURM_JOB_ID
}

teardown() {
	cd /
	mountpoint -q "$T/small" 2>/dev/null && umount "$T/small"
	mountpoint -q "$T/slow" 2>/dev/null && { fusermount3 -u "$T/slow" || umount -l "$T/slow"; }
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

make_pack() { # dir pack megabytes
	mkdir -p "$1/sub"
	head -c "$(($3 * 1048576))" /dev/urandom >"$1/sub/big.bin"
	for i in $(seq 1 20); do echo "file $i" >"$1/f$i.txt"; done
	"$STAGER" pack -q "$1" -o "$2" >/dev/null
}

@test "stage prints the path of a read-only link into the cache; a second stage is a hit" {
	make_pack src ds.tar.zst 2
	run "$STAGER" stage -q ds.tar.zst
	[ "$status" -eq 0 ]
	path=$output
	[[ "$path" == */ ]]
	path=${path%/}
	[ -L "$path" ]
	[[ "$path" == "$T/scratch/jobs/"*"/ds" ]]
	diff -r src "$path"
	[ "$(stat -c %a "$path/sub/big.bin")" = "444" ]
	[ "$(stat -c %a "$path/sub")" = "555" ]
	run "$STAGER" stage --json -q ds.tar.zst
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.hit == true and .source_bytes == 0 and .kind == "pack"'
	# under Slurm the default destination is $SLURM_TMPDIR/NAME
	mkdir jobtmp
	run env SLURM_TMPDIR="$T/jobtmp" SLURM_JOB_ID=77 "$STAGER" stage -q ds.tar.zst
	[ "$status" -eq 0 ]
	[ "$output" = "$T/jobtmp/ds/" ]
	diff -r src jobtmp/ds
}

@test "a warm stage makes at most 3 calls on the source and reads nothing from it" {
	make_pack src ds.tar.zst 1
	"$STAGER" stage -q ds.tar.zst d1 >/dev/null
	ASAN_OPTIONS=detect_leaks=0 strace -f -y -o trace "$STAGER" stage -q ds.tar.zst d2 >/dev/null
	grep 'ds.tar.zst' trace >calls
	cat calls
	n=$(wc -l <calls)
	echo "calls naming the source: $n"
	[ "$n" -ge 1 ]
	[ "$n" -le 3 ]
	run ! grep -qE '^[0-9]+ +(read|pread64|readv|preadv2?)\(' calls
}

@test "a cold stage reads the pack once, with few metadata calls" {
	make_pack src ds.tar.zst 8
	ASAN_OPTIONS=detect_leaks=0 strace -f -y -o trace "$STAGER" stage -q ds.tar.zst d1 >/dev/null
	meta=$(grep 'ds.tar.zst' trace | grep -vcE '^[0-9]+ +(read|pread64)\(')
	echo "metadata calls: $meta"
	[ "$meta" -le 30 ]
	bytes=$(grep 'ds.tar.zst' trace | grep -E '^[0-9]+ +pread64\(' | awk -F'= ' '{s += $NF} END {print s}')
	size=$(stat -c %s ds.tar.zst)
	echo "read $bytes of $size"
	# the frames once, and the end of the file (the trailer, up to 1 MiB)
	# once more; a second read of the data would be 8 MiB more
	[ "$bytes" -le $((size + 2 * 1048576)) ]
}

@test "four concurrent stages of one pack read it once (single flight)" {
	make_pack src ds.tar.zst 60
	pids=()
	for i in 1 2 3 4; do
		"$STAGER" stage --json -q ds.tar.zst "d$i" >"out$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait_pid "$p" 120; done
	cat out1 out2 out3 out4
	[ "$(cat out1 out2 out3 out4 | jq -s 'map(select(.hit == false)) | length')" -eq 1 ]
	[ "$(cat out1 out2 out3 out4 | jq -s 'map(select(.source_bytes > 10000000)) | length')" -eq 1 ]
	for i in 1 2 3 4; do diff -r src "d$i"; done
}

@test "a damaged pack publishes nothing, and a good one stages afterwards" {
	make_pack src ds.tar.zst 2
	cp ds.tar.zst bad.tar.zst
	flip_byte bad.tar.zst 1000000
	run "$STAGER" stage bad.tar.zst dest
	[ "$status" -eq 4 ]
	echo "$output" | grep -q "bad.tar.zst"
	[ ! -e dest ]
	[ -z "$(ls scratch/cache)" ]
	: >empty.tar.zst
	run "$STAGER" stage empty.tar.zst dest
	[ "$status" -eq 4 ]
	head -c 100000 ds.tar.zst >trunc.tar.zst
	run "$STAGER" stage trunc.tar.zst dest
	[ "$status" -eq 4 ]
	# a pack cut where a frame ends is a valid zstd stream of a tar that
	# stops at an entry boundary: it must still be refused
	"$STAGER" pack -q src -o small.tar.zst --frame-size 64K >/dev/null
	# (the last frame holds the end-of-archive blocks: without the trailer
	# alone, the tar stream is complete and correct)
	"$STAGER" ls --json --long small.tar.zst >ls.json
	ends=$(jq '.frame_table[:-1][] | .offset + .size' ls.json)
	[ "$(echo "$ends" | wc -l)" -ge 2 ]
	for cut in $ends; do
		head -c "$cut" small.tar.zst >cut.tar.zst
		run "$STAGER" stage cut.tar.zst cutdest
		[ "$status" -eq 4 ] || { echo "cut at $cut: $status $output"; false; }
		[ ! -e cutdest ]
	done
	run "$STAGER" stage missing.tar.zst dest
	[ "$status" -eq 2 ]
	run "$STAGER" stage -q ds.tar.zst dest
	[ "$status" -eq 0 ]
	diff -r src dest
}

@test "kill -9 at random moments never leaves a wrong tree; the next stage succeeds" {
	make_pack src ds.tar.zst 150
	# a whole cold stage's time here: the kills come within it
	base=$(time_ms "$STAGER" stage -q ds.tar.zst dest)
	rm -rf dest
	"$STAGER" clean -q --all >/dev/null
	kill_seed
	mid=0
	rounds=0
	# six rounds, and more (up to twelve) until three cut the stage
	# mid-work: on a loaded machine the first stage may be slower than
	# the later ones, whose kills then come after their end
	for round in $(seq 1 12); do
		if [ "$rounds" -ge 6 ] && [ "$mid" -ge 3 ]; then break; fi
		rounds=$round
		rm -rf dest
		# a scratch root of its own each round, for a cold stage (the
		# last round's entry stays pinned by this shell: a hit)
		export STAGER_SCRATCH_ROOT=$T/scratch.$round
		# a moment within it, 10-90 %: the seed repeats where the kills
		# fall within the work, whatever this machine's speed
		permille=$((100 + RANDOM % 800))
		ms=$((base * permille / 1000))
		"$STAGER" stage -q ds.tar.zst dest >/dev/null 2>&1 3>&- &
		kill_after $! "$ms"
		echo "round $round: killed at $permille/1000 of a whole stage ($ms of $base ms): status $KILL_RC"
		[ "$KILL_RC" -eq 137 ] || [ "$KILL_RC" -eq 0 ] # killed, or done before
		mid=$((mid + KILL_MID))
		# done before the kill: the machine is faster now, and so are
		# the next rounds' moments
		[ "$KILL_RC" -eq 0 ] && base=$((base * 3 / 4))
		# an entry is complete or absent
		for e in "$STAGER_SCRATCH_ROOT"/cache/*; do
			[ -e "$e" ] || continue
			case $e in *.tmp.*) continue ;; esac
			[ -f "$e/meta" ]
			diff -r src "$e/data"
		done
		run "$STAGER" stage -q ds.tar.zst dest
		[ "$status" -eq 0 ]
		diff -r src dest
		# leftovers of killed builders are cleaned
		run "$STAGER" clean --json -q
		[ "$status" -eq 0 ]
		[ -z "$(ls "$STAGER_SCRATCH_ROOT/cache" | grep -E '\.(tmp|old)\.')" ]
	done
	# half the rounds, at least, cut the stage mid-work
	echo "# $mid of $rounds rounds killed mid-work (at least 3 must)" >&3
	[ "$mid" -ge 3 ]
}

@test "disk full: exit 3 before copying anything; eviction makes room when it can" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs"
	mkdir small
	mount -t tmpfs -o size=48m tmpfs small || skip "cannot mount tmpfs"
	export STAGER_SCRATCH_ROOT="$T/small/scratch" STAGER_MIN_FREE=1M
	make_pack big big.tar.zst 60
	run "$STAGER" stage big.tar.zst dest
	[ "$status" -eq 3 ]
	echo "$output" | grep -q "need .*free"
	[ ! -e dest ]
	[ -z "$(ls small/scratch/cache)" ]
	# two unpinned 18 MiB entries; a third evicts the least recently used
	make_pack a a.tar.zst 18
	make_pack b b.tar.zst 18
	make_pack c c.tar.zst 18
	"$STAGER" stage -q --no-pin a.tar.zst da >/dev/null
	"$STAGER" stage -q --no-pin b.tar.zst db >/dev/null
	"$STAGER" stage -q b.tar.zst db >/dev/null # b is now the more recent, and pinned
	# (not through `run`: its subshell would be the pin's owner, and gone)
	"$STAGER" stage -q c.tar.zst dc >/dev/null
	diff -r c dc
	diff -r b db
	[ ! -e da/f1.txt ] # a was evicted
	# with everything pinned by a live owner there is no room: exit 3
	run "$STAGER" stage a.tar.zst da2
	[ "$status" -eq 3 ]
	echo "$output" | grep -q "evictable"
}

@test "a stage that can never fit evicts nothing: exit 3 with the figures" {
	export STAGER_CACHE_MAX=4M
	make_pack a a.tar.zst 1
	make_pack b b.tar.zst 2
	make_pack big big.tar.zst 5
	# a: evictable (no pin); b: pinned by this live shell
	"$STAGER" stage -q --no-pin a.tar.zst da >/dev/null
	"$STAGER" stage -q b.tar.zst db >/dev/null
	# larger than cache_max itself: nothing could ever make room
	run "$STAGER" stage big.tar.zst dbig
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -Eq "need 5\.[0-9] MiB, at most [0-9.]+ MiB available under cache_max 4\.0 MiB \(cache 3\.[0-9] MiB, of which 1\.[0-9] MiB evictable; the rest is pinned by live jobs\); nothing was evicted: raise cache_max$"
	[[ "$output" != *"evicted the cached copy"* ]]
	[ ! -e dbig ]
	diff -r a da
	# within cache_max, but more than evicting a would free (b is pinned)
	make_pack c c.tar.zst 2
	run "$STAGER" stage c.tar.zst dc
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -Eq "need 2\.[0-9] MiB, at most 1\.[0-9] MiB available under cache_max 4\.0 MiB \(cache 3\.[0-9] MiB, of which 1\.[0-9] MiB evictable; the rest is pinned by live jobs\); nothing was evicted$"
	[[ "$output" != *"evicted the cached copy"* ]]
	diff -r a da
	run "$STAGER" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.entries | length == 2'
}

@test "a foreign archive larger than scratch: refused before it is read, by its size, its zstd frame's or its entry's" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs"
	mkdir small
	mount -t tmpfs -o size=48m tmpfs small || skip "cannot mount tmpfs"
	export STAGER_SCRATCH_ROOT="$T/small/scratch" STAGER_MIN_FREE=1M
	mkdir -p b
	truncate -s 256M b/zero
	tar -cf b.tar b
	# a 100 GiB .tar.zst with no trailer (sparse here): its size says it
	zstd -q -1 -c b.tar >huge.tar.zst
	truncate -s 100G huge.tar.zst
	# a 256 MiB tar of zeros in 9 KB: zstd wrote the frame's content size
	zstd -q -1 b.tar -o frame.tar.zst
	# the same from a pipe: no content size, but the entry's own
	zstd -q -1 -c <b.tar >stream.tar.zst
	rm b.tar
	for a in huge frame stream; do
		t0=$(date +%s%N)
		run "$STAGER" stage $a.tar.zst d-$a
		echo "$a: $status: $output ($((($(date +%s%N) - t0) / 1000000)) ms)" >&3
		[ "$status" -eq 3 ]
		faster_than $((($(date +%s%N) - t0) / 1000000)) 2000
		[ ! -e d-$a ]
	done
	run -3 "$STAGER" stage huge.tar.zst d
	echo "$output" | grep -q "need 100.0 GiB, [0-9.]* MiB available"
	run -3 "$STAGER" stage frame.tar.zst d
	echo "$output" | grep -q "need 256.0 MiB, [0-9.]* MiB available"
	run -3 "$STAGER" stage stream.tar.zst d
	echo "$output" | grep -q "not enough space on scratch for 'b/zero' in the archive: it is 256.0 MiB, [0-9.]* MiB free, min_free 1.0 MiB; nothing of it was written"
	# nothing of them is left, and a small archive still stages
	[ -z "$(ls small/scratch/cache)" ]
	[ "$(df --output=used -B1M small | tail -1 | tr -d ' ')" -lt 2 ]
	mkdir -p s && echo ok >s/f && tar -cf - s | zstd -q >s.tar.zst
	"$STAGER" stage -q s.tar.zst ds >/dev/null
	[ "$(cat ds/s/f)" = ok ]
}

@test "pins: clean keeps what a live owner uses and removes what a dead one left" {
	make_pack src ds.tar.zst 1
	make_pack src2 other.tar.zst 1
	# pinned by this (live) test shell
	"$STAGER" stage -q ds.tar.zst live >/dev/null
	# pinned by a shell that exits at once
	sh -c "\"$STAGER\" stage -q other.tar.zst dead >/dev/null"
	run "$STAGER" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '[.entries[].pins[].alive] | sort == [false, true]'
	run "$STAGER" clean --dry-run --all
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "would remove pin"
	[ -e dead/f1.txt ]
	run "$STAGER" clean --all --json -q
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.bytes_freed > 0'
	[ ! -e dead/f1.txt ]
	diff -r src live
	run "$STAGER" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.entries | length == 1'
	# a job's pins go with --job, alive or not
	SLURM_JOB_ID=4242 "$STAGER" stage -q other.tar.zst job >/dev/null
	"$STAGER" status --json >st.json
	jq -e '[.entries[].pins[] | select(.owner == "job-4242")] | length == 1' st.json
	run "$STAGER" clean -q --all --job 4242
	[ "$status" -eq 0 ]
	[ ! -e job/f1.txt ]
	diff -r src live
	# the job's pin is gone; the live one stays
	"$STAGER" status --json >st.json
	jq -e '[.entries[].pins[] | select(.owner == "job-4242")] | length == 0' st.json
	jq -e '[.entries[].pins[] | select(.alive)] | length == 1' st.json
}

@test "status shows every setting and where it came from" {
	mkdir -p .config/stager
	echo "cache_max = 10G" >.config/stager/config
	run env STAGER_MIN_FREE=2G "$STAGER" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.settings.cache_max.value == "10G" and (.settings.cache_max.from | test("config:1"))'
	echo "$output" | jq -e '.settings.min_free.from == "environment STAGER_MIN_FREE"'
	echo "$output" | jq -e '.settings.scratch_root.from == "environment STAGER_SCRATCH_ROOT"'
	run "$STAGER" status --scratch "$T/other"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "scratch_root .*(--scratch)"
	echo "cache_max = lots" >.config/stager/config
	run "$STAGER" status
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "config:1: invalid value 'lots'"
}

@test "foreign archives stage through the same secure extraction" {
	make_awkward_tree src
	# cache entries are read-only: compare with a read-only source
	chmod -R a-w src
	tar -czf a.tgz -C src .
	run "$STAGER" stage -q a.tgz dest
	[ "$status" -eq 0 ]
	[ "$(tree_sig src)" = "$(tree_sig dest)" ]
	(cd src && zip -qry ../a.zip .) 2>/dev/null || skip "no zip"
	run "$STAGER" stage -q a.zip zdest
	[ "$status" -eq 0 ]
	[ "$(tree_sig src)" = "$(tree_sig zdest)" ]
	# hostile: absolute paths, .., symlink escapes, devices
	mkdir h && echo x >h/x
	tar -cf abs.tar -P "$T/h/x"
	tar -cf dots.tar --transform 's,^,../../,' -C h x
	ln -s /etc/passwd h/l && tar -cf link.tar -C h l && rm h/l
	for f in abs.tar dots.tar link.tar; do
		run "$STAGER" stage "$f" "out-$f"
		[ "$status" -eq 4 ] || { echo "$f: $status $output"; false; }
		[ ! -e "out-$f" ]
	done
	if [ "$(id -u)" -eq 0 ]; then
		mknod h/dev c 1 3 && tar -cf dev.tar -C h dev
		run "$STAGER" stage dev.tar out-dev
		[ "$status" -eq 4 ]
	fi
	# setuid is stripped
	echo s >h/s && chmod 4755 h/s && tar -cf suid.tar -C h s
	"$STAGER" stage -q suid.tar sdest >/dev/null
	[ "$(stat -c %a sdest/s)" = "555" ]
}

@test "a plain directory stages too, and a change in it makes a new entry" {
	make_awkward_tree src
	run "$STAGER" stage --json src d1
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "metadata operations"
	echo "$output" | tail -1 | jq -e '.kind == "directory" and .hit == false'
	chmod -R a-w src
	[ "$(tree_sig src)" = "$(tree_sig d1)" ]
	chmod -R u+w src
	run "$STAGER" stage --json -q src d2
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.hit == true'
	echo changed >src/a/hello.txt
	touch -d '2030-01-01' src/a/hello.txt
	run "$STAGER" stage --json -q src d3
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.hit == false'
	grep -q changed d3/a/hello.txt
	grep -q hello d1/a/hello.txt
}

# A cache entry is being built.
building() { compgen -G 'scratch/cache/*.tmp.*' >/dev/null; }


@test "if the builder dies, a waiter takes over" {
	make_pack src ds.tar.zst 40
	# (slowed down, so that it is still building when it is killed)
	"$STAGER" stage -q --bwlimit 10M ds.tar.zst d1 >/dev/null 2>&1 &
	builder=$!
	# the builder is building, the waiter waits for its lock
	wait_until 60 building
	"$STAGER" stage --json ds.tar.zst d2 >out2 2>err2 &
	waiter=$!
	wait_until 60 grep -q "is being staged by another process on this node: waiting for it" err2
	kill -9 $builder
	st=0
	wait_pid $builder 30 || st=$?
	[ "$st" -eq 137 ] # killed before it was done
	wait_pid $waiter 120
	jq -e '.hit == false' out2 || jq -e '.waited == true' out2
	diff -r src d2
}

@test "--verify finds a damaged cache entry and stages it again" {
	make_pack src ds.tar.zst 1
	p=$("$STAGER" stage -q ds.tar.zst d1)
	target=$(readlink "${p%/}")
	chmod u+w "$target/f3.txt"
	echo tampered >"$target/f3.txt"
	run "$STAGER" stage --verify ds.tar.zst d2
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "f3.txt"
	diff -r src d2
	# without --verify a warm stage trusts the entry: that is what makes it cheap
}

@test "clean --older-than removes entries unused for that long" {
	make_pack src ds.tar.zst 1
	sh -c "\"$STAGER\" stage -q --no-pin ds.tar.zst d1 >/dev/null"
	"$STAGER" status --json >st.json
	key=$(jq -r '.entries[0].key' st.json)
	run "$STAGER" clean --older-than 1d -q
	[ "$status" -eq 0 ]
	[ -d "scratch/cache/$key" ]
	touch -d '10 days ago' "scratch/cache/$key/meta"
	run "$STAGER" clean --older-than 1d --json -q
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '[.removed[] | select(.what == "entry")] | length == 1'
	[ ! -e "scratch/cache/$key" ]
}

@test "stage --copy where it does not fit: exit 3 with the figures; nothing left, an empty DEST kept" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs"
	make_pack src ds.tar.zst 3
	"$STAGER" stage -q ds.tar.zst --no-pin >/dev/null
	mkdir small
	mount -t tmpfs -o size=1m tmpfs small || skip "cannot mount tmpfs"
	mkdir small/dest
	run stager stage ds.tar.zst small/dest --copy --no-pin
	echo "$output"
	[ "$status" -eq 3 ]
	echo "$output" | grep -Eq "not enough space for a copy at 'small/dest': need 3\.0 MiB, [0-9.]+ [KM]iB free there"
	[ "$(ls -A small)" = dest ]
	[ -d small/dest ]
	[ -z "$(ls -A small/dest)" ]
}

@test "stage --copy answers SIGTERM between files: exit 5 at once, no copy and no temporary left" {
	if [ "$(id -u)" -ne 0 ] || [ ! -e /dev/fuse ]; then skip "needs root and /dev/fuse"; fi
	: "${SHAREDFS:=$BATS_TEST_DIRNAME/../../build/sharedfs}"
	mkdir src
	for i in $(seq 1 200); do echo "$i" >"src/f$i"; done
	"$STAGER" pack -q src -o ds.tar.zst >/dev/null
	"$STAGER" stage -q ds.tar.zst --no-pin >/dev/null
	# a destination where each file costs some 100 ms: the copy of all
	# 200 takes half a minute
	mkdir backing slow
	"$SHAREDFS" --delay-ms 20 --attr-timeout 0 backing slow
	"$STAGER" stage -q ds.tar.zst slow/copy --copy --no-pin >/dev/null &
	pid=$!
	wait_until 30 compgen -G 'backing/.stager-copy.copy.*/f*'
	kill -TERM $pid
	t0=$(date +%s%N)
	st=0
	wait_pid $pid 60 || st=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "exit $st after $ms ms"
	[ "$st" -eq 5 ]
	[ "$ms" -lt 5000 ]
	[ -z "$(ls -A backing)" ]
}

@test "two datasets of one name staged without DEST both stay: the second is NAME-2, the first never switched" {
	mkdir a b srcb jobtmp
	make_pack srca a/ds.tar.zst 1
	echo other >srcb/only-in-b
	"$STAGER" pack -q srcb -o b/ds.tar.zst >/dev/null
	one=$(SLURM_TMPDIR=$T/jobtmp "$STAGER" stage -q a/ds.tar.zst)
	two=$(SLURM_TMPDIR=$T/jobtmp "$STAGER" stage -q b/ds.tar.zst)
	echo "$one $two"
	[ "$one" = "$T/jobtmp/ds/" ]
	[ "$two" = "$T/jobtmp/ds-2/" ]
	[ -f "$one/sub/big.bin" ]
	[ ! -e "$one/only-in-b" ]
	[ -f "$two/only-in-b" ]
	[ ! -e "$two/sub" ]
	# staged again: the same paths
	[ "$(SLURM_TMPDIR=$T/jobtmp "$STAGER" stage -q a/ds.tar.zst)" = "$one" ]
	[ "$(SLURM_TMPDIR=$T/jobtmp "$STAGER" stage -q b/ds.tar.zst)" = "$two" ]
	# run's STAGER_DATA and STAGER_DATA_2 likewise
	run "$STAGER" -q run --stage a/ds.tar.zst --stage b/ds.tar.zst -- \
		sh -c 'echo "$STAGER_DATA"; echo "$STAGER_DATA_2"; ls "$STAGER_DATA/sub" "$STAGER_DATA_2"'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" != "${lines[1]}" ]
	[[ "$output" == *big.bin* ]]
	[[ "$output" == *only-in-b* ]]
}
