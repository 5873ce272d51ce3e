#!/usr/bin/env bats
# The command line: help, version, unknown commands, bad arguments.

load helpers
bats_require_minimum_version 1.5.0

@test "--help lists every command of the design" {
	run stager --help
	[ "$status" -eq 0 ]
	for c in pack verify ls unpack stage collect run push pull serve status clean diff doctor mount umount where hint features; do
		echo "$output" | grep -q "^  $c "
	done
}

@test "--version prints the version" {
	run stager --version
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^stager\ [0-9]+\.[0-9]+\.[0-9]+ ]]
}

@test "every command has --help, exit 0" {
	for c in pack verify ls unpack stage collect run push pull serve status clean diff doctor mount umount where hint features; do
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

@test "an empty DIR, DEST or -o is a usage error (exit 1), before any work" {
	export STAGER_SCRATCH_ROOT="$T/scratch"
	mkdir src && echo a >src/a
	stager pack -q src -o p.tar.zst
	run stager unpack p.tar.zst ""
	[ "$status" -eq 1 ]
	echo "$output" | grep -q "DIR is an empty string"
	run stager stage p.tar.zst "" --no-pin
	[ "$status" -eq 1 ]
	run stager pack src -o ""
	[ "$status" -eq 1 ]
	[ -z "$(ls -A | grep stager)" ]
	[ ! -e scratch/cache ] || [ -z "$(ls -A scratch/cache)" ]
}

# $output is one JSON object, and jq's FILTER is true of it (jq 1.6's -e
# is true of no input at all).
json_ok() {
	[ "$(jq -s length <<<"$output")" = 1 ] || return 1
	jq -e "$@" <<<"$output" >/dev/null
}

@test "--json: a failure prints one object with ok, command, exit and error" {
	export STAGER_SCRATCH_ROOT="$T/scratch"
	# a missing source: exit 2
	run --separate-stderr stager stage --json missing.tar.zst
	echo "$output"
	[ "$status" -eq 2 ]
	json_ok --arg m "cannot read '$T/missing.tar.zst': No such file or directory" \
		'. == {ok: false, command: "stage", exit: 2, error: $m}'
	[[ "$stderr" == *"cannot read '$T/missing.tar.zst'"* ]]
	# usage errors: exit 1
	run --separate-stderr stager stage --json
	[ "$status" -eq 1 ]
	json_ok '.ok == false and .command == "stage" and .exit == 1 and (.error | startswith("what to stage?"))'
	run --separate-stderr stager ls --json --no-such-option x.tar.zst
	[ "$status" -eq 1 ]
	json_ok '.command == "ls" and .exit == 1 and .error == "unrecognized or ambiguous option '"'"'--no-such-option'"'"'"'
	run --separate-stderr stager pack --json src --level 42
	[ "$status" -eq 1 ]
	json_ok '.command == "pack" and .exit == 1 and (.error | test("--level"))'
	# a bad setting (stager exits from reading its configuration)
	run --separate-stderr env STAGER_CACHE_MAX=lots "$STAGER" collect --json a b
	[ "$status" -eq 1 ]
	json_ok '.command == "collect" and .exit == 1 and (.error | test("STAGER_CACHE_MAX"))'
}

@test "--json: a global option that fails before the command, or --json abbreviated, still gives the object" {
	export STAGER_SCRATCH_ROOT="$T/scratch"
	run --separate-stderr stager --config "$T/none" stage x.tar.zst --json
	[ "$status" -eq 2 ]
	json_ok --arg m "$T/none" '.command == "stage" and .exit == 2 and (.error | contains($m))'
	run --separate-stderr stager --progress=sometimes ls x.tar.zst --json
	[ "$status" -eq 1 ]
	json_ok '.command == "ls" and .exit == 1 and (.error | test("--progress"))'
	run --separate-stderr stager --no-such-global ls x.tar.zst --json
	[ "$status" -eq 1 ]
	json_ok '.command == "ls" and .exit == 1 and (.error | test("--no-such-global"))'
	[[ "$stderr" == *"unknown option '--no-such-global'"* ]]
	# getopt takes --js for --json: the failure too
	run --separate-stderr stager ls missing.tar.zst --js
	[ "$status" -eq 2 ]
	json_ok '.command == "ls" and .exit == 2 and (.error | test("missing.tar.zst"))'
	# without --json, nothing on stdout
	run --separate-stderr stager --config "$T/none" stage x.tar.zst
	[ "$status" -eq 2 ]
	[ -z "$output" ]
}

@test "--json: a failure whose command prints its own object prints that one alone; without --json, nothing" {
	export STAGER_SCRATCH_ROOT="$T/scratch"
	echo junk >bad.tar.zst
	run --separate-stderr stager verify --json bad.tar.zst
	[ "$status" -eq 4 ]
	json_ok '.pack == "bad.tar.zst" and .ok == false'
	run --separate-stderr stager verify bad.tar.zst
	[ "$status" -eq 4 ]
	[ -z "$output" ]
	# success: the command's object, unchanged
	mkdir src && echo x >src/x
	run --separate-stderr stager pack --json src -o p.tar.zst
	[ "$status" -eq 0 ]
	json_ok 'has("ok") | not'
	# run takes no --json: its command's own --json is the command's
	run --separate-stderr stager run -- sh -c 'echo --json; exit 3'
	[ "$status" -eq 3 ]
	[ "$output" = "--json" ]
}

@test "where and hint: a missing pack exits 2, a file that is no pack 4, no Slurm to ask 6; features: the update's operands checked" {
	T=$(reachable_mktemp stager-where)
	mkdir -p "$T/ds" "$T/bin"
	echo hi >"$T/ds/a"
	stager pack -q "$T/ds" -o "$T/ds.tar.zst" >/dev/null
	echo "not a pack" >"$T/junk.tar.zst"
	run stager where "$T/missing.tar.zst"
	[ "$status" -eq 2 ]
	run stager hint "$T/junk.tar.zst"
	[ "$status" -eq 4 ]
	# a login node without Slurm's commands: said, exit 6, nothing printed
	ln -s "$(command -v env)" "$T/bin/env"
	run -6 env PATH="$T/bin" "$STAGER" where "$T/ds.tar.zst"
	[[ $output == *"cannot ask Slurm"* ]]
	run -6 env PATH="$T/bin" "$STAGER" hint "$T/ds.tar.zst"
	[[ $output != *--prefer* ]]
	run -6 env PATH="$T/bin" "$STAGER" where --json "$T/ds.tar.zst"
	[[ $output == *'"ok":false'* ]]
	run stager where
	[ "$status" -eq 1 ]
	run stager features --update --node n1
	[ "$status" -eq 1 ]
	run stager features --node n1
	[ "$status" -eq 1 ]
	rm -rf "$T"
}

@test "a result that cannot be written on stdout fails (exit 7), never a silent success" {
	[ -w /dev/full ] || skip "no /dev/full"
	mkdir src && echo a >src/a
	run --separate-stderr bash -c '"$STAGER" pack src -o p.tar.zst >/dev/full'
	[ "$status" -eq 7 ]
	[[ "$stderr" == *"cannot write the result on standard output: No space left on device"* ]]
	run bash -c '"$STAGER" verify p.tar.zst >/dev/full'
	[ "$status" -eq 7 ]
	run bash -c '"$STAGER" diff p.tar.zst p.tar.zst >/dev/full'
	[ "$status" -eq 0 ] # nothing to write: no difference
	run bash -c '"$STAGER" verify p.tar.zst >/dev/null'
	[ "$status" -eq 0 ]
}
