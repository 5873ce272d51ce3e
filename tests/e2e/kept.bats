#!/usr/bin/env bats
# Results a job never fully collected, by hand as the epilog runs it (no
# Slurm here; SLURM_JOB_ID set as in a job): a plain collect notes its
# SRC, `clean --job` keeps what did not reach DEST (and nothing that
# did), from another filesystem too, and `collect --kept --job` sends it
# without sending again what the job's collects had sent.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-kept)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" HOME="$T/home"
	mkdir -p home
	unset SLURM_JOB_ID SLURM_TMPDIR
}

teardown() {
	cd /
	grep " $T/" /proc/mounts | awk '{ print $2 }' | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$T"
}

@test "clean --job keeps what a job's collect did not send, and nothing it sent whole" {
	mkdir -p done-src todo-src
	echo a >done-src/a
	echo b >todo-src/b
	SLURM_JOB_ID=501 "$STAGER" collect -q done-src "$T/dest-done"
	SLURM_JOB_ID=501 "$STAGER" collect -q todo-src "$T/dest-todo"
	# after the last collect the job wrote more into one of them
	echo c >todo-src/c
	run "$STAGER" clean --job 501
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"'$T/todo-src' were never fully collected to '$T/dest-todo'"* ]]
	[[ "$output" != *"done-src' were never"* ]]
	[ -e done-src/a ]
	[ ! -e todo-src ]
	run "$STAGER" status --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq '.kept | length')" -eq 1 ]
	[ "$(echo "$output" | jq -r '.kept[0].dest')" = "$T/dest-todo" ]
	# the note in the user's home
	[ "$(ls home/.local/state/stager/kept | wc -l)" -eq 1 ]
	# sent: only what the job's collect had not sent (b was sent before)
	run "$STAGER" collect --kept --job 501 --json
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq '.kept[0].sent_files')" -eq 1 ]
	[ "$(cat dest-todo/c)" = c ]
	[ "$(cat dest-todo/b)" = b ]
	[ -z "$(ls -A home/.local/state/stager/kept)" ]
	run -0 "$STAGER" status --json
	[ "$(echo "$output" | jq '.kept | length')" -eq 0 ]
}

@test "results on another filesystem are copied to kept/; a collect killed mid-file leaves no temporary in DEST" {
	mkdir -p jobtmp
	mount -t tmpfs -o size=64m tmpfs jobtmp || skip "cannot mount a tmpfs"
	mkdir -p jobtmp/out/sub
	head -c 20000000 /dev/urandom >jobtmp/out/big
	echo small >jobtmp/out/sub/small
	ln -s sub/small jobtmp/out/link
	sum=$(sha256sum <jobtmp/out/big | cut -c1-64)
	SLURM_JOB_ID=502 STAGER_MAX_READERS_PER_NODE=0 "$STAGER" --bwlimit 2M collect -q jobtmp/out "$T/dest" &
	pid=$!
	wait_until 30 sh -c "ls -a '$T/dest' 2>/dev/null | grep -q stager-tmp"
	kill -9 "$pid"
	wait_pid "$pid" 10 || true
	run "$STAGER" clean --job 502
	echo "$output"
	[ "$status" -eq 0 ]
	[ ! -e jobtmp/out ]
	[ -z "$(find dest -name '.stager*')" ]
	"$STAGER" status --json >st.json
	kept=$(jq -r '.kept[0].path' st.json)
	[ "$(sha256sum <"$kept/big" | cut -c1-64)" = "$sum" ]
	[ "$(readlink "$kept/link")" = sub/small ]
	run "$STAGER" collect --kept
	[ "$status" -eq 0 ]
	[ "$(sha256sum <dest/big | cut -c1-64)" = "$sum" ]
	[ "$(cat dest/sub/small)" = small ]
}

@test "a clean killed while it copies results from another filesystem to kept/ (the epilog's time bound): its partial copy is no kept result, and the next clean removes it and keeps them whole" {
	mkdir -p jobtmp
	mount -t tmpfs -o size=200m tmpfs jobtmp || skip "cannot mount a tmpfs"
	mkdir -p jobtmp/out
	echo first >jobtmp/out/first
	SLURM_JOB_ID=503 "$STAGER" collect -q jobtmp/out "$T/dest"
	# then many more: the copy to kept/ takes a while
	(cd jobtmp/out && for i in $(seq 1 2000); do echo "$i" >"f$i"; done)
	"$STAGER" clean -q --job 503 &
	pid=$!
	wait_until 60 sh -c "ls -A '$T/scratch/kept' 2>/dev/null | grep -q copy"
	kill -9 "$pid"
	wait_pid "$pid" 10 || true
	ls -A scratch/kept
	# what the killed clean left is not kept results
	run -0 "$STAGER" status --json
	[ "$(echo "$output" | jq '.kept | length')" -eq 0 ]
	# the next clean: the results kept whole, the partial copy gone
	run -0 "$STAGER" clean --job 503
	echo "$output"
	[ ! -e jobtmp/out ]
	[ -z "$(ls -A scratch/kept | grep copy)" ]
	run -0 "$STAGER" status --json
	[ "$(echo "$output" | jq '.kept | length')" -eq 1 ]
	kept=$(echo "$output" | jq -r '.kept[0].path')
	[ "$(ls "$kept" | wc -l)" -eq 2001 ]
}

@test "collect --kept --job sends one job's results only; what stays is named with the node and the command" {
	for j in 601 602; do
		mkdir -p "src$j" "d$j"
		echo "$j" >"src$j/f"
		SLURM_JOB_ID=$j "$STAGER" collect -q --pack "src$j" "$T/d$j/out"
		echo more >"src$j/g"
		"$STAGER" clean -q --job "$j"
	done
	# job 602's DEST can no longer be made (its directory is now a file)
	rm -rf d602 && touch d602
	run "$STAGER" collect --kept --job 601
	echo "$output"
	[ "$status" -eq 0 ]
	# kept from a --pack collect: sent as a pack again
	"$STAGER" unpack -q d601/out.tar.zst check601
	[ "$(cat check601/g)" = more ]
	[[ "$output" != *"d602"* ]]
	run "$STAGER" collect --kept --job 602
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"results for '$T/d602/out' are kept on "*"\`srun -w "*" -N1 -n1 stager collect --kept\` sends them"* ]]
	run -0 "$STAGER" status --json
	[ "$(echo "$output" | jq '.kept | length')" -eq 1 ]
	# on another host (a login node), status lists it from the note
	run unshare --uts sh -c "hostname login-x && '$STAGER' status --json"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r '.kept_elsewhere[0].job')" = 602 ]
	[ "$(echo "$output" | jq -r '.kept_elsewhere[0].dest')" = "$T/d602/out" ]
}

@test "collect --kept on a login node, where none are kept: names the nodes that hold them (from the notes) and the command that sends them" {
	for j in 701 702; do
		mkdir -p "src$j"
		echo "$j" >"src$j/f"
		SLURM_JOB_ID=$j "$STAGER" collect -q "src$j" "$T/d$j/out"
		echo more >"src$j/g"
		"$STAGER" clean -q --job "$j"
	done
	node=$(hostname)
	# on another host with a scratch root of its own (a login node)
	login() { unshare --uts sh -c 'r=$1 && shift && hostname login-x && STAGER_SCRATCH_ROOT="$r/login" exec "$@"' sh "$T" "$STAGER" "$@"; }
	run login collect --kept
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"no kept results under '$T/login' on login-x"* ]]
	for j in 701 702; do
		[[ "$output" == *"$node: job $j, "*" for '$T/d$j/out' in '"*"': \`srun -w $node -N1 -n1 stager collect --kept\` sends them"* ]]
	done
	# one job's: only that job's node, and the command for that job
	run login collect --kept --job 702
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"no kept results of job 702 under '$T/login' on login-x"* ]]
	[[ "$output" == *"$node: job 702, "*"\`srun -w $node -N1 -n1 stager collect --kept --job 702\` sends them"* ]]
	[[ "$output" != *"job 701"* ]]
	# (nothing of it is the epilog's "are kept on" line)
	[[ "$output" != *"are kept on"* ]]
	run login collect --kept --json
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e --arg n "$node" --arg d "$T/d701/out" \
		'.collected == 0 and (.kept_elsewhere | length) == 2 and
		 ([.kept_elsewhere[] | select(.node == $n and .job == "701" and .dest == $d)] | length) == 1'
	# nothing was sent from the login node; on the node itself they are
	[ ! -e "$T/d701/out/g" ]
	run -0 "$STAGER" collect --kept
	[ "$(cat "$T/d701/out/g")" = more ]
	run login collect --kept
	[ "$status" -eq 0 ]
	[[ "$output" != *"$node: job"* ]]
}

@test "collect --kept on a login node: a note whose node or job is not a host's name or a job's number is not put in the srun command" {
	d="$HOME/.local/state/stager/kept"
	mkdir -p "$d"
	note() { printf 'stager-kept 1\nnode %s\njob %s\npath /p\ndest /d\nbytes 1\nsince 1\n' "$1" "$2" >"$d/$3"; }
	note 'n1;touch pwned' 7 a.job7
	note n2 '8 $(id)' b.job8
	note '-wall' 9 c.job9
	note n3.cluster 10 n3.job10
	login() { unshare --uts sh -c 'r=$1 && shift && hostname login-x && STAGER_SCRATCH_ROOT="$r/login" exec "$@"' sh "$T" "$STAGER" "$@"; }
	run login collect --kept
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"\`srun -w n3.cluster -N1 -n1 stager collect --kept\` sends them"* ]]
	[[ "$output" != *"pwned"* ]]
	[[ "$output" != *'$(id)'* ]]
	[[ "$output" != *"-wall"* ]]
}

@test "collect --job is refused without --kept, and a job id must be one" {
	run "$STAGER" collect --job 5 a b
	[ "$status" -eq 1 ]
	[[ "$output" == *"--job goes with --kept"* ]]
	run "$STAGER" collect --kept --job '../x'
	[ "$status" -eq 1 ]
	[[ "$output" == *"not a Slurm job id"* ]]
}

# A job's own mount, as job_container/tmpfs makes one: in a mount
# namespace of the test's, BasePath/ID/.ID bound at a directory.
@test "a collect from a mount of the job's own: said at once; stopped, a copy is kept for the job and collect --kept --job sends it" {
	command -v unshare >/dev/null && unshare -m true 2>/dev/null || skip "needs mount namespaces"
	mkdir -p jc/502/.502 jobtmp dest
	cat >job.sh <<JOB
mount --bind "$T/jc/502/.502" "$T/jobtmp" || exit 99
mkdir -p "$T/jobtmp/out/sub"
head -c 20000000 /dev/urandom >"$T/jobtmp/out/big"
echo small >"$T/jobtmp/out/sub/small"
cp -r "$T/jobtmp/out" "$T/copy"
SLURM_JOB_ID=502 "$STAGER" collect --bwlimit 2M "$T/jobtmp/out" "$T/dest/r" 2>"$T/err" &
p=\$!
until grep -q "collecting 2 files" "$T/err"; do sleep 0.1; done
sleep 1
kill -TERM \$p
wait \$p
echo "rc=\$?" >"$T/rc"
JOB
	# (-v: the line that says the collect began)
	sed -i 's/collect --bwlimit/collect -v --bwlimit/' job.sh
	unshare -m --propagation private sh job.sh
	cat err rc
	[ "$(cat rc)" = rc=5 ]
	grep -q "warning: '$T/jobtmp/out' is on '$T/jobtmp', a mount of this job's own that Slurm removes with the job" err
	grep -q "a copy is kept in '$T/scratch/kept/job502-out\.[0-9]*' for '$T/dest/r'" err
	# the job's mount is gone (its namespace ended): the copy is all there is
	[ ! -e jobtmp/out ]
	rm -rf jc/502
	run "$STAGER" collect --kept --job 502
	echo "$output"
	[ "$status" -eq 0 ]
	diff -r copy dest/r
	[ -z "$(ls scratch/kept)" ]
	# a collect from anywhere else in the same job is not told
	mkdir plain && echo p >plain/p
	run env SLURM_JOB_ID=502 "$STAGER" collect plain dest/p
	[ "$status" -eq 0 ]
	[[ "$output" != *"a mount of this job's own"* ]]
}
