"""One rank of test_loader's distributed run: PackLoader under
torch.distributed (gloo, 2 ranks), a step an all_reduce, a checkpoint of
both ranks' loader states every 3 steps (rank 0 writes it, atomically), the
batches received written to log-RANK (a JSON line each) as the step ends.
With "resume", the loop starts from the checkpoint and the log drops what
came after it (what a killed job did after its last checkpoint is lost).

    loader_rank.py PACK DIR RANK start|resume EPOCHS
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from stager.torch import PackDataset, PackLoader

WORLD = 2


def name_only(name, data):
    return name


def as_list(batch):
    return batch


def main(pack, top, rank, phase, epochs):
    dist.init_process_group("gloo", init_method="file://" + os.path.join(top, "init-" + phase),
                            rank=rank, world_size=WORLD)
    ds = PackDataset(pack, transform=name_only)
    loader = PackLoader(ds, batch_size=5, shuffle=True, seed=7, rank=rank, world_size=WORLD,
                        num_workers=2, prefetch_factor=2, persistent_workers=True,
                        collate_fn=as_list, multiprocessing_context="fork")
    ckpt = os.path.join(top, "ckpt.pt")
    log = os.path.join(top, "log-%d" % rank)
    if phase == "resume":
        state = torch.load(ckpt)["loaders"][rank]
        loader.load_state_dict(state)
        with open(log) as f:
            lines = [json.loads(line) for line in f if line.endswith("\n")]
        keep = [x for x in lines if (x["epoch"], x["batch"]) < (state["epoch"], state["batches"])]
        with open(log, "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in keep)
    with open(log, "a") as out:
        for epoch in range(loader.epoch, epochs):
            loader.set_epoch(epoch)
            for batch in loader:
                k = loader.state_dict()["batches"] - 1
                t = torch.tensor([len(batch)])
                dist.all_reduce(t)
                out.write(json.dumps({"epoch": epoch, "batch": k, "names": batch}) + "\n")
                out.flush()
                if (k + 1) % 3 == 0:
                    states = [None] * WORLD
                    dist.all_gather_object(states, loader.state_dict())
                    if rank == 0:
                        torch.save({"loaders": states}, ckpt + ".tmp")
                        os.rename(ckpt + ".tmp", ckpt)
                time.sleep(0.01)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
