#!/bin/bash
# A throw-away one-node Slurm cluster on this machine, for the tests.
#
#   scripts/slurm-test-cluster.sh start DIR [EPILOG]   (prints the SLURM_CONF path)
#   scripts/slurm-test-cluster.sh stop DIR
#
# With NODES=N (N > 1) it starts N slurmd daemons, n1 ... nN, each in its
# own mount and UTS namespace (hostname nX) with DIR/nodes/nX bind-mounted
# at SCRATCH (default DIR/scratch): every node has a private node-local
# disk at the same path, and everything else is shared, like a cluster's
# shared filesystem.  PROLOG and TASK_PROLOG name scripts for slurm.conf;
# PORT the controller's port, the nodes' follow it (default: a free block
# of ports chosen at random, so that clusters of concurrent test runs on
# one machine never meet).
#
# PROCTRACK=cgroup tracks jobs with proctrack/cgroup (cgroup v1's freezer,
# in a cgroup of this cluster's own: DIR/cgroup names it) instead of
# proctrack/pgid, so that a job's processes that left its process group
# (setsid) end with it.  JOB_CONTAINER=tmpfs JOB_CONTAINER_BASE=BASE gives
# every job a private /tmp and /dev/shm (job_container/tmpfs, BasePath
# BASE); jobs then see nothing under /tmp, so DIR, BASE and everything the
# jobs use must be elsewhere (/var/tmp), and BASE empty.  Where one
# cannot work on this machine, start exits 3 before it starts anything,
# with one line on stderr "slurm-test-cluster: cannot ...", for a test to
# skip with (2 for a wrong use).  stop kills what is left in the cluster's
# cgroup, removes it and unmounts and empties what it mounted in BASE.
#
# Everything lives under DIR: munge's key, socket and state, slurm.conf,
# the controller's state and the daemons' logs.  Needs root and Debian's
# slurm-wlm and munge (scripts/install-deps.sh installs them).  Facts this
# relies on are in shared/SLURM-TESTING.md.
set -euo pipefail
cmd=${1:?start or stop}
dir=${2:?a directory}

# the daemons whose pid files match GLOB (default all: munged's too)
stop() {
	local glob=${1:-*}
	for p in "$dir"/$glob.pid; do
		[ -f "$p" ] || continue
		pid=$(cat "$p" 2>/dev/null || true)
		[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	done
	sleep 0.5
	for p in "$dir"/$glob.pid; do
		[ -f "$p" ] || continue
		pid=$(cat "$p" 2>/dev/null || true)
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
		rm -f "$p"
	done
}

if [ "$cmd" = stop ]; then
	stop
	if [ -f "$dir/cgroup" ]; then
		cg=$(cat "$dir/cgroup")
		# thawed (a frozen task cannot die), then killed until empty
		find "$cg" -name freezer.state -exec sh -c 'for f; do echo THAWED >"$f"; done' _ {} + 2>/dev/null || true
		for _ in $(seq 1 50); do
			pids=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
			[ -z "$pids" ] && break
			echo "$pids" | xargs -r kill -9 2>/dev/null || true
			sleep 0.1
		done
		umount "$dir/cgroupfs/freezer" 2>/dev/null || umount -l "$dir/cgroupfs/freezer" 2>/dev/null || true
		find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
		[ -d "$cg" ] || rm -f "$dir/cgroup"
	fi
	if [ -f "$dir/jcbase" ]; then
		# jobs' namespaces and BasePath's bind mounts, the deepest first
		awk -v b="$(cat "$dir/jcbase")/" 'index($5 "/", b) == 1 { print $5 }' /proc/self/mountinfo |
			sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
		# and what the plugin made there, a directory per node
		find "$(cat "$dir/jcbase")" -xdev -mindepth 1 -delete 2>/dev/null || true
		rm -f "$dir/jcbase"
	fi
	if [ -f "$dir/selfbind" ]; then
		umount "$(cat "$dir/selfbind")" 2>/dev/null || umount -l "$(cat "$dir/selfbind")" 2>/dev/null || true
		rm -f "$dir/selfbind"
	fi
	exit 0
fi

epilog=${3:-}
nodes=${NODES:-1}
proctrack=${PROCTRACK:-pgid}
base=${JOB_CONTAINER_BASE:-}
usage() {
	echo "slurm-test-cluster: $*" >&2
	exit 2
}
cannot() {
	echo "slurm-test-cluster: cannot $*" >&2
	exit 3
}
plugin() { [ -n "$(ls /usr/lib/*/slurm-wlm/"$1".so /usr/lib*/slurm/"$1".so 2>/dev/null)" ]; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case "$proctrack" in pgid | cgroup) ;; *) usage "PROCTRACK is pgid or cgroup, not $proctrack" ;; esac
if [ -n "${JOB_CONTAINER:-}" ]; then
	[ "$JOB_CONTAINER" = tmpfs ] || usage "JOB_CONTAINER is tmpfs, not $JOB_CONTAINER"
	case "$base" in
	/tmp | /tmp/* | /dev/shm | /dev/shm/*) usage "Slurm refuses a BasePath in /tmp or /dev/shm: JOB_CONTAINER_BASE=$base" ;;
	/*) ;;
	*) usage "JOB_CONTAINER=tmpfs needs JOB_CONTAINER_BASE, an absolute path" ;;
	esac
	case "$dir/" in /tmp/*) usage "with JOB_CONTAINER=tmpfs jobs see a /tmp of their own: the cluster cannot be in $dir" ;; esac
	# a BasePath with jobs of an earlier cluster (the same job ids) fails
	# them ("Unable to restore job_container state")
	[ -z "$(ls -A "$base" 2>/dev/null)" ] || usage "JOB_CONTAINER_BASE=$base is not empty"
	plugin job_container_tmpfs || cannot "use job_container/tmpfs: Slurm has no job_container_tmpfs.so here"
	unshare --mount true 2>/dev/null || cannot "use job_container/tmpfs: no mount namespaces here (unshare --mount fails)"
fi
if [ "$proctrack" = cgroup ]; then
	# v1 only: Slurm 22.05's cgroup/v2 refuses a machine with any v1
	# hierarchy ("fatal: Hybrid mode is not supported") and wants systemd
	plugin proctrack_cgroup || cannot "use proctrack/cgroup: Slurm has no proctrack_cgroup.so here"
	freezer=$(awk '$9 == "cgroup" && $NF ~ /(^|,)freezer(,|$)/ { print $5; exit }' /proc/self/mountinfo)
	[ -n "$freezer" ] || cannot "use proctrack/cgroup: no cgroup v1 freezer hierarchy is mounted (Slurm 22.05's cgroup/v2 needs a pure v2 machine with systemd)"
	# a cgroup of the cluster's own, bind-mounted where cgroup.conf's
	# mount point has the freezer: the slurm_<node>/uid_*/job_* of
	# concurrent clusters (nodes of the same names) never meet, and stop
	# knows what is this cluster's
	cg=$(mktemp -d "$freezer/stagertest.XXXXXX" 2>/dev/null) ||
		cannot "use proctrack/cgroup: cannot make a cgroup in $freezer"
	mkdir -p "$dir/cgroupfs/freezer"
	mount --bind "$cg" "$dir/cgroupfs/freezer" || { rmdir "$cg"; cannot "use proctrack/cgroup: cannot bind-mount $cg"; }
	echo "$cg" >"$dir/cgroup"
fi
install -d -m 0700 "$dir/munge" "$dir/state" "$dir/spool"
host=$(hostname -s)

# munge: private root-owned directories, every path pointed at them
[ -f "$dir/munge/key" ] || mungekey -c -k "$dir/munge/key" >/dev/null 2>&1 ||
	dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 status=none
chmod 0400 "$dir/munge/key"
munged --key-file="$dir/munge/key" --socket="$dir/munge/sock" \
	--pid-file="$dir/munged.pid" --seed-file="$dir/munge/seed" \
	--log-file="$dir/munge/log" --force
for _ in $(seq 1 50); do [ -S "$dir/munge/sock" ] && break; sleep 0.1; done

# a free block of ports: the controller's, then one per node
pick_port() {
	local used p clash low
	if [ -n "${PORT:-}" ]; then
		port=$PORT
		return
	fi
	# below the kernel's ephemeral ports (32768 up by default), which
	# the tests' own connections take at random; none in use
	low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$low" -gt 21000 ] || low=60999
	used=$(ss -Hatn 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' || true)
	for _ in $(seq 1 50); do
		port=$((20000 + RANDOM % (low - 20000 - nodes - 2)))
		clash=
		for p in $(seq "$port" $((port + nodes + 1))); do
			echo "$used" | grep -qx "$p" && clash=1
		done
		[ -z "$clash" ] && break
	done
}

# the daemon whose pid file FILE names runs (not a zombie: PID 1 may
# reap late)
alive() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -r "/proc/$pid/stat" ] &&
		[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

start_daemons() {
	# job_container/tmpfs wants Contain (slurmctld: "fatal: PrologFlags=Contain
	# is required for use with job_container/tmpfs"), which implies Alloc
	pflags=${PROLOG:+Alloc}
	[ -z "${JOB_CONTAINER:-}" ] || pflags=Alloc,Contain
	cat >"$dir/slurm.conf" <<-CONF
	ClusterName=stagertest
	SlurmctldHost=$host(127.0.0.1)
	SlurmUser=root
	SlurmdUser=root
	AuthType=auth/munge
	CredType=cred/munge
	AuthInfo=socket=$dir/munge/sock
	StateSaveLocation=$dir/state
	SlurmdSpoolDir=$dir/spool/slurmd-%n
	SlurmctldPidFile=$dir/slurmctld.pid
	SlurmdPidFile=$dir/slurmd-%n.pid
	SlurmctldLogFile=$dir/slurmctld.log
	SlurmdLogFile=$dir/slurmd-%n.log
	SlurmctldPort=$port
	SlurmdPort=$((port + 1))
	ProctrackType=proctrack/$proctrack
	TaskPlugin=task/none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core_Memory
	DefMemPerCPU=256
	SlurmdParameters=config_overrides
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/none
	MpiDefault=none
	SchedulerType=sched/backfill
	KillWait=5
	OverTimeLimit=0
	MinJobAge=600
	ReturnToService=2
	${epilog:+Epilog=$epilog}
	${PROLOG:+Prolog=$PROLOG}
	${pflags:+PrologFlags=$pflags}
	${TASK_PROLOG:+TaskProlog=$TASK_PROLOG}
	CONF
	[ -z "${JOB_CONTAINER:-}" ] || echo "JobContainerType=job_container/tmpfs" >>"$dir/slurm.conf"
	if [ "$nodes" -eq 1 ]; then
		echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=4 RealMemory=4000 State=UNKNOWN" >>"$dir/slurm.conf"
	else
		for i in $(seq 1 "$nodes"); do
			echo "NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.1 Port=$((port + 1 + i))" \
				"CPUs=2 RealMemory=2000 State=UNKNOWN" >>"$dir/slurm.conf"
		done
	fi
	echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"
	[ "$proctrack" = pgid ] ||
		printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\n' "$dir/cgroupfs" >"$dir/cgroup.conf"
	if [ -n "${JOB_CONTAINER:-}" ]; then
		# BasePath gets a directory per node (BASE/<node>/<job>)
		mkdir -p "$base"
		echo "$base" >"$dir/jcbase"
		printf 'AutoBasePath=true\nBasePath=%s\n' "$base" >"$dir/job_container.conf"
	fi
	export SLURM_CONF="$dir/slurm.conf"
	slurmctld -f "$SLURM_CONF"
	if [ "$nodes" -eq 1 ]; then
		slurmd -f "$SLURM_CONF"
	else
		scratch=${SCRATCH:-$dir/scratch}
		mkdir -p "$scratch"
		# Each node's bind mount must stay in its namespace.  Where / is not a
		# mount point (a chroot), unshare cannot make it private: make SCRATCH
		# a private mount of its own instead, which the namespaces copy.
		prop=private
		if ! unshare --mount --propagation private true 2>/dev/null; then
			mount --bind "$scratch" "$scratch" && mount --make-private "$scratch"
			echo "$scratch" >"$dir/selfbind"
			prop=unchanged
		fi
		# With job_container/tmpfs each node's slurmd, and so its jobs, stays
		# on the CPU its namespace was made on: Linux 6.18 numbers namespaces
		# from per-CPU batches (CPU 0: 220, 221, ...; CPU 1: 4320, ...), and a
		# job's namespace numbered below its node's cannot be bind-mounted
		# there ("_create_ns: ns base mount failed: Invalid argument")
		mapfile -t cpus < <(awk '/^Cpus_allowed_list/ { n = split($2, r, ",")
			for (i = 1; i <= n; i++) { k = split(r[i], a, "-"); for (c = a[1]; c <= a[k]; c++) print c } }' /proc/self/status)
		for i in $(seq 1 "$nodes"); do
			mkdir -p "$dir/nodes/n$i"
			pin=
			[ -z "${JOB_CONTAINER:-}" ] || pin="taskset -c ${cpus[(i - 1) % ${#cpus[@]}]}"
			$pin unshare --mount --uts --propagation $prop sh -c \
				"hostname n$i && mount --bind '$dir/nodes/n$i' '$scratch' && exec slurmd -f '$SLURM_CONF' -N n$i"
		done
	fi
}

# Every node idle, within START_TIME seconds (default 120: under a
# loaded machine slurmd can take long to register).  Each sinfo is bounded:
# with no controller, sinfo retries for MessageTimeout (10 s) before it
# gives up.  A controller that died at start (a port another program took
# between the choice and the bind) is retried on other ports, twice.
up() {
	local deadline=$((SECONDS + ${START_TIME:-120})) st p
	while [ $SECONDS -lt $deadline ]; do
		st=$(timeout 10 sinfo -h -N -o %t 2>/dev/null) || st=
		if [ "$(echo "$st" | grep -cx idle)" -eq "$nodes" ]; then
			return 0
		fi
		# a daemon that died ends the wait (a pid file comes a moment
		# after the daemon's start returns)
		for p in "$dir"/slurm*.pid; do
			[ ! -f "$p" ] || alive "$p" || return 1
		done
		sleep 0.2
	done
	return 1
}

for _ in 1 2 3; do
	pick_port
	start_daemons
	if up; then
		echo "$SLURM_CONF"
		exit 0
	fi
	[ -z "${PORT:-}" ] && grep -q "Address already in use" "$dir"/slurm*.log 2>/dev/null || break
	echo "slurm-test-cluster: port $port was taken; another try" >&2
	stop 'slurm*'
	[ ! -f "$dir/selfbind" ] || umount "$(cat "$dir/selfbind")" 2>/dev/null || true
	rm -f "$dir/selfbind" "$dir"/slurm*.log
	rm -rf "$dir/state" "$dir/spool"
	install -d -m 0700 "$dir/state" "$dir/spool"
done
echo "slurm-test-cluster: the node did not come up; logs in $dir" >&2
for f in "$dir"/slurm*.log; do
	[ -f "$f" ] || continue
	echo "== $f" >&2
	tail -n 20 "$f" >&2
done
exit 1
