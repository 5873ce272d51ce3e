"""stager.torch: a pack as a PyTorch dataset.

    import torch.utils.data as tud
    from stager.torch import PackDataset, PackSampler

    ds = PackDataset("/data/imagenet.tar.zst", transform=decode)
    sampler = PackSampler(ds, shuffle=True, seed=0, rank=rank, world_size=world,
                          batch_size=256, num_workers=4)
    loader = tud.DataLoader(ds, batch_size=256, sampler=sampler, num_workers=4,
                            persistent_workers=True)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            ...

PackDataset pickles to its path and digest (a few hundred bytes, not the
manifest) and opens the pack again in each DataLoader worker, with fork and
spawn alike; a pack that changed since is refused.  persistent_workers=True
keeps the workers from one epoch to the next: without it, each epoch starts
new ones, and a spawn worker imports torch again.  PackSampler shuffles
frames, then the files of a window of frames, so that each frame is read
about once per epoch while the order stays well mixed; its state_dict()
resumes an epoch where it stopped.

torch is imported here only: ``import stager`` does not need it.
"""

import array
import os
import random

import torch.utils.data

from . import IntegrityError, Pack

__all__ = ["PackDataset", "PackSampler"]


class PackDataset(torch.utils.data.Dataset):
    """PackDataset(path, transform=None, cache_bytes=64 MiB): the pack's
    regular files as a map-style dataset, in pack order.

    ds[i] is (name, data): the file's path in the pack and its bytes,
    checked against its XXH3-128; with transform, transform(name, data)
    instead.  len(ds) is the number of files.  Each process (each
    DataLoader worker) opens the pack once, when it first reads; the
    manifest is kept in C, not as Python objects, so a worker's memory does
    not grow as it reads.
    """

    def __init__(self, path, transform=None, cache_bytes=64 << 20):
        self.path = os.path.abspath(os.fspath(path))
        self.transform = transform
        self.cache_bytes = cache_bytes
        pack = Pack(self.path, cache_bytes)
        self.digest = pack.digest
        self._len = len(pack)
        self._pack, self._pid = pack, os.getpid()

    def __len__(self):
        return self._len

    def __getstate__(self):
        return {"path": self.path, "digest": self.digest, "len": self._len,
                "transform": self.transform, "cache_bytes": self.cache_bytes}

    def __setstate__(self, state):
        self.path = state["path"]
        self.digest = state["digest"]
        self._len = state["len"]
        self.transform = state["transform"]
        self.cache_bytes = state["cache_bytes"]
        self._pack, self._pid = None, None

    @property
    def pack(self):
        """This process's Pack (opened again after a fork or in a new process)."""
        if self._pack is None or self._pid != os.getpid():
            pack = Pack(self.path, self.cache_bytes)
            if pack.digest != self.digest or len(pack) != self._len:
                pack.close()
                raise IntegrityError(
                    5, "the pack changed since the dataset was made (its digest is now "
                    "%s, not %s): make the dataset again" % (pack.digest[:16], self.digest[:16]),
                    self.path)
            self._pack, self._pid = pack, os.getpid()
        return self._pack

    def __getitem__(self, index):
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("index %d out of range for %d files" % (index, self._len))
        pack = self.pack
        name = pack._name(index)
        data = pack.read(index)
        if self.transform is not None:
            return self.transform(name, data)
        return name, data

    def _local_pack(self):
        """This process's Pack if it is open already, else None."""
        return self._pack if self._pack is not None and self._pid == os.getpid() else None

    def frames(self):
        """Each file's frame (the frame of its first byte), as array('I')."""
        out = array.array("I")
        out.frombytes(self.pack._frames())
        return out


class PackSampler(torch.utils.data.Sampler):
    """PackSampler(dataset, shuffle=True, seed=0, rank=0, world_size=1,
    drop_last=False, window=4, batch_size=None, num_workers=0): a
    frame-aware order of a PackDataset's indices.

    With shuffle, each epoch shuffles the pack's frames, then the files of
    each window of `window` consecutive frames of that order: a frame's
    files come close together, so that it is fetched and decoded about once
    an epoch (a window fits the reader's cache), while the order is still
    well mixed.  Without shuffle, pack order.  set_epoch(n) gives epoch n
    its own order (seed + n).

    Ranks (world_size of them) get disjoint slices of equal length of the
    epoch's order; together they cover it (without drop_last, the last
    slice is completed from the start of the order, as DistributedSampler
    does; with it, the remainder is left out).  A rank's slice is a
    contiguous run of the order, so ranks read different frames.

    With a DataLoader of several workers, give the sampler the loader's
    batch_size and num_workers: the DataLoader hands batch k of an epoch to
    worker k % num_workers, and the sampler then fills each worker's
    batches from a run of the order of its own (frames shuffled, files
    shuffled within windows, as above), so that a frame is fetched and
    decoded by one worker, not by all of them.

    state_dict() says how far the epoch went (the indices taken from the
    iterator so far); a sampler given it by load_state_dict() yields exactly
    those not yet taken, then goes on as usual.
    """

    def __init__(self, dataset, shuffle=True, seed=0, rank=0, world_size=1, drop_last=False,
                 window=4, batch_size=None, num_workers=0):
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("rank %r of world_size %r" % (rank, world_size))
        if window < 1:
            raise ValueError("window must be at least 1")
        if num_workers < 0 or (num_workers > 1 and not batch_size) or \
                (batch_size is not None and batch_size < 1):
            raise ValueError("num_workers > 1 needs the loader's batch_size (at least 1)")
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.drop_last = drop_last
        self.window = window
        self.epoch = 0
        self._n = len(dataset)
        self._groups = None
        self._frames = None
        self._taken = 0
        self._resume = 0
        if drop_last:
            self._per_rank = self._n // world_size
        else:
            self._per_rank = (self._n + world_size - 1) // world_size

    def __len__(self):
        return self._per_rank

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _frame_groups(self):
        # runs of indices that start in the same frame (pack order keeps
        # them contiguous): [(start, end), ...]
        if self._groups is None:
            frames = self.dataset.frames() if hasattr(self.dataset, "frames") else None
            self._frames = frames
            if frames is None:
                self._groups = [(i, i + 1) for i in range(self._n)]
            else:
                groups, start = [], 0
                for i in range(1, self._n + 1):
                    if i == self._n or frames[i] != frames[start]:
                        groups.append((start, i))
                        start = i
                self._groups = groups
        return self._groups

    def _order(self):
        self._frame_groups()
        if not self.shuffle:
            order = list(range(self._n))
        else:
            rng = random.Random(self.seed * 1000003 + self.epoch)
            groups = list(self._frame_groups())
            rng.shuffle(groups)
            order = []
            for w in range(0, len(groups), self.window):
                chunk = []
                for start, end in groups[w:w + self.window]:
                    chunk.extend(range(start, end))
                rng.shuffle(chunk)
                order.extend(chunk)
        total = self._per_rank * self.world_size
        if total > len(order):
            pad = total - len(order)
            order.extend((order * (pad // max(len(order), 1) + 1))[:pad])
        lo = self.rank * self._per_rank
        mine = order[lo:lo + self._per_rank]
        if self.num_workers > 1 and self._frames is not None:
            mine = self._by_worker(mine)
        return mine

    def _by_worker(self, order):
        """order dealt to the workers as the DataLoader deals batches: its
        files grouped by frame (frames in the order they come), cut into
        one run a worker, each run shuffled within windows
        of frames again, the runs interleaved a batch at a time.  A frame
        is then one worker's, but for the frames at the cuts (one between
        two workers) and the last few batches."""
        runs = {}
        for index in order:
            runs.setdefault(self._frames[index], []).append(index)
        flat = [i for files in runs.values() for i in files]
        w, b, n = self.num_workers, self.batch_size, len(order)
        # rounds of one batch a worker; the last round as far as it goes, so
        # that only the very last batch is short and none straddles two runs
        rounds = max(-(-n // (w * b)), 1)
        q, r = divmod(n - (rounds - 1) * w * b, b)
        lens = [rounds * b if k < q else (rounds - 1) * b + (r if k == q else 0)
                for k in range(w)]
        rng = random.Random((self.seed * 1000003 + self.epoch) * 31 + self.rank)
        streams, at = [], 0
        for length in lens:
            part = flat[at:at + length]
            at += length
            frames, stream = [], []
            for i in part:
                if not frames or self._frames[frames[-1][0]] != self._frames[i]:
                    frames.append([])
                frames[-1].append(i)
            for k in range(0, len(frames), self.window):
                chunk = [i for files in frames[k:k + self.window] for i in files]
                if self.shuffle:
                    rng.shuffle(chunk)
                stream.extend(chunk)
            streams.append(stream)
        out = []
        for k in range(0, rounds * b, b):
            for stream in streams:
                out.extend(stream[k:k + b])
        return out

    def __iter__(self):
        order = self._order()
        start, self._resume = self._resume, 0
        self._taken = start
        ahead = self._ahead(order)
        for pos in range(start, len(order)):
            if ahead:
                ahead(pos)
            self._taken += 1
            yield order[pos]

    def _ahead(self, order):
        """Where the dataset reads in this process (no DataLoader workers):
        a function of the position that has the pack fetch, in the
        background, the frames the next window of the order starts, before
        they are read."""
        local = getattr(self.dataset, "_local_pack", None)
        pack = local() if local else None
        if pack is None or self._frames is None or not order:
            return None
        first = {}
        for pos, index in enumerate(order):
            first.setdefault(self._frames[index], pos)
        starts = sorted((pos, frame) for frame, pos in first.items())
        horizon = max(len(order) // max(len(starts), 1), 1) * self.window // 2
        state = {"next": 0}

        def ahead(pos):
            j = state["next"]
            while j < len(starts) and starts[j][0] <= pos + horizon:
                pack._prefetch(starts[j][1])
                j += 1
            state["next"] = j

        return ahead

    def state_dict(self):
        """How far this epoch went: a dict for load_state_dict()."""
        return {"version": 1, "epoch": self.epoch, "taken": self._taken, "seed": self.seed,
                "shuffle": self.shuffle, "rank": self.rank, "world_size": self.world_size,
                "drop_last": self.drop_last, "window": self.window, "files": self._n,
                "batch_size": self.batch_size, "num_workers": self.num_workers}

    def load_state_dict(self, state):
        """Resume: the next iteration yields the indices of state's epoch not
        yet taken.  The sampler must be made as the saved one was."""
        for key in ("seed", "shuffle", "rank", "world_size", "drop_last", "window", "files",
                    "batch_size", "num_workers"):
            mine = self._n if key == "files" else getattr(self, key)
            if state.get(key) != mine:
                raise ValueError("the saved sampler had %s=%r, this one %r" %
                                 (key, state.get(key), mine))
        taken = int(state["taken"])
        if not 0 <= taken <= self._per_rank:
            raise ValueError("taken=%r is not within this rank's %d indices" %
                             (taken, self._per_rank))
        self.epoch = int(state["epoch"])
        self._resume = taken
        self._taken = taken
