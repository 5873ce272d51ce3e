#!/bin/sh
# Slurm epilog for stager: remove what the finished job left on this node
# (its pins, its job directory, the pack copies of stage --all-nodes, and
# the directory scripts/slurm-prolog.sh made for it), then evict down to
# the quotas.
#
# Install on every node, in slurm.conf:   Epilog=/usr/local/libexec/stager/epilog
# It runs as root after the job ends (normally, by scancel or at its time
# limit).  It does no file work as root: it runs `stager clean` and the
# removal of the job's directory as the job's user, so nothing a user put
# on scratch can make it touch another user's files.  STAGER_BIN names the
# binary if it is not on root's PATH; STAGER_JOB_TMP_BASE (from
# /etc/default/stager) as in the prolog.
# An epilog that fails drains the node, so this one always exits 0.
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_USER:-}" ] || exit 0
# the site's settings first: they may name STAGER_BIN
[ -r /etc/default/stager ] && . /etc/default/stager
bin=${STAGER_BIN:-$(command -v stager || echo /usr/local/bin/stager)}
base=${STAGER_JOB_TMP_BASE:-/scratch/jobs}
as_user() {
	if [ "$(id -u)" -eq 0 ] && [ "$SLURM_JOB_USER" != root ]; then
		timeout 120 runuser -u "$SLURM_JOB_USER" -- "$@"
	else
		timeout 120 "$@"
	fi
}
# clean moves results the job never fully collected to the scratch root's
# kept/ first; if it could not (exit 7), the job's directory stays
rc=0
if [ -x "$bin" ]; then
	as_user "$bin" clean --quiet --job "$SLURM_JOB_ID" >/dev/null 2>&1 || rc=$?
fi
case $SLURM_JOB_ID in *[!0-9]*) exit 0 ;; esac
if [ "$rc" -eq 7 ]; then
	echo "stager epilog: job $SLURM_JOB_ID: results not collected could not be kept; leaving $base/$SLURM_JOB_ID" >&2
	exit 0
fi
dir="$base/$SLURM_JOB_ID"
# only the directory the prolog made: a real directory, the job's user's
if [ -d "$dir" ] && [ ! -L "$dir" ] &&
	[ "$(stat -c %U "$dir" 2>/dev/null)" = "$SLURM_JOB_USER" ]; then
	as_user rm -rf --one-file-system -- "$dir" >/dev/null 2>&1
	rmdir "$dir" 2>/dev/null
fi
exit 0
