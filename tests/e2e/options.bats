#!/usr/bin/env bats
# Options that no other test file uses (scripts/check-options lists them):
# for each, its effect on a real run, and a bad value refused as a usage
# error (exit 1).  push and pull run through a real sshd on localhost, set up
# as tests/e2e/push.bats does.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	export SSHD_DIR RSH=
	SSHD_DIR=$(mktemp -d "${BATS_TMPDIR:-/tmp}/stager-sshd.XXXXXX")
	local d=$SSHD_DIR
	# without it the push and pull tests say so; the others do not need sshd
	start_sshd "$d" || RSH=
}

teardown_file() {
	if [ -f "$SSHD_DIR/sshd.bgpid" ]; then kill "$(cat "$SSHD_DIR/sshd.bgpid")" 2>/dev/null || true; fi
	rm -rf "$SSHD_DIR"
}

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SLOT_DIR="$T/slots" \
		STAGER_SITE_CONFIG=/dev/null HOME="$T"
	unset SLURM_JOB_ID SLURM_TMPDIR XDG_CONFIG_HOME STAGER_RSH STAGER_REMOTE_STAGER
}

need_sshd() {
	if [ -z "$RSH" ]; then
		cat "$SSHD_DIR/sshd.log" >&2
		echo "no sshd on localhost (see above)" >&2
		return 1
	fi
}

# Compressible text (a few words in random order, seeded: the same every
# time): DIR LINES.  zstd's higher levels make it smaller.
make_text() {
	mkdir -p "$1"
	awk -v n="$2" 'BEGIN {
		srand(42)
		split("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega", w, " ")
		for (i = 0; i < n; i++) {
			l = ""
			k = 3 + int(rand() * 8)
			for (j = 0; j < k; j++) l = l w[1 + int(rand() * 24)] " "
			print i, l
		}
	}' >"$1/words.txt"
	seq 1 20000 >"$1/numbers.txt"
}

size_of() { stat -c %s "$1"; }

json_field() { # FILE KEY
	jq -r ".$2" "$1"
}

# ---- global options -------------------------------------------------------

@test "--config FILE is read in place of the user's config file; a bad one is refused" {
	mkdir -p .config/stager
	printf 'cache_max = 1G\nkeep_days = 3\n' >.config/stager/config
	printf 'cache_max = 2G\nscratch_root = %s\n' "$T/from-config" >c.conf
	unset STAGER_SCRATCH_ROOT
	# without --config: the user's file
	run stager status
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -Eq '^ *keep_days +3 '
	# with it: its settings, and none of the user's file
	run stager --config "$T/c.conf" status
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -Fq "$T/c.conf:1"
	echo "$output" | grep -Eq '^ *cache_max +2G '
	echo "$output" | grep -Eq '^ *scratch_root +'"$T"'/from-config '
	echo "$output" | grep -Eq '^ *keep_days +14 +\(default\)'
	# and it is what a command uses: the cache is under its scratch_root
	mkdir ds && echo hello >ds/a
	stager pack -q ds -o ds.tar.zst >/dev/null
	run stager --config "$T/c.conf" stage -q ds.tar.zst staged
	[ "$status" -eq 0 ]
	[[ "$(readlink staged)" == "$T/from-config/cache/"* ]]
	[ "$(cat staged/a)" = hello ]
	# the environment still wins over the file
	run -0 env STAGER_CACHE_MAX=3G "$STAGER" --config "$T/c.conf" status
	echo "$output" | grep -Eq '^ *cache_max +3G '
	# bad values: a line that is not a setting (usage, 1), a missing file (2)
	printf 'cache_max 2G\n' >bad.conf
	run stager --config bad.conf status
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "bad.conf:1: expected 'key = value'"
	run stager --config "$T/nowhere.conf" status
	echo "$output"
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "cannot read config file '$T/nowhere.conf'"
	run stager --config
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "--config needs a value"
}

@test "--progress=bar draws a bar on stderr even off a terminal; none draws nothing" {
	make_text src 2000
	run --separate-stderr stager --progress=bar pack src -o bar.tar.zst
	[ "$status" -eq 0 ]
	printf '%s' "$stderr" | od -c | head -5
	# a bar redrawn in place: carriage returns and the erase-line sequence
	[[ "$stderr" == *$'\r'* ]]
	[[ "$stderr" == *$'\033[K'* ]]
	[[ "$stderr" == *"[##############################] 100%"* ]]
	run --separate-stderr stager pack src -o none.tar.zst --progress=none
	[ "$status" -eq 0 ]
	echo "$stderr"
	[[ "$stderr" != *$'\r'* ]]
	[[ "$stderr" != *"%"* ]]
	[[ "$stderr" == *"packed"* ]]
	# the same pack either way: progress is display only
	cmp bar.tar.zst none.tar.zst
}

@test "--progress=lines (and auto off a terminal) print a plain line every few seconds; none does not" {
	# three collects of 6 MiB at 1 MiB/s, side by side: about 6 s each
	mkdir src && head -c 6000000 /dev/urandom >src/r
	export STAGER_MAX_READERS_PER_NODE=8
	"$STAGER" --progress=lines collect --bwlimit 1M src d-lines 2>err-lines &
	p1=$!
	"$STAGER" collect --bwlimit 1M src d-auto 2>err-auto &
	p2=$!
	"$STAGER" collect --progress=none --bwlimit 1M src d-none 2>err-none &
	p3=$!
	wait_pid $p1 120
	wait_pid $p2 120
	wait_pid $p3 120
	cat err-lines err-auto err-none
	cmp src/r d-lines/r
	cmp src/r d-none/r
	for f in err-lines err-auto; do
		grep -Eq '^stager: collect: [0-9]+% \([0-9.]+ [KMG]?i?B of 5\.7 MiB, ' "$f"
		grep -Eq '^stager: collect: 100% ' "$f"
		run -1 grep -c $'[\r\033]' "$f"
		[ "$output" = 0 ]
	done
	run -1 grep -c '%' err-none
	[ "$output" = 0 ]
	grep -q "collected 'src'" err-none
}

@test "--progress: a value that is not auto, bar, lines or none is a usage error" {
	run stager --progress=sometimes status
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "must be auto, bar, lines or none, not 'sometimes'"
	run stager status --progress=fancy
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "not 'fancy'"
	run stager status --progress
	[ "$status" -eq 1 ]
}

@test "--quiet silences what went well; --verbose says more; neither takes a value" {
	mkdir src && echo result >src/r
	run --separate-stderr stager --quiet collect src d1
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[ "$(cat d1/r)" = result ]
	run --separate-stderr stager collect src d2
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"collected 'src'"* ]]
	# an unchanged re-run says nothing, unless asked to
	run --separate-stderr stager collect src d2
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	run --separate-stderr stager collect --verbose src d2
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"unchanged since the last collect"* ]]
	run -0 --separate-stderr stager --verbose collect src d2
	[[ "$stderr" == *"unchanged since the last collect"* ]]
	# --quiet keeps errors
	run --separate-stderr stager collect --quiet nowhere d3
	[ "$status" -eq 2 ]
	[[ "$stderr" == *nowhere* ]]
	run stager --quiet=yes status
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "unknown option '--quiet=yes'"
	run stager status --verbose=2
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "'--verbose' doesn't allow an argument"
}

@test "-q and -v work before the command too (stager [GLOBAL OPTIONS] COMMAND; man: -q, --quiet)" {
	mkdir src && echo result >src/r
	run --separate-stderr stager -q collect src d1
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	run --separate-stderr stager -v collect src d1
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"unchanged since the last collect"* ]]
}

@test "a bad global option value before the command names 'stager --help', not '(null)'" {
	run stager --progress=sometimes status
	[ "$status" -eq 1 ]
	[[ "$output" != *"(null)"* ]]
	echo "$output" | grep -q "see 'stager --help'"
}

# ---- pack -----------------------------------------------------------------

@test "pack --level: a higher level makes a smaller pack of the same tree; 0, 20, abc are refused" {
	make_text src 12000
	run stager pack src -o l1.tar.zst --level 1
	[ "$status" -eq 0 ]
	run stager pack src -o l19.tar.zst --level 19
	[ "$status" -eq 0 ]
	run stager pack src -o l3.tar.zst
	[ "$status" -eq 0 ]
	echo "level 1: $(size_of l1.tar.zst), default: $(size_of l3.tar.zst), 19: $(size_of l19.tar.zst)"
	[ "$(size_of l19.tar.zst)" -lt "$(size_of l1.tar.zst)" ]
	[ "$(size_of l19.tar.zst)" -le "$(size_of l3.tar.zst)" ]
	[ "$(size_of l3.tar.zst)" -le "$(size_of l1.tar.zst)" ]
	# the same content: sound, and equal when unpacked
	stager verify -q l19.tar.zst >/dev/null
	stager unpack -q l19.tar.zst u19
	diff -r src u19
	for bad in 0 20 abc -3; do
		run stager pack src -o bad.tar.zst --level "$bad"
		echo "$output"
		[ "$status" -eq 1 ]
		echo "$output" | grep -q -- "--level must be 1 to 19, not '$bad'"
		[ ! -e bad.tar.zst ]
	done
}

@test "pack --fsync: the pack is fsync'ed before it is renamed into place; it takes no value" {
	command -v strace >/dev/null || skip "no strace"
	make_text src 2000
	ASAN_OPTIONS=detect_leaks=0 strace -f -qq -y -o trace -e trace=fsync,fdatasync,rename,renameat,renameat2 \
		"$STAGER" pack -q src -o synced.tar.zst --fsync >/dev/null
	cat trace
	stager verify -q synced.tar.zst >/dev/null
	sync_line=$(grep -n -E 'f(data)?sync\([0-9]+<[^>]*\.stager-tmp\.synced\.tar\.zst' trace | head -1 | cut -d: -f1)
	rename_line=$(grep -n -E 'rename.*\.stager-tmp\.synced\.tar\.zst.*= 0$' trace | tail -1 | cut -d: -f1)
	[ -n "$sync_line" ]
	[ -n "$rename_line" ]
	[ "$sync_line" -lt "$rename_line" ]
	# without it: no fsync of the pack
	ASAN_OPTIONS=detect_leaks=0 strace -f -qq -y -o trace2 -e trace=fsync,fdatasync \
		"$STAGER" pack -q src -o plain.tar.zst >/dev/null
	cat trace2
	run -1 grep -c 'stager-tmp.plain' trace2
	[ "$output" = 0 ]
	run stager pack src -o bad.tar.zst --fsync=yes
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "'--fsync' doesn't allow an argument"
	[ ! -e bad.tar.zst ]
}

# ---- verify ---------------------------------------------------------------

@test "verify --threads N decodes with N threads; 65 and x are refused" {
	command -v strace >/dev/null || skip "no strace"
	mkdir src
	for i in 1 2 3 4; do head -c 1500000 /dev/urandom >"src/f$i"; done
	stager pack -q src -o p.tar.zst --frame-size 1M >/dev/null
	for n in 1 4; do
		ASAN_OPTIONS=detect_leaks=0 strace -f -qq -o "clones.$n" -e trace=clone,clone3 \
			"$STAGER" verify --threads "$n" p.tar.zst >"out.$n"
		grep -q 'p.tar.zst: OK' "out.$n"
	done
	one=$(grep -c clone clones.1)
	four=$(grep -c clone clones.4)
	echo "--threads 1: $one threads, --threads 4: $four"
	[ "$((four - one))" -eq 3 ]
	for bad in 65 x -1; do
		run stager verify --threads "$bad" p.tar.zst
		echo "$output"
		[ "$status" -eq 1 ]
		echo "$output" | grep -q -- "--threads must be 0 to 64, not '$bad'"
	done
}

# ---- stage ----------------------------------------------------------------

@test "stage --include stages a subset and reads only its frames; a pattern that matches nothing is refused" {
	mkdir -p ds/keep ds/drop
	head -c 6000000 /dev/urandom >ds/drop/big
	echo a >ds/keep/a
	echo b >ds/keep/b
	echo top >ds/top
	stager pack -q ds -o ds.tar.zst --frame-size 1M >/dev/null
	run --separate-stderr stager stage ds.tar.zst part --include 'keep/*' --json
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(find part/ -type f -printf '%P\n' | LC_ALL=C sort | tr '\n' ' ')" = "keep/a keep/b " ]
	[ "$(cat part/keep/b)" = b ]
	echo "$output" >part.json
	[ "$(json_field part.json files)" -eq 2 ]
	# a few frames, not the 6 MB pack
	[ "$(json_field part.json source_bytes)" -lt $(($(size_of ds.tar.zst) / 2)) ]
	# repeated: both
	run stager stage -q ds.tar.zst two --include keep/a --include top
	[ "$status" -eq 0 ]
	[ "$(find two/ -type f -printf '%P\n' | LC_ALL=C sort | tr '\n' ' ')" = "keep/a top " ]
	# the whole pack is still all there
	run stager stage -q ds.tar.zst whole
	[ "$status" -eq 0 ]
	cmp ds/drop/big whole/drop/big
	run stager stage ds.tar.zst none --include 'nothing*'
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "--include 'nothing\*' matches nothing in the pack"
	[ ! -e none ]
}

@test "stage --copy makes a private writable copy, not a link to the cache; it takes no value" {
	mkdir -p ds/sub && echo original >ds/sub/f && echo x >ds/g
	stager pack -q ds -o ds.tar.zst >/dev/null
	run stager stage -q ds.tar.zst linked
	[ "$status" -eq 0 ]
	[ -L linked ]
	run stager stage ds.tar.zst mine --copy
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -L mine ]
	[ -d mine ]
	diff -r ds mine
	# writable, and its own files: the cache entry is not touched
	[ -w mine/sub/f ]
	[ "$(stat -c %A mine/sub/f | cut -c3)" = w ]
	[ "$(stat -c %A linked/sub/f | cut -c3)" = - ]
	[ "$(stat -c %i mine/sub/f)" != "$(stat -c %i linked/sub/f)" ]
	echo changed >mine/sub/f
	touch mine/new
	[ "$(cat linked/sub/f)" = original ]
	[ ! -e linked/new ]
	run -0 stager stage -q ds.tar.zst again
	[ "$(cat again/sub/f)" = original ]
	run stager stage ds.tar.zst bad --copy=yes
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "'--copy' doesn't allow an argument"
	[ ! -e bad ]
}

# ---- collect --------------------------------------------------------------

@test "collect --pack --level: a higher level makes a smaller pack; 0, x and --level without --pack are refused" {
	make_text src 12000
	run stager collect --pack --level 1 src r1
	[ "$status" -eq 0 ]
	run stager collect --pack --level 19 src r19
	[ "$status" -eq 0 ]
	echo "level 1: $(size_of r1.tar.zst), 19: $(size_of r19.tar.zst)"
	[ "$(size_of r19.tar.zst)" -lt "$(size_of r1.tar.zst)" ]
	stager verify -q r19.tar.zst >/dev/null
	stager unpack -q r19.tar.zst u19
	diff -r src u19
	for bad in 0 x; do
		run stager collect --pack --level "$bad" src rbad
		echo "$output"
		[ "$status" -eq 1 ]
		echo "$output" | grep -q -- "--level: '$bad' is not a level from 1 to 19"
		[ ! -e rbad.tar.zst ]
	done
	# without --pack a level would mean nothing: refused, not ignored
	run stager collect --level 5 src rplain
	[ "$status" -eq 1 ]
	[[ "$output" == *"--level sets the compression of --pack"* ]]
	[ ! -e rplain ]
}

# ---- run ------------------------------------------------------------------

@test "run --grace: the command gets SIGTERM and the collect begins after the grace, while it still runs" {
	# a command that traps TERM, notes it and goes on until told to stop
	"$STAGER" run --grace 7s --collect out:results -- bash -c '
		trap "echo got-term >\$STAGER_OUT/term" TERM
		echo $$ >'"$T"'/cmd.pid
		while [ ! -e '"$T"'/release ]; do sleep 0.1; done
		echo released >$STAGER_OUT/end' 2>err &
	pid=$!
	wait_until 30 test -s cmd.pid
	cmd=$(cat cmd.pid)
	t0=$(date +%s.%N)
	kill -TERM "$pid"
	# the command notes the signal at once; results are collected after 7 s
	wait_until 30 eval 'ls scratch/jobs/*/out/term >/dev/null 2>&1'
	wait_until 60 test -e results/term
	t1=$(date +%s.%N)
	echo "collected after $(echo "$t1 - $t0" | bc -l) s"
	[ "$(echo "$t1 - $t0 >= 7" | bc -l)" = 1 ]
	# it still runs: the grace is not a kill
	running "$cmd"
	running "$pid"
	[ ! -e results/end ]
	touch release
	rc=0
	wait_pid "$pid" 60 || rc=$?
	cat err
	[ "$rc" -eq 5 ] # stager itself was told to stop
	[ "$(cat results/term)" = got-term ]
	[ "$(cat results/end)" = released ]
	grep -q "passed to the command" err
	run stager run --grace soon -- true
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "--grace: 'soon' is not a time"
}

# ---- clean ----------------------------------------------------------------

@test "clean --kept removes kept results now; without it clean keeps them; it takes no value" {
	# a collect that cannot write its DEST: the results are kept
	: >not-a-dir
	run stager run --collect out:"$T/not-a-dir/dest" -- sh -c 'echo precious >"$STAGER_OUT/r"'
	echo "$output"
	[ "$status" -eq 7 ]
	kept=$(find scratch/kept -mindepth 1 -maxdepth 1 -type d)
	[ -n "$kept" ]
	[ "$(cat "$kept/r")" = precious ]
	run stager clean
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "keeping uncollected results"
	[ -e "$kept/r" ]
	run stager clean --kept
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e "$kept" ]
	[ -z "$(ls -A scratch/kept)" ]
	run stager clean --kept=now
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "'--kept' doesn't allow an argument"
}

# ---- push and pull over ssh -----------------------------------------------

@test "push --level: a higher level puts fewer bytes on the wire over ssh; 0 is refused" {
	need_sshd
	make_text src 12000
	mkdir remote
	run --separate-stderr stager push src "127.0.0.1:$T/remote/l1" --rsh "$RSH" \
		--remote-stager "$STAGER" --level 1 --json
	echo "$stderr"
	[ "$status" -eq 0 ]
	echo "$output" >l1.json
	run --separate-stderr stager push src "127.0.0.1:$T/remote/l19" --rsh "$RSH" \
		--remote-stager "$STAGER" --level 19 --json
	echo "$stderr"
	[ "$status" -eq 0 ]
	echo "$output" >l19.json
	echo "wire bytes: level 1 $(json_field l1.json wire_bytes_out), 19 $(json_field l19.json wire_bytes_out)"
	[ "$(json_field l19.json wire_bytes_out)" -lt "$(json_field l1.json wire_bytes_out)" ]
	[ "$(json_field l19.json whole_files)" -eq 2 ]
	diff -r src remote/l1
	diff -r src remote/l19
	run stager push src "127.0.0.1:$T/remote/l0" --rsh "$RSH" --remote-stager "$STAGER" --level 0
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "--level: '0' is not a level from 1 to 19"
	[ -z "$(find remote -name '*l0*')" ]
}

@test "pull --level over ssh: the transfer is complete and verified; 20 is refused" {
	need_sshd
	make_text remote/ds 12000
	run stager pull "127.0.0.1:$T/remote/ds" got --rsh "$RSH" --remote-stager "$STAGER" --level 19
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r remote/ds got
	run stager pull "127.0.0.1:$T/remote/ds" bad --rsh "$RSH" --remote-stager "$STAGER" --level 20
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "--level: '20' is not a level from 1 to 19"
	[ ! -e bad ]
}

@test "pull --level: a higher level puts fewer bytes on the wire (the far end's data)" {
	need_sshd
	make_text remote/ds 12000
	for l in 1 19; do
		run --separate-stderr stager pull "127.0.0.1:$T/remote/ds" "got$l" --rsh "$RSH" \
			--remote-stager "$STAGER" --level "$l" --json
		[ "$status" -eq 0 ]
		echo "$output" >"l$l.json"
	done
	echo "wire bytes in: level 1 $(json_field l1.json wire_bytes_in), 19 $(json_field l19.json wire_bytes_in)"
	[ "$(json_field l19.json wire_bytes_in)" -lt "$(json_field l1.json wire_bytes_in)" ]
}
