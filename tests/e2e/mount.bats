#!/usr/bin/env bats
# stager mount and umount: real FUSE mounts of packs (CI runs as root and
# has /dev/fuse).  Each test unmounts what it mounted, also when it fails.

load helpers
load mount_helpers
bats_require_minimum_version 1.5.0

# A stand-in for a Slurm job's processes on this node: a "slurmstepd" (a
# copy of bash, so that its name is slurmstepd, titled as Slurm titles its
# step daemons: "slurmstepd: [JOB.STEP]") whose one child, the step's main
# process, runs SCRIPT with SLURM_JOB_ID=JOB and has its pid in SCRIPT.pid.
fake_step() { # JOB STEP SCRIPT
	[ -x "$T/slurmstepd" ] || cp "$(command -v bash)" "$T/slurmstepd"
	cat >"$T/stepd.sh" <<'STEPD'
bash "$1" &
echo $! >"$1.pid.tmp" && mv "$1.pid.tmp" "$1.pid"
wait
STEPD
	SLURM_JOB_ID=$1 bash -c 'exec -a "slurmstepd: [$1.$2]" "$0" "$3/stepd.sh" "$4"' \
		"$T/slurmstepd" "$1" "$2" "$T" "$T/$3" 3>&- &
	PIDS="$PIDS $!"
	wait_until 10 test -s "$T/$3.pid"
	PIDS="$PIDS $(cat "$T/$3.pid")"
}

@test "mount: the tree as packed (modes, mtimes, symlinks, hardlinks), read-only, umount" {
	make_awkward_tree src
	stager pack -q src -o p.tar.zst --frame-size 256K
	run stager mount p.tar.zst mnt
	[ "$status" -eq 0 ]
	[ "$(tree_sig src)" = "$(tree_sig mnt)" ]
	[ "$(tree_sig_ns src)" = "$(tree_sig_ns mnt)" ]
	[ "$(link_groups src)" = "$(link_groups mnt)" ]
	cmp src/big.bin mnt/big.bin
	[ "$(readlink mnt/rel-link)" = a/hello.txt ]
	# every change is refused: read-only
	run -1 touch mnt/new
	echo "$output" | grep -q "Read-only"
	run sh -c 'echo x >>mnt/a/hello.txt'
	[ "$status" -ne 0 ]
	run -1 mkdir mnt/d
	run -1 rm mnt/zero
	run -1 mv mnt/zero mnt/zero2
	[ "$(tree_sig src)" = "$(tree_sig mnt)" ]
	pid=$(server_pid)
	running "$pid"
	run stager umount mnt
	[ "$status" -eq 0 ]
	! mountpoint -q mnt || false
	# umount returns once the mount's process has let go of the pack
	gone "$pid"
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" | grep pid-)" ]
}

@test "mount: refusals name the problem: not empty, missing pack, not a pack, hostile, not a mount" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	touch mnt/occupied
	run stager mount p.tar.zst mnt
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "not empty"
	rm mnt/occupied
	run stager mount nothere.tar.zst mnt
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "nothere.tar.zst"
	head -c 100000 /dev/urandom >junk.tar.zst
	run stager mount junk.tar.zst mnt
	[ "$status" -eq 4 ]
	ln -s /etc/passwd src/evil
	stager pack -q src -o evil.tar.zst
	run stager mount evil.tar.zst mnt
	[ "$status" -eq 4 ]
	echo "$output" | grep -q "outside"
	mkfifo fifo.tar.zst
	run timeout 10 "$STAGER" mount fifo.tar.zst mnt
	[ "$status" -eq 2 ]
	! mountpoint -q mnt || false
	run stager umount mnt
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "not a stager mount"
}

@test "mount: a mountpoint that is missing, or that cannot be reached, is named so" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	run stager mount p.tar.zst nowhere
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "mountpoint 'nowhere' does not exist"
	[ "$(id -u)" -eq 0 ] || skip "needs root to act as another user"
	as_user_setup
	mkdir -m 0700 priv
	mkdir -m 1777 pub
	chmod 0644 p.tar.zst
	run as_user env HOME="$T/pub" STAGER_SCRATCH_ROOT="$T/pub/scratch" "$AS_USER_STAGER" \
		mount p.tar.zst priv
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "cannot open the mountpoint 'priv': Permission denied"
}

@test "mount: a damaged frame fails the reads that need it (EIO, logged once); the rest reads" {
	mkdir src
	head -c 3000000 /dev/urandom >src/big
	echo small >src/small
	stager pack -q src -o p.tar.zst --frame-size 256K
	flip_byte p.tar.zst 1500000
	stager mount p.tar.zst mnt
	run -0 cat mnt/small
	[ "$output" = small ]
	run cat mnt/big
	[ "$status" -ne 0 ]
	echo "$output" | grep -q "Input/output error"
	# a read that does not touch the frame succeeds
	head -c 262144 mnt/big | cmp - <(head -c 262144 src/big)
	run cat mnt/big
	[ "$status" -ne 0 ]
	[ "$(grep -c "frame .* is damaged" "$STAGER_SCRATCH_ROOT/mounts/log")" -eq 1 ]
	grep -q "p.tar.zst': frame 5 is damaged" "$STAGER_SCRATCH_ROOT/mounts/log"
}

@test "mount: a pack of format 2 is served, each file checked whole before any of it" {
	cp "$FIXTURES/format2.tar.zst" old.tar.zst
	stager unpack -q old.tar.zst ref
	stager mount old.tar.zst mnt
	[ "$(tree_sig ref)" = "$(tree_sig mnt)" ]
	stager umount mnt
	# damage the first frame: the file that starts there fails whole, at
	# once; the files of the last frame read
	size=$(stat -c %s old.tar.zst)
	"$STAGER" ls --long --json old.tar.zst >ls.json
	off=$(jq '.frame_table[0].offset + 2000' ls.json)
	flip_byte old.tar.zst "$off"
	stager mount old.tar.zst mnt
	run head -c 100 mnt/a/b/multi
	[ "$status" -ne 0 ]
	[ "$(cat mnt/a/f1)" = "format two" ]
	grep -q "old.tar.zst': frame 0 is damaged" "$STAGER_SCRATCH_ROOT/mounts/log"
	[ "$size" -eq "$(stat -c %s old.tar.zst)" ]
}

@test "mount: concurrent readers each read the right bytes" {
	mkdir src
	for i in 1 2 3 4 5 6; do head -c 2000000 /dev/urandom >"src/f$i"; done
	stager pack -q src -o p.tar.zst --frame-size 256K
	stager mount --cache-size 1M p.tar.zst mnt
	pids=
	for r in 1 2 3; do
		for i in 1 2 3 4 5 6; do
			cmp "src/f$i" "mnt/f$i" &
			pids="$pids $!"
		done
	done
	for p in $pids; do wait_pid "$p"; done
}

@test "mount: a pack larger than the scratch quota is mounted and read; nothing is copied" {
	mkdir src
	head -c 8000000 /dev/urandom >src/big
	stager pack -q src -o p.tar.zst
	export STAGER_CACHE_MAX=1M
	stager mount p.tar.zst mnt
	cmp src/big mnt/big
	[ "$(du -s "$STAGER_SCRATCH_ROOT" | cut -f1)" -lt 1000 ]
}

@test "mount: kill -9 of the mount's process gives readers a clean error; umount and clean recover" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	stager mount p.tar.zst mnt
	pid=$(server_pid)
	kill -9 "$pid"
	wait_until 10 gone "$pid"
	run cat mnt/f
	echo "$output"
	[ "$status" -ne 0 ]
	# ENOTCONN; ECONNABORTED when the request met the abort (the process
	# was still closing its descriptors)
	echo "$output" | grep -Eq "not connected|connection abort"
	run stager status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq '.mounts | length')" -eq 1 ]
	[ "$(echo "$output" | jq '.mounts[0].alive')" = false ]
	run stager umount mnt
	[ "$status" -eq 0 ]
	! mounted mnt || false
	# the same through clean
	stager mount p.tar.zst mnt
	pid=$(server_pid)
	kill -9 "$pid"
	wait_until 10 gone "$pid"
	run -0 stager clean --dry-run
	echo "$output" | grep -q "mount"
	mounted mnt
	run stager clean
	[ "$status" -eq 0 ]
	! mounted mnt || false
	[ "$(cat mnt/../src/f)" = x ]
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" | grep pid-)" ]
}

@test "mount: umount while a file is open: it stays readable until closed, then the process ends" {
	mkdir src && head -c 3000000 /dev/urandom >src/big
	stager pack -q src -o p.tar.zst --frame-size 256K
	stager mount p.tar.zst mnt
	pid=$(server_pid)
	exec 7<mnt/big
	stager umount mnt 2>umount.err
	grep -q "still open" umount.err
	! mountpoint -q mnt || false
	running "$pid"
	cmp - src/big <&7
	exec 7<&-
	wait_until 10 gone "$pid"
}

@test "mount: status lists live mounts; --foreground serves until interrupted" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	stager mount p.tar.zst mnt
	run -0 stager status --json
	[ "$(echo "$output" | jq -r '.mounts[0].mountpoint')" = "$T/mnt" ]
	[ "$(echo "$output" | jq '.mounts[0].alive')" = true ]
	run -0 stager status
	echo "$output" | grep -q "$T/mnt"
	stager umount mnt
	mkdir mnt2
	"$STAGER" mount --foreground p.tar.zst mnt2 2>fg.log &
	fg=$!
	PIDS=$fg
	wait_until 10 mountpoint -q mnt2
	[ "$(cat mnt2/f)" = x ]
	kill -TERM "$fg"
	wait_pid "$fg" 10
	! mountpoint -q mnt2 || false
	# a stop signal the moment the tree shows (or before) is not lost, nor
	# does it end the process with a dead mount left behind
	# (SIGINT stays ignored, as a background job of a script starts with it)
	for sig in TERM HUP TERM HUP TERM HUP; do
		"$STAGER" mount --foreground p.tar.zst mnt2 2>fg.log &
		fg=$!
		PIDS=$fg
		t0=$SECONDS # the moment the tree shows: a busy loop, bounded
		until mountpoint -q mnt2 || ! running "$fg"; do
			[ $((SECONDS - t0)) -lt 20 ] || { echo "no mount after 20 s"; false; }
		done
		kill -"$sig" "$fg"
		wait_pid "$fg" 10
		! mounted mnt2 || false
		"$STAGER" mount --foreground p.tar.zst mnt2 2>fg.log &
		fg=$!
		PIDS=$fg
		sleep 0.0$((RANDOM % 10))
		kill -"$sig" "$fg"
		rc=0
		wait_pid "$fg" 10 || rc=$?
		[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || [ "$rc" -eq $((128 + $(kill -l "$sig"))) ] # done, interrupted, or killed before it mounted
		! mounted mnt2 || false # not even a dead one
	done
	# SIGINT ignored from the start (a script's background job) stays so
	"$STAGER" mount --foreground p.tar.zst mnt2 2>fg.log &
	fg=$!
	PIDS=$fg
	wait_until 10 mountpoint -q mnt2
	kill -INT "$fg"
	sleep 0.3 # check-tests: the time an ignored signal is given to act
	running "$fg"
	[ "$(cat mnt2/f)" = x ]
	kill -TERM "$fg"
	wait_pid "$fg" 10
	! mounted mnt2 || false
	# stopped while a file is open: the kernel's release never comes, the
	# mount frees the file's state itself (under make asan, LeakSanitizer
	# would fail the exit status)
	"$STAGER" mount --foreground p.tar.zst mnt2 2>fg.log &
	fg=$!
	PIDS=$fg
	wait_until 10 mountpoint -q mnt2
	exec 7<mnt2/f
	kill -TERM "$fg"
	wait_pid "$fg" 10
	exec 7<&-
	! mounted mnt2 || false
	! grep -q "Sanitizer" fg.log || false
}

@test "mount --foreground: a stop signal while it waits for a reader slot ends it at once, nothing mounted" {
	export STAGER_MAX_READERS_PER_NODE=1
	mkdir src mnt2 && echo x >src/f
	stager pack -q src -o p.tar.zst
	stager stage -q p.tar.zst staged >/dev/null # makes the slot files
	# another process holds the node's only slot (no flock(1) parent: the
	# holder is the process killed at the end)
	bash -c 'exec 9<"$1" && flock 9 && exec sleep 120' _ "$STAGER_SLOT_DIR/slot.0" 3>&- &
	holder=$!
	PIDS=$holder
	wait_until 30 slot_held "$STAGER_SLOT_DIR/slot.0"
	for sig in TERM HUP INT; do
		# a log of its own: fg.log of the last round says it waits before
		# this process has even started (it would die of SIGHUP, 129)
		"$STAGER" mount --foreground p.tar.zst mnt2 2>"fg-$sig.log" 3>&- &
		fg=$!
		PIDS="$holder $fg"
		wait_until 20 grep -q "waiting for a shared-FS slot" "fg-$sig.log"
		t0=$(date +%s.%N)
		kill -"$sig" "$fg"
		rc=0
		wait_pid "$fg" 10 || rc=$?
		t=$(echo "$(date +%s.%N) - $t0" | bc -l)
		cat "fg-$sig.log"
		echo "SIG$sig: exit $rc after $t s"
		[ "$rc" -eq 5 ] # interrupted (SIGINT too, ignored as a background job starts)
		grep -q "interrupted while waiting for a shared-FS slot" "fg-$sig.log"
		faster_than "$t" "$(signal_limit 1)" # not after slot_wait_max (600 s)
		! mounted mnt2 || false
	done
	kill "$holder"
	wait_pid "$holder" 10 || [ $? -eq 143 ]
}

@test "mount: a pack replaced by a rename is still served as mounted; one changed in place fails (stale), never mixed" {
	mkdir src
	head -c 3000000 /dev/urandom >src/big
	stager pack -q src -o p.tar.zst --frame-size 256K
	cp src/big v1
	stager mount --cache-size 1M p.tar.zst mnt
	head -c 1000 /dev/urandom >src/other
	stager pack -q src -o p2.tar.zst --frame-size 256K
	mv p2.tar.zst p.tar.zst
	cmp v1 mnt/big
	stager umount mnt
	stager mount --cache-size 1M p.tar.zst mnt
	head -c 300000 mnt/big >/dev/null
	# rewrite in place, same size: reads of frames not cached fail.  The
	# byte is in frame 6: past the 4 frames read ahead of the head's
	# frames 0-1 (one of those may be cached, and is rightly served as it
	# was mounted), and not in the pack's last MiB (read with the trailer
	# at mount, served as it was then)
	flip_byte p.tar.zst 1700000
	touch p.tar.zst
	run cmp v1 mnt/big
	[ "$status" -ne 0 ]
	echo "$output" | grep -q "Stale\|stale\|differ"
	run cat mnt/big
	[ "$status" -ne 0 ]
	grep -q "changed since it was mounted" "$STAGER_SCRATCH_ROOT/mounts/log"
}

@test "mount: through the shared filesystem, a job touching 1% of the files reads a small part of the pack" {
	[ "$(id -u)" -eq 0 ] || skip "sharedfs mounts for all users as root"
	[ -x "$SHAREDFS" ] || skip "sharedfs is not built"
	mkdir back shared
	"$GENDATA" images src --files 2000 --classes 20 >/dev/null
	stager pack -q src -o back/p.tar.zst
	"$SHAREDFS" --delay-ms 0 back shared 3>&-
	echo reset >shared/.sharedfs-stats
	stager mount shared/p.tar.zst mnt
	find mnt -type f | head -20 | while read -r f; do cat "$f" >/dev/null; done
	read=$(awk '$1 == "bytes_read" { print $2 }' shared/.sharedfs-stats)
	size=$(stat -c %s back/p.tar.zst)
	echo "read $read of $size bytes"
	[ "$read" -gt 0 ]
	[ "$read" -lt $((size / 5)) ]
	umount_gone
	fusermount3 -u shared
}

@test "mount: reads are paced by --bwlimit and hold a reader slot only while they read" {
	mkdir src other third
	head -c 6000000 /dev/urandom >src/big
	head -c 2000000 /dev/urandom >other/f
	head -c 2000000 /dev/urandom >third/f
	stager pack -q src -o p.tar.zst --frame-size 1M
	stager pack -q other -o o.tar.zst
	stager pack -q third -o t.tar.zst
	export STAGER_SLOT_DIR=$T/slots STAGER_MAX_READERS_PER_NODE=1
	stager mount --bwlimit 2M p.tar.zst mnt
	t0=$(date +%s.%N)
	cat mnt/big >got &
	reader=$!
	PIDS=$reader
	wait_until 10 test -s got
	# the node's one slot is the mount's while it reads: a stage waits for it
	"$STAGER" stage -v o.tar.zst s1 >/dev/null 2>stage1.err
	wait_pid "$reader" 30
	t=$(echo "$(date +%s.%N) - $t0" | bc -l)
	echo "6 MB read at --bwlimit 2M in $t s"
	cmp got src/big
	grep -q "waiting for a shared-FS slot" stage1.err
	# 6 MB at 2 MB/s, less the burst allowed at the start
	[ "$(echo "$t >= 2.4" | bc -l)" -eq 1 ]
	# idle, the mount gives its slot back: the next stage does not wait
	sleep 2 # check-tests: the mount gives its slot back after 1 s without a read
	"$STAGER" stage -v t.tar.zst s2 >/dev/null 2>stage2.err
	[ "$(grep -c "waiting for a shared-FS slot" stage2.err)" -eq 0 ]
	diff -r other s1
	diff -r third s2
	stager umount mnt
}

@test "mount: a read waits for a reader slot 5 s at most, not slot_wait_max" {
	mkdir src && head -c 2000000 /dev/urandom >src/f
	stager pack -q src -o p.tar.zst
	export STAGER_SLOT_DIR=$T/slots STAGER_MAX_READERS_PER_NODE=1 STAGER_SLOT_WAIT_MAX=600
	mkdir -m 1777 "$T/slots"
	stager mount p.tar.zst mnt
	# the node's one slot, held for good (a stuck stage, say)
	# (the sleep itself holds it: killed, nothing of it stays behind)
	(exec 9>"$T/slots/slot.0" && flock 9 && exec sleep 300) >/dev/null 2>&1 3>&- &
	PIDS=$!
	wait_until 10 sh -c "grep -q FLOCK /proc/locks && [ \"\$(cat /proc/$PIDS/comm)\" = sleep ]"
	t0=$(date +%s.%N)
	cmp mnt/f src/f
	t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	echo "# the read went ahead without a slot after $t s" >&3
	awk -v t="$t" 'BEGIN { exit !(t >= 4) }'
	faster_than "$t" 10
	kill "$PIDS"
	stager umount mnt
}

@test "run --mount: the command reads the pack at STAGER_MOUNT, which goes after it, also after SIGTERM" {
	mkdir src && head -c 3000000 /dev/urandom >src/big && echo x >src/f
	stager pack -q src -o p.tar.zst --frame-size 256K
	export STAGER_SLOT_DIR=$T/slots
	unset SLURM_JOB_ID SLURM_TMPDIR
	run stager run --mount p.tar.zst -- sh -c 'cmp "$STAGER_MOUNT/big" src/big && echo "$STAGER_MOUNT" >where'
	echo "$output"
	[ "$status" -eq 0 ]
	where=$(cat where)
	[ "$(basename "$where")" = p ]
	! awk -v m="$where" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo || false
	[ ! -e "$where" ]
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" | grep pid-)" ]
	# a DIR of one's own; SIGTERM to the whole process group (as Slurm
	# signals a job): the command still reads in its grace time
	mkdir mnt2
	setsid "$STAGER" run --grace 10s --mount p.tar.zst:"$T/mnt2" -- sh -c '
		trap "cat \"\$STAGER_MOUNT/f\" >after; cmp \"\$STAGER_MOUNT/big\" src/big && echo same >>after; exit 0" TERM
		touch started; while :; do sleep 0.1; done' &
	pid=$!
	PIDS=$pid
	wait_until 10 test -e started
	kill -TERM -- "-$pid"
	wait_pid "$pid" 30 || true
	[ "$(cat after)" = "x
same" ]
	! mounted mnt2 || false
	[ -d mnt2 ] # not stg_run's to remove
	run stager run --all-nodes --mount p.tar.zst -- true
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "not with --all-nodes"
}

@test "run --mount: a mount that does not end when let go of is killed, and its record and pins swept at once" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	export STAGER_SLOT_DIR=$T/slots
	unset SLURM_JOB_ID SLURM_TMPDIR
	# the command stops the mount's serving process (its record names it)
	run stager run --mount p.tar.zst -- sh -c '
		cmp "$STAGER_MOUNT/f" src/f || exit 9
		for r in "$STAGER_SCRATCH_ROOT"/mounts/pid-*; do
			p=${r##*/pid-}
			kill -STOP "${p%%-*}"
		done'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"did not end when let go of: killed"* ]]
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" | grep pid-)" ]
	! grep -q " $T/scratch" /proc/self/mountinfo || false
}

@test "mount --cache: frames read are kept in the node cache; a later mount reads them from there, checked" {
	[ "$(id -u)" -eq 0 ] || skip "sharedfs mounts for all users as root"
	[ -x "$SHAREDFS" ] || skip "sharedfs is not built"
	mkdir back shared src
	for i in 1 2 3; do head -c 1000000 /dev/urandom >"src/f$i"; done
	stager pack -q src -o back/p.tar.zst --frame-size 256K
	"$SHAREDFS" --delay-ms 0 back shared 3>&-
	stager mount --cache shared/p.tar.zst mnt
	for i in 1 2 3; do cmp "src/f$i" "mnt/f$i"; done
	umount_gone
	run -0 stager status --json
	[ "$(echo "$output" | jq '[.entries[] | select(.kind == "frames")] | length')" -eq 1 ]
	kept=$(echo "$output" | jq '[.entries[] | select(.kind == "frames")][0].size')
	[ "$kept" -gt 3000000 ]
	# the next mount reads the frames here: only the trailer crosses
	echo reset >shared/.sharedfs-stats
	stager mount --cache shared/p.tar.zst mnt
	for i in 1 2 3; do cmp "src/f$i" "mnt/f$i"; done
	read=$(awk '$1 == "bytes_read" { print $2 }' shared/.sharedfs-stats)
	echo "read $read bytes"
	[ "$read" -lt 1100000 ]
	umount_gone
	# a kept frame damaged on disk is fetched from the pack again
	key=$(echo "$output" | jq -r '[.entries[] | select(.kind == "frames")][0].key')
	chmod -R u+w "$STAGER_SCRATCH_ROOT/cache/$key"
	flip_byte "$STAGER_SCRATCH_ROOT/cache/$key/frames" 300000
	stager mount --cache --cache-size 1M shared/p.tar.zst mnt
	for i in 1 2 3; do cmp "src/f$i" "mnt/f$i"; done
	umount_gone
	# an older pack's frames are not kept, with a warning
	cp "$FIXTURES/format2.tar.zst" old.tar.zst
	run stager mount --cache old.tar.zst mnt
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "format 2: its frames cannot be checked alone, so they are not kept (--cache)"
	umount_gone
	fusermount3 -u shared
}

@test "mount in a job: it records the job; it ends on its own when the job's batch shell does (kill -9)" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	job=$((800000 + RANDOM))
	cat >batch.sh <<EOF
"$STAGER" mount p.tar.zst mnt 2>mount.err || exit
exec sleep 300
EOF
	fake_step "$job" batch batch.sh
	wait_until 10 mounted mnt
	shell=$(cat batch.sh.pid)
	wait_until 10 server_pid
	pid=$(server_pid)
	[ "$(cat mnt/f)" = x ]
	# Slurm's controller does not answer: the job's state is unknown,
	# never taken for over
	fake_slurm
	export SLURM_STATE= SLURM_CTL=DOWN PATH="$T/bin:$PATH"
	run stager status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r '.mounts[0].job')" = "$job" ]
	[ "$(echo "$output" | jq '.mounts[0].job_over')" = null ]
	run -0 stager status
	echo "$output" | grep -q "job $job (state unknown"
	# the daemon left the job's session: only its own watch ends it
	[ "$(ps -o sid= -p "$pid")" -ne "$(ps -o sid= -p "$shell")" ]
	kill -9 "$shell"
	wait_until 5 gone "$pid"
	! mounted mnt || false
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" | grep pid-)" ]
	grep -q "job $job is over (its batch shell, process $shell, ended): unmounting '$T/mnt'" \
		"$STAGER_SCRATCH_ROOT/mounts/log"
}

@test "mount in a job: made by a step (srun), it lives as long as the batch shell, not the step" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	job=$((800000 + RANDOM))
	echo 'exec sleep 300' >batch.sh
	fake_step "$job" batch batch.sh
	# another cluster's job of the same id, on this machine: not this one
	echo 'exec sleep 300' >other.sh
	fake_step "$job" batch other.sh
	# Slurm lists the job's processes here: the batch shell is the batch
	# step's task 0
	fake_slurm
	printf 'PID JOBID STEPID LOCALID GLOBALID\n%s %s batch 0 0\n' "$(cat batch.sh.pid)" "$job" \
		>bin/listpids
	cat >task.sh <<EOF
PATH="$T/bin:\$PATH" "$STAGER" mount p.tar.zst mnt 2>mount.err || exit
exec sleep 300
EOF
	fake_step "$job" 0 task.sh
	wait_until 10 mounted mnt
	wait_until 10 server_pid
	pid=$(server_pid)
	# the step ends: the mount stays
	task=$(cat task.sh.pid)
	kill -9 "$task"
	wait_until 5 gone "$task"
	# as does the other cluster's job
	kill -9 "$(cat other.sh.pid)"
	sleep 2.5 # check-tests: longer than the watch's /proc poll, were it watching either
	running "$pid"
	[ "$(cat mnt/f)" = x ]
	# the batch shell ends: the mount goes
	kill -9 "$(cat batch.sh.pid)"
	wait_until 5 gone "$pid"
	! mounted mnt || false
}

@test "mount in a job: clean --job ends that job's mounts and drops their pins; another job's stays; plain clean ends those of jobs over" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	# staged first: the mounts serve the node cache's entry and pin it
	stager stage -q p.tar.zst staged >/dev/null
	a=$((800000 + RANDOM))
	b=$((a + 1))
	mkdir -p jobdir/m mnt2
	SLURM_JOB_ID=$a stager mount p.tar.zst jobdir/m
	SLURM_JOB_ID=$b stager mount p.tar.zst mnt2
	pa=$(server_pid jobdir/m)
	pb=$(server_pid mnt2)
	fake_slurm
	export SLURM_STATE=RUNNING SLURM_CTL=UP
	export PATH="$T/bin:$PATH"
	run -0 stager status --json
	[ "$(echo "$output" | jq "[.entries[].pins[] | select(.owner | startswith(\"pid-$pa-\"))] | length")" -eq 1 ]
	run -0 stager clean --dry-run --job "$a"
	echo "$output" | grep -q "would remove mount .* $T/jobdir/m$"
	[ "$(echo "$output" | grep -c "remove mount")" -eq 1 ]
	running "$pa"
	# the epilog's clean, as the job's user; Slurm does not answer: job
	# a's mount goes before Slurm is asked about b's, and Slurm is given
	# 10 s, not the minute it would take
	t0=$(date +%s.%N)
	SLURM_HANG=1 "$STAGER" clean --job "$a" >clean.out 2>&1 3>&- &
	cl=$!
	PIDS=$cl
	wait_until 3 gone "$pa"
	wait_pid "$cl" 20
	t=$(echo "$(date +%s.%N) - $t0" | bc -l)
	cat clean.out
	echo "clean --job took $t s"
	grep -q "removed mount .* $T/jobdir/m$" clean.out
	[ "$(grep -c "removed mount" clean.out)" -eq 1 ]
	# stopped by its SIGTERM at once, not killed after the wait
	[ "$(grep -c "did not end" clean.out)" -eq 0 ]
	faster_than "$t" 14
	! mounted jobdir/m || false
	rmdir jobdir/m jobdir # the job's directory can go now
	run -0 stager status --json
	[ "$(echo "$output" | jq "[.entries[].pins[] | select(.owner | startswith(\"pid-$pa-\"))] | length")" -eq 0 ]
	[ "$(echo "$output" | jq "[.entries[].pins[] | select(.owner | startswith(\"pid-$pb-\"))] | length")" -eq 1 ]
	[ "$(echo "$output" | jq '.mounts | length')" -eq 1 ]
	[ "$(echo "$output" | jq -r '.mounts[0].job')" = "$b" ]
	running "$pb"
	[ "$(cat mnt2/f)" = x ]
	# a plain clean asks Slurm: job b runs; then it is gone from squeue
	# but the controller does not answer (unknown: kept); then it is over
	run -0 stager status
	echo "$output" | grep -q "job $b (running)"
	run stager clean
	[ "$status" -eq 0 ]
	running "$pb"
	export SLURM_STATE= SLURM_CTL=DOWN
	run -0 stager status --json
	[ "$(echo "$output" | jq '.mounts[0].job_over')" = null ]
	run stager clean
	[ "$status" -eq 0 ]
	running "$pb"
	[ "$(cat mnt2/f)" = x ]
	export SLURM_CTL=UP
	run -0 stager status --json
	[ "$(echo "$output" | jq '.mounts[0].job_over')" = true ]
	run -0 stager status
	echo "$output" | grep -q "job $b (over"
	run stager clean
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "removed mount .* $T/mnt2$"
	gone "$pb"
	! mounted mnt2 || false
	[ -z "$(ls -A "$STAGER_SCRATCH_ROOT/mounts" | grep pid-)" ]
}

@test "mount: its serving process holds no descriptor of its caller's, only its own (background mount and run --mount)" {
	mkdir src && echo x >src/f
	stager pack -q src -o p.tar.zst
	echo secret >caller-only
	# the caller has an extra descriptor open (7)
	stager mount p.tar.zst mnt 7<caller-only
	pid=$(server_pid mnt)
	ls -l "/proc/$pid/fd" | tee fds
	! grep -q caller-only fds || false
	# each is the mount's own: standard ones (/dev/null, its log), the
	# scratch root, /dev/fuse, the pack, its stop pipe
	awk 'NR > 1 { print $NF }' fds | while read -r t; do
		case "$t" in
		/dev/null | /dev/fuse | "$T/p.tar.zst" | "$STAGER_SCRATCH_ROOT" | "$STAGER_SCRATCH_ROOT/mounts/log" | pipe:*) ;;
		*) echo "not the mount's own: $t" && exit 1 ;;
		esac
	done
	stager umount mnt
	# run --mount's: the command looks at it while it runs
	stager run --mount p.tar.zst:"$T/mnt" -- sh -c '
		for r in "$STAGER_SCRATCH_ROOT"/mounts/pid-*; do
			r=${r##*/pid-}
			ls -l "/proc/${r%%-*}/fd"
		done >run-fds' 7<caller-only
	cat run-fds
	grep -q /dev/fuse run-fds
	! grep -q caller-only run-fds || false
}
