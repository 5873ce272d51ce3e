# delta.bash - what delta.bats and delta-fallback.bats share: the set-up,
# two versions of a tree (v1, v2), and the signatures and reads they check.

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SITE_CONFIG=/dev/null HOME="$T"
	unset SLURM_TMPDIR SLURM_JOB_ID STAGER_BWLIMIT
	mkdir shared
}

teardown() {
	cd /
	if mountpoint -q "$T/x" 2>/dev/null; then umount "$T/x" || umount -l "$T/x"; fi
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

# v1: n files of 64 KiB in 10 directories, the awkward cases, and a
# read-only file with an old mtime.
make_v1() { # dir n
	make_awkward_tree "$1"
	# in one process: a head for each file took a minute on a loaded machine
	"${PY3:-python3}" -c '
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
	c = "%s/class_%d" % (d, i % 10)
	os.makedirs(c, exist_ok=True)
	with open("%s/img_%d.jpg" % (c, i), "wb") as f:
		f.write(os.urandom(65536))
' "$1" "$2"
	chmod 0444 "$1/class_1/img_1.jpg"
	touch -d '2010-01-01 00:00:00.5' "$1/class_1/img_1.jpg"
}

# v2 from v1: 1% changed in place, 2 removed, 2 added, one renamed, one
# touched (same content, new mtime), one chmod-ed, a symlink retargeted.
make_v2() { # v1 v2 n
	cp -a "$1" "$2"
	local i
	for i in $(seq 1 $(($3 / 100))); do
		head -c 4096 /dev/urandom |
			dd of="$2/class_$((i * 7 % 10))/img_$((i * 7)).jpg" bs=4096 seek=3 conv=notrunc status=none
	done
	rm "$2/class_2/img_2.jpg" "$2/class_3/img_3.jpg"
	head -c 65536 /dev/urandom >"$2/class_4/new_1.jpg"
	head -c 30000 /dev/urandom >"$2/new_2.bin"
	mv "$2/class_5/img_5.jpg" "$2/class_5/renamed.jpg"
	touch -d '2020-05-05' "$2/class_6/img_6.jpg"
	chmod 0600 "$2/class_8/img_8.jpg"
	ln -sfn a/b/c/thousand "$2/rel-link"
	echo changed >>"$2/a/hello.txt" # hardlinked three times
}

same_tree() { # A B: the same files, links as links (B may be a link to a tree)
	diff -r --no-dereference "$1/" "$2/"
}

# the bytes stager read (read, pread64) from files under shared/
shared_bytes() { # strace output
	grep -E '^[0-9]+ +(read|pread64)\([0-9]+<'"$T"'/shared/' "$1" |
		awk -F'= ' '{ s += $NF } END { print s + 0 }'
}

# The staged tree as a user sees it: types, modes, sizes, links, content,
# nanosecond mtimes, and which paths inside share an inode.
entry_sig() {
	tree_sig "$1"
	tree_sig_ns "$1"
	(cd "$1" && find . -type f -links +1 -printf '%i %P\n' | sort -n |
		awk '{ if ($1 != last) { if (n > 1) print g; g = $2; n = 1 } else { g = g " " $2; n++ }
		       last = $1 } END { if (n > 1) print g }' | sort)
}

# What a full read of the pack stages: the reference for a delta build.
full_stage_sig() { # pack
	STAGER_SCRATCH_ROOT="$T/ref-scratch" "$STAGER" stage -q "$1" "$T/ref" >/dev/null || return
	entry_sig "$T/ref"
}

# a pack's digest, as stager ls --json gives it (fails if it cannot)
digest_of() { # pack
	local json
	json=$("$STAGER" ls --json "$1") || return
	jq -er .digest <<<"$json"
}

# the deltas a pack's trailer lists hold FILTER (jq -e)
deltas_are() { # pack jq-arguments... (the filter last)
	local pack=$1 json
	shift
	json=$("$STAGER" ls --json "$pack") || return
	jq -e "$@" <<<"$json"
}

# no cache entry being built is left (cache/<key>.tmp.<pid>)
no_tmp_entry() {
	local entries
	entries=$(ls -A "$STAGER_SCRATCH_ROOT/cache") || return
	[[ "$entries" != *.tmp.* ]]
}

# v1 cached, v2 with its delta: the fixture of the fallback tests
fallback_fixture() {
	make_v1 v1 100
	make_v2 v1 v2 100
	"$STAGER" pack -q v1 -o shared/v1.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o shared/v2.tar.zst --base shared/v1.tar.zst >/dev/null
	"$STAGER" stage -q shared/v1.tar.zst s1 >/dev/null
	DELTA=$(ls shared/v2.tar.zst.delta-*)
	cp "$DELTA" good-delta
	REF=$(full_stage_sig shared/v2.tar.zst)
	[ -n "$REF" ]
}

# stage v2: exit 0, a warning that names the delta, the full read, the tree of v2
stage_falls_back() { # what the warning says
	rm -rf s2
	run timeout 120 "$STAGER" stage --json shared/v2.tar.zst s2
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"warning: "*"$1"*"reading the whole pack"* ]]
	[[ "$output" == *"warning: "*"shared/v2.tar.zst.delta-"* ]]
	json=$(grep '^{' <<<"$output")
	jq -e '.delta == false' <<<"$json"
	[ "$(jq .source_bytes <<<"$json")" -ge "$(($(stat -c %s shared/v2.tar.zst) * 9 / 10))" ]
	[ "$(entry_sig s2)" = "$REF" ]
	# nothing of the failed build is left
	no_tmp_entry
	# the next stage is a warm hit of the right entry
	"$STAGER" stage -q --verify shared/v2.tar.zst s3 >/dev/null
	# a node with v1 alone for the next case
	chmod -R u+w "$STAGER_SCRATCH_ROOT"
	rm -rf "$STAGER_SCRATCH_ROOT" s1 s2 s3
	"$STAGER" stage -q shared/v1.tar.zst s1 >/dev/null
}
