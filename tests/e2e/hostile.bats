#!/usr/bin/env bats
# Hostile input to the configuration readers and to option values: the site
# file (STAGER_SITE_CONFIG), the user file (~/.config/stager/config),
# --config FILE, STAGER_<KEY> variables and command-line values.  Anything
# that is not a plain text file of sane size, and any malformed line or
# value, is a usage error (exit 1) that names the file and line, the
# variable or the option, within a second: nothing blocks, nothing is cut
# silently.  `timeout 10` turns a hang into a failure rather than a hung
# run.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	T=$(reachable_mktemp stager-e2e)
	cd "$T"
	export STAGER_SCRATCH_ROOT="$T/scratch" STAGER_SLOT_DIR="$T/slots" \
		STAGER_SITE_CONFIG=/dev/null HOME="$T"
	unset SLURM_JOB_ID SLURM_TMPDIR XDG_CONFIG_HOME
	for k in BWLIMIT CACHE_MAX MIN_FREE MAX_READERS_PER_NODE SLOT_WAIT_MAX LEASE_TTL \
		OPS_LIMIT JOB_TMPDIR_VAR REMOTE_STAGER SHARED_LOCK_DIR; do
		unset "STAGER_$k"
	done
}

# Run stager under a 10 s limit; fails if it took 2 s or more (not
# checked under sanitizers).
quick() {
	local t0 t1
	t0=$(date +%s%N)
	run timeout 10 "$STAGER" "$@"
	t1=$(date +%s%N)
	echo "# took $(((t1 - t0) / 1000000)) ms: $output"
	faster_than "$(((t1 - t0) / 1000000))" 2000
}

# $output holds the fixed string $1
says() {
	if [[ "$output" != *"$1"* ]]; then
		echo "expected '$1' in: $output" >&2
		return 1
	fi
}

@test "a FIFO that no one writes, as --config, site or user file: refused at once, named" {
	mkfifo "$T/fifo"
	quick --config "$T/fifo" status
	[ "$status" -eq 1 ]
	says "config file '$T/fifo': it is a FIFO, not a regular file"
	STAGER_SITE_CONFIG="$T/fifo" quick status
	[ "$status" -eq 1 ]
	says "'$T/fifo': it is a FIFO"
	mkdir -p .config/stager
	ln -s "$T/fifo" .config/stager/config
	quick status
	[ "$status" -eq 1 ]
	says "'$T/.config/stager/config': it is a FIFO"
}

@test "a FIFO whose writer never writes: refused at once, not waited on" {
	mkfifo "$T/fifo"
	sleep 30 >"$T/fifo" & # check-tests: a writer that holds the FIFO open and writes nothing
	local writer=$! quick_ok=0
	quick --config "$T/fifo" status || quick_ok=$?
	kill "$writer"
	[ "$quick_ok" -eq 0 ]
	[ "$status" -eq 1 ]
	says "it is a FIFO, not a regular file"
}

@test "a directory as a config file: refused, named" {
	mkdir "$T/confdir"
	quick --config "$T/confdir" status
	[ "$status" -eq 1 ]
	says "config file '$T/confdir': it is a directory, not a regular file"
	STAGER_SITE_CONFIG="$T/confdir" quick status
	[ "$status" -eq 1 ]
	says "'$T/confdir': it is a directory"
}

@test "/dev/zero and /dev/urandom through a symlink: refused at once, named" {
	ln -s /dev/zero "$T/zero.conf"
	quick --config "$T/zero.conf" status
	[ "$status" -eq 1 ]
	says "config file '$T/zero.conf': it is a character device, not a regular file"
	ln -s /dev/urandom "$T/random.conf"
	STAGER_SITE_CONFIG="$T/random.conf" quick status
	[ "$status" -eq 1 ]
	says "'$T/random.conf': it is a character device"
}

@test "/dev/null reads as an empty config file" {
	quick --config /dev/null status
	[ "$status" -eq 0 ]
}

@test "a socket as a config file: refused, named" {
	command -v python3 >/dev/null || skip "no python3 to make a socket"
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/sock"
	[ -S "$T/sock" ]
	quick --config "$T/sock" status
	[ "$status" -eq 1 ]
	says "config file '$T/sock': it is a socket, not a regular file"
}

@test "a 2 MiB config file is refused with its size" {
	head -c 2097152 /dev/zero | tr '\0' '#' >"$T/big.conf"
	quick --config "$T/big.conf" status
	[ "$status" -eq 1 ]
	says "config file '$T/big.conf' is larger than 1 MiB (2097152 bytes)"
	# a config file that is a binary file the size of /dev/urandom's read
	head -c 1000 /dev/urandom >"$T/binary.conf"
	printf '\0' >>"$T/binary.conf"
	quick --config "$T/binary.conf" status
	[ "$status" -eq 1 ]
	says "$T/binary.conf:"
}

@test "a NUL byte on line 3 is an error at :3:, not a cut line" {
	printf 'bwlimit = 1M\n# a comment\nmin_free = 5%%\0cache_max = 1G\n' >"$T/nul.conf"
	quick --config "$T/nul.conf" status
	[ "$status" -eq 1 ]
	says "$T/nul.conf:3: a NUL byte in the line"
	# in the user file too
	mkdir -p .config/stager
	cp "$T/nul.conf" .config/stager/config
	quick status
	[ "$status" -eq 1 ]
	says ".config/stager/config:3: a NUL byte"
}

@test "an overlong line is an error with its line, not split in two" {
	{
		echo "bwlimit = 1M"
		printf 'scratch_root = /%s\n' "$(head -c 5000 /dev/zero | tr '\0' a)"
	} >"$T/long.conf"
	quick --config "$T/long.conf" status
	[ "$status" -eq 1 ]
	says "$T/long.conf:2: line longer than 4096 bytes"
}

@test "bad keys, bad values and lines without '=': file:line and what is wrong" {
	printf '# site\n\nbogus_key = 1\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:3: unknown setting 'bogus_key'"
	printf 'bwlimit = 1M\nno equals sign here\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:2: expected 'key = value', not 'no equals sign here'"
	printf '= 5\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: expected 'key = value'"
	printf 'cache_max = 99999999999999999999G\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: invalid value '99999999999999999999G' for cache_max"
	printf 'max_readers_per_node = 99999999999999999999\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: invalid value '99999999999999999999' for max_readers_per_node, not a whole number"
	printf 'min_free = nan%%\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: invalid value 'nan%' for min_free, not a percentage"
	printf 'slot_wait_max = -5\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: invalid value '-5' for slot_wait_max"
	printf 'remote_stager = -oProxyCommand=evil\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: invalid value '-oProxyCommand=evil' for remote_stager"
	# control bytes are shown escaped, not sent to the terminal
	printf 'bwlimit = \033[31mred\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: invalid value '\\x1b[31mred' for bwlimit"
	# a key of garbage bytes likewise
	printf '\001\002 = 1\n' >"$T/c"
	quick --config "$T/c" status
	[ "$status" -eq 1 ]
	says "$T/c:1: unknown setting '\\x01\\x02'"
}

@test "a well-formed file with CRLF line ends, a byte order mark and tabs still reads" {
	printf '\357\273\277# site\r\ncache_max = 12.5%%\r\n\tmin_free\t=\t1.5GiB  # comment\r\n' >"$T/ok.conf"
	quick --config "$T/ok.conf" status --json
	[ "$status" -eq 0 ]
	says '"cache_max"'
	jq -e '.settings.cache_max.value == "12.5%" and .settings.min_free.value == "1.5GiB"' <<<"$output"
}

@test "hostile values in STAGER_ variables: exit 1 naming the variable" {
	local long
	long=$(head -c 100000 /dev/zero | tr '\0' 9)
	for v in "" "-1" "99999999999999999999G" "1e400" "nan" "inf" " 5" "0x10" "5Mx" "$long"; do
		STAGER_BWLIMIT="$v" quick status
		[ "$status" -eq 1 ]
		says "environment STAGER_BWLIMIT: invalid value"
		STAGER_MAX_READERS_PER_NODE="$v" quick status
		[ "$status" -eq 1 ]
		says "environment STAGER_MAX_READERS_PER_NODE: invalid value"
		STAGER_CACHE_MAX="$v%" quick status
		[ "$status" -eq 1 ]
		says "environment STAGER_CACHE_MAX: invalid value"
	done
	# a long value is shown cut short, not whole
	STAGER_SLOT_WAIT_MAX="$long" quick status
	[ "$status" -eq 1 ]
	says "environment STAGER_SLOT_WAIT_MAX: invalid value '9999"
	[ "${#output}" -lt 1000 ]
	STAGER_SCRATCH_ROOT="/$long" quick status
	[ "$status" -eq 1 ]
	says "environment STAGER_SCRATCH_ROOT: invalid value '/999"
	says "longer than 1024 bytes"
	STAGER_LEASE_TTL=$'5\n6' quick status
	[ "$status" -eq 1 ]
	says "environment STAGER_LEASE_TTL: invalid value '5\\x0a6' for lease_ttl, a control character"
}

@test "hostile option values: exit 1 naming the option" {
	local long
	long=$(head -c 100000 /dev/zero | tr '\0' 9)
	mkdir src
	echo x >src/f
	for v in "" "-1" "99999999999999999999G" "99999999999999999999" "1e400" "nan" "inf" \
		" 5" "+5" "0x10" "5Mx" "$long"; do
		quick --bwlimit "$v" stage src
		[ "$status" -eq 1 ]
		says "--bwlimit: '"
		quick pack --level "$v" src -o "$T/p.tar.zst"
		[ "$status" -eq 1 ]
		says "--level must be 1 to 19"
		quick pack --threads "$v" src -o "$T/p.tar.zst"
		[ "$status" -eq 1 ]
		says "--threads must be 0 to 64"
		quick pack --frame-size "$v" src -o "$T/p.tar.zst"
		[ "$status" -eq 1 ]
		says "--frame-size"
		quick collect --every "$v" src "$T/dst"
		[ "$status" -eq 1 ]
		says "--every: '"
		quick clean --older-than "$v"
		[ "$status" -eq 1 ]
		says "--older-than wants an age"
		quick run --grace "$v" -- true
		[ "$status" -eq 1 ]
		says "--grace: '"
		quick run --every "$v" -- true
		[ "$status" -eq 1 ]
		says "--every: '"
	done
	[ ! -e "$T/p.tar.zst" ]
	# a long value is shown cut short, with the option and what it wants
	quick clean --older-than "$long"
	[ "${#output}" -lt 1000 ]
	says "bytes)..."
	# control bytes are shown escaped
	quick clean --older-than $'\e[31mred'
	[ "$status" -eq 1 ]
	says "not '\\x1b[31mred'"
}

@test "a FIFO where a pack is expected: verify, ls, unpack, diff and stage refuse it at once" {
	mkfifo ff
	for c in "verify ff" "ls ff" "unpack ff out" "diff ff ff" "stage ff"; do
		# shellcheck disable=SC2086
		run timeout 10 "$STAGER" $c
		echo "$c: $status $output"
		[ "$status" -eq 2 ]
		[[ "$output" == *"not a regular file"* || "$output" == *"not a file or directory"* ]]
	done
	[ ! -e out ]
}
