#!/usr/bin/env bats
# Data gravity on a real Slurm with three slurmd (n1..n3, each with its
# own node-local disk at SCRATCH), as a site runs it (site.bash): the
# installed epilog, run by slurmd as root with no PATH, tells Slurm which
# packs each node's caches hold (node_features = yes in the site's
# settings); `stager where` and `stager hint`, run by an ordinary user on
# the login node, read Slurm; jobs submitted with the hint land where
# their data is warm.  The site's own feature (ssd) must survive every
# update.

load helpers
load site
bats_require_minimum_version 1.5.0

U=stggrav1
U2=stggrav2
SITE_USERS="$U $U2"

setup_file() {
	command -v slurmctld >/dev/null && command -v unshare >/dev/null &&
		[ "$(id -u)" -eq 0 ] || skip "needs root, slurm-wlm and unshare"
	command -v useradd >/dev/null || skip "needs useradd"
	D=$(reachable_mktemp stager-grav)
	export D
	export SCRATCH="$D/scratch"
	for n in n1 n2 n3; do
		install -d -m 1777 "$D/cluster/nodes/$n"
		install -d -m 0755 "$D/cluster/nodes/$n/jobs"
		install -d -m 1777 "$D/cluster/nodes/$n/slots"
	done
	NODES=3 site_start "$D"
	sed -i "s|^STAGER_JOB_TMP_BASE=.*|STAGER_JOB_TMP_BASE=$SCRATCH/jobs|" "$D/prefix/etc/default/stager"
	cat >>"$D/stager.conf" <<CONF
slot_dir = $SCRATCH/slots
node_features = yes
node_features_max = 2
node_features_grace = 15
CONF
	# the site's own features, which stager must keep
	for n in n1 n2 n3; do
		scontrol update NodeName=$n AvailableFeatures=ssd ActiveFeatures=ssd
	done
	install -d -m 0755 "$D/out"
	chown "$U" "$D/out"
	chmod 1777 "$D/out"
	for u in $U $U2; do
		for p in a b c d e; do
			mkdir -p "$D/shared/$u/$p"
			echo "$p" >"$D/shared/$u/$p/file"
			head -c 200000 /dev/urandom >"$D/shared/$u/$p/data"
		done
		chown -R "$u" "$D/shared/$u"
		for p in a b c d e; do
			as_job_user "$u" stager pack -q "$D/shared/$u/$p" -o "$D/shared/$u/$p.tar.zst" >/dev/null
		done
	done
}

teardown_file() {
	[ -n "${D:-}" ] || return 0
	site_stop "$D"
}

setup() {
	[ -n "${D:-}" ] || skip "no cluster"
	cd "$D"
}

# A job of USER (on node N, or where Slurm puts it: N = -) that stages
# the packs named and writes, per pack, "NODE PACK hit" or "NODE PACK
# cold" to out/NAME; its own sbatch options after --; waits for the end
# (the epilog included).  Prints the job id.
stage_job() {
	local user=$1 node=$2 name=$3
	shift 3
	local packs=() opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		packs+=("$1")
		shift
	done
	[ $# -eq 0 ] || shift
	opts=("$@")
	[ "$node" = - ] || opts+=(-w "$node")
	{
		echo '#!/bin/bash'
		for p in "${packs[@]}"; do
			echo "if stager stage --json $D/shared/$user/$p.tar.zst | grep -q '\"hit\":true'; then h=hit; else h=cold; fi"
			echo "echo \"\$(hostname) $p \$h\" >>$D/out/$name"
			# (a cache's last use counts in seconds: one apart, an order)
			[ ${#packs[@]} -eq 1 ] || echo "sleep 1.1"
		done
	} >"$D/out/$name.sh"
	chmod 0755 "$D/out/$name.sh"
	local id
	id=$(site_submit "$user" -n1 --mem=100 -o "$D/out/$name.log" "${opts[@]}" "$D/out/$name.sh")
	[ -n "$id" ] || return 1
	wait_until 60 job_gone "$id" || return 1
	echo "$id"
}

# stager's features on node N, sorted, one line
ours_on() { sinfo -h -N -n "$1" -o '%f' | head -n 1 | tr ',' '\n' | grep '^stg_' | sort | tr '\n' ' '; }
site_on() { sinfo -h -N -n "$1" -o '%f' | head -n 1 | tr ',' '\n' | grep -vc '^stg_'; }

@test "a job stages a pack on n2: where names n2, the hint's jobs (stage and run) run there warm, a plain job goes where Slurm puts it, ssd survives" {
	stage_job $U n2 first a
	grep -qx "n2 a cold" out/first
	run login_stager $U where "$D/shared/$U/a.tar.zst"
	[ "$status" -eq 0 ]
	[ "$output" = "$D/shared/$U/a.tar.zst	n2" ]
	login_stager $U where --json "$D/shared/$U/a.tar.zst" >where.json
	[ "$(jq -r '.packs[0].nodes | join(",")' where.json)" = n2 ]
	f=$(jq -r '.packs[0].feature' where.json)
	[[ $f =~ ^stg_[0-9a-f]{12}$ ]]
	[ "$(ours_on n2)" = "$f " ]
	[ "$(site_on n2)" -eq 1 ]
	# root's record, the node's own, in a directory of root's alone
	grep -q " $f " "$D/state/node-features.n2"
	[ "$(stat -c %U:%a "$D/state")" = root:700 ]
	hint=$(login_stager $U hint "$D/shared/$U/a.tar.zst")
	[ "$hint" = "--prefer=$f" ]
	# hinted jobs, one after another: each on n2, each warm
	for i in 1 2 3; do
		stage_job $U - hinted$i a -- $hint
		grep -qx "n2 a hit" out/hinted$i
	done
	# a stager run job takes the hint the same way
	cat >"$D/out/runjob.sh" <<JOB
#!/bin/bash
exec stager run --stage $D/shared/$U/a.tar.zst -- bash -c 'hostname >$D/out/runjob'
JOB
	chmod 0755 "$D/out/runjob.sh"
	id=$(site_submit $U -n1 --mem=100 -o "$D/out/runjob.log" $hint "$D/out/runjob.sh")
	wait_until 60 job_gone "$id"
	[ "$(cat out/runjob)" = n2 ]
	grep -q "cached '$D/shared/$U/a.tar.zst'" out/runjob.log
	# no hint: where the scheduler puts it (the first idle node)
	stage_job $U - plain a
	grep -qx "n1 a cold" out/plain
	# the site's feature is still on every node
	for n in n1 n2 n3; do [ "$(site_on $n)" -eq 1 ]; done
}

@test "a job's partition: sbatch refuses a preferred feature no node of it has; hint -p names only those it has" {
	# a is cached on n2 (the first test); partition p3 holds n3 alone
	scontrol create PartitionName=p3 Nodes=n3 State=UP
	all=$(login_stager $U hint "$D/shared/$U/a.tar.zst")
	[[ $all == --prefer=stg_* ]]
	run as_job_user $U sbatch --parsable -p p3 -o /dev/null $all --wrap true
	[ "$status" -ne 0 ] # Slurm's rule, which the hint must follow
	run --separate-stderr login_stager $U hint -p p3 "$D/shared/$U/a.tar.zst"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[[ $stderr == *"nothing printed: no node tells Slurm it caches that pack for you now"* ]]
	run login_stager $U where -p p3 "$D/shared/$U/a.tar.zst"
	[ "$status" -eq 0 ]
	[[ $output == *"	-" ]]
	id=$(site_submit $U -p p3 -o /dev/null $(login_stager $U hint -p p3 "$D/shared/$U/a.tar.zst") --wrap true)
	[ -n "$id" ]
	# sbatch's own default partition, from the environment
	run --separate-stderr as_job_user $U env SBATCH_PARTITION=p3 STAGER_SITE_CONFIG="$D/stager.conf" stager hint "$D/shared/$U/a.tar.zst"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[[ $stderr == *"nothing printed: no node tells Slurm it caches that pack for you now"* ]]
	# the partition that holds n2: the hint as before
	[ "$(login_stager $U hint --partition debug "$D/shared/$U/a.tar.zst")" = "$all" ]
	[[ ,$(login_stager $U where --partition debug "$D/shared/$U/a.tar.zst" | cut -f2), == *,n2,* ]]
	wait_until 60 job_gone "$id"
	scontrol delete PartitionName=p3
}

@test "features are per user: another user's where finds nothing for the same pack, and no hint" {
	cp "$D/shared/$U/a.tar.zst" "$D/shared/$U2/same.tar.zst"
	chown $U2 "$D/shared/$U2/same.tar.zst"
	run login_stager $U2 where "$D/shared/$U2/same.tar.zst"
	[ "$status" -eq 0 ]
	[[ $output == *"	-" ]]
	run --separate-stderr login_stager $U2 hint "$D/shared/$U2/same.tar.zst"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[[ $stderr == *"nothing printed: no node tells Slurm it caches that pack for you now"* ]]
}

@test "the cap: n3 tells at most node_features_max, the most recent; the hint still names only what some node has" {
	stage_job $U n3 cap b c d
	[ "$(grep -c 'n3 . cold' out/cap)" -eq 3 ]
	login_stager $U where --json "$D/shared/$U"/{b,c,d}.tar.zst >cap.json
	# d was used last, then c: those two, not b
	[ "$(jq -r '[.packs[].nodes | join(",")] | join(" ")' cap.json)" = " n3 n3" ]
	[ "$(ours_on n3 | wc -w)" -eq 2 ]
	run login_stager $U hint "$D/shared/$U"/{b,c,d}.tar.zst
	[ "$status" -eq 0 ]
	[[ $output == --prefer=* ]]
	# every feature the hint names is on a node now: sbatch takes it
	id=$(site_submit $U -n1 --mem=100 -o /dev/null $output --wrap true)
	[ -n "$id" ]
	[ "$(site_on n3)" -eq 1 ]
}

@test "the cap shared between users: a second user gets their share of n3 from one who held every place, and keeps it" {
	# n3 tells U's c and d (the cap test), max 2; U2's first pack there
	stage_job $U2 n3 fair a
	grep -qx "n3 a cold" out/fair
	f2=$(login_stager $U2 where --json "$D/shared/$U2/a.tar.zst" | jq -r .packs[0].feature)
	[[ $f2 =~ ^stg_[0-9a-f]{12}$ ]]
	# one of U's two leaves through its grace, holding its place: the
	# older (c), or, used within the same moment as d, the first by
	# name of feature
	[[ " $(ours_on n3)" != *" $f2 "* ]]
	wc=$(login_stager $U where "$D/shared/$U/c.tar.zst" | cut -f2)
	wd=$(login_stager $U where "$D/shared/$U/d.tar.zst" | cut -f2)
	echo "where c: $wc, d: $wd"
	[ "$(printf '%s\n' "$wc" "$wd" | sort | tr '\n' ' ')" = "- n3 " ]
	kept=d
	if [ "$wd" != n3 ]; then kept=c; fi
	sleep 16 # check-tests: the grace is time itself (15 s)
	id=$(site_submit $U -n1 --mem=100 -w n3 -o /dev/null --wrap true)
	wait_until 60 job_gone "$id"
	[[ " $(ours_on n3)" == *" $f2 "* ]]
	[ "$(ours_on n3 | wc -w)" -eq 2 ]
	[ "$(login_stager $U2 where "$D/shared/$U2/a.tar.zst" | cut -f2)" = n3 ]
	[ "$(login_stager $U where "$D/shared/$U/$kept.tar.zst" | cut -f2)" = n3 ]
	# U staging again in every job (the most recent uses) takes it back
	# no more: U2's feature stays, and is not leaving
	stage_job $U n3 fair2 b c
	[[ " $(ours_on n3)" == *" $f2 "* ]]
	[ "$(login_stager $U2 where "$D/shared/$U2/a.tar.zst" | cut -f2)" = n3 ]
	[ "$(site_on n3)" -eq 1 ]
}

@test "a pack evicted: its feature stays for the grace (a hint printed before still works), then goes" {
	stage_job $U n1 e1 e
	f=$(login_stager $U where --json "$D/shared/$U/e.tar.zst" | jq -r .packs[0].feature)
	[[ " $(ours_on n1)" == *" $f "* ]]
	hint=$(login_stager $U hint "$D/shared/$U/e.tar.zst")
	# the user's cache on n1 drops everything
	cat >"$D/out/drop.sh" <<JOB
#!/bin/bash
stager clean --all --quiet
JOB
	chmod 0755 "$D/out/drop.sh"
	id=$(site_submit $U -n1 --mem=100 -w n1 -o /dev/null "$D/out/drop.sh")
	wait_until 60 job_gone "$id"
	# within the grace: still there, and the hint printed before is valid
	[[ " $(ours_on n1)" == *" $f "* ]]
	id=$(site_submit $U -n1 --mem=100 -o /dev/null $hint --wrap true)
	[ -n "$id" ]
	# but a hint printed now names nothing: the feature is leaving, and
	# the next job's end after the grace could take it before its sbatch
	run --separate-stderr login_stager $U hint "$D/shared/$U/e.tar.zst"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[[ $stderr == *"nothing printed: no node tells Slurm it caches that pack for you now"* ]]
	run login_stager $U where "$D/shared/$U/e.tar.zst"
	[ "$status" -eq 0 ]
	[[ $output == *"	-" ]]
	# after it, the next update on n1 drops it
	sleep 16 # check-tests: the grace is time itself (15 s)
	id=$(site_submit $U -n1 --mem=100 -w n1 -o /dev/null --wrap true)
	wait_until 60 job_gone "$id"
	[[ " $(ours_on n1)" != *" $f "* ]]
	[ "$(site_on n1)" -eq 1 ]
	run --separate-stderr login_stager $U hint "$D/shared/$U/e.tar.zst"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[[ $stderr == *"nothing printed: no node tells Slurm it caches that pack for you now"* ]]
}

@test "a user's own node_features = no keeps their packs out" {
	install -d -o $U2 "/home/$U2/.config/stager"
	echo "node_features = no" >"/home/$U2/.config/stager/config"
	chown $U2 "/home/$U2/.config/stager/config"
	before=$(ours_on n2)
	stage_job $U2 n2 optout b
	grep -qx "n2 b cold" out/optout
	[ "$(ours_on n2)" = "$before" ]
	run login_stager $U2 where "$D/shared/$U2/b.tar.zst"
	[ "$status" -eq 0 ]
	[[ $output == *"	-" ]]
	rm -f "/home/$U2/.config/stager/config"
}

@test "a user's own node_features = no holds also where the site turns it on in default/stager" {
	install -d -o $U2 "/home/$U2/.config/stager"
	echo "node_features = no" >"/home/$U2/.config/stager/config"
	chown $U2 "/home/$U2/.config/stager/config"
	# the epilog exports default/stager into the user's side too
	echo STAGER_NODE_FEATURES=yes >>"$D/prefix/etc/default/stager"
	before=$(ours_on n2)
	stage_job $U2 n2 optenv c || true
	sed -i '/^STAGER_NODE_FEATURES=/d' "$D/prefix/etc/default/stager"
	rm -f "/home/$U2/.config/stager/config"
	grep -qx "n2 c cold" out/optenv
	[ "$(ours_on n2)" = "$before" ]
	run login_stager $U2 where "$D/shared/$U2/c.tar.zst"
	[ "$status" -eq 0 ]
	[[ $output == *"	-" ]]
}

@test "node_features = no at the site: a job's end changes no node's features" {
	sed -i 's/^node_features = yes/node_features = no/' "$D/stager.conf"
	before=$(sinfo -h -N -o '%N %f' | sort)
	# (n1 has room for U2's pack: with the setting on, it would appear)
	[ "$(ours_on n1 | wc -w)" -lt 2 ]
	stage_job $U2 n1 off c
	grep -qx "n1 c cold" out/off
	[ "$(sinfo -h -N -o '%N %f' | sort)" = "$before" ]
	sed -i 's/^node_features = no/node_features = yes/' "$D/stager.conf"
}

@test "root's update: a hostile list is checked line by line, a state directory others could write is refused" {
	export STAGER_SITE_CONFIG="$D/stager.conf"
	before=$(ours_on n2)
	{
		printf 'stg_zzzzzzzzzzzz 1\n'
		printf 'stg_0123456789ab -5\n'
		printf '../../etc/passwd 1\n'
		head -c 3000 /dev/zero | tr '\0' x
		printf '\nstg_0123456789ab 1 extra\n'
	} >hostile.list
	run stager features --update --node n2 --user $U2 --state-dir "$D/state" \
		--dry-run <hostile.list
	[ "$status" -eq 0 ]
	[[ $output == *"5 bad lines ignored"* ]]
	[ "$(ours_on n2)" = "$before" ]
	head -c 100000 /dev/zero >big.list
	run stager features --update --node n2 --user $U2 --state-dir "$D/state" <big.list
	[ "$status" -eq 4 ]
	mkdir -m 0777 "$D/opendir"
	run stager features --update --node n2 --user $U2 --state-dir "$D/opendir" </dev/null
	[ "$status" -eq 1 ]
	[[ $output == *"writable by nobody else"* ]]
	run stager features --update --node 'n2 Weight=1' --user $U2 --state-dir "$D/state" </dev/null
	[ "$status" -eq 1 ]
	[[ $output == *"not a node's name"* ]]
	[ "$(ours_on n2)" = "$before" ]
	[ "$(site_on n2)" -eq 1 ]
	# the record ties features to uids: root's alone even in a state
	# directory others can read (one made 0755 before stager came)
	install -d -m 0755 "$D/state755"
	run stager features --update --node n2 --user $U2 --state-dir "$D/state755" </dev/null
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$D/state755/node-features.n2")" = 600 ]
	# (a record lost: what n2 has stays out its grace, marked leaving)
	for f in $before; do [[ " $(ours_on n2)" == *" $f "* ]]; done
	[ "$(site_on n2)" -eq 1 ]
}
