#!/bin/sh
# Slurm epilog for stager: after a job ends (normally, by scancel or at
# its time limit), on each of its nodes:
#   1. `stager clean --job ID`, as the job's user: ends the job's mounts,
#      moves results it never fully collected to the scratch root's kept/,
#      drops its pins, removes its stager job directories, evicts down to
#      the quotas;
#   2. `stager collect --kept --job ID`, as the job's user, for at most
#      STAGER_EPILOG_SEND_TIME seconds (default 60; 0: not sent here):
#      those results sent to the DEST they were meant for;
#   3. what stays kept is said at the end of the job's log (and noted in
#      the user's ~/.local/state/stager/kept, which `stager status` reads
#      on any node), with the one command that brings it back;
#   4. with node_features = yes in the site's settings (data gravity):
#      the node's features in Slurm say which packs its caches hold -
#      `stager features` lists the job's user's, as that user, and
#      `stager features --update` (root) records them in
#      STAGER_STATE_DIR (default /var/lib/stager) and sets the node's
#      features when they changed, the site's own kept (only where
#      slurmd names the node, SLURMD_NODENAME);
#   5. the job's directory of scripts/slurm-prolog.sh is removed, as the
#      job's user, unless results in it could not be kept (or step 1 ran
#      out of time before it kept them, or failed after it opened the
#      scratch root, where the records of results are); a clean that
#      could not open the user's scratch root (no record, nothing to
#      keep) does not keep it.
#
# Install on every node, in slurm.conf:   Epilog=PREFIX/libexec/stager/epilog
# slurmd runs it as root with almost no environment (no PATH, no HOME):
# it sets its own PATH, and `make install` writes the paths of the stager
# it installed and of its settings into it.  It does no file work as
# root: everything runs as the job's user, so nothing a user put on
# scratch can make it touch another user's files.  Settings (optional) in
# SYSCONFDIR/default/stager (/etc/default/stager): STAGER_BIN,
# STAGER_JOB_TMP_BASE, STAGER_EPILOG_SEND_TIME, STAGER_EPILOG_CLEAN_TIME
# (seconds `clean --job` may take, default 120: results copied to kept/
# from another filesystem may need more), STAGER_STATE_DIR, and any
# STAGER_* setting for stager itself (STAGER_SITE_CONFIG, ...).  Problems go to stderr
# (slurmd's log; `stager doctor` runs this hook and shows them).  An
# epilog that fails drains the node, so this one always exits 0.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_USER:-}" ] || exit 0
case $SLURM_JOB_ID in *[!0-9]*) exit 0 ;; esac
defaults=@SYSCONFDIR@/default/stager
case $defaults in @*) defaults=/etc/default/stager ;; esac
if [ -r "$defaults" ]; then
	set -a
	. "$defaults"
	set +a
fi
bin=${STAGER_BIN:-@BINDIR@/stager}
case $bin in @*) bin=$(command -v stager || echo /usr/local/bin/stager) ;; esac
base=${STAGER_JOB_TMP_BASE:-/scratch/jobs}
send=${STAGER_EPILOG_SEND_TIME:-60}
# (past what test(1) compares, a number means "as long as it takes")
case $send in '' | *[!0-9]*) send=60 ;; ?????????*) send=99999999 ;; esac
clean_time=${STAGER_EPILOG_CLEAN_TIME:-120}
case $clean_time in '' | *[!0-9]* | 0) clean_time=120 ;; ?????????*) clean_time=99999999 ;; esac
node=${SLURMD_NODENAME:-$(hostname -s 2>/dev/null)}
say() { echo "stager epilog: job $SLURM_JOB_ID on $node: $*" >&2; }

# as_user SECONDS CMD...: CMD as the job's user, killed after SECONDS
as_user() {
	t=$1
	shift
	if [ "$(id -u)" -eq 0 ] && [ "$SLURM_JOB_USER" != root ]; then
		timeout -k 5 "$t" runuser -u "$SLURM_JOB_USER" -- "$@"
	else
		timeout -k 5 "$t" "$@"
	fi
}

if [ ! -x "$bin" ]; then
	say "no stager at '$bin' (set STAGER_BIN in $defaults): nothing cleaned, nothing kept"
	exit 0
fi
tmp=$(mktemp /tmp/stager-epilog.XXXXXX) || exit 0
trap 'rm -f "$tmp"' EXIT
rc=0
as_user "$clean_time" "$bin" clean --quiet --job "$SLURM_JOB_ID" >/dev/null 2>"$tmp" || rc=$?
notes=$(grep -e "cannot be kept" "$tmp")
# the job's directory stays only for results in it that clean could not
# keep (said by clean, line by line) or had no time to keep
keep_dir=
case $rc in
0) ;;
124 | 137)
	# stopped before it kept what the job never collected (waiting for
	# another clean of the user's, copying large results): the job's
	# directory stays, and the user's next clean on this node keeps them
	say "stager clean --job took more than $clean_time s and was stopped"
	notes="$notes
stager clean --job took more than $clean_time s and was stopped: results the job did not collect stay in $base/$SLURM_JOB_ID on $node (\`srun -w $node -N1 -n1 stager clean\` keeps them)"
	keep_dir=1
	;;
*)
	if [ -n "$notes" ]; then
		keep_dir=1 # said below
	elif grep -q "nothing of job $SLURM_JOB_ID to keep" "$tmp"; then
		# no scratch root of the user's could be opened (a missing
		# shared parent, say): no record of results, nothing to keep
		say "nothing to keep; clean failed: $(grep -v -e "^ *$" -e "nothing of job" "$tmp" | tail -n 3 | tr '\n' ' ')"
	else
		# clean failed after it opened the scratch root, where the
		# records of the job's results are: what it did not get to
		# stays, and the user's next clean on this node keeps it
		say "stager clean --job failed (exit $rc): $(grep -v "^ *$" "$tmp" | tail -n 3 | tr '\n' ' ')"
		notes="stager clean --job failed before it kept what the job did not collect: its directory stays, $base/$SLURM_JOB_ID on $node (\`srun -w $node -N1 -n1 stager clean\` keeps the results)"
		keep_dir=2
	fi
	;;
esac
# what clean kept goes to its DEST now, within the time allowed; what
# stays is said in the lines "results for ... are kept on ..."
if [ "$send" -gt 0 ] && grep -q "were never fully collected" "$tmp"; then
	as_user "$send" "$bin" collect --kept --job "$SLURM_JOB_ID" >/dev/null 2>"$tmp"
	notes="$notes
$(grep -e "are kept on" -e "collected kept results" "$tmp")"
fi
if [ "$send" -eq 0 ]; then
	notes="$notes
$(grep -e "were never fully collected" "$tmp")"
fi
notes=$(printf '%s\n' "$notes" | sed '/^$/d')
if [ -n "$notes" ]; then
	# at the end of the job's log, where its user looks first
	log=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/^ *StdOut=//p' | head -n 1)
	case $log in
	/*) printf 'stager epilog (%s, after the job ended):\n%s\n' "$node" "$notes" |
		as_user 10 sh -c '[ -f "$1" ] && [ ! -L "$1" ] && cat >>"$1"' sh "$log" ;;
	esac
fi
# data gravity: the packs cached here become the node's features (the
# user's side lists, root's records and tells Slurm; both do nothing
# unless the site's node_features is yes).  Only where slurmd names the
# node: a run by hand or by `stager doctor` on a host that is no Slurm
# node (no SLURMD_NODENAME) has no node features to set.
if [ "$(id -u)" -eq 0 ] && [ -n "${SLURMD_NODENAME:-}" ]; then
	as_user 30 "$bin" features 2>/dev/null |
		timeout -k 5 30 "$bin" features --update --quiet --node "$node" \
			--user "$SLURM_JOB_USER" --state-dir "${STAGER_STATE_DIR:-/var/lib/stager}" \
			>/dev/null 2>"$tmp" ||
		say "stager features --update failed: $(tail -n 2 "$tmp" | tr '\n' ' ')"
fi
if [ "$keep_dir" = 1 ]; then
	say "results not collected could not be kept; leaving $base/$SLURM_JOB_ID"
	exit 0
elif [ "$keep_dir" = 2 ]; then
	say "leaving $base/$SLURM_JOB_ID: results the job did not collect may be in it"
	exit 0
fi
dir="$base/$SLURM_JOB_ID"
# only the directory the prolog made: a real directory, the job's user's
if [ -d "$dir" ] && [ ! -L "$dir" ] &&
	[ "$(stat -c %U "$dir" 2>/dev/null)" = "$SLURM_JOB_USER" ]; then
	# its contents as the user (read-only directories made writable
	# first: an unpacked dataset's, a module cache's); the directory
	# itself (in root's base) by root
	as_user 120 sh -c 'find "$1" -xdev -type d ! -perm -u=rwx -exec chmod u+rwx {} \; ;
		find "$1" -xdev -mindepth 1 -delete' sh "$dir" >/dev/null 2>&1
	rmdir "$dir" 2>/dev/null || say "cannot remove $dir"
fi
exit 0
