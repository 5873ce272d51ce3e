# site.bash - a Slurm site as users have one, for the job tests: stager
# installed with `make install` (PREFIX and SYSCONFDIR under the test's
# directory), its prolog, task prolog and epilog named in slurm.conf
# exactly as docs/admin-guide.md tells administrators (slurmd runs them as root
# with no PATH; nothing here adds one), the site's settings in
# SYSCONFDIR/default/stager, and jobs submitted by ordinary users
# (stgjob1, stgjob2, made with useradd, with homes) from a clean
# environment.
#
#   site_start DIR        (NODES=N, PROCTRACK=cgroup passed on to
#                          scripts/slurm-test-cluster.sh; SITE_NO_EPILOG=1:
#                          the prolog and task prolog only)
#   site_stop DIR
#   as_job_user USER CMD...   CMD as USER, a login shell's environment
#   site_submit USER ARGS...  sbatch as USER; prints the job id

SITE_USERS="stgjob1 stgjob2"

site_start() {
	local d=$1 top u
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	SITE=$d
	export SITE
	make -s -C "$top" B="${B:-build}" install PREFIX="$d/prefix" SYSCONFDIR="$d/prefix/etc" \
		>/dev/null || return 1
	install -d -m 0755 "$d/prefix/etc/default" "$d/jobs" "$d/shared"
	install -d -m 1777 "$d/scratch"
	install -d -m 1777 "$d/slots"
	# the node's reader slots are this site's own: other clusters of
	# tests running beside it on this machine are other sites
	printf 'scratch_root = %s/scratch/$USER\nslot_dir = %s/slots\n' "$d" "$d" >"$d/stager.conf"
	cat >"$d/prefix/etc/default/stager" <<CONF
STAGER_JOB_TMP_BASE=$d/jobs
STAGER_SITE_CONFIG=$d/stager.conf
STAGER_EPILOG_SEND_TIME=${SITE_SEND_TIME:-30}
STAGER_STATE_DIR=$d/state
CONF
	for u in $SITE_USERS; do
		id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u" || return 1
		install -d -m 0700 -o "$u" "$d/shared/$u"
		rm -rf "/home/$u/.local/state/stager"
	done
	local hooks="$d/prefix/libexec/stager" epilog
	epilog=$hooks/epilog
	[ -z "${SITE_NO_EPILOG:-}" ] || epilog=
	SLURM_CONF=$(PROLOG="$hooks/prolog" TASK_PROLOG="$hooks/task-prolog" \
		"$top/scripts/slurm-test-cluster.sh" start "$d/cluster" "$epilog") || return 1
	export SLURM_CONF
	# ordinary users reach munge's socket (it is 0777) and slurm.conf
	chmod 0711 "$d/cluster" "$d/cluster/munge" "$d/cluster/spool"
	chmod 0644 "$SLURM_CONF"
}

site_stop() {
	local d=$1 top u
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
	wait_until 20 sh -c '[ -z "$(squeue -h 2>/dev/null)" ]' || true
	"$top/scripts/slurm-test-cluster.sh" stop "$d/cluster" || true
	for u in $SITE_USERS; do pkill -u "$u" 2>/dev/null || true; done
	grep " $d/" /proc/mounts | awk '{ print $2 }' | xargs -r -n1 umount -l 2>/dev/null || true
	# (in a chroot /proc/mounts shows the host's paths: the known ones too)
	for m in "$d/jobs" "$d"/shared/*/mnt; do
		if mountpoint -q "$m" 2>/dev/null; then umount -l "$m" 2>/dev/null || true; fi
	done
	chmod -R u+w "$d" 2>/dev/null || true
	rm -rf "$d" || true
}

as_job_user() {
	local u=$1
	shift
	runuser -u "$u" -- env -i HOME="/home/$u" USER="$u" LOGNAME="$u" SHELL=/bin/bash \
		PATH="$SITE/prefix/bin:/usr/local/bin:/usr/bin:/bin" SLURM_CONF="$SLURM_CONF" "$@"
}

# stager as USER on a login node (not in a job; the site's settings,
# which jobs get from the task prolog)
login_stager() {
	local u=$1
	shift
	as_job_user "$u" env STAGER_SITE_CONFIG="$SITE/stager.conf" stager "$@"
}

site_submit() {
	local u=$1
	shift
	as_job_user "$u" sbatch --parsable "$@" | cut -d';' -f1
}

# How many pins job JOB holds in USER's cache (stager status, as USER on a
# login node; $D the test's directory).
pins_of() {
	login_stager "$1" status --json >"$D/status.json" || return 1
	jq --arg o "job-$2" '[.entries[].pins[] | select(.owner == $o)] | length' "$D/status.json"
}

job_gone() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }

# The exit code Slurm recorded for a finished job ("5:0").
job_exit() { scontrol -o show job "$1" | grep -o ' ExitCode=[^ ]*' | cut -d= -f2; }
