# timing.bash - measuring a rate limit on a machine that other work may slow.
#
# A limiter is never beaten: every run must take at least LOW seconds.  A
# busy machine can slow a run past the limit without the limiter being at
# fault, so the upper bound must hold for one of three runs; a limiter that
# is too strict fails all three.

timed() { # CMD...: run it and set ELAPSED to its wall time in seconds
	local t0 t1
	t0=$(date +%s.%N)
	"$@"
	t1=$(date +%s.%N)
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}

in_band() { # LOW HIGH CMD...: CMD's wall time is in [LOW, HIGH] (see above);
	# RUNS tells how many runs it took
	local low=$1 high=$2
	shift 2
	for RUNS in 1 2 3; do
		timed "$@" || return 1
		echo "run $RUNS: $ELAPSED s (band $low-$high s)"
		awk -v x="$ELAPSED" -v l="$low" 'BEGIN { exit !(x >= l) }' || return 1
		awk -v x="$ELAPSED" -v h="$high" 'BEGIN { exit !(x <= h) }' && return 0
	done
	return 1
}
