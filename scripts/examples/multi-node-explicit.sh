#!/bin/bash
# multi-node.sh with explicit steps: stage on every node (one read of the
# shared filesystem), train, collect every node's results.
#
#SBATCH --job-name=ddp
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --gres=gpu:4
#SBATCH --time=24:00:00
set -eu
DATASET=${DATASET:-/data/$USER/datasets/imagenet.tar.zst}
RESULTS=${RESULTS:-$HOME/results/$SLURM_JOB_ID}
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
export MASTER_ADDR MASTER_PORT=29500

# 1. stage on every node: the path is the same everywhere
#    ($SLURM_TMPDIR/NAME, else a job directory under the scratch root)
DATA=$(stager stage --all-nodes -q "$DATASET")
OUT=$(dirname "$DATA")/out
export DATA OUT
srun --ntasks-per-node=1 mkdir -p "$OUT"
# 2. train
srun torchrun --nnodes="$SLURM_NNODES" --nproc-per-node=4 \
	--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \
	train.py --data "$DATA" --output "$OUT" || true
# 3. collect every node's results, each to a directory of its own
srun --ntasks-per-node=1 stager collect "$OUT" "$RESULTS/%N"
