"""bench/env_loader.py - a DataLoader with spawn workers, for bench/env.sh.

    ENV/bin/python bench/env_loader.py [--workers 4] [--samples 512] [--no-torch]

Iterates once over a small in-memory dataset through
torch.utils.data.DataLoader with WORKERS workers started with spawn: each
worker is a new interpreter (ENV/bin/python, sys.executable) that imports
torch from the environment again, which is what this measures.  With
--no-torch (bench/env.sh --quick, whose env has numpy alone) a spawn
multiprocessing.Pool of WORKERS does the same with numpy.  Prints one JSON
line: samples, sum (to check), seconds (from the start of this script,
imports included) and the file torch (or numpy) was imported from.
"""
import argparse
import json
import time

T0 = time.perf_counter()


def square_sum(i):
    """A worker's share in --no-torch mode: imports numpy in the worker."""
    import numpy

    return float(numpy.arange(i * 8, i * 8 + 8, dtype=numpy.float64).sum())


def with_torch(workers, samples):
    import warnings

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    # "4 workers, the system suggests 2": this 2-CPU machine, on purpose
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    data = TensorDataset(torch.arange(samples * 8, dtype=torch.float64).reshape(samples, 8))
    loader = DataLoader(data, batch_size=16, num_workers=workers, multiprocessing_context="spawn")
    n, total = 0, 0.0
    for (batch,) in loader:
        n += len(batch)
        total += float(batch.sum())
    return n, total, torch.__file__


def with_numpy(workers, samples):
    import multiprocessing

    import numpy

    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        parts = pool.map(square_sum, range(samples), chunksize=16)
    return len(parts), sum(parts), numpy.__file__


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    run = with_numpy if a.no_torch else with_torch
    n, total, where = run(a.workers, a.samples)
    print(json.dumps({"samples": n, "sum": total, "seconds": time.perf_counter() - T0, "from": where}))


if __name__ == "__main__":
    main()
