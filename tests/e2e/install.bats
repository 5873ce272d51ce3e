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
	[ -f "$root/usr/include/stage.h" ]
	[ -f "$root/usr/lib/pkgconfig/libstage.pc" ]
	[ -f "$root/usr/share/man/man1/stager.1" ]
	[ -L "$root/usr/lib/libstage.so.0" ]
	# the shared library has its SONAME and exports only stg_* symbols
	objdump -p "$root/usr/lib/libstage.so.0" | grep -q 'SONAME *libstage.so.0'
	! nm -D --defined-only "$root/usr/lib/libstage.so.0" | awk '$2 == "T" {print $3}' | grep -v '^stg_'

	cat >prog.c <<'C'
#include <stage.h>
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
	for k in $("$STAGER" status --json --scratch "$T/s" | jq -r '.settings | keys[]'); do
		grep -q "^#$k = " "$ex" || { echo "missing: $k"; false; }
	done
	# uncommented, every example value is valid
	sed 's/^#\([a-z_]* = \)/\1/' "$ex" | sed "s|/data/.stager-leases|$T/leases|" >site.conf
	STAGER_SITE_CONFIG="$T/site.conf" "$STAGER" status --scratch "$T/s" >/dev/null
}
