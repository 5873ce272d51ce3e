# bench/lib.sh - what the benchmark scripts share (sourced by run.sh,
# mount.sh, delta.sh, scale.sh, python.sh and env.sh).  Needs TIMEOUT for
# `limited`.

# stager's settings come from nothing on this machine: every STAGER_* and
# the Slurm job's variables unset (each script then sets its own)
bench_clean_env() {
	local v
	while IFS= read -r v; do unset "$v"; done < <(compgen -e | grep '^STAGER_' || true)
	unset SLURM_JOB_ID SLURM_TMPDIR
}

# bench_args DEFAULT_REPS "$@": the options every benchmark script takes,
# --quick (QUICK=1), --reps N (REPS: DEFAULT_REPS, or 1 with --quick) and
# -h (the script's header comment); a bad one exits 1 naming the script.
bench_args() {
	local def=$1 top me
	shift
	top=${BASH_SOURCE[-1]}
	me=$(basename "$top")
	QUICK=0
	REPS=
	while (($#)); do
		case $1 in
		--quick) QUICK=1 ;;
		--reps) [[ $# -ge 2 ]] || { echo "$me: --reps needs a value" >&2; exit 1; }
			REPS=$2; shift ;;
		--reps=*) REPS=${1#--reps=} ;;
		-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$top"; exit 0 ;;
		*) echo "$me: unknown argument '$1' (try --help)" >&2; exit 1 ;;
		esac
		shift
	done
	if [[ -z $REPS ]]; then
		if ((QUICK)); then REPS=1; else REPS=$def; fi
	fi
	[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "$me: --reps wants a positive integer, not '$REPS'" >&2; exit 1; }
}

# limited CMD...: CMD under timeout (TIMEOUT seconds), its status in
# LIMIT_RC.  timeout puts itself in a process group of its own, so after a
# time-out (or when the suite is interrupted) what is left of that group is
# killed: a command that ignores SIGTERM would outlive it.
CUR_PGID=
limited() {
	timeout -k 10 "$TIMEOUT" "$@" </dev/null &
	CUR_PGID=$!
	LIMIT_RC=0
	wait "$CUR_PGID" || LIMIT_RC=$?
	if ((LIMIT_RC == 124 || LIMIT_RC == 137)); then
		kill -KILL -- "-$CUR_PGID" 2>/dev/null || true
	fi
	CUR_PGID=
}

# fresh_pages: touch and free BENCH_FRESH_MIB (default 3072, at most half
# of what is available) of memory just before a timed run.  A VM with
# free page reporting (virtio-balloon, as here) hands freed pages back to
# its host a few seconds after they are freed, and the next touch of each
# costs the host a fault: a run that writes 1 GiB took 0.4 s or 1.9 s
# depending on how long ago that memory was freed, which made one tool's
# run pay for another's.  Freshly freed pages are what a real node has.
# Not with --quick (QUICK=1: tiny data).  Used by delta.sh, whose runs
# start cold anyway; not by run.sh, where the second it takes would let
# the attribute cache of a warm stage expire (it starts each comparison
# with an untimed round instead).
fresh_pages() {
	local mib=${BENCH_FRESH_MIB:-3072} avail f
	((${QUICK:-0})) && return 0 # tiny data
	avail=$(awk '/^MemAvailable:/ { print int($2 / 2048) }' /proc/meminfo 2>/dev/null || echo 0)
	((mib > avail)) && mib=$avail
	((mib > 0)) || return 0
	f=$(mktemp /dev/shm/stager-bench-pages.XXXXXX 2>/dev/null) || return 0
	dd if=/dev/zero of="$f" bs=1M count="$mib" status=none 2>/dev/null || true
	rm -f "$f"
}

# sfs_forget BACK MNT: the mount's page cache of BACK's large files
# dropped, untimed, before a timed run.  sharedfs drops a file's cache at
# each open (close-to-open, as NFS), and the kernel does that work inside
# the open(2): after `cat` or `tar` had read a 2 GiB pack through the
# cache, the next tool's open of it took 0.4 s (measured), charged to
# whichever tool the rotation put next.  A real node never pays it: a
# fresh node has nothing cached, and NFS keeps the pages of a file that
# did not change.  One open each, here, does the dropping; the small files
# of a tree (a few KiB each) are left, their share is negligible.
sfs_forget() {
	local back=$1 mnt=$2 f
	while IFS= read -r -d '' f; do
		: <"$mnt/${f#"$back"/}" 2>/dev/null || true
	done < <(find "$back" -type f -size +1M -print0 2>/dev/null)
}

# warm PATH...: read the files (untimed) into the page cache, as a file
# server's cache would hold a dataset being staged
warm() { find "$@" -type f -exec cat {} + >/dev/null; }

# order I TOOL...: the tools in the order of repetition I: rotated by I-1,
# reversed in even repetitions
order() {
	local i=$1 n k
	shift
	local t=("$@") o=()
	n=${#t[@]}
	for ((k = 0; k < n; k++)); do o+=("${t[(k + i - 1) % n]}"); done
	if ((i % 2 == 0)); then
		for ((k = n - 1; k >= 0; k--)); do echo "${o[k]}"; done
	else
		printf '%s\n' "${o[@]}"
	fi
}

# json_field FILE FIELD: a number or true/false from a --json output
json_field() { sed -n "s/.*\"$2\": *\\([0-9.]*\\|true\\|false\\)[,}].*/\\1/p" "$1" 2>/dev/null | sed -n 1p; }

# median FILE, minof FILE, maxof FILE: of one number a line; NA if none
median() { [[ -s $1 ]] || { echo NA; return; }; sort -g "$1" | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.10g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
minof() { [[ -s $1 ]] || { echo NA; return; }; sort -g "$1" | sed -n 1p; }
maxof() { [[ -s $1 ]] || { echo NA; return; }; sort -g "$1" | tail -n 1; }

# ---- what bench/mount.sh and bench/python.sh share: a timed run on the
# emulated shared filesystem and a FUSE mount's end.  They use the caller's
# TMP, RUNSTAT, LIMIT_RC, LAST_OK, LAST_WALL, fail, die, sfs_quiesce, BACK,
# SHARED, SETTLE, SFS_STATS, STAGER and MS.

umount_fuse() { # MOUNTPOINT
	mountpoint -q "$1" 2>/dev/null || return 0
	fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || umount -l "$1" || true
}
# timed LABEL CMD...: CMD under runstat (and timeout); on success its wall
# seconds are appended to $TMP/LABEL.wall and LAST_OK=1; stdout to
# $TMP/LABEL.out
timed() {
	local label=$1 rs=$TMP/runstat.line
	shift
	: >"$rs"
	limited "$RUNSTAT" -o "$rs" -- "$@" >"$TMP/$label.out" 2>"$TMP/$label.err"
	if [[ -s $TMP/$label.err ]]; then
		sed "s/^/[$label] /" "$TMP/$label.err" >&2
	fi
	if ((LIMIT_RC)); then
		fail "$label" "exit status $LIMIT_RC: \`$*\`"
		return 0
	fi
	local wall
	wall=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$rs")
	[[ -n $wall ]] || die "cannot parse runstat output '$(cat "$rs")'"
	echo "$wall" >>"$TMP/$label.wall"
	LAST_OK=1
	LAST_WALL=$wall
}
# the mounts of a run are gone before the next one: `stager umount` is
# lazy, the mount's process ends once its files are closed
stager_umount() {
	local i
	mountpoint -q "$MS" 2>/dev/null && "$STAGER" umount -q "$MS" >/dev/null 2>&1 || true
	for ((i = 0; i < 100; i++)); do
		mountpoint -q "$MS" 2>/dev/null || break
		sleep 0.05
	done
	umount_fuse "$MS"
}
# sfs_timed LABEL CMD...: timed, on a shared filesystem whose attribute
# cache holds nothing from earlier runs and whose counters start at 0;
# then the run's bytes read and metadata operations go to $TMP/LABEL.rd and
# .meta.  OPEN_BEFORE=N, OPEN_AFTER=N: files open on it before the run and
# after it (a mount's process holds its pack open while it lives)
sfs_timed() {
	local label=$1
	sfs_forget "$BACK" "$SHARED"
	sync
	sleep "$SETTLE"
	sfs_quiesce "${OPEN_BEFORE:-0}"
	echo reset >"$SFS_STATS"
	timed "$@"
	((LAST_OK)) || return 0
	sfs_quiesce "${OPEN_AFTER:-0}"
	cat "$SFS_STATS" >"$TMP/stats.now"
	awk '$1 == "meta_ops" { print $2 }' "$TMP/stats.now" >>"$TMP/$label.meta"
	awk '$1 == "bytes_read" { print $2 }' "$TMP/stats.now" >>"$TMP/$label.rd"
}

# ---- a node's scratch on a real filesystem (run.sh, delta.sh): an image
# file formatted ext4 or XFS, on a loop device, mounted with the default
# options.  Nodes' scratch is a local disk, usually ext4 or XFS, and writing
# there costs what a tmpfs does not (block allocation, buffer heads,
# writeback).  The loop device reads and writes its file with direct I/O,
# as a disk would be written: a buffered loop keeps a second page cache of
# the image and copies every page once more when it writes back, on a
# 2-CPU machine a cost of its own that a node's disk does not have.

# scratch_fs_mount FS IMAGE MOUNTPOINT SIZE: IMAGE (sparse, SIZE) made
# with mkfs.FS (xfs: reflink=1, Debian 12's default, said explicitly),
# attached and mounted on MOUNTPOINT; 0 on success, else 1 with the reason
# in SCRATCH_FS_WHY.  Root only.
scratch_fs_mount() {
	local fs=$1 img=$2 mnt=$3 size=$4 dev mkfs
	SCRATCH_FS_WHY=
	case $fs in
	ext4) mkfs=(mkfs.ext4 -q -F) ;;
	xfs) mkfs=(mkfs.xfs -q -f -m reflink=1) ;;
	*) SCRATCH_FS_WHY="unknown scratch filesystem '$fs' (tmpfs, ext4 or xfs)"; return 1 ;;
	esac
	if (($(id -u) != 0)); then SCRATCH_FS_WHY="not root (mount)"; return 1; fi
	if ! command -v "${mkfs[0]}" >/dev/null || ! command -v losetup >/dev/null; then
		SCRATCH_FS_WHY="${mkfs[0]} or losetup is not installed"
		return 1
	fi
	mkdir -p "$mnt"
	rm -f "$img"
	if ! truncate -s "$size" "$img" || ! "${mkfs[@]}" "$img" >/dev/null 2>&1; then
		SCRATCH_FS_WHY="${mkfs[0]} of $img failed"
		rm -f "$img"
		return 1
	fi
	if ! dev=$(losetup -f --show --direct-io=on "$img" 2>/dev/null); then
		SCRATCH_FS_WHY="no loop device for $img"
		rm -f "$img"
		return 1
	fi
	if ! mount "$dev" "$mnt" 2>/dev/null; then
		losetup -d "$dev" 2>/dev/null || true
		SCRATCH_FS_WHY="cannot mount $dev ($fs) on $mnt"
		rm -f "$img"
		return 1
	fi
	echo "$dev" >"$img.dev"
	return 0
}
# scratch_fs_umount IMAGE MOUNTPOINT: unmounted, detached, the image
# removed (anything on it goes with it); quiet when nothing is mounted
scratch_fs_umount() {
	local img=$1 mnt=$2 dev=
	[[ -f $img.dev ]] && dev=$(cat "$img.dev")
	if mountpoint -q "$mnt" 2>/dev/null; then
		umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	if [[ -n $dev ]]; then losetup -d "$dev" 2>/dev/null || true; fi
	mountpoint -q "$mnt" 2>/dev/null && return 1
	rm -f "$img" "$img.dev"
	rmdir "$mnt" 2>/dev/null || true
	return 0
}
# scratch_fs_desc FS IMAGE: a line for the results: the filesystem, its
# mkfs options where they matter, and the disk under the image file
scratch_fs_desc() {
	local fs=$1 img=$2 back extra=
	back=$(findmnt -n -o SOURCE,FSTYPE -T "$(dirname "$img")" 2>/dev/null | awk '{ printf "%s (%s)", $1, $2 }')
	[[ $fs == xfs ]] && extra=", reflink=1"
	echo "$fs$extra, default mount options, on a loop device (direct I/O) over an image file on ${back:-the disk here}"
}
