#!/usr/bin/env bats
# The Python-env fixtures of envs.bash (issue 38): the envs are real, work
# from their own path with nothing of Debian's dist-packages, and break
# when moved (what `stager run --env` must avoid by serving them in place).

load helpers
load envs
bats_require_minimum_version 1.5.0

# the files a process of DIR/bin/python has mapped and its modules' files,
# once each, after CODE, into OUT
mapped_after() { # DIR CODE OUT
	"$1/bin/python" -c "$2
import sys
for line in open('/proc/self/maps'):
    f = line.split()
    if len(f) > 5 and f[5].startswith('/'):
        print(f[5])
for m in list(sys.modules.values()):
    if getattr(m, '__file__', None):
        print(m.__file__)" >"$3.raw" || return 1
	sort -u "$3.raw" >"$3"
}

need_numpy() {
	"$ENVS_PY" -c 'import numpy' 2>/dev/null || skip "$ENVS_PY has no numpy (python3-numpy)"
}

@test "make_venv: numpy, the C extension and the console script, from the venv alone" {
	need_numpy
	make_venv "$T/v"
	site=$(envs_site "$T/v")
	grep -qx 'include-system-site-packages = false' "$T/v/pyvenv.cfg"
	[ -d "$site"/numpy-*.dist-info ]
	grep -q '^numpy/__init__.py,' "$site"/numpy-*.dist-info/RECORD
	"$T/v/bin/python" -c 'import numpy, sys; print(numpy.__file__); print("\n".join(sys.path))' >out
	[ "$(sed -n 1p out)" = "$site/numpy/__init__.py" ]
	run -1 grep -F dist-packages out
	mapped_after "$T/v" 'import numpy; numpy.arange(10).sum()' mapped
	run -1 grep -F "$ENVS_DIST" mapped
	# the console script pip would write: its shebang names the venv's python
	[ "$(head -n 1 "$T/v/bin/envprobe")" = "#!$T/v/bin/python" ]
	run "$T/v/bin/envprobe"
	[ "$status" -eq 0 ]
	[ "$output" = "prefix=$T/v ext=$site/envprobe_ext$("$ENVS_PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))') add=5" ]
	# byte-compiled as pip leaves it: using the venv writes nothing in it
	touch "$T/mark"
	env -u PYTHONDONTWRITEBYTECODE "$T/v/bin/envprobe" >/dev/null
	env -u PYTHONDONTWRITEBYTECODE "$T/v/bin/python" -c 'import numpy'
	[ -z "$(find "$T/v" -newer "$T/mark")" ]
}

@test "make_venv --torch: torch and its libraries load from the venv" {
	need_numpy
	"$ENVS_PY" -c 'import torch' 2>/dev/null || skip "$ENVS_PY has no torch (python3-torch)"
	make_venv "$T/v" --torch
	site=$(envs_site "$T/v")
	[ -d "$site"/torch-*.dist-info ]
	run "$T/v/bin/python" -c 'import torch, numpy; print(torch.__file__); print(int(torch.ones(4).sum()), numpy.asarray(torch.arange(3)).tolist())'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "$site/torch/__init__.py" ]
	[ "${lines[1]}" = "4 [0, 1, 2]" ]
	# the wheel's layout: libtorch_python found through _C's $ORIGIN/lib,
	# libtorch_cpu and libc10 through libtorch_python's $ORIGIN
	readelf -d "$site"/torch/lib/libtorch_python.so.* >dyn
	grep -F 'Library runpath: [$ORIGIN]' dyn
	mapped_after "$T/v" 'import torch' mapped
	for lib in libtorch_global_deps.so libtorch_python.so libtorch_cpu.so libtorch.so libshm.so libc10.so; do
		grep -q "^$site/torch/lib/$lib" mapped
	done
	run -1 grep -E '/(libtorch[a-z_]*|libc10|libshm)\.so' <(grep -vF "$site/" mapped)
	run -1 grep -F "$ENVS_DIST" mapped
}

@test "make_venv: the venv is bound to its path (moved, its console script's shebang is gone)" {
	need_numpy
	make_venv "$T/v"
	"$T/v/bin/envprobe"
	mv "$T/v" "$T/moved"
	[ "$(head -n 1 "$T/moved/bin/envprobe")" = "#!$T/v/bin/python" ]
	run -127 "$T/moved/bin/envprobe"
	# the script itself is fine: the moved venv's python runs it
	run "$T/moved/bin/python" "$T/moved/bin/envprobe"
	[ "$status" -eq 0 ]
	[[ $output == "prefix=$T/moved "* ]]
}

@test "make_conda_prefix: the library resolves through the absolute RPATH, the prefix is written in" {
	make_conda_prefix "$T/c"
	[ "$(readlink "$T/c/bin/python")" = "$ENVS_PY" ]
	"$T/c/bin/python" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["name"] == "envprobe", d' \
		"$T/c/conda-meta/envprobe-1.0-0.json"
	grep -qx "# cmd: conda create -p $T/c envprobe" "$T/c/conda-meta/history"
	readelf -d "$T/c/bin/envprobe" >dyn
	grep -F "path: [$T/c/lib]" dyn
	run "$T/c/bin/envprobe"
	[ "$status" -eq 0 ]
	[ "$output" = "libenvprobe=$T/c/lib/libenvprobe.so prefix.conf=prefix=$T/c" ]
	# moved, the RPATH names a directory that is gone
	mv "$T/c" "$T/moved"
	run -127 "$T/moved/bin/envprobe"
	[[ $output == *"libenvprobe.so: cannot open shared object file"* ]]
}

@test "stager pack of a venv holds it whole: extracted at the same path, it runs as before" {
	need_numpy
	make_venv "$T/v"
	stager pack -q "$T/v" >/dev/null
	[ -s "$T/v.tar.zst" ]
	stager ls --long "$T/v.tar.zst" >ls.out
	grep -E "^l.* bin/python3 -> $ENVS_PY\$" ls.out
	grep -E '^-rwx.* bin/envprobe$' ls.out
	grep -E "/envprobe_ext\..*\.so$" ls.out
	mv "$T/v" "$T/orig"
	# the pack is a tar.zst (stager unpack refuses the links that point
	# out of the tree, as bin/python3 does: served envs do not unpack)
	mkdir "$T/v"
	tar --zstd -xf "$T/v.tar.zst" -C "$T/v"
	[ "$(tree_sig "$T/orig")" = "$(tree_sig "$T/v")" ]
	run "$T/v/bin/envprobe"
	[ "$status" -eq 0 ]
	[[ $output == "prefix=$T/v ext=$(envs_site "$T/v")/envprobe_ext."* ]]
}
