#!/bin/bash
# Clean your own stager leftovers on every node, as yourself: what your
# finished or crashed jobs left on node-local scratch goes, what your running
# jobs use stays (stager asks Slurm).  Replaces `rm -rf /scratch/$USER*`
# sweeps, which also delete the data of your running jobs.
#
# Submit one per node:
#   for n in $(sinfo -h -N -o %N | sort -u); do sbatch -w "$n" cleanup-job.sh; done
#
#SBATCH --job-name=stager-clean
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --time=00:10:00
#SBATCH --mem=200M
set -eu
# leftovers of dead jobs, stale pins; also cache entries unused for a week
stager clean --older-than 7d
stager status
