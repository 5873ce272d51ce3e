#!/bin/bash
# A data-parallel job on 4 nodes: `stager run --all-nodes` stages the
# dataset on every node with one read of the shared filesystem (Slurm's
# sbcast fans it out), runs the training on all nodes, and collects every
# node's results to a directory of its own (%N: the node's name) -
# every 30 minutes, at the early warning, when the job is stopped, and at
# the end.
#
#SBATCH --job-name=ddp
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --gres=gpu:4
#SBATCH --time=24:00:00
#SBATCH --signal=B:USR1@600
set -eu
DATASET=${DATASET:-/data/$USER/datasets/imagenet.tar.zst}
RESULTS=${RESULTS:-$HOME/results/$SLURM_JOB_ID}
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
export MASTER_ADDR MASTER_PORT=29500

# exec: the early warning (B:USR1) reaches stager, which has every node
# collect at once.  stager passes the signal on only to a command that
# handles it; srun does, and hands it to every task.  A training script
# that checkpoints on SIGUSR1 handles it; one that does not would die of
# it 10 minutes early, so it is ignored here (trap "" USR1) - drop that
# if train.py handles it.  The single quotes
# leave $STAGER_DATA and $STAGER_OUT (set by stager run) to the tasks.
exec stager run --all-nodes --stage "$DATASET" --collect "out:$RESULTS/%N" --every 30m -- \
	srun --kill-on-bad-exit=1 bash -c 'trap "" USR1; exec torchrun --nnodes="$SLURM_NNODES" \
		--nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \
		train.py --data "$STAGER_DATA" --output "$STAGER_OUT"'
