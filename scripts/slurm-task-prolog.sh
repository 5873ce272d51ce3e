#!/bin/sh
# Slurm TaskProlog for stager: point the job's tasks at the directory
# scripts/slurm-prolog.sh made on node-local scratch.  Slurm runs it as the
# job's user before each task; its "export NAME=VALUE" lines enter the
# task's environment.  The base comes from SYSCONFDIR/default/stager (/etc/default/stager), as in the
# prolog.  (TMPDIR is left alone: where stager has no scratch_root it
# keeps its cache under $TMPDIR, which must outlive the job.)
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
defaults=@SYSCONFDIR@/default/stager
case $defaults in @*) defaults=/etc/default/stager ;; esac
[ -r "$defaults" ] && . "$defaults"
base=${STAGER_JOB_TMP_BASE:-/scratch/jobs}
dir="$base/${SLURM_JOB_ID:-}"
# a site whose settings are not in /etc/stager.conf names them there: the
# job's stager commands find them too
[ -n "${STAGER_SITE_CONFIG:-}" ] && echo "export STAGER_SITE_CONFIG=$STAGER_SITE_CONFIG"
if [ -n "${SLURM_JOB_ID:-}" ] && [ -d "$dir" ] && [ ! -L "$dir" ] && [ -O "$dir" ]; then
	echo "export SLURM_TMPDIR=$dir"
fi
exit 0
