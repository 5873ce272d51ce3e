/* test_slurm.c - what stager asks Slurm (slurm.c), against fake squeue and
 * scontrol on PATH: running a command and reading its output whole, a
 * job's liveness (unknown is not "gone"), a job's clock (its end,
 * KillWait, the script's --signal from slurmd's spool or from the batch
 * shell that ran stager without exec), and sbatch's file-name patterns
 * (path.c). */
#include "unit.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static char *bin, *top, *old_path;

static int setup(void **state)
{
	(void)state;
	ut_no_slurm();
	top = ut_tmpdir();
	bin = ut_join(top, "bin");
	mkdir(bin, 0755);
	/* squeue: -o %T (state) answers $FAKE_STATE with status $FAKE_RC;
	 * -o %e (end) a fixed time; the arguments go to $top/squeue.args */
	char text[1024];
	snprintf(text, sizeof text,
	         "#!/bin/sh\n"
	         "echo \"$@\" >>'%s/squeue.args'\n"
	         "case \"$*\" in\n"
	         "*%%T*) [ -n \"$FAKE_STATE\" ] && echo \"$FAKE_STATE\"; exit ${FAKE_RC:-0} ;;\n"
	         "*%%e*) echo 2026-11-25T06:10:00 ;;\n"
	         "esac\n",
	         top);
	ut_script(bin, "squeue", text);
	snprintf(text, sizeof text,
	         "#!/bin/sh\n"
	         "[ \"$1\" != ping ] || { [ \"$FAKE_CTL\" = NONE ] && exit 1; "
	         "echo \"Slurmctld(primary) at ctl is ${FAKE_CTL:-UP}\"; exit 0; }\n"
	         "case \"$FAKE_NODE.$*\" in\n"
	         "known.show\\ node*) echo \"NodeName=$4 State=IDLE\"; exit 0 ;;\n"
	         "unknown.show\\ node*) echo \"Node $4 not found\"; exit 1 ;;\n"
	         "silent.show\\ node*) exit 1 ;;\n"
	         "esac\n"
	         "echo 'Configuration data as of 2026-11-25T05:00:00'\n"
	         "echo 'KeepAliveTime           = SYSTEM_DEFAULT'\n"
	         "echo 'KillWait                = 45 sec'\n"
	         "echo 'SlurmdSpoolDir          = %s/spool/%%n'\n",
	         top);
	ut_script(bin, "scontrol", text);
	old_path = ut_path_set(NULL, bin);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ut_path_restore(old_path);
	ut_no_slurm();
	unsetenv("FAKE_STATE");
	unsetenv("FAKE_RC");
	unsetenv("FAKE_CTL");
	unsetenv("FAKE_NODE");
	ut_rmtree(top);
	free(top);
	free(bin);
	return 0;
}

static void test_capture(void **state)
{
	(void)state;
	char out[64];
	int status = -1;
	char *a[] = {"sh", "-c", "printf 'hello\\n'; echo err >&2; exit 3", NULL};
	assert_int_equal(stg__capture(a, out, sizeof out, &status), 0);
	assert_string_equal(out, "hello\n");
	assert_int_equal(status, 3);
	/* more than fits: cut, the rest drained (the command does not block
	 * on a full pipe) */
	char *b[] = {"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo; exit 0", NULL};
	memset(out, 0, sizeof out);
	assert_int_equal(stg__capture(b, out, 10, &status), 0);
	assert_string_equal(out, "xxxxxxxxx");
	assert_int_equal(status, 0);
	/* stdin is /dev/null: a command that reads it ends */
	char *c[] = {"cat", NULL};
	assert_int_equal(stg__capture(c, out, sizeof out, &status), 0);
	assert_string_equal(out, "");
	/* killed: -1 */
	char *d[] = {"sh", "-c", "kill -9 $$", NULL};
	assert_int_equal(stg__capture(d, out, sizeof out, &status), -1);
	/* missing: -1 */
	char *e[] = {"no-such-command-here", NULL};
	assert_int_equal(stg__capture(e, out, sizeof out, &status), -1);
	assert_int_equal(stg__capture(a, out, 0, &status), -1);
}

static void test_job_alive(void **state)
{
	(void)state;
	static const struct {
		const char *state, *rc, *ctl;
		int alive;
	} t[] = {
	        {"RUNNING", "0", "UP", 1},
	        {"PENDING", "0", "UP", 1},
	        {"COMPLETING", "0", "UP", 1},
	        {"SUSPENDED", "0", "UP", 1},
	        {"REQUEUED", "0", "UP", 1},
	        {"COMPLETED", "0", "UP", 0},
	        {"CANCELLED", "0", "UP", 0},
	        {"FAILED", "0", "UP", 0},
	        {"TIMEOUT", "0", "UP", 0},
	        {"", "0", "UP", 0},
	        {"", "1", "UP", 0}, /* "Invalid job id": the controller answers */
	        /* status 1 too when squeue cannot reach slurmctld, or it does
	         * not answer in time: unknown, never "gone" */
	        {"", "1", "DOWN", -1},
	        {"", "2", "UP", -1},
	        {"", "127", "UP", -1},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		setenv("FAKE_STATE", t[i].state, 1);
		setenv("FAKE_RC", t[i].rc, 1);
		setenv("FAKE_CTL", t[i].ctl, 1);
		int a = stg__slurm_job_alive("4242");
		if (a != t[i].alive)
			fail_msg("state '%s' status %s controller %s: %d, want %d", t[i].state,
			         t[i].rc, t[i].ctl, a, t[i].alive);
	}
	unsetenv("FAKE_CTL");
	/* it asked about that job */
	char *args = ut_join(top, "squeue.args");
	char *s = ut_read_text(args);
	assert_non_null(strstr(s, "-h -o %T -j 4242"));
	free(s);
	free(args);
	/* no squeue at all: unknown, never "gone" */
	setenv("PATH", "/nonexistent", 1);
	assert_int_equal(stg__slurm_job_alive("4242"), -1);
}

/* Is this host a Slurm node?  Only the controller's "not found" (or no
 * Slurm here at all) says no: a controller that does not answer leaves it
 * unknown, and doctor must not skip a node's features step for that. */
static void test_is_node(void **state)
{
	(void)state;
	setenv("FAKE_NODE", "known", 1);
	assert_int_equal(stg__slurm_is_node("n1"), 1);
	setenv("FAKE_NODE", "unknown", 1);
	assert_int_equal(stg__slurm_is_node("login1"), 0);
	/* no answer: slurmctld down (ping says so) is unknown, not "no node" */
	setenv("FAKE_NODE", "silent", 1);
	setenv("FAKE_CTL", "DOWN", 1);
	assert_int_equal(stg__slurm_is_node("n1"), -1);
	setenv("FAKE_CTL", "UP", 1);
	assert_int_equal(stg__slurm_is_node("n1"), -1);
	/* no controller configured here at all: no Slurm, no node */
	setenv("FAKE_CTL", "NONE", 1);
	assert_int_equal(stg__slurm_is_node("n1"), 0);
	unsetenv("FAKE_CTL");
	unsetenv("FAKE_NODE");
	assert_int_equal(stg__slurm_is_node(""), 0);
	setenv("PATH", "/nonexistent", 1);
	assert_int_equal(stg__slurm_is_node("n1"), 0);
}

static void test_clock_outside_slurm(void **state)
{
	(void)state;
	stg_job_clock jc;
	memset(&jc, 0x55, sizeof jc);
	stg_job_clock_read(&jc);
	assert_true(jc.end == 0);
	assert_int_equal(jc.kill_wait, 30);
	assert_int_equal(jc.warn_signal, 0);
	assert_int_equal(jc.warn_secs, 0);
	assert_int_equal(jc.no_exec, 0);
	/* nothing was asked */
	char *args = ut_join(top, "squeue.args");
	assert_int_equal(access(args, F_OK), -1);
	free(args);
}

static double local_time(int y, int mo, int d, int h, int mi, int s)
{
	struct tm tm = {.tm_year = y - 1900,
	                .tm_mon = mo - 1,
	                .tm_mday = d,
	                .tm_hour = h,
	                .tm_min = mi,
	                .tm_sec = s,
	                .tm_isdst = -1};
	return (double)mktime(&tm);
}

/* The script from slurmd's spool: SlurmdSpoolDir/jobNNNNN/slurm_script,
 * %n being the node's name. */
static void test_clock_spool(void **state)
{
	(void)state;
	setenv("SLURM_JOB_ID", "123", 1);
	setenv("SLURMD_NODENAME", "node7", 1);
	char *dir = ut_join(top, "spool/node7/job00123");
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
	assert_int_equal(system(cmd), 0);
	static const char text[] = "#!/bin/bash\n"
	                           "#SBATCH --time=1:00:00\n"
	                           "  #SBATCH --signal=USR2@30\n"
	                           "\n"
	                           "# a comment\n"
	                           "#SBATCH --signal=B:SIGUSR1@120\n"
	                           "#SBATCH --signal=R:USR2@70000\n"
	                           "#SBATCH --signal=KILLME@5\n"
	                           "srun ./train\n"
	                           "#SBATCH --signal=TERM@1\n";
	ut_write(dir, "slurm_script", text, sizeof text - 1);
	stg_job_clock jc;
	stg_job_clock_read(&jc);
	assert_true(jc.end == local_time(2026, 11, 25, 6, 10, 0));
	assert_int_equal(jc.kill_wait, 45);
	/* the last valid one before the first command */
	assert_int_equal(jc.warn_signal, SIGUSR1);
	assert_int_equal(jc.warn_secs, 120);
	assert_int_equal(jc.warn_batch_only, 1);
	assert_int_equal(jc.no_exec, 0);
	/* a number, and sbatch's default of 60 s */
	static const char text2[] = "#!/bin/sh\n#SBATCH --signal 12\n";
	ut_write(dir, "slurm_script", text2, sizeof text2 - 1);
	stg_job_clock_read(&jc);
	assert_int_equal(jc.warn_signal, 12);
	assert_int_equal(jc.warn_secs, 60);
	assert_int_equal(jc.warn_batch_only, 0);
	/* no script there: no warning known */
	char *s = ut_join(dir, "slurm_script");
	unlink(s);
	stg_job_clock_read(&jc);
	assert_int_equal(jc.warn_signal, 0);
	assert_int_equal(jc.kill_wait, 45);
	/* no Slurm commands: KillWait's default */
	setenv("PATH", "/nonexistent", 1);
	stg_job_clock_read(&jc);
	assert_true(jc.end == 0);
	assert_int_equal(jc.kill_wait, 30);
	free(s);
	free(dir);
}

/* Run without exec: the batch shell, running SPOOL/jobN/slurm_script, is
 * the parent.  This program runs itself as that shell's child. */
static void test_clock_no_exec(void **state)
{
	(void)state;
	setenv("SLURM_JOB_ID", "77", 1);
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	assert_true(n > 0);
	self[n] = '\0';
	char *dir = ut_join(top, "batch"), *out = ut_join(top, "clock.out");
	mkdir(dir, 0755);
	char text[8192];
	snprintf(text, sizeof text,
	         "#!/bin/sh\n#SBATCH --signal=B:TERM@300\n'%s' --clock-child '%s'\nexit $?\n", self,
	         out);
	ut_script(dir, "slurm_script", text);
	char *sp = ut_join(dir, "slurm_script");
	char *argv[] = {"sh", sp, NULL};
	char buf[16];
	int status;
	assert_int_equal(stg__capture(argv, buf, sizeof buf, &status), 0);
	assert_int_equal(status, 0);
	char *got = ut_read_text(out);
	assert_string_equal(got, "no_exec=1 sig=15 secs=300 batch=1 kill_wait=45\n");
	free(got);
	free(sp);
	free(out);
	free(dir);
}

static stg_err expand(stg_ctx *ctx, const char *pattern, char **out)
{
	return stg_expand_pattern(ctx, pattern, out);
}

static void test_patterns(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	char *out = NULL;
	assert_int_equal(expand(ctx, "/plain/path", &out), STG_OK);
	assert_string_equal(out, "/plain/path");
	free(out);
	assert_int_equal(expand(ctx, "", &out), STG_OK);
	assert_string_equal(out, "");
	free(out);
	setenv("SLURM_JOB_ID", "1001", 1);
	setenv("SLURM_ARRAY_JOB_ID", "1000", 1);
	setenv("SLURM_ARRAY_TASK_ID", "7", 1);
	setenv("SLURM_NODEID", "2", 1);
	setenv("SLURM_JOB_NAME", "train", 1);
	setenv("SLURMD_NODENAME", "gpu04", 1);
	assert_int_equal(expand(ctx, "/r/%x-%j/%A_%a/%N.%n/100%%", &out), STG_OK);
	assert_string_equal(out, "/r/train-1001/1000_7/gpu04.2/100%");
	free(out);
	/* %u: the effective user */
	assert_int_equal(expand(ctx, "%u", &out), STG_OK);
	assert_true(strlen(out) > 0);
	assert_null(strchr(out, '/'));
	free(out);
	/* %N without SLURMD_NODENAME: the host's short name */
	unsetenv("SLURMD_NODENAME");
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	host[strcspn(host, ".")] = '\0';
	assert_int_equal(expand(ctx, "%N", &out), STG_OK);
	assert_string_equal(out, host);
	free(out);
	/* what is not set is refused, named; never quietly empty */
	unsetenv("SLURM_ARRAY_TASK_ID");
	out = (char *)0x1;
	assert_int_equal(expand(ctx, "/r/%A_%a", &out), STG_EUSAGE);
	assert_null(out);
	assert_string_equal(stg_errmsg(ctx), "'/r/%A_%a': %a (the array task id) is not known "
	                                     "here: SLURM_ARRAY_TASK_ID is not set");
	setenv("SLURM_ARRAY_TASK_ID", "", 1);
	assert_int_equal(expand(ctx, "%a", &out), STG_EUSAGE);
	/* a value with a slash would leave the directory: refused */
	setenv("SLURM_JOB_NAME", "../../etc", 1);
	assert_int_equal(expand(ctx, "/r/%x", &out), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(ctx),
	                       "would put a '/' in the path: SLURM_JOB_NAME is '../../etc'"));
	/* unknown patterns and a lone % */
	assert_int_equal(expand(ctx, "/r/%q", &out), STG_EUSAGE);
	assert_string_equal(stg_errmsg(ctx), "'/r/%q': %q is not a pattern (%j %A %a %N %n %u "
	                                     "%x, %% for a %)");
	assert_int_equal(expand(ctx, "/r/50%", &out), STG_EUSAGE);
	assert_string_equal(stg_errmsg(ctx), "'/r/50%' ends with a lone % (%% for a %)");
	/* the first problem is the one named */
	assert_int_equal(expand(ctx, "%q%a", &out), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(ctx), "%q is not a pattern"));
	stg_ctx_free(ctx);
}

/* A job name with a slash in it (sbatch -J exp/1) is set: the message
 * should not say it is not. */
static void test_pattern_message_slash(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	char *out = NULL;
	setenv("SLURM_JOB_NAME", "exp/1", 1);
	assert_int_equal(stg_expand_pattern(ctx, "/r/%x", &out), STG_EUSAGE);
	assert_null(strstr(stg_errmsg(ctx), "is not set"));
	assert_string_equal(stg_errmsg(ctx), "'/r/%x': %x (the job's name) would put a '/' in the "
	                                     "path: SLURM_JOB_NAME is 'exp/1'");
	stg_ctx_free(ctx);
}

/* A mount of the job's own, from mountinfo lines: job_container/tmpfs's
 * BasePath/[NODE/]ID/.ID at /tmp, a SPANK plugin's job-ID; the deepest
 * mount point counts, and of equal ones the last (on top). */
static bool private_in(const char *info, const char *path, const char *job, char *mnt)
{
	FILE *f = fmemopen((void *)info, strlen(info), "r");
	assert_non_null(f);
	bool p = stg__job_private_mount_in(f, path, job, mnt, 64);
	fclose(f);
	return p;
}

static void test_private_mount(void **state)
{
	(void)state;
	const char *info =
	        "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
	        "66 22 254:0 /var/spool/jc/n1/4242/.4242 /tmp rw,relatime - ext4 /dev/vda rw\n"
	        "67 22 0:27 /job-77 /dev/shm rw - tmpfs tmpfs rw\n"
	        "68 22 254:0 /data/with\\040space /scratch/a\\040b rw - ext4 /dev/vda rw\n"
	        "69 22 254:0 /jobs/4242x /var/x rw - ext4 /dev/vda rw\n";
	char mnt[64];
	assert_true(private_in(info, "/tmp/out", "4242", mnt));
	assert_string_equal(mnt, "/tmp");
	assert_true(private_in(info, "/tmp", "4242", mnt));
	/* another job's id, a longer one, or a path beside the mount point */
	assert_false(private_in(info, "/tmp/out", "424", mnt));
	assert_false(private_in(info, "/tmpx/out", "4242", mnt));
	assert_string_equal(mnt, "/");
	assert_false(private_in(info, "/var/x/y", "4242", mnt));
	assert_true(private_in(info, "/dev/shm/a", "77", mnt));
	assert_false(private_in(info, "/scratch/a b/c", "4242", mnt));
	assert_string_equal(mnt, "/scratch/a b");
	/* a mount on top of the private one hides it */
	char stacked[512];
	snprintf(stacked, sizeof stacked, "%s70 66 0:30 / /tmp rw - tmpfs tmpfs rw\n", info);
	assert_false(private_in(stacked, "/tmp/out", "4242", mnt));
	/* a line cut short, and no lines */
	assert_false(private_in("1 2 3:4\n", "/tmp", "4242", mnt));
	assert_false(private_in("", "/tmp", "4242", NULL));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_capture),       T(test_job_alive),
        T(test_is_node),       T(test_clock_outside_slurm),
        T(test_clock_spool),   T(test_clock_no_exec),
        T(test_patterns),      T(test_pattern_message_slash),
        T(test_private_mount),
};

/* As the batch shell's child: read the clock, write what it says. */
static int clock_child(const char *out)
{
	stg_job_clock jc;
	stg_job_clock_read(&jc);
	FILE *f = fopen(out, "w");
	if (!f)
		return 1;
	fprintf(f, "no_exec=%d sig=%d secs=%u batch=%d kill_wait=%u\n", jc.no_exec, jc.warn_signal,
	        jc.warn_secs, jc.warn_batch_only, jc.kill_wait);
	return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--clock-child"))
		return clock_child(argv[2]);
	cmocka_set_message_output(CM_OUTPUT_TAP);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
