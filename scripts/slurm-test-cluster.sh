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
# Everything lives under DIR: munge's key, socket and state, slurm.conf,
# the controller's state and the daemons' logs.  Needs root and Debian's
# slurm-wlm and munge (scripts/install-deps.sh installs them).  Facts this
# relies on are in shared/SLURM-TESTING.md.
set -euo pipefail
cmd=${1:?start or stop}
dir=${2:?a directory}

stop() {
	for p in "$dir"/*.pid; do
		[ -f "$p" ] || continue
		pid=$(cat "$p" 2>/dev/null || true)
		[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	done
	sleep 0.5
	for p in "$dir"/*.pid; do
		[ -f "$p" ] || continue
		pid=$(cat "$p" 2>/dev/null || true)
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
		rm -f "$p"
	done
}

if [ "$cmd" = stop ]; then
	stop
	if [ -f "$dir/selfbind" ]; then
		umount "$(cat "$dir/selfbind")" 2>/dev/null || umount -l "$(cat "$dir/selfbind")" 2>/dev/null || true
		rm -f "$dir/selfbind"
	fi
	exit 0
fi

epilog=${3:-}
nodes=${NODES:-1}
port=${PORT:-}
if [ -z "$port" ]; then
	used=$(ss -Hltn 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' || true)
	for _ in $(seq 1 50); do
		port=$((20000 + RANDOM % 20000))
		clash=
		for p in $(seq "$port" $((port + nodes + 1))); do
			echo "$used" | grep -qx "$p" && clash=1
		done
		[ -z "$clash" ] && break
	done
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
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

cat >"$dir/slurm.conf" <<CONF
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
ProctrackType=proctrack/pgid
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
${PROLOG:+PrologFlags=Alloc}
${TASK_PROLOG:+TaskProlog=$TASK_PROLOG}
CONF
if [ "$nodes" -eq 1 ]; then
	echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=4 RealMemory=4000 State=UNKNOWN" >>"$dir/slurm.conf"
else
	for i in $(seq 1 "$nodes"); do
		echo "NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.1 Port=$((port + 1 + i))" \
			"CPUs=2 RealMemory=2000 State=UNKNOWN" >>"$dir/slurm.conf"
	done
fi
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"
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
	for i in $(seq 1 "$nodes"); do
		mkdir -p "$dir/nodes/n$i"
		unshare --mount --uts --propagation $prop sh -c \
			"hostname n$i && mount --bind '$dir/nodes/n$i' '$scratch' && exec slurmd -f '$SLURM_CONF' -N n$i"
	done
fi
for _ in $(seq 1 100); do
	if [ "$(sinfo -h -o %t 2>/dev/null | grep -c idle)" -ge 1 ] &&
		! sinfo -h -o %t 2>/dev/null | grep -qv idle; then
		echo "$SLURM_CONF"
		exit 0
	fi
	sleep 0.2
done
echo "slurm-test-cluster: the node did not come up; logs in $dir" >&2
tail -5 "$dir"/slurm*.log >&2 || true
exit 1
