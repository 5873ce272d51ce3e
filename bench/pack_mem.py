"""bench/pack_mem.py - what a process that reads a pack holds, by hand
(issue 39: a DataLoader worker's memory).

    PYTHONPATH=build/python /usr/bin/python3 bench/pack_mem.py PACK
        [--start spawn|fork] [--cache BYTES] [--window FRAMES]

Starts a process (spawn: a fresh interpreter, as DataLoader's spawn
workers; fork: a child of a parent that opened the pack, as fork workers)
that imports stager, opens PACK, reads one file, then reads every file in
windows of --window frames, the files of each window in a random order
(as PackSampler deals them), and prints its memory at each step: VmRSS
and private bytes (smaps_rollup Private_Clean + Private_Dirty), MiB.
"""

import argparse
import array
import multiprocessing as mp
import random
import sys


def mem():
    """(VmRSS, private) of this process, MiB."""
    rss = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    priv = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean", "Private_Dirty")):
                priv += int(line.split()[1]) / 1024
    return rss, priv


def child(path, cache, window, parent_pack, q):
    import stager
    steps = [("started", mem())]
    p = parent_pack if parent_pack is not None else stager.Pack(path, cache_bytes=cache)
    if parent_pack is None:
        steps.append(("opened", mem()))
    p.read(len(p) // 2)  # (a fork's first read opens the pack again)
    steps.append(("one file read", mem()))
    frames = array.array("I")
    frames.frombytes(p._frames())
    by_frame = {}
    for i, k in enumerate(frames):
        by_frame.setdefault(k, []).append(i)
    order = sorted(by_frame)
    rng = random.Random(0)
    rng.shuffle(order)
    for w in range(0, len(order), window):
        idx = [i for k in order[w:w + window] for i in by_frame[k]]
        rng.shuffle(idx)
        for i in idx:
            p.read(i)
    steps.append(("epoch read", mem()))
    q.put((steps, p.stats()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pack")
    ap.add_argument("--start", choices=("spawn", "fork"), default="spawn")
    ap.add_argument("--cache", type=int, default=64 << 20)
    ap.add_argument("--window", type=int, default=16)
    a = ap.parse_args()
    ctx = mp.get_context(a.start)
    parent_pack = None
    if a.start == "fork":
        import stager
        parent_pack = stager.Pack(a.pack, cache_bytes=a.cache)
    q = ctx.Queue()
    pr = ctx.Process(target=child, args=(a.pack, a.cache, a.window,
                                         parent_pack if a.start == "fork" else None, q))
    pr.start()
    steps, stats = q.get()
    pr.join()
    base = steps[0][1]
    for name, (rss, priv) in steps:
        print("%-14s VmRSS %6.1f MiB  private %6.1f MiB  (+%.1f)"
              % (name, rss, priv, priv - base[1]))
    print("frames %d, fetched %d, bytes decoded %d" % (stats["frames"], stats["frames_fetched"],
                                                       stats["bytes_decoded"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
