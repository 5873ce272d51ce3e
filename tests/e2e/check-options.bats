#!/usr/bin/env bats
# The self-test of scripts/check-options: a fake stager (one command, frob,
# with -o/--output and -l/--level, and a global --loud) and fake test
# directories (E2E_DIR), one that covers every option and one for each way
# a test can seem to cover an option without running it and checking.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	CHECK=$BATS_TEST_DIRNAME/../../scripts/check-options
	cat >fake <<'EOF'
#!/bin/sh
case "$*" in
--help) cat <<'HELP'
usage: stager [GLOBAL OPTIONS] COMMAND [ARGS]

Commands:
  frob      frob a directory

Global options: --loud, --help
HELP
	;;
"frob --help") cat <<'HELP'
usage: stager frob DIR [-o OUT] [--level N]

  -o, --output FILE   where to write (not --other, named in a description)
  -l, --level N       how hard

Global options: --loud, --help
HELP
	;;
*) exit 1 ;;
esac
EOF
	chmod +x fake
}

# FILE: a fake test file from stdin.  Bats would take a line that starts
# with @test in a here-document for a test of this file, and check-options
# counts a here-document's line that runs stager in this file's @tests
# (as a job script): they are written %test, %stager and "$%STAGER".
fake_tests() {
	sed -e 's/^%test /@test /' -e 's/%stager/stager/g' -e 's/\$%STAGER/$STAGER/g' >"$1"
}

# DIR: run the checker on DIR/*.bats with the fake stager
check() {
	run env E2E_DIR="$T/$1" sh "$CHECK" "$T/fake"
	echo "$output"
}

# the options the checker says are not covered, sorted, on one line
missing() {
	echo "$output" | sed -n 's/^check-options: \([a-z]*\) \(-[^:]*\): .*/\1 \2/p' | LC_ALL=C sort | tr '\n' ',' | sed 's/,$//'
}

@test "check-options self-test: a test dir that runs every option and checks after it passes" {
	mkdir good
	fake_tests good/a.bats <<'EOF'
load helpers

spush() { %stager frob "$@"; }

%test "frob" {
	run %stager frob d -o x --output=y
	[ "$status" -eq 0 ]
	run "$%STAGER" --loud frob d \
		-l 3
	echo "$output" | grep -q frobbed
	spush d --level 4 >out
	diff out expected
	"$%STAGER" --help >h
	grep -Eq '^usage' h
}
EOF
	check good
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "check-options self-test: an option word of another program, or a longer option, is not the option" {
	mkdir substr
	fake_tests substr/a.bats <<'EOF'
%test "frob" {
	run %stager frob d -o x -l 3 --loud && df --output=used .
	[ "$status" -eq 0 ]
	run %stager frob d --output-dir x --levels 3 2>--output
	[ "$status" -eq 0 ]
	run %stager --help; grep --level=3 x
	[ "$status" -eq 0 ]
	opts="--output x --level 3"
	run %stager frob d $opts
	[ "$status" -eq 0 ]
	run sbatch --output=x --wrap "%stager frob d"
	[ "$status" -eq 0 ]
	run %stager frob d -ol x
	[ "$status" -eq 0 ]
}
EOF
	check substr
	[ "$status" -eq 1 ]
	[ "$(missing)" = "frob --level,frob --output" ]
}

@test "check-options self-test: a short form is an option of its own" {
	mkdir short
	fake_tests short/a.bats <<'EOF'
%test "frob" {
	run %stager --loud frob d --output x --level 3
	[ "$status" -eq 0 ]
	run %stager --help
	[ "$status" -eq 0 ]
	# %stager frob d -o x -l 3 in a comment is not a test
	[ -s x ]
}

%test "frob -o -l: in the title is not a test either" {
	[ -e x ]
}
EOF
	check short
	[ "$status" -eq 1 ]
	[ "$(missing)" = "frob -l,frob -o" ]
	echo "$output" | grep -qxF "check-options: frob -o: no @test runs 'stager frob' with -o and then checks something"
}

@test "check-options self-test: a test that runs an option but checks nothing after it does not cover it" {
	mkdir nocheck
	fake_tests nocheck/a.bats <<'EOF'
frob_it() {
	%stager frob d -l 3
	[ -e d ]
}

%test "frob, checked before" {
	[ -d d ]
	run %stager --loud frob d -o x --output y --level 3
}

%test "frob, guards and a status kept" {
	run %stager frob d -o x --output y --level 3
	[ -e /dev/fuse ] || skip "no fuse"
	if [ "$status" -eq 0 ]; then echo fine; fi
	run grep -q frobbed x
	grep frobbed x
	jq .ok x
}

%test "the check is in another test" {
	frob_it
	[ -e x ]
}

%test "help is checked" {
	run %stager --help
	[ "$status" -eq 0 ]
}
EOF
	check nocheck
	[ "$status" -eq 1 ]
	[ "$(missing)" = "frob --level,frob --output,frob -l,frob -o,stager --loud" ]
}

@test "check-options self-test: a job script in a here-document runs stager; a check inside it is not the test's" {
	mkdir job
	fake_tests job/a.bats <<'EOF'
%test "a job script, checked after" {
	cat >job.sh <<JOB
f() {
	%stager --loud frob d -o x --output y -l 3
}
f
JOB
	sh job.sh
	[ -e y ]
}

%test "a job script that checks, not the test" {
	cat >job2.sh <<'JOB'
%stager frob d --level 3
[ -e y ]
JOB
	sh job2.sh
}

%test "help" {
	run %stager --help
	[ "$status" -eq 0 ]
}
EOF
	check job
	[ "$status" -eq 1 ]
	[ "$(missing)" = "frob --level" ]
}

@test "check-options self-test: no test files, or a help without commands, is exit 2" {
	mkdir empty
	check empty
	[ "$status" -eq 2 ]
	echo "$output" | grep -q "no test files"
	mkdir good && printf '@test "x" {\n\t[ -e x ]\n}\n' >good/a.bats
	printf '#!/bin/sh\necho "usage: stager"\n' >fake
	check good
	[ "$status" -eq 2 ]
	echo "$output" | grep -q 'no "Commands:" section'
}
