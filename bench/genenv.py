#!/usr/bin/python3
"""genenv.py - a synthetic Python env at scale, and a tree's signature
(issue 38; bench/env-scale.sh).

    genenv.py gen ENV [--files N] [--gib G] [--packages P] [--seed S]
    genenv.py sig ENV [--sample K] [-o FILE]

gen: `python3 -m venv --without-pip ENV` (bin/python a link to
/usr/bin/python3, out of the env), then in ENV/lib/pythonX.Y/site-packages
P packages (default 2000) laid out as pip installs them: a package
directory with subpackages, modules and their __pycache__/*.pyc, data
files, a NAME-VERSION.dist-info (METADATA, WHEEL, INSTALLER,
top_level.txt, RECORD with sha256 of every file, entry_points.txt),
console scripts in ENV/bin whose shebang names ENV/bin/python, extension
modules (.so: whole copies of real ELF libraries of /usr/lib/x86_64-linux-gnu),
a NAME.libs directory of versioned libraries with the usual soname
symlinks, and a few symlinks to directories inside the env (relative
and absolute).  About N files (default 300000) in all, and G GiB (default
10): what the small files leave is given to large libraries in a
`torch`-like package (libtorch_cuda.so and the like, hundreds of MB to
GB): their bytes are real ELF libraries of the system, concatenated from
varying offsets (compress like code does; an ELF header at the start, not
loadable).

Sources are made from 1024 templates (functions and classes, random
names), each module a template with a line of its own appended; its .pyc
is the template's code marshalled under a header naming the module's own
size and time (what py_compile writes for it: the appended comment does
not change the code).  Compiling 150,000 modules one by one would take
half an hour.  Every file and directory gets one fixed time
(2024-01-01T00:00:00Z), so that every .pyc is valid.  The same arguments
and seed make the same tree.  Package 0 is `pkg0000`, importable: its
modules, subpackages and extension are imported by `import pkg0000`.

sig: one line per entry of ENV (sorted): its path, type, mode, size,
mtime and link target, and the sha256 of every .so file's content and of
a sample of the others (K in 1000 files, chosen by a hash of the path, so
the same files on both sides; default 20).  Lines to FILE or stdout;
a summary on stderr.  Comparing two signatures of the same ENV (as served
and as it is) is comparing the trees.
"""
import argparse
import hashlib
import importlib.machinery
import importlib.util
import marshal
import math
import os
import random
import stat
import subprocess
import sys

MTIME = 1704067200  # 2024-01-01T00:00:00Z
LIBDIR = "/usr/lib/x86_64-linux-gnu"
MIB = 1 << 20
WORDS = ("data tensor frame array model layer loss batch stream cache token graph node "
         "edge value index config parse load save fetch apply merge split group sort "
         "scale norm mean sum count reduce map filter buffer queue pool worker task "
         "event state result error handle request client server session record field").split()


def ident(r):
    return "_".join(r.choice(WORDS) for _ in range(r.randint(1, 3)))


def template_source(r, target):
    """Python source of about target bytes: functions and classes."""
    out = ['"""Module generated for a synthetic environment."""',
           "import os", "import sys", "from typing import Any, Dict, List, Optional", ""]
    size = sum(len(x) + 1 for x in out)
    n = 0
    while size < target:
        n += 1
        name = "%s_%d" % (ident(r), n)
        if r.random() < 0.3:
            lines = ["class %s%d:" % (name.title().replace("_", ""), n),
                     '    """A %s that keeps %s."""' % (r.choice(WORDS), r.choice(WORDS)),
                     "    def __init__(self, %s: int = %d, **kw: Any) -> None:" % (r.choice(WORDS), r.randint(0, 999)),
                     "        self.items: List[int] = []",
                     "        self.opts: Dict[str, Any] = dict(kw)",
                     "    def %s(self, x: Optional[int] = None) -> int:" % ident(r),
                     "        if x is None:",
                     "            return len(self.items) + %d" % r.randint(0, 99),
                     "        self.items.append(x * %d)" % r.randint(1, 9),
                     "        return sum(self.items)", ""]
        else:
            a, b = ident(r) + "_in", ident(r) + "_out"
            lines = ["def %s(%s, %s=None, *args, **kwargs):" % (name, a, b),
                     '    """Return the %s of %s, or raise ValueError."""' % (r.choice(WORDS), r.choice(WORDS)),
                     "    if %s is None:" % b,
                     "        %s = [%s * i for i in range(%d)]" % (b, a, r.randint(2, 64)),
                     "    try:",
                     "        return {'%s': %s, 'n': len(%s) + %d}" % (r.choice(WORDS), b, b, r.randint(0, 9)),
                     "    except TypeError as e:",
                     "        raise ValueError('%s: bad %s') from e" % (name, r.choice(WORDS)), ""]
        out.extend(lines)
        size += sum(len(x) + 1 for x in lines)
    return "\n".join(out) + "\n"


def pyc_bytes(code, source_size):
    # PEP 552: magic, flags 0 (timestamp-based), mtime, source size, code
    return (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + MTIME.to_bytes(4, "little")
            + (source_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(code))


class Gen:
    def __init__(self, env, seed):
        self.env = env
        self.r = random.Random(seed)
        self.files = 0
        self.bytes = 0
        self.paths = []  # every file and link made, and directories, for the times

    def write(self, path, data, mode=0o644, record=None):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        self.files += 1
        self.bytes += len(data)
        self.paths.append(path)
        if record is not None:
            record.append((path, data))

    def link(self, target, path):
        os.symlink(target, path)
        self.files += 1
        self.paths.append(path)

    def mkdir(self, path):
        os.makedirs(path, exist_ok=True)


def so_corpus():
    """the system's real shared libraries, sorted: (path, size)"""
    out = []
    for name in sorted(os.listdir(LIBDIR)):
        p = os.path.join(LIBDIR, name)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and ".so" in name and st.st_size >= 16384:
            with open(p, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            out.append((p, st.st_size))
    if not out:
        sys.exit("genenv.py: no shared libraries in %s" % LIBDIR)
    return out


def big_file(path, size, corpus, start):
    """size bytes of the corpus's libraries concatenated from library start"""
    total = 0
    i = start
    with open(path, "wb") as out:
        while total < size:
            src, n = corpus[i % len(corpus)]
            i += 1
            n = min(n, size - total)
            with open(src, "rb") as f:
                left = n
                while left > 0:
                    c = os.copy_file_range(f.fileno(), out.fileno(), left)
                    if c <= 0:
                        break
                    left -= c
                    total += c
    os.chmod(path, 0o755)


def gen(args):
    env = os.path.abspath(args.env)
    if os.path.exists(env) and os.listdir(env):
        sys.exit("genenv.py: %s exists and is not empty" % env)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", env], check=True)
    pyver = "%d.%d" % sys.version_info[:2]
    site = os.path.join(env, "lib", "python" + pyver, "site-packages")
    g = Gen(env, args.seed)
    r = g.r
    corpus = so_corpus()
    small_so = [c for c in corpus if c[1] <= 4 * MIB]

    # templates: sizes lognormal, median 3 KiB, at most 64 KiB
    templates = []
    for t in range(1024):
        target = min(65536, max(200, int(r.lognormvariate(math.log(3072), 1.0))))
        src = template_source(r, target)
        templates.append((src, compile(src, "<template %d>" % t, "exec")))

    # the budget: per package a dist-info (6 files), the rest modules
    # (source + pyc), data files, and now and then an extension or libs
    npk = args.packages
    per_pkg_overhead = 9
    modules_total = max(npk, (args.files - npk * per_pkg_overhead) // 2)
    weights = [r.lognormvariate(0, 1.2) for _ in range(npk)]
    wsum = sum(weights)
    nbin = 0
    for k in range(npk):
        name = "pkg%04d" % k
        version = "%d.%d.%d" % (r.randint(0, 9), r.randint(0, 30), r.randint(0, 20))
        rec = []
        top = os.path.join(site, name)
        nmod = max(1, round(weights[k] / wsum * modules_total))
        if k == 0:
            nmod = max(nmod, 150)  # the one imported: a package as numpy's
        # subpackages: a tree of depth up to 3
        dirs = [top]
        nsub = min(nmod // 8, 1 + int(math.sqrt(nmod)))
        for s in range(nsub):
            parent = r.choice(dirs)
            if parent.count(os.sep) - top.count(os.sep) >= 3:
                parent = top
            dirs.append(os.path.join(parent, "%s_%d" % (r.choice(WORDS), s)))
        pkg_imports = {d: [] for d in dirs}
        for d in dirs:
            g.mkdir(os.path.join(d, "__pycache__"))
        # modules: every directory has its __init__, the rest spread
        mods = [(d, "__init__") for d in dirs]
        for m in range(max(0, nmod - len(dirs))):
            mods.append((r.choice(dirs), "%s_%d" % (r.choice(WORDS), m)))
        for d, mod in mods:
            src, code = r.choice(templates)
            if mod == "__init__":
                if k == 0:
                    continue  # below: pkg0000's import the whole package
                src = ""
            tail = "# %s %s %016x\n" % (name, mod, r.getrandbits(64))
            text = (src + tail).encode()
            if mod == "__init__":
                code = compile(text, "<init>", "exec")
            else:
                pkg_imports[d].append(mod)
            g.write(os.path.join(d, mod + ".py"), text, record=rec)
            g.write(os.path.join(d, "__pycache__", "%s.%s.pyc" % (mod, sys.implementation.cache_tag)),
                    pyc_bytes(code, len(text)), record=rec)
        if k == 0:
            # pkg0000's __init__s import every module and subpackage below
            # them, and the C extension (made at the end)
            for d in dirs:
                lines = ["from . import %s" % m for m in pkg_imports[d]]
                lines += ["from . import %s" % os.path.basename(s) for s in dirs if os.path.dirname(s) == d]
                if d == top:
                    lines.append("from . import _ext")
                text = ("\n".join(lines) + "\n").encode()
                g.write(os.path.join(d, "__init__.py"), text, record=rec)
                g.write(os.path.join(d, "__pycache__", "__init__.%s.pyc" % sys.implementation.cache_tag),
                        pyc_bytes(compile(text, "<init>", "exec"), len(text)), record=rec)
        # data files
        for i in range(r.randint(0, 3)):
            d = r.choice(dirs)
            data = r.randbytes(r.randint(64, 2048))
            g.write(os.path.join(d, "data_%d.%s" % (i, r.choice(("json", "txt", "bin")))), data, record=rec)
        g.write(os.path.join(top, "py.typed"), b"", record=rec)
        # an extension module in one package of 3: a copy of a real ELF
        # library (pkg0000's is a real extension, compiled at the end)
        if k % 3 == 0 and k != 0:
            p, n = r.choice(small_so)
            ext = os.path.join(r.choice(dirs), "_%s.cpython-%s-x86_64-linux-gnu.so"
                               % (r.choice(WORDS), pyver.replace(".", "")))
            with open(p, "rb") as f:
                g.write(ext, f.read(), 0o755, record=rec)
        # NAME.libs: versioned libraries and their soname links (as numpy.libs)
        if k % 40 == 1:
            libs = os.path.join(site, name + ".libs")
            g.mkdir(libs)
            for j in range(r.randint(1, 3)):
                p, n = r.choice(small_so)
                real = "lib%s%d-%08x.so.%d.%d.%d" % (r.choice(WORDS), j, r.getrandbits(32), 1, j, 0)
                with open(p, "rb") as f:
                    g.write(os.path.join(libs, real), f.read(), 0o755, record=rec)
                g.link(real, os.path.join(libs, real.rsplit(".", 2)[0]))
        # a symlink to a directory inside the env, relative (as some wheels)
        if k % 50 == 7:
            g.link(os.path.relpath(dirs[-1], top), os.path.join(top, "linked_dir"))
        # dist-info
        di = os.path.join(site, "%s-%s.dist-info" % (name, version))
        g.mkdir(di)
        g.write(os.path.join(di, "METADATA"),
                ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s %s\n" %
                 (name, version, r.choice(WORDS), r.choice(WORDS))).encode() + b"x" * r.randint(200, 4000) + b"\n",
                record=rec)
        g.write(os.path.join(di, "WHEEL"), b"Wheel-Version: 1.0\nGenerator: genenv\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n", record=rec)
        g.write(os.path.join(di, "INSTALLER"), b"pip\n", record=rec)
        g.write(os.path.join(di, "top_level.txt"), (name + "\n").encode(), record=rec)
        if k % 10 == 0:
            script = os.path.join(env, "bin", "%s-%s" % (name, r.choice(WORDS)))
            g.write(script, ("#!%s/bin/python\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
                             "from %s import __name__ as main\nif __name__ == '__main__':\n"
                             "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                             "    sys.exit(print(main))\n" % (env, name)).encode(), 0o755, record=rec)
            nbin += 1
            g.write(os.path.join(di, "entry_points.txt"),
                    ("[console_scripts]\n%s = %s:main\n" % (os.path.basename(script), name)).encode(), record=rec)
        lines = []
        for p, data in rec:
            lines.append("%s,sha256=%s,%d" % (os.path.relpath(p, site), hashlib.sha256(data).hexdigest(), len(data)))
        lines.append("%s,," % os.path.relpath(os.path.join(di, "RECORD"), site))
        g.write(os.path.join(di, "RECORD"), ("\n".join(lines) + "\n").encode())

    # pkg0000/_ext: a real C extension module, so that the import loads an
    # ELF from the env
    ext_c = os.path.join(env, "_ext.c")
    with open(ext_c, "w") as f:
        f.write('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ext", 0, -1, 0};\n'
                "PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&m); }\n")
    inc = subprocess.run(["/usr/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    ext = os.path.join(site, "pkg0000", "_ext" + suffix)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-I", inc, "-o", ext, ext_c], check=True)
    os.unlink(ext_c)
    g.files += 1
    g.bytes += os.path.getsize(ext)
    g.paths.append(ext)

    # symlinks: an absolute one inside the env, and share/ links
    share = os.path.join(env, "share", "genenv")
    g.mkdir(share)
    g.link(os.path.join(site, "pkg0000"), os.path.join(share, "pkg0000"))
    g.link("../../lib", os.path.join(share, "lib"))

    # the large libraries: what the small files left, in a torch-like package
    budget = int(args.gib * (1 << 30)) - g.bytes
    torch = os.path.join(site, "torchlike", "lib")
    g.mkdir(torch)
    shares = (("libtorch_cuda.so", 0.42), ("libtorch_cpu.so", 0.18), ("libcudnn_ops.so.8", 0.12),
              ("libcublasLt.so.12", 0.10), ("libnccl.so.2", 0.07), ("libtriton.so", 0.05),
              ("libcusparse.so.12", 0.04), ("libc10_cuda.so", 0.02))
    nbig = 0
    if budget > 0:
        for i, (name, frac) in enumerate(shares):
            size = int(budget * frac)
            p = os.path.join(torch, name)
            big_file(p, size, corpus, (i * 97) % len(corpus))
            g.files += 1
            g.bytes += size
            g.paths.append(p)
            nbig += 1
        g.link("libtorch_cuda.so", os.path.join(torch, "libtorch_cuda.so.2"))

    # one time for everything (links: lutimes), directories last
    for p in g.paths:
        os.utime(p, (MTIME, MTIME), follow_symlinks=False)
    for d, _, _ in sorted(os.walk(env), key=lambda t: -t[0].count(os.sep)):
        os.utime(d, (MTIME, MTIME))
    sys.stderr.write("genenv.py: %s: %d packages, %d files and links made (%d console scripts, %d large libraries), "
                     "%.2f GiB\n" % (env, npk, g.files, nbin, nbig, g.bytes / (1 << 30)))


def sig(args):
    env = os.path.abspath(args.env)
    out = open(args.o, "w") if args.o else sys.stdout
    n = hashed = hbytes = 0
    lines = []
    for d, dns, fns in os.walk(env):
        dns.sort()
        for name in dns + sorted(fns):
            p = os.path.join(d, name)
            rel = os.path.relpath(p, env)
            st = os.lstat(p)
            n += 1
            if stat.S_ISLNK(st.st_mode):
                lines.append("%s l %o - - %s" % (rel, stat.S_IMODE(st.st_mode), os.readlink(p)))
            elif stat.S_ISDIR(st.st_mode):
                lines.append("%s d %o - %d" % (rel, stat.S_IMODE(st.st_mode), st.st_mtime))
            else:
                h = "-"
                pick = int(hashlib.md5(rel.encode()).hexdigest()[:8], 16) % 1000 < args.sample
                if ".so" in name or pick:
                    s = hashlib.sha256()
                    with open(p, "rb") as f:
                        while True:
                            b = f.read(4 * MIB)
                            if not b:
                                break
                            s.update(b)
                    h = s.hexdigest()
                    hashed += 1
                    hbytes += st.st_size
                lines.append("%s f %o %d %d %s" % (rel, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime, h))
    lines.sort()
    out.write("\n".join(lines) + "\n")
    if args.o:
        out.close()
    sys.stderr.write("genenv.py: sig %s: %d entries, %d files hashed (%.2f GiB)\n" % (env, n, hashed, hbytes / (1 << 30)))


def main():
    ap = argparse.ArgumentParser(prog="genenv.py", description="a synthetic Python env at scale, and a tree's signature")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("gen")
    a.add_argument("env")
    a.add_argument("--files", type=int, default=300000)
    a.add_argument("--gib", type=float, default=10.0)
    a.add_argument("--packages", type=int, default=2000)
    a.add_argument("--seed", type=int, default=38)
    b = sub.add_parser("sig")
    b.add_argument("env")
    b.add_argument("--sample", type=int, default=20)
    b.add_argument("-o")
    args = ap.parse_args()
    gen(args) if args.cmd == "gen" else sig(args)


if __name__ == "__main__":
    main()
