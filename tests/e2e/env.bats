#!/usr/bin/env bats
# stager run --env and stager env: a Python env (a real venv of Debian's
# python3) served from the node at its own path by a real FUSE mount,
# shared by the runs that use it, never stale.  Each test unmounts what it
# mounted, also when it fails (mount_helpers' teardown).

load helpers
load mount_helpers
load envs
bats_require_minimum_version 1.5.0

PY=/usr/bin/python3

# DIR: a venv (Debian's python3, no pip; bin/python links out of it to
# /usr/bin) holding a package "hello" with its dist-info, as pip lays one
# out, and a console script whose shebang names the env's python.
small_venv() {
	"$PY" -m venv --without-pip "$1"
	local sp
	sp=$(echo "$1"/lib/python3*/site-packages)
	mkdir "$sp/hello" "$sp/hello-1.0.dist-info"
	printf 'def hi():\n    return "hi from " + __file__\n' >"$sp/hello/__init__.py"
	printf 'Metadata-Version: 2.1\nName: hello\nVersion: 1.0\n' >"$sp/hello-1.0.dist-info/METADATA"
	printf '#!%s/bin/python\nimport hello\nprint(hello.hi())\n' "$1" >"$1/bin/hello"
	chmod +x "$1/bin/hello"
}

# DIR: an env mount of stager's there, in this mount namespace
served() {
	awk -v m="$1" '$5 == m && / - fuse\.stager stager-env:/ { f = 1 } END { exit !f }' \
		/proc/self/mountinfo
}

# how many records of live or dead servers the scratch root holds
records() { find "$STAGER_SCRATCH_ROOT/mounts" -name 'pid-*' ! -name '*.*' 2>/dev/null | wc -l; }
no_records() { [ "$(records)" -eq 0 ]; }

@test "run --env: the env's script, package and interpreter link, served from the node at its own path; nothing left after" {
	small_venv "$T/py"
	stager pack -q py >/dev/null
	[ -f py.tar.zst ]
	# changed in place after the pack: what is served is the pack's
	sp=$(echo py/lib/python3*/site-packages)
	printf 'def hi():\n    return "the shared copy"\n' >"$sp/hello/__init__.py"
	run stager run --env "$T/py" -- "$T/py/bin/hello"
	[ "$status" -eq 0 ]
	[ "$output" != "${output%hi from $T/$sp/hello/__init__.py*}" ]
	echo "$output" | grep -q "'$T/py' served from this node"
	# every process of the command sees it: a child of a child
	run stager run --env "$T/py/" -- sh -c "sh -c '$T/py/bin/python -c \"import hello, sys; print(sys.prefix, hello.hi())\"'"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "^$T/py hi from $T/$sp/hello/__init__.py"
	# and after it: not served, no record, no pin
	! served "$T/py" || false
	[ "$(records)" -eq 0 ]
	[ -z "$(ls "$STAGER_SCRATCH_ROOT/pins/"*/ 2>/dev/null)" ]
	[ "$("$T/py/bin/hello")" = "the shared copy" ]
	# the entry stays in the cache for the next job
	run -0 stager status
	echo "$output" | grep -q 'py.tar.zst'
}

@test "run --env: two runs share one mount; the first to end leaves it to the other, the last unmounts" {
	small_venv "$T/py"
	stager pack -q py >/dev/null
	"$STAGER" run --env "$T/py" -- sh -c 'touch a.up; while [ ! -e a.go ]; do sleep 0.05; done' 3>&- &
	a=$!
	PIDS="$PIDS $a"
	wait_until 30 test -e a.up
	served "$T/py"
	"$STAGER" run --env "$T/py" -- "$T/py/bin/python" -c '
import os, time, importlib
open("b.up", "w").close()
while not os.path.exists("b.go"):
    time.sleep(0.05)
import hello
print(hello.hi())
' >b.out 3>&- &
	b=$!
	PIDS="$PIDS $b"
	wait_until 30 test -e b.up
	[ "$(grep -c ' - fuse\.stager stager-env:' /proc/self/mountinfo)" -eq 1 ]
	[ "$(records)" -eq 2 ]
	# A ends while B still imports from the env
	touch a.go
	wait_pid "$a"
	served "$T/py"
	[ "$(records)" -eq 1 ]
	touch b.go
	wait_pid "$b"
	grep -q "^hi from $T/py/lib/python3.*/site-packages/hello/__init__.py" b.out
	! served "$T/py" || false
	[ "$(records)" -eq 0 ]
}

@test "run --env: an env changed after its pack is refused with the command that packs it again; packed again, it is served" {
	small_venv "$T/py"
	stager pack -q py >/dev/null
	sp=$(echo py/lib/python3*/site-packages)
	# pip installs a package: a dist-info comes
	mkdir "$sp/other-2.0.dist-info"
	run -2 stager run --env "$T/py" -- true
	echo "$output" | grep -q "changed after its pack"
	echo "$output" | grep -q "stager pack '$T/py'"
	! served "$T/py" || false
	stager pack -q py >/dev/null
	stager run --env "$T/py" -- true
	# a console script added (bin changes), a conda-meta that is new
	touch py/bin/newtool
	run -2 stager run --env "$T/py" -- true
	echo "$output" | grep -q "'bin' changed"
	stager pack -q py >/dev/null
	mkdir py/conda-meta
	run -2 stager run --env "$T/py" -- true
	echo "$output" | grep -q "'conda-meta' is new"
	rmdir py/conda-meta
	# its pack gone: the command to make it
	rm py.tar.zst
	run -2 stager run --env "$T/py" -- true
	echo "$output" | grep -q "has no pack: make it with .stager pack $T/py."
	[ "$(records)" -eq 0 ]
}

@test "run --env: another version of the pack served on the node by another run is refused, the first undisturbed" {
	small_venv "$T/py"
	stager pack -q py >/dev/null
	(cd py && exec sleep 600) 3>&- &
	PIDS="$PIDS $!"
	BELOW=/proc/$!/cwd
	"$STAGER" run --env "$T/py" -- sh -c 'touch a.up; while [ ! -e a.go ]; do sleep 0.05; done' 3>&- &
	a=$!
	PIDS="$PIDS $a"
	wait_until 30 test -e a.up
	# a new version of the env, packed (the first run's processes may hold
	# its files: one path, one version), as on another node: through a
	# process whose working directory is the env as the shared
	# filesystem has it (entered before it was served)
	sp=$(echo py/lib/python3*/site-packages)
	mkdir "$BELOW/${sp#py/}/other-2.0.dist-info"
	stager pack -q "$BELOW" -o py.tar.zst >/dev/null
	run -7 stager run --env "$T/py" -- true
	echo "$output" | grep -q "served on this node from another version"
	served "$T/py"
	"$T/py/bin/hello" | grep -q "^hi from"
	touch a.go
	wait_pid "$a"
	! served "$T/py" || false
	stager run --env "$T/py" -- test -d "$T/$sp/other-2.0.dist-info"
}

@test "env: served until umount, listed by status; a server killed with -9 leaves a dead mount the next run replaces" {
	small_venv "$T/py"
	stager pack -q py >/dev/null
	run stager env "$T/py"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q "served from this node until .stager umount"
	served "$T/py"
	"$T/py/bin/hello" | grep -q "^hi from"
	run -0 stager status
	echo "$output" | grep -q "^  $T/py  env from $T/py.tar.zst (served)"
	run -0 stager status --json
	echo "$output" | grep -q '"env":true'
	stager umount "$T/py"
	wait_until 10 no_records
	! served "$T/py" || false
	# a server killed: its mount is dead (ENOTCONN) until the next run
	stager env "$T/py"
	pid=$(server_pid py)
	kill -9 "$pid"
	wait_until 10 gone "$pid"
	run -0 stager run --env "$T/py" -- "$T/py/bin/hello"
	echo "$output" | grep -q "^hi from"
	! served "$T/py" || false
	# the dead server's record goes with the next clean (the epilog's)
	stager clean -q
	[ "$(records)" -eq 0 ]
}

@test "env: another user reads neither the served env nor the node cache; an env or a pack of another user's is refused" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to act as two users"
	as_user_setup
	fuse_for_users
	small_venv "$T/py"
	chmod -R a+rX "$T/py"
	stager pack -q py >/dev/null
	stager env "$T/py"
	# the mount is its user's (no allow_other): nobody is refused
	run as_user cat "$T/py/pyvenv.cfg"
	[ "$status" -ne 0 ]
	run as_user ls "$STAGER_SCRATCH_ROOT/cache"
	[ "$status" -ne 0 ]
	stager umount "$T/py"
	wait_until 10 no_records
	# root's env, served by nobody: refused (it would hide it from root)
	mkdir "$T/other"
	chown 65534:65534 "$T/other"
	run as_user env HOME="$T/other" STAGER_SCRATCH_ROOT="$T/other/scratch" "$AS_USER_STAGER" env "$T/py"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "not you"
	! served "$T/py" || false
	# nobody's env with a pack of root's beside it: refused too
	as_user "$PY" -m venv --without-pip "$T/other/py"
	cp py.tar.zst "$T/other/py.tar.zst"
	run as_user env HOME="$T/other" STAGER_SCRATCH_ROOT="$T/other/scratch" "$AS_USER_STAGER" env "$T/other/py"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "belongs to uid 0, not you"
	# nor through the task `env --all-nodes` starts on the other nodes
	# (stage --node-env: its pack checked by the lead; here, root's pack
	# is refused by the stage itself, whatever its name)
	dg=$(stager pack -q py)
	run as_user env HOME="$T/other" STAGER_SCRATCH_ROOT="$T/other/scratch" sh -c \
		"echo nogo | '$AS_USER_STAGER' stage --node-env --node-receive '$T/other/bcast/copy' --node-digest $dg '$T/py.tar.zst'"
	echo "$output"
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "is not a pack of your own"
	[ -z "$(ls -A "$T/other/scratch/cache" 2>/dev/null | grep -v '^\.')" ]
	# and --node-env is only for those tasks
	run stager stage --node-env py.tar.zst
	[ "$status" -eq 1 ]
	echo "$output" | grep -q -- "--node-env: only for the tasks of"
}

@test "run --env and env without FUSE (no fusermount3 on the PATH): a warning, and the env as the shared filesystem has it" {
	small_venv "$T/py"
	stager pack -q py >/dev/null
	run -0 env PATH=/nonexistent "$STAGER" run --env "$T/py" -- "$T/py/bin/hello"
	echo "$output" | grep -q "FUSE is not available on this node (no fusermount3 on the PATH)"
	echo "$output" | grep -q "^hi from $T/py/lib/python3.*/site-packages/hello/__init__.py"
	run -0 env PATH=/nonexistent "$STAGER" env "$T/py"
	echo "$output" | grep -q "used from the shared filesystem as it is"
	! served "$T/py" || false
	[ "$(records)" -eq 0 ]
}

@test "run --env serves real envs whole: torch, numpy, a C extension and a console script from a venv; a conda prefix's RPATH and prefix file" {
	"$ENVS_PY" -c 'import torch, numpy' 2>/dev/null || skip "$ENVS_PY has no torch and numpy"
	make_venv "$T/v" --torch
	make_conda_prefix "$T/c"
	stager pack -q v >/dev/null
	stager pack -q c >/dev/null
	site=$(envs_site "$T/v")
	# every module from the mount (another device than the shared
	# filesystem's), nothing of Debian's dist-packages
	cat >probe.py <<-PY
		import os, sys, torch, numpy, envprobe_ext
		shared = os.stat("$T").st_dev
		for f in (torch.__file__, numpy.__file__, envprobe_ext.__file__, torch._C.__file__):
		    assert os.stat(f).st_dev != shared, f
		    assert f.startswith("$site/"), f
		assert not [m for m in sys.modules.values() if "dist-packages" in (getattr(m, "__file__", "") or "")]
		print("torch", int(torch.ones(4).sum()), "numpy", int(numpy.arange(4).sum()))
	PY
	run -0 stager run --env "$T/v" --env "$T/c" -- sh -c "'$T/v/bin/python' probe.py && '$T/v/bin/envprobe' && '$T/c/bin/envprobe' && stat -c 'conda lib %d' '$T/c/lib/libenvprobe.so' '$T'"
	# the prefix's library from its mount too
	[ "$(echo "$output" | grep '^conda lib' | sort -u | wc -l)" -eq 2 ]
	echo "$output" | grep -qx "torch 4 numpy 6"
	echo "$output" | grep -q "^prefix=$T/v ext=$site/envprobe_ext"
	echo "$output" | grep -qx "libenvprobe=$T/c/lib/libenvprobe.so prefix.conf=prefix=$T/c"
	! served "$T/v" || false
	! served "$T/c" || false
	[ "$(records)" -eq 0 ]
}

@test "env --foreground: served by this process until SIGTERM, then unmounted, nothing left" {
	small_venv "$T/py"
	stager pack -q py >/dev/null
	"$STAGER" env --foreground "$T/py" 2>fg.err 3>&- &
	pid=$!
	PIDS="$PIDS $pid"
	wait_until 30 served "$T/py"
	"$T/py/bin/hello" | grep -q "^hi from"
	[ "$(records)" -eq 1 ]
	kill -TERM "$pid"
	wait_pid "$pid"
	! served "$T/py" || false
	[ "$(records)" -eq 0 ]
	grep -q "'$T/py' served from this node" fg.err
	run -1 stager env --foreground "$T/py" "$T/py"
	echo "$output" | grep -q "serves one env"
	run -1 stager env --foreground --all-nodes "$T/py"
	echo "$output" | grep -q "not with --foreground"
	# --all-nodes outside a job of several nodes: this node's, as env's
	run -0 stager env --all-nodes "$T/py"
	served "$T/py"
	stager umount "$T/py"
	wait_until 10 no_records
}
