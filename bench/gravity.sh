#!/usr/bin/env bash
# bench/gravity.sh - data gravity measured: the same stream of jobs over a
# few datasets run twice on a real Slurm of 4 nodes, once as users submit
# today (sbatch job.sh) and once with the hint (sbatch $(stager hint PACK)
# job.sh), each node's caches emptied and its features cleared between.
#
#   B=build bash bench/gravity.sh [--jobs N] [--seed S]
#
# The cluster is a site as the README sets one up: stager installed with
# `make install`, its prolog, task prolog and epilog in slurm.conf, the
# site's settings with node_features = yes (the epilog, run by slurmd as
# root with no PATH, tells Slurm which packs each node caches).  Nodes
# n1..n4 (scripts/slurm-test-cluster.sh, NODES=4: slurmd daemons in their
# own mount and UTS namespaces, each with a private node-local disk at
# SCRATCH, where the node's record of its features lives too).  The shared
# filesystem is the emulated NFS of bench/sharedfs (0.5 ms per metadata
# operation, 200 MiB/s shared, no page cache), with counters.
#
# The stream: JOBS jobs (default 40), each one of 3 datasets (gendata
# images, 2,500 files each, packed) drawn with weights 50/30/20 %, and a
# "training" time of 2 to 6 s, from a fixed seed; at most 3 jobs in flight
# on the 4 nodes (--exclusive), so a node is usually free.  Each node's
# cache holds 2 of the 3 datasets (cache_max), so caches evict.
#
# Per way: warm starts (the stage was a cache hit), bytes read from the
# shared filesystem, the mean stage time and job wall time, the
# makespan; for the hinted way also how often a job whose hint named a
# node that was free at submission started warm (the issue's goal: 90 %).
# Results: bench/results-gravity.md (also printed).  Needs root, /dev/fuse,
# slurm-wlm and munge; takes about 5 minutes.
set -euo pipefail
B=${B:-build}
JOBS=40
SEED=42
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) JOBS=$2; shift 2 ;;
	--seed) SEED=$2; shift 2 ;;
	*) echo "usage: bench/gravity.sh [--jobs N] [--seed S]" >&2; exit 1 ;;
	esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. bench/lib.sh
bench_clean_env
for t in "$top/$B/stager" "$top/$B/sharedfs" "$top/$B/gendata"; do
	[ -x "$t" ] || { echo "bench/gravity: $t missing: make all $B/sharedfs $B/gendata" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] && command -v slurmctld >/dev/null ||
	{ echo "bench/gravity: needs root, /dev/fuse and slurm-wlm" >&2; exit 1; }

W=$(mktemp -d /var/tmp/stager-bench-grav.XXXXXX)
chmod 0755 "$W"
SCRATCH=$W/scratch SHARED=$W/shared
cleanup() {
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	"$top/scripts/slurm-test-cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
	fusermount3 -u "$SHARED" 2>/dev/null || umount -l "$SHARED" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/backing" "$SHARED" "$SCRATCH" "$W/out"

# the site: stager installed, its settings, each node's disk
make -s -C "$top" B="$B" install PREFIX="$W/prefix" SYSCONFDIR="$W/prefix/etc" >/dev/null
STAGER=$W/prefix/bin/stager
# the jobs (which inherit this environment) call stager by name
export PATH="$W/prefix/bin:$PATH"
install -d -m 0755 "$W/prefix/etc/default"
cat >"$W/stager.conf" <<CONF
scratch_root = $SCRATCH/\$USER
slot_dir = $SCRATCH/slots
cache_max = 80M
node_features = yes
CONF
cat >"$W/prefix/etc/default/stager" <<CONF
STAGER_JOB_TMP_BASE=$SCRATCH/jobs
STAGER_SITE_CONFIG=$W/stager.conf
STAGER_STATE_DIR=$SCRATCH/state
STAGER_EPILOG_SEND_TIME=0
CONF
export STAGER_SITE_CONFIG=$W/stager.conf
for n in n1 n2 n3 n4; do
	install -d -m 1777 "$W/cluster/nodes/$n" "$W/cluster/nodes/$n/slots"
	install -d -m 0755 "$W/cluster/nodes/$n/jobs"
done

names=(A B C)
for i in 0 1 2; do
	"$top/$B/gendata" images "$W/backing/${names[$i]}" --files 2500 --seed $((SEED + i)) >/dev/null
	"$STAGER" pack -q "$W/backing/${names[$i]}" -o "$W/backing/${names[$i]}.tar.zst" >/dev/null
	rm -rf "${W:?}/backing/${names[$i]}"
done
declare -A digest
for d in "${names[@]}"; do
	digest[$d]=$("$STAGER" ls --json "$W/backing/$d.tar.zst" | sed -n 's/^{"digest":"\([0-9a-f]*\)".*/\1/p')
	[ -n "${digest[$d]}" ] || { echo "bench/gravity: no digest for $d" >&2; exit 1; }
done
pack_mib=$(du -cm "$W"/backing/*.tar.zst | tail -n 1 | cut -f1)
"$top/$B/sharedfs" --delay-ms 0.5 --bw 200M --direct-io "$W/backing" "$SHARED"
hooks=$W/prefix/libexec/stager
SLURM_CONF=$(NODES=4 SCRATCH="$SCRATCH" PROLOG="$hooks/prolog" TASK_PROLOG="$hooks/task-prolog" \
	"$top/scripts/slurm-test-cluster.sh" start "$W/cluster" "$hooks/epilog")
export SLURM_CONF

# the stream: "dataset seconds" per job, the same for both ways
awk -v n="$JOBS" -v seed="$SEED" 'BEGIN {
	srand(seed)
	for (i = 0; i < n; i++) {
		r = rand()
		d = r < 0.5 ? "A" : r < 0.8 ? "B" : "C"
		printf "%s %d\n", d, 2 + int(rand() * 5)
	}
}' >"$W/stream"

cat >"$W/job.sh" <<'JOB'
#!/bin/bash
# job.sh PACK SECONDS RESULT: stage, "train", say where and how
t0=$(date +%s.%N)
json=$(stager stage --json "$1") || { echo "$(hostname) failed" >"$3"; exit 1; }
t1=$(date +%s.%N)
sleep "$2"
t2=$(date +%s.%N)
case $json in *'"hit":true'*) h=warm ;; *) h=cold ;; esac
echo "$(hostname) $h $(awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { print b - a, c - a }')" >"$3"
JOB
chmod 0755 "$W/job.sh"

in_flight() { squeue -h 2>/dev/null | wc -l; }

# one way over the stream: plain or hint
run_way() {
	local way=$1 i=0 d s hint id warm_free
	for n in n1 n2 n3 n4; do
		rm -rf "$W/cluster/nodes/$n/root" "$W/cluster/nodes/$n/state"
		scontrol update NodeName=$n AvailableFeatures= ActiveFeatures=
	done
	rm -f "$W/out/$way".*
	echo reset >"$SHARED/.sharedfs-stats"
	local t0
	t0=$(date +%s.%N)
	while read -r d s; do
		i=$((i + 1))
		while [ "$(in_flight)" -ge 3 ]; do sleep 0.2; done
		hint=
		[ "$way" = plain ] || hint=$("$STAGER" hint "$SHARED/$d.tar.zst")
		# was a node whose cache holds it free when the job was
		# submitted?  (the caches themselves, not what Slurm was told)
		busy=" $(squeue -h -o %N | tr ',\n' '  ') "
		warm_free=0
		for n in n1 n2 n3 n4; do
			[ -d "$W/cluster/nodes/$n/root/cache/${digest[$d]}" ] || continue
			case $busy in *" $n "*) ;; *) warm_free=1 ;; esac
		done
		# shellcheck disable=SC2086
		id=$(sbatch --parsable --exclusive -N1 --mem=300 -o "$W/out/$way.$i.log" $hint \
			"$W/job.sh" "$SHARED/$d.tar.zst" "$s" "$W/out/$way.$i.res")
		echo "$i $id $d $warm_free ${hint:+hinted}" >>"$W/out/$way.submitted"
	done <"$W/stream"
	while [ "$(in_flight)" -gt 0 ]; do sleep 0.2; done
	local t1
	t1=$(date +%s.%N)
	bytes=$(awk '$1 == "bytes_read" {print $2}' "$SHARED/.sharedfs-stats")
	# per job: node warm stage_s job_s, and what was known at submission
	while read -r i id d wf h; do
		printf '%s %s %s %s\n' "$(cat "$W/out/$way.$i.res" 2>/dev/null || echo "- failed")" \
			"$d" "$wf" "${h:-plain}"
	done <"$W/out/$way.submitted" >"$W/out/$way.jobs"
	awk -v way="$way" -v bytes="$bytes" -v span="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '
		{ n++ }
		$2 == "warm" { warm++ }
		$2 == "failed" { failed++ }
		$2 != "failed" { st += $3; jt += $4 }
		$6 == 1 { free++; if ($2 == "warm") freewarm++ }
		END {
			ok = n - failed
			printf "%s %d %d %d %.1f %.3f %.2f %.1f %d %d\n", way, n, warm, failed,
				bytes / 1048576, st / (ok ? ok : 1), jt / (ok ? ok : 1), span, free, freewarm
		}' "$W/out/$way.jobs"
}

plain=$(run_way plain)
hint=$(run_way hint)
out=$top/bench/results-gravity.md
{
	echo "# Data gravity: the same stream of jobs with and without \`stager hint\`"
	echo
	echo "$(date -u +%Y-%m-%d), $(nproc) cores, stager $(git -C "$top" rev-parse --short HEAD)." \
		"A real Slurm of 4 nodes on this machine (namespaces, a private disk each), the installed" \
		"epilog telling Slurm what each node caches (node_features = yes)." \
		"$JOBS jobs over 3 datasets ($pack_mib MiB of packs in all, weights 50/30/20 %, seed $SEED)," \
		"2 to 6 s of \"training\" each, at most 3 in flight (--exclusive); each node's cache holds 2 of" \
		"the 3 (cache_max 80M). Shared filesystem: emulated NFS, 0.5 ms per metadata operation," \
		"200 MiB/s, no page cache."
	echo
	echo "| submitted as | jobs | warm starts | warm where a warm node was free | shared-FS MiB read | mean stage s | mean job s | makespan s |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	for r in "$plain" "$hint"; do
		read -r way n warm failed mib st jt span free freewarm <<<"$r"
		label="sbatch job.sh"
		[ "$way" = hint ] && label="sbatch \$(stager hint PACK) job.sh"
		printf '| %s | %d%s | %d (%d %%) | %d of %d (%d %%) | %s | %s | %s | %s |\n' "$label" "$n" \
			"$([ "$failed" -gt 0 ] && echo " ($failed failed)")" "$warm" $((100 * warm / n)) \
			"$freewarm" "$free" $((free ? 100 * freewarm / free : 0)) "$mib" "$st" "$jt" "$span"
	done
	echo
	echo "\"A warm node was free\": when the job was submitted, a node whose cache held its" \
		"dataset ran no job (the goal for hinted jobs: 90 % of those start warm). A hint does not" \
		"hold a job for a busy warm node: it runs elsewhere, cold; but a hinted job starts at a" \
		"scheduling pass of Slurm's, not at submission (backfill: every bf_interval, 30 s by" \
		"default). Features stay" \
		"node_features_grace (60 s) after a pack is evicted, so a hint can name a node that" \
		"has just lost it."
} | tee "$out"
# each job (node, start, stage s, job s, dataset, warm node free, how)
# for whoever wants to look closer
for way in plain hint; do
	echo "== $way: node start stage_s job_s dataset warm_node_free how" >&2
	cat "$W/out/$way.jobs" >&2
done
