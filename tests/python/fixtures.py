"""What the Python tests share: a tree of files of many sizes (an image, an
array, text, random bytes), packed by the stager tool, and helpers."""
import os
import random
import shutil
import subprocess
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STAGER = os.environ.get("STAGER") or os.path.join(TOP, "build", "stager")


def stager(*args, check=True, env=None):
    return subprocess.run([STAGER, *args], check=check, capture_output=True, text=True,
                          env=env)


def make_tree(root, files=300, seed=7, big=6 << 20):
    """A dataset: files of 0 B to 40 KiB in class directories, one big
    file of random bytes (several frames), a PNG and an .npy.  Returns
    {relative path: bytes}."""
    rng = random.Random(seed)
    out = {}
    for i in range(files):
        rel = "train/c%02d/s%04d.bin" % (i % 7, i)
        size = rng.choice([0, 1, 100, 4096, 9000, 40000])
        data = bytes(rng.getrandbits(8) for _ in range(min(size, 64))) * (size // 64 + 1)
        out[rel] = data[:size]
    # random MiBs, the last one repeated past 64 MiB (rng.randbytes stops
    # at 256 MiB; a huge file need not be incompressible)
    block = rng.randbytes(1 << 20)
    out["big.bin"] = b"".join(rng.randbytes(1 << 20) if i < 64 else block
                              for i in range(big >> 20)) + rng.randbytes(big & ((1 << 20) - 1))
    try:
        import io

        import numpy
        from PIL import Image
        img = Image.new("RGB", (64, 48), (10, 200, 30))
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        out["meta/picture.png"] = buf.getvalue()
        buf = io.BytesIO()
        numpy.save(buf, numpy.arange(1000, dtype=numpy.float32).reshape(10, 100))
        out["meta/array.npy"] = buf.getvalue()
    except ImportError:
        pass
    for rel, data in out.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return out


class Dataset:
    """A packed tree in a temporary directory: .dir, .src, .pack, .files."""

    def __init__(self, **kw):
        self.dir = tempfile.mkdtemp(prefix="stager-py.", dir=os.environ.get("TMPDIR", "/var/tmp"))
        self.src = os.path.join(self.dir, "src")
        os.mkdir(self.src)
        self.files = make_tree(self.src, **kw)
        self.pack = os.path.join(self.dir, "ds.tar.zst")
        stager("pack", "-q", self.src, "-o", self.pack)

    def damaged_copy(self, frame, name="damaged.tar.zst"):
        """A copy of the pack with a byte of frame `frame` flipped."""
        import stager as st
        with st.Pack(self.pack) as p:
            off, size, _, _ = p._frame(frame)
        path = os.path.join(self.dir, name)
        shutil.copyfile(self.pack, path)
        with open(path, "r+b") as f:
            f.seek(off + size // 2)
            b = f.read(1)
            f.seek(off + size // 2)
            f.write(bytes([b[0] ^ 0x40]))
        return path

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def signal_limit(n=1.0):
    """n seconds (the contract's "within a second"), as the machine goes
    now: times the load per core when it is over 1, plus one for the
    scheduling (as signal_limit in tests/e2e/helpers.bash); None under the
    sanitizers, where the clock is not checked."""
    if os.environ.get("SAN_FLAGS"):
        return None
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return n * max(1.0, per_core) + 1.0
