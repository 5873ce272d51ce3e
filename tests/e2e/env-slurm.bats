#!/usr/bin/env bats
# stager run --env and stager env on a real multi-node Slurm (issue 38), as
# a site runs it (tests/e2e/site.bash): two slurmd daemons n1 and n2 on
# this machine, stager installed with `make install`, the installed
# prolog, task prolog and epilog named in slurm.conf with nothing around
# them, and every job an ordinary user's, whose scripts call `stager` by
# name.  The env is a real venv (tests/e2e/envs.bash: Debian's python3,
# numpy copied in as pip lays it out, a C extension, a console script)
# in the user's directory on the "shared filesystem", $D/shared.
#
# What one machine can show.  scripts/slurm-test-cluster.sh starts each
# slurmd in a mount namespace of its own (private propagation), with its
# own node-local disk at SCRATCH; a job's processes are in their node's
# namespace.  So an env's FUSE mount made by a task on n1 is n1's alone:
# n2 and the test itself (the "login node", in the host's namespace) see
# the shared filesystem at the same path, as on a real cluster, and each
# node has its own cache, records and pins (its SCRATCH).  The test reads
# a node's mounts in the mountinfo of its processes (those in its UTS
# namespace: its slurmd's, and under job_container/tmpfs its jobs'), and
# its scratch root at $D/cluster/nodes/<node>/<user>.  The two tasks of a 2-node step
# therefore each mount the env on their own node (two FUSE connections,
# two devices): the sharing of one mount (mount_share.c) is shown by the
# jobs and steps that meet on one node (a batch script's `stager env`
# and an srun step's on the same node; two jobs on n1).  What one
# machine cannot show: separate kernels and page caches (every "node"
# reads its cache from this machine's disk), a network filesystem's own
# caching of the env (the shared filesystem here is a local directory),
# and a node whose FUSE or namespaces differ from another's.

load helpers
load site
load envs
bats_require_minimum_version 1.5.0

# env-slurm-cgroup.bats is this file under proctrack/cgroup (every process
# of a job, those that left its process group too, ends with it), with
# users of its own (the files run side by side, and site_stop ends its
# users' processes)
# env-slurm-container.bats under job_container/tmpfs: every job has a
# mount namespace of its own, so an env's mount is the job's (two jobs on
# a node do not share one; another user's job does not see it); the
# counts of mounts below are then of all the node's jobs' namespaces.
case $BATS_TEST_FILENAME in
*-cgroup.bats) export PROCTRACK=cgroup U=stgenvc1 U2=stgenvc2 ;;
*-container.bats) export JOB_CONTAINER=tmpfs U=stgenvt1 U2=stgenvt2 ;;
*) U=stgenv1 U2=stgenv2 ;;
esac
# 1 where each job has a mount namespace of its own
PERJOB=0
[ -z "${JOB_CONTAINER:-}" ] || PERJOB=1
SITE_USERS="$U $U2"

setup_file() {
	[ "$(id -u)" -eq 0 ] || skip "needs root"
	[ -e /dev/fuse ] || skip "needs /dev/fuse"
	# the users' servers unmount with fusermount3, which a chroot defeats
	# (the reason goes to setup(): bats 1.8 fails a teardown_file after a
	# skip in setup_file)
	if command -v ischroot >/dev/null && ischroot; then
		export SITE_SKIP="in a chroot: fusermount3 cannot end a user's mount here (mountinfo shows the host's paths)"
		return 0
	fi
	for c in slurmctld unshare fusermount3 useradd; do
		command -v "$c" >/dev/null || skip "needs $c"
	done
	# the users mount with FUSE
	fuse_for_users
	if [ -n "${JOB_CONTAINER:-}" ]; then
		# jobs see a /tmp of their own: everything they use is elsewhere
		D=$(mktemp -d /var/tmp/stager-envslurm.XXXXXX)
		chmod 0755 "$D"
		export JOB_CONTAINER_BASE="$D/jc"
	else
		D=$(reachable_mktemp stager-envslurm)
	fi
	export D
	export SCRATCH="$D/scratch"
	for n in n1 n2; do
		install -d -m 1777 "$D/cluster/nodes/$n"
		install -d -m 0755 "$D/cluster/nodes/$n/jobs"
		install -d -m 1777 "$D/cluster/nodes/$n/slots"
	done
	# (a reason to skip goes to setup(): bats 1.8 fails a teardown_file
	# after a skip in setup_file)
	NODES=2 site_start "$D" 2>"$D/start.err" || {
		cat "$D/start.err" >&2
		if grep -q '^slurm-test-cluster: cannot' "$D/start.err"; then
			SITE_SKIP=$(grep -m1 '^slurm-test-cluster: cannot' "$D/start.err")
			export SITE_SKIP
			return 0
		fi
		return 1
	}
	grep -qx "Epilog=$D/prefix/libexec/stager/epilog" "$SLURM_CONF"
	sed -i "s|^STAGER_JOB_TMP_BASE=.*|STAGER_JOB_TMP_BASE=$SCRATCH/jobs|" "$D/prefix/etc/default/stager"
	echo "slot_dir = $SCRATCH/slots" >>"$D/stager.conf"
	# job logs and markers, outside the envs; scripts, read by the jobs
	install -d -m 1777 "$D/out"
	install -d -m 0755 "$D/scripts"
	# the probe a task runs with the env's python: where it imports from
	# and what serves the env in the task's own mount namespace
	cat >"$D/probe.py" <<'PY'
import os, socket, sys
env = sys.argv[1]
import numpy, numpy.core._multiarray_umath as mu, envprobe_ext

mount = None  # the env's stager mount: its id and device
for line in open("/proc/self/mountinfo"):
    a = line.split()
    s = a.index("-")
    if a[4] == env and a[s + 1] == "fuse.stager" and a[s + 2].startswith("stager-env:"):
        mount = (a[0], a[2])


def mapped_dev(path):  # the device of a mapping of PATH, from /proc/self/maps
    for line in open("/proc/self/maps"):
        a = line.split()
        if len(a) >= 6 and a[5] == path:
            return a[3]
    return None


st = os.stat(env)
up = os.stat(os.path.dirname(env))
print("node=%s prefix=%s numpy=%s ext=%s add=%d mount=%s dev=%d:%d updev=%d:%d extdev=%s mudev=%s" % (
    socket.gethostname(), sys.prefix, numpy.__file__, envprobe_ext.where(), envprobe_ext.add(2, 3),
    mount and mount[0], os.major(st.st_dev), os.minor(st.st_dev), os.major(up.st_dev),
    os.minor(up.st_dev), mapped_dev(envprobe_ext.where()), mapped_dev(mu.__file__)), flush=True)
# with BARRIER N: here until N tasks have printed (their mounts live at once)
if len(sys.argv) > 3:
    import glob, time
    open("%s.%s" % (sys.argv[2], socket.gethostname()), "w").close()
    for _ in range(600):
        if len(glob.glob(sys.argv[2] + ".*")) >= int(sys.argv[3]):
            break
        time.sleep(0.05)
PY
	chmod 0644 "$D/probe.py"
	# the user's env, packed by the user on the login node
	ENV="$D/shared/$U/py"
	user_env "$U" "$ENV"
}

teardown_file() {
	[ -n "${D:-}" ] || return 0
	site_stop "$D"
}

setup() {
	[ -z "${SITE_SKIP:-}" ] || skip "$SITE_SKIP"
	ENV="$D/shared/$U/py"
	cd "$D"
}
# a failed test's jobs do not hold the nodes for the next
teardown() {
	local u
	[ -z "${SITE_SKIP:-}" ] || return 0
	for u in $SITE_USERS; do scancel -u "$u" 2>/dev/null || true; done
	wait_until 60 sh -c '[ -z "$(squeue -h 2>/dev/null)" ]'
}

# USER DIR: a venv of USER's at DIR (make_venv) with a package whose
# import writes its pid to $SLOW_MARK and then sleeps (a slow import),
# packed by USER (DIR.tar.zst)
user_env() {
	local u=$1 dir=$2 sp
	make_venv "$dir" || return 1
	sp=$(envs_site "$dir")
	mkdir "$sp/slowimp"
	cat >"$sp/slowimp/__init__.py" <<'PY'
import os, time
import numpy
with open(os.environ["SLOW_MARK"], "w") as f:
    f.write("%d\n" % os.getpid())
time.sleep(300)
PY
	_envs_dist_info "$sp" slowimp 1.0 slowimp || return 1
	"$ENVS_PY" -m compileall -q "$sp/slowimp" >/dev/null || return 1
	chown -R -h "$u:" "$dir" || return 1
	as_job_user "$u" stager pack -q "$dir" >/dev/null
}

# The pid of node N's slurmd (in N's mount namespace).
node_pid() { cat "$D/cluster/slurmd-$1.pid"; }

# The processes of node N, "PID MNTNS" a line: those in its UTS namespace
# (its hostname), its slurmd's first; under job_container/tmpfs its jobs'
# are in mount namespaces of their own
node_procs() {
	local pid
	pid=$(node_pid "$1")
	ps -e -o pid=,utsns=,mntns= | awk -v p="$pid" '
		{ uts[$1] = $2; mnt[$1] = $3 }
		END { print p, mnt[p]; for (q in uts) if (q != p && uts[q] == uts[p]) print q, mnt[q] }'
}

# The mountinfo lines under $D of node N's mount namespaces, each once
# ("NS LINE"), read from every process of the node that still lives (one
# may end while it is read)
node_mountinfo() {
	local p ns
	node_procs "$1" | while read -r p ns; do
		awk -v d="$D/" -v ns="$ns" 'index($5, d) == 1 { print ns, $0 }' "/proc/$p/mountinfo" 2>/dev/null
	done | sort -u -k1,2
}

# How many stager env mounts node N has, in all its namespaces (of this
# test's: a node's namespace is a copy of the machine's when the cluster
# started, with any mount of another test's there then)
env_mounts() { node_mountinfo "$1" | grep -c ' - fuse\.stager stager-env:' || true; }

# How many records of serving processes USER's scratch root on node N holds.
records() { find "$D/cluster/nodes/$1/$2/mounts" -name 'pid-*' ! -name '*.*' 2>/dev/null | wc -l; }

# How many pins USER's cache on node N holds.
pins() { find "$D/cluster/nodes/$1/$2/pins" -type f 2>/dev/null | wc -l; }

# Node N has nothing of USER's env left: no mount, no record, no pin, no
# serving process of USER's.
node_clean() {
	[ "$(env_mounts "$1")" -eq 0 ] || return 1
	[ "$(records "$1" "$2")" -eq 0 ] || return 1
	[ "$(pins "$1" "$2")" -eq 0 ] || return 1
	[ -z "$(node_servers "$1" "$2")" ]
}

# USER's stager processes on node N (in its UTS namespace).
node_servers() {
	local uts p
	uts=$(readlink "/proc/$(node_pid "$1")/ns/uts")
	for p in $(pgrep -u "$2" -x stager); do
		if [ "$(readlink "/proc/$p/ns/uts" 2>/dev/null)" = "$uts" ]; then echo "$p"; fi
	done
}

# What is left on node N for USER, for a failing test's log.
node_state() {
	echo "== $1: mounts $(env_mounts "$1"), records $(records "$1" "$2"), pins $(pins "$1" "$2")"
	node_mountinfo "$1"
	find "$D/cluster/nodes/$1/$2/mounts" "$D/cluster/nodes/$1/$2/pins" 2>/dev/null || true
	node_servers "$1" "$2" | xargs -r ps -o pid=,args= -p
}

# USER NAME SBATCH-ARGS...: submit the job script on stdin (bash) as USER,
# its log in out/NAME.log; prints the job id.
submit_job() {
	local u=$1 name=$2
	shift 2
	{
		echo '#!/bin/bash'
		cat
	} >"$D/scripts/$name.sh"
	chmod 0755 "$D/scripts/$name.sh"
	site_submit "$u" --mem=300 -o "$D/out/$name.log" "$@" "$D/scripts/$name.sh"
}

# ID NAME: wait until job ID and its epilog are over; its log on stderr.
finish_job() {
	wait_until 120 job_gone "$1" || return 1
	cat "$D/out/$2.log" >&2
}

# The line of task NODE in out/NAME.log, the probe's output.
probe_line() { grep "^node=$1 " "$D/out/$2.log"; }

# Wait (bounded) in a job script until the test creates out/NAME.go.
hold_until() { echo "for i in \$(seq 1200); do [ -e '$D/out/$1.go' ] && break; sleep 0.1; done"; }

# The lines of task NODE in out/NAME.log, for the task script $D/scripts/task.sh.
task_lines() { grep "^$1 " "$D/out/$2.log"; }

# Field KEY of a probe line.
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# LINE ENV: a probe line that imported everything from ENV served by a
# stager env mount in the task's namespace: numpy and the C extension
# from ENV's paths, mapped from the mount's device, which is not the
# shared filesystem's
probe_served() {
	local line=$1 env=$2 dev
	echo "probe: $line" >&2
	[ "$(field prefix "$line")" = "$env" ] || return 1
	[ "$(field numpy "$line")" = "$(envs_site "$env")/numpy/__init__.py" ] || return 1
	case $(field ext "$line") in "$(envs_site "$env")/envprobe_ext."*.so) ;; *) return 1 ;; esac
	[ "$(field add "$line")" = 5 ] || return 1
	[ "$(field mount "$line")" != None ] || return 1
	dev=$(field dev "$line")
	[ "$dev" != "$(field updev "$line")" ] || return 1
	# /proc/self/maps writes the device in hex, major:minor, two digits
	[ "$(field extdev "$line")" = "$(printf '%02x:%02x' "${dev%:*}" "${dev#*:}")" ] || return 1
	[ "$(field mudev "$line")" = "$(printf '%02x:%02x' "${dev%:*}" "${dev#*:}")" ]
}

@test "srun on 2 nodes: each task imports numpy and a C extension from the env served on its own node; nothing left after" {
	login_stager "$U" ls --json "$ENV.tar.zst" >"$D/ls.json"
	digest=$(jq -r .digest "$D/ls.json")
	[ -n "$digest" ]
	id=$(submit_job "$U" t1 -N2 <<JOB
srun -N2 --ntasks-per-node=1 stager run --env "$ENV" -- "$ENV/bin/python" "$D/probe.py" "$ENV" "$D/out/t1.barrier" 2
echo "rc=\$?"
JOB
	)
	[ -n "$id" ]
	finish_job "$id" t1
	grep -qx "rc=0" out/t1.log
	l1=$(probe_line n1 t1)
	l2=$(probe_line n2 t1)
	probe_served "$l1" "$ENV"
	probe_served "$l2" "$ENV"
	# each node its own mount: two FUSE connections, two devices (the two
	# tasks waited for each other: both mounts lived at once)
	[ "$(field dev "$l1")" != "$(field dev "$l2")" ]
	[ "$(grep -c "'$ENV' served from this node" out/t1.log)" -eq 2 ]
	# each node read the pack into its own cache
	for n in n1 n2; do [ -d "$D/cluster/nodes/$n/$U/cache/$digest" ]; done
	# after the job and its epilog: nothing mounted, recorded or pinned on
	# either node, and the login node never saw a mount
	for n in n1 n2; do wait_until 20 node_clean "$n" "$U" || { node_state "$n" "$U"; false; }; done
	[ "$(awk -v d="$D/" 'index($5, d) == 1 && / - fuse\.stager stager-env:/' /proc/self/mountinfo)" = "" ]
}

@test "a batch script's stager env: its steps import from it (a step's stager run --env joins it), listed by status; the job ends, the mount goes with it" {
	id=$(submit_job "$U" t2 -N1 <<JOB
stager env "$ENV" || exit 1
for step in 1 2 3; do
	srun "$ENV/bin/python" "$D/probe.py" "$ENV" >"$D/out/t2-step\$step.log"
done
srun stager run --env "$ENV" -- "$ENV/bin/python" "$D/probe.py" "$ENV" >"$D/out/t2-run.log"
"$ENV/bin/envprobe"
stager status >"$D/out/t2.status"
touch "$D/out/t2.up"
$(hold_until t2)
JOB
	)
	[ -n "$id" ]
	wait_until 120 test -e out/t2.up
	cat out/t2.log
	n=$(squeue -h -j "$id" -o %N)
	for step in step1 step2 step3 run; do
		line=$(probe_line "$n" "t2-$step")
		probe_served "$line" "$ENV"
	done
	# one mount: the step's run used the batch shell's
	[ "$(field mount "$(probe_line "$n" t2-run)")" = "$(field mount "$(probe_line "$n" t2-step1)")" ]
	# the console script, by its shebang naming the env's python
	grep -q "^prefix=$ENV ext=$(envs_site "$ENV")/envprobe_ext\..*\.so add=5$" out/t2.log
	[ "$(env_mounts "$n")" -eq 1 ] || { node_state "$n" "$U"; false; }
	[ "$(records "$n" "$U")" -eq 1 ] || { node_state "$n" "$U"; false; }
	[ "$(pins "$n" "$U")" -eq 1 ] || { node_state "$n" "$U"; false; }
	# stager status in the job lists the env, served, and its job
	cat out/t2.status
	grep -q "^  $ENV  env from $ENV.tar.zst (served)" out/t2.status
	grep -q "^    job $id (running)" out/t2.status
	touch out/t2.go
	finish_job "$id" t2
	wait_until 20 node_clean "$n" "$U" || { node_state "$n" "$U"; false; }
}

@test "stager env --all-nodes in a batch script: the pack read once for the job (sbcast to the other node), served on every node for its later steps; the job ends, the mounts go with it" {
	# a version of the env no node's cache holds yet
	touch "$ENV/bin"
	as_job_user "$U" stager pack -q "$ENV" >/dev/null
	id=$(submit_job "$U" t7 -N2 <<JOB
stager env --all-nodes "$ENV" || exit 1
for step in 1 2; do
	srun -N2 --ntasks-per-node=1 "$ENV/bin/python" "$D/probe.py" "$ENV" >"$D/out/t7-step\$step.log"
done
touch "$D/out/t7.up"
$(hold_until t7)
JOB
	)
	[ -n "$id" ]
	wait_until 120 test -e out/t7.up
	cat out/t7.log
	# the lead (n1) read the shared filesystem, n2 got its copy by sbcast
	grep -E "'$ENV.tar.zst' in the caches of 2 nodes in [0-9.]+ s: n2 sbcast, n1 read" out/t7.log
	for step in 1 2; do
		for n in n1 n2; do
			line=$(probe_line $n "t7-step$step")
			probe_served "$line" "$ENV"
		done
	done
	for n in n1 n2; do
		[ "$(env_mounts $n)" -eq 1 ] || { node_state $n "$U"; false; }
		[ "$(records $n "$U")" -eq 1 ] || { node_state $n "$U"; false; }
	done
	touch out/t7.go
	finish_job "$id" t7
	for n in n1 n2; do wait_until 20 node_clean "$n" "$U" || { node_state "$n" "$U"; false; }; done
}

# `srun stager env ENV` serves from the step's task, which ends as soon as
# the mount is made; under proctrack/cgroup Slurm then kills every
# process of the step, the server too (setsid does not take it out of the
# step's cgroup), and the env's mount on each node is dead (ENOTCONN) for
# the job's later steps, which fail to exec the env's python: a
# half-served env.  So it is refused (exit 1) with the ways that work
# (--all-nodes; srun stager run --env), and the later steps use the env
# as the shared filesystem has it; never a dead mount.
@test "srun stager env: refused with the ways that work, the later steps use the shared env; never a dead mount" {
	id=$(submit_job "$U" t8 -N2 <<JOB
srun -N2 --ntasks-per-node=1 stager env "$ENV"
echo "env rc=\$?"
srun -N2 --ntasks-per-node=1 "$ENV/bin/python" "$D/probe.py" "$ENV" >"$D/out/t8-step.log"
echo "step rc=\$?"
JOB
	)
	[ -n "$id" ]
	finish_job "$id" t8
	grep -qx "step rc=0" out/t8.log
	grep -qx "env rc=1" out/t8.log
	grep -q -- "stager env --all-nodes $ENV. in the batch script" out/t8.log
	for n in n1 n2; do wait_until 20 node_clean "$n" "$U" || { node_state "$n" "$U"; false; }; done
}

# The same holds for `srun stager mount PACK DIR` (issue 38's finding,
# there since mounts learned to outlive their step): under
# proctrack/cgroup the step's end takes the server and leaves a dead
# mount, so there it is refused with the ways that work; under
# proctrack/pgid the server leaves the step's process group, serves the
# job's later steps and ends with the job.  Never a dead mount.
@test "srun stager mount: refused where the step's end would take the server (proctrack/cgroup) with the ways that work, else served to the job's later steps; never a dead mount" {
	local ds="$D/shared/$U/ds9" mp="$D/shared/$U/m9"
	install -d -o "$U" -m 0755 "$ds" "$mp"
	for i in 1 2 3; do echo "f$i" >"$ds/f$i"; done
	chown -R "$U:" "$ds"
	as_job_user "$U" stager pack -q "$ds" >/dev/null
	id=$(submit_job "$U" t9 -N2 <<JOB
srun -N1 -w n2 stager mount "$ds.tar.zst" "$mp"
echo "mount rc=\$?"
srun -N1 -w n2 cat "$mp/f3"
echo "step rc=\$?"
JOB
	)
	[ -n "$id" ]
	finish_job "$id" t9
	if [ "${PROCTRACK:-}" = cgroup ]; then
		grep -qx "mount rc=1" out/t9.log
		grep -q "served only until this step of srun ends" out/t9.log
		grep -q -- "srun stager run --mount PACK:$mp -- CMD" out/t9.log
		# the later step finds the mountpoint as it is (empty), not a
		# dead mount (ENOTCONN)
		grep -q "cat: $mp/f3: No such file or directory" out/t9.log
	else
		grep -qx "mount rc=0" out/t9.log
		grep -qx "f3" out/t9.log
		grep -qx "step rc=0" out/t9.log
	fi
	# after the job (its epilog's clean), nothing mounted at m9 on n2
	m9_gone() { [ -z "$(node_mountinfo n2 | grep " $mp ")" ]; }
	wait_until 60 m9_gone || { node_mountinfo n2; false; }
}

@test "jobs cancelled mid-import (srun stager run --env on n1, a batch script's stager env on n2): after the jobs and their epilogs nothing is mounted, pinned or recorded" {
	a=$(submit_job "$U" t3a -N1 -w n1 <<JOB
export SLOW_MARK="$D/out/t3a.mark"
srun stager run --env "$ENV" -- "$ENV/bin/python" -c 'import slowimp'
JOB
	)
	b=$(submit_job "$U" t3b -N1 -w n2 <<JOB
export SLOW_MARK="$D/out/t3b.mark"
stager env "$ENV" || exit 1
"$ENV/bin/python" -c 'import slowimp'
JOB
	)
	[ -n "$a" ]
	[ -n "$b" ]
	wait_until 60 test -s out/t3a.mark
	wait_until 60 test -s out/t3b.mark
	# mid-import: served on each node, numpy's libraries mapped from it
	pa=$(cat out/t3a.mark)
	pb=$(cat out/t3b.mark)
	[ "$(env_mounts n1)" -eq 1 ]
	[ "$(env_mounts n2)" -eq 1 ]
	grep -q " $(envs_site "$ENV")/numpy/core/_multiarray_umath\." "/proc/$pa/maps"
	grep -q " $(envs_site "$ENV")/numpy/core/_multiarray_umath\." "/proc/$pb/maps"
	scancel "$a" "$b"
	finish_job "$a" t3a
	finish_job "$b" t3b
	for n in n1 n2; do wait_until 20 node_clean "$n" "$U" || { node_state "$n" "$U"; false; }; done
	wait_until 10 eval "! running $pa && ! running $pb"
}

@test "a job cancelled mid-import whose server mounted the env, while a later job of the user's on the node joined it: its epilog leaves the mount to the other, which imports on" {
	a=$(submit_job "$U" t6a -N1 -w n1 <<JOB
export SLOW_MARK="$D/out/t6a.mark"
stager env "$ENV" || exit 1
"$ENV/bin/python" -c 'import slowimp'
JOB
	)
	[ -n "$a" ]
	wait_until 60 test -s out/t6a.mark
	b=$(submit_job "$U" t6b -N1 -w n1 <<JOB
stager env "$ENV" || exit 1
touch "$D/out/t6b.up"
$(hold_until t6b)
"$ENV/bin/python" "$D/probe.py" "$ENV"
"$ENV/bin/envprobe"
JOB
	)
	[ -n "$b" ]
	wait_until 60 test -e out/t6b.up
	# (one mount, or under job_container/tmpfs one in each job)
	[ "$(env_mounts n1)" -eq $((1 + PERJOB)) ]
	[ "$(records n1 "$U")" -eq 2 ]
	scancel "$a"
	finish_job "$a" t6a
	# the first server gone with its job, the mount the second's
	wait_until 20 eval '[ "$(records n1 "$U")" -eq 1 ]'
	[ "$(env_mounts n1)" -eq 1 ]
	[ "$(pins n1 "$U")" -eq 1 ]
	touch out/t6b.go
	finish_job "$b" t6b
	line=$(probe_line n1 t6b)
	probe_served "$line" "$ENV"
	grep -q "^prefix=$ENV ext=$(envs_site "$ENV")/envprobe_ext\..*\.so add=5$" out/t6b.log
	wait_until 20 node_clean n1 "$U" || { node_state n1 "$U"; false; }
}

@test "an env changed between two jobs is refused with the command that packs it, on a node that serves the old version too; packed again, the next job imports the new package" {
	E="$D/shared/$U/py4"
	user_env "$U" "$E"
	sp=$(envs_site "$E")
	# the task: the env's python imports the package installed later
	cat >"$D/scripts/t4task.sh" <<'TASK'
#!/bin/bash
stager run --env "$1" -- "$1/bin/python" -c 'import addedpkg; print("imported", addedpkg.__file__)'
rc=$?
echo "$(hostname) rc=$rc"
TASK
	chmod 0755 "$D/scripts/t4task.sh"
	# a job holds the env on n1, as packed; after the test says go, it
	# imports the package installed meanwhile: not in its version
	h=$(submit_job "$U" t4h -N1 -w n1 <<JOB
stager env "$E" || exit 1
touch "$D/out/t4h.up"
$(hold_until t4h)
"$E/bin/python" -c 'import addedpkg' 2>&1 | tail -n 1
JOB
	)
	[ -n "$h" ]
	wait_until 60 test -e out/t4h.up
	# pip installs a package into the env, on the login node
	mkdir "$sp/addedpkg"
	echo 'WHO = "added"' >"$sp/addedpkg/__init__.py"
	_envs_dist_info "$sp" addedpkg 1.0 addedpkg
	chown -R "$U:" "$sp"
	# the next job, on both nodes: refused on each (exit 2), with the
	# command; nothing imported, nothing served on n2, n1's mount the
	# holder's alone
	id=$(submit_job "$U" t4b -N2 <<JOB
srun -N2 --ntasks-per-node=1 "$D/scripts/t4task.sh" "$E"
JOB
	)
	finish_job "$id" t4b
	task_lines n1 t4b | grep -qx "n1 rc=2"
	task_lines n2 t4b | grep -qx "n2 rc=2"
	[ "$(grep -c "Pack it again: stager pack '$E'" out/t4b.log)" -eq 2 ]
	run ! grep -q imported out/t4b.log
	[ "$(env_mounts n1)" -eq 1 ]
	[ "$(records n1 "$U")" -eq 1 ]
	wait_until 20 node_clean n2 "$U" || { node_state n2 "$U"; false; }
	# packed again: served on n2; n1, which serves the old version to the
	# holder, refuses the new one (one path, one version on a node)
	as_job_user "$U" stager pack -q "$E" >/dev/null
	id=$(submit_job "$U" t4c -N2 <<JOB
srun -N2 --ntasks-per-node=1 "$D/scripts/t4task.sh" "$E"
JOB
	)
	finish_job "$id" t4c
	task_lines n2 t4c | grep -qx "n2 rc=0"
	grep -qx "imported $sp/addedpkg/__init__.py" out/t4c.log
	if [ "$PERJOB" -eq 0 ]; then
		task_lines n1 t4c | grep -qx "n1 rc=7"
		grep -q "served on this node from another version" out/t4c.log
	else
		# (each job its own mount namespace: served in this one's)
		task_lines n1 t4c | grep -qx "n1 rc=0"
	fi
	# the holder imports from its version to its end
	touch out/t4h.go
	finish_job "$h" t4h
	grep -q "ModuleNotFoundError: No module named 'addedpkg'" out/t4h.log
	wait_until 20 node_clean n1 "$U" || { node_state n1 "$U"; false; }
	# the next job: the new version on both nodes
	id=$(submit_job "$U" t4d -N2 <<JOB
srun -N2 --ntasks-per-node=1 "$D/scripts/t4task.sh" "$E"
JOB
	)
	finish_job "$id" t4d
	task_lines n1 t4d | grep -qx "n1 rc=0"
	task_lines n2 t4d | grep -qx "n2 rc=0"
	[ "$(grep -cx "imported $sp/addedpkg/__init__.py" out/t4d.log)" -eq 2 ]
	for n in n1 n2; do wait_until 20 node_clean "$n" "$U" || { node_state "$n" "$U"; false; }; done
}

@test "two users on one node, each with an env of the same name: each is served their own; the second can neither serve nor read the first's where it is served" {
	E2="$D/shared/$U2/py"
	user_env "$U2" "$E2"
	# the first user's env readable by everyone on the shared filesystem
	chmod 0755 "$D/shared/$U"
	h=$(submit_job "$U" t5h -N1 -w n1 <<JOB
stager env "$ENV" || exit 1
touch "$D/out/t5h.up"
$(hold_until t5h)
"$ENV/bin/python" "$D/probe.py" "$ENV"
JOB
	)
	[ -n "$h" ]
	wait_until 60 test -e out/t5h.up
	# the second user's job on n1 (its batch shell) and n2
	o=$(submit_job "$U2" t5o -N2 -w n1,n2 <<JOB
srun -N1 -w n1 stager run --env "$E2" -- "$E2/bin/python" "$D/probe.py" "$E2"
echo "own rc=\$?"
stager run --env "$ENV" -- true
echo "other rc=\$?"
cat "$ENV/pyvenv.cfg" >/dev/null
echo "read rc=\$?"
srun -N1 -w n2 cat "$ENV/pyvenv.cfg" >/dev/null
echo "read on n2 rc=\$?"
JOB
	)
	[ -n "$o" ]
	finish_job "$o" t5o
	grep -qx "own rc=0" out/t5o.log
	line=$(probe_line n1 t5o)
	probe_served "$line" "$E2"
	# the first user's env: refused (its pack is not the second user's)
	grep -qx "other rc=1" out/t5o.log
	grep -q "the pack '$ENV.tar.zst' belongs to uid $(id -u "$U"), not you" out/t5o.log
	# and unreadable on the node that serves it (the mount is its user's
	# alone: no allow_other), readable on n2 from the shared filesystem
	# (under job_container/tmpfs the second user's job does not see the
	# first's mount: the shared filesystem's)
	if [ "$PERJOB" -eq 0 ]; then
		grep -qx "read rc=1" out/t5o.log
		grep -q "$ENV/pyvenv.cfg: Permission denied" out/t5o.log
	else
		grep -qx "read rc=0" out/t5o.log
	fi
	grep -qx "read on n2 rc=0" out/t5o.log
	# the first user's job, undisturbed
	[ "$(records n1 "$U")" -eq 1 ]
	touch out/t5h.go
	finish_job "$h" t5h
	line=$(probe_line n1 t5h)
	probe_served "$line" "$ENV"
	for u in "$U" "$U2"; do wait_until 20 node_clean n1 "$u" || { node_state n1 "$u"; false; }; done
	chmod 0700 "$D/shared/$U"
}
