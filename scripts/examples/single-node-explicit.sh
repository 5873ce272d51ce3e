#!/bin/bash
# The job of single-node.sh written with explicit steps, for those who
# prefer them: stage, a background collector, the training, a last collect.
#
#SBATCH --job-name=train
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --gres=gpu:1
#SBATCH --time=12:00:00
#SBATCH --signal=B:USR1@300
set -eu
DATASET=${DATASET:-/data/$USER/datasets/imagenet-mini.tar.zst}
RESULTS=${RESULTS:-$HOME/results/$SLURM_JOB_ID}

# the dataset, through the node cache (a warm node costs one stat())
DATA=$(stager stage "$DATASET")
# beside it, in the job's scratch directory (which the epilog cleans)
OUT=$(dirname "$DATA")/out
mkdir -p "$OUT"

# collect every 15 minutes in the background (idle I/O priority)
stager collect --every 15m "$OUT" "$RESULTS" &
collector=$!

# the early warning and scancel/time limit: stop training, let the
# collector finish (bash runs traps once the foreground command returns,
# so the training runs in the background and we wait for it)
python train.py --data "$DATA" --output "$OUT" &
train=$!
trap 'kill -TERM $train 2>/dev/null' USR1 TERM
wait $train || true
wait $train 2>/dev/null || true

# (on scancel or the time limit Slurm's SIGTERM may have ended it already)
kill -TERM $collector 2>/dev/null || true
wait $collector || true
stager collect "$OUT" "$RESULTS"   # the final results (only what changed)
# the epilog (scripts/slurm-epilog.sh) cleans the job's scratch and pins
