#!/bin/bash
# A data-parallel job on 4 nodes: one `stager run` per node (srun), each
# staging the dataset on its own node and collecting that node's results to
# a directory of its own.  (Until `stager stage --all-nodes` lands, each node
# reads the pack from the shared filesystem; stager's node and cluster
# limits and the pack's single sequential read keep that gentle.)
#
#SBATCH --job-name=ddp
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --gres=gpu:4
#SBATCH --time=24:00:00
#SBATCH --signal=USR1@600
set -eu
DATASET=${DATASET:-/data/$USER/datasets/imagenet.tar.zst}
RESULTS=${RESULTS:-$HOME/results/$SLURM_JOB_ID}
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
export MASTER_PORT=29500

# --signal without B: reaches the job's steps: each node's stager collects
# at the warning and passes it to torchrun
srun --kill-on-bad-exit=1 bash -c '
	exec stager run --stage "'"$DATASET"'" \
		--collect "out:'"$RESULTS"'/node-$SLURM_NODEID" --every 30m -- \
		torchrun --nnodes="$SLURM_NNODES" --nproc-per-node=4 \
			--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \
			train.py --data "$STAGER_DATA" --output "$STAGER_OUT"'
