#!/bin/bash
# A hyper-parameter sweep: 32 array tasks share one dataset.  On each node
# the first task stages it and the others reuse the cache entry (single
# flight: one read of the shared filesystem per node, not one per task);
# stager's node-wide reader slots keep the node's tasks from all reading
# the shared filesystem at once.
#
#SBATCH --job-name=sweep
#SBATCH --array=0-31
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --gres=gpu:1
#SBATCH --time=04:00:00
#SBATCH --signal=B:USR1@120
set -eu
DATASET=${DATASET:-/data/$USER/datasets/cifar-100.tar.zst}
RESULTS=${RESULTS:-$HOME/results/sweep-$SLURM_ARRAY_JOB_ID}/task-$SLURM_ARRAY_TASK_ID
LR=$(awk -v i="$SLURM_ARRAY_TASK_ID" 'BEGIN { printf "%.5f", 0.0001 * 2 ^ (i % 8) }')

# results as one pack per task (one file: easy on the inode quota)
exec stager run --stage "$DATASET" --collect "out:$RESULTS" --pack --every 30m -- \
	bash -c 'python train.py --data "$STAGER_DATA" --output "$STAGER_OUT" --lr '"$LR"
