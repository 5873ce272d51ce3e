/* test_config.c - settings (config.c): defaults and origins, validation
 * per kind with the setting and its origin named, hostile values shown
 * escaped and cut, files read from memory and from disk (comments, CRLF,
 * a BOM, file:line in messages, the size and line caps, FIFOs,
 * directories and devices refused without blocking), the environment,
 * and byte and count settings. */
#include "unit.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef struct fx {
	UT_FX;
	stg_config *cfg;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->cfg = stg_config_new();
	*state = f;
	return f->cfg ? 0 : -1;
}

static int teardown(void **state)
{
	fx *f = *state;
	stg_config_free(f->cfg);
	return ut_teardown(state);
}

static void assert_value(const stg_config *c, const char *key, const char *v, const char *origin)
{
	const char *o = NULL;
	const char *got = stg_config_get(c, key, &o);
	assert_non_null(got);
	assert_string_equal(got, v);
	if (origin)
		assert_string_equal(o, origin);
}

/* msg contains every one of the NULL-terminated needles */
static void assert_says(const char *msg, ...)
{
	va_list ap;
	va_start(ap, msg);
	const char *s;
	while ((s = va_arg(ap, const char *)))
		if (!strstr(msg, s))
			fail_msg("message '%s' lacks '%s'", msg, s);
	va_end(ap);
}

static void test_defaults(void **state)
{
	fx *f = *state;
	size_t n = stg_config_count();
	assert_true(n >= 10);
	for (size_t i = 0; i < n; i++) {
		const char *help = NULL;
		const char *k = stg_config_key(i, &help);
		assert_non_null(k);
		assert_non_null(help);
		assert_true(strlen(help) > 10);
		const char *o = NULL;
		assert_non_null(stg_config_get(f->cfg, k, &o));
		assert_string_equal(o, "default");
		/* every default passes its own validation */
		assert_int_equal(
		        stg_config_set(f->ctx, f->cfg, k, stg_config_get(f->cfg, k, NULL), "again"),
		        STG_OK);
	}
	assert_null(stg_config_key(n, NULL));
	assert_null(stg_config_get(f->cfg, "no_such_key", NULL));
	assert_value(f->cfg, "min_free", "5%", NULL);
	assert_value(f->cfg, "max_readers_per_node", "2", NULL);
	assert_value(f->cfg, "slot_dir", "/run/lock/stager", NULL);
	assert_value(f->cfg, "job_tmpdir_var", "SLURM_TMPDIR", NULL);
	assert_value(f->cfg, "keep_days", "14", NULL);
	stg_config_free(NULL);
}

static void test_set(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	stg_config *c = f->cfg;
	static const struct {
		const char *key, *value;
		const char *why; /* NULL: valid */
	} t[] = {
	        {"scratch_root", "/disk/scratch/me", NULL},
	        {"scratch_root", "", NULL},
	        {"scratch_root", "relative/dir", "not an absolute path"},
	        {"cache_max", "20G", NULL},
	        {"cache_max", "0", NULL},
	        {"cache_max", "50%", NULL},
	        {"cache_max", "12.5%", NULL},
	        {"cache_max", "100%", NULL},
	        {"cache_max", "100.5%", "not a percentage from 0 to 100"},
	        {"cache_max", "-5%", "not a percentage"},
	        {"cache_max", "%", "not a size"},
	        {"cache_max", "5%%", "not a percentage"},
	        {"cache_max", "lots", "not a size"},
	        {"min_free", "1e3", "not a size"},
	        {"bwlimit", "200M", NULL},
	        {"bwlimit", "5%", "not a size"},
	        {"bwlimit", "", "not a size"},
	        {"max_readers_per_node", "0", NULL},
	        {"max_readers_per_node", "100000", NULL},
	        {"max_readers_per_node", "100001", "not a whole number from 0 to 100000"},
	        {"max_readers_per_node", "99999999999999999999999", "not a whole number"},
	        {"max_readers_per_node", "+5", "not a whole number"},
	        {"max_readers_per_node", " 5", "not a whole number"},
	        {"max_readers_per_node", "0x5", "not a whole number"},
	        {"max_readers_per_node", "", "not a whole number"},
	        {"node_features", "yes", NULL},
	        {"node_features", "no", NULL},
	        {"node_features", "maybe", "not yes or no"},
	        {"node_features", "Yes", "not yes or no"},
	        {"node_features", "", "not yes or no"},
	        {"job_tmpdir_var", "JOB_SCRATCH", NULL},
	        {"job_tmpdir_var", "_x1", NULL},
	        {"job_tmpdir_var", "1X", "not a variable name"},
	        {"job_tmpdir_var", "A-B", "not a variable name"},
	        {"job_tmpdir_var", "", "not a variable name"},
	        {"remote_stager", "~/.local/bin/stager", NULL},
	        {"remote_stager", "stager-0.1+x", NULL},
	        {"remote_stager", "-oProxyCommand=x", "not a command"},
	        {"remote_stager", "stager; rm -rf ~", "not one plain word"},
	        {"remote_stager", "$(id)", "not one plain word"},
	        {"remote_stager", "", "not a command"},
	        {"slot_dir", "/tmp/a\tb", "a control character"},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		char *before = strdup(stg_config_get(c, t[i].key, NULL));
		stg_err err = stg_config_set(ctx, c, t[i].key, t[i].value, "--flag");
		if (!t[i].why) {
			if (err)
				fail_msg("%s = '%s' refused: %s", t[i].key, t[i].value,
				         stg_errmsg(ctx));
			assert_value(c, t[i].key, t[i].value, "--flag");
		} else {
			if (err != STG_EUSAGE)
				fail_msg("%s = '%s' accepted", t[i].key, t[i].value);
			/* the origin, the setting, why, and what it is for */
			assert_says(stg_errmsg(ctx), "--flag: invalid value '", t[i].key, t[i].why,
			            NULL);
			const char *help = NULL;
			for (size_t k = 0; stg_config_key(k, &help); k++)
				if (!strcmp(stg_config_key(k, NULL), t[i].key))
					break;
			assert_says(stg_errmsg(ctx), help, NULL);
			/* and the old value stays */
			assert_value(c, t[i].key, before, NULL);
		}
		free(before);
	}
	/* a path of at most 1024 bytes */
	char path[1100];
	path[0] = '/';
	memset(path + 1, 'p', sizeof path - 2);
	path[1024] = '\0';
	assert_int_equal(stg_config_set(ctx, c, "scratch_root", path, "x"), STG_OK);
	path[1024] = 'p';
	path[1025] = '\0';
	assert_int_equal(stg_config_set(ctx, c, "scratch_root", path, "x"), STG_EUSAGE);
	assert_says(stg_errmsg(ctx), "longer than 1024 bytes", NULL);
	/* unknown keys are named, with the origin */
	assert_int_equal(stg_config_set(ctx, c, "cache_maxx", "1G", "/etc/stager.conf:3"),
	                 STG_EUSAGE);
	assert_string_equal(stg_errmsg(ctx), "/etc/stager.conf:3: unknown setting 'cache_maxx'");
	/* the origin is copied */
	char origin[32] = "--cache-max";
	assert_int_equal(stg_config_set(ctx, c, "cache_max", "1G", origin), STG_OK);
	strcpy(origin, "changed");
	assert_value(c, "cache_max", "1G", "--cache-max");
}

/* A hostile value is shown with its control bytes escaped and cut short:
 * it can neither drive the terminal nor flood the message. */
static void test_shown(void **state)
{
	fx *f = *state;
	assert_int_equal(stg_config_set(f->ctx, f->cfg, "bwlimit", "\x1b[2J\\x", "env"),
	                 STG_EUSAGE);
	assert_says(stg_errmsg(f->ctx), "'\\x1b[2J\\x5cx'", "a control character", NULL);
	assert_null(strchr(stg_errmsg(f->ctx), '\x1b'));
	char big[5000];
	memset(big, 'A', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(stg_config_set(f->ctx, f->cfg, "bwlimit", big, "env"), STG_EUSAGE);
	assert_says(stg_errmsg(f->ctx), "...'", NULL);
	assert_true(strlen(stg_errmsg(f->ctx)) < 400);
	assert_int_equal(stg_config_set(f->ctx, f->cfg, big, "1", "env"), STG_EUSAGE);
	assert_says(stg_errmsg(f->ctx), "env: unknown setting 'AAAA", "...'", NULL);
	assert_true(strlen(stg_errmsg(f->ctx)) < 200);
	/* non-ASCII too */
	assert_int_equal(stg_config_set(f->ctx, f->cfg, "caché_max", "1", "env"), STG_EUSAGE);
	assert_says(stg_errmsg(f->ctx), "'cach\\xc3\\xa9_max'", NULL);
}

static void test_load_mem(void **state)
{
	fx *f = *state;
	static const char text[] = "\xef\xbb\xbf# site settings\n"
	                           "\n"
	                           "  scratch_root   =   /scratch/x   \n"
	                           "cache_max=20G # at most\r\n"
	                           "\t\n"
	                           "min_free = 10%\n"
	                           "cache_max = 30G\n"
	                           "slot_dir = /tmp/slots";
	assert_int_equal(stg_config_load_mem(f->ctx, f->cfg, text, sizeof text - 1, "site.conf"),
	                 STG_OK);
	assert_value(f->cfg, "scratch_root", "/scratch/x", "site.conf:3");
	/* the later line wins */
	assert_value(f->cfg, "cache_max", "30G", "site.conf:7");
	assert_value(f->cfg, "min_free", "10%", "site.conf:6");
	/* the last line needs no newline */
	assert_value(f->cfg, "slot_dir", "/tmp/slots", "site.conf:8");
	assert_value(f->cfg, "bwlimit", "0", "default");
	/* empty input */
	assert_int_equal(stg_config_load_mem(f->ctx, f->cfg, "", 0, "e"), STG_OK);

	static const struct {
		const char *text;
		size_t len;
		const char *msg;
	} bad[] = {
	        {"# ok\njunk\n", 10, "c:2: expected 'key = value', not 'junk'"},
	        {"= 5\n", 4, "c:1: expected 'key = value', not '= 5'"},
	        {"\n\nnope = 1\n", 11, "c:3: unknown setting 'nope'"},
	        {"cache_max = 1Q\n", 15, "c:1: invalid value '1Q' for cache_max"},
	        {"a\0b = 1\n", 8, "c:1: a NUL byte in the line: not a text file?"},
	        /* a byte order mark counts only at the start */
	        {"bwlimit=1\n\xef\xbb\xbf", 13,
	         "c:2: expected 'key = value', not '\\xef\\xbb\\xbf'"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(stg_config_load_mem(f->ctx, f->cfg, bad[i].text, bad[i].len, "c"),
		                 STG_EUSAGE);
		if (strncmp(stg_errmsg(f->ctx), bad[i].msg, strlen(bad[i].msg)))
			fail_msg("'%s', want '%s'", stg_errmsg(f->ctx), bad[i].msg);
	}
}

static void test_line_and_size_caps(void **state)
{
	fx *f = *state;
	/* a line of exactly STG_CONFIG_MAX_LINE bytes is read; one more is
	 * refused, never cut */
	size_t n = STG_CONFIG_MAX_LINE;
	char *line = ut_malloc(n + 2);
	memset(line, ' ', n + 2);
	memcpy(line, "bwlimit = 1M", 12);
	line[n] = '\n';
	assert_int_equal(stg_config_load_mem(f->ctx, f->cfg, line, n + 1, "c"), STG_OK);
	assert_value(f->cfg, "bwlimit", "1M", "c:1");
	line[n] = ' ';
	line[n + 1] = '\n';
	assert_int_equal(stg_config_load_mem(f->ctx, f->cfg, line, n + 2, "c"), STG_EUSAGE);
	assert_string_equal(stg_errmsg(f->ctx), "c:1: line longer than 4096 bytes");
	free(line);
	/* the whole: at most STG_CONFIG_MAX_SIZE, comments or not */
	size_t big = STG_CONFIG_MAX_SIZE + 1;
	char *buf = ut_malloc(big);
	memset(buf, '\n', big);
	assert_int_equal(stg_config_load_mem(f->ctx, f->cfg, buf, big - 1, "c"), STG_OK);
	assert_int_equal(stg_config_load_mem(f->ctx, f->cfg, buf, big, "c"), STG_EUSAGE);
	assert_says(stg_errmsg(f->ctx), "config file 'c' is larger than 1 MiB", NULL);
	/* and from a file, named with its size */
	ut_write(f->dir, "big.conf", buf, big);
	char *p = ut_join(f->dir, "big.conf");
	assert_int_equal(stg_config_load_file(f->ctx, f->cfg, p, 1), STG_EUSAGE);
	assert_says(stg_errmsg(f->ctx), p, "larger than 1 MiB (1048577 bytes)", NULL);
	free(p);
	free(buf);
}

static void test_load_file(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	const char text[] = "# user\nmin_free = 2G\nkeep_days = 3\n";
	ut_write(f->dir, "user.conf", text, sizeof text - 1);
	char *p = ut_join(f->dir, "user.conf");
	assert_int_equal(stg_config_load_file(ctx, f->cfg, p, 1), STG_OK);
	char origin[4200];
	snprintf(origin, sizeof origin, "%s:2", p);
	assert_value(f->cfg, "min_free", "2G", origin);
	snprintf(origin, sizeof origin, "%s:3", p);
	assert_value(f->cfg, "keep_days", "3", origin);
	/* an error names the file and the line */
	ut_write(f->dir, "bad.conf", "keep_days = 3\nkeep_days = soon\n", 31);
	char *b = ut_join(f->dir, "bad.conf");
	assert_int_equal(stg_config_load_file(ctx, f->cfg, b, 1), STG_EUSAGE);
	snprintf(origin, sizeof origin, "%s:2: invalid value 'soon' for keep_days", b);
	assert_says(stg_errmsg(ctx), origin, NULL);
	/* missing: fine unless it must exist */
	char *m = ut_join(f->dir, "missing.conf"), *md = ut_join(f->dir, "user.conf/x");
	assert_int_equal(stg_config_load_file(ctx, f->cfg, m, 0), STG_OK);
	assert_int_equal(stg_config_load_file(ctx, f->cfg, md, 0), STG_OK);
	assert_int_equal(stg_config_load_file(ctx, f->cfg, m, 1), STG_ENOENT);
	assert_says(stg_errmsg(ctx), "cannot read config file '", m, strerror(ENOENT), NULL);
	/* /dev/null reads as empty */
	assert_int_equal(stg_config_load_file(ctx, f->cfg, "/dev/null", 1), STG_OK);
	/* what is not a regular file is refused, at once */
	assert_int_equal(stg_config_load_file(ctx, f->cfg, f->dir, 1), STG_EUSAGE);
	assert_says(stg_errmsg(ctx), "it is a directory, not a regular file", NULL);
	assert_int_equal(stg_config_load_file(ctx, f->cfg, "/dev/zero", 1), STG_EUSAGE);
	assert_says(stg_errmsg(ctx), "'/dev/zero': it is a character device", NULL);
	char *fifo = ut_join(f->dir, "fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	double t0 = stg__now();
	assert_int_equal(stg_config_load_file(ctx, f->cfg, fifo, 0), STG_EUSAGE);
	ut_assert_time_below(stg__now() - t0, 2);
	assert_says(stg_errmsg(ctx), "it is a FIFO, not a regular file", NULL);
	/* a socket cannot even be opened: still named for what it is */
	char *sock = ut_join(f->dir, "sock");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(sock) < sizeof sa.sun_path) {
		strcpy(sa.sun_path, sock);
		assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
		assert_int_equal(stg_config_load_file(ctx, f->cfg, sock, 1), STG_EUSAGE);
		assert_says(stg_errmsg(ctx), "it is a socket", NULL);
	}
	close(s);
	/* a symlink to a config file is followed */
	char *l = ut_join(f->dir, "link.conf");
	assert_int_equal(symlink("user.conf", l), 0);
	assert_int_equal(stg_config_load_file(ctx, f->cfg, l, 1), STG_OK);
	free(l);
	free(sock);
	free(fifo);
	free(md);
	free(m);
	free(b);
	free(p);
}

static void test_env(void **state)
{
	fx *f = *state;
	setenv("STAGER_CACHE_MAX", "7G", 1);
	setenv("STAGER_JOB_TMPDIR_VAR", "JOB_SCRATCH", 1);
	unsetenv("STAGER_SCRATCH_ROOT");
	assert_int_equal(stg_config_load_env(f->ctx, f->cfg), STG_OK);
	assert_value(f->cfg, "cache_max", "7G", "environment STAGER_CACHE_MAX");
	assert_value(f->cfg, "job_tmpdir_var", "JOB_SCRATCH", "environment STAGER_JOB_TMPDIR_VAR");
	assert_value(f->cfg, "scratch_root", "", "default");
	setenv("STAGER_MAX_READERS_PER_NODE", "many", 1);
	assert_int_equal(stg_config_load_env(f->ctx, f->cfg), STG_EUSAGE);
	assert_says(stg_errmsg(f->ctx),
	            "environment STAGER_MAX_READERS_PER_NODE: invalid value 'many' for "
	            "max_readers_per_node",
	            NULL);
	unsetenv("STAGER_CACHE_MAX");
	unsetenv("STAGER_JOB_TMPDIR_VAR");
	unsetenv("STAGER_MAX_READERS_PER_NODE");
}

static void test_bytes_and_counts(void **state)
{
	fx *f = *state;
	stg_config *c = f->cfg;
	assert_int_equal(stg__config_bytes(c, "min_free", 1000), 50); /* 5% */
	assert_int_equal(stg__config_bytes(c, "cache_max", 1000), 0);
	assert_int_equal(stg_config_set(f->ctx, c, "cache_max", "1.5K", "t"), STG_OK);
	assert_int_equal(stg__config_bytes(c, "cache_max", 1000), 1536);
	assert_int_equal(stg_config_set(f->ctx, c, "cache_max", "100%", "t"), STG_OK);
	assert_int_equal(stg__config_bytes(c, "cache_max", 123456), 123456);
	assert_int_equal(stg__config_bytes(c, "no_such", 1000), 0);
	assert_int_equal(stg__config_count(c, "max_readers_per_node"), 2);
	assert_int_equal(stg__config_count(c, "slot_wait_max"), 600);
	assert_int_equal(stg_config_set(f->ctx, c, "lease_ttl", "100000", "t"), STG_OK);
	assert_int_equal(stg__config_count(c, "lease_ttl"), 100000);
	assert_int_equal(stg__config_count(c, "no_such"), 0);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_defaults),           T(test_set),       T(test_shown), T(test_load_mem),
        T(test_line_and_size_caps), T(test_load_file), T(test_env),   T(test_bytes_and_counts),
};

UT_MAIN(tests)
