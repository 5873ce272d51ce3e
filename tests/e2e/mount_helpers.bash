# mount_helpers.bash - what the tests of stager mount share (mount.bats,
# mount-shards.bats): a directory of the test's own with an empty mnt/,
# unmounting whatever the test mounted under it (also when it fails), the
# mount's serving process, and Slurm's answers.

SHAREDFS=${SHAREDFS:-$BATS_TEST_DIRNAME/../../build/sharedfs}
FIXTURES=$BATS_TEST_DIRNAME/fixtures

setup() {
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	T=$(reachable_mktemp stager-mount)
	cd "$T"
	export STAGER_SCRATCH_ROOT=$T/scratch
	mkdir mnt
	PIDS=
}

teardown() {
	cd /
	local m p
	# every mount under $T, by /proc/self/mountinfo: mountpoint(1) fails
	# on a dead FUSE mount
	for m in $(awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo); do
		fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"
	done
	for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
	if awk -v t="$T/" 'index($5, t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		return 0 # never rm through a mount
	fi
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

gone() { ! running "$1"; }
slot_held() { # SLOT: someone holds its flock
	if flock -n "$1" true; then return 1; fi
}
# mountpoint(1) stats the directory, which fails on a dead FUSE mount
mounted() { awk -v m="$T/$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# The pid of the process serving the mount at mnt (from its record).
server_pid() {
	local r
	for r in "$STAGER_SCRATCH_ROOT"/mounts/pid-*; do
		if [ "$(head -1 "$r")" = "$T/${1:-mnt}" ]; then
			r=${r##*/pid-}
			echo "${r%%-*}"
			return 0
		fi
	done
	return 1
}

# stager umount, then wait for the serving process to end: it ends when the
# kernel has sent the last release, which can come after the reader's close
# (FUSE sends it asynchronously), and until then it holds the pack open
# (30 s: at load 10 on two cores, 10 s was not always enough).
umount_gone() { # [MNT]
	local pid
	pid=$(server_pid "${1:-mnt}")
	stager umount "${1:-mnt}"
	wait_until 30 gone "$pid"
}

# Slurm's answers, in $T/bin: squeue lists the job if SLURM_STATE holds a
# state, else fails as for a job it has forgotten, and with SLURM_HANG set
# it does not answer at all (a minute); scontrol ping says the
# controller is SLURM_CTL; scontrol listpids lists $T/bin/listpids, or
# fails as where no step of the job runs.
fake_slurm() {
	mkdir -p "$T/bin"
	cat >"$T/bin/squeue" <<'SQUEUE'
#!/bin/sh
[ -z "$SLURM_HANG" ] || exec sleep 60
[ -n "$SLURM_STATE" ] || { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }
echo "$SLURM_STATE"
SQUEUE
	cat >"$T/bin/scontrol" <<'SCONTROL'
#!/bin/sh
case $1 in
ping) echo "Slurmctld(primary) at ctl is $SLURM_CTL" ;;
listpids) cat "${0%/*}/listpids" 2>/dev/null || exit 1 ;;
*) exit 1 ;;
esac
SCONTROL
	chmod +x "$T/bin/squeue" "$T/bin/scontrol"
}
