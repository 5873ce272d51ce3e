#!/bin/sh
# Slurm prolog for stager: make the job's private directory on node-local
# scratch, $STAGER_JOB_TMP_BASE/$SLURM_JOB_ID (mode 0700, the job's user),
# which scripts/slurm-task-prolog.sh exports as SLURM_TMPDIR and
# scripts/slurm-epilog.sh removes.  `stager stage` links datasets there by
# default; `stager run` keeps its job directory there.
#
# Install on every node, in slurm.conf:
#   Prolog=/usr/local/libexec/stager/prolog
#   TaskProlog=/usr/local/libexec/stager/task-prolog
#   Epilog=/usr/local/libexec/stager/epilog
#   PrologFlags=Alloc          (run it on every node when the job starts)
# Set the base in SYSCONFDIR/default/stager (/etc/default/stager) (STAGER_JOB_TMP_BASE=/scratch/jobs,
# the default), read by all three: a directory owned by root, mode 0755,
# on the node-local disk, made here if its parent is root's
# (`install -d -m 0755 -o root /scratch/jobs` otherwise).  Before every
# job it also runs `stager doctor --prepare` (as root, with the site's
# settings): the shared parent of the users' scratch roots and the reader
# slots' directory are made there, as the site's settings name them.
#
# slurmd runs it as root with almost no environment (no PATH): it sets
# its own.  It runs as root, so it trusts nothing a user could have made: the base
# must be a real directory owned by root and not writable by others (else
# the prolog fails, which drains the node: an administrator must look).
# Inside it, the job's directory is created fresh; what an earlier job with
# the same id left there is removed as its owner, never as root.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
defaults=@SYSCONFDIR@/default/stager
case $defaults in @*) defaults=/etc/default/stager ;; esac
if [ -r "$defaults" ]; then
	# (exported: its STAGER_* settings reach stager below)
	set -a
	. "$defaults"
	set +a
fi
bin=${STAGER_BIN:-@BINDIR@/stager}
case $bin in @*) bin=$(command -v stager || echo /usr/local/bin/stager) ;; esac
base=${STAGER_JOB_TMP_BASE:-/scratch/jobs}
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_UID:-}" ] || exit 0
case $SLURM_JOB_ID in *[!0-9]*) exit 0 ;; esac
case $SLURM_JOB_UID in *[!0-9]*) exit 0 ;; esac
if [ ! -e "$base" ] && [ ! -L "$base" ]; then
	# made here only if its parent is root's and not world-writable
	parent=$(dirname "$base")
	[ -d "$parent" ] && [ ! -L "$parent" ] && [ "$(stat -c %u "$parent")" = 0 ] &&
		[ "$(stat -c %A "$parent" | cut -c9)" != w ] && mkdir -m 0755 "$base" 2>/dev/null
fi
if [ -L "$base" ] || [ ! -d "$base" ] || [ "$(stat -c %u "$base")" != 0 ] ||
	[ "$(stat -c %A "$base" | cut -c6)" = w ] || [ "$(stat -c %A "$base" | cut -c9)" = w ]; then
	echo "stager-prolog: $base must be a directory owned by root, not writable by others" >&2
	exit 1
fi
# the node's shared places, which no user can make safely for the others:
# the shared parent of the users' scratch roots (a site's scratch_root =
# /scratch/stager/$USER needs /scratch/stager, which users cannot make on
# a disk whose top is root's) and the reader slots (slot_dir), each made
# root's and 1777 if missing, with what stager itself reads (the site's
# settings and STAGER_* from $defaults: never the job user's own, no HOME
# here); one a user made first, theirs to chmod, is named and left alone.
# (What is wrong goes to stderr; the job still runs: a missing parent
# fails its stagers with the command that makes it.)
if [ -x "$bin" ]; then
	env -u HOME -u XDG_CONFIG_HOME timeout -k 5 60 "$bin" doctor --prepare --quiet |
		sed 's/^/stager-prolog: /' >&2
else
	echo "stager-prolog: no stager at '$bin' (set STAGER_BIN in $defaults): the scratch roots' parent and the reader slots were not made" >&2
fi
dir="$base/$SLURM_JOB_ID"
if [ -e "$dir" ] || [ -L "$dir" ]; then
	# a leftover of an earlier job with this id: removed as its owner
	owner=$(stat -c %u "$dir")
	if [ -d "$dir" ] && [ ! -L "$dir" ] && [ "$owner" != 0 ]; then
		# (its read-only directories made writable first)
		setpriv --reuid="$owner" --regid="$(stat -c %g "$dir")" --clear-groups \
			sh -c 'find "$1" -xdev -type d ! -perm -u=rwx -exec chmod u+rwx {} \; ;
				find "$1" -xdev -mindepth 1 -delete' sh "$dir" 2>/dev/null
	fi
	rmdir "$dir" 2>/dev/null || rm -f "$dir" 2>/dev/null || exit 1
fi
gid=${SLURM_JOB_GID:-$(id -g "$SLURM_JOB_UID" 2>/dev/null || echo 0)}
install -d -m 0700 -o "$SLURM_JOB_UID" -g "$gid" "$dir" || exit 1
exit 0
