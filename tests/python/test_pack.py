"""stager.Pack against the real things: a pack made by the stager tool, every
file read and compared with its source, file objects with seeks (PIL,
numpy), a damaged frame, threads, SIGINT, and hostile calls."""
import io
import os
import pickle
import signal
import stat
import sys
import threading
import time
import unittest

import fixtures

import stager


class PackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ds = fixtures.Dataset()

    @classmethod
    def tearDownClass(cls):
        cls.ds.close()

    def test_every_file(self):
        """every file read, whole and through open(), the same as its source"""
        with stager.Pack(self.ds.pack) as p:
            self.assertEqual(len(p), len(self.ds.files))
            self.assertEqual(sorted(p.names()), sorted(self.ds.files))
            for name, want in self.ds.files.items():
                self.assertEqual(p.read(name), want, name)
                with p.open(name) as f:
                    self.assertEqual(f.read(), want, name)
                st = p.stat(name)
                self.assertEqual(st.size, len(want))
                self.assertTrue(stat.S_ISREG(st.mode))
                src = os.stat(os.path.join(self.ds.src, name))
                self.assertEqual(st.mode & 0o7777, src.st_mode & 0o7777)
                self.assertEqual(int(st.mtime), int(src.st_mtime))
            self.assertIn("big.bin", p)
            self.assertNotIn("train", p)
            self.assertNotIn("nothing", p)
            self.assertEqual(list(p), p.names())

    def test_seeks(self):
        """open(): read, readinto, seek from the start, here and the end, tell"""
        want = self.ds.files["big.bin"]
        with stager.Pack(self.ds.pack) as p:
            for buffering in (0, 4096, -1):
                f = p.open("big.bin", buffering=buffering)
                self.assertTrue(f.readable() and f.seekable() and not f.writable())
                for off in (0, 1, 4 << 20, (4 << 20) - 3, len(want) - 10, 777777, 12):
                    self.assertEqual(f.seek(off), off)
                    self.assertEqual(f.read(5000), want[off:off + 5000])
                    self.assertEqual(f.tell(), min(off + 5000, len(want)))
                f.seek(-100, io.SEEK_END)
                self.assertEqual(f.read(), want[-100:])
                f.seek(10)
                f.seek(20, io.SEEK_CUR)
                buf = bytearray(64)
                self.assertEqual(f.readinto(buf), 64)
                self.assertEqual(bytes(buf), want[30:94])
                f.seek(len(want) + 10)
                self.assertEqual(f.read(10), b"")
                with self.assertRaises(OSError):
                    f.seek(-1)
                f.close()
                with self.assertRaises(ValueError):
                    f.read(1)

    def test_pil_numpy(self):
        """PIL.Image.open and numpy.load read through open()"""
        import numpy
        from PIL import Image
        with stager.Pack(self.ds.pack) as p:
            with p.open("meta/picture.png") as f:
                img = Image.open(f)
                img.load()
                self.assertEqual(img.size, (64, 48))
                self.assertEqual(img.getpixel((3, 3)), (10, 200, 30))
            with p.open("meta/array.npy") as f:
                a = numpy.load(f)
            self.assertEqual(a.shape, (10, 100))
            self.assertEqual(float(a[9, 99]), 999.0)

    def test_damaged_frame(self):
        """a damaged frame: IntegrityError for its files, the rest read"""
        with stager.Pack(self.ds.pack) as p:
            _, _, _, _, frame = p._entry("big.bin")
            n_frames = p.stats()["frames"]
        self.assertGreaterEqual(n_frames, 3)
        bad = self.ds.damaged_copy(frame + 1)
        with stager.Pack(bad) as p:
            with stager.Pack(self.ds.pack) as good:
                _, _, tar_off, tar_size = good._frame(frame + 1)
            hit = ok = 0
            for name, want in self.ds.files.items():
                with stager.Pack(self.ds.pack) as good:
                    _, size, _, _, first = good._entry(name)
                try:
                    got = p.read(name)
                except stager.IntegrityError as e:
                    hit += 1
                    self.assertEqual(e.status, 4)
                    self.assertIsInstance(e, OSError)
                    self.assertIn("frame %d" % (frame + 1), str(e))
                    self.assertIn(name, str(e))
                    # only files with bytes in that frame
                    self.assertLessEqual(first, frame + 1, name)
                    continue
                ok += 1
                self.assertEqual(got, want)
                # a file that starts in the damaged frame cannot read
                self.assertFalse(first == frame + 1 and size > 0, name)
            self.assertGreaterEqual(hit, 1)
            self.assertGreaterEqual(ok, 1)
            # bytes of big.bin in good frames still read through open()
            with p.open("big.bin", buffering=0) as f:
                self.assertEqual(f.read(1000), self.ds.files["big.bin"][:1000])
            # and the damage stays: asked again, the same error
            with self.assertRaises(stager.IntegrityError):
                p.read("big.bin")

    def test_pickle(self):
        """a Pack pickles to its path and digest, and is refused if it changed"""
        with stager.Pack(self.ds.pack) as p:
            blob = pickle.dumps(p)
            self.assertLess(len(blob), 400)
            q = pickle.loads(blob)
            self.assertEqual(q.digest, p.digest)
            self.assertEqual(q.read("big.bin"), self.ds.files["big.bin"])
            q.close()
        other = os.path.join(self.ds.dir, "other.tar.zst")
        fixtures.stager("pack", "-q", os.path.join(self.ds.src, "meta"), "-o", other)
        with stager.Pack(other) as p:
            blob = pickle.dumps(p)
        os.replace(self.ds.damaged_copy(0, "x.tar.zst"), other)
        with self.assertRaises(stager.IntegrityError):
            pickle.loads(blob)

    def test_threads(self):
        """two threads read one Pack at once, with a cache of two frames"""
        p = stager.Pack(self.ds.pack, cache_bytes=1)
        names = sorted(self.ds.files)
        errors = []

        def reader(order):
            try:
                for _ in range(3):
                    for name in order:
                        if p.read(name) != self.ds.files[name]:
                            errors.append(name)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

        threads = [threading.Thread(target=reader, args=(names,)),
                   threading.Thread(target=reader, args=(names[::-1],))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        p.close()

    def test_close_while_reading(self):
        """close() while another thread reads: that read ends, later ones fail cleanly"""
        p = stager.Pack(self.ds.pack)
        stop = threading.Event()
        seen = []

        def reader():
            while not stop.is_set():
                try:
                    p.read("big.bin")
                except ValueError as e:
                    seen.append(str(e))
                    return

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.2)
        p.close()
        t.join(10)
        stop.set()
        self.assertFalse(t.is_alive())
        self.assertEqual(seen, ["I/O operation on a closed Pack"])
        p.close()  # twice is fine
        for call in (lambda: p.read("big.bin"), p.names, lambda: len(p),
                     lambda: p.stat("big.bin"), lambda: p.open("big.bin")):
            with self.assertRaises(ValueError):
                call()

    def test_close_while_others_keep_reading(self):
        """close() while 4 threads keep reading: it waits for the reads in progress only"""
        p = stager.Pack(self.ds.pack, cache_bytes=1)
        stop = threading.Event()
        started = threading.Barrier(5)
        seen = []

        def reader():
            started.wait()
            while not stop.is_set():
                try:
                    p.read("big.bin")
                except ValueError as e:
                    seen.append(str(e))
                    return

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        started.wait()
        time.sleep(0.3)
        closer = threading.Thread(target=p.close)
        t0 = time.monotonic()
        closer.start()
        # a read of big.bin (6 MiB, cache of one frame) takes well under a
        # second even on a loaded machine; the readers never stop on their own
        closer.join(10)
        waited = time.monotonic() - t0
        # the readers end on the closed Pack's ValueError; stop only ends them
        # when close() hung (a reader that saw stop would miss its error)
        if closer.is_alive():
            stop.set()
        closer.join()
        for t in threads:
            t.join()
        self.assertLess(waited, 10, "close() waited for reads that began after it")
        self.assertTrue(p.closed)
        self.assertEqual(seen, ["I/O operation on a closed Pack"] * 4)

    def test_close_during_long_read_of_another_thread(self):
        """close() during another thread's read of several pieces: that read completes, then it closes"""
        d = fixtures.Dataset(files=1, big=40 << 20)
        try:
            want = d.files["big.bin"]
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # alone, with SIGALRM's default action: a hang ends
                os.close(r)
                signal.alarm(60)
                got = []
                try:
                    p = stager.Pack(d.pack, cache_bytes=1)
                    started = threading.Event()

                    def reader():
                        started.set()
                        try:  # 40 MiB: 5 pieces, the count between them
                            got.append("read" if p.read("big.bin") == want else "wrong bytes")
                        except BaseException as e:  # noqa: BLE001 (reported)
                            got.append(str(e))

                    # the reader keeps the GIL until its read lets it go:
                    # close() below begins while that read is in progress
                    sys.setswitchinterval(30)
                    t = threading.Thread(target=reader)
                    t.start()
                    started.wait()
                    p.close()
                    t.join()
                    got.append("closed" if p.closed else "open")
                except BaseException as e:  # noqa: BLE001 (reported)
                    got.append(repr(e))
                os.write(w, " ".join(got).encode())
                os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                out = f.read().decode()
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the child hung: " + out)
            self.assertEqual(out, "read closed")
        finally:
            d.close()

    def test_fork_while_reading(self):
        """a child forked while a parent thread reads: its read and its close work"""
        p = stager.Pack(self.ds.pack, cache_bytes=1)
        stop = threading.Event()
        reads = [0]

        def reader():
            while not stop.is_set():
                p.read("big.bin")
                reads[0] += 1

        t = threading.Thread(target=reader)
        t.start()
        try:
            while reads[0] < 1:
                time.sleep(0.01)
            # several forks: the reader spends nearly all its time in a read
            # (the GIL released), so that most of them land in one
            for _ in range(8):
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:  # the child: whatever happens, it ends
                    os.close(r)
                    signal.alarm(30)
                    out = []
                    got = []

                    def child_read():
                        try:
                            ok = p.read("big.bin") == self.ds.files["big.bin"]
                            got.append("read" if ok else "read wrong bytes")
                        except Exception as e:  # noqa: BLE001 (reported)
                            got.append(str(e))

                    # three threads of the child's, at once: one reopens
                    ts = [threading.Thread(target=child_read) for _ in range(3)]
                    for ct in ts:
                        ct.start()
                    for ct in ts:
                        ct.join()
                    out.append(" ".join(got))
                    p.close()
                    out.append("closed" if p.closed else "open")
                    p.close()
                    try:
                        p.read("big.bin")
                    except ValueError as e:
                        out.append(str(e))
                    os.write(w, "\n".join(out).encode())
                    os._exit(0)
                os.close(w)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        break
                    time.sleep(0.02)
                else:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    os.close(r)
                    self.fail("the forked child hung in the Pack (its close or its read)")
                with os.fdopen(r, "rb") as f:
                    out = f.read().decode().split("\n")
                self.assertEqual(os.waitstatus_to_exitcode(status), 0)
                self.assertEqual(len(out), 3, out)
                self.assertEqual(out, ["read read read", "closed",
                                       "I/O operation on a closed Pack"])
        finally:
            stop.set()
            t.join()
        # the parent's Pack is untouched by the children's close
        self.assertEqual(p.read("big.bin"), self.ds.files["big.bin"])
        p.close()

    def test_unreadable_pack(self):
        """a pack the user may not read: SourceError with errno EACCES, not ENOENT"""
        import errno
        import shutil
        import tempfile
        d = tempfile.mkdtemp(prefix="stager-py-acc.", dir=self.ds.dir)
        os.chmod(self.ds.dir, 0o711)
        os.chmod(d, 0o755)
        path = os.path.join(d, "secret.tar.zst")
        shutil.copyfile(self.ds.pack, path)
        os.chmod(path, 0)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                if os.getuid() == 0:  # root reads anything: as nobody
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                try:
                    os.stat(path)
                except OSError as e:
                    msg = "skip: %s" % e
                else:
                    try:
                        stager.Pack(path).close()
                        msg = "opened"
                    except stager.Error as e:
                        msg = "%s %s %d %s" % (type(e).__name__, errno.errorcode.get(e.errno),
                                               e.status, e)
            except BaseException as e:  # noqa: BLE001 (reported)
                msg = "child: %r" % e
            os.write(w, msg.encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            msg = f.read().decode()
        os.waitpid(pid, 0)
        if msg.startswith("skip:"):
            self.skipTest("user 65534 cannot reach %s (%s)" % (d, msg))
        self.assertTrue(msg.startswith("SourceError EACCES 2 "), msg)
        self.assertIn("Permission denied", msg)
        self.assertIn(path, msg)
        # a missing pack is still ENOENT
        with self.assertRaises(stager.SourceError) as cm:
            stager.Pack(os.path.join(d, "missing.tar.zst"))
        self.assertEqual(cm.exception.errno, errno.ENOENT)

    def test_sigint(self):
        """SIGINT during a long read: KeyboardInterrupt within a second"""
        d = fixtures.Dataset(files=1, big=400 << 20)
        try:
            with stager.Pack(d.pack, cache_bytes=1) as p:
                timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
                t0 = time.monotonic()
                timer.start()
                with self.assertRaises(KeyboardInterrupt):
                    for _ in range(50):
                        p.read("big.bin")
                took, limit = time.monotonic() - t0, fixtures.signal_limit()
                if limit is not None:
                    self.assertLess(took, 0.3 + limit)
                timer.join()
                # the pack still reads afterwards
                self.assertEqual(p.read("big.bin")[:100], d.files["big.bin"][:100])
        finally:
            d.close()

    def test_close_in_signal_handler(self):
        """a signal handler closes the Pack during a long read of the same thread: the read ends"""
        d = fixtures.Dataset(files=1, big=40 << 20)
        try:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # alone, with SIGALRM's default action: a deadlock ends
                os.close(r)
                signal.alarm(60)
                out = "nothing"
                try:
                    p = stager.Pack(d.pack, cache_bytes=1)
                    signal.signal(signal.SIGUSR1, lambda *_: p.close())
                    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1)).start()
                    t0 = time.monotonic()
                    while time.monotonic() - t0 < 30:
                        p.read("big.bin")  # 40 MiB: 5 pieces, signals between them
                except ValueError as e:
                    out = "%s %s" % (e, p.closed)
                except BaseException as e:  # noqa: BLE001 (reported)
                    out = repr(e)
                os.write(w, out.encode())
                os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                out = f.read().decode()
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0,
                             "the child hung: the handler's close waited for its own read")
            self.assertEqual(out, "I/O operation on a closed Pack True")
        finally:
            d.close()

    def test_hostile_calls(self):
        """names with NUL bytes, huge names, wrong types, closed and wrong packs"""
        with stager.Pack(self.ds.pack) as p:
            for name in ("big.bin\0", "\0", "a\0b", "x" * (1 << 20), "", "/big.bin",
                         "../big.bin", b"big.bin\0", "big.bin/"):
                with self.assertRaises(KeyError):
                    p.read(name)
                self.assertNotIn(name, p)
            self.assertEqual(p.read(b"big.bin"), self.ds.files["big.bin"])
            for name in (None, 1.5, object(), ["big.bin"]):
                with self.assertRaises(TypeError):
                    p.read(name)
            with self.assertRaises(IndexError):
                p.read(len(p))
            with self.assertRaises(IndexError):
                p.read(-1)
            with self.assertRaises(IndexError):
                p._readinto(10 ** 6, 0, bytearray(1))
            with self.assertRaises(TypeError):
                p._readinto(0, 0, b"read-only")
            self.assertEqual(p._readinto(0, 1 << 62, bytearray(8)), 0)
            with self.assertRaises(IndexError):
                p._frame(10 ** 6)
            with self.assertRaises(IndexError):
                p._name(-5)
        # not packs
        with self.assertRaises(stager.IntegrityError) as cm:
            stager.Pack(os.path.join(self.ds.src, "big.bin"))
        self.assertIn("not a stager pack", str(cm.exception))
        self.assertEqual(cm.exception.filename, os.path.join(self.ds.src, "big.bin"))
        with self.assertRaises(stager.SourceError) as cm:
            stager.Pack(os.path.join(self.ds.dir, "missing.tar.zst"))
        self.assertEqual(cm.exception.status, 2)
        with self.assertRaises(stager.Error):
            stager.Pack(self.ds.src)
        with self.assertRaises(stager.Error):
            stager.Pack("/dev/null")
        truncated = os.path.join(self.ds.dir, "cut.tar.zst")
        with open(self.ds.pack, "rb") as f, open(truncated, "wb") as g:
            g.write(f.read(os.path.getsize(self.ds.pack) - 100))
        with self.assertRaises(stager.IntegrityError):
            stager.Pack(truncated)
        with self.assertRaises(ValueError):
            stager.Pack(self.ds.pack, cache_bytes=-1)
        with self.assertRaises(TypeError):
            stager.Pack(None)
        with self.assertRaises(ValueError):
            stager.Pack("a\0b")
        # a Pack made but never opened (no __init__) reads as closed
        raw = stager.Pack.__new__(stager.Pack)
        with self.assertRaises(ValueError):
            raw.names()

    def test_partial_decoding(self):
        """a 4 KiB read of a cold pack decodes what it needs, not the frame"""
        with stager.Pack(self.ds.pack) as p:
            _, size, _, _, frame = p._entry("big.bin")
            with p.open("big.bin", buffering=0) as f:
                f.read(4096)
            st = p.stats()
            self.assertEqual(st["frames_fetched"], 1)
            _, _, tar_off, tar_size = p._frame(frame)
            # a block of zstd's (128 KiB) at a time: half a frame of 256 KiB
            self.assertLessEqual(st["bytes_decoded"], tar_size // 2)

    def test_prefetch(self):
        """_prefetch(frame) fetches and checks it in the background, once"""
        with stager.Pack(self.ds.pack) as p:
            # the frame of the first small file
            k = min(p._entry(n)[4] for n in p.names() if 0 < p._entry(n)[1] < 65536)
            p._prefetch(k)
            deadline = time.monotonic() + 10
            while p.stats()["frames_fetched"] < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(p.stats()["frames_fetched"], 1)
            # its small files (each in one frame) then read without another fetch
            names = [n for n in p.names() if p._entry(n)[4] == k and p._entry(n)[1] < 65536]
            self.assertGreater(len(names), 0)
            for name in names:
                self.assertEqual(p.read(name), self.ds.files[name])
            self.assertEqual(p.stats()["frames_fetched"], 1)
        with stager.Pack(self.ds.pack, prefetch=False) as p:
            p._prefetch(1)
            time.sleep(0.2)
            self.assertEqual(p.stats()["frames_fetched"], 0)

    def test_fork(self):
        """a Pack opened before a fork: the child's first read opens it again; the parent's works"""
        import hashlib
        p = stager.Pack(self.ds.pack, cache_bytes=1 << 20, prefetch=False)
        p.read("big.bin")
        fetched = p.stats()["frames_fetched"]
        other = os.path.join(self.ds.dir, "fork-other.tar.zst")
        fixtures.stager("pack", "-q", os.path.join(self.ds.src, "meta"), "-o", other)
        q = stager.Pack(other)
        for replaced in (False, True):
            if replaced:  # q's pack replaced by another one after its open
                os.replace(self.ds.damaged_copy(0, "fork-x.tar.zst"), other)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                signal.alarm(30)
                try:
                    pk = q if replaced else p
                    data = pk.read("big.bin" if pk is p else pk.names()[0])
                    msg = "read %d %s %d" % (len(pk), hashlib.sha256(data).hexdigest(),
                                             pk.stats()["frames_fetched"])
                except Exception as e:  # noqa: BLE001 (reported)
                    msg = "%s %s" % (type(e).__name__, e)
                os.write(w, msg.encode())
                os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                msg = f.read().decode()
            os.waitpid(pid, 0)
            if replaced:
                self.assertTrue(msg.startswith("IntegrityError "), msg)
                self.assertIn("changed since it was opened", msg)
                self.assertIn(other, msg)
            else:
                # its own reader (counts from 0, its cache empty), the same files
                want = hashlib.sha256(self.ds.files["big.bin"]).hexdigest()
                self.assertEqual(msg, "read %d %s %d" % (len(p), want, fetched))
        self.assertEqual(p.read("big.bin"), self.ds.files["big.bin"])
        self.assertEqual(len(q.names()), len(os.listdir(os.path.join(self.ds.src, "meta"))))
        p.close()
        q.close()

    def test_format2(self):
        """a pack of format 2 (no frame hashes): each file checked whole, damage caught"""
        import shutil
        fixture = os.path.join(fixtures.TOP, "tests", "e2e", "fixtures", "format2.tar.zst")
        ref = os.path.join(self.ds.dir, "f2-ref")
        fixtures.stager("unpack", "-q", fixture, ref)
        with stager.Pack(fixture) as p:
            self.assertGreater(len(p), 0)
            for name in p.names():
                with open(os.path.join(ref, name), "rb") as f:
                    want = f.read()
                self.assertEqual(p.read(name), want, name)
                with p.open(name, buffering=0) as f:
                    f.seek(len(want) // 2)
                    self.assertEqual(f.read(), want[len(want) // 2:], name)
            off = p._frame(0)[0]
        bad = os.path.join(self.ds.dir, "f2-bad.tar.zst")
        shutil.copyfile(fixture, bad)
        with open(bad, "r+b") as f:
            f.seek(off + 2000)
            b = f.read(1)
            f.seek(off + 2000)
            f.write(bytes([b[0] ^ 0x40]))
        with stager.Pack(bad) as p:
            with self.assertRaises(stager.IntegrityError):
                # a file of the first frame, through a partial read too
                p.open("a/b/multi", buffering=0).read(100)
            with open(os.path.join(ref, "a", "f1"), "rb") as f:
                self.assertEqual(p.read("a/f1"), f.read())

    def test_docs(self):
        """help(stager.Pack) shows the docstrings"""
        self.assertIn("cache_bytes", stager.Pack.__doc__)
        self.assertIn("read(name)", stager.Pack.read.__doc__)
        self.assertIn("file object", stager.Pack.open.__doc__)
        self.assertIn("pathlib.Path", stager.stage.__doc__)


if __name__ == "__main__":
    unittest.main()
