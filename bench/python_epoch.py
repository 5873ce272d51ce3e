"""bench/python_epoch.py - one epoch of a dataset through
torch.utils.data.DataLoader, for bench/python.sh (run it with Debian's
/usr/bin/python3 and PYTHONPATH=$B/python).

    python_epoch.py order PACK OUT [--seed S]
        the names of PACK's files in the order of PackSampler(shuffle=True,
        seed=S) for epoch 0, one a line, to OUT
    python_epoch.py epoch KIND SRC [--order FILE] [--workers N] [--batch N]
                                   [--seed S] [--check]
        one epoch; KIND is
          pack   PackDataset(SRC) + PackSampler(seed=S) (SRC: a pack)
          files  open() + read() of SRC/NAME for each NAME of --order, in
                 that order (SRC: a tree: a staged copy or a stager mount)
          tar    tarfile.open(mode='r|') over `zstd -dc SRC` (SRC: a plain
                 tar.zst), in archive order, as WebDataset reads a shard:
                 one shard, so worker 0 reads it all, the others none
        prints one JSON line: samples, bytes, seconds (from making the
        dataset to the last batch; not Python's start nor its imports),
        and each process's memory (/proc/self/status VmRSS and VmHWM,
        smaps_rollup private bytes) when its worker started, after the
        first file it read (the pack opened) and at the end of the epoch
        (map-style datasets: a probe batch for each worker after the
        epoch, not timed).  --check: also an order-independent checksum
        of (name, data) of every sample, computed in the workers (kept
        out of timed runs)
    python_epoch.py quality PACK [--batch N] [--seed S] [--workers W,W...]
                                 [--cache-mib M] [--label L]
        shuffle quality of PackSampler(shuffle=True, seed=S) on a pack of
        CLASS/NAME files, in the order the loop receives the batches for
        each W (the sampler given the batch size and W), against a true
        permutation (random.shuffle, seed S): the mean number of classes in
        a batch and the mean share of its most frequent class; then one
        epoch read in that order (W 0, in this process) with the pack's
        counters (bytes fetched, decoded) and its time; one JSON line
    python_epoch.py quality-table [--targets] [--quick 0|1] JSON...
        the markdown rows of bench/results-python.md for quality's lines
        (--targets: the rows of its targets' table)
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
import warnings
import zlib

import torch.utils.data as tud

# ---- memory of this process ---------------------------------------------------------


def mem_now():
    """VmRSS, VmHWM and private (smaps_rollup) bytes of this process."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    try:
        priv = 0
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Private_Clean", "Private_Dirty"):
                    priv += int(v.split()[0]) * 1024
        out["private"] = priv
    except OSError:
        pass
    return out


# what this process saw: at its start (worker_init), after its first read
_MEM = {"start": None, "first": None, "reads": 0, "every": 0, "trace": []}


def _traced():
    """After each read: the memory at the first, then every _MEM["every"]."""
    _MEM["reads"] += 1
    if _MEM["first"] is None:
        _MEM["first"] = mem_now()
    elif _MEM["every"] and _MEM["reads"] % _MEM["every"] == 0:
        m = mem_now()
        m["reads"] = _MEM["reads"]
        _MEM["trace"].append(m)


def worker_init(_wid):
    _MEM["start"] = mem_now()


def collate_list(batch):
    """The batch as a list: no tensors, the bytes as they are."""
    return batch


def collate_check(batch):
    """A (count, bytes, checksum) triple for the batch: workers do the sums."""
    n = b = s = 0
    probes = []
    for name, data in batch:
        if name == "__probe__":
            probes.append((name, data))
            continue
        n += 1
        b += len(data)
        s = (s + zlib.crc32(data, zlib.crc32(name.encode()))) % (1 << 64)
    return [("__sums__", (n, b, s))] + probes


# ---- datasets -----------------------------------------------------------------------


class Probed(tud.Dataset):
    """A map-style dataset whose negative indices are memory probes."""

    def __init__(self, inner):
        self.inner = inner

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        if i < 0:
            info = tud.get_worker_info()
            out = {"worker": info.id if info else -1, "pid": os.getpid(),
                   "start": _MEM["start"], "first": _MEM["first"], "end": mem_now(),
                   "reads": _MEM["reads"], "trace": _MEM["trace"]}
            pack = getattr(self.inner, "_pack", None)
            if pack is not None and getattr(self.inner, "_pid", None) == os.getpid():
                out["pack_stats"] = pack.stats()
            return ("__probe__", out)
        item = self.inner[i]
        _traced()
        return item


class FileDataset(tud.Dataset):
    """ROOT/NAME of each NAME, read whole with open() + read()."""

    def __init__(self, root, names):
        self.root = root
        self.names = names

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        name = self.names[i]
        with open(os.path.join(self.root, name), "rb", buffering=0) as f:
            return name, f.readall()


class TarStream(tud.IterableDataset):
    """The regular files of a tar.zst in archive order, decoded by a zstd
    subprocess: one shard, read by worker 0 (the others yield nothing)."""

    def __init__(self, path):
        self.path = path

    def __iter__(self):
        info = tud.get_worker_info()
        if info is not None and info.id != 0:
            return
        if _MEM["start"] is None:
            _MEM["start"] = mem_now()
        proc = subprocess.Popen(["zstd", "-dcq", self.path], stdout=subprocess.PIPE,
                                bufsize=1 << 20)
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tf:
                for m in tf:
                    if not m.isfile():
                        continue
                    data = tf.extractfile(m).read()
                    _traced()
                    yield m.name, data
            # what zstd may still have to say: nothing, it has ended
            rest = proc.stdout.read()
            del rest
        finally:
            proc.stdout.close()
            rc = proc.wait()
        if rc != 0:
            raise RuntimeError("zstd -dc %s: exit status %d" % (self.path, rc))
        info = tud.get_worker_info()
        yield ("__probe__", {"worker": info.id if info else -1, "pid": os.getpid(),
                             "start": _MEM["start"], "first": _MEM["first"], "end": mem_now(),
                             "reads": _MEM["reads"], "trace": _MEM["trace"]})


def read_order(path):
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return [line.rstrip("\n") for line in f if line.rstrip("\n")]


# ---- commands -----------------------------------------------------------------------


def cmd_order(a):
    from stager.torch import PackDataset, PackSampler
    ds = PackDataset(a.src)
    sampler = PackSampler(ds, shuffle=True, seed=a.seed)
    sampler.set_epoch(0)
    pack = ds.pack
    with open(a.out, "w", encoding="utf-8", errors="surrogateescape") as f:
        for i in sampler:
            f.write(pack._name(i) + "\n")


def batches_of(order, batch, workers):
    """The epoch's batches, then one probe batch for each process."""
    out = [order[k:k + batch] for k in range(0, len(order), batch)]
    nprobe = max(workers, 1)
    return out, [[-1 - w] for w in range(nprobe)]


class BatchList(tud.Sampler):
    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


def cmd_epoch(a):
    mem_main0 = mem_now()
    # memory of each reading process 4 times along the epoch (besides first
    # and end); the workers inherit this at the fork
    if a.kind != "tar" or a.workers == 0:
        _MEM["every"] = max(1, a.expect // (max(a.workers, 1) * 4)) if a.expect else 0
    else:
        _MEM["every"] = max(1, a.expect // 4) if a.expect else 0
    collate = collate_check if a.check else collate_list
    t0 = time.monotonic()
    if a.kind == "tar":
        ds = TarStream(a.src)
        loader = tud.DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                                collate_fn=collate, worker_init_fn=worker_init)
    else:
        if a.kind == "pack":
            from stager.torch import PackDataset, PackSampler
            inner = PackDataset(a.src, cache_bytes=a.cache_mib << 20)
            # the loader's batch size and workers: each worker's batches
            # from frames of its own
            dealt = {"batch_size": a.batch, "num_workers": a.workers} if a.workers > 1 else {}
            sampler = PackSampler(inner, shuffle=True, seed=a.seed, window=a.window, **dealt)
            sampler.set_epoch(0)
            order = list(sampler)
        else:
            names = read_order(a.order)
            inner = FileDataset(a.src, names)
            order = list(range(len(names)))
        real, probes = batches_of(order, a.batch, a.workers)
        ds = Probed(inner)
        loader = tud.DataLoader(ds, batch_sampler=BatchList(real + probes),
                                num_workers=a.workers, collate_fn=collate,
                                worker_init_fn=worker_init)
        nreal = len(real)
    _MEM["start"] = mem_now() if a.workers == 0 else None
    samples = nbytes = sums = 0
    seconds = None
    probes_seen = []
    first_batch = None
    nb = 0
    for b in loader:
        for name, data in b:
            if name == "__probe__":
                probes_seen.append(data)
            elif name == "__sums__":
                samples += data[0]
                nbytes += data[1]
                sums = (sums + data[2]) % (1 << 64)
            else:
                samples += 1
                nbytes += len(data)
        nb += 1
        if first_batch is None:
            first_batch = time.monotonic() - t0
        if a.kind != "tar" and nb == nreal:
            seconds = time.monotonic() - t0
    end = time.monotonic() - t0
    if seconds is None:
        seconds = end
    out = {"kind": a.kind, "workers": a.workers, "batch": a.batch, "samples": samples,
           "bytes": nbytes, "seconds": round(seconds, 6),
           "first_batch_seconds": round(first_batch or 0, 6),
           "main_mem": {"before": mem_main0, "end": mem_now()}, "procs": probes_seen}
    if a.check:
        out["checksum"] = "%016x" % sums
    print(json.dumps(out))


def cmd_sums(a):
    """The checksum of a tree as --check computes it (the reference)."""
    names = read_order(a.order)
    n = b = s = 0
    for name in names:
        with open(os.path.join(a.src, name), "rb") as f:
            data = f.read()
        n += 1
        b += len(data)
        s = (s + zlib.crc32(data, zlib.crc32(name.encode()))) % (1 << 64)
    print(json.dumps({"samples": n, "bytes": b, "checksum": "%016x" % s}))


def batch_mix(classes, batch):
    """Mean classes per full batch and mean share of a batch's top class."""
    kinds, tops = [], []
    for k in range(0, len(classes) - batch + 1, batch):
        part = classes[k:k + batch]
        counts = {}
        for c in part:
            counts[c] = counts.get(c, 0) + 1
        kinds.append(len(counts))
        tops.append(max(counts.values()) / batch)
    if not kinds:
        return None, None
    return sum(kinds) / len(kinds), sum(tops) / len(tops)


def cmd_quality(a):
    import random
    from stager.torch import PackDataset, PackSampler
    ds = PackDataset(a.src, cache_bytes=a.cache_mib << 20)
    pack = ds.pack
    names = pack.names()
    cls = [n.split("/")[-2] if "/" in n else "" for n in names]
    perm = list(range(len(ds)))
    random.Random(a.seed).shuffle(perm)
    out = {"label": a.label, "pack": a.src, "files": len(ds), "classes": len(set(cls)),
           "frames": pack.stats()["frames"], "batch": a.batch, "cache_mib": a.cache_mib,
           "perm": batch_mix([cls[i] for i in perm], a.batch), "workers": {}}
    order0 = None
    for w in [int(x) for x in a.workers.split(",")]:
        dealt = {"batch_size": a.batch, "num_workers": w} if w > 1 else {}
        sampler = PackSampler(ds, shuffle=True, seed=a.seed, **dealt)
        t0 = time.monotonic()
        order = list(sampler)
        order_s = time.monotonic() - t0
        if order0 is None:
            order0 = order
        out["workers"][w] = {"mix": batch_mix([cls[i] for i in order], a.batch),
                             "order_seconds": round(order_s, 3)}
        out["window_bytes"] = sampler.window_bytes
    decoded = sum(pack._frame(k)[3] for k in range(out["frames"]))
    t0 = time.monotonic()
    for i in order0:
        ds[i]
    secs = time.monotonic() - t0
    st = pack.stats()
    out.update({"read_seconds": round(secs, 3), "stats": st, "frames_bytes": decoded,
                "fetched_x": st["bytes_fetched"] / st["pack_bytes"],
                "decoded_x": st["bytes_decoded"] / max(decoded, 1)})
    print(json.dumps(out))


def cmd_quality_table(a):
    for path in a.json:
        with open(path) as f:
            d = json.loads(f.read().strip().splitlines()[-1])
        pk, pt = d["perm"]
        if a.targets:
            def met(ok):
                return "(quick)" if a.quick else ("yes" if ok else "**no**")
            for w, r in sorted(d["workers"].items(), key=lambda x: int(x[0])):
                x = r["mix"][0] / pk
                print("| classes a batch ≥ 0.8× a true permutation's, %s | %s | %.2f× | %s |"
                      % (d["label"], w, x, met(x >= 0.8)))
            x = max(d["fetched_x"], d["decoded_x"])
            print("| the pack fetched and decoded ≤ 1.2× once an epoch, %s | 0 | %.2f× | %s |"
                  % (d["label"], x, met(x <= 1.2)))
            continue
        for w, r in sorted(d["workers"].items(), key=lambda x: int(x[0])):
            k, t = r["mix"]
            read = ("%.2f×" % d["fetched_x"], "%.2f×" % d["decoded_x"],
                    "%.2f s" % d["read_seconds"]) if int(w) == 0 else ("", "", "")
            row = (d["label"], "{:,}".format(d["files"]), d["frames"], d["classes"], w,
                   "%.1f" % k, "%.1f" % pk, "**%.2f×**" % (k / pk), "%.3f" % t, "%.3f" % pt) + read
            print("| " + " | ".join(str(x) for x in row) + " |")


def main(argv):
    # "suggested max number of worker ... is 2": 4 is measured on purpose
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")
    p = argparse.ArgumentParser(prog="python_epoch.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("order")
    o.add_argument("src")
    o.add_argument("out")
    o.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("epoch")
    e.add_argument("kind", choices=("pack", "files", "tar"))
    e.add_argument("src")
    e.add_argument("--order")
    e.add_argument("--workers", type=int, default=0)
    e.add_argument("--batch", type=int, default=64)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--check", action="store_true")
    e.add_argument("--expect", type=int, default=0,
                   help="the number of files: memory traced each quarter of a process's share")
    e.add_argument("--cache-mib", type=int, default=64,
                   help="pack: PackDataset's cache_bytes, MiB (default 64, its default)")
    e.add_argument("--window", type=int, default=None,
                   help="pack: PackSampler's window, at most that many frames (default: "
                   "none, the window is half the cache in bytes)")
    s = sub.add_parser("sums")
    s.add_argument("src")
    s.add_argument("--order", required=True)
    q = sub.add_parser("quality")
    q.add_argument("src")
    q.add_argument("--batch", type=int, default=64)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--workers", default="0,2,4")
    q.add_argument("--cache-mib", type=int, default=64)
    q.add_argument("--label", default="")
    t = sub.add_parser("quality-table")
    t.add_argument("--targets", action="store_true", help="the rows of the targets' table")
    t.add_argument("--quick", type=int, default=0, help="1: a --quick run, targets not judged")
    t.add_argument("json", nargs="+")
    a = p.parse_args(argv)
    if a.cmd == "epoch" and a.kind == "files" and not a.order:
        p.error("files needs --order")
    {"order": cmd_order, "epoch": cmd_epoch, "sums": cmd_sums, "quality": cmd_quality,
     "quality-table": cmd_quality_table}[a.cmd](a)


if __name__ == "__main__":
    main(sys.argv[1:])
