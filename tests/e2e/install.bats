#!/usr/bin/env bats
# make install, and a program built against the installed library with
# nothing but pkg-config.

load helpers

@test "make install puts tool, library, header, .pc and man page in place" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	root="$T/root"
	make -s -C "$top" B="${B:-build}" install DESTDIR="$root" PREFIX=/usr >/dev/null
	[ -x "$root/usr/bin/stager" ]
	[ -f "$root/usr/lib/libstage.a" ]
	[ -f "$root/usr/include/libstage.h" ]
	[ -f "$root/usr/lib/pkgconfig/libstage.pc" ]
	[ -f "$root/usr/share/man/man1/stager.1" ]
	[ -L "$root/usr/lib/libstage.so.0" ]
	# the shared library has its SONAME
	objdump -p "$root/usr/lib/libstage.so.0" >objdump.txt
	grep -q 'SONAME *libstage.so.0' objdump.txt
	# it exports only stg_* symbols (code or data), and every function of
	# the public header; the build's library and the installed one
	grep '^STG_API' "$root/usr/include/libstage.h" | grep -oE '\<stg_[a-z0-9_]+ *\(' | tr -d ' (' |
		LC_ALL=C sort -u >header.syms
	[ "$(wc -l <header.syms)" -ge 20 ]
	for so in "$top/${B:-build}/libstage.so" "$root/usr/lib/libstage.so.0"; do
		nm -D --defined-only "$so" >nm.txt
		# (A: a version node's name, not a symbol)
		awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' nm.txt | LC_ALL=C sort -u >exported.syms
		echo "$so exports $(wc -l <exported.syms) symbols"
		grep -v '^stg_' exported.syms >foreign.syms || true
		cat foreign.syms
		[ ! -s foreign.syms ]
		LC_ALL=C comm -23 header.syms exported.syms >missing.syms
		cat missing.syms
		[ ! -s missing.syms ]
	done

	cat >prog.c <<'C'
#include <libstage.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	stg_ctx *ctx = stg_ctx_new();
	stg_pack *p;
	if (stg_pack_open(ctx, argv[1], &p)) {
		fprintf(stderr, "%s\n", stg_errmsg(ctx));
		return stg_exit_status(STG_ECORRUPT);
	}
	printf("%s %zu\n", stg_version(), stg_pack_count(p));
	stg_pack_close(p);
	stg_ctx_free(ctx);
	return argc > 2;
}
C
	export PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_PATH="$root/usr/lib/pkgconfig"
	# shellcheck disable=SC2086
	cc ${SAN_FLAGS:-} -o prog prog.c $(pkg-config --cflags --libs libstage)
	mkdir src && echo a >src/a && echo b >src/b
	"$root/usr/bin/stager" pack -q src -o p.tar.zst
	run env LD_LIBRARY_PATH="$root/usr/lib" ./prog p.tar.zst
	[ "$status" -eq 0 ]
	[ "$output" = "0.1.0 2" ]
}

@test "the annotated site configuration names every setting and is accepted as is" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	root="$T/root"
	make -s -C "$top" B="${B:-build}" install DESTDIR="$root" PREFIX=/usr >/dev/null
	ex="$root/usr/share/doc/stager/stager.conf.example"
	[ -f "$ex" ]
	"$STAGER" status --json --scratch "$T/s" >status.json
	keys=$(jq -r '.settings | keys[]' status.json)
	[ "$(echo "$keys" | wc -l)" -ge 10 ]
	for k in $keys; do
		grep -q "^#$k = " "$ex" || { echo "missing: $k"; false; }
	done
	# uncommented, every example value is valid
	sed 's/^#\([a-z_]* = \)/\1/' "$ex" | sed "s|/data/.stager-leases|$T/leases|" >site.conf
	STAGER_SITE_CONFIG="$T/site.conf" "$STAGER" status --scratch "$T/s" >/dev/null
}

# Completions bash-completion gives for the words of a command line (the
# last word is the one being completed).
complete_words() {
	bash -c '
		source /usr/share/bash-completion/bash_completion
		source "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
		_stager stager "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}"' sh "$@"
}

@test "bash completion: every command, each one's options, values" {
	[ -r /usr/share/bash-completion/bash_completion ] || skip "needs bash-completion"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	root="$T/root"
	make -s -C "$top" B="${B:-build}" install DESTDIR="$root" PREFIX=/usr >/dev/null
	comp="$root/usr/share/bash-completion/completions/stager"
	[ -f "$comp" ]
	"$STAGER" --help >global.help
	cmds=$(awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}' global.help)
	[ -n "$cmds" ]
	[ "$(complete_words "$comp" stager '' | sort)" = "$(echo "$cmds" | sort)" ]
	complete_words "$comp" stager co | grep -qx collect
	for c in $cmds; do
		offered=$(complete_words "$comp" stager "$c" -- | sort -u)
		"$STAGER" "$c" --help >cmd.help
		# every option the command's help lists is offered ...
		for o in $(grep -oE -- '^ +(-[a-zA-Z], )?--[a-z][a-z-]*' cmd.help | grep -oE -- '--[a-z-]+'); do
			echo "$offered" | grep -qx -- "$o" || { echo "$c: $o not offered"; false; }
		done
		# ... and everything offered is in the command's help or global
		for o in $offered; do
			[ "$o" = -- ] && continue
			grep -q -- "${o%=}" cmd.help global.help || { echo "$c: $o offered, unknown"; false; }
		done
	done
	complete_words "$comp" stager --progress=l | grep -qx lines
	complete_words "$comp" stager stage --progress b | grep -qx bar
	# after `run ... --`, commands complete
	complete_words "$comp" stager run --stage x -- ech | grep -qx echo
}

@test "the Lmod modulefile: after module load stager, tool, man page and libstage.pc are found" {
	[ -r /usr/share/lmod/lmod/init/bash ] || skip "needs lmod"
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	make -s -C "$top" B="${B:-build}" install PREFIX="$T/prefix" >/dev/null
	[ -f "$T/prefix/share/modulefiles/stager/0.1.0.lua" ]
	run env -i HOME="$T" PATH=/usr/bin:/bin bash -c '
		source /usr/share/lmod/lmod/init/bash
		module use "$1/share/modulefiles"
		module load stager || exit 9
		command -v stager
		stager --version
		man -w stager
		pkg-config --modversion libstage
		"$2" -c "import stager; print(stager.__file__)"
		module unload stager
		command -v stager || echo unloaded' sh "$T/prefix" "${PY3:-/usr/bin/python3}"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -qx "$T/prefix/bin/stager"
	echo "$output" | grep -q "$T/prefix/share/man/man1/stager.1"
	echo "$output" | grep -qx "0.1.0"
	echo "$output" | grep -qx "$T/prefix/lib/python3/dist-packages/stager/__init__.py"
	echo "$output" | tail -1 | grep -qx unloaded
}

@test "make install puts the Python package where Debian's python3 finds it, and says where" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	root="$T/root"
	run make -s -C "$top" B="${B:-build}" install DESTDIR="$root" PREFIX=/usr
	[ "$status" -eq 0 ]
	[[ "$output" == *"stager is in /usr/lib/python3/dist-packages, where /usr/bin/python3 finds it"* ]]
	d="$root/usr/lib/python3/dist-packages/stager"
	[ -f "$d/__init__.py" ]
	[ -f "$d/torch.py" ]
	[ -x "$d/_stager.so" ]
	# one file with libstage inside: it needs no libstage.so, and exports
	# only its init function
	objdump -p "$d/_stager.so" >dyn.txt
	run -1 grep -c 'NEEDED *libstage' dyn.txt
	[ "$output" = 0 ]
	nm -D --defined-only "$d/_stager.so" | awk '$2 == "T" { print $3 }' >exported.syms
	[ "$(cat exported.syms)" = PyInit__stager ]
	# from anywhere, with Debian's python3 (not another first on PATH)
	cd /
	run env PYTHONPATH="$root/usr/lib/python3/dist-packages" "${PY3:-/usr/bin/python3}" -c \
		'import stager; print(stager.__file__, stager.__version__)'
	[ "$status" -eq 0 ]
	[ "$output" = "$d/__init__.py 0.1.0" ]
	# PREFIX=/usr/local: the directory Debian's python3 searches there
	run make -s -C "$top" B="${B:-build}" install DESTDIR="$root" PREFIX=/usr/local
	[ "$status" -eq 0 ]
	pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	[ -f "$root/usr/local/lib/python$pyver/dist-packages/stager/_stager.so" ]
	/usr/bin/python3 -c 'import sys; sys.exit(0 if "/usr/local/lib/python'"$pyver"'/dist-packages" in sys.path else 1)'
}

@test "make install: the example scripts in share/doc/stager/examples; tmpfiles.d only where systemd reads it, else said; uninstall removes them" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	# PREFIX (TMPFILESDIR) -> where systemd-tmpfiles finds stager.conf
	# (tmpfiles.d(5): /etc, /run, /usr/local/lib and /usr/lib only)
	for c in "/usr||/usr/lib/tmpfiles.d" "/usr/local||/usr/local/lib/tmpfiles.d" \
		"/opt/stager|/etc/tmpfiles.d|/etc/tmpfiles.d" "/opt/stager||none"; do
		IFS='|' read -r prefix tdir want <<<"$c"
		root="$T/root${prefix//\//_}${tdir//\//_}"
		echo "PREFIX=$prefix TMPFILESDIR=$tdir: $want"
		run make -s -C "$top" B="${B:-build}" install DESTDIR="$root" PREFIX="$prefix" \
			${tdir:+TMPFILESDIR=$tdir}
		echo "$output"
		[ "$status" -eq 0 ]
		# every example, as it is in the source, not executable (Debian's
		# examples; sbatch reads them), the admin guide's cleanup job too
		ex="$root$prefix/share/doc/stager/examples"
		[ -f "$ex/cleanup-job.sh" ]
		[ "$(ls "$ex" | wc -l)" -eq "$(ls "$top/scripts/examples" | wc -l)" ]
		for f in "$top"/scripts/examples/*.sh; do
			cmp "$f" "$ex/${f##*/}"
			[ "$(stat -c %a "$ex/${f##*/}")" = 644 ]
		done
		# never where systemd does not look
		[ ! -e "$root$prefix/lib/tmpfiles.d" ] || [ "$prefix" = /usr ] || [ "$prefix" = /usr/local ]
		if [ "$want" = none ]; then
			run find "$root" -path '*tmpfiles.d*' -name stager.conf
			[ "$status" -eq 0 ]
			[ -z "$output" ]
			cmp "$top/etc/tmpfiles-stager.conf" "$root$prefix/share/doc/stager/tmpfiles-stager.conf"
			run make -s -C "$top" B="${B:-build}" install DESTDIR="$root" PREFIX="$prefix"
			[ "$status" -eq 0 ]
			[[ "$output" == *"tmpfiles.d/stager.conf is not installed"*"TMPFILESDIR=/etc/tmpfiles.d"* ]]
		else
			cmp "$top/etc/tmpfiles-stager.conf" "$root$want/stager.conf"
			# systemd-tmpfiles, where this machine has it, reads it there
			if command -v systemd-tmpfiles >/dev/null; then
				systemd-tmpfiles --root="$root" --cat-config >cat.txt
				grep -qx "# $root$want/stager.conf" cat.txt
			fi
		fi
		make -s -C "$top" B="${B:-build}" uninstall DESTDIR="$root" PREFIX="$prefix" \
			${tdir:+TMPFILESDIR=$tdir}
		[ ! -e "$ex" ]
		run find "$root" -name '*stager.conf'
		[ "$status" -eq 0 ]
		[ -z "$output" ]
	done
}
