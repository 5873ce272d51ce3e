#!/usr/bin/env bats
# The effect of options that had no test of it (scripts/check-options
# lists what no test runs and checks): the short forms of the option
# tables, and options that other tests only pass along or refuse bad
# values of (pull --replace, unpack --threads, mount --cache-size, run
# --pack, stage --no-pin, --scratch, run --all-nodes outside Slurm).  Each runs the option
# and checks what it does, against a run without it where that says more.
# push and pull go through a local stand-in for ssh that notes its calls.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SLOT_DIR="$T/slots" \
		STAGER_SITE_CONFIG=/dev/null HOME="$T"
	unset SLURM_JOB_ID SLURM_TMPDIR XDG_CONFIG_HOME STAGER_RSH STAGER_REMOTE_STAGER
}

teardown() {
	cd /
	local m
	# a mount left by a failed test: never rm through it
	for m in $(awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo); do
		fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"
	done
	if awk -v t="$T/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		return 0
	fi
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

# Compressible text: DIR LINES (seeded, the same every time)
make_text() {
	mkdir -p "$1"
	awk -v n="$2" 'BEGIN {
		srand(7)
		split("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu", w, " ")
		for (i = 0; i < n; i++) {
			l = ""
			for (j = 0; j < 3 + int(rand() * 8); j++) l = l w[1 + int(rand() * 12)] " "
			print i, l
		}
	}' >"$1/words.txt"
}

# DIR: four 1.5 MB random files, for several frames of 1 MiB
make_frames() {
	mkdir -p "$1"
	for i in 1 2 3 4; do head -c 1500000 /dev/urandom >"$1/f$i"; done
}

# NAME CMD...: run CMD under strace, counting the threads it starts into
# $NAME (strace's own noise off)
count_threads() {
	local name=$1
	shift
	ASAN_OPTIONS=detect_leaks=0 strace -f -qq -o "$T/clones.$name" -e trace=clone,clone3 "$@"
	grep -c clone "$T/clones.$name" >"$T/threads.$name"
}

files_in() { (cd "$1" && find . -type f -printf '%P\n' | LC_ALL=C sort | tr '\n' ' '); }

# A remote shell for push and pull that runs the far end here and notes
# each call in rsh.log (the host is ignored)
noting_rsh() {
	printf '#!/bin/sh\necho "$*" >>%s/rsh.log\nshift\nexec sh -c "$*"\n' "$T" >rsh
	chmod +x rsh
}

# ---- global options ------------------------------------------------------

@test "--scratch DIR: the cache and the job directories go under DIR, over STAGER_SCRATCH_ROOT" {
	mkdir ds && echo d >ds/f
	stager pack -q ds -o ds.tar.zst >/dev/null
	run stager --scratch "$T/other" stage -q ds.tar.zst st
	[ "$status" -eq 0 ]
	[[ "$(readlink st)" == "$T/other/cache/"* ]]
	[ "$(cat st/f)" = d ]
	[ ! -e scratch/cache ]
	run stager run --scratch="$T/other" -- sh -c 'echo "$STAGER_JOB_DIR" >"$0/jobdir"' "$T"
	[ "$status" -eq 0 ]
	[[ "$(cat jobdir)" == "$T/other/jobs/"* ]]
	run stager status --scratch "$T/other" --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e --arg d "$T/other" '.settings.scratch_root.value == $d and (.entries | length == 1)'
	# without it: STAGER_SCRATCH_ROOT
	run stager stage -q ds.tar.zst st2
	[ "$status" -eq 0 ]
	[[ "$(readlink st2)" == "$T/scratch/cache/"* ]]
}

# ---- pack -----------------------------------------------------------------

@test "pack -o and --output write the pack there and print it, nothing beside DIR; the same tree, the same bytes" {
	mkdir -p src/sub out && echo a >src/a && echo b >src/sub/b
	run --separate-stderr stager pack src -o out/short.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^[0-9a-f]{64}\ \ out/short\.tar\.zst$ ]]
	[ ! -e src.tar.zst ]
	run --separate-stderr stager pack src --output out/long.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" == *"  out/long.tar.zst" ]]
	[ ! -e src.tar.zst ]
	cmp out/short.tar.zst out/long.tar.zst
	# without: DIR.tar.zst beside DIR, the same bytes
	run --separate-stderr stager pack src
	[ "$status" -eq 0 ]
	cmp src.tar.zst out/long.tar.zst
	stager unpack -q out/short.tar.zst u
	diff -r src u
	# -o into a directory that does not exist: an error, nothing written
	run stager pack src -o nowhere/p.tar.zst
	[ "$status" -ne 0 ]
	[ ! -e nowhere ]
}

@test "pack -l: -l 19 makes a smaller pack than -l 1 of the same tree" {
	make_text src 4000
	run stager pack -q src -l 1 -o l1.tar.zst
	[ "$status" -eq 0 ]
	run stager pack -q src -l 19 -o l19.tar.zst
	[ "$status" -eq 0 ]
	echo "-l 1: $(stat -c %s l1.tar.zst), -l 19: $(stat -c %s l19.tar.zst)"
	[ "$(stat -c %s l19.tar.zst)" -lt "$(stat -c %s l1.tar.zst)" ]
	stager unpack -q l19.tar.zst u
	diff -r src u
	run stager pack src -l 20 -o bad.tar.zst
	[ "$status" -eq 1 ]
	[ ! -e bad.tar.zst ]
}

@test "pack -j and --threads N: N compression threads, the same pack whatever N" {
	command -v strace >/dev/null || skip "no strace"
	make_frames src
	count_threads p1 "$STAGER" pack -q src -j 1 -o j1.tar.zst --frame-size 1M >/dev/null
	count_threads p4 "$STAGER" pack -q src -j 4 -o j4.tar.zst --frame-size 1M >/dev/null
	count_threads t4 "$STAGER" pack -q src --threads 4 -o t4.tar.zst --frame-size 1M >/dev/null
	echo "threads: -j 1 $(cat threads.p1), -j 4 $(cat threads.p4), --threads 4 $(cat threads.t4)"
	[ "$(($(cat threads.p4) - $(cat threads.p1)))" -eq 3 ]
	[ "$(cat threads.t4)" -eq "$(cat threads.p4)" ]
	cmp j1.tar.zst j4.tar.zst
	cmp j1.tar.zst t4.tar.zst
	run stager pack src -j 65 -o bad.tar.zst
	[ "$status" -eq 1 ]
	[ ! -e bad.tar.zst ]
}

# ---- verify, ls -----------------------------------------------------------

@test "verify -j N: N decoding threads; the same verdict on a sound and a damaged pack" {
	command -v strace >/dev/null || skip "no strace"
	make_frames src
	stager pack -q src -o p.tar.zst --frame-size 1M >/dev/null
	count_threads v1 "$STAGER" verify -j 1 p.tar.zst >out.1
	count_threads v4 "$STAGER" verify -j 4 p.tar.zst >out.4
	echo "threads: -j 1 $(cat threads.v1), -j 4 $(cat threads.v4)"
	[ "$(($(cat threads.v4) - $(cat threads.v1)))" -eq 3 ]
	grep -q 'p.tar.zst: OK' out.4
	cmp out.1 out.4
	flip_byte p.tar.zst 3000000
	run stager verify -j 1 p.tar.zst
	[ "$status" -eq 4 ]
	one=$output
	run stager verify -j 4 p.tar.zst
	[ "$status" -eq 4 ]
	[ "$output" = "$one" ]
}

@test "ls -l is --long: mode, size, mtime and link targets; without it, names alone" {
	mkdir src && echo hello >src/a && ln -s a src/ln && chmod 0640 src/a
	touch -d '2001-02-03 04:05' src/a
	stager pack -q src -o p.tar.zst >/dev/null
	run stager ls p.tar.zst
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'a\nln')" ]
	run stager ls -l p.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	long=$output
	echo "$long" | grep -Eq '^-rw-r----- +6 2001-02-03 04:05 a$'
	echo "$long" | grep -Eq '^lrwxrwxrwx +[0-9]+ .* ln -> a$'
	run stager ls --long p.tar.zst
	[ "$status" -eq 0 ]
	[ "$output" = "$long" ]
}

# ---- unpack ---------------------------------------------------------------

@test "unpack -i extracts only the matching paths (repeatable); --include the same" {
	mkdir -p src/keep src/drop && echo a >src/keep/a && echo b >src/drop/b && echo t >src/top
	stager pack -q src -o p.tar.zst >/dev/null
	run stager unpack p.tar.zst short -i 'keep/*' -i top
	[ "$status" -eq 0 ]
	[ "$(files_in short)" = "keep/a top " ]
	[ "$(cat short/keep/a)" = a ]
	run stager unpack p.tar.zst long --include 'keep/*' --include top
	[ "$status" -eq 0 ]
	diff -r short long
	run stager unpack p.tar.zst none -i 'nothing*'
	[ "$status" -eq 1 ]
	[ ! -e none ]
}

@test "unpack -j and --threads N: N more threads, the same tree whatever N" {
	command -v strace >/dev/null || skip "no strace"
	make_frames src
	stager pack -q src -o p.tar.zst --frame-size 1M >/dev/null
	count_threads u1 "$STAGER" unpack -q p.tar.zst u1 --threads 1
	count_threads u4 "$STAGER" unpack -q p.tar.zst u4 --threads 4
	count_threads j4 "$STAGER" unpack -q p.tar.zst j4 -j 4
	echo "threads: --threads 1 $(cat threads.u1), --threads 4 $(cat threads.u4), -j 4 $(cat threads.j4)"
	[ "$(($(cat threads.u4) - $(cat threads.u1)))" -eq 3 ]
	[ "$(cat threads.j4)" -eq "$(cat threads.u4)" ]
	diff -r src u1
	diff -r src u4
	diff -r src j4
	run stager unpack p.tar.zst bad -j x
	[ "$status" -eq 1 ]
	[ ! -e bad ]
}

# ---- stage ----------------------------------------------------------------

@test "stage -i stages a subset of a pack" {
	mkdir -p ds/keep ds/drop && echo a >ds/keep/a && echo b >ds/drop/b && echo t >ds/top
	stager pack -q ds -o ds.tar.zst >/dev/null
	run --separate-stderr stager stage ds.tar.zst part -i 'keep/*' -i top
	[ "$status" -eq 0 ]
	[ "$(files_in part/)" = "keep/a top " ]
	[ "$(cat part/keep/a)" = a ]
	run stager stage -q ds.tar.zst whole
	[ "$status" -eq 0 ]
	[ "$(files_in whole/)" = "drop/b keep/a top " ]
}

@test "stage --no-pin: the entry is not pinned for this shell, so clean --all may take it; without, it is kept" {
	mkdir a b && echo a >a/f && echo b >b/f
	stager pack -q a -o a.tar.zst >/dev/null
	stager pack -q b -o b.tar.zst >/dev/null
	# pinned by this (live) test shell; the other not pinned at all
	run stager stage -q a.tar.zst pinned
	[ "$status" -eq 0 ]
	run stager stage -q b.tar.zst unpinned --no-pin
	[ "$status" -eq 0 ]
	[ "$(cat unpinned/f)" = b ]
	"$STAGER" status --json >st.json
	jq -e '[.entries[] | select(.source | endswith("/a.tar.zst")) | .pins[] | select(.alive)] | length == 1' st.json
	jq -e '[.entries[] | select(.source | endswith("/b.tar.zst")) | .pins[]] | length == 0' st.json
	run stager clean -q --all
	[ "$status" -eq 0 ]
	[ "$(cat pinned/f)" = a ]
	[ ! -e unpinned/f ]
	"$STAGER" status --json >st.json
	jq -e '[.entries[].source] == ["'"$T"'/a.tar.zst"]' st.json
}

# ---- run ------------------------------------------------------------------

@test "run --pack collects each SRC as one verified pack DEST.tar.zst, not a tree" {
	run stager run --pack --collect out:"$T/res" --collect logs:"$T/logs" -- \
		sh -c 'echo result >"$STAGER_OUT/r"; mkdir "$STAGER_OUT/sub"; echo deep >"$STAGER_OUT/sub/d"; echo log >"$STAGER_OUT_2/l"'
	echo "$output"
	[ "$status" -eq 0 ]
	[ -f res.tar.zst ]
	[ -f logs.tar.zst ]
	[ ! -e res ]
	[ ! -e logs ]
	stager verify -q res.tar.zst >/dev/null
	stager unpack -q res.tar.zst u
	[ "$(cat u/r)" = result ]
	[ "$(cat u/sub/d)" = deep ]
	[ "$(stager ls logs.tar.zst)" = l ]
	# without it: a tree
	run stager run --collect out:"$T/tree" -- sh -c 'echo result >"$STAGER_OUT/r"'
	[ "$status" -eq 0 ]
	[ "$(cat tree/r)" = result ]
	[ ! -e tree.tar.zst ]
}

@test "run --all-nodes outside a Slurm allocation: refused (exit 1) before anything is staged or run" {
	mkdir ds && echo d >ds/f
	stager pack -q ds -o ds.tar.zst >/dev/null
	run stager run --all-nodes --stage ds.tar.zst --collect out:"$T/res" -- touch "$T/ran"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"--all-nodes works inside a Slurm allocation"* ]]
	[ ! -e ran ]
	[ ! -e res ]
	[ -z "$(ls -A scratch/cache 2>/dev/null)" ]
}

# ---- push and pull --------------------------------------------------------

@test "push -e and pull -e: the transport is the command given, not ssh; one that fails is exit 6" {
	noting_rsh
	mkdir -p src remote && echo data >src/f
	run stager push src "elsewhere:$T/remote/ds" -e ./rsh --remote-stager "$STAGER"
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r src remote/ds
	grep -qx "elsewhere $STAGER serve" rsh.log
	run stager pull "elsewhere:$T/remote/ds" back -e ./rsh --remote-stager "$STAGER"
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r src back
	[ "$(grep -c "^elsewhere $STAGER serve$" rsh.log)" -eq 2 ]
	# a transport that cannot run the far end
	printf '#!/bin/sh\nexit 255\n' >broken
	chmod +x broken
	run stager push src "elsewhere:$T/remote/ds2" -e ./broken --remote-stager "$STAGER"
	echo "$output"
	[ "$status" -eq 6 ]
	[ ! -e remote/ds2 ]
}

@test "pull --replace: an existing directory stager did not pull is refused and kept without it, replaced with it" {
	noting_rsh
	mkdir -p remote/ds mine && echo new >remote/ds/f && echo old >mine/o
	run stager pull "h:$T/remote/ds" mine --rsh ./rsh --remote-stager "$STAGER"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"give --replace"* ]]
	[ "$(files_in mine)" = "o " ]
	[ "$(cat mine/o)" = old ]
	run stager pull "h:$T/remote/ds" mine --rsh ./rsh --remote-stager "$STAGER" --replace
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r remote/ds mine
	[ ! -e mine/o ]
	# published now: the next pull replaces it without being asked
	echo newer >remote/ds/f
	run stager pull "h:$T/remote/ds" mine --rsh ./rsh --remote-stager "$STAGER"
	[ "$status" -eq 0 ]
	[ "$(cat mine/f)" = newer ]
}

# ---- clean ----------------------------------------------------------------

@test "clean -n is --dry-run: it lists what would go, with sizes, and removes nothing" {
	mkdir ds && head -c 100000 /dev/urandom >ds/f
	stager pack -q ds -o ds.tar.zst >/dev/null
	run stager stage -q ds.tar.zst st --no-pin
	[ "$status" -eq 0 ]
	entry=$(find scratch/cache -mindepth 1 -maxdepth 1 -type d)
	[ -n "$entry" ]
	run stager clean --all -n
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -Eq "^would remove entry +[0-9.]+ [KMG]?i?B +$T/$entry\$"
	[ -d "$entry" ]
	short=$output
	run stager clean --all --dry-run
	[ "$status" -eq 0 ]
	[ "$output" = "$short" ]
	[ -d "$entry" ]
	run stager clean --all
	[ "$status" -eq 0 ]
	[ ! -e "$entry" ]
}

# ---- mount ----------------------------------------------------------------

# the pid of the process serving the mount at mnt (from its record)
server_pid() {
	local r
	for r in "$STAGER_SCRATCH_ROOT"/mounts/pid-*; do
		if [ "$(head -1 "$r")" = "$T/mnt" ]; then
			r=${r##*/pid-}
			echo "${r%%-*}"
			return 0
		fi
	done
	return 1
}

# the bytes the process PID has read (from files and /dev/fuse)
rchar() { awk '$1 == "rchar:" { print $2 }' "/proc/$1/io"; }

# drop FILE's pages from the kernel's page cache, so the next read of it
# reaches the mount's process
evict() {
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}

@test "mount --cache-size: a cache that holds the file serves a re-read from memory; a 1M one reads the pack again" {
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	mkdir src mnt && head -c 4000000 /dev/urandom >src/f
	stager pack -q src -o p.tar.zst --frame-size 256K >/dev/null
	for size in 64M 1M; do
		run stager mount -q --cache-size "$size" p.tar.zst mnt
		[ "$status" -eq 0 ]
		pid=$(server_pid)
		[ -n "$pid" ]
		cmp src/f mnt/f
		before=$(rchar "$pid")
		evict mnt/f
		cmp src/f mnt/f
		echo "--cache-size $size: the re-read read $(($(rchar "$pid") - before)) bytes"
		echo "$(($(rchar "$pid") - before))" >"reread.$size"
		run stager umount mnt
		[ "$status" -eq 0 ]
		wait_until 10 eval "! running $pid"
	done
	[ "$(cat reread.64M)" -lt 100000 ]
	[ "$(cat reread.1M)" -gt 1000000 ]
	run stager mount --cache-size lots p.tar.zst mnt
	[ "$status" -eq 1 ]
	[[ "$output" == *"'lots' is not a size"* ]]
}
