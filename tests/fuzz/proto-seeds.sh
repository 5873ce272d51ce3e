#!/bin/bash
# Record the seeds of the protocol fuzz target (tests/fuzz/corpus/proto/):
# both directions of real pushes and pulls, through a transport stand-in
# that copies the streams.  Usage: tests/fuzz/proto-seeds.sh STAGER
set -eu
S=$(realpath "$1")
out=$(cd "$(dirname "$0")" && pwd)/corpus/proto
mkdir -p "$out"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
cat >rsh <<'EOR'
#!/bin/sh
shift
tee -a "$T/to" | "$@" | tee -a "$T/from"
EOR
chmod +x rsh
export T
record() { # name
	cp to "$out/$1-client" && cp from "$out/$1-server"
	rm -f to from
}
mkdir -p src/a/b "src/empty dir" remote
echo hello >src/a/hello.txt
printf 'x%.0s' $(seq 1 3000) >src/a/b/thousands
head -c 20000 /dev/urandom >src/random
ln -s a/hello.txt src/link
ln src/a/hello.txt src/hard
: >src/zero
"$S" push -q --rsh ./rsh --remote-stager "$S" src "x:$T/remote/ds"
record push-first
"$S" push -q --rsh ./rsh --remote-stager "$S" src "x:$T/remote/ds"
record push-unchanged
printf 'changed' | dd of=src/random bs=1 seek=5000 conv=notrunc 2>/dev/null
echo more >>src/a/b/thousands
rm src/zero
"$S" push -q --rsh ./rsh --remote-stager "$S" src "x:$T/remote/ds"
record push-delta
"$S" pull -q --rsh ./rsh --remote-stager "$S" "x:$T/remote/ds" back
record pull
# protocol 4: a pull's HOLDS; a slow push and pull with a short io_timeout,
# so that both ends' NOOPs (the keepalive) are in the streams
"$S" pull -q --rsh ./rsh --remote-stager "$S" "x:$T/remote/ds" back
record v4-pull-holds
head -c 100000 /dev/urandom >src/slow
STAGER_IO_TIMEOUT=1 "$S" push -q --bwlimit 50K --rsh ./rsh --remote-stager "$S" src "x:$T/remote/ds"
record v4-push-noop
STAGER_IO_TIMEOUT=1 "$S" pull -q --bwlimit 50K --rsh ./rsh --remote-stager "$S" "x:$T/remote/ds" back
record v4-pull-noop
