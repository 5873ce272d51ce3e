"""bench/pack_read.py - what stager.Pack.read costs a file, by hand (issue 39).

    PYTHONPATH=build/python /usr/bin/python3 bench/pack_read.py [--files N]
        [--size BYTES] [--dir DIR] [--stager build/stager] [--passes P]

Makes DIR/tree of N files of about BYTES random (incompressible) bytes
each, packs it with `stager pack` (default frames), then reads every file
with Pack.read in pack order and in a shuffled order, each with the default
cache (64 MiB) and with cache_bytes=256 MiB, a fresh Pack for each run (the
pack's file is in the page cache: the figures are the reader's own cost).
Prints one line a run: microseconds and MB/s a file, frames fetched,
and bytes decoded against the files' bytes (1.00: each byte decoded once).
Also the same files read from the tree with open().read(), for reference.
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import time

import stager


def make(dir_, n, size, stager_bin):
    """The tree and its pack under dir_ (made once; kept for later runs)."""
    tree = os.path.join(dir_, "tree")
    pack = os.path.join(dir_, "tree.tar.zst")
    if os.path.exists(pack):
        return tree, pack
    shutil.rmtree(tree, ignore_errors=True)
    rnd = random.Random(39)
    for i in range(n):
        d = os.path.join(tree, "d%03d" % (i // 1000))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%06d.bin" % i), "wb") as f:
            f.write(rnd.randbytes(size + rnd.randrange(-size // 4, size // 4)))
    subprocess.run([stager_bin, "pack", tree, "-o", pack], check=True,
                   stdout=subprocess.DEVNULL)
    return tree, pack


def run(pack_path, order, cache):
    """Read the files of order (indices) with a fresh Pack; the figures."""
    kw = {} if cache is None else {"cache_bytes": cache}
    with stager.Pack(pack_path, **kw) as pack:
        total = 0
        t0 = time.perf_counter()
        for i in order:
            total += len(pack.read(i))
        dt = time.perf_counter() - t0
        st = pack.stats()
    return dt, total, st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--size", type=int, default=13000)
    ap.add_argument("--dir", default="/tmp/stager-bench-pack-read")
    ap.add_argument("--stager", default="build/stager")
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    tree, pack_path = make(a.dir, a.files, a.size, a.stager)
    with stager.Pack(pack_path) as pack:
        names = pack.names()
    n = len(names)
    with open(pack_path, "rb") as f:  # into the page cache
        while f.read(1 << 20):
            pass
    print("%d files, pack %.1f MB" % (n, os.path.getsize(pack_path) / 1e6))
    shuffled = list(range(n))
    random.Random(0).shuffle(shuffled)
    for label, order in (("pack order", list(range(n))), ("shuffled", shuffled)):
        for cache in (None, 256 << 20):
            best = None
            for _ in range(a.passes):
                r = run(pack_path, order, cache)
                best = r if best is None or r[0] < best[0] else best
            dt, total, st = best
            print("%-10s cache %-7s %6.1f us/file %7.0f MB/s  frames fetched %d/%d  "
                  "decoded/bytes %.2f"
                  % (label, "default" if cache is None else "%dM" % (cache >> 20),
                     dt / n * 1e6, total / dt / 1e6, st["frames_fetched"], st["frames"],
                     st["bytes_decoded"] / total))
    best = None
    for _ in range(a.passes):
        t0 = time.perf_counter()
        for name in (names[i] for i in shuffled):
            with open(os.path.join(tree, name), "rb") as f:
                f.read()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    print("files, shuffled, warm: %6.1f us/file" % (best / n * 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
