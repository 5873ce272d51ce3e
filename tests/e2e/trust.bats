#!/usr/bin/env bats
# Output a user can trust, outside Slurm: a warm stage checks its cache
# entry, messages name what went wrong (a truncated pack, the kind of
# disk shortage, the dataset evicted), and the settings that point stager
# at a site's own names (remote_stager, job_tmpdir_var).

load helpers
bats_require_minimum_version 1.5.0

mkds() { # DIR: a small dataset of a few files
	mkdir -p "$1/sub"
	for i in 1 2 3; do head -c 10000 /dev/urandom >"$1/f$i"; done
	echo x >"$1/sub/x"
}

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch
	unset SLURM_JOB_ID SLURM_TMPDIR STAGER_REMOTE_STAGER
	mkds ds
	stager pack -q ds -o ds.tar.zst >/dev/null
}

teardown() {
	umount -l "$T/small" "$T/few" 2>/dev/null || true
	cd /
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

@test "a warm stage checks the entry's files and sizes, and stages a damaged entry again" {
	d=$(stager stage ds.tar.zst 2>/dev/null)
	entry=$(readlink -f "$d")
	# a file gone
	rm -f "$entry/f2"
	run stager stage ds.tar.zst
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"the cached copy of '$T/ds.tar.zst' is damaged ('f2' is missing)"* ]]
	diff -r ds "$(readlink -f "$d")"
	# a file cut short
	entry=$(readlink -f "$d")
	chmod u+w "$entry/f1"
	truncate -s 5 "$entry/f1"
	run stager stage ds.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" == *"'f1' has 5 bytes, its manifest says 10000"* ]]
	diff -r ds "$(readlink -f "$d")"
	# a file more
	entry=$(readlink -f "$d")
	chmod u+w "$entry"
	echo extra >"$entry/extra"
	run stager stage ds.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" == *"1 file more than its manifest names"* ]]
	diff -r ds "$(readlink -f "$d")"
	# a sound entry: no warning, a cache hit
	run stager stage ds.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" != *"damaged"* ]]
	[[ "$output" == *cached* ]]
	# a damage of content, sizes kept, is for --verify to find
	entry=$(readlink -f "$d")
	chmod u+w "$entry/f3"
	flip_byte "$entry/f3" 100
	run stager stage ds.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" != *"damaged"* ]]
	run stager stage --verify ds.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" == *"'f3' does not match its manifest"* ]]
	diff -r ds "$(readlink -f "$d")"
}

@test "a pack cut short is called truncated (exit 4), with no advice to pack it" {
	size=$(stat -c %s ds.tar.zst)
	head -c $((size / 2)) ds.tar.zst >cut.tar.zst
	run stager stage cut.tar.zst
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"truncated"* ]]
	[[ "$output" != *"stager pack"*"faster"* ]]
}

@test "collect's disk-full advice fits the shortage: bytes, or files (inodes)" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs"
	mkdir small few
	mount -t tmpfs -o size=1m tmpfs small || skip "cannot mount a tmpfs here"
	mount -t tmpfs -o size=64m,nr_inodes=40 tmpfs few
	head -c 3000000 /dev/urandom >big
	mkdir bigres && mv big bigres/
	run stager collect bigres small/res
	umount small
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"free at least"*"or collect to a filesystem with more room"* ]]
	[[ "$output" != *"--pack"* ]]
	mkdir many
	for i in $(seq 1 100); do echo "$i" >"many/$i"; done
	run stager collect many few/res
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"too few files (inodes) are left: collect with --pack"* ]]
	# and --pack fits there
	run stager collect --pack many few/res.tar.zst
	umount few
	[ "$status" -eq 0 ]
}

@test "eviction names the dataset it evicted" {
	mkdir other
	head -c 300000 /dev/urandom >other/big
	stager pack -q other -o other.tar.zst >/dev/null
	# not pinned: this shell lives on, and would keep it
	run stager stage --no-pin ds.tar.zst "$T/d1"
	[ "$status" -eq 0 ]
	# room for one of the two only
	echo "cache_max = 400000" >conf
	run stager --config conf stage other.tar.zst "$T/d2"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"evicted the cached copy of '$T/ds.tar.zst'"* ]]
}

@test "remote_stager: the setting and \$STAGER_REMOTE_STAGER name the stager push runs on the far end" {
	# a remote shell that runs the command here, and notes it
	cat >rsh <<'SH'
#!/bin/sh
shift
echo "$*" >>"$(dirname "$0")/rsh.log"
exec sh -c "$*"
SH
	chmod +x rsh
	ln -s "$STAGER" my-stager
	mkdir far
	echo "remote_stager = $T/my-stager" >conf
	run stager --config conf push --rsh "$T/rsh" ds "host:$T/far/ds"
	echo "$output"
	[ "$status" -eq 0 ]
	grep -q "^$T/my-stager " rsh.log
	diff -r ds far/ds
	# the environment variable, and --remote-stager before both
	: >rsh.log
	echo changed >ds/f1
	STAGER_REMOTE_STAGER=$T/my-stager run stager push --rsh "$T/rsh" ds "host:$T/far/ds"
	[ "$status" -eq 0 ]
	grep -q "^$T/my-stager " rsh.log
	diff -r ds far/ds
	: >rsh.log
	STAGER_REMOTE_STAGER=$T/nowhere run stager push --remote-stager "$STAGER" --rsh "$T/rsh" ds "host:$T/far/ds"
	[ "$status" -eq 0 ]
	grep -q "^$STAGER " rsh.log
	# a value a remote shell would read as more than a command is refused
	echo 'remote_stager = stager; rm -rf ~' >bad
	run stager --config bad push --rsh "$T/rsh" ds "host:$T/far/ds"
	[ "$status" -eq 1 ]
	[[ "$output" == *"remote_stager"* ]]
}

@test "job_tmpdir_var: a job's datasets go where the site's variable says" {
	mkdir jobscratch
	echo "job_tmpdir_var = JOB_SCRATCH" >conf
	d=$(env SLURM_JOB_ID=77 JOB_SCRATCH="$T/jobscratch" "$STAGER" --config conf stage ds.tar.zst)
	[ "$d" = "$T/jobscratch/ds/" ]
	diff -r ds "$T/jobscratch/ds/"
	# outside a job the variable means nothing
	d=$(env JOB_SCRATCH="$T/jobscratch" "$STAGER" --config conf stage ds.tar.zst)
	[[ "$d" == "$T/scratch/"* ]]
	# a value that is not a variable's name is refused
	echo 'job_tmpdir_var = $HOME/x' >bad
	run stager --config bad stage ds.tar.zst
	[ "$status" -eq 1 ]
	[[ "$output" == *"job_tmpdir_var"* ]]
}

@test "stage's path ends with '/': find, du and cp -r see the dataset; DIR/ stages into DIR" {
	d=$(stager stage ds.tar.zst 2>/dev/null)
	[[ "$d" == */ ]]
	[ "$(find "$d" -type f | wc -l)" -eq 4 ]
	cp -r "$d" copy
	[ ! -L copy ]
	diff -r ds copy
	mkdir into
	[ "$(stager stage ds.tar.zst into/ 2>/dev/null)" = into/ds/ ]
	diff -r ds into/ds
}

@test "pack format: version 1 packs still read; one from a newer stager is refused with that reason" {
	v1=$BATS_TEST_DIRNAME/../fuzz/corpus/trailer/fz-25eec1bf660e
	run stager ls --json "$v1"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.format == 1'
	run stager verify "$v1"
	[ "$status" -eq 0 ]
	run stager unpack "$v1" v1
	[ "$status" -eq 0 ]
	# what stager packs now is version 3
	run -0 stager ls --json ds.tar.zst
	echo "$output" | jq -e '.format == 3'
	# the footer's version word, 48 - 32 = 16 bytes before the end
	cp ds.tar.zst v4.tar.zst
	size=$(stat -c %s v4.tar.zst)
	printf '\004' | dd of=v4.tar.zst bs=1 seek=$((size - 16)) conv=notrunc 2>/dev/null
	run stager verify v4.tar.zst
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"pack format version 4 is not supported"*"a newer stager made it"* ]]
}
