#!/bin/bash
# One training job on one node, with `stager run`: the dataset is staged to
# node-local scratch through the per-node cache, the results are collected
# back to the shared filesystem every 15 minutes, at the early warning 5
# minutes before the time limit, and at the end - also when the job is
# cancelled or killed at its limit - and the job's scratch is cleaned.
#
# Replaces:  cp -r /data/$USER/ds $TMPDIR/ && python train.py ... &&
#            cp -r $TMPDIR/out /home/$USER/results/   (lost at the time limit)
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

# `exec`: stager becomes the batch shell, so the B:USR1 warning reaches it.
# STAGER_DATA is the staged dataset (read-only), STAGER_OUT the results
# directory on scratch (collected to $RESULTS).
exec stager run --stage "$DATASET" --collect "out:$RESULTS" --every 15m -- \
	bash -c 'python train.py --data "$STAGER_DATA" --output "$STAGER_OUT"'
