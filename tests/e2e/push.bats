#!/usr/bin/env bats
# push, pull and serve against a real sshd on localhost: Debian's
# openssh-server with its own host key, config file and port, key
# authentication for the test user (root in CI), StrictHostKeyChecking off
# for the throwaway host key.  Hostile transports and a hostile client of
# serve: push-hostile.bats; transfers cut short and into what is there
# already: push-replace.bats.

load helpers
load push
bats_require_minimum_version 1.5.0

@test "push: an awkward tree over a real sshd round-trips exactly" {
	make_awkward_tree src
	mkdir remote
	run spush src "127.0.0.1:$T/remote/ds"
	[ "$status" -eq 0 ]
	diff <(tree_sig src) <(tree_sig remote/ds)
	diff <(tree_sig_ns src) <(tree_sig_ns remote/ds)
	diff <(link_groups src) <(link_groups remote/ds)
	# nothing of stager's is left beside it but its record and its index
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
}

@test "push: an unchanged re-push sends only the manifest" {
	make_files src 50 20000
	mkdir remote
	first=$(spush --json src "127.0.0.1:$T/remote/ds")
	again=$(spush --json src "127.0.0.1:$T/remote/ds")
	[ "$(json_field "$again" reused_files)" -eq 50 ]
	[ "$(json_field "$again" whole_files)" -eq 0 ]
	[ "$(json_field "$again" wire_bytes)" -lt $(($(json_field "$first" wire_bytes) / 50)) ]
	diff <(tree_sig src) <(tree_sig remote/ds)
}

@test "push: a re-push after a 1% change sends under 5% of the first push's bytes" {
	# files over 64 KiB: smaller ones are sent whole, not as deltas
	make_files src 200 70000
	mkdir remote
	first=$(spush --json src "127.0.0.1:$T/remote/ds")
	# 1% of the files change: one rewritten, one with a block changed inside
	head -c 70000 /dev/urandom >src/f0007
	printf 'changed' | dd of=src/f0100 bs=1 seek=20000 conv=notrunc 2>/dev/null
	second=$(spush --json src "127.0.0.1:$T/remote/ds")
	b1=$(json_field "$first" wire_bytes) b2=$(json_field "$second" wire_bytes)
	echo "first $b1 bytes, re-push $b2 bytes" >&3
	[ "$b2" -le $((b1 * 5 / 100)) ]
	[ "$(json_field "$second" delta_files)" -eq 2 ]
	[ "$(json_field "$second" reused_files)" -eq 198 ]
	diff <(tree_sig src) <(tree_sig remote/ds)
}

@test "push: removed, added, retyped entries; the switch replaces the old tree" {
	make_awkward_tree src
	mkdir remote
	spush src "127.0.0.1:$T/remote/ds"
	rm -rf src/deep src/zero
	mkdir src/zero
	echo now-a-dir >src/zero/f
	rm src/a/hello.txt
	ln -s ../big.bin src/a/hello.txt
	echo new >"src/new file"
	run spush src "127.0.0.1:$T/remote/ds"
	[ "$status" -eq 0 ]
	diff <(tree_sig src) <(tree_sig remote/ds)
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
}

@test "push --pack: the far end stores a verified pack, the same as stager pack makes" {
	make_awkward_tree src
	mkdir remote
	run spush --pack src "127.0.0.1:$T/remote/ds"
	[ "$status" -eq 0 ]
	[ "$(ls -A remote | xargs)" = ".stager-published.ds.tar.zst ds.tar.zst" ]
	stager verify remote/ds.tar.zst
	packed=$(stager pack -q src -o "$T/local.tar.zst")
	local_digest=${packed%% *}
	[ -n "$local_digest" ]
	verified=$(stager verify --json remote/ds.tar.zst)
	[ "$(jq -r .digest <<<"$verified")" = "$local_digest" ]
	# a re-push: the old pack's files are the basis (a delta for the large
	# file; a small one is sent whole)
	echo more >>src/a/hello.txt
	printf 'changed' | dd of=src/big.bin bs=1 seek=100000 conv=notrunc 2>/dev/null
	out=$(spush --pack --json src "127.0.0.1:$T/remote/ds.tar.zst")
	[ "$(json_field "$out" delta_files)" -eq 1 ]
	[ "$(json_field "$out" whole_files)" -eq 1 ]
	# big.bin's signature and delta, not its 3 MB
	[ "$(json_field "$out" wire_bytes)" -lt 60000 ]
	[ "$(ls -A remote | xargs)" = ".stager-published.ds.tar.zst ds.tar.zst" ]
	stager unpack remote/ds.tar.zst back
	diff <(tree_sig src) <(tree_sig back)
	run stager pull --pack "127.0.0.1:$T/remote/ds" x
	[ "$status" -eq 1 ]
}

@test "pull: a tree comes back exactly, and a re-pull reuses what is here" {
	make_awkward_tree src
	mkdir remote
	spush src "127.0.0.1:$T/remote/ds"
	run spull "127.0.0.1:$T/remote/ds" back
	[ "$status" -eq 0 ]
	diff <(tree_sig src) <(tree_sig back)
	diff <(link_groups src) <(link_groups back)
	echo changed >>remote/ds/a/hello.txt
	printf 'changed' | dd of=remote/ds/big.bin bs=1 seek=100000 conv=notrunc 2>/dev/null
	out=$(spull --json "127.0.0.1:$T/remote/ds" back)
	[ "$(json_field "$out" delta_files)" -eq 1 ]
	[ "$(json_field "$out" whole_files)" -eq 1 ]
	diff <(tree_sig remote/ds) <(tree_sig back)
}

@test "push: STAGER_TEST_FAULTS holds whole words only, and says it is set" {
	make_local_rsh
	make_files src 2 1000
	mkdir remote
	STAGER_TEST_FAULTS=noflock,xofdlock run stager push --rsh "$T/local-rsh" \
		--remote-stager "$STAGER" src "x:$T/remote/ds"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"simulating filesystem faults, for tests only"* ]]
	[[ "$output" != *"carrying on without the lock"* ]]
}

@test "push: two pushes to one PATH where flock is refused: the second waits for the first" {
	make_local_rsh
	make_files src 20 100000
	make_files src2 20 100000
	mkdir remote
	export STAGER_TEST_FAULTS=flock
	"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" --bwlimit 400K src \
		"x:$T/remote/ds" 2>"$T/err1" 3>&- &
	pid1=$!
	wait_partial 2
	"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" src2 "x:$T/remote/ds" \
		2>"$T/err2" 3>&- &
	pid2=$!
	rc1=0 rc2=0
	wait_pid "$pid1" 120 || rc1=$?
	wait_pid "$pid2" 120 || rc2=$?
	cat "$T/err1" "$T/err2"
	[ "$rc1" -eq 0 ]
	[ "$rc2" -eq 0 ]
	grep -q "waiting for another transfer" "$T/err2"
	diff <(tree_sig src2) <(tree_sig remote/ds)
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
}

@test "push: a directory put in PATH's place while the push runs is never replaced" {
	make_local_rsh
	old_version_pushed 30
	lpush_slow() {
		"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" --bwlimit 400K src \
			"x:$T/remote/$1" 2>"$T/err" 3>&- &
		pid=$!
	}
	# removed and made again, with the user's files
	lpush_slow ds
	wait_partial 2
	rm -rf remote/ds
	mkdir remote/ds
	echo precious >remote/ds/keep
	rc=0
	wait_pid "$pid" 120 || rc=$?
	cat "$T/err"
	[ "$rc" -eq 1 ]
	grep -q "nothing was replaced" "$T/err"
	[ "$(ls -A remote/ds)" = keep ]
	[ "$(cat remote/ds/keep)" = precious ]
	# empty when the push began, filled while it ran
	rm -rf remote/ds remote/.stager-partial.ds
	mkdir remote/ds
	lpush_slow ds
	wait_partial 2
	echo late >remote/ds/late
	rc=0
	wait_pid "$pid" 120 || rc=$?
	cat "$T/err"
	[ "$rc" -eq 1 ]
	grep -q "nothing was replaced" "$T/err"
	[ "$(ls -A remote/ds)" = late ]
	# a first push: PATH made while it ran
	lpush_slow new
	wait_partial 2 remote/.stager-partial.new
	mkdir remote/new
	echo mine >remote/new/keep
	rc=0
	wait_pid "$pid" 120 || rc=$?
	cat "$T/err"
	[ "$rc" -eq 1 ]
	grep -q "appeared while the transfer ran; nothing was published" "$T/err"
	[ "$(ls -A remote/new)" = keep ]
}

@test "push: a record that is not the user's, or not a file, vouches for nothing and never hangs" {
	make_local_rsh
	make_files src 3 1000
	mkdir remote
	lpush() { timeout 30 "$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" "$@"; }
	# a leftover temporary record, even a FIFO, is removed
	mkfifo remote/.stager-tmp-published.ds
	lpush src "x:$T/remote/ds"
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
	before=$(tree_sig remote/ds)
	echo new >src/f0001
	# another user's record (anyone who can write the parent can plant one)
	chown nobody remote/.stager-published.ds
	run lpush src "x:$T/remote/ds"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *".stager-published.ds' is a file of another user, nobody (uid $(id -u nobody))"*"nothing was changed"* ]]
	[ "$(tree_sig remote/ds)" = "$before" ]
	# a FIFO: refused, not a hang
	rm remote/.stager-published.ds
	mkfifo remote/.stager-published.ds
	run lpush src "x:$T/remote/ds"
	echo "$output"
	[ "$status" -eq 1 ]
	[ "$(tree_sig remote/ds)" = "$before" ]
	# into a new PATH beside it: the FIFO in the way is named
	rm remote/.stager-published.ds
	mkfifo remote/.stager-published.other
	run lpush src "x:$T/remote/other"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *".stager-published.other' is not stager's record"* ]]
	[ ! -e remote/other ]
}

@test "push: a .stager-old.NAME stager did not move aside is never put in PATH's place" {
	make_local_rsh
	make_files src 3 1000
	mkdir -p remote/.stager-old.ds
	echo theirs >remote/.stager-old.ds/keep
	chown -R nobody remote/.stager-old.ds
	run stager push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/ds"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"is not a version stager moved aside"* ]]
	diff <(tree_sig src) <(tree_sig remote/ds)
	[ "$(cat remote/.stager-old.ds/keep)" = theirs ]
}

@test "push --replace cut before its switch leaves no record naming the user's directory" {
	unshare -m true 2>/dev/null || skip "needs mount namespaces (unshare -m)"
	make_local_rsh
	make_files src 3 1000
	mkdir -p remote/me
	# a mount point cannot be renamed: the switch fails after all else
	cat >"$T/both" <<-EOF
		mount -t tmpfs none "$T/remote/me" || exit 99
		echo precious >"$T/remote/me/keep"
		"$STAGER" push --replace --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/me"
		echo "replace: \$?"
		"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/me"
		echo "again: \$?"
		cat "$T/remote/me/keep"
	EOF
	run -0 unshare -m sh "$T/both"
	echo "$output"
	[[ "$output" == *"again: 1"* ]]
	[[ "$output" == *"was not made by stager push"* ]]
	[[ "$output" == *"replace: 7"* ]]
	[ "${lines[-1]}" = precious ]
}

@test "pull: a file changed at the far end during the pull exits 7; an unreadable LOCAL says why" {
	make_local_rsh
	make_files src 30 100000
	mkdir remote
	stager push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/ds"
	"$STAGER" pull --rsh "$T/local-rsh" --remote-stager "$STAGER" --bwlimit 400K \
		"x:$T/remote/ds" back 2>"$T/err" 3>&- &
	pid=$!
	wait_partial 2 .stager-partial.back
	printf 'rewritten' | dd of=remote/ds/f0030 bs=1 seek=5000 conv=notrunc 2>/dev/null
	rc=0
	wait_pid "$pid" 120 || rc=$?
	cat "$T/err"
	[ "$rc" -eq 7 ]
	grep -q "'f0030' changed while it was sent; pull again" "$T/err"
	[ ! -e back ]
	# LOCAL there but not readable: the reason, not "not a directory"
	mkdir locked
	chmod 000 locked
	nocaps=""
	[ "$(id -u)" -ne 0 ] || nocaps="setpriv --bounding-set=-dac_override,-dac_read_search"
	run $nocaps "$STAGER" pull --rsh "$T/local-rsh" --remote-stager "$STAGER" \
		"x:$T/remote/ds" locked
	echo "$output"
	[ "$status" -eq 7 ]
	[[ "$output" == *"cannot open 'locked': Permission denied"* ]]
}

@test "pull --bwlimit: the rate holds for what is received" {
	make_files src 2 1000000
	mkdir remote
	spush src "127.0.0.1:$T/remote/ds"
	start=$(date +%s.%N)
	spull --bwlimit 500K "127.0.0.1:$T/remote/ds" back
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	echo "pulled 2 MB at 500K/s in $secs s" >&3
	[ "$(echo "$secs >= 3" | bc)" -eq 1 ]
	diff <(tree_sig src) <(tree_sig back)
}

@test "push: a file rewritten in place during the push: exit 7, changed, push again" {
	make_local_rsh
	make_files src 30 100000
	mkdir remote
	"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" --bwlimit 400K src \
		"x:$T/remote/ds" 2>"$T/err" 3>&- &
	pid=$!
	wait_partial 2
	# the same size, other bytes, in a file not yet sent
	printf 'rewritten' | dd of=src/f0030 bs=1 seek=5000 conv=notrunc 2>/dev/null
	rc=0
	wait_pid "$pid" 120 || rc=$?
	cat "$T/err"
	[ "$rc" -eq 7 ]
	grep -q "'f0030' changed while it was sent; push again" "$T/err"
	run ! grep -q damaged "$T/err"
	[ ! -e remote/ds ]
	spush src "127.0.0.1:$T/remote/ds"
	diff <(tree_sig src) <(tree_sig remote/ds)
}

@test "push: a single file is refused with what to do" {
	echo data >"$T/file"
	run spush "$T/file" "127.0.0.1:$T/x"
	[ "$status" -eq 1 ]
	[[ "$output" == *"push sends directories, not single files"* ]]
	[[ "$output" == *"directory that holds it"* ]]
}

@test "push: a .stager-partial.NAME or .stager-basis.NAME of another user is never written to" {
	make_local_rsh
	make_files src 3 1000
	mkdir remote
	chmod 1777 remote
	lpush() { "$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" "$@"; }
	# made first by another user, open to all, in a sticky directory
	mkdir -m 0777 remote/.stager-partial.ds
	chown nobody remote/.stager-partial.ds
	run lpush src "x:$T/remote/ds"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *".stager-partial.ds' is not a directory of yours: it is a directory of another user, nobody (uid $(id -u nobody))"* ]]
	[ -z "$(ls -A remote/.stager-partial.ds)" ]
	[ ! -e remote/ds ]
	# a symlink in its place: the same
	rm -rf remote/.stager-partial.ds
	ln -s "$T/elsewhere" remote/.stager-partial.ds
	mkdir elsewhere
	run lpush src "x:$T/remote/ds"
	[ "$status" -eq 1 ]
	[ -z "$(ls -A elsewhere)" ]
	# --pack: the old pack is unpacked only into a directory of the user's
	rm remote/.stager-partial.ds
	lpush --pack src "x:$T/remote/ds"
	mkdir -m 0777 remote/.stager-basis.ds.tar.zst
	chown nobody remote/.stager-basis.ds.tar.zst
	echo new >src/f0001
	run lpush --pack src "x:$T/remote/ds"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *".stager-basis.ds.tar.zst' is not a directory of yours: it is a directory of another user, nobody (uid $(id -u nobody))"* ]]
	[ -z "$(ls -A remote/.stager-basis.ds.tar.zst)" ]
}

@test "push --pack: a file at PATH.tar.zst is replaced only if stager pushed it there, or --replace" {
	make_local_rsh
	make_files src 3 1000
	mkdir remote
	lpush() { "$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" "$@"; }
	echo precious >remote/ds.tar.zst
	run lpush --pack src "x:$T/remote/ds"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"ds.tar.zst' exists and was not made by stager push --pack"* ]]
	[[ "$output" == *"--replace"* ]]
	[ "$(cat remote/ds.tar.zst)" = precious ]
	# --replace: asked for; then stager's own pack is replaced without it
	lpush --pack --replace src "x:$T/remote/ds"
	stager verify remote/ds.tar.zst
	echo new >src/f0001
	lpush --pack src "x:$T/remote/ds"
	stager unpack remote/ds.tar.zst back
	diff <(tree_sig src) <(tree_sig back)
	# changed since (its ctime): refused again
	chmod 0600 remote/ds.tar.zst
	before=$(sha256sum <remote/ds.tar.zst)
	echo newer >src/f0002
	run lpush --pack src "x:$T/remote/ds"
	[ "$status" -eq 1 ]
	[ "$(sha256sum <remote/ds.tar.zst)" = "$before" ]
}

# ---- the stat-keyed indexes (xfer_index.c, xfer_same.c) --------------------

# push and pull with the far end run here (its environment, so its index
# directory, is the test's): lpush SRC DEST, lpull SRC DEST
index_setup() {
	make_local_rsh
	export XDG_CACHE_HOME=$T/xdg
	lpush() { "$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" "$@"; }
	lpull() { "$STAGER" pull --rsh "$T/local-rsh" --remote-stager "$STAGER" "$@"; }
}

# the files under DIR that PROG (run under strace) opened: none, unless a
# data file f0001..f9999 was opened to be read
opened_data_files() { # TRACE
	grep -E 'open(at2?)?\(.*"([^"]*/)?f[0-9]{4}"' "$1" | grep -v ENOENT || true
}

@test "push: an unchanged re-push reads no file on either end and switches nothing" {
	index_setup
	make_files src 50 20000
	mkdir remote
	lpush src "x:$T/remote/ds"
	ino=$(stat -c %i remote/ds)
	out=$(lpush --json src "x:$T/remote/ds")
	[ "$(json_field "$out" hashed_files)" -eq 0 ]
	[ "$(json_field "$out" reused_files)" -eq 50 ]
	# no new version was built: the same directory, no partial one left
	[ "$(stat -c %i remote/ds)" = "$ino" ]
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
	diff <(tree_sig_ns src) <(tree_sig_ns remote/ds)
	# the pull's receiver is this end: it reads none of LOCAL's files either
	lpull "x:$T/remote/ds" back
	out=$(lpull --json "x:$T/remote/ds" back)
	[ "$(json_field "$out" hashed_files)" -eq 0 ]
	# no data file opened at all, by either end (where strace runs)
	command -v strace >/dev/null || skip "no strace"
	ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=open,openat,openat2 -o trace \
		"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/ds"
	[ -z "$(opened_data_files trace)" ]
	ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=open,openat,openat2 -o trace \
		"$STAGER" pull --rsh "$T/local-rsh" --remote-stager "$STAGER" "x:$T/remote/ds" back
	[ -z "$(opened_data_files trace)" ]
}

@test "push: a file rewritten with its size and mtime put back is sent again (its ctime moved)" {
	index_setup
	make_files src 20 5000
	mkdir remote
	lpush src "x:$T/remote/ds"
	lpush src "x:$T/remote/ds"
	# at the sender: same size, mtime set back (touch -d), new bytes
	m=$(stat -c %y src/f0007)
	printf 'XXXX' | dd of=src/f0007 bs=1 seek=10 conv=notrunc 2>/dev/null
	touch -d "$m" src/f0007
	out=$(lpush --json src "x:$T/remote/ds")
	[ "$(json_field "$out" hashed_files)" -eq 1 ]
	[ "$(json_field "$out" whole_files)" -eq 1 ]
	cmp src/f0007 remote/ds/f0007
	# at the receiver: DEST's copy edited the same way is found and mended
	m=$(stat -c %y remote/ds/f0003)
	printf 'YYYY' | dd of=remote/ds/f0003 bs=1 seek=10 conv=notrunc 2>/dev/null
	touch -d "$m" remote/ds/f0003
	out=$(lpush --json src "x:$T/remote/ds")
	[ "$(json_field "$out" whole_files)" -eq 1 ]
	diff <(tree_sig_ns src) <(tree_sig_ns remote/ds)
	# and a pull's receiver likewise
	lpull "x:$T/remote/ds" back
	m=$(stat -c %y back/f0005)
	printf 'ZZZZ' | dd of=back/f0005 bs=1 seek=10 conv=notrunc 2>/dev/null
	touch -d "$m" back/f0005
	out=$(lpull --json "x:$T/remote/ds" back)
	[ "$(json_field "$out" hashed_files)" -eq 1 ]
	[ "$(json_field "$out" whole_files)" -eq 1 ]
	diff <(tree_sig_ns src) <(tree_sig_ns back)
}

# A push of src to remote/ds and a pull of it back to back: each end
# hashed N files.
hashed_both() { # N
	local out
	out=$(lpush --json src "x:$T/remote/ds")
	[ "$(json_field "$out" hashed_files)" -eq "$1" ]
	out=$(lpull --json "x:$T/remote/ds" back)
	[ "$(json_field "$out" hashed_files)" -eq "$1" ]
}

@test "push: a damaged index, or another user's, is ignored: every file is read" {
	index_setup
	make_files src 20 5000
	mkdir remote
	lpush src "x:$T/remote/ds"
	# the push's sender's (the pull's, the far end's, is another)
	sidx=$(echo "$XDG_CACHE_HOME"/stager/xfer/send-*)
	[ -f "$sidx" ]
	lpull "x:$T/remote/ds" back
	[ -f .stager-index.back ]
	# one byte flipped in each
	for f in "$sidx" .stager-index.back; do
		printf '\xff' | dd of="$f" bs=1 seek=40 conv=notrunc 2>/dev/null
	done
	hashed_both 20
	# written anew: trusted again
	hashed_both 0
	# another user's index (anyone who can write the parent can plant one)
	[ "$(id -u)" -eq 0 ] || skip "needs root to chown"
	chown nobody "$sidx" .stager-index.back
	hashed_both 20
	diff <(tree_sig_ns src) <(tree_sig_ns back)
}

@test "push --checksum, pull --checksum: every file is read on both ends" {
	index_setup
	make_files src 20 5000
	mkdir remote
	lpush src "x:$T/remote/ds"
	lpull "x:$T/remote/ds" back
	out=$(lpush --checksum --json src "x:$T/remote/ds")
	[ "$(json_field "$out" hashed_files)" -eq 20 ]
	[ "$(json_field "$out" reused_files)" -eq 20 ]
	out=$(lpull --checksum --json "x:$T/remote/ds" back)
	[ "$(json_field "$out" hashed_files)" -eq 20 ]
	# over the real sshd too
	out=$(spush --checksum --json src "127.0.0.1:$T/remote/ds")
	[ "$(json_field "$out" hashed_files)" -eq 20 ]
	out=$(spull --checksum --json "127.0.0.1:$T/remote/ds" back)
	[ "$(json_field "$out" hashed_files)" -eq 20 ]
	command -v strace >/dev/null || skip "no strace"
	ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=open,openat,openat2 -o trace \
		"$STAGER" push --checksum \
		--rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/ds"
	# each file opened by both ends
	[ "$(opened_data_files trace | wc -l)" -ge 40 ]
}
