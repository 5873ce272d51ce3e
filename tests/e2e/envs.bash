# envs.bash - real Python environments for the tests and the benchmark of
# `stager run --env` and `stager env` (issue 38), sourced by bats files and
# by bench/env.sh.  Nothing here needs stager.
#
#   make_venv DIR [--torch]   a venv of Debian's /usr/bin/python3 with
#                             numpy (and torch) copied in as pip lays them out
#   make_conda_prefix DIR     a conda-style prefix, without conda
#
# What the tests need from an env is what breaks when it is served
# elsewhere than at its own path: shebangs naming DIR/bin/python,
# pyvenv.cfg, RPATHs and text files holding the absolute DIR.  So both
# build their probes (a console script, a C extension, a library and a
# program linked through an absolute RPATH) with DIR written in, and each
# probe reports the path it was loaded from (dladdr), for a test to compare.
#
# Always /usr/bin/python3: torch and numpy are Debian's (python3-torch,
# python3-numpy), installed for it; another python3 may come first on PATH.
# The copies keep the files' times, so Debian's __pycache__ stays valid
# (a .pyc names its source's mtime and size) and nothing is compiled at
# import, as after a pip install.  Each function fails (status 1, a line
# on stderr) rather than leave a half-made env.

ENVS_PY=/usr/bin/python3
ENVS_DIST=/usr/lib/python3/dist-packages
ENVS_LIBDIR=/usr/lib/x86_64-linux-gnu

_envs_die() {
	echo "envs.bash: $*" >&2
	return 1
}

# envs_pyver: "3.11", the X.Y of ENVS_PY (its venv's lib/pythonX.Y)
envs_pyver() { "$ENVS_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }

# envs_site DIR: DIR's site-packages, where pip installs
envs_site() { echo "$1/lib/python$(envs_pyver)/site-packages"; }

# _envs_copy SITE NAME... [-- EXCLUDE...]: NAMEs (packages or modules) of
# Debian's dist-packages copied into SITE with their modes and times (tar,
# not cp -a: no owners, and the excludes), EXCLUDEs left out
_envs_copy() {
	local site=$1 names=() ex=()
	shift
	while (($#)) && [[ $1 != -- ]]; do names+=("$1"); shift; done
	(($#)) && shift
	local e
	for e; do ex+=("--exclude=$e"); done
	tar -C "$ENVS_DIST" "${ex[@]}" -cf - "${names[@]}" | tar -C "$site" --no-same-owner -xf - ||
		_envs_die "cannot copy ${names[*]} from $ENVS_DIST into $site"
}

# _envs_dist_info SITE NAME VERSION TOP...: NAME-VERSION.dist-info in SITE
# as pip writes it (METADATA, INSTALLER, top_level.txt, RECORD listing
# every file of the TOPs, without hashes: pip's own check is not tested
# here), so that tools and stager's staleness check see an install record
_envs_dist_info() {
	local site=$1 name=$2 version=$3 di t
	shift 3
	di=$site/$name-$version.dist-info
	mkdir -p "$di" || return 1
	printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$name" "$version" >"$di/METADATA"
	echo pip >"$di/INSTALLER"
	printf 'Wheel-Version: 1.0\nGenerator: envs.bash\nRoot-Is-Purelib: false\nTag: py3-none-any\n' >"$di/WHEEL"
	: >"$di/top_level.txt"
	for t; do
		[[ $t == *.py ]] && t=${t%.py}
		echo "$t" >>"$di/top_level.txt"
	done
	{
		for t; do (cd "$site" && find "$t" ! -type d -printf '%p,,\n'); done
		for t in METADATA INSTALLER WHEEL top_level.txt RECORD; do echo "${di##*/}/$t,,"; done
	} >"$di/RECORD"
}

# _envs_origin_runpath FILE: FILE, an ELF64 shared library with a SONAME
# and no RPATH/RUNPATH, given DT_RUNPATH "$ORIGIN" (in place: the SONAME
# entry becomes the RUNPATH and its string "$ORIGIN"), as the pip wheels'
# libtorch_python.so has.  No patchelf on the machine; the .dynamic and
# .dynstr keep their sizes.  Refused if another name shares the bytes.
_envs_origin_runpath() {
	"$ENVS_PY" - "$1" <<'EOF'
import struct, sys
path = sys.argv[1]
b = bytearray(open(path, "rb").read())
if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
    sys.exit("not a little-endian ELF64 file")
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
dyn = [s for s in secs if s[1] == 6]  # SHT_DYNAMIC
if len(dyn) != 1:
    sys.exit("no .dynamic section")
dyn = dyn[0]
strtab = secs[dyn[6]]
str_off = strtab[4]
soname_at, soname = None, None
ents = []
for i in range(dyn[5] // 16):
    tag, val = struct.unpack_from("<qQ", b, dyn[4] + i * 16)
    if tag == 0:
        break
    ents.append((i, tag, val))
for i, tag, val in ents:
    if tag in (15, 29):  # DT_RPATH, DT_RUNPATH
        sys.exit("it has an RPATH or RUNPATH already")
    if tag == 14:  # DT_SONAME
        soname_at, soname = i, val
if soname is None:
    sys.exit("no SONAME to turn into the RUNPATH")
end = b.index(b"\0", str_off + soname) - str_off
if end - soname < 7:
    sys.exit("the SONAME is shorter than $ORIGIN")
# the names that point into the 8 bytes rewritten (a linker may share tails)
refs = [val for _, tag, val in ents if tag == 1]  # DT_NEEDED
for s in secs:
    if s[1] == 11:  # SHT_DYNSYM
        refs += [struct.unpack_from("<I", b, s[4] + k * 24)[0] for k in range(s[5] // 24)]
    if s[1] == 0x6FFFFFFE:  # SHT_GNU_verneed
        p = s[4]
        while True:
            _, cnt, vfile, aux, nxt = struct.unpack_from("<HHIII", b, p)
            refs.append(vfile)
            q = p + aux
            for _ in range(cnt):
                _, _, _, vname, vnext = struct.unpack_from("<IHHII", b, q)
                refs.append(vname)
                q += vnext
            if not nxt:
                break
            p += nxt
if any(soname < r < soname + 8 for r in refs):
    sys.exit("another name shares the SONAME's bytes")
b[str_off + soname:str_off + soname + 8] = b"$ORIGIN\0"
struct.pack_into("<qQ", b, dyn[4] + soname_at * 16, 29, soname)
open(path, "wb").write(b)
EOF
}

# _envs_cc OUT CC-ARGS... <SOURCE: the C source on stdin built with cc
# into OUT (through a temporary directory: no half-written OUT)
_envs_cc() {
	local out=$1 tmp rc=0
	shift
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/envs-cc.XXXXXX") || return 1
	cat >"$tmp/src.c"
	cc -std=c11 -D_GNU_SOURCE -O2 -fPIC -o "$tmp/out" "$tmp/src.c" "$@" 2>"$tmp/err" &&
		cp "$tmp/out" "$out" || rc=1
	((rc == 0)) || _envs_die "cc of $out failed: $(head -n 3 "$tmp/err" | tr '\n' ' ')"
	rm -rf "$tmp"
	return "$rc"
}

# The venv's probe: a C extension envprobe_ext (add(a, b); where(): the
# path its .so was loaded from), a package envprobe_cli whose main()
# prints sys.prefix, where() and add(2, 3), and the console script
# DIR/bin/envprobe that pip would write for the entry point
# envprobe=envprobe_cli:main (its shebang: DIR/bin/python)
_envs_venv_probe() {
	local dir=$1 site=$2 inc suffix
	inc=$("$ENVS_PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])') || return 1
	suffix=$("$ENVS_PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))') || return 1
	[[ -e $inc/Python.h ]] || _envs_die "$inc/Python.h missing (python3-dev)" || return 1
	_envs_cc "$site/envprobe_ext$suffix" -shared -I"$inc" <<'EOF' || return 1
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
static PyObject *add(PyObject *self, PyObject *args) {
	long a, b;
	(void)self;
	if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
	return PyLong_FromLong(a + b);
}
static PyObject *where(PyObject *self, PyObject *noargs) {
	Dl_info info;
	(void)self; (void)noargs;
	if (!dladdr((void *)&add, &info) || !info.dli_fname) Py_RETURN_NONE;
	return PyUnicode_DecodeFSDefault(info.dli_fname);
}
static PyMethodDef methods[] = {
	{"add", add, METH_VARARGS, "a + b"},
	{"where", where, METH_NOARGS, "the path this extension was loaded from"},
	{NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "envprobe_ext", NULL, -1, methods, NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit_envprobe_ext(void) { return PyModule_Create(&mod); }
EOF
	mkdir -p "$site/envprobe_cli" || return 1
	cat >"$site/envprobe_cli/__init__.py" <<'EOF'
"""The console script's package: prints where it runs from."""
import sys

import envprobe_ext


def main():
    print("prefix=%s ext=%s add=%d" % (sys.prefix, envprobe_ext.where(), envprobe_ext.add(2, 3)))
    return 0
EOF
	# pip's console-script template (pip/_internal/operations/install/wheel.py)
	cat >"$dir/bin/envprobe" <<EOF
#!$dir/bin/python
# -*- coding: utf-8 -*-
import re
import sys
from envprobe_cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\.pyw|\.exe)?\$', '', sys.argv[0])
    sys.exit(main())
EOF
	chmod 755 "$dir/bin/envprobe"
	_envs_dist_info "$site" envprobe 1.0 envprobe_cli "envprobe_ext$suffix" || return 1
	printf '[console_scripts]\nenvprobe = envprobe_cli:main\n' >"$site/envprobe-1.0.dist-info/entry_points.txt"
	echo "../../../bin/envprobe,," >>"$site/envprobe-1.0.dist-info/RECORD"
}

# _envs_torch SITE: torch and what `import torch` needs (typing_extensions;
# astunparse and its six, which torch.jit imports) copied into SITE, each
# with a dist-info.  Debian's torch/lib holds symlinks to
# /usr/lib/x86_64-linux-gnu; the wheels hold the libraries themselves, so
# torch/lib gets copies under the names the loader asks for:
# libtorch_global_deps.so (torch/__init__ dlopens it by path), and
# libtorch_python.so.1.13 with its four torch dependencies.  _C's RUNPATH
# is $ORIGIN/lib, which finds libtorch_python; the copy of libtorch_python
# is given RUNPATH $ORIGIN (as the wheel's), so libshm, libtorch,
# libtorch_cpu and libc10 load from torch/lib too.  torch/include and
# torch/test (symlinks into /usr) and the test programs of torch/bin are
# left out (the wheels keep bin/torch_shm_manager alone).  What stays
# outside: the interpreter and its standard library, and the system
# libraries the Debian builds link (libgomp, libblas, libprotobuf, ...),
# which the wheels bundle.
_envs_torch() {
	local site=$1 tv n so lib sov
	_envs_copy "$site" torch -- torch/include torch/test torch/lib 'torch/bin/test_*' \
		torch/bin/FileStoreTest torch/bin/HashStoreTest torch/bin/TCPStoreTest torch/bin/tutorial_tensorexpr || return 1
	_envs_copy "$site" typing_extensions.py astunparse six.py || return 1
	mkdir -p "$site/torch/lib" || return 1
	sov=$(readlink "$ENVS_DIST/torch/lib/libtorch_python.so") && sov=${sov##*.so.} # 1.13
	[[ -n $sov ]] || _envs_die "cannot read the version of $ENVS_DIST/torch/lib/libtorch_python.so" || return 1
	cp -p "$ENVS_LIBDIR/libtorch_global_deps.so.$sov" "$site/torch/lib/libtorch_global_deps.so" || return 1
	for lib in libtorch_python libshm libtorch libtorch_cpu libc10; do
		cp -p "$ENVS_LIBDIR/$lib.so.$sov" "$site/torch/lib/" || return 1
	done
	_envs_origin_runpath "$site/torch/lib/libtorch_python.so.$sov" ||
		_envs_die "cannot give $site/torch/lib/libtorch_python.so.$sov its RUNPATH" || return 1
	tv=$(sed -n 's/^Version: //p' "$ENVS_DIST"/torch-*.egg-info/PKG-INFO | sed -n 1p)
	_envs_dist_info "$site" torch "${tv:-0}" torch || return 1
	for n in typing_extensions six; do
		_envs_dist_info "$site" "$n" "$("$ENVS_PY" -c "import importlib.metadata as m; print(m.version('$n'))")" "$n.py" || return 1
	done
	_envs_dist_info "$site" astunparse "$("$ENVS_PY" -c "import importlib.metadata as m; print(m.version('astunparse'))")" astunparse
}

# make_venv DIR [--torch]: a venv at DIR (`python3 -m venv --without-pip`,
# include-system-site-packages = false: nothing of Debian's dist-packages
# on its path) with, in DIR/lib/python3.X/site-packages: numpy and its
# dist-info, the probe (envprobe_ext, envprobe_cli, DIR/bin/envprobe), and
# with --torch torch and its pure-Python dependencies (_envs_torch); every
# module byte-compiled, as pip leaves them.
# About 1 s without torch, a few with (copying 200 MB).
make_venv() {
	local dir=$1 torch=0 site
	[[ -n $dir ]] || _envs_die "make_venv DIR [--torch]" || return 1
	case ${2:-} in
	'') ;;
	--torch) torch=1 ;;
	*) _envs_die "make_venv: unknown option '$2'" || return 1 ;;
	esac
	"$ENVS_PY" -m venv --without-pip "$dir" || _envs_die "python3 -m venv $dir failed" || return 1
	site=$(envs_site "$dir")
	[[ -d $site ]] || _envs_die "no $site after python3 -m venv" || return 1
	_envs_copy "$site" numpy || return 1
	_envs_dist_info "$site" numpy "$("$ENVS_PY" -c 'import numpy; print(numpy.__version__)')" numpy || return 1
	_envs_venv_probe "$dir" "$site" || return 1
	if ((torch)); then _envs_torch "$site" || return 1; fi
	# pip byte-compiles what it installs: the modules copied without their
	# .pyc (Debian keeps typing_extensions' and six's in a __pycache__ of
	# dist-packages) and the probe's; else the env's first import writes
	# them (unless PYTHONDONTWRITEBYTECODE), changing the env after its pack
	"$ENVS_PY" -m compileall -q "$site" >/dev/null || _envs_die "compileall of $site failed"
}

# make_conda_prefix DIR: a conda-style prefix without conda: bin/python (a
# link to /usr/bin/python3), conda-meta/ (a package record as JSON and
# the history file conda appends to), etc/prefix.conf holding
# "prefix=DIR" (conda's hard-coded prefixes in text files), and a probe
# that runs only where DIR/lib holds its library: lib/libenvprobe.so
# (envprobe_where(): the path it was loaded from) and bin/envprobe, lib/libenvprobe.so (envprobe_where(): the
# path it was loaded from) and bin/envprobe, linked to it through the
# RPATH DIR/lib (absolute, as conda-build's binaries have their prefix);
# it prints "libenvprobe=PATH prefix.conf=LINE" (PATH from dladdr, LINE
# read from its own prefix's etc/prefix.conf)
make_conda_prefix() {
	local dir=$1 now
	[[ -n $dir ]] || _envs_die "make_conda_prefix DIR" || return 1
	mkdir -p "$dir/bin" "$dir/lib" "$dir/etc" "$dir/conda-meta" || return 1
	ln -s "$ENVS_PY" "$dir/bin/python" || return 1
	echo "prefix=$dir" >"$dir/etc/prefix.conf"
	_envs_cc "$dir/lib/libenvprobe.so" -shared -Wl,-soname,libenvprobe.so <<'EOF' || return 1
#include <dlfcn.h>
const char *envprobe_where(void);
const char *envprobe_where(void) {
	Dl_info info;
	if (!dladdr((void *)&envprobe_where, &info) || !info.dli_fname) return "?";
	return info.dli_fname;
}
EOF
	_envs_cc "$dir/bin/envprobe" -L"$dir/lib" -lenvprobe -Wl,-rpath,"$dir/lib" <<'EOF' || return 1
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
const char *envprobe_where(void);
int main(void) {
	char exe[PATH_MAX], line[PATH_MAX + 16] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) strcpy(slash, "/../etc/prefix.conf"); /* PREFIX/bin/envprobe */
		FILE *f = fopen(exe, "r");
		if (f) {
			if (!fgets(line, sizeof line, f)) line[0] = 0;
			line[strcspn(line, "\n")] = 0;
			fclose(f);
		}
	}
	printf("libenvprobe=%s prefix.conf=%s\n", envprobe_where(), line);
	return 0;
}
EOF
	now=$(date -u '+%Y-%m-%d %H:%M:%S')
	cat >"$dir/conda-meta/envprobe-1.0-0.json" <<EOF
{
  "name": "envprobe",
  "version": "1.0",
  "build": "0",
  "build_number": 0,
  "channel": "local",
  "files": ["bin/envprobe", "etc/prefix.conf", "lib/libenvprobe.so"],
  "paths_data": {"paths": [
    {"_path": "etc/prefix.conf", "file_mode": "text", "path_type": "hardlink", "prefix_placeholder": "/opt/anaconda1anaconda2anaconda3"},
    {"_path": "bin/envprobe", "file_mode": "binary", "path_type": "hardlink", "prefix_placeholder": "/opt/anaconda1anaconda2anaconda3"},
    {"_path": "lib/libenvprobe.so", "path_type": "hardlink"}
  ], "paths_version": 1},
  "extracted_package_dir": "",
  "requested_spec": "envprobe"
}
EOF
	printf '==> %s <==\n# cmd: conda create -p %s envprobe\n+local::envprobe-1.0-0\n' "$now" "$dir" >"$dir/conda-meta/history"
}
