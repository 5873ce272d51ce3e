#!/bin/bash
# multi-node.sh with explicit steps: stage on every node, train, collect
# every node's results.
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
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
export MASTER_PORT=29500

# 1. stage on every node (one per node; each reads the pack once); the path
#    is the same on every node ($SLURM_TMPDIR/NAME, else the job directory
#    under the scratch root the site configured)
export DATA=$(srun --ntasks-per-node=1 stager stage -q "$DATASET" | head -1)
export OUT=$(dirname "$DATA")/out
srun --ntasks-per-node=1 mkdir -p "$OUT"
# 2. train
srun torchrun --nnodes="$SLURM_NNODES" --nproc-per-node=4 \
	--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \
	train.py --data "$DATA" --output "$OUT" || true
# 3. collect every node's results
srun --ntasks-per-node=1 bash -c 'stager collect "$OUT" "'"$RESULTS"'/node-$SLURM_NODEID"'
