"""The order in which stager.torch reads a pack's files in an epoch.

A pack is a run of zstd frames, each of a few hundred files in pack order
(on a class-sorted tree, CLASS/NAME, a frame holds one or two classes).  A
reader keeps decoded frames in a cache of cache_bytes, least recently used
first out, and charges a frame its decoded bytes plus, until it is decoded
whole, its compressed ones.  An order reads each frame about once if the
frames it reads from at a time fit that cache; it is well mixed if those
frames come from all over the pack.

So an epoch is cut into windows: a window is a set of frames whose bytes
(decoded and compressed, the most the cache charges) fit a budget, half the
cache (the other half holds the frames that the prefetch fetches ahead for
the next window, and the last window's frames until they are evicted).
The frames are dealt to the windows stratified: cut the pack order into
strata of as many consecutive frames as there are windows, shuffle each
stratum and give its k-th frame to window k; each window then holds one
frame from every part of the pack, that is, from every part of a sorted
tree, not a few neighbouring frames.  The windows come in a random order,
and the files of a window are shuffled together.

A window's files are as mixed as a true permutation of the frames it
holds: with W frames of about one class each, a batch of B samples holds
about the classes of B draws from W classes.  Shuffle quality thus depends
on how many frames fit the cache, not on how small the files are.
"""

import random


def group_costs(frames, costs, n):
    """The groups of files (runs of indices that start in the same frame;
    pack order keeps them contiguous) and what each costs the cache: its
    frames' costs, from its first frame to the next group's (a big file's
    continuation frames are its group's).  frames: each file's first frame;
    costs: each frame's cost, or None.  Returns [(start, end, cost)]."""
    groups, start = [], 0
    for i in range(1, n + 1):
        if i == n or frames[i] != frames[start]:
            groups.append([start, i])
            start = i
    out = []
    for g, (lo, hi) in enumerate(groups):
        if costs is None:
            cost = 0
        else:
            first = frames[lo]
            last = frames[groups[g + 1][0]] if g + 1 < len(groups) else len(costs)
            cost = sum(costs[first:max(last, first + 1)])
        out.append((lo, hi, cost))
    return out


def windows(groups, budget, max_groups, rng):
    """Deal groups (in pack order; each (files, cost), files a list of
    indices) to windows of at most budget bytes (a group alone may be more)
    and at most max_groups groups (None: no limit), stratified as the module
    says.  Returns the windows, each a list of groups, in a random order."""
    n = len(groups)
    if n == 0:
        return []
    total = sum(cost for _, cost in groups)
    count = max(-(-total // budget) if budget > 0 else 1, 1)
    if max_groups:
        count = max(count, -(-n // max_groups))
    while True:
        count = min(count, n)
        dealt = [[] for _ in range(count)]
        for lo in range(0, n, count):
            stratum = list(range(lo, min(lo + count, n)))
            rng.shuffle(stratum)
            # a short last stratum goes to windows chosen at random
            slots = list(range(count))
            if len(stratum) < count:
                rng.shuffle(slots)
            for slot, g in zip(slots, stratum):
                dealt[slot].append(groups[g])
        fits = all(len(w) == 1 or sum(c for _, c in w) <= budget for w in dealt)
        if fits or count == n:
            break
        # windows of uneven bytes (big files): more of them
        count += max(count // 8, 1)
    rng.shuffle(dealt)
    return dealt


def mixed(groups, budget, max_groups, rng):
    """The files of groups ((files, cost) in pack order) in the order the
    module says: windows in a random order, each window's files shuffled."""
    out = []
    for window in windows(groups, budget, max_groups, rng):
        files = [i for group, _ in window for i in group]
        rng.shuffle(files)
        out.extend(files)
    return out


def dealt_to_workers(order, frames, cost_at, workers, batch, budget, max_groups, rng,
                     shuffle):
    """order dealt to the workers as a DataLoader deals batches (batch k to
    worker k % workers): its files grouped by frame, the frames in the
    order they come, cut into one run a worker, each run mixed again (as
    mixed()), the runs interleaved a batch at a time.  A frame is then one
    worker's, but for the frames at the cuts (one between two workers) and
    the last few batches.  cost_at: a group's cost by its first frame."""
    runs = {}
    for index in order:
        runs.setdefault(frames[index], []).append(index)
    flat = [i for files in runs.values() for i in files]
    n = len(order)
    # rounds of one batch a worker; the last round as far as it goes, so
    # that only the very last batch is short and none straddles two runs
    rounds = max(-(-n // (workers * batch)), 1)
    q, r = divmod(n - (rounds - 1) * workers * batch, batch)
    lens = [rounds * batch if k < q else (rounds - 1) * batch + (r if k == q else 0)
            for k in range(workers)]
    streams, at = [], 0
    for length in lens:
        part = flat[at:at + length]
        at += length
        if not shuffle:
            streams.append(part)
            continue
        byframe = {}
        for i in part:
            byframe.setdefault(frames[i], []).append(i)
        groups = [(byframe[f], cost_at(f)) for f in sorted(byframe)]
        streams.append(mixed(groups, budget, max_groups, rng))
    out = []
    for k in range(0, rounds * batch, batch):
        for stream in streams:
            out.extend(stream[k:k + batch])
    return out


def epoch_order(n, frames, costs, shuffle, seed, epoch, rank, world_size, per_rank, budget,
                max_groups, workers, batch):
    """This rank's indices for an epoch (see PackSampler)."""
    groups = group_costs(frames, costs, n) if frames is not None else \
        [(i, i + 1, 0) for i in range(n)]
    if not shuffle:
        order = list(range(n))
    elif frames is None:
        order = list(range(n))
        random.Random(seed * 1000003 + epoch).shuffle(order)
    else:
        rng = random.Random(seed * 1000003 + epoch)
        order = mixed([(range(lo, hi), cost) for lo, hi, cost in groups], budget, max_groups,
                      rng)
    total = per_rank * world_size
    if total > len(order):
        pad = total - len(order)
        order.extend((order * (pad // max(len(order), 1) + 1))[:pad])
    lo = rank * per_rank
    mine = order[lo:lo + per_rank]
    if workers > 1 and frames is not None:
        by_first = {frames[lo]: cost for lo, _, cost in groups}
        rng = random.Random((seed * 1000003 + epoch) * 31 + rank)
        mine = dealt_to_workers(mine, frames, lambda f: by_first.get(f, 0), workers, batch,
                                budget, max_groups, rng, shuffle)
    return mine
