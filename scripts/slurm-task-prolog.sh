#!/bin/sh
# Slurm TaskProlog for stager: point the job's tasks at the directory
# scripts/slurm-prolog.sh made on node-local scratch.  Slurm runs it as the
# job's user before each task; its "export NAME=VALUE" lines enter the
# task's environment.  STAGER_JOB_TMP_BASE as in the prolog.
base=${STAGER_JOB_TMP_BASE:-/scratch/jobs}
dir="$base/${SLURM_JOB_ID:-}"
if [ -n "${SLURM_JOB_ID:-}" ] && [ -d "$dir" ] && [ -O "$dir" ]; then
	echo "export SLURM_TMPDIR=$dir"
	echo "export TMPDIR=$dir"
fi
exit 0
