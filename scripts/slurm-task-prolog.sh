#!/bin/sh
# Slurm TaskProlog for stager: point the job's tasks at the directory
# scripts/slurm-prolog.sh made on node-local scratch.  Slurm runs it as the
# job's user before each task; its "export NAME=VALUE" lines enter the
# task's environment.  The base comes from /etc/default/stager, as in the
# prolog.  (TMPDIR is left alone: where stager has no scratch_root it
# keeps its cache under $TMPDIR, which must outlive the job.)
[ -r /etc/default/stager ] && . /etc/default/stager
base=${STAGER_JOB_TMP_BASE:-/scratch/jobs}
dir="$base/${SLURM_JOB_ID:-}"
if [ -n "${SLURM_JOB_ID:-}" ] && [ -d "$dir" ] && [ ! -L "$dir" ] && [ -O "$dir" ]; then
	echo "export SLURM_TMPDIR=$dir"
fi
exit 0
