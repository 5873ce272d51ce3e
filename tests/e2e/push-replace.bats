#!/usr/bin/env bats
# push and pull cut short (kill -9 of either end, SIGTERM) and into what
# is there already (DIR/ and LOCAL/, a switch on NFS), a PATH under ~,
# usage errors and --json.  (Apart from push.bats, with the same sshd
# set-up in push.bash: together the file ran past its time limit on a
# loaded machine.)

load helpers
load push
bats_require_minimum_version 1.5.0

@test "push: kill -9 of the client mid-transfer keeps the old version; the next push resumes" {
	old_version_pushed 40
	"$STAGER" push --rsh "$RSH" --remote-stager "$STAGER" --bwlimit 400K src \
		"127.0.0.1:$T/remote/ds" 3>&- &
	pid=$!
	wait_partial 5
	kill -9 "$pid"
	rc=0
	wait_pid "$pid" 30 || rc=$?
	[ "$rc" -eq 137 ]
	[ "$(tree_sig remote/ds)" = "$before" ]
	# the far end notices the closed connection and ends
	wait_until 30 nothing_open_under "$T/remote"
	out=$(spush --json src "127.0.0.1:$T/remote/ds")
	reused=$(json_field "$out" reused_files)
	echo "resumed: $reused of 40 files were already there" >&3
	[ "$reused" -ge 5 ]
	diff <(tree_sig src) <(tree_sig remote/ds)
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
}

@test "push: kill -9 of the server mid-transfer keeps the old version; the next push resumes" {
	make_local_rsh
	old_version_pushed 40
	export SERVE_PID_FILE=$T/serve.pid
	"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" --bwlimit 400K src \
		"x:$T/remote/ds" 2>"$T/err" 3>&- &
	pid=$!
	wait_partial 5
	kill -9 "$(cat "$T/serve.pid")"
	rc=0
	wait_pid "$pid" 120 || rc=$?
	[ "$rc" -eq 6 ]
	grep -q 'connection' "$T/err"
	[ "$(tree_sig remote/ds)" = "$before" ]
	unset SERVE_PID_FILE
	out=$(spush --json src "127.0.0.1:$T/remote/ds")
	[ "$(json_field "$out" reused_files)" -ge 5 ]
	diff <(tree_sig src) <(tree_sig remote/ds)
}

@test "push: SIGTERM mid-transfer exits 5 and leaves PATH as it was" {
	make_local_rsh
	old_version_pushed 20
	"$STAGER" push --rsh "$T/local-rsh" --remote-stager "$STAGER" --bwlimit 400K src \
		"x:$T/remote/ds" 2>"$T/err" 3>&- &
	pid=$!
	wait_partial 2
	kill -TERM "$pid"
	rc=0
	wait_pid "$pid" 120 || rc=$?
	[ "$rc" -eq 5 ]
	grep -q interrupted "$T/err"
	[ "$(tree_sig remote/ds)" = "$before" ]
}

@test "push: a PATH under ~ is under the far end's home" {
	make_files src 2 100
	export HOME=$T/home
	mkdir -p "$HOME"
	make_local_rsh
	stager push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:~/ds"
	diff <(tree_sig src) <(tree_sig "$HOME/ds")
}

@test "push: usage errors and a missing far end" {
	mkdir src
	run stager push src nohostpath
	[ "$status" -eq 1 ]
	run stager push missing "127.0.0.1:$T/x"
	[ "$status" -eq 2 ]
	run stager push --rsh "$RSH" --remote-stager /nonexistent/stager src "127.0.0.1:$T/x"
	[ "$status" -eq 6 ]
	[[ "$output" == *remote-stager* ]]
	touch "$T/file"
	run spush src "127.0.0.1:$T/file"
	[ "$status" -ne 0 ]
	[ -f "$T/file" ]
	run spush src "127.0.0.1:$T/no/such/parent/ds"
	[ "$status" -eq 2 ]
	[[ "$output" == *"no/such/parent"* ]]
}

@test "push: --json reports files, bytes on the wire and seconds" {
	make_files src 3 1000
	mkdir remote
	out=$(spush --json src "127.0.0.1:$T/remote/ds")
	echo "$out" | jq -e '.files == 3 and .whole_files == 3 and .wire_bytes > 3000 and .seconds >= 0 and .status == 0'
}

@test "push: an existing directory is pushed into with DIR/, replaced only if stager made it" {
	make_files src 3 1000
	mkdir -p remote/me
	echo precious >remote/me/keep
	# without the slash: refused before anything is sent, nothing changed
	run spush src "127.0.0.1:$T/remote/me"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"'$T/remote/me' exists and was not made by stager push"* ]]
	[[ "$output" == *"--replace"* ]]
	[ "$(cat remote/me/keep)" = precious ]
	[ "$(ls -A remote | xargs)" = me ]
	# with it: into the directory, as scp and rsync do; and again
	spush src "127.0.0.1:$T/remote/me/"
	diff <(tree_sig src) <(tree_sig remote/me/src)
	echo new >src/f0002
	spush src "127.0.0.1:$T/remote/me/"
	spush src "127.0.0.1:$T/remote/me/src"
	diff <(tree_sig src) <(tree_sig remote/me/src)
	[ "$(cat remote/me/keep)" = precious ]
	# . and ~ are directories too
	make_local_rsh
	mkdir -p "$T/home"
	HOME=$T/home stager push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:~"
	diff <(tree_sig src) <(tree_sig "$T/home/src")
	(cd remote && stager push --rsh "$T/local-rsh" --remote-stager "$STAGER" ../src x:.)
	diff <(tree_sig src) <(tree_sig remote/src)
	# --replace makes it a copy, but never of a home directory
	spush --replace src "127.0.0.1:$T/remote/me"
	diff <(tree_sig src) <(tree_sig remote/me)
	HOME=$T/home run stager push --replace --rsh "$T/local-rsh" --remote-stager "$STAGER" \
		src "x:$T/home"
	[ "$status" -eq 1 ]
	[[ "$output" == *"home directory"* ]]
	[ -d "$T/home/src" ]
	# a directory stager published is replaced; an empty one too
	spush src "127.0.0.1:$T/remote/me"
	mkdir remote/empty
	spush src "127.0.0.1:$T/remote/empty"
	diff <(tree_sig src) <(tree_sig remote/empty)
	# stager pack of a pushed tree holds the tree only
	stager pack -q remote/empty -o "$T/p.tar.zst"
	listing=$(stager ls "$T/p.tar.zst")
	[ -n "$listing" ]
	[[ "$listing" != *stager* ]]
}

@test "pull: an existing LOCAL is pulled into with LOCAL/, replaced only if stager made it" {
	make_files src 3 1000
	mkdir remote
	spush src "127.0.0.1:$T/remote/ds"
	mkdir victim
	echo precious >victim/keep
	run spull "127.0.0.1:$T/remote/ds" victim
	[ "$status" -eq 1 ]
	[[ "$output" == *"'victim' exists and was not made by stager pull"* ]]
	[ "$(ls -A victim | xargs)" = keep ]
	spull "127.0.0.1:$T/remote/ds" victim/
	diff <(tree_sig src) <(tree_sig victim/ds)
	(cd victim && spull "127.0.0.1:$T/remote/ds" . && spull "127.0.0.1:$T/remote/ds" ds)
	[ "$(cat victim/keep)" = precious ]
}

@test "push: a switch without RENAME_EXCHANGE and without flock (NFS) still publishes" {
	make_local_rsh
	make_files src 5 1000
	mkdir remote
	export STAGER_TEST_FAULTS=renameat2,flock
	run stager push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/ds"
	[ "$status" -eq 0 ]
	# the hook says it is on; the lock is fcntl's
	[[ "$output" == *"STAGER_TEST_FAULTS=renameat2,flock: simulating filesystem faults"* ]]
	[[ "$output" != *"carrying on without the lock"* ]]
	echo changed >src/f0001
	stager push --rsh "$T/local-rsh" --remote-stager "$STAGER" src "x:$T/remote/ds"
	diff <(tree_sig src) <(tree_sig remote/ds)
	[ "$(ls -A remote | xargs)" = ".stager-index.ds .stager-published.ds ds" ]
	# no lock at all: said, and the push goes on
	echo again >src/f0002
	STAGER_TEST_FAULTS=renameat2,flock,ofdlock run stager push --rsh "$T/local-rsh" \
		--remote-stager "$STAGER" src "x:$T/remote/ds"
	[ "$status" -eq 0 ]
	[[ "$output" == *"carrying on without the lock"* ]]
	diff <(tree_sig src) <(tree_sig remote/ds)
}
