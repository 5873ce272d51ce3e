# timing.bash - measuring a rate limit on a machine that other work may slow.
#
# A limiter is never beaten: every run must take at least LOW seconds.  A
# busy machine can slow a run past the limit without the limiter being at
# fault, so the upper bound must hold for one of three runs; a limiter that
# is too strict fails all three.  Where the same work can be timed without
# the limit (in_band_beside), each run's upper bound also grows by what
# that work costs the machine right then: a loaded machine slows both.

timed() { # CMD...: run it and set ELAPSED to its wall time in seconds
	local t0 t1
	t0=$(date +%s.%N)
	"$@"
	t1=$(date +%s.%N)
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}

in_band() { # LOW HIGH CMD...: CMD's wall time is in [LOW, HIGH] (see above);
	# RUNS tells how many runs it took
	in_band_beside "" "$@"
}

in_band_beside() { # REF LOW HIGH CMD...: as in_band, but each run of CMD
	# comes after one of REF (a shell command, eval-ed here: CMD's work
	# without the limit), and its HIGH is raised by REF's wall time
	local ref=$1 low=$2 high=$3 h
	shift 3
	for RUNS in 1 2 3; do
		h=$high
		if [ -n "$ref" ]; then
			timed eval "$ref" || return 1
			h=$(awk -v a="$high" -v b="$ELAPSED" 'BEGIN { print a + b }')
			echo "run $RUNS: the same work without the limit: $ELAPSED s"
		fi
		timed "$@" || return 1
		echo "run $RUNS: $ELAPSED s (band $low-$h s)"
		awk -v x="$ELAPSED" -v l="$low" 'BEGIN { exit !(x >= l) }' || return 1
		awk -v x="$ELAPSED" -v h="$h" 'BEGIN { exit !(x <= h) }' && return 0
	done
	return 1
}

fastest() { # N CMD...: run CMD N times, ELAPSED the shortest wall time (a
	# speed that a loaded machine's bursts do not hide)
	local n=$1 i best=
	shift
	for i in $(seq 1 "$n"); do
		timed "$@" || return 1
		best=$(awk -v a="$ELAPSED" -v b="${best:-$ELAPSED}" 'BEGIN { print (a < b ? a : b) }')
	done
	ELAPSED=$best
}

high() { # SECONDS: an upper bound, none under sanitizers (SAN_FLAGS: the
	# whole run is slower then; the lower bounds always hold)
	if [ -n "${SAN_FLAGS:-}" ]; then echo 1e9; else echo "$1"; fi
}
