#!/usr/bin/env bats
# A delta that is not for this stage: from another base, for another pack,
# missing, a FIFO in its place, or no base cached on the node.  Each case
# is the full read of the pack, with a warning where something was wrong.
# (Apart from delta-fallback.bats, so that neither file nears its time
# limit on a loaded machine.)

load helpers
load delta
bats_require_minimum_version 1.5.0

@test "a delta from another base, a missing delta, a missing base: the full read" {
	fallback_fixture
	# the file is a delta, but from v0
	make_v1 v0 100
	"$STAGER" pack -q v0 -o v0.tar.zst >/dev/null
	"$STAGER" pack -q v2 -o other.tar.zst --base v0.tar.zst >/dev/null
	cp other.tar.zst.delta-* "$DELTA"
	stage_falls_back "another base"
	# a delta for another target
	echo more >v2/extra
	"$STAGER" pack -q v2 -o v3.tar.zst --base shared/v1.tar.zst >/dev/null
	cp v3.tar.zst.delta-* "$DELTA"
	stage_falls_back "another pack"
	# no delta file at all
	rm "$DELTA"
	stage_falls_back "cannot read the delta"
	# a FIFO in its place: not opened for reading (that would wait forever)
	mkfifo "$DELTA"
	stage_falls_back "is not a regular file"
	rm "$DELTA"
	# no base in this node's cache: said, not warned
	cp good-delta "$DELTA"
	chmod -R u+w "$STAGER_SCRATCH_ROOT"
	rm -rf "$STAGER_SCRATCH_ROOT" s1 s2
	run "$STAGER" stage shared/v2.tar.zst s2
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"none of them cached on this node: reading the whole pack"* ]]
	[[ "$output" != *"warning"* ]]
	[ "$(entry_sig s2)" = "$REF" ]
}
