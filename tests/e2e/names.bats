#!/usr/bin/env bats
# What a pack's names cost its readers.  A pack is hostile input: a small
# one can declare hundreds of thousands of long names (2 GiB of them in a
# few MiB).  Every reader (ls, verify, unpack, stage, diff, mount, Python)
# refuses a pack whose manifest would need more memory than 256 MiB or 64
# times the pack's size, from the trailer's header, before reading a name
# (exit 4, the figures); a pack of long paths within that is listed at the
# speed of its bytes; and the readers agree on every name, byte for byte.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch STAGER_SITE_CONFIG=/dev/null HOME=$T
	unset SLURM_JOB_ID SLURM_TMPDIR XDG_CONFIG_HOME
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	export PYTHONPATH=$top/${B:-build}/python
	PY3=${PY3:-/usr/bin/python3}
}

teardown() {
	cd /
	local m
	for m in $(awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo); do
		fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"
	done
	if awk -v t="$T/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		return 0 # never rm through a mount
	fi
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

# CMD...: run under runstat, its output in out and err; RC its exit
# status, RSS_KIB its peak RSS
measured() {
	RC=0
	"$RUNSTAT" -o stat "$@" >out 2>err || RC=$?
	RSS_KIB=$(sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' stat)
	rm stat
}

@test "a pack of under 2 MiB declaring 400 MB of names: ls, verify, unpack, stage, diff, mount and Python refuse it (exit 4, the figures) in the memory a small pack takes" {
	"$PACKBOMB" bomb.tar.zst --entries 100000 --path-len 4000
	[ "$(stat -c %s bomb.tar.zst)" -lt $((2 << 20)) ]
	mkdir ds mnt
	echo x >ds/f
	stager pack -q ds -o small.tar.zst >/dev/null
	measured "$STAGER" ls small.tar.zst
	[ "$RC" -eq 0 ]
	base=$RSS_KIB
	for c in "ls bomb.tar.zst" "ls --json bomb.tar.zst" "verify bomb.tar.zst" \
		"unpack bomb.tar.zst un" "stage bomb.tar.zst" "diff small.tar.zst bomb.tar.zst" \
		"mount bomb.tar.zst mnt"; do
		# shellcheck disable=SC2086
		measured "$STAGER" $c
		echo "$c: exit $RC, peak $RSS_KIB KiB (a small pack's ls: $base KiB): $(cat err)"
		[ "$RC" -eq 4 ]
		grep -q "bomb.tar.zst': damaged or hostile pack: its manifest would need 389 MiB of memory (100000 entries, 381 MiB of names) in a pack of" err
		grep -q "a pack may ask for at most 256 MiB (64 times its size, or 256 MiB if more)" err
		# before: 400 MiB and more, each
		[ "$RSS_KIB" -lt $((base * 3)) ]
	done
	[ ! -e un ]
	[ -z "$(ls mnt)" ]
	[ ! -e scratch/cache ] || [ -z "$(ls scratch/cache)" ]

	open='import stager, sys; stager.Pack(sys.argv[1])'
	measured "$PY3" -c "$open" small.tar.zst
	[ "$RC" -eq 0 ]
	base=$RSS_KIB
	measured "$PY3" -c "$open" bomb.tar.zst
	echo "Python: exit $RC, peak $RSS_KIB KiB (a small pack: $base KiB): $(tail -1 err)"
	[ "$RC" -eq 1 ]
	grep -q "stager.IntegrityError: .*bomb.tar.zst': damaged or hostile pack: its manifest would need 389 MiB" err
	[ "$RSS_KIB" -lt $((base * 2)) ]
}

@test "a pack of 20,000 paths of 4,000 bytes (80 MB of names, within the limit) opens, and ls lists it in less CPU time than verify takes" {
	# the issue's case: deep directories, a file name of 234 bytes
	"$PY3" - <<-'EOF'
		import os
		os.mkdir("tree")
		fd = os.open("tree", os.O_RDONLY)
		for i in range(15):
		    name = ("d%02d" % i) * 83 + "d"
		    os.mkdir(name, dir_fd=fd)
		    nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
		    os.close(fd)
		    fd = nfd
		for i in range(20000):
		    os.close(os.open(("f%06d" % i).ljust(234, "x"), os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
	EOF
	stager pack -q tree -o long.tar.zst >/dev/null
	[ "$(stat -c %s long.tar.zst)" -lt $((1 << 20)) ]
	cpu() { # CMD...: its user and system CPU seconds
		/usr/bin/time -f '%U %S' -o cpu "$@" >/dev/null 2>&1
		awk '{ print $1 + $2 }' cpu
	}
	v=$(cpu "$STAGER" verify long.tar.zst)
	l=$(cpu "$STAGER" ls long.tar.zst)
	j=$(cpu "$STAGER" ls --json long.tar.zst)
	echo "# CPU seconds: verify $v, ls $l, ls --json $j (before: 4.2 and 5.7 s against 1.1)"
	awk -v l="$l" -v j="$j" -v v="$v" 'BEGIN { exit !(l < 2 * v && j < 2 * v) }'
	stager ls long.tar.zst >listing
	[ "$(wc -l <listing)" -eq 20015 ]
	last=$(tail -1 listing)
	[ "${#last}" -eq 3999 ]
	[[ "$last" == d00d00*"/f019999xxx"* ]]
}

@test "a pack of 20,000 paths of 4,000 bytes 15 directories deep costs its readers its unique names: ls, verify, stage and Python within a small multiple of a small pack's memory" {
	# each directory once, each entry its base name (234 bytes): 4.7 MB,
	# not 80 MB of whole paths
	"$PY3" - <<-'EOF'
		import os
		os.mkdir("tree")
		fd = os.open("tree", os.O_RDONLY)
		for i in range(15):
		    name = ("d%02d" % i) * 83 + "d"
		    os.mkdir(name, dir_fd=fd)
		    nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
		    os.close(fd)
		    fd = nfd
		for i in range(20000):
		    os.close(os.open(("f%06d" % i).ljust(234, "x"), os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
	EOF
	stager pack -q tree -o long.tar.zst >/dev/null
	mkdir ds
	echo x >ds/f
	stager pack -q ds -o small.tar.zst >/dev/null
	for c in "ls" "verify" "stage"; do
		measured "$STAGER" $c small.tar.zst
		[ "$RC" -eq 0 ]
		base=$RSS_KIB
		measured "$STAGER" $c long.tar.zst
		echo "$c: exit $RC, peak $RSS_KIB KiB (a small pack's: $base KiB; before: 88 MB)"
		[ "$RC" -eq 0 ]
		[ "$RSS_KIB" -lt $((base * 3)) ]
	done
	[ "$(find scratch/cache -name 'f019999x*' | wc -l)" -eq 1 ]
	# the last file: its name, and read by it (a lookup by path)
	open='import stager, sys; p = stager.Pack(sys.argv[1]); n = p._name(int(sys.argv[2])); print(len(n), len(p.read(n)))'
	measured "$PY3" -c "$open" small.tar.zst 0
	[ "$RC" -eq 0 ]
	[ "$(cat out)" = "1 2" ]
	base=$RSS_KIB
	measured "$PY3" -c "$open" long.tar.zst 19999
	echo "Python: exit $RC, peak $RSS_KIB KiB (a small pack: $base KiB; before: 98 MB): $(cat out) $(cat err)"
	[ "$RC" -eq 0 ]
	[ "$(cat out)" = "3999 0" ]
	[ "$RSS_KIB" -lt $((base * 2)) ]
}

@test "ls, stage, mount and Python agree on every name byte for byte: newlines, backslashes, Latin-1, UTF-8, 200-byte names" {
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	make_awkward_tree src
	echo back >"src/a/back\\slash"
	printf 'x' >"src/a/tab$(printf '\t')and$(printf '\001')"
	stager pack -q src -o p.tar.zst >/dev/null
	mkdir mnt
	run -0 stager mount p.tar.zst mnt
	run -0 stager stage p.tar.zst staged
	staged=$(cd staged && pwd -P)
	# every name as bytes, one set a reader, compared in Python
	"$PY3" - "$STAGER" "$staged" <<-'EOF'
		import os, re, subprocess, sys, stager
		st, staged = sys.argv[1], sys.argv[2]
		raw = subprocess.run([st, "ls", "p.tar.zst"], check=True, capture_output=True).stdout
		ls = set()
		for line in raw.split(b"\n")[:-1]:
		    line = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), line)
		    ls.add(line[:-1] if line.endswith(b"/") else line)
		def tree(top):
		    names, files = set(), set()
		    for d, dirs, fs in os.walk(os.fsencode(top)):
		        for n in dirs + fs:
		            p = os.path.relpath(os.path.join(d, n), os.fsencode(top))
		            names.add(p)
		            if os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n)):
		                files.add(p)
		    return names, files
		on_stage, stage_files = tree(staged)
		on_mount, mount_files = tree("mnt")
		py = {os.fsencode(n) for n in stager.Pack("p.tar.zst").names()}
		want = {b"a/new\nline", b"a/back\\slash", b"a/tab\tand\x01", b"a/lat\xe9n",
		        "a/café-日本".encode(), b"a/" + b"n" * 200, b"deep/" + b"/".join(b"level_%d" % i for i in range(1, 31)) + b"/file"}
		for name, got in (("ls", ls), ("stage", on_stage), ("mount", on_mount)):
		    assert got == on_stage, (name, sorted(got ^ on_stage))
		    assert want <= got, (name, sorted(want - got))
		assert py == stage_files == mount_files, sorted(py ^ stage_files)
		print("# %d names, %d files, the same in ls, stage, mount and Python" % (len(ls), len(py)))
	EOF
	run -0 stager umount mnt
}
