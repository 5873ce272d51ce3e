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
# the default), read by all three, and create it once: a directory owned by
# root, mode 0755, on the node-local disk (`install -d -m 0755 -o root
# /scratch/jobs`).
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
[ -r "$defaults" ] && . "$defaults"
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
# the node's reader slots (max_readers_per_node): a directory of root's,
# sticky and world-writable; one a user made first is theirs to turn off
slots=${STAGER_SLOT_DIR:-/run/lock/stager}
# (a node without /run/lock, a container's, say: the parents made too)
if [ ! -e "$slots" ] && [ ! -L "$slots" ]; then
	[ -d "$(dirname "$slots")" ] || mkdir -p -m 0755 "$(dirname "$slots")" 2>/dev/null
	mkdir -m 1777 "$slots" 2>/dev/null && chmod 1777 "$slots"
elif [ -L "$slots" ] || [ "$(stat -c %u "$slots")" != 0 ]; then
	echo "stager-prolog: $slots (slot_dir) is not root's: its owner can turn off every user's limit; remove it (the prolog then makes it)" >&2
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
