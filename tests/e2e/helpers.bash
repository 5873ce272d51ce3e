# helpers.bash - shared set-up for the end-to-end tests: a temporary
# directory per test, the real stager binary, and tree comparison.

: "${STAGER:?run through tests/run.sh or set STAGER}"

# NAME: a new directory (mode 0755) under the first of $BATS_TMPDIR,
# /var/tmp and /dev/shm that every user can reach: tests act as other
# users too, and a private /tmp (mode 0700, some machines) or a checkout
# under a private home must not make them fail
reachable_mktemp() {
	local base d p ok
	for base in "${BATS_TMPDIR:-/tmp}" /var/tmp /dev/shm; do
		[ -d "$base" ] || continue
		ok=1
		p=$(cd "$base" && pwd -P)
		while [ -n "$p" ]; do
			[ "$(($(stat -c '%#a' "$p") & 1))" -eq 1 ] || ok=0
			p=${p%/*}
		done
		[ "$ok" -eq 1 ] || continue
		d=$(mktemp -d "$base/$1.XXXXXX") || continue
		chmod 0755 "$d"
		echo "$d"
		return 0
	done
	mktemp -d "${BATS_TMPDIR:-/tmp}/$1.XXXXXX"
}

# DIR FILE...: copies of FILEs in DIR (made mode 0755; the copies keep
# their names, mode 0755), for what another user must run or read: the
# checkout may be out of that user's reach (a clone under /root, a home
# of mode 0700).  DIR belongs under the test's reachable directory.
reachable_copy() {
	local d=$1 f
	shift
	install -d -m 0755 "$d" || return 1
	for f; do
		install -m 0755 "$f" "$d/${f##*/}" || return 1
	done
}

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
}

teardown() {
	cd /
	chmod -R u+w "$T" 2>/dev/null || true
	rm -rf "$T"
}

stager() { "$STAGER" "$@"; }

# A remote shell for push and pull that runs the far end here, as
# `--rsh ./rsh` (the host is ignored; push.bats goes through a real sshd).
local_rsh() {
	printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' >rsh
	chmod +x rsh
}

# A tree with the awkward cases users' datasets have.
make_awkward_tree() {
	local d=$1
	mkdir -p "$d/a/b/c" "$d/empty dir" "$d/deep"
	echo hello >"$d/a/hello.txt"
	printf 'x%.0s' $(seq 1 1000) >"$d/a/b/c/thousand"
	: >"$d/zero"
	head -c 3000000 /dev/urandom >"$d/big.bin"
	echo spaces >"$d/a/with spaces.txt"
	echo newline >"$d/a/new
line"
	echo nonascii >"$d/a/caf$(printf '\303\251')-$(printf '\346\227\245\346\234\254')"
	echo latin1 >"$d/a/$(printf 'lat\351n')"
	local long
	long=$(printf 'n%.0s' $(seq 1 200))
	echo long >"$d/a/$long"
	local deep="$d/deep"
	for i in $(seq 1 30); do deep="$deep/level_$i"; done
	mkdir -p "$deep" && echo bottom >"$deep/file"
	ln -s a/hello.txt "$d/rel-link"
	ln -s ../hello.txt "$d/a/b/up-link"
	ln -s "does-not-exist" "$d/dangling"
	ln "$d/a/hello.txt" "$d/hard1"
	ln "$d/a/hello.txt" "$d/a/b/hard2"
	chmod 0640 "$d/a/b/c/thousand"
	chmod 0755 "$d/a/hello.txt"
	chmod 0700 "$d/empty dir"
	touch -d '2001-02-03 04:05:06.123456789' "$d/zero"
	touch -h -d '2002-02-02 02:02:02' "$d/rel-link"
}

# One line per entry: path, type, mode, size, link target, mtime (seconds),
# and a content hash; sorted.  Directory sizes are not compared; symlinks'
# own mtimes are.  One process for the whole tree (a shell and three
# commands for each entry cost minutes on a loaded machine).
tree_sig() {
	(cd "$1" && "${PY3:-python3}" -c '
import hashlib, os, stat, sys
out = sys.stdout.buffer
def entry(rel):
	st = os.lstat(rel)
	m = st.st_mode
	kind = {stat.S_IFREG: "f", stat.S_IFDIR: "d", stat.S_IFLNK: "l", stat.S_IFIFO: "p",
	        stat.S_IFSOCK: "s", stat.S_IFCHR: "c", stat.S_IFBLK: "b"}[stat.S_IFMT(m)]
	head = rel[2:] + b"|" + kind.encode() + b"|%o|" % stat.S_IMODE(m)
	if kind == "l":
		return head + os.readlink(rel) + b"|link|%d" % int(st.st_mtime)
	if kind == "d":
		return head + b"|%d" % int(st.st_mtime)
	digest = b""
	if kind == "f":
		try:
			with open(rel, "rb") as f:
				h = hashlib.sha256()
				for block in iter(lambda: f.read(1 << 20), b""):
					h.update(block)
				digest = h.hexdigest()[:16].encode()
		except OSError:
			pass
	return head + b"|%d|%d|" % (st.st_size, int(st.st_mtime)) + digest
for top, dirs, files in os.walk(b".", followlinks=False):
	for name in dirs + files:
		out.write(entry(os.path.join(top, name)) + b"\n")
' | LC_ALL=C sort)
}

# The same with nanosecond mtimes (stager keeps them; tar does not).
tree_sig_ns() {
	(cd "$1" && find . -mindepth 1 ! -type l -printf '%P|%T@\n' | LC_ALL=C sort)
}

# Inode groups: which paths share an inode (hardlinks kept).
link_groups() {
	(cd "$1" && find . -type f -links +1 -printf '%i %P\n' | sort -n |
		awk '{ if ($1 != last) { if (g) print g; g = $2 } else g = g " " $2; last = $1 }
		     END { if (g) print g }' | sort)
}

flip_byte() { # file offset
	local b
	b=$(dd if="$1" bs=1 skip="$2" count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
	printf "$(printf '\\%03o' $(((b ^ 0x40) & 255)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# Waiting on conditions, never blindly or forever.

wait_until() { # SECONDS CMD...: run CMD every 0.05 s until it succeeds; fail after SECONDS
	# (a deadline, not a count: a CMD that itself takes long, such as
	# squeue with a controller gone, cannot stretch the wait)
	local limit=$1 end
	shift
	end=$((${EPOCHREALTIME//[!0-9]/} + limit * 1000000))
	until "$@"; do
		if [ "${EPOCHREALTIME//[!0-9]/}" -gt "$end" ]; then
			echo "wait_until: '$*' still false after $limit s" >&2
			return 1
		fi
		sleep 0.05
	done
}

running() { # PID: the process exists and is not a zombie (kill -0 says yes to zombies)
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "${st%% *}" != Z ] # check-tests: the function's status
}

wait_pid() { # PID [SECONDS=60]: wait for a background child and return its exit
	# status; after SECONDS it is killed (-9) and 124 returned.  Not under
	# `run` (a subshell cannot wait for the test's child): `wait_pid P || rc=$?`
	local pid=$1 limit=${2:-60}
	if ! wait_until "$limit" eval "! running $pid"; then
		echo "wait_pid: $pid still running after $limit s: killed" >&2
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null # check-tests: it was just killed
		return 124
	fi
	wait "$pid" # check-tests: it has ended
}

# T MAX: T seconds is under MAX, a wall-clock upper bound; not checked on
# a build with sanitizers (tests/run.sh exports SAN_FLAGS, non-empty under
# make asan and make ubsan: slow builds).  Lower bounds always hold.
# A signal's "within N seconds" (DESIGN.md) on this machine as it goes
# now: N times its load average over its cores (at least 1: a CPU-bound
# step takes that many times longer on a loaded machine), and a second
# more for the scheduling.
signal_limit() { # N
	awk -v b="$1" -v l="$(cut -d' ' -f1 /proc/loadavg)" -v n="$(nproc)" \
		'BEGIN { s = l / n; if (s < 1) s = 1; print b * s + 1 }'
}

faster_than() {
	if [ -n "${SAN_FLAGS:-}" ]; then
		echo "under sanitizers: $1 s not checked against $2 s"
		return 0
	fi
	awk -v t="$1" -v max="$2" 'BEGIN { exit !(t < max) }'
}

# Kill loops: kill -9 at random moments, which a seed repeats.

# Seed $RANDOM in the test's own shell (call it there, not in $( ): a
# subshell draws from a seed of its own) from KILL_SEED, else a new seed,
# and print it: KILL_SEED=N repeats the run's moments.  Draw the moments in
# the test's shell too (ms=$((RANDOM % 600)), then pass them on).
kill_seed() {
	KILL_SEED=${KILL_SEED:-$(((10#$(date +%N) + $$) % 32768))}
	RANDOM=$KILL_SEED
	echo "# kill seed $KILL_SEED (KILL_SEED=$KILL_SEED repeats these moments)" >&3
}

# PID MS: kill -9 the background child PID after MS milliseconds and reap
# it; KILL_RC is its exit status, KILL_MID 1 if the kill cut it mid-work
# (it was still running and died of the kill), 0 if it had finished first.
kill_after() {
	sleep "$(printf '%d.%03d' $(($2 / 1000)) $(($2 % 1000)))" # check-tests: the moment of the kill
	KILL_MID=0
	if running "$1"; then KILL_MID=1; fi
	kill -9 "$1" 2>/dev/null || true
	KILL_RC=0
	wait_pid "$1" 60 || KILL_RC=$?
	[ "$KILL_RC" -eq 137 ] || KILL_MID=0
}

# CMD...: the milliseconds CMD takes, run whole (its output dropped); a
# kill loop draws its moments within that
time_ms() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1 3>&- || return
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

# Another user (nobody, 65534) runs CMD; as root only, else this user.
as_user() { if [ "$(id -u)" -eq 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi; }

# For as_user: $AS_USER_STAGER is the build's stager, or a copy in $T when
# the build is out of the other user's reach (a clone under /root, mode
# 0700).  Skips when $T itself is out of its reach.
# /dev/fuse open to every user, as Debian's udev rule makes it (0666): a
# container without udev may have it 0600 (a fresh CI machine did), and
# an ordinary user's mount then fails however the tests run
fuse_for_users() {
	[ "$(stat -c %a /dev/fuse)" = 666 ] || chmod 0666 /dev/fuse
}

as_user_setup() {
	AS_USER_STAGER=$STAGER
	as_user test -x "$T" || skip "user 65534 cannot reach $T: set TMPDIR to a directory it can"
	if ! as_user test -x "$STAGER"; then
		cp "$STAGER" "$T/stager"
		chmod 0755 "$T/stager"
		AS_USER_STAGER=$T/stager
	fi
	as_user "$AS_USER_STAGER" --version >/dev/null
}

# DIR: a real sshd on localhost, on a free port, with its own host key,
# config and client key in DIR (its pid in DIR/sshd.bgpid, its log in
# DIR/sshd.log); exports RSH, the ssh command that reaches it.  1 if none
# could be started.
start_sshd() {
	local d=$1 port
	ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
	ssh-keygen -q -t ed25519 -N '' -f "$d/client_key"
	cp "$d/client_key.pub" "$d/authorized_keys"
	mkdir -p /run/sshd
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		port=$((20000 + RANDOM % 30000))
		cat >"$d/sshd_config" <<-EOF
			Port $port
			ListenAddress 127.0.0.1
			HostKey $d/host_key
			PidFile $d/sshd.pid
			AuthorizedKeysFile $d/authorized_keys
			StrictModes no
			UsePAM no
			PermitRootLogin prohibit-password
			PasswordAuthentication no
			KbdInteractiveAuthentication no
			PubkeyAuthentication yes
			Subsystem sftp /usr/lib/openssh/sftp-server
			LogLevel ERROR
		EOF
		/usr/sbin/sshd -D -f "$d/sshd_config" -E "$d/sshd.log" 3>&- &
		echo $! >"$d/sshd.bgpid"
		export RSH="ssh -p $port -i $d/client_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
		for _ in $(seq 1 100); do
			if $RSH 127.0.0.1 true 2>/dev/null; then return 0; fi
			kill -0 "$(cat "$d/sshd.bgpid")" 2>/dev/null || break
			sleep 0.1
		done
		kill "$(cat "$d/sshd.bgpid")" 2>/dev/null || true
	done
	return 1
}

# Skip when an ordinary user's FUSE mount cannot be ended by the user here:
# in a chroot (a fresh-check root), /proc/self/mountinfo shows the host's
# paths, and fusermount3 -u finds no mount of the user's at the path given.
user_fuse_unmount_or_skip() {
	if command -v ischroot >/dev/null && ischroot; then
		skip "in a chroot: fusermount3 cannot end a user's mount here (mountinfo shows the host's paths)"
	fi
}
