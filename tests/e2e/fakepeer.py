#!/usr/bin/env python3
"""fakepeer.py - a hostile far end for push, pull and serve (peer.bats).

Written from the protocol (libstage/proto.h, FORMAT.md): a frame is a type
byte, a u32 little-endian payload length and the payload.

As a transport for pull (`stager pull --rsh "fakepeer.py server MODE"`):
it is started as `fakepeer.py server MODE HOST STAGER serve`, reads the
client's HELLO on stdin and answers as a lying server on stdout.

As a client of the real serve (`fakepeer.py client MODE STAGER PATH`): it
starts `STAGER serve`, pushes lies to it, and prints what serve did: its
exit status, the seconds it took, its peak memory (VmHWM), its message.

Modes: bloat (400k entries of ~4000-byte paths, zstd-compressed), stall
(half a frame, then silence), stall-idle (WELCOME of version 3, then
silence: no keepalive), overflow (two files of 2^63 bytes), escape-path (a
path with ESC and C1 bytes, twice), escape-msg (an ERROR whose text holds
them).
"""
import os
import struct
import subprocess
import sys
import threading
import time

MAGIC = b"STGWIRE1"
HELLO, WELCOME, ERROR, ENTRY, ENTRIES_END = 1, 2, 3, 4, 5
FILE, DIR = 1, 2
NASTY = b"evil\x1b[2J\x9b31m\xc2\x9bcaf\xc3\xa9"


def frame(t, payload=b""):
    return struct.pack("<BI", t, len(payload)) + payload


def entry(path, size=0, typ=FILE, xxh3=b"\x11" * 16):
    if typ != FILE:
        xxh3 = b"\0" * 16
    return (struct.pack("<BIQqI", typ, 0o644 if typ == FILE else 0o755, size, 0, 0)
            + xxh3 + struct.pack("<HH", len(path), 0) + path)


def batch(entries, compress=False):
    raw = b"".join(struct.pack("<H", len(e)) + e for e in entries)
    if compress:
        z = subprocess.run(["zstd", "-q", "-c", "-3"], input=raw,
                           stdout=subprocess.PIPE, check=True).stdout
        return frame(ENTRY, b"\x01" + z)
    return frame(ENTRY, b"\x00" + raw)


def read_exact(f, n):
    b = b""
    while len(b) < n:
        c = f.read(n - len(b))
        if not c:
            return None
        b += c
    return b


def read_frame(f):
    h = read_exact(f, 5)
    if h is None:
        return None, None
    t, n = struct.unpack("<BI", h)
    return t, read_exact(f, n) if n else b""


def bloat_frames(n=400000, plen=3990):
    """n entries of plen-byte paths, in ENTRY frames of under 1 MiB raw."""
    per = (1 << 20) // (plen + 64)
    i = 0
    while i < n:
        k = min(per, n - i)
        yield batch([entry(b"f%08d" % j + b"x" * (plen - 9), size=1)
                     for j in range(i, i + k)], compress=True)
        i += k


def lies(mode, out, version, linger=True):
    """What a lying sender writes after WELCOME (a server for a pull, a
    client for a push); linger: then silence for a minute (a client waits
    for serve instead, keeping its end open)."""
    if mode == "bloat":
        sent = 0
        for fr in bloat_frames():
            out.write(fr)
            out.flush()
            sent += len(fr)
        sys.stderr.write("fakepeer: sent it all (%d bytes)\n" % sent)
    elif mode == "stall":
        # an ENTRY frame of 1000 bytes, 10 of them sent
        out.write(struct.pack("<BI", ENTRY, 1000) + b"\x00" * 10)
        out.flush()
        if linger:
            time.sleep(60)
    elif mode == "stall-idle":
        if linger:
            time.sleep(60)
    elif mode == "overflow":
        out.write(batch([entry(b"a", size=1 << 63), entry(b"b", size=1 << 63)]))
        out.write(frame(ENTRIES_END, struct.pack("<Q", 2) + b"\0" * 32
                        + struct.pack("<Iq", 0o755, 0)))
        out.flush()
    elif mode == "escape-path":
        out.write(batch([entry(NASTY), entry(NASTY)]))
        out.flush()
    elif mode == "escape-msg":
        out.write(frame(ERROR, bytes([7]) + b"boom " + NASTY + b" \x07\x7f end"))
        out.flush()


def server(mode):
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    t, p = read_frame(inp)
    if t != HELLO:
        sys.exit("fakepeer: no HELLO")
    version = 3 if mode == "stall-idle" else 2
    out.write(frame(WELCOME, MAGIC + struct.pack("<I", version)))
    out.flush()
    try:
        lies(mode, out, version)
        # what the client answers (WANTs, or an ERROR), then its end
        while True:
            t, p = read_frame(inp)
            if t is None:
                break
            if t == ERROR:
                sys.stderr.write("fakepeer: the client said: %r\n" % p[1:])
            if t == 8:  # WANTS_END: the client took the lie; never answer
                time.sleep(60)
    except BrokenPipeError:
        sys.stderr.write("fakepeer: the client hung up\n")
        os._exit(0)


def vmhwm(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def client(mode, stager, path):
    t0 = time.monotonic()
    p = subprocess.Popen([stager, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    peak = [0]

    def watch():
        while p.poll() is None:
            peak[0] = max(peak[0], vmhwm(p.pid))
            time.sleep(0.02)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    msg = b""
    try:
        hello = MAGIC + struct.pack("<IBB", 2, 1, 0) + path.encode()
        if mode == "stall-hello":
            p.stdin.write(b"\x01\x20")  # half a header, then silence
            p.stdin.flush()
        else:
            p.stdin.write(frame(HELLO, hello))
            p.stdin.flush()
            t, pl = read_frame(p.stdout)
            if t != WELCOME:
                sys.exit("fakepeer: no WELCOME: %r %r" % (t, pl))
            lies(mode, p.stdin, 2, linger=False)
        t, pl = read_frame(p.stdout)
        if t == ERROR:
            msg = pl[1:]
    except BrokenPipeError:
        t, pl = read_frame(p.stdout)
        if t == ERROR:
            msg = pl[1:]
    rc = p.wait(timeout=120)
    th.join()
    print("serve: exit %d after %.2f s, peak RSS %d KiB" % (rc, time.monotonic() - t0, peak[0]))
    print("serve said: %s" % msg.decode("utf-8", "backslashreplace"))


def main():
    role, mode = sys.argv[1], sys.argv[2]
    if role == "server":
        server(mode)
    else:
        client(mode, sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    main()
