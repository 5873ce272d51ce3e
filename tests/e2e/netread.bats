#!/usr/bin/env bats
# Reading a pack the way a cold stage does: from a network filesystem
# (sharedfs, a FUSE mount, stands in for NFS) past the page cache with two
# reads in flight (a frame each, or up to 4 MiB of small ones), or through
# the cache when the filesystem refuses direct
# reads; and frames of raw blocks (incompressible data), whose content is
# written from where it was read, against damage.

load helpers
bats_require_minimum_version 1.5.0

SHAREDFS=${SHAREDFS:-$BATS_TEST_DIRNAME/../../build/sharedfs}

setup() {
	T=$(reachable_mktemp stager-netread)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SITE_CONFIG=/dev/null HOME="$T"
	unset SLURM_TMPDIR SLURM_JOB_ID
	mounts=()
}

teardown() {
	local i
	cd /
	# the last mounted first: sharedfs before the disk under it
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true
	done
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

need_sharedfs() {
	[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] || skip "needs root and /dev/fuse"
	[ -x "$SHAREDFS" ] || {
		echo "sharedfs is not built: $SHAREDFS" >&2
		return 1
	}
}

# Incompressible files over several frames (raw blocks), compressible ones
# (decoded), and small ones that share frames.
make_data() {
	mkdir -p "$1/sub"
	head -c $((9 * 1048576 + 12345)) /dev/urandom >"$1/sub/random.bin"
	seq 1 900000 >"$1/counting.txt"
	for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom >"$1/sub/small$i"; done
	ln -s sub/small1 "$1/link"
}

stat_of() { # KEY: one sharedfs counter
	awk -v k="$1" '$1 == k { print $2 }' mnt/.sharedfs-stats
}

@test "a pack on a network filesystem is read past the page cache, each byte of it once" {
	need_sharedfs
	make_data src
	mkdir backing mnt
	"$STAGER" pack -q src -o backing/ds.tar.zst --frame-size 4M >/dev/null
	size=$(stat -c %s backing/ds.tar.zst)
	"$SHAREDFS" --delay-ms 0 backing mnt
	mounts+=("$T/mnt")
	echo reset >mnt/.sharedfs-stats
	run "$STAGER" stage --verbose mnt/ds.tar.zst dest
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"past the page cache (O_DIRECT on fuse)"* ]]
	[[ "$output" != *"refused"* ]]
	diff -r src dest
	# the trailer's read at the end is not read again with the last frame
	read=$(stat_of bytes_read)
	echo "read $read of a $size-byte pack"
	[ "$read" -ge "$size" ]
	[ "$read" -le $((size + 4096)) ]
	# verify reads it the same way, and a damaged copy is still caught
	run "$STAGER" verify --verbose mnt/ds.tar.zst
	[ "$status" -eq 0 ]
	[[ "$output" == *"O_DIRECT on fuse"* ]]
	# (a cache of its own: the copy claims the staged pack's digest, and
	# the entry made from that pack would be a hit)
	cp backing/ds.tar.zst backing/bad.tar.zst
	flip_byte backing/bad.tar.zst 3000000
	run env STAGER_SCRATCH_ROOT="$T/scratch2" "$STAGER" stage mnt/bad.tar.zst bad
	[ "$status" -eq 4 ]
	[ ! -e bad ]
}

@test "the default 256 KiB frames on a network filesystem: read past the page cache up to 4 MiB at a time, each byte once" {
	need_sharedfs
	command -v strace >/dev/null || skip "needs strace"
	make_data src
	mkdir backing mnt
	"$STAGER" pack -q src -o backing/ds.tar.zst >/dev/null
	"$STAGER" ls --json backing/ds.tar.zst >ls.json
	frames=$(jq '.frames' ls.json)
	size=$(stat -c %s backing/ds.tar.zst)
	[ "$frames" -gt $((size / 300000)) ]
	"$SHAREDFS" --delay-ms 0 backing mnt
	mounts+=("$T/mnt")
	echo reset >mnt/.sharedfs-stats
	# (strace cannot run under LeakSanitizer's ptrace)
	run env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -e trace=pread64 \
		-o "$T/reads" "$STAGER" stage --verbose mnt/ds.tar.zst dest
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"past the page cache (O_DIRECT on fuse), two reads of up to 4 MiB"* ]]
	diff -r src dest
	read=$(stat_of bytes_read)
	echo "read $read of a $size-byte pack in $frames frames"
	[ "$read" -ge "$size" ]
	[ "$read" -le $((size + 4096)) ]
	# the frames came several to a read: most of the pack in reads of
	# over 1 MiB, none over 4 MiB
	big=$(grep -o '= [0-9]*$' "$T/reads" | awk '$2 > 1048576 { n += $2 } END { print n + 0 }')
	max=$(grep -o '= [0-9]*$' "$T/reads" | awk '$2 > m { m = $2 } END { print m + 0 }')
	echo "$big bytes in reads over 1 MiB; the largest $max"
	[ "$big" -gt $((size / 2)) ]
	[ "$max" -le 4194304 ]
	# a damaged frame in a chunk is caught, nothing published
	cp backing/ds.tar.zst backing/bad.tar.zst
	flip_byte backing/bad.tar.zst 3000000
	run env STAGER_SCRATCH_ROOT="$T/scratch2" "$STAGER" stage mnt/bad.tar.zst bad
	[ "$status" -eq 4 ]
	[ ! -e bad ]
	run "$STAGER" verify mnt/bad.tar.zst
	[ "$status" -eq 4 ]
}

@test "tiny frames, and packs on a local disk, are read through the page cache" {
	need_sharedfs
	mkdir src
	seq 1 900000 >src/counting.txt
	seq 1 3 900000 >src/thirds.txt
	mkdir backing mnt
	"$STAGER" pack -q src -o backing/small.tar.zst --frame-size 64K >/dev/null
	"$SHAREDFS" --delay-ms 0 backing mnt
	mounts+=("$T/mnt")
	run "$STAGER" stage --verbose mnt/small.tar.zst d1
	[ "$status" -eq 0 ]
	[[ "$output" != *"O_DIRECT"* ]]
	diff -r src d1
	"$STAGER" pack -q src -o local.tar.zst >/dev/null
	run "$STAGER" stage --verbose local.tar.zst d2
	[ "$status" -eq 0 ]
	[[ "$output" != *"O_DIRECT"* ]]
	diff -r src d2
}

@test "a filesystem that refuses direct reads (EINVAL) is read through the page cache instead" {
	need_sharedfs
	command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4"
	make_data src
	truncate -s 96M ext4.img
	mkfs.ext4 -q ext4.img
	mkdir backing mnt
	mount -o loop ext4.img backing || skip "cannot loop-mount here"
	mounts+=("$T/backing")
	"$STAGER" pack -q src -o backing/ds.tar.zst --frame-size 4M >/dev/null
	size=$(stat -c %s backing/ds.tar.zst)
	# the mount hands O_DIRECT on to ext4, which wants aligned direct I/O
	"$SHAREDFS" --delay-ms 0 --pass-direct backing mnt
	mounts+=("$T/mnt")
	run dd if=mnt/ds.tar.zst of=/dev/null bs=1000 count=1 skip=3 iflag=direct
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	echo reset >mnt/.sharedfs-stats
	run "$STAGER" stage --verbose mnt/ds.tar.zst dest
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"refused a direct read (EINVAL)"* ]]
	diff -r src dest
	read=$(stat_of bytes_read)
	echo "read $read of a $size-byte pack"
	# (through the cache, the kernel's readahead runs on into the trailer,
	# and a page dropped behind one reader may be read again by the other)
	[ "$read" -ge "$size" ]
	[ "$read" -le $((size * 5 / 4)) ]
}

# The offset of the first block header of the frame at OFF (the frame
# header's size from its descriptor byte).
first_block() { # PACK OFF
	local fhd single fcs did hs
	fhd=$(dd if="$1" bs=1 skip=$(($2 + 4)) count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
	single=$(((fhd >> 5) & 1))
	fcs=$(((fhd >> 6) & 3))
	did=$((fhd & 3))
	hs=$((5 + (1 - single)))
	case $did in 1) hs=$((hs + 1)) ;; 2) hs=$((hs + 2)) ;; 3) hs=$((hs + 4)) ;; esac
	case $fcs in 0) hs=$((hs + single)) ;; 1) hs=$((hs + 2)) ;; 2) hs=$((hs + 4)) ;; 3) hs=$((hs + 8)) ;; esac
	echo $(($2 + hs))
}

set_byte() { # FILE OFFSET VALUE
	printf "$(printf '\\%03o' "$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

refused() { # NAME [SAID]: stage NAME.tar.zst: exit 4 (saying SAID), nothing at NAME
	run "$STAGER" stage "$1.tar.zst" "$1"
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"${2:-}"* ]]
	[ ! -e "$1" ]
}

@test "raw frames: damage in a block or in a block header is caught, nothing is published" {
	make_data src
	"$STAGER" pack -q src -o ds.tar.zst >/dev/null
	# a frame of raw blocks: compressed a little larger than its content
	"$STAGER" ls --json --long ds.tar.zst >ls.json
	off=$(jq '[.frame_table[] | select(.size > .tar_size)][0].offset' ls.json)
	[[ $off =~ ^[0-9]+$ ]]
	b=$(first_block ds.tar.zst "$off")
	hdr=$(dd if=ds.tar.zst bs=1 skip="$b" count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
	[ $(((hdr >> 1) & 3)) -eq 0 ] # a raw block

	# (the damaged copies first: each claims the good pack's digest, and
	# once that is cached they would be hits)
	# a byte of content
	cp ds.tar.zst content.tar.zst
	flip_byte content.tar.zst $((b + 3 + 70000))
	refused content damaged
	# a block header: a reserved block type, then a size past the frame
	cp ds.tar.zst type.tar.zst
	set_byte type.tar.zst "$b" $(((hdr | 6) & 255))
	refused type "does not decode"
	cp ds.tar.zst size.tar.zst
	set_byte size.tar.zst $((b + 2)) 255
	refused size
	[ -z "$(ls scratch/cache)" ]
	run "$STAGER" stage ds.tar.zst good
	[ "$status" -eq 0 ]
	diff -r src good
}
