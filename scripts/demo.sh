#!/bin/sh
# make demo: the main job on a built-in example.  Generates a small
# image-folder dataset (2,000 files in 20 classes), packs it, verifies and
# lists the pack, and unpacks it as a job would on a node's scratch disk.
set -eu
B=${B:-build}
S="$B/stager"
W=${DEMO_DIR:-$B/demo}
rm -rf "$W"
mkdir -p "$W"
echo "== generating an example dataset in $W/images"
"$B/gendata" images "$W/images" --files 2000 --classes 20
echo
echo "== stager pack $W/images -o $W/images.tar.zst"
"$S" pack "$W/images" -o "$W/images.tar.zst"
echo
echo "== stager ls $W/images.tar.zst | head -3"
"$S" ls "$W/images.tar.zst" | head -3
echo
echo "== stager verify $W/images.tar.zst"
"$S" verify "$W/images.tar.zst"
echo
# a scratch root of the demo's own, so it leaves nothing elsewhere
export STAGER_SCRATCH_ROOT="$PWD/$W/scratch" STAGER_SITE_CONFIG=/dev/null
echo "== DATA=\$(stager stage $W/images.tar.zst)   (a job's pre-step: cold, fills the node cache)"
DATA=$("$S" stage "$W/images.tar.zst")
echo "DATA=$DATA"
echo
echo "== stager stage --json $W/images.tar.zst $W/job2/images   (the next job on this node: warm)"
"$S" stage --json "$W/images.tar.zst" "$W/job2/images"
echo
echo "== stager unpack --include 'class_007/*'   (one class only: only its frames are decoded)"
"$S" unpack "$W/images.tar.zst" "$W/class7" --include 'class_007/*'
echo
echo "== stager status"
"$S" status
echo
n1=$(find "$W/images" -type f | wc -l)
n2=$(find -L "$DATA" -type f | wc -l)
if diff -r "$W/images" "$DATA" >/dev/null && diff -r "$W/images" "$W/job2/images" >/dev/null &&
	[ "$n1" -eq "$n2" ]; then
	echo "demo: OK: $n2 files staged, identical to the source"
else
	echo "demo: FAILED: the staged tree differs from the source" >&2
	exit 1
fi
