"""stager.torch with Debian's python3-torch: a DataLoader with 2 workers under
spawn and fork, every sample compared with its source; the sampler's ranks
disjoint and complete, its frame-aware order, resume from state_dict; the
dataset's pickle."""
import os
import pickle
import random
import shutil
import tempfile
import unittest

import fixtures
import torch.utils.data as tud

import stager
from stager.torch import PackDataset, PackSampler


def as_list(batch):
    return batch


def name_and_size(name, data):
    return name, len(data), bytes(data[:16])


def name_and_pid(name, data):
    return name, os.getpid(), bytes(data)


class TorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ds = fixtures.Dataset(files=400)

    @classmethod
    def tearDownClass(cls):
        cls.ds.close()

    def epoch(self, context, workers=2, transform=None):
        ds = PackDataset(self.ds.pack, transform=transform)
        sampler = PackSampler(ds, shuffle=True, seed=3)
        loader = tud.DataLoader(ds, batch_size=16, sampler=sampler, num_workers=workers,
                                collate_fn=as_list, multiprocessing_context=context)
        seen = []
        for batch in loader:
            seen.extend(batch)
        return ds, seen

    def test_spawn(self):
        """a DataLoader with 2 workers under spawn: every sample is its source"""
        ds, seen = self.epoch("spawn")
        self.assertEqual(len(seen), len(ds))
        self.assertEqual(sorted(n for n, _ in seen), sorted(self.ds.files))
        for name, data in seen:
            self.assertEqual(bytes(data), self.ds.files[name], name)

    def test_fork_transform(self):
        """under fork, with a transform: transform(name, data) for each file"""
        ds, seen = self.epoch("fork", transform=name_and_size)
        self.assertEqual(len(seen), len(self.ds.files))
        for name, size, head in seen:
            self.assertEqual(size, len(self.ds.files[name]))
            self.assertEqual(head, self.ds.files[name][:16])

    def test_getitem(self):
        """ds[i] in pack order, negative indices, out of range"""
        ds = PackDataset(self.ds.pack)
        with stager.Pack(self.ds.pack) as p:
            names = p.names()
        self.assertEqual(len(ds), len(names))
        self.assertEqual(ds[0][0], names[0])
        self.assertEqual(ds[-1][0], names[-1])
        self.assertEqual(ds[5][1], self.ds.files[names[5]])
        with self.assertRaises(IndexError):
            ds[len(ds)]

    def test_pickle(self):
        """the dataset pickles to a few hundred bytes, and refuses a changed pack"""
        ds = PackDataset(self.ds.pack)
        blob = pickle.dumps(ds)
        self.assertLess(len(blob), 500)
        self.assertEqual(pickle.loads(blob)[3], ds[3])
        copy = os.path.join(self.ds.dir, "moving.tar.zst")
        fixtures.stager("pack", "-q", os.path.join(self.ds.src, "meta"), "-o", copy)
        moving = PackDataset(copy)
        blob = pickle.dumps(moving)
        fixtures.stager("pack", "-q", os.path.join(self.ds.src, "train"), "-o", copy)
        again = pickle.loads(blob)
        with self.assertRaises(stager.IntegrityError) as cm:
            again[0]
        self.assertIn("changed since the dataset was made", str(cm.exception))

    def test_frame_order(self):
        """shuffled, yet a frame's files come within one window"""
        ds = PackDataset(self.ds.pack)
        frames = ds.frames()
        sampler = PackSampler(ds, shuffle=True, seed=1, window=1)
        order = list(sampler)
        self.assertEqual(sorted(order), list(range(len(ds))))
        self.assertNotEqual(order, sorted(order))
        # window 1: each frame's files are one run of the order
        runs = [frames[order[0]]]
        for i in order[1:]:
            if frames[i] != runs[-1]:
                runs.append(frames[i])
        self.assertEqual(len(runs), len(set(frames)))
        # another epoch, another order; the same epoch, the same order
        sampler.set_epoch(1)
        self.assertNotEqual(list(sampler), order)
        sampler.set_epoch(0)
        self.assertEqual(list(sampler), order)
        self.assertEqual(list(PackSampler(ds, shuffle=False)), list(range(len(ds))))

    def test_ranks(self):
        """ranks: disjoint slices of equal length that together cover the epoch"""
        ds = PackDataset(self.ds.pack)
        n = len(ds)
        for world in (1, 2, 3, 7):
            for drop_last in (False, True):
                parts = [list(PackSampler(ds, seed=5, rank=r, world_size=world,
                                          drop_last=drop_last)) for r in range(world)]
                lens = {len(p) for p in parts}
                self.assertEqual(len(lens), 1)
                flat = [i for p in parts for i in p]
                if drop_last:
                    self.assertEqual(len(flat), n - n % world)
                    self.assertEqual(len(set(flat)), len(flat))
                else:
                    self.assertEqual(set(flat), set(range(n)))
                    self.assertEqual(len(flat), -(-n // world) * world)
                    # only the padding repeats
                    self.assertEqual(len(flat) - len(set(flat)), len(flat) - n)
        with self.assertRaises(ValueError):
            PackSampler(ds, rank=2, world_size=2)

    def test_resume(self):
        """state_dict mid-epoch: the resumed sampler yields exactly what was not taken"""
        ds = PackDataset(self.ds.pack)
        for world, rank in ((1, 0), (3, 1)):
            sampler = PackSampler(ds, seed=9, rank=rank, world_size=world)
            sampler.set_epoch(4)
            full = list(sampler)
            it = iter(sampler)
            taken = [next(it) for _ in range(37)]
            state = pickle.loads(pickle.dumps(sampler.state_dict()))
            fresh = PackSampler(ds, seed=9, rank=rank, world_size=world)
            fresh.load_state_dict(state)
            rest = list(fresh)
            self.assertEqual(taken + rest, full)
            # and the next epoch is whole again
            fresh.set_epoch(5)
            self.assertEqual(len(list(fresh)), len(full))
        wrong = PackSampler(ds, seed=10)
        with self.assertRaises(ValueError):
            wrong.load_state_dict(state)

    def test_resume_end_of_epoch(self):
        """a sampler's state at the end of an epoch, or set_epoch to another: that epoch whole"""
        ds = PackDataset(self.ds.pack)
        sampler = PackSampler(ds, seed=9)
        sampler.set_epoch(4)
        list(sampler)
        state = sampler.state_dict()
        self.assertEqual(state["taken"], len(ds))
        sampler.set_epoch(5)
        whole = list(sampler)
        fresh = PackSampler(ds, seed=9)
        fresh.load_state_dict(state)
        self.assertEqual(fresh.epoch, 5)
        self.assertEqual(list(fresh), whole)
        fresh = PackSampler(ds, seed=9)
        fresh.load_state_dict(state)
        fresh.set_epoch(state["epoch"] + 1)
        self.assertEqual(list(fresh), whole)
        fresh.load_state_dict(dict(state, taken=10))
        fresh.set_epoch(5)
        self.assertEqual(list(fresh), whole)

    def test_shuffle_quality(self):
        """class-sorted tiny files: a batch mixes >= 0.8x the classes of a true permutation,
        and each frame is fetched and decoded about once"""
        root = tempfile.mkdtemp(prefix="stager-py.", dir=os.environ.get("TMPDIR", "/var/tmp"))
        try:
            rng = random.Random(3)
            for c in range(100):
                os.makedirs(os.path.join(root, "src", "c%03d" % c))
                for k in range(50):
                    with open(os.path.join(root, "src", "c%03d" % c, "f%02d" % k), "wb") as f:
                        f.write(rng.randbytes(rng.randrange(2000, 4000)))
            pack = os.path.join(root, "sorted.tar.zst")
            fixtures.stager("pack", "-q", "--frame-size", "64K", os.path.join(root, "src"),
                            "-o", pack)
            # windows of half the cache, 12 MiB: three of ~90 frames of the
            # pack's ~270 (each frame charged its decoded and compressed
            # bytes), each window from all over the pack
            ds = PackDataset(pack, cache_bytes=24 << 20)
            names = ds.pack.names()
            sampler = PackSampler(ds, seed=0)
            self.assertEqual(sampler.window_bytes, 12 << 20)
            self.assertGreater(sum(ds.frame_costs()), 2 * sampler.window_bytes)
            order = list(sampler)
            self.assertEqual(sorted(order), list(range(len(ds))))
            perm = list(range(len(ds)))
            random.Random(0).shuffle(perm)

            def classes(order):
                per = [len({names[i].split("/")[0] for i in order[k:k + 64]})
                       for k in range(0, len(order) - 63, 64)]
                return sum(per) / len(per)

            mixed, true = classes(order), classes(perm)
            self.assertGreaterEqual(mixed, 0.8 * true, (mixed, true))
            for i in order:
                ds[i]
            st = ds.pack.stats()
            decoded = sum(ds.pack._frame(k)[3] for k in range(st["frames"]))
            self.assertLessEqual(st["bytes_fetched"], 1.2 * st["pack_bytes"], st)
            self.assertLessEqual(st["bytes_decoded"], 1.2 * decoded, st)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def test_by_worker(self):
        """with the loader's workers: each worker's batches from frames of its own"""
        d = fixtures.Dataset(files=2000, big=0, seed=11)
        try:
            ds = PackDataset(d.pack)
            frames = ds.frames()
            self.assertGreaterEqual(len(set(frames)), 4)
            for workers, batch in ((2, 8), (3, 5), (4, 64)):
                sampler = PackSampler(ds, seed=4, batch_size=batch, num_workers=workers)
                order = list(sampler)
                self.assertEqual(sorted(order), list(range(len(ds))))
                mine = [set() for _ in range(workers)]
                for k in range(0, len(order), batch):
                    mine[(k // batch) % workers].update(frames[i] for i in order[k:k + batch])
                shared = set()
                for a in range(workers):
                    for b in range(a + 1, workers):
                        shared |= mine[a] & mine[b]
                # only the frames at the cuts between workers' runs
                self.assertLessEqual(len(shared), workers - 1, (workers, batch))
            # through a real DataLoader, every sample is its source
            sampler = PackSampler(ds, seed=4, batch_size=16, num_workers=2)
            loader = tud.DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2,
                                    collate_fn=as_list)
            got = {n: bytes(x) for batch in loader for n, x in batch}
            self.assertEqual(got, d.files)
            with self.assertRaises(ValueError):
                PackSampler(ds, num_workers=2)
        finally:
            d.close()

    def test_persistent_workers(self):
        """persistent_workers (the README's form): the same 2 workers every epoch, reshuffled"""
        ds = PackDataset(self.ds.pack, transform=name_and_pid)
        sampler = PackSampler(ds, shuffle=True, seed=5)
        loader = tud.DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2,
                                collate_fn=as_list, multiprocessing_context="fork",
                                persistent_workers=True)
        orders, pids = [], []
        for epoch in range(3):
            sampler.set_epoch(epoch)
            seen = [x for batch in loader for x in batch]
            self.assertEqual(sorted(n for n, _, _ in seen), sorted(self.ds.files))
            for name, _, data in seen:
                self.assertEqual(data, self.ds.files[name], name)
            orders.append([n for n, _, _ in seen])
            pids.append({pid for _, pid, _ in seen})
        self.assertEqual(len(pids[0]), 2)
        self.assertNotIn(os.getpid(), pids[0])
        self.assertEqual(pids[0], pids[1])
        self.assertEqual(pids[1], pids[2])
        self.assertNotEqual(orders[0], orders[1])

    def test_resume_with_loader(self):
        """resume through a DataLoader: the two halves make the epoch"""
        ds = PackDataset(self.ds.pack)
        sampler = PackSampler(ds, seed=2)
        loader = tud.DataLoader(ds, batch_size=10, sampler=sampler, num_workers=0,
                                collate_fn=as_list)
        first = []
        for k, batch in enumerate(loader):
            first.extend(n for n, _ in batch)
            if k == 4:
                break
        state = sampler.state_dict()
        resumed = PackSampler(ds, seed=2)
        resumed.load_state_dict(state)
        loader = tud.DataLoader(ds, batch_size=10, sampler=resumed, num_workers=0,
                                collate_fn=as_list)
        rest = [n for batch in loader for n, _ in batch]
        self.assertEqual(sorted(first + rest), sorted(self.ds.files))


if __name__ == "__main__":
    unittest.main()
