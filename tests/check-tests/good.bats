#!/usr/bin/env bats
# Lines that check, or are exempt: scripts/check-tests --self-test requires
# the checker to pass every line here.  Never run by bats.

load ../e2e/helpers

checks_it() { [ "$status" -eq 0 ]; }

only() { # a function's last negation is its status
	! grep -q x "$1" # check-tests: the function's status
}

@test "negation that fails the test" {
	run ! grep -q x f
	! grep -q x f || false
	( ! grep -q x f )
	if ! grep -q x f; then echo absent; fi
	while ! [ -e f ]; do sleep 0.1; done
	until ! running "$pid"; do sleep 0.1; done
	! cmp a b # check-tests: the test's last line, its status
}

@test "&& as control flow, or made to fail" {
	[ -e f ] && break
	grep -q x f && return 0
	[ -n "$x" ] && y=$x
	[ "$(id -u)" -eq 0 ] || skip "needs root"
	[ "$(id -u)" -eq 0 ] && [ -e /dev/fuse ] || skip "needs root and /dev/fuse"
	cmp a b && grep -q x a || false
	if [ -e f ]; then echo "note: f is there"; fi
	if cmp a b && grep -q x a; then echo both; fi
	while [ -e f ] && [ -e g ]; do sleep 0.1; done
	mkdir d && cp a d/
	kill -9 "$pid" 2>/dev/null || true
	grep "$T" trace | grep -v execve >calls || true
	grep -v '^stg_' syms >foreign || true
	rm -f x || :
}

@test "runs with their status checked" {
	run stager stage p d
	[ "$status" -eq 0 ]
	run -0 stager ls p
	run -3 stager stage big d
	run ! stager stage missing d
	run -0 --separate-stderr stager stage p d
	run stager stage p d; [ "$status" -eq 2 ]
	run stager ls p
	echo "$output"
	[[ "$output" == *x* ]]
	[ "${status}" -ne 0 ]
	run stager clean
	case $status in 0 | 1) ;; *) false ;; esac
	run stager pack src -o p
	checks_it
	run cat f # check-tests: only the output matters here
	[ "$output" = x ]
}

@test "stager's status kept" {
	stager status --json >st.json
	n=$(jq '.entries | length' st.json)
	k=$(stager status --json)
	[ "$(stager status --json | jq -r .a)" = b ] # check-tests: the output is the check
	set -o pipefail; stager ls p | grep -q f
	echo "$output" | jq -e '.format == 3'
	complete_words "$comp" stager co | grep -qx collect
	grep -c "stager: " log | grep -qx 1
	x=$(stager ls p)
	# check-tests: its output is what is compared
	[ "$(stager ls p | wc -l)" -eq 3 ]
}

@test "comparisons" {
	[ "$x" = "$y" ]
	[[ $a == "$b" ]]
	[ "$n" -eq 3 ]
	[ -n "$x" ]
	[[ -n $x ]]
	jq -e '.a == 1' f
	jq -r '.a' f >a.txt
	local k
	k=$(stager status --json)
	local n=$((3 + 4)) m=0
	export PATH="$T/bin:$PATH"
}

@test "waits with a limit" {
	for _ in $(seq 1 50); do [ -e f ] && break; sleep 0.1; done
	while :; do sleep 0.1; done
	sleep 1 # check-tests: the subject is the second that passes
	wait_pid "$pid" 10
	wait_until 10 running "$pid"
}
