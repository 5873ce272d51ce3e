#!/usr/bin/env bats
# The command line: help, version, unknown commands, bad arguments.

load helpers

@test "--help lists every command of the design" {
	run stager --help
	[ "$status" -eq 0 ]
	for c in pack verify ls unpack stage collect run push pull serve status clean diff doctor; do
		echo "$output" | grep -q "^  $c "
	done
}

@test "--version prints the version" {
	run stager --version
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^stager\ [0-9]+\.[0-9]+\.[0-9]+ ]]
}

@test "every command has --help, exit 0" {
	for c in pack verify ls unpack stage collect run push pull serve status clean diff doctor; do
		run stager "$c" --help
		[ "$status" -eq 0 ]
		echo "$output" | grep -q "usage: stager $c"
		run stager help "$c"
		[ "$status" -eq 0 ]
	done
}

@test "push, pull and serve: bad arguments exit 1 with a hint" {
	for c in push pull; do
		run stager "$c" x
		[ "$status" -eq 1 ]
		echo "$output" | grep -q "see 'stager $c --help'"
	done
	run stager serve x y
	[ "$status" -eq 1 ]
	run stager push d no-colon
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "HOST:PATH"
}

@test "an unknown command exits 1 with a hint" {
	run stager pakc
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "Did you mean 'pack'"
	run stager
	[ "$status" -eq 1 ]
}

@test "bad options and arguments exit 1" {
	run stager pack --no-such-option d
	[ "$status" -eq 1 ]
	run stager pack
	[ "$status" -eq 1 ]
	run stager pack d --level 42
	[ "$status" -eq 1 ]
	run stager unpack only-one
	[ "$status" -eq 1 ]
	run stager --progress=sometimes ls x
	[ "$status" -eq 1 ]
}
