"""stager.torch: a pack as a PyTorch dataset.

    from stager.torch import PackDataset, PackLoader

    ds = PackDataset("/data/imagenet.tar.zst", transform=decode)
    loader = PackLoader(ds, batch_size=256, shuffle=True, seed=0, rank=rank,
                        world_size=world, num_workers=4, persistent_workers=True)
    if checkpoint:
        loader.load_state_dict(checkpoint["loader"])
    for epoch in range(loader.epoch, epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            ...
            save({..., "loader": loader.state_dict()})

PackDataset pickles to its path and digest (a few hundred bytes, not the
manifest) and opens the pack again in each DataLoader worker, with fork and
spawn alike; a pack that changed since is refused.  persistent_workers=True
keeps the workers from one epoch to the next: without it, each epoch starts
new ones, and a spawn worker imports torch again.

PackSampler orders an epoch so that each frame is read about once while the
order stays well mixed: windows of frames that fit the dataset's cache, each
drawn from all over the pack, their files shuffled together (see
stager._order).  PackLoader is a DataLoader over a PackSampler that counts
the batches the loop received: its state_dict(), taken between any two
batches, resumes exactly there, whatever num_workers, prefetch_factor and
persistent_workers.

torch is imported here only: ``import stager`` does not need it.
"""

import array
import os

import torch.utils.data

from . import IntegrityError, Pack, _order

__all__ = ["PackDataset", "PackSampler", "PackLoader"]


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
        """This process's Pack: opened in a new process (spawn); a forked
        worker keeps the parent's, which its first read makes its own while
        sharing the parent's decoded file list (a pack changed since is
        refused there)."""
        if self._pack is not None and self._pid != os.getpid():
            self._pid = os.getpid()
        if self._pack is None:
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

    def frame_costs(self):
        """What the reader's cache charges each frame at most, as
        array('Q'): its decoded bytes plus its compressed ones (kept until
        the frame is decoded whole)."""
        pack = self.pack
        out = array.array("Q")
        for k in range(pack.stats()["frames"]):
            _, size, _, tar_size = pack._frame(k)
            out.append(size + tar_size)
        return out


class PackSampler(torch.utils.data.Sampler):
    """PackSampler(dataset, shuffle=True, seed=0, rank=0, world_size=1,
    drop_last=False, window=None, batch_size=None, num_workers=0,
    window_bytes=None): a frame-aware order of a PackDataset's indices.

    With shuffle, each epoch cuts the pack's frames into windows whose
    bytes fit window_bytes (default: half the dataset's cache_bytes, each
    frame counted as the reader's cache charges it at most, decoded plus
    compressed), each window drawn from all over the pack (stratified: one
    frame from every part of it), and yields the windows in a random
    order, each window's files shuffled together.  A frame's files thus
    come while it is in the reader's cache, so that it is fetched and
    decoded about once an epoch, and a batch mixes as many parts of the
    pack as a window holds frames: how well does not depend on how small
    the files are.  window: at most that many frames a window besides.
    Without shuffle, pack order.  set_epoch(n) gives epoch n its own order
    (seed + n).

    Ranks (world_size of them) get disjoint slices of equal length of the
    epoch's order; together they cover it (without drop_last, the last
    slice is completed from the start of the order, as DistributedSampler
    does; with it, the remainder is left out).  A rank's slice is a
    contiguous run of the order, so ranks read different frames.

    With a DataLoader of several workers, give the sampler the loader's
    batch_size and num_workers (PackLoader does): the DataLoader hands
    batch k of an epoch to worker k % num_workers, and the sampler then
    fills each worker's batches from a run of the order of its own
    (windowed again as above, each worker having a cache of its own), so
    that a frame is fetched and decoded by one worker, not by all of them.
    A worker's batches then mix only its share of the frames: on a pack of
    few frames (fewer than num_workers windows' worth), less well than
    without workers.

    state_dict() counts the indices this sampler has handed out in the
    epoch ("taken"): with DataLoader workers that is what the workers
    fetched ahead (prefetch_factor x num_workers batches), more than the
    loop has received, so a loop resumed from it would skip samples.  To
    resume a training loop, use PackLoader, which counts the batches the
    loop received.
    """

    def __init__(self, dataset, shuffle=True, seed=0, rank=0, world_size=1, drop_last=False,
                 window=None, batch_size=None, num_workers=0, window_bytes=None):
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("rank %r of world_size %r" % (rank, world_size))
        if window is not None and window < 1:
            raise ValueError("window must be at least 1 frame, not %r" % (window,))
        if window_bytes is None:
            window_bytes = max(int(getattr(dataset, "cache_bytes", 64 << 20)) // 2, 1)
        if window_bytes < 1:
            raise ValueError("window_bytes must be at least 1, not %r" % (window_bytes,))
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
        self.window_bytes = int(window_bytes)
        self.epoch = 0
        self._n = len(dataset)
        self._frames = None
        self._costs = None
        self._taken = 0
        self._resume = 0
        if drop_last:
            self._per_rank = self._n // world_size
        else:
            self._per_rank = (self._n + world_size - 1) // world_size

    def __len__(self):
        return self._per_rank

    def set_epoch(self, epoch):
        """The next iteration is epoch `epoch`: from the start, but for the
        epoch that load_state_dict() left a place in."""
        if epoch != self.epoch:
            self._resume = 0
            self._taken = 0
        self.epoch = epoch

    def _load_frames(self):
        if self._frames is None and hasattr(self.dataset, "frames"):
            self._frames = self.dataset.frames()
            costs = getattr(self.dataset, "frame_costs", None)
            self._costs = costs() if costs else None

    def _order(self):
        self._load_frames()
        return _order.epoch_order(self._n, self._frames, self._costs, self.shuffle, self.seed,
                                  self.epoch, self.rank, self.world_size, self._per_rank,
                                  self.window_bytes, self.window, self.num_workers,
                                  self.batch_size)

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
        background, the frames the order comes to within the next
        half-window, before they are read."""
        local = getattr(self.dataset, "_local_pack", None)
        pack = local() if local else None
        if pack is None or self._frames is None or not order:
            return None
        first = {}
        for pos, index in enumerate(order):
            first.setdefault(self._frames[index], pos)
        starts = sorted((pos, frame) for frame, pos in first.items())
        per_frame = len(order) // max(len(starts), 1)
        if self._costs:
            avg = max(sum(self._costs) // max(len(self._costs), 1), 1)
            frames = max(self.window_bytes // avg, 1)
        else:
            frames = 4
        if self.window:
            frames = min(frames, self.window)
        horizon = max(per_frame * frames // 2, 1)
        state = {"next": 0}

        def ahead(pos):
            j = state["next"]
            while j < len(starts) and starts[j][0] <= pos + horizon:
                pack._prefetch(starts[j][1])
                j += 1
            state["next"] = j

        return ahead

    _KEYS = ("seed", "shuffle", "rank", "world_size", "drop_last", "window", "window_bytes",
             "files", "batch_size", "num_workers")

    def _config(self):
        return {key: self._n if key == "files" else getattr(self, key) for key in self._KEYS}

    def _check_config(self, state, keys):
        mine = self._config()
        for key in keys:
            if state.get(key) != mine[key]:
                raise ValueError("the saved %s had %s=%r, this one %r: make it as the saved "
                                 "one was" % (type(self).__name__, key, state.get(key),
                                              mine[key]))

    def state_dict(self):
        """How far this epoch went, as indices handed out ("taken": with
        DataLoader workers, those fetched ahead too): a dict for
        load_state_dict()."""
        out = {"version": 2, "epoch": self.epoch, "taken": self._taken,
               "counts": "indices handed out to the DataLoader (its prefetch included)"}
        out.update(self._config())
        return out

    def load_state_dict(self, state):
        """Resume: the next iteration yields the indices of state's epoch not
        yet taken; if it had taken them all, the next epoch whole.  The
        sampler must be made as the saved one was (ValueError if not)."""
        self._check_config(state, self._KEYS)
        taken = int(state["taken"])
        if not 0 <= taken <= self._per_rank:
            raise ValueError("taken=%r is not within this rank's %d indices" %
                             (taken, self._per_rank))
        self._place(int(state["epoch"]), taken)

    def _place(self, epoch, taken):
        """The next iteration: epoch `epoch` from index `taken` of this
        rank's order (the next epoch, from its start, at the end)."""
        if taken >= self._per_rank:
            epoch, taken = epoch + 1, 0
        self.epoch = epoch
        self._resume = taken
        self._taken = taken


class PackLoader(torch.utils.data.DataLoader):
    """PackLoader(dataset, batch_size=1, shuffle=True, seed=0, rank=0,
    world_size=1, drop_last=False, window_bytes=None, window=None,
    **DataLoader options): a DataLoader over a PackSampler of dataset,
    that resumes exactly.

    The sampler is made with the loader's batch_size and num_workers (each
    worker reads frames of its own, see PackSampler); drop_last drops both
    the ranks' remainder and the last short batch.  Any other DataLoader
    option may be given (num_workers, prefetch_factor, persistent_workers,
    collate_fn, pin_memory, multiprocessing_context ...), but not sampler,
    batch_sampler nor shuffle=<a sampler's choice>: the loader has its own.

    state_dict() says which epoch and how many of its batches the loop has
    received (iterating the loader counts them as it hands them over, not
    as the DataLoader fetches them ahead), taken between any two batches.
    A PackLoader made the same way and given it by load_state_dict() yields
    exactly the batches that were left, in the same order, sample for
    sample, whatever num_workers, prefetch_factor and persistent_workers
    (its order depends on batch_size and num_workers: give the same).  A
    state taken at the end of an epoch resumes at the next epoch, whole.
    set_epoch(n) for another epoch than the loaded one starts it whole.
    """

    def __init__(self, dataset, batch_size=1, shuffle=True, seed=0, rank=0, world_size=1,
                 drop_last=False, window_bytes=None, window=None, **options):
        for key in ("sampler", "batch_sampler"):
            if options.get(key) is not None:
                raise ValueError("PackLoader makes its own %s: do not give one" % key)
        if batch_size is None or batch_size < 1:
            raise ValueError("PackLoader needs a batch_size of at least 1, not %r" %
                             (batch_size,))
        workers = options.get("num_workers", 0)
        sampler = PackSampler(dataset, shuffle=shuffle, seed=seed, rank=rank,
                              world_size=world_size, drop_last=drop_last,
                              window_bytes=window_bytes, window=window, batch_size=batch_size,
                              num_workers=workers)
        super().__init__(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                         **options)
        self._batches = 0  # batches of sampler.epoch the loop received
        self._pending = False  # the next iteration starts at _batches, not 0

    @property
    def epoch(self):
        """The epoch the next iteration reads (after load_state_dict: the
        saved one, or the next if it was done)."""
        return self.sampler.epoch

    def set_epoch(self, epoch):
        """The next iteration is epoch `epoch`: from the start, but for the
        epoch that load_state_dict() left a place in."""
        if epoch != self.sampler.epoch:
            self._batches, self._pending = 0, False
        self.sampler.set_epoch(epoch)

    def _epoch_batches(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        start = self._batches if self._pending else 0
        self._pending = False
        self._batches = start
        self.sampler._resume = self.sampler._taken = start * self.batch_size
        for batch in super().__iter__():
            self._batches += 1
            yield batch

    def state_dict(self):
        """Where the loop is: the epoch and the batches of it received, and
        how the loader was made; a dict for load_state_dict() (plain
        values: torch.save and pickle keep it)."""
        out = {"version": 1, "epoch": self.sampler.epoch, "batches": self._batches,
               "samples": min(self._batches * self.batch_size, len(self.sampler)),
               "epoch_batches": self._epoch_batches()}
        out.update(self.sampler._config())
        return out

    def load_state_dict(self, state):
        """Resume at state's place: the next iteration yields the batches of
        its epoch the loop had not received; at an epoch's end, the next
        epoch whole.  The loader must be made as the saved one was, with
        the same dataset, batch_size and num_workers (ValueError if not)."""
        if not isinstance(state, dict) or "batches" not in state:
            raise ValueError("not a PackLoader state (a PackSampler's? give it to the "
                             "sampler's load_state_dict)")
        self.sampler._check_config(state, PackSampler._KEYS)
        batches, total = int(state["batches"]), self._epoch_batches()
        if not 0 <= batches <= total:
            raise ValueError("batches=%r is not within this rank's %d batches an epoch" %
                             (batches, total))
        epoch = int(state["epoch"])
        if batches == total:
            epoch, batches = epoch + 1, 0
        self.sampler._place(epoch, 0)
        self._batches, self._pending = batches, True
