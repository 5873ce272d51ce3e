"""stager.torch.PackLoader with Debian's python3-torch: a loop stopped at a
random batch and resumed from state_dict() (in a new loader, as after a
kill) receives exactly the batches an uninterrupted loop would have, sample
for sample, with 0, 1 and 2 workers, prefetch_factor, persistent_workers,
and 2 ranks; a state taken at an epoch's end resumes at the next epoch,
whole."""
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

import fixtures

from stager.torch import PackDataset, PackLoader, PackSampler


def name_and_crc(name, data):
    return name, zlib.crc32(data)


def as_list(batch):
    return batch


# (num_workers, DataLoader options) of each case
CASES = [
    (0, {}),
    (1, {"prefetch_factor": 2}),
    (1, {"prefetch_factor": 4, "persistent_workers": True}),
    (2, {"prefetch_factor": 2}),
    (2, {"prefetch_factor": 3, "persistent_workers": True}),
]


class LoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ds = fixtures.Dataset(files=700, big=0, seed=21)
        cls.crc = {name: zlib.crc32(data) for name, data in cls.ds.files.items()}

    @classmethod
    def tearDownClass(cls):
        cls.ds.close()

    def loader(self, workers, batch=7, rank=0, world=1, seed=13, **options):
        ds = PackDataset(self.ds.pack, transform=name_and_crc)
        if workers:
            options.setdefault("multiprocessing_context", "fork")
        return PackLoader(ds, batch_size=batch, shuffle=True, seed=seed, rank=rank,
                          world_size=world, num_workers=workers, collate_fn=as_list,
                          **options)

    def check_samples(self, batches):
        for batch in batches:
            for name, crc in batch:
                self.assertEqual(crc, self.crc[name], name)

    def epochs(self, loader, epochs):
        out = []
        for epoch in epochs:
            loader.set_epoch(epoch)
            out.append([list(b) for b in loader])
        return out

    def test_order_is_the_samplers(self):
        """the loop receives the sampler's order, batch after batch, whatever the workers"""
        for workers, options in CASES:
            loader = self.loader(workers, **options)
            order = list(loader.sampler)
            got = [name for batch in loader for name, _ in batch]
            names = PackDataset(self.ds.pack).pack.names()
            self.assertEqual(got, [names[i] for i in order], workers)

    def test_resume_exact(self):
        """a random stop, resumed in a new loader: the uninterrupted run, sample by sample"""
        rng = random.Random(5)
        for workers, options in CASES:
            for world in (1, 2):
                for rank in range(world):
                    whole = self.epochs(self.loader(workers, rank=rank, world=world, **options),
                                        (2, 3))
                    self.check_samples(whole[0])
                    stop = rng.randrange(1, len(whole[0]))
                    first = self.loader(workers, rank=rank, world=world, **options)
                    first.set_epoch(2)
                    got = []
                    for batch in first:
                        got.append(list(batch))
                        if len(got) == stop:
                            state = first.state_dict()
                            break
                    del first
                    state = pickle.loads(pickle.dumps(state))
                    self.assertEqual((state["epoch"], state["batches"]), (2, stop))
                    again = self.loader(workers, rank=rank, world=world, **options)
                    again.load_state_dict(state)
                    self.assertEqual(again.epoch, 2)
                    rest = self.epochs(again, (2, 3))
                    case = (workers, options, rank, world, stop)
                    # 0 missing, 0 repeated: the same samples in the same order
                    self.assertEqual(got + rest[0], whole[0], case)
                    self.assertEqual(rest[1], whole[1], case)

    def test_resume_same_loader(self):
        """load_state_dict() into the loader that ran (persistent workers, prefetched ahead)"""
        loader = self.loader(2, persistent_workers=True, prefetch_factor=4)
        whole = self.epochs(loader, (0,))[0]
        loader.set_epoch(0)
        for k, _ in enumerate(loader):
            if k == 3:
                state = loader.state_dict()
            if k == 9:
                break
        loader.load_state_dict(state)
        self.assertEqual([list(b) for b in loader], whole[4:])

    def test_end_of_epoch(self):
        """a state taken at the end of an epoch resumes at the next one, whole"""
        for workers, options in CASES[::2]:
            loader = self.loader(workers, **options)
            whole = self.epochs(loader, (0, 1))
            first = self.loader(workers, **options)
            self.epochs(first, (0,))
            state = first.state_dict()
            self.assertEqual(state["batches"], len(whole[0]))
            again = self.loader(workers, **options)
            again.load_state_dict(state)
            self.assertEqual(again.epoch, 1)
            self.assertEqual(self.epochs(again, (again.epoch,))[0], whole[1])
            # the form of a loop that counts its epochs itself
            again = self.loader(workers, **options)
            again.load_state_dict(state)
            again.set_epoch(state["epoch"] + 1)
            self.assertEqual([list(b) for b in again], whole[1])
            # mid-epoch state, then set_epoch to another epoch: that one whole
            again = self.loader(workers, **options)
            again.load_state_dict(dict(state, batches=3))
            again.set_epoch(1)
            self.assertEqual([list(b) for b in again], whole[1])

    def test_drop_last(self):
        """drop_last: ranks' remainder and the short last batch left out, resume as well"""
        loader = self.loader(0, batch=8, world=3, rank=2, drop_last=True)
        whole = self.epochs(loader, (0,))[0]
        self.assertEqual(len(whole), (len(self.ds.files) // 3) // 8)
        self.assertEqual({len(b) for b in whole}, {8})
        state = dict(loader.state_dict(), batches=5)
        again = self.loader(0, batch=8, world=3, rank=2, drop_last=True)
        again.load_state_dict(state)
        self.assertEqual([list(b) for b in again], whole[5:])

    def test_refused(self):
        """a state from a loader made otherwise, or a sampler's, is refused with the reason"""
        loader = self.loader(0)
        state = loader.state_dict()
        for other, key in ((self.loader(0, batch=8), "batch_size"),
                           (self.loader(2), "num_workers")):
            with self.assertRaises(ValueError) as cm:
                other.load_state_dict(state)
            self.assertIn(key, str(cm.exception))
        with self.assertRaises(ValueError):
            loader.load_state_dict(dict(state, batches=10 ** 6))
        with self.assertRaises(ValueError) as cm:
            loader.load_state_dict(loader.sampler.state_dict())
        self.assertIn("not a PackLoader state", str(cm.exception))
        with self.assertRaises(ValueError):
            PackLoader(PackDataset(self.ds.pack), batch_size=4,
                       sampler=PackSampler(PackDataset(self.ds.pack)))

    def test_sampler_counts_prefetch(self):
        """PackSampler.state_dict counts what the DataLoader fetched ahead, and says so"""
        loader = self.loader(2, prefetch_factor=2)
        for k, _ in enumerate(loader):
            if k == 0:
                break
        taken = loader.sampler.state_dict()
        self.assertIn("prefetch", taken["counts"])
        self.assertGreater(taken["taken"], 7)
        self.assertEqual(loader.state_dict()["batches"], 1)

    def test_distributed_killed(self):
        """2 ranks (gloo), killed with SIGKILL mid-epoch, resumed from the last checkpoint"""
        top = tempfile.mkdtemp(prefix="stager-py.", dir=os.environ.get("TMPDIR", "/var/tmp"))
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loader_rank.py")

        def launch(phase):
            return [subprocess.Popen([sys.executable, script, self.ds.pack, top, str(rank),
                                      phase, "2"], start_new_session=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                    for rank in range(2)]

        def lines(rank):
            try:
                with open(os.path.join(top, "log-%d" % rank)) as f:
                    return [json.loads(x) for x in f if x.endswith("\n")]
            except FileNotFoundError:
                return []

        try:
            procs = launch("start")
            deadline = time.monotonic() + 120
            while len(lines(0)) < 17 and all(p.poll() is None for p in procs):
                self.assertLess(time.monotonic(), deadline, "the ranks made no progress")
                time.sleep(0.005)
            for p in procs:  # the rank and its DataLoader workers
                os.killpg(p.pid, signal.SIGKILL)
            for p in procs:
                out = p.communicate()[0]
                self.assertEqual(p.returncode, -signal.SIGKILL, out)
            import torch
            state = torch.load(os.path.join(top, "ckpt.pt"))["loaders"]
            self.assertEqual(state[0]["epoch"], 0)
            self.assertTrue(0 < state[0]["batches"] < state[0]["epoch_batches"], state[0])
            procs = launch("resume")
            for p in procs:
                out = p.communicate(timeout=300)[0]
                self.assertEqual(p.returncode, 0, out)
            for rank in range(2):
                whole = self.epochs(self.loader(2, batch=5, rank=rank, world=2, seed=7), (0, 1))
                want = [[name for name, _ in batch] for epoch in whole for batch in epoch]
                got = lines(rank)
                self.assertEqual([x["names"] for x in got], want, rank)
        finally:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
