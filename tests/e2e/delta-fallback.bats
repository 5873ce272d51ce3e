#!/usr/bin/env bats
# Delta packs that cannot be used: a damaged delta, a cached base altered
# or damaged (delta-base.bats: a delta from another base, or none).  Each
# case falls back to the full read of the pack, with a warning, and the
# node's cache ends as a full read would leave it.  (Apart from
# delta.bats: each case stages v2 three times, and one file would near its
# time limit on a loaded machine.)

load helpers
load delta
bats_require_minimum_version 1.5.0

@test "a damaged delta (bit flips, truncation) falls back to the full read, with a warning" {
	fallback_fixture
	size=$(stat -c %s "$DELTA")
	for off in 3 20 130 $((size / 2)) $((size - 3)); do
		cp good-delta "$DELTA"
		flip_byte "$DELTA" "$off"
		stage_falls_back ""
	done
	cp good-delta "$DELTA"
	truncate -s $((size - 1000)) "$DELTA"
	stage_falls_back "truncated"
	cp good-delta "$DELTA"
	head -c 100 good-delta >"$DELTA"
	stage_falls_back ""
	: >"$DELTA"
	stage_falls_back ""
}

@test "a cached base whose files were altered: the delta build fails its checks, the full read wins" {
	fallback_fixture
	entry=$(readlink s1)
	chmod u+w "$entry/class_1/img_11.jpg" "$entry/class_7/img_7.jpg"
	head -c 10 /dev/zero | dd of="$entry/class_1/img_11.jpg" conv=notrunc status=none
	head -c 10 /dev/zero | dd of="$entry/class_7/img_7.jpg" conv=notrunc status=none
	# img_7 is patched (its basis is damaged): the result does not verify
	stage_falls_back "does not rebuild"
}

@test "a delta with --verify checks the base first; a damaged base is not used" {
	fallback_fixture
	entry=$(readlink s1)
	chmod u+w "$entry/class_9/img_9.jpg"
	head -c 10 /dev/zero | dd of="$entry/class_9/img_9.jpg" conv=notrunc status=none
	run "$STAGER" stage --json --verify shared/v2.tar.zst s2
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"warning: "*"img_9.jpg"*"damaged"* ]]
	jq -e '.delta == false' <<<"$(grep '^{' <<<"$output")"
	[ "$(entry_sig s2)" = "$REF" ]
}
