#!/bin/sh
# Slurm prolog for stager: make the job's private directory on node-local
# scratch, $STAGER_JOB_TMP_BASE/$SLURM_JOB_ID (mode 0700, the job's user),
# which scripts/slurm-task-prolog.sh exports as SLURM_TMPDIR and TMPDIR
# and scripts/slurm-epilog.sh removes.  `stager stage` links datasets
# there by default; `stager run` keeps its job directory there.
#
# Install on every node, in slurm.conf:
#   Prolog=/usr/local/libexec/stager/prolog
#   TaskProlog=/usr/local/libexec/stager/task-prolog
#   Epilog=/usr/local/libexec/stager/epilog
#   PrologFlags=Alloc          (run it on every node when the job starts)
# and set STAGER_JOB_TMP_BASE the same in all three (default /scratch/jobs).
#
# It runs as root.  The base directory is root's (0755), so a user cannot
# plant a link there; the job's directory is created fresh.  A prolog that
# fails drains the node: this one fails only if it cannot make the
# directory, which the job could not run without.
base=${STAGER_JOB_TMP_BASE:-/scratch/jobs}
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_UID:-}" ] || exit 0
case $SLURM_JOB_ID in *[!0-9]*) exit 0 ;; esac
umask 022
mkdir -p "$base" && chown root "$base" && chmod 0755 "$base" || exit 1
dir="$base/$SLURM_JOB_ID"
if [ -e "$dir" ] || [ -L "$dir" ]; then
	# a leftover of an earlier job with this id: its owner's business
	rm -rf --one-file-system -- "$dir" || exit 1
fi
gid=${SLURM_JOB_GID:-$(id -g "$SLURM_JOB_UID" 2>/dev/null || echo 0)}
install -d -m 0700 -o "$SLURM_JOB_UID" -g "$gid" "$dir" || exit 1
exit 0
