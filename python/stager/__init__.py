"""stager: packs as verified, random-access datasets, and the stager tool's
stage and collect, from Python.

A pack (``stager pack DIR OUT.tar.zst``) is a ``.tar.zst`` that plain tar
reads, with a trailer that lists every file, its place and its XXH3-128, and
independent zstd frames, each with its own checksum.  ``Pack`` opens one
with a single read of that trailer and reads any file at random, checked:

    import stager
    with stager.Pack("/data/imagenet.tar.zst") as pack:
        print(len(pack), pack.names()[:3])
        raw = pack.read("train/n01440764/img_0001.jpeg")   # bytes, verified
        with pack.open("meta/labels.npy") as f:            # a file object
            labels = numpy.load(f)

``stage()`` and ``collect()`` are the tool's ``stager stage`` and
``stager collect``, with its settings, node cache, slots and limits.
``stager.torch`` has a PyTorch Dataset and a frame-aware Sampler.

Errors are ``stager.Error`` (an ``OSError``) or one of its subclasses, each
with ``status``, the exit status the tool would give: ``UsageError`` (1),
``SourceError`` (2), ``SpaceError`` (3), ``IntegrityError`` (4),
``Interrupted`` (5), ``RemoteError`` (6).  A file the pack does not have is
a ``KeyError``.  libstage's messages go to the ``logging`` logger "stager".
"""

import collections
import io
import logging
import os
import pathlib

from . import _stager
from ._stager import (  # noqa: F401 (the package's names)
    Error,
    IntegrityError,
    Interrupted,
    RemoteError,
    SourceError,
    SpaceError,
    UsageError,
)

__all__ = [
    "Pack",
    "PackStat",
    "CollectResult",
    "stage",
    "collect",
    "Error",
    "UsageError",
    "SourceError",
    "SpaceError",
    "IntegrityError",
    "Interrupted",
    "RemoteError",
]
__version__ = _stager.version

_log = logging.getLogger("stager")
_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}


def _on_log(level, message):
    _log.log(_LEVELS.get(level, logging.WARNING), "%s", message)


_stager._set_log(_on_log)

PackStat = collections.namedtuple("PackStat", "size mode mtime mtime_ns")
PackStat.__doc__ = """A packed file's size (bytes), mode (stat.S_IFREG | its
permission bits), mtime (seconds, float) and mtime_ns (int)."""


class Pack(_stager.Pack):
    """Pack(path, cache_bytes=64 MiB, prefetch=True): a pack open for
    reading its files.

    Opening reads the pack's trailer once, whatever its size; nothing else
    is read until a file is.  A read fetches the frames that hold the file
    with pread, checks each against the frame table's XXH3-128 before it is
    decoded, decodes it only as far as needed, and keeps decoded frames in
    a least-recently-used cache of at most cache_bytes (at least two
    frames).  Whole files read in pack order (read(0), read(1) ...) stream
    the pack instead: each frame is decoded once into two buffers that the
    next frame reuses, and the cache does not grow.  A Pack may be shared
    by threads: reads release the GIL and run
    at once.  With prefetch, a thread of its own fetches the frames a
    reader names ahead of time (stager.torch.PackSampler names the next
    ones).  close() stops new reads at once (ValueError) and waits only for
    the reads in progress.  After a fork, the child's first read makes a
    reader for the child alone that shares the parent's manifest (its pages
    stay shared: no copy per DataLoader worker; a pack changed since, or no
    longer at its path, raises IntegrityError), and the child's close()
    never waits for the parent.

    Files are the pack's regular files (and hard links to them), named by
    their path in the pack ('dir/file.jpg'), or by their index in pack
    order: an int or any integer with __index__ (numpy.int64, a
    one-element integer torch tensor); a bool or a float is a TypeError.  A damaged frame raises IntegrityError for the files it holds;
    every other file stays readable.  A pack changed in place since it was
    opened (rewritten, cut short) raises stager.Error (ESTALE, "the pack
    changed since it was opened", with its path) where a read would see
    its new bytes, never IntegrityError.  A file that is not a pack raises IntegrityError; a missing one,
    or one the user may not read, SourceError with the system's errno
    (ENOENT, EACCES ...).
    """

    def __init__(self, path, cache_bytes=64 << 20, prefetch=True):
        super().__init__(os.fspath(path), cache_bytes, prefetch)
        self._cache_bytes = cache_bytes

    def __repr__(self):
        state = "closed" if self.closed else "%d files" % len(self)
        return "<stager.Pack %r (%s)>" % (self.path, state)

    def __iter__(self):
        return iter(self.names())

    def __contains__(self, name):
        try:
            self._entry(name)
        except (KeyError, IndexError, TypeError):
            return False
        return True

    def __reduce__(self):
        # reopened by path, and refused if it is no longer the same pack
        return (_reopen, (self.path, self._cache_bytes, self.digest))

    def stat(self, name):
        """stat(name) -> PackStat(size, mode, mtime, mtime_ns)."""
        _, size, mode, mtime_ns, _ = self._entry(name)
        return PackStat(size, mode, mtime_ns / 1e9, mtime_ns)

    def open(self, name, buffering=256 * 1024):
        """open(name) -> a read-only binary file object.

        It reads, seeks and tells as an open file does (PIL.Image.open,
        numpy.load, zipfile, tarfile ...), fetching only the frames that
        the bytes read need.  Small reads are served from a buffer of
        `buffering` bytes (0: none).
        """
        index, size, _, _, _ = self._entry(name)
        if buffering is None or buffering < 0:
            buffering = 256 * 1024
        return PackFile(self, index, size, self._name(index), buffering)


def _reopen(path, cache_bytes, digest):
    pack = Pack(path, cache_bytes)
    if pack.digest != digest:
        pack.close()
        raise IntegrityError(
            5,
            "the pack changed since it was pickled (its digest is now %s, not %s): "
            "make the dataset again" % (pack.digest[:16], digest[:16]),
            path,
        )
    return pack


class PackFile(io.BufferedIOBase):
    """One file of a Pack, read-only, buffered (see Pack.open).

    Not an io.BufferedReader on purpose: numpy.load takes one of those for a
    file of the OS and asks for its fileno()."""

    def __init__(self, pack, index, size, name, buffering=256 * 1024):
        super().__init__()
        self._pack = pack
        self._index = index
        self._size = size
        self._pos = 0
        self._buf = b""
        self._buf_at = 0
        self._chunk = max(int(buffering), 0)
        self.name = name
        self.mode = "rb"

    def readable(self):
        return True

    def seekable(self):
        return True

    def _check(self):
        if self.closed:
            raise ValueError("I/O operation on a closed file")

    def _fill(self, n):
        """Read n bytes at the position from the pack (no buffer)."""
        out = bytearray(n)
        got = self._pack._readinto(self._index, self._pos, out) if n else 0
        del out[got:]
        return bytes(out)

    def read(self, size=-1):
        self._check()
        left = max(self._size - self._pos, 0)
        if size is None or size < 0 or size > left:
            size = left
        if size == 0:
            return b""
        if self._pos == 0 and size == self._size:
            data = self._pack.read(self._index)  # whole: checked against its XXH3-128
            self._pos = self._size
            return data
        # from the buffer where it holds the position
        at = self._pos - self._buf_at
        if 0 <= at and at + size <= len(self._buf):
            self._pos += size
            return self._buf[at:at + size]
        if size >= self._chunk:
            data = self._fill(size)
        else:
            self._buf = self._fill(min(self._chunk, left))
            self._buf_at = self._pos
            data = self._buf[:size]
        self._pos += len(data)
        return data

    def read1(self, size=-1):
        return self.read(size)

    def readinto(self, buffer):
        with memoryview(buffer) as view:
            data = self.read(view.nbytes)
            view.cast("B")[:len(data)] = data
        return len(data)

    def readinto1(self, buffer):
        return self.readinto(buffer)

    def seek(self, offset, whence=io.SEEK_SET):
        self._check()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError("invalid whence (%r)" % (whence,))
        if pos < 0:
            raise OSError(22, "negative seek position %d" % pos)
        self._pos = pos
        return pos

    def tell(self):
        self._check()
        return self._pos

    def detach(self):
        raise io.UnsupportedOperation("detach")


def _settings(settings, **named):
    """The caller's settings as the tool's keys (str: str)."""
    out = {}
    for key, value in list(named.items()) + list(settings.items()):
        if value is None:
            continue
        if isinstance(value, bool):
            value = "yes" if value else "no"
        out[key] = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    return out


def stage(src, dest=None, *, include=None, copy=False, verify=False, pin=True,
          config=None, scratch=None, bwlimit=None, **settings):
    """Make the dataset at src (a pack, another archive, or a directory)
    available on this node, as ``stager stage SRC [DEST]`` does, and return
    where it is, a pathlib.Path.

    The first stage on a node reads src once into the node cache (one copy
    for every job and process of the user that wants it at once); later
    ones link to it.  dest defaults to $SLURM_TMPDIR/NAME in a job, else a
    directory in the scratch root.  include: a list of glob patterns, to
    stage a subset.  copy: a private writable copy instead of a read-only
    link.  verify: check a cached entry's files again.  pin: keep the entry
    from eviction while this process (or the Slurm job) lives.

    Settings are the tool's (``stager doctor`` lists them): the site's
    file, the user's, STAGER_* variables, then config (a file), then these:
    scratch (scratch_root), bwlimit ("200M"), and any other key of the tool
    as a keyword (cache_max="50G", max_readers_per_node=2, ...).

    Raises SourceError (missing source), SpaceError (cannot fit, with the
    figures), IntegrityError (damaged or hostile), UsageError, Error.
    KeyboardInterrupt cancels it; nothing half-staged is left published.
    """
    if isinstance(include, (str, bytes)):
        raise TypeError("include is a list of patterns, not one")
    kw = {"include": list(include) if include is not None else None,
          "copy": copy, "verify": verify, "pin": pin,
          "settings": _settings(settings, scratch_root=scratch, bwlimit=bwlimit)}
    if dest is not None:
        kw["dest"] = os.fspath(dest)
    if config is not None:
        kw["config"] = os.fspath(config)
    res = _stager.stage(os.fspath(src), **kw)
    _log.info("%s '%s' at '%s': %d files, %d bytes; %d bytes read from the source, %.2f s",
              "cached" if res["hit"] else "staged", os.fspath(src), res["path"],
              res["files"], res["content_bytes"], res["source_bytes"], res["seconds"])
    return pathlib.Path(res["path"])


CollectResult = collections.namedtuple(
    "CollectResult", "dest files sent_files sent_bytes unchanged failed changing seconds")
CollectResult.__doc__ = """What collect() did: dest (what was written to),
files in src, files and bytes sent this time, files unchanged since the last
collect, files that failed, files that kept changing (sent next time), and
seconds."""


def collect(src, dest, *, pack=False, level=0, config=None, scratch=None, bwlimit=None,
            **settings):
    """Copy the directory src (results on node-local scratch) to dest on the
    shared filesystem, as ``stager collect SRC DEST`` does, and return a
    CollectResult.

    Incremental (unchanged files cost nothing), atomic per file (dest never
    shows a partial file), within the node's slots and bandwidth limits;
    dest may hold %j, %a, %N ... as the tool's does.  pack=True writes one
    verified pack, DEST.tar.zst, at zstd level level.  Settings as for
    stage().  Raises SourceError, SpaceError, Error (files that could not
    be sent; the others were).  KeyboardInterrupt cancels it; what was sent
    stays whole.
    """
    kw = {"pack": pack, "level": level,
          "settings": _settings(settings, scratch_root=scratch, bwlimit=bwlimit)}
    if config is not None:
        kw["config"] = os.fspath(config)
    res = _stager.collect(os.fspath(src), os.fspath(dest), **kw)
    return CollectResult(**res)
