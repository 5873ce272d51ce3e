#!/usr/bin/env bats
# A node shared by two real users (made here with useradd; the tests run
# them with runuser): scratch roots under a shared parent, slots one user
# holds while another waits.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	[ "$(id -u)" -eq 0 ] || skip "needs root to make two users"
	command -v useradd >/dev/null && command -v runuser >/dev/null || skip "needs useradd and runuser"
	for u in stgalice stgbob; do
		id "$u" >/dev/null 2>&1 || useradd -M -N -s /bin/sh "$u"
	done
	# a place both reach, whatever the mode of /tmp or of the checkout
	U=$(reachable_mktemp stager-users)
	export U
	mkdir "$U/bin"
	cp "$STAGER" "$U/bin/stager"
	chmod 0755 "$U/bin" "$U/bin/stager"
	runuser -u stgalice -- test -x "$U/bin/stager" || skip "the users cannot reach $U"
	mkdir "$U/ds" && echo hello >"$U/ds/a" && "$STAGER" pack -q "$U/ds" -o "$U/ds.tar.zst" >/dev/null
	chmod -R a+rX "$U/ds" "$U/ds.tar.zst"
}

teardown_file() {
	[ -n "${U:-}" ] || return 0
	pkill -u stgalice 2>/dev/null || true
	pkill -u stgbob 2>/dev/null || true
	rm -rf "$U"
}

setup() {
	T=$(mktemp -d "$U/t.XXXXXX")
	chmod 0755 "$T"
	cd "$T"
	pids=()
}

teardown() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	cd /
	rm -rf "$T"
}

# as USER, with this test's settings: as USER CMD...
as() {
	local u=$1
	shift
	runuser -u "$u" -- env -u STAGER_SCRATCH_ROOT STAGER_SITE_CONFIG="$T/site.conf" \
		STAGER_SLOT_DIR="$T/slots" HOME="$T/home-$u" "$@"
}

@test "the first user to stage makes the shared parent of the scratch roots like /tmp: the second is not locked out" {
	# /scratch is like /tmp; the site's setting puts everyone's roots under
	# /scratch/stager, which does not exist yet
	mkdir -m 1777 scratch
	echo "scratch_root = $T/scratch/stager/\$USER/root" >site.conf
	# alice, with a private umask, is first
	run as stgalice sh -c "umask 077; $U/bin/stager stage $U/ds.tar.zst"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a scratch/stager)" = 1777 ]
	[ "$(stat -c %a%U scratch/stager/stgalice)" = 700stgalice ]
	[ "$(stat -c %a%U scratch/stager/stgalice/root)" = 700stgalice ]
	run as stgbob "$U/bin/stager" stage "$U/ds.tar.zst"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c %U scratch/stager/stgbob/root)" = stgbob ]
	# neither reads the other's
	run as stgbob ls scratch/stager/stgalice
	[ "$status" -ne 0 ]
}

@test "a shared parent writable by all but not sticky is refused, saying why" {
	mkdir scratch && chmod 0777 scratch
	echo "scratch_root = $T/scratch/\$USER" >site.conf
	run as stgalice "$U/bin/stager" status
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"'$T/scratch' is writable by every user but not sticky"*"chmod +t"* ]]
	[ ! -e scratch/stgalice ]
}

@test "a scratch root another user owns is refused, naming the owner and the setting" {
	mkdir -m 1777 pub
	echo "scratch_root = $T/pub/shared-root" >site.conf
	run as stgalice "$U/bin/stager" status
	[ "$status" -eq 0 ]
	run as stgbob "$U/bin/stager" status
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"belongs to stgalice"*"scratch_root"* ]]
	# and a directory on the way, made by the other user
	echo "scratch_root = $T/home/\$USER/stager" >site.conf
	mkdir -p home/stgbob && chown stgalice home/stgbob && chmod 0777 home/stgbob
	chmod 1777 home
	run as stgbob "$U/bin/stager" status
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"'$T/home/stgbob', on the way to your scratch root, belongs to stgalice"* ]]
}

@test "permission denied is reported as such, not as a missing file" {
	mkdir locked && chmod 0755 locked
	echo "scratch_root = $T/locked/\$USER" >site.conf
	run as stgalice "$U/bin/stager" status
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	[[ "$output" != *"No such file"* ]]
	# the shared parent, root's 0755: the fix for the administrators
	[[ "$output" == *"'$T/locked', where every user's scratch root is made, must be open to all like /tmp"*"chmod 1777 '$T/locked'"* ]]
}

@test "a shared parent that does not exist under a disk top of root's: the user's message names the administrators' command; made by root, it is root's, 1777" {
	mkdir -m 0755 disk
	echo "scratch_root = $T/disk/stager/\$USER" >site.conf
	run as stgalice "$U/bin/stager" stage "$U/ds.tar.zst" "$T/home-stgalice/x"
	echo "$output"
	[ "$status" -eq 7 ]
	[[ "$output" == *"cannot create '$T/disk/stager', the shared parent of the scratch roots: Permission denied"*"Slurm prolog"*"\`install -d -m 1777 '$T/disk/stager'\`"* ]]
	[ ! -e disk/stager ]
	# the prolog's command, as root, with the site's settings
	STAGER_SITE_CONFIG="$T/site.conf" run "$U/bin/stager" doctor --prepare -q
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c %U:%a disk/stager)" = root:1777 ]
	run as stgalice sh -c "umask 077; $U/bin/stager stage -q $U/ds.tar.zst"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c %U:%a disk/stager/stgalice)" = stgalice:700 ]
}

@test "a slot another user holds: a bounded wait that names the holder; status shows it; a dead holder's slot is free at once" {
	mkdir -m 1777 slots
	printf 'scratch_root = %s/scratch/$USER\nmax_readers_per_node = 1\nslot_wait_max = 2\n' "$T" >site.conf
	mkdir -m 1777 scratch
	# bob's process holds the only slot (stuck, or on purpose)
	runuser -u stgbob -- sh -c "exec 3>&-; exec flock $T/slots/slot.0 sleep 300" &
	holder=$!
	pids+=("$holder")
	# flock starts sleep once it holds the lock
	wait_until 10 pgrep -u stgbob -f 'sleep 300'
	run as stgalice "$U/bin/stager" status --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.slots | length == 1 and .[0].user == "stgbob" and .[0].kind == "node"'
	run -0 as stgalice "$U/bin/stager" status
	[[ "$output" == *"shared-FS slots in use"*"stgbob pid"* ]]
	# alice waits 2 s (slot_wait_max), says who holds it, and goes on
	t0=$(date +%s.%N)
	run as stgalice "$U/bin/stager" stage "$U/ds.tar.zst"
	t1=$(date +%s.%N)
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"waiting for a shared-FS slot"*"by stgbob pid"* ]]
	[[ "$output" == *"waited 2 s for a shared-FS slot (slot_wait_max): going ahead without one; held by stgbob pid"* ]]
	awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a >= 2) }'
	# the holder dies: the next stage takes the slot at once, without a word
	pkill -9 -u stgbob -f 'sleep 300'
	wait_until 10 sh -c "! pgrep -u stgbob -f 'sleep 300' >/dev/null"
	echo changed >"$T/new" && mkdir "$T/ds2" && cp "$T/new" "$T/ds2/" && chmod -R a+rX "$T/ds2"
	run as stgalice "$U/bin/stager" stage "$T/ds2"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" != *"waiting for a shared-FS slot"* ]]
	run -0 as stgalice "$U/bin/stager" status --json
	echo "$output" | jq -e '.slots | length == 0'
}

@test "privacy follows the source: a private directory stays private at the top when unpacked, copied or collected" {
	mkdir -p priv/sub && echo secret >priv/sub/f && chmod 0644 priv/sub/f && chmod 0755 priv/sub && chmod 0700 priv
	chown -R stgalice priv
	chown stgalice "$T"
	run as stgalice "$U/bin/stager" pack -q "$T/priv" -o "$T/priv.tar.zst"
	[ "$status" -eq 0 ]
	# unpack, stage --copy, collect, collect --pack: the top is as private as priv
	printf 'scratch_root = %s/scratch-$USER\n' "$T" >site.conf
	run as stgalice "$U/bin/stager" unpack "$T/priv.tar.zst" "$T/un"
	[ "$status" -eq 0 ]
	run as stgalice "$U/bin/stager" stage --copy "$T/priv.tar.zst" "$T/cp"
	[ "$status" -eq 0 ]
	run as stgalice "$U/bin/stager" stage --copy "$T/priv" "$T/cpd"
	[ "$status" -eq 0 ]
	run as stgalice "$U/bin/stager" collect "$T/priv" "$T/coll"
	[ "$status" -eq 0 ]
	run as stgalice "$U/bin/stager" collect --pack "$T/priv" "$T/collp"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a un cp cpd coll | sort -u)" = 700 ]
	[ "$(stat -c %a collp.tar.zst)" = 600 ]
	for d in un cp cpd coll; do
		run as stgbob cat "$T/$d/sub/f"
		[ "$status" -ne 0 ]
	done
	run as stgbob cat "$T/collp.tar.zst"
	[ "$status" -ne 0 ]
	# a shared source stays shared
	chmod 0755 priv
	run -0 as stgalice "$U/bin/stager" pack -q "$T/priv" -o "$T/pub.tar.zst"
	run as stgalice "$U/bin/stager" unpack "$T/pub.tar.zst" "$T/pun"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a pun)" = 755 ]
	run as stgbob cat "$T/pun/sub/f"
	[ "$status" -eq 0 ]
	[ "$output" = secret ]
	# plain tar reads the pack as before
	mkdir tarx && tar --zstd -xf priv.tar.zst -C tarx
	[ "$(cat tarx/sub/f)" = secret ]
}

@test "the epilog as root while the job's user plants links, hardlinks, FIFOs and renames: nothing outside is touched, it ends" {
	mkdir -m 1777 scratch jobs
	echo "scratch_root = $T/scratch/\$USER" >site.conf
	# what root owns outside, that a planted link points at
	mkdir victim && echo precious >victim/file && chmod 0644 victim/file
	# bob's job ran here: a job directory in his scratch root, and the
	# prolog's directory in the job base
	run as stgbob env SLURM_JOB_ID=77 "$U/bin/stager" stage "$U/ds.tar.zst"
	[ "$status" -eq 0 ]
	mkdir jobs/77 && chown stgbob jobs/77 && chmod 0700 jobs/77
	root=$T/scratch/stgbob
	# bob plants, and keeps planting and renaming while the epilog runs
	cat >plant.sh <<SH
plant() {
	d=\$1
	mkdir -p "\$d" 2>/dev/null
	ln -sfn "$T/victim" "\$d/link-dir"
	ln -sfn "$T/victim/file" "\$d/link-file"
	ln "$T/victim/file" "\$d/hard" 2>/dev/null
	[ -p "\$d/fifo" ] || mkfifo "\$d/fifo"
	mv "\$d/link-dir" "\$d/renamed" 2>/dev/null
	ln -sfn "$T/victim" "\$d/link-dir"
}
while :; do
	plant "$root/jobs/job-77/out"
	plant "$root/jobs/job-77"
	plant "$T/jobs/77"
	plant "$root/kept/x.1"
done
SH
	runuser -u stgbob -- sh "$T/plant.sh" 3>&- &
	pids+=($!)
	wait_until 10 test -p "$T/jobs/77/fifo"
	# the epilog, as Slurm runs it: as root
	run timeout 60 env SLURM_JOB_ID=77 SLURM_JOB_USER=stgbob STAGER_BIN="$U/bin/stager" \
		STAGER_SITE_CONFIG="$T/site.conf" STAGER_JOB_TMP_BASE="$T/jobs" \
		"$BATS_TEST_DIRNAME/../../scripts/slurm-epilog.sh"
	echo "$output"
	[ "$status" -eq 0 ]
	kill -9 "${pids[0]}"
	pkill -9 -u stgbob -f plant.sh || true
	[ "$(cat victim/file)" = precious ]
	[ "$(stat -c %U%a victim/file)" = root644 ]
	[ "$(stat -c %U victim)" = root ]
	# root's own stager never works in a scratch root that is not root's
	run timeout 20 "$U/bin/stager" --scratch "$root" clean --job 77
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"belongs to stgbob"* ]]
	[ "$(cat victim/file)" = precious ]
}

@test "privacy follows the source through push, pull, pack and push --pack" {
	mkdir -p priv/sub && echo secret >priv/sub/f && chmod 0644 priv/sub/f && chmod 0700 priv
	chown -R stgalice priv
	chown stgalice "$T"
	printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' >rsh
	chmod 0755 rsh
	printf 'scratch_root = %s/scratch-$USER\nremote_stager = %s\n' "$T" "$U/bin/stager" >site.conf
	run as stgalice "$U/bin/stager" push --rsh "$T/rsh" "$T/priv" "h:$T/pushed"
	[ "$status" -eq 0 ]
	run as stgalice "$U/bin/stager" pull --rsh "$T/rsh" "h:$T/priv" "$T/pulled"
	[ "$status" -eq 0 ]
	run as stgalice "$U/bin/stager" push --pack --rsh "$T/rsh" "$T/priv" "h:$T/pushedpack"
	[ "$status" -eq 0 ]
	run as stgalice "$U/bin/stager" pack -q "$T/priv" -o "$T/packed.tar.zst"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a pushed pulled | sort -u)" = 700 ]
	[ "$(stat -c %a pushedpack.tar.zst packed.tar.zst | sort -u)" = 600 ]
	for f in pushed/sub/f pulled/sub/f pushedpack.tar.zst packed.tar.zst; do
		run as stgbob cat "$T/$f"
		[ "$status" -ne 0 ]
	done
}

@test "two users stage the same pack at the same moment: each gets a right tree in a cache of their own" {
	mkdir -m 1777 scratch
	printf 'scratch_root = %s/scratch/$USER\nmax_readers_per_node = 1\n' "$T" >site.conf
	mkdir -m 1777 slots out
	"$GENDATA" images "$T/big" --files 600 --classes 6 >/dev/null
	"$STAGER" pack -q "$T/big" -o "$T/big.tar.zst" >/dev/null
	chmod -R a+rX big big.tar.zst
	for round in 1 2 3; do
		as stgalice "$U/bin/stager" --bwlimit 30M stage --no-pin "$T/big.tar.zst" "$T/out/a$round" >a.out 2>&1 3>&- &
		pa=$!
		as stgbob "$U/bin/stager" --bwlimit 30M stage --no-pin "$T/big.tar.zst" "$T/out/b$round" >b.out 2>&1 3>&- &
		pb=$!
		ra=0 rb=0
		wait_pid "$pa" 120 || ra=$?
		wait_pid "$pb" 120 || rb=$?
		cat a.out b.out
		[ "$ra" -eq 0 ]
		[ "$rb" -eq 0 ]
		diff -r big "out/a$round"
		diff -r big "out/b$round"
		[ "$(stat -c %U "$(readlink -f "out/a$round")")" = stgalice ]
		[ "$(stat -c %U "$(readlink -f "out/b$round")")" = stgbob ]
		as stgalice "$U/bin/stager" clean --all -q
		as stgbob "$U/bin/stager" clean --all -q
	done
}

@test "collect refuses a DEST another user planted: their directory, their link, or a parent of theirs; the user's own link is followed" {
	mkdir -p src && echo secret >src/result && chmod -R a+rX src
	chmod 0777 "$T"
	# bob's world-writable directory where alice will collect
	as stgbob mkdir -m 0777 planted
	t0=$(date +%s.%N)
	run as stgalice "$U/bin/stager" collect src "$T/planted"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"'$T/planted' is a directory of another user, stgbob (uid $(id -u stgbob)): nothing was written to it"* ]]
	[ -z "$(ls -A planted)" ]
	# bob's link to a directory of bob's
	as stgbob mkdir -m 0777 bobs
	as stgbob ln -s "$T/bobs" link
	run as stgalice "$U/bin/stager" collect src "$T/link"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"'$T/link' is a link of another user, stgbob (uid $(id -u stgbob)): nothing was written through it"* ]]
	[ -z "$(ls -A bobs)" ]
	# a parent of bob's that alice's DEST would be made in
	run as stgalice "$U/bin/stager" collect src "$T/bobs/new/run1"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"'$T/bobs/new/run1' would be made in '$T/bobs', a directory of another user, stgbob (uid $(id -u stgbob)): nothing was written"* ]]
	[ -z "$(ls -A bobs)" ]
	# --pack too
	run as stgalice "$U/bin/stager" collect --pack src "$T/planted/r.tar.zst"
	[ "$status" -eq 1 ]
	[ -z "$(ls -A planted)" ]
	# alice's own directory, and her own link to it: collected
	as stgalice mkdir mine
	as stgalice ln -s "$T/mine" mylink
	run as stgalice "$U/bin/stager" collect src "$T/mylink"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(cat mine/result)" = secret ]
	# rechecked on every run: bob swaps his directory in for alice's
	# (she made it in a place he can write)
	as stgalice mkdir run2
	run as stgalice "$U/bin/stager" collect src "$T/run2"
	[ "$status" -eq 0 ]
	rm -rf run2
	as stgbob mkdir -m 0777 run2
	echo more >src/more && chmod a+r src/more
	run as stgalice "$U/bin/stager" collect src "$T/run2"
	[ "$status" -eq 1 ]
	[ -z "$(ls -A run2)" ]
	# a project's directory: bob's, writable by a group alice is in and
	# by no one else: trusted, as a parent and as DEST
	getent group stgshare >/dev/null || groupadd stgshare
	usermod -a -G stgshare stgalice
	usermod -a -G stgshare stgbob
	as stgbob mkdir -m 2770 project
	chgrp stgshare project
	run as stgalice "$U/bin/stager" collect src "$T/project/alice-run1"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(cat project/alice-run1/result)" = secret ]
	run as stgalice "$U/bin/stager" collect src "$T/project"
	[ "$status" -eq 0 ]
	# the same, writable by all: anyone could have planted it
	chmod 2777 project
	run as stgalice "$U/bin/stager" collect src "$T/project/alice-run2"
	[ "$status" -eq 1 ]
	[ ! -e project/alice-run2 ]
	echo "# refusals took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s" >&3
}

@test "squatting: a default scratch root another user made is refused naming them, never skipped; a slot directory a user made is not used by others" {
	[ ! -e /disk/scratch ] && [ ! -e /scratch-ssd ] || skip "this machine has a default scratch disk"
	: >site.conf
	mkdir -m 1777 tmpx
	# bob makes alice's default root (TMPDIR/stager-USER) before she does
	as stgbob mkdir -m 0777 tmpx/stager-stgalice
	run as stgalice env TMPDIR="$T/tmpx" "$U/bin/stager" stage "$U/ds.tar.zst"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"'$T/tmpx/stager-stgalice', your default scratch root, is a directory of another user, stgbob (uid $(id -u stgbob))"*"set scratch_root"* ]]
	[ -z "$(ls -A tmpx/stager-stgalice)" ]
	# her own: used
	rmdir tmpx/stager-stgalice
	run as stgalice env TMPDIR="$T/tmpx" "$U/bin/stager" stage -q "$U/ds.tar.zst"
	[ "$status" -eq 0 ]
	[ "$(stat -c %U tmpx/stager-stgalice)" = stgalice ]
	# a slot directory bob made (he could chmod 700 it): alice does not
	# use it, and says why; root's is used
	printf 'scratch_root = %s/scratch/$USER\nmax_readers_per_node = 1\nslot_wait_max = 2\n' "$T" >site.conf
	mkdir -m 1777 scratch
	chmod 1777 "$T" # (like /run/lock, where anyone may make it first)
	as stgbob mkdir -m 1777 slots
	run as stgalice "$U/bin/stager" stage "$U/ds.tar.zst"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"slot_dir '$T/slots' belongs to stgbob (uid $(id -u stgbob)), who could turn the limit off for everyone"* ]]
	[ -z "$(ls -A slots)" ]
	rm -rf slots
	mkdir -m 1777 slots
	# (a dataset not in her cache: read from the shared filesystem)
	mkdir ds3 && echo three >ds3/f && chmod -R a+rX ds3
	run as stgalice "$U/bin/stager" stage "$T/ds3"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" != *"slot_dir"* ]]
	[ -e slots/slot.0 ]
}

@test "fair slots: a user who holds every node slot delays another user by a second, not by slot_wait_max; one fair share each is waited for" {
	mkdir -m 1777 slots scratch
	printf 'scratch_root = %s/scratch/$USER\nmax_readers_per_node = 2\nslot_wait_max = 600\n' "$T" >site.conf
	# bob holds both slots (with flock, as anyone can)
	for i in 0 1; do
		# (-o: the lock is flock's alone, not its sleep's)
		runuser -u stgbob -- sh -c "exec 3>&-; exec flock -o $T/slots/slot.$i sleep 300" &
		pids+=($!)
	done
	wait_until 10 sh -c "[ \$(pgrep -u stgbob -xc sleep) -eq 2 ]"
	mkdir ds4 && echo four >ds4/f && chmod -R a+rX ds4
	t0=$(date +%s.%N)
	run as stgalice "$U/bin/stager" stage "$T/ds4"
	t1=$(date +%s.%N)
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"going ahead without a shared-FS slot: stgbob holds 2 of the 2 on this node, more than a fair share while others wait"* ]]
	took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	echo "# alice went ahead after $took s (slot_wait_max 600)" >&3
	awk -v t="$took" 'BEGIN { exit !(t >= 1) }'
	faster_than "$took" 5
	# bob lets one go: one each is fair, and alice takes the free one at once
	pkill -u stgbob -f "flock -o $T/slots/slot.1"
	wait_until 10 sh -c "[ \$(pgrep -u stgbob -xc flock) -eq 1 ]"
	mkdir ds5 && echo five >ds5/f && chmod -R a+rX ds5
	run as stgalice "$U/bin/stager" stage "$T/ds5"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" != *"fair share"* ]]
	[[ "$output" != *"waiting for a shared-FS slot"* ]]
}

@test "stage, unpack and pack write into no directory and through no link of another user's" {
	chmod 1777 "$T"
	as stgbob mkdir -m 0777 bobs
	as stgbob ln -s "$T/bobs" blink
	for c in "unpack $U/ds.tar.zst $T/bobs" "unpack $U/ds.tar.zst $T/bobs/sub" \
		"stage $U/ds.tar.zst $T/bobs" "stage $U/ds.tar.zst $T/bobs/x" "stage $U/ds.tar.zst $T/blink" \
		"pack $U/ds -o $T/bobs/x.tar.zst"; do
		# shellcheck disable=SC2086 # the words of c
		run as stgalice "$U/bin/stager" $c
		echo "$c: $output"
		[ "$status" -eq 1 ]
		[[ "$output" == *"another user, stgbob (uid $(id -u stgbob))"* || "$output" == *"another user's, stgbob (uid $(id -u stgbob))"* ]]
		[[ "$output" == *"nothing was written"* ]]
	done
	[ -z "$(ls -A bobs)" ]
	# into her own: as before
	run as stgalice "$U/bin/stager" unpack "$U/ds.tar.zst" "$T/mine"
	[ "$status" -eq 0 ]
	[ "$(cat mine/a)" = hello ]
}

# mount: an ordinary user mounts through /dev/fuse, mode 0666 as Debian
# ships it (some test machines have it root's alone)
user_mounts_or_skip() {
	[ -e /dev/fuse ] || skip "no /dev/fuse"
	user_fuse_unmount_or_skip
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	fuse_for_users
	mkdir -m 1777 scratch
	printf 'scratch_root = %s/scratch/$USER\n' "$T" >site.conf
}
mounted_at() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

@test "mount: another user's directory, even one every user may write, is refused, naming its owner; its owner keeps it" {
	user_mounts_or_skip
	mkdir bobdir alicedir
	chown stgbob bobdir
	chmod 0777 bobdir
	chown stgalice alicedir
	t0=$(date +%s.%N)
	run as stgalice "$U/bin/stager" mount "$U/ds.tar.zst" "$T/bobdir"
	echo "$output"
	echo "# refused after $(echo "$(date +%s.%N) - $t0" | bc -l) s" >&3
	[ "$status" -eq 1 ]
	[[ "$output" == *"'$T/bobdir' belongs to stgbob (uid $(id -u stgbob)), not you: mount on an empty directory of yours"* ]]
	! mounted_at "$T/bobdir" || false
	! pgrep -u stgalice -f "stager mount" || false
	[ -z "$(ls scratch/stgalice/mounts 2>/dev/null | grep '^pid-')" ]
	# bob still has it
	as stgbob sh -c "echo mine >'$T/bobdir/f'"
	[ "$(as stgbob cat "$T/bobdir/f")" = mine ]
	# --foreground as well
	run as stgalice "$U/bin/stager" mount --foreground "$U/ds.tar.zst" "$T/bobdir/"
	[ "$status" -eq 1 ]
	[[ "$output" == *"belongs to stgbob"* ]]
	# her own: mounted (and bob's refusal was not for lack of /dev/fuse)
	as stgalice "$U/bin/stager" mount "$U/ds.tar.zst" "$T/alicedir"
	[ "$(as stgalice cat "$T/alicedir/a")" = hello ]
	as stgalice "$U/bin/stager" umount "$T/alicedir"
	! mounted_at "$T/alicedir" || false
}

@test "mount: a symbolic link as the mountpoint is refused, to another user's directory or to one's own" {
	user_mounts_or_skip
	mkdir bobdir alicedir
	chown stgbob bobdir
	chmod 0777 bobdir
	chown stgalice alicedir
	ln -s bobdir to-bob
	ln -s alicedir to-alice
	for link in to-bob to-alice to-alice/; do
		run as stgalice "$U/bin/stager" mount "$U/ds.tar.zst" "$T/$link"
		echo "$output"
		[ "$status" -eq 1 ]
		[[ "$output" == *"mountpoint '$T/$link' is a symbolic link: mount on an empty directory of yours, not on a link"* ]]
	done
	! mounted_at "$T/bobdir" || false
	! mounted_at "$T/alicedir" || false
	! pgrep -u stgalice -f "stager mount" || false
}
