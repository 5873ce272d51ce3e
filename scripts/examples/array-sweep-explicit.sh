#!/bin/bash
# array-sweep.sh with explicit steps.
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

DATA=$(stager stage "$DATASET")      # shared by the tasks on this node
OUT=$(dirname "$DATA")/out           # the job's scratch directory
mkdir -p "$OUT"

python train.py --data "$DATA" --output "$OUT" --lr "$LR" &
train=$!
trap 'kill -TERM $train 2>/dev/null' USR1 TERM
wait $train || true
wait $train 2>/dev/null || true
stager collect --pack "$OUT" "$RESULTS"   # writes $RESULTS.tar.zst
