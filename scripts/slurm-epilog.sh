#!/bin/sh
# Slurm epilog for stager: remove what the finished job left on this node
# (its pins and its job directory), then evict down to the quotas.
#
# Install on every node, in slurm.conf:   Epilog=/usr/local/libexec/stager-epilog
# It runs as root after the job ends (normally, by scancel or at its time
# limit).  It does no file work as root: it runs `stager clean` as the job's
# user, so nothing a user put on scratch can make it touch another user's
# files.  STAGER_BIN names the binary if it is not on root's PATH.  An
# epilog that fails drains the node, so this one always exits 0.
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_USER:-}" ] || exit 0
bin=${STAGER_BIN:-$(command -v stager || echo /usr/local/bin/stager)}
[ -x "$bin" ] || exit 0
if [ "$(id -u)" -eq 0 ] && [ "$SLURM_JOB_USER" != root ]; then
	timeout 120 runuser -u "$SLURM_JOB_USER" -- "$bin" clean --quiet --job "$SLURM_JOB_ID" \
		>/dev/null 2>&1
else
	timeout 120 "$bin" clean --quiet --job "$SLURM_JOB_ID" >/dev/null 2>&1
fi
exit 0
