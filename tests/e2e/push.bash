# push.bash - what push.bats, push-hostile.bats and push-replace.bats
# share: a real sshd on localhost for the file's tests (setup_file), push
# and pull through it, a stand-in transport, files of random content, an
# old version pushed and a push caught mid-transfer.

setup_file() {
	export SSHD_DIR
	SSHD_DIR=$(mktemp -d "${BATS_TMPDIR:-/tmp}/stager-sshd.XXXXXX")
	# the sending end's index (~/.cache/stager/xfer) under the test's
	# directory, not the user's home (a far end started by sshd keeps its
	# own; the pruning of old ones bounds it)
	export XDG_CACHE_HOME=$SSHD_DIR/xdg
	local d=$SSHD_DIR
	start_sshd "$d" && return 0
	cat "$d/sshd.log" >&2
	return 1
}

teardown_file() {
	if [ -f "$SSHD_DIR/sshd.bgpid" ]; then
		kill "$(cat "$SSHD_DIR/sshd.bgpid")" 2>/dev/null || true
	fi
	rm -rf "$SSHD_DIR"
}

# push/pull through the real sshd
spush() { stager push --rsh "$RSH" --remote-stager "$STAGER" "$@"; }
spull() { stager pull --rsh "$RSH" --remote-stager "$STAGER" "$@"; }

json_field() { # json key
	echo "$1" | jq -r ".$2"
}

# a stand-in transport that runs the far end locally: rsh HOST CMD...
make_local_rsh() {
	cat >"$T/local-rsh" <<-'EOF'
		#!/bin/sh
		shift
		echo $$ >"${SERVE_PID_FILE:-/dev/null}"
		exec "$@"
	EOF
	chmod +x "$T/local-rsh"
}

# some files of random content: DIR N SIZE
make_files() {
	mkdir -p "$1"
	for i in $(seq 1 "$2"); do
		head -c "$3" /dev/urandom >"$1/f$(printf %04d "$i")"
	done
}

# an old version at remote/ds (its tree_sig in $before), and src: N files
# of 100 kB to push over it
old_version_pushed() {
	make_files old 1 1000
	make_files src "$1" 100000
	mkdir remote
	spush old "127.0.0.1:$T/remote/ds"
	before=$(tree_sig remote/ds)
}

# wait (up to 60 s: a loaded machine may take that long to start both
# ends) until N files are complete in the partial directory
# (remote/.stager-partial.ds unless given)
wait_partial() {
	local n=0 end=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$end" ]; do
		n=$(find "${2:-remote/.stager-partial.ds}" -type f -name 'f*' 2>/dev/null | wc -l)
		[ "$n" -ge "$1" ] && return 0
		sleep 0.1
	done
	echo "only $n files in the partial directory" >&2
	return 1
}

# no process has a file under DIR open any more (a far end has gone)
nothing_open_under() { # DIR
	local fds
	fds=$(find /proc/[0-9]*/fd \( -lname "$1" -o -lname "$1/*" \) 2>/dev/null || true)
	[ -z "$fds" ]
}
