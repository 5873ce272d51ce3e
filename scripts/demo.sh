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
echo "== stager unpack $W/images.tar.zst $W/scratch/images   (what a job's pre-step does)"
"$S" unpack "$W/images.tar.zst" "$W/scratch/images"
echo
echo "== stager unpack --include 'class_007/*' (one class only: only its frames are decoded)"
"$S" unpack "$W/images.tar.zst" "$W/scratch/class7" --include 'class_007/*'
echo
n1=$(find "$W/images" -type f | wc -l)
n2=$(find "$W/scratch/images" -type f | wc -l)
if diff -r "$W/images" "$W/scratch/images" >/dev/null && [ "$n1" -eq "$n2" ]; then
	echo "demo: OK: $n2 files staged and identical to the source"
else
	echo "demo: FAILED: the unpacked tree differs from the source" >&2
	exit 1
fi
echo "(stager stage, with its per-node cache, is not built yet; unpack is its core.)"
