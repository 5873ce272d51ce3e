"""stager.stage() and stager.collect(): the tool's operations from Python, on a
scratch root of the test's own, with the tool's errors as exceptions and
SIGINT cancelling a stage with nothing half-published."""
import errno
import logging
import os
import pathlib
import signal
import threading
import time
import unittest

import fixtures

import stager


class OpsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for var in [v for v in os.environ if v.startswith(("SLURM_", "STAGER_"))]:
            del os.environ[var]
        # no site or user file of this machine's
        os.environ["STAGER_SITE_CONFIG"] = "/dev/null"
        os.environ["XDG_CONFIG_HOME"] = "/nonexistent"
        cls.ds = fixtures.Dataset(files=120)
        cls.scratch = os.path.join(cls.ds.dir, "scratch")

    @classmethod
    def tearDownClass(cls):
        cls.ds.close()

    def test_stage(self):
        """stage: a Path to the dataset; the second stage is served from the cache"""
        dest = os.path.join(self.ds.dir, "here")
        with self.assertLogs("stager", logging.INFO) as logs:
            path = stager.stage(self.ds.pack, dest, scratch=self.scratch)
        self.assertIsInstance(path, pathlib.Path)
        self.assertTrue(any("staged" in m for m in logs.output), logs.output)
        for name, want in self.ds.files.items():
            self.assertEqual((path / name).read_bytes(), want, name)
        with self.assertLogs("stager", logging.INFO) as logs:
            again = stager.stage(self.ds.pack, os.path.join(self.ds.dir, "there"),
                                 scratch=self.scratch)
        self.assertTrue(any("cached" in m for m in logs.output), logs.output)
        self.assertEqual((again / "big.bin").read_bytes(), self.ds.files["big.bin"])
        # a subset, and a private copy
        sub = stager.stage(self.ds.pack, os.path.join(self.ds.dir, "sub"), include=["meta/*"],
                           copy=True, scratch=self.scratch)
        self.assertTrue((sub / "meta" / "array.npy").exists())
        self.assertFalse((sub / "big.bin").exists())
        # the same again is the same; a destination that holds something else
        # is refused
        self.assertEqual(stager.stage(self.ds.pack, dest, scratch=self.scratch), path)
        other = os.path.join(self.ds.dir, "other")
        os.mkdir(other)
        with open(os.path.join(other, "mine"), "w") as f:
            f.write("x")
        with self.assertRaises(stager.UsageError) as cm:
            stager.stage(self.ds.pack, other, scratch=self.scratch)
        self.assertEqual(cm.exception.status, 1)
        self.assertEqual(cm.exception.errno, errno.EEXIST)

    def test_errors(self):
        """the tool's exit statuses as exception classes"""
        with self.assertRaises(stager.SourceError) as cm:
            stager.stage(os.path.join(self.ds.dir, "missing.tar.zst"), scratch=self.scratch)
        self.assertEqual((cm.exception.status, cm.exception.errno), (2, errno.ENOENT))
        self.assertIn("missing.tar.zst", str(cm.exception))
        bad = self.ds.damaged_copy(1)
        dest = os.path.join(self.ds.dir, "damaged")
        with self.assertRaises(stager.IntegrityError) as cm:
            stager.stage(bad, dest, scratch=os.path.join(self.ds.dir, "scratch2"))
        self.assertEqual(cm.exception.status, 4)
        self.assertFalse(os.path.exists(dest))
        with self.assertRaises(stager.UsageError):
            stager.stage(self.ds.pack, scratch=self.scratch, cache_max="lots")
        with self.assertRaises(stager.UsageError):
            stager.stage(self.ds.pack, scratch=self.scratch, no_such_setting="1")
        with self.assertRaises(stager.Error):
            stager.stage(self.ds.pack, scratch=self.scratch,
                         config=os.path.join(self.ds.dir, "no-config"))
        with self.assertRaises(TypeError):
            stager.stage(self.ds.pack, include="meta/*", scratch=self.scratch)

    def test_collect(self):
        """collect: sent, then unchanged; a missing source is SourceError"""
        out = os.path.join(self.ds.dir, "results")
        os.makedirs(os.path.join(out, "ckpt"))
        for i in range(5):
            with open(os.path.join(out, "ckpt", "step%d" % i), "wb") as f:
                f.write(os.urandom(1000 + i))
        dest = os.path.join(self.ds.dir, "shared", "run1")
        res = stager.collect(out, dest, scratch=self.scratch)
        self.assertIsInstance(res, stager.CollectResult)
        self.assertEqual((res.files, res.sent_files), (5, 5))
        self.assertEqual(res.sent_bytes, sum(1000 + i for i in range(5)))
        for i in range(5):
            with open(os.path.join(out, "ckpt", "step%d" % i), "rb") as a, \
                    open(os.path.join(dest, "ckpt", "step%d" % i), "rb") as b:
                self.assertEqual(a.read(), b.read())
        res = stager.collect(out, dest, scratch=self.scratch)
        self.assertEqual((res.sent_files, res.unchanged), (0, 5))
        packed = stager.collect(out, os.path.join(self.ds.dir, "shared", "run1p"), pack=True,
                                scratch=self.scratch)
        with stager.Pack(packed.dest) as p:
            self.assertEqual(len(p), 5)
        with self.assertRaises(stager.SourceError):
            stager.collect(os.path.join(self.ds.dir, "nothing"), dest, scratch=self.scratch)
        with self.assertRaises(stager.UsageError):
            stager.collect(out, os.path.join(self.ds.dir, "r-%j"), scratch=self.scratch)

    def test_sigint_stage(self):
        """SIGINT during a stage: KeyboardInterrupt within a second, nothing published"""
        d = fixtures.Dataset(files=1, big=48 << 20)
        try:
            dest = os.path.join(d.dir, "dest")
            timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
            t0 = time.monotonic()
            timer.start()
            with self.assertRaises(KeyboardInterrupt):
                stager.stage(d.pack, dest, scratch=os.path.join(d.dir, "scratch"),
                             bwlimit="8M")
            took, limit = time.monotonic() - t0, fixtures.signal_limit()
            if limit is not None:
                self.assertLess(took, 0.5 + limit)
            timer.join()
            self.assertFalse(os.path.exists(dest))
            cache = os.path.join(d.dir, "scratch", "cache")
            left = [n for n in os.listdir(cache) if ".tmp" not in n] if os.path.isdir(cache) else []
            self.assertEqual(left, [])
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main()
