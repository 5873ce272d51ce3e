#!/usr/bin/env bats
# Lines that check nothing: scripts/check-tests --self-test requires each
# line after a "#> weak" comment to be flagged, and no other line.  Never
# run by bats (it is not under tests/e2e).

load ../e2e/helpers

checks_it() { [ "$status" -eq 0 ]; }

@test "negation" {
	#> weak
	! grep -q x f
	#> weak
	{ ! grep -q x f; }
	#> weak
	{ ! cmp a b; echo done; }
	#> weak
	if [ -e f ]; then ! grep -q x f; fi
	for f in a b; do
		#> weak
		! cmp "$f" c
	done
	#> weak
	for f in a b; do ! cmp "$f" c; done
	#> weak
	while read -r l; do ! grep -q "$l" f; done <list
	#> weak
	[ -e x ] || { ! grep -q y x; }
}

@test "the left side of &&" {
	#> weak
	cmp a b && echo same >log
	#> weak
	grep -q x f && grep -q y f
	#> weak
	[ -e a ] && [ -e b ]
	#> weak
	[[ -n "$x" ]] && rm -f "$x"
	#> weak
	diff -r a b && touch ok
	#> weak
	stager stage p d && touch staged
	#> weak
	jq -e '.a' f && cat f
	#> weak
	test -f a && test -f b
	#> weak
	mkdir d; cmp a b && cp a d/
}

@test "|| true after a check" {
	#> weak
	grep -q x f || true
	#> weak
	cmp a b || :
	#> weak
	diff a b 2>/dev/null || true
	#> weak
	[ "$x" = y ] || true
	#> weak
	test -s f || true
	#> weak
	jq -e '.a == 1' f >/dev/null || true
}

@test "runs whose status nothing checks" {
	#> weak
	run stager stage p d
	[ "$output" = x ]
	#> weak
	run "$STAGER" status
	echo "status $status"
	run stager ls p
	[ "$status" -eq 0 ]
	#> weak
	run --separate-stderr stager stage p d
	#> weak
	run cat f
	run -0 cat f
}

@test "a run superseded before its status is checked" {
	#> weak
	run stager pack src -o p
	run stager stage p d
	[ "$status" -eq 0 ]
}

@test "stager's status lost in a pipeline" {
	#> weak
	n=$(stager status --json | jq '.entries | length')
	#> weak
	[ "$("$STAGER" status --json | jq -r .a)" = b ]
	#> weak
	"$STAGER" ls --json p | jq -e '.format == 3'
	#> weak
	stager ls p | grep -q f
	#> weak
	k=$($STAGER status --json | jq -r '.entries[0].key')
	#> weak
	off=$("$STAGER" ls --json --long p |
		jq '.frame_table[0].offset')
	#> weak
	grep -q x <("$STAGER" serve <s)
	#> weak
	diff <(stager ls p) want
	#> weak
	for k in $(stager status --json | jq -r '.entries[].key'); do :; done
	#> weak
	run as alice "$STAGER" status | grep -q x
	#> weak
	timeout 5 stager status | grep -q x
}

@test "a value compared with itself" {
	#> weak
	[ "$x" = "$x" ]
	#> weak
	[[ $a == $a ]]
	#> weak
	[ "$n" -eq "$n" ]
	#> weak
	[ -e f ] || [ "$(cat f)" != "$(cat f)" ]
}

@test "other weak forms" {
	#> weak
	local k=$(stager status --json)
	#> weak
	export D=$(mktemp -d)
	#> weak
	[ -n $x ]
	#> weak
	jq '.a == 1' f
	#> weak
	jq '.format == 3' <<<"$output"
}

@test "blind waits" {
	#> weak
	sleep 2
	#> weak
	stager stage p d & sleep 1
	"$STAGER" mount p m &
	#> weak
	wait $!
}

@test "a check above the exempt line does not carry over" {
	true # check-tests: only this line
	#> weak
	! grep -q x f
}
