/*
 * cli.c - messages, global options, progress display and JSON for every
 * stager command.
 *
 * Human messages and progress go to stderr; stdout carries only results
 * (a path, a digest, a listing, or one JSON object), so scripts can capture
 * it.  Progress is a bar on a terminal and a plain line every few seconds in
 * a batch log.  stdout is a stream of ours over descriptor 1
 * (cli_begin): a bar is ended before a result is written after it, and
 * what is written is counted, so that a command asked for --json that
 * fails without printing its object gets one here (cli_finish).
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

cli_opts g_opts;
const char *g_cmd = "stager";

/* The running command (cli_begin): its name and arguments, whether it was
 * asked for --json, and the last error it told (for cli_finish). */
static struct {
	const char *name;
	int argc;
	char **argv;
	bool json;
	char error[2048];
} current;

/* An error message, kept for the JSON object of a failure (warnings are
 * not errors). */
static void remember(const char *m)
{
	if (strncmp(m, "warning: ", 9))
		snprintf(current.error, sizeof current.error, "%s", m);
}

static void vmsg(bool error, const char *fmt, va_list ap)
{
	char *m = NULL;
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	cli_progress_end();
	fprintf(stderr, "stager: %s%s%s\n", g_cmd ? g_cmd : "", g_cmd ? ": " : "", m ? m : fmt);
	if (error && m)
		remember(m);
	free(m);
}

static void __attribute__((format(printf, 2, 3))) msg(bool error, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(error, fmt, ap);
	va_end(ap);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(true, fmt, ap);
	va_end(ap);
}

void cli_info(const char *fmt, ...)
{
	if (g_opts.quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vmsg(false, fmt, ap);
	va_end(ap);
}

/* The help that fits: the command's, or stager's before the command. */
static void see_help(void)
{
	if (g_cmd)
		fprintf(stderr, "see 'stager %s --help'\n", g_cmd);
	else
		fprintf(stderr, "see 'stager --help'\n");
}

/* m as a usage message shows it: control bytes as \xNN, and past ~400
 * bytes only its start (the option) and its end (what was expected), so a
 * hostile argument neither floods the log nor drives the terminal. */
static void usage_text(const char *m)
{
	size_t len = strlen(m), head = len > 400 ? 240 : len, tail = len > 400 ? 120 : 0;
	for (size_t i = 0; i < len; i++) {
		if (i == head && tail) {
			fprintf(stderr, "...(%zu bytes)...", len - head - tail);
			i = len - tail;
		}
		unsigned char c = (unsigned char)m[i];
		if (c < 0x20 || c == 0x7f)
			fprintf(stderr, "\\x%02x", c);
		else
			fputc(c, stderr);
	}
}

int cli_usage(const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&m, fmt, ap);
	va_end(ap);
	cli_progress_end();
	fprintf(stderr, "stager: %s%s", g_cmd ? g_cmd : "", g_cmd ? ": " : "");
	if (n >= 0) {
		usage_text(m);
		remember(m);
	} else {
		fputs(fmt, stderr);
	}
	fputc('\n', stderr);
	free(m);
	see_help();
	return EXIT_USAGE;
}

/* What getopt_long said on stderr when it returned '?', for the JSON
 * object: the argument it stopped at (a long option, always the one
 * before optind). */
static void remember_bad_option(void)
{
	const char *a = optind > 0 && optind <= current.argc ? current.argv[optind - 1] : NULL;
	char m[512];
	if (a && a[0] == '-' && a[1] == '-' && !optopt)
		snprintf(m, sizeof m, "unrecognized or ambiguous option '%.400s'", a);
	else if (a && a[0] == '-' && a[1] == '-')
		snprintf(m, sizeof m, "option '%.400s' %s", a,
		         strchr(a, '=') ? "takes no value" : "needs a value");
	else if (optopt > ' ' && optopt < 127)
		snprintf(m, sizeof m, "option -%c is unknown, or needs a value", optopt);
	else
		snprintf(m, sizeof m, "bad option");
	remember(m);
}

int cli_fail(stg_ctx *ctx, stg_err err)
{
	const char *msg = stg_errmsg(ctx);
	cli_error("%s", *msg ? msg : stg_strerror(err));
	return stg_exit_status(err);
}

/* A whole number from lo (>= 0) to hi, in digits only (strtol would also
 * take " 5" and "+5"); 0, or -1. */
static int parse_int(const char *s, long lo, long hi, int *out)
{
	long v = 0;
	if (!*s)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
		if (v > hi)
			return -1;
	}
	if (v < lo)
		return -1;
	*out = (int)v;
	return 0;
}

int cli_parse_threads(const char *s, int *out)
{
	return parse_int(s, 0, 64, out);
}

int cli_parse_level(const char *s, int *out)
{
	return parse_int(s, 1, 19, out);
}

int cli_global_option(int c, const char *arg)
{
	switch (c) {
	case 'q':
	case OPT_QUIET: g_opts.quiet = 1; return -2;
	case 'v':
	case OPT_VERBOSE: g_opts.verbose++; return -2;
	case OPT_PROGRESS:
		if (!strcmp(arg, "auto"))
			g_opts.progress = PROGRESS_AUTO;
		else if (!strcmp(arg, "bar"))
			g_opts.progress = PROGRESS_BAR;
		else if (!strcmp(arg, "lines"))
			g_opts.progress = PROGRESS_LINES;
		else if (!strcmp(arg, "none"))
			g_opts.progress = PROGRESS_NONE;
		else
			return cli_usage("--progress must be auto, bar, lines or none, not '%s'",
			                 arg);
		return -2;
	case OPT_BWLIMIT: {
		uint64_t v;
		if (stg_parse_size(arg, &v) || v == 0)
			return cli_usage("--bwlimit: '%s' is not a rate (e.g. 200M)", arg);
		g_opts.bwlimit = arg;
		return -2;
	}
	case OPT_SCRATCH: g_opts.scratch = arg; return -2;
	case OPT_CONFIG:
		if (access(arg, R_OK)) {
			cli_error("cannot read config file '%s': %s", arg, strerror(errno));
			return EXIT_SOURCE;
		}
		g_opts.config = arg;
		return -2;
	case 'h':
	case OPT_HELP: cli_print_help(cli_find(g_cmd)); return EXIT_OK;
	case '?':
		remember_bad_option();
		see_help();
		return EXIT_USAGE;
	}
	return -1;
}

int cli_global_options_only(int argc, char **argv)
{
	static const struct option lo[] = {
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		int rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -1)
			return cli_usage("unexpected option");
	}
	return -1;
}

stg_config *cli_config(stg_ctx *ctx)
{
	stg_config *cfg = stg_config_new();
	if (!cfg) {
		cli_error("out of memory");
		exit(cli_finish(EXIT_IO));
	}
	stg_err err = stg_config_load_standard(ctx, cfg, g_opts.config);
	if (!err && g_opts.scratch) {
		if (g_opts.scratch[0] != '/') {
			char *abs = realpath(g_opts.scratch, NULL);
			if (!abs && errno == ENOENT) {
				char cwd[4096];
				if (getcwd(cwd, sizeof cwd)) {
					size_t n = strlen(cwd) + strlen(g_opts.scratch) + 2;
					if ((abs = malloc(n)))
						snprintf(abs, n, "%s/%s", cwd, g_opts.scratch);
				}
			}
			if (abs) {
				err = stg_config_set(ctx, cfg, "scratch_root", abs, "--scratch");
				free(abs);
			}
		} else {
			err = stg_config_set(ctx, cfg, "scratch_root", g_opts.scratch, "--scratch");
		}
	}
	if (!err && g_opts.bwlimit)
		err = stg_config_set(ctx, cfg, "bwlimit", g_opts.bwlimit, "--bwlimit");
	if (err) {
		cli_fail(ctx, err);
		exit(cli_finish(EXIT_USAGE));
	}
	return cfg;
}

stg_cache *cli_cache(stg_ctx *ctx, stg_config *cfg, int *status)
{
	stg_cache *c = NULL;
	stg_err err = stg_cache_open(ctx, cfg, &c);
	if (err) {
		*status = cli_fail(ctx, err);
		return NULL;
	}
	return c;
}

int cli_check_globals(void)
{
	if (g_opts.bwlimit) {
		cli_error("--bwlimit applies to stage, collect and run (what reads or writes "
		          "the shared filesystem), not to '%s'",
		          g_cmd);
		return EXIT_USAGE;
	}
	return 0;
}

const cli_cmd *cli_find(const char *name)
{
	for (const cli_cmd *c = cli_commands; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

void cli_print_help(const cli_cmd *cmd)
{
	if (!cmd)
		return;
	fputs(cmd->help, stdout);
	fputs("\nGlobal options: --quiet, --verbose, --progress=auto|bar|lines|none,\n"
	      "  --bwlimit RATE, --scratch DIR, --config FILE.  Sizes take K M G T,\n"
	      "  times s m h d.  Exit status: 0 ok, 1 usage, 2 source missing or\n"
	      "  unreadable, 3 not enough space, 4 integrity failure, 5 interrupted,\n"
	      "  6 remote failure, 7 other I/O error.\n",
	      stdout);
}

/* ---- logging and progress ------------------------------------------------ */

static struct {
	bool active; /* a bar is on screen */
	bool bar;
	bool lines;
	double start, last;
	/* the current step ("unpack", "collect", ...): rates and ETAs are of it */
	char what[16];
	double step_start;
	uint64_t step_done0, last_done;
	bool step_ended; /* its 100% is shown */
} prog;

static pthread_mutex_t prog_mu = PTHREAD_MUTEX_INITIALIZER;

/* Seconds on the monotonic clock. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_log(void *arg, stg_log_level level, const char *text)
{
	(void)arg;
	if (level == STG_LOG_DEBUG && !g_opts.verbose)
		return;
	/* --quiet silences what went well; warnings and errors stay */
	if (level == STG_LOG_INFO && g_opts.quiet)
		return;
	pthread_mutex_lock(&prog_mu);
	if (level == STG_LOG_WARN)
		msg(false, "warning: %s", text);
	else
		msg(level == STG_LOG_ERROR, "%s", text);
	pthread_mutex_unlock(&prog_mu);
}

/* "1m05s", "42s", "2h10m" */
static void format_eta(double s, char *out, size_t len)
{
	long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(out, len, "%ldh%02ldm", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(out, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(out, len, "%lds", t);
}

static void on_progress(void *arg, const char *what, uint64_t done, uint64_t total)
{
	(void)arg;
	if (!prog.bar && !prog.lines)
		return;
	double t = now();
	pthread_mutex_lock(&prog_mu);
	/* a new step: its rate counts from here */
	if (strncmp(prog.what, what, sizeof prog.what - 1) || done < prog.last_done) {
		snprintf(prog.what, sizeof prog.what, "%s", what);
		prog.step_start = t;
		prog.step_done0 = done;
		prog.step_ended = false;
	}
	prog.last_done = done;
	double since = t - prog.last;
	bool end = total && done >= total;
	if ((prog.bar && since < 0.2 && !end) || (prog.lines && since < 5 && !end) ||
	    (prog.lines && end && t - prog.start < 5) || (end && prog.step_ended)) {
		pthread_mutex_unlock(&prog_mu);
		return;
	}
	prog.last = t;
	prog.step_ended = end;
	/* a tree that grew while it was sent (a file still being written)
	 * has sent more than it had at the start: never over 100% */
	if (done > total)
		total = done;
	/* the tool's own word for its main step: a stage unpacks */
	const char *label = !strcmp(g_cmd, "stage") && !strcmp(what, "unpack") ? "stage" : what;
	char d[16], tt[16], r16[16], rate[32] = "", eta[80] = "";
	/* a rate only once the step has taken a time that can be measured
	 * (a step over in a few milliseconds has none, not "0 B/s") */
	double el = t - prog.step_start;
	double r = el >= 0.05 ? (double)(done - prog.step_done0) / el : 0;
	stg_format_size(done, d, sizeof d);
	stg_format_size(total, tt, sizeof tt);
	if (r >= 1)
		snprintf(rate, sizeof rate, "%s/s", stg_format_size((uint64_t)r, r16, sizeof r16));
	if (r >= 1 && total > done) {
		char e[64];
		format_eta((double)(total - done) / r, e, sizeof e);
		snprintf(eta, sizeof eta, ", %s left", e);
	}
	int pct = total ? (int)(done * 100 / total) : 0;
	if (prog.bar) {
		char bar[31];
		int fill = pct * 30 / 100;
		for (int i = 0; i < 30; i++)
			bar[i] = i < fill ? '#' : ' ';
		bar[30] = '\0';
		fprintf(stderr, "\r%-7s [%s] %3d%% %s / %s%s%s%s\033[K", label, bar, pct, d, tt,
		        *rate ? "  " : "", rate, eta);
		prog.active = true;
	} else {
		fprintf(stderr, "stager: %s: %d%% (%s of %s%s%s%s)\n", label, pct, d, tt,
		        *rate ? ", " : "", rate, eta);
	}
	pthread_mutex_unlock(&prog_mu);
}

void cli_progress_end(void)
{
	if (prog.active) {
		fputs("\r\033[K", stderr);
		prog.active = false;
	}
}

/* ---- stdout, and the JSON object of a failure ------------------------------ */

static uint64_t out_bytes; /* written to stdout so far */
static int out_errno;      /* why a write to stdout failed */

/* stdout's writes: a bar on stderr is ended first (on a terminal, or with
 * both in one log, the result would follow the bar on its line); 0 on
 * an error (errno set), as fopencookie asks. */
static ssize_t out_write(void *cookie, const char *buf, size_t len)
{
	(void)cookie;
	size_t done = 0;
	pthread_mutex_lock(&prog_mu);
	cli_progress_end();
	while (done < len) {
		ssize_t n = write(STDOUT_FILENO, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			out_errno = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
	}
	out_bytes += done;
	pthread_mutex_unlock(&prog_mu);
	return (ssize_t)done;
}

void cli_begin(const cli_cmd *cmd, int argc, char **argv)
{
	current.name = cmd->name;
	current.argc = argc;
	current.argv = argv;
	/* --json among the options of a command that takes it (its help says
	 * so; run's CMD may take a --json of its own), not after "--"; the
	 * tasks on other nodes (--node-*) speak a protocol on stdout and get
	 * no object */
	for (int i = 1; strstr(cmd->help, "--json") && i < argc && strcmp(argv[i], "--"); i++) {
		if (!strncmp(argv[i], "--node-", 7)) {
			current.json = false;
			break;
		}
		/* getopt_long takes "--js" for "--json" too */
		size_t n = strlen(argv[i]);
		if (n >= 3 && !strncmp(argv[i], "--json", n))
			current.json = true;
	}
	/* glibc's stdout is a variable a program may set */
	static const cookie_io_functions_t io = {.write = out_write};
	FILE *f = fopencookie(NULL, "w", io);
	if (!f)
		return; /* the C library's stdout, then */
	setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
	stdout = f;
}

int cli_finish(int status)
{
	/* a result that did not reach stdout (a full disk, a closed pipe) is
	 * no success: $(stager pack ...) would be empty */
	if ((fflush(stdout) || ferror(stdout)) && status == EXIT_OK) {
		cli_error("cannot write the result on standard output: %s",
		          strerror(out_errno ? out_errno : errno));
		status = EXIT_IO;
	}
	if (!current.json || status == EXIT_OK || out_bytes)
		return status;
	/* a failure that printed nothing: say it in JSON too */
	printf("{\"ok\":false,\"command\":");
	json_str(stdout, current.name);
	printf(",\"exit\":%d,\"error\":", status);
	json_str(stdout, *current.error ? current.error : "failed (no message)");
	printf("}\n");
	fflush(stdout);
	return status;
}

static stg_ctx *volatile sig_ctx;

static void on_signal(int sig)
{
	(void)sig;
	if (sig_ctx)
		stg_cancel(sig_ctx);
}

stg_ctx *cli_ctx(void)
{
	stg_ctx *ctx = stg_ctx_new();
	if (!ctx) {
		cli_error("out of memory");
		exit(cli_finish(EXIT_IO));
	}
	stg_set_log(ctx, on_log, NULL);
	progress_mode m = g_opts.progress;
	if (g_opts.quiet && m == PROGRESS_AUTO)
		m = PROGRESS_NONE;
	if (m == PROGRESS_AUTO)
		m = isatty(STDERR_FILENO) ? PROGRESS_BAR : PROGRESS_LINES;
	prog.bar = m == PROGRESS_BAR;
	prog.lines = m == PROGRESS_LINES;
	prog.start = prog.last = now();
	if (prog.bar || prog.lines)
		stg_set_progress(ctx, on_progress, NULL);
	sig_ctx = ctx;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* a signal ignored at start (nohup, a background job) stays ignored */
	int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction old;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN &&
		    sigs[i] != SIGTERM)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
	return ctx;
}

void cli_ctx_done(stg_ctx *ctx)
{
	cli_progress_end();
	sig_ctx = NULL;
	stg_ctx_free(ctx);
}

/* ---- JSON ------------------------------------------------------------------ */

/* Length of a valid UTF-8 sequence at s, or 0. */
static int utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	int n = (s[0] & 0xE0) == 0xC0   ? 2
	        : (s[0] & 0xF0) == 0xE0 ? 3
	        : (s[0] & 0xF8) == 0xF0 ? 4
	                                : 0;
	if (!n || (n == 2 && s[0] < 0xC2))
		return 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

void json_str(FILE *f, const char *str)
{
	/* runs of bytes kept as they are go out whole: a call a character
	 * took seconds for a listing of long paths */
	const unsigned char *s = (const unsigned char *)str, *run = s;
	fputc('"', f);
	while (*s) {
		unsigned char c = *s;
		int n = c == '"' || c == '\\' || c < 0x20 ? 0 : utf8_len(s);
		if (n) {
			s += n;
			continue;
		}
		fwrite(run, 1, (size_t)(s - run), f);
		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
		} else {
			/* a control byte, or not UTF-8: kept visible as a Latin-1
			 * code point */
			fprintf(f, "\\u%04x", c);
		}
		run = ++s;
	}
	fwrite(run, 1, (size_t)(s - run), f);
	fputc('"', f);
}

void cli_put_name(FILE *f, const char *name)
{
	/* the printable runs whole: a byte at a time (a locked fputc each)
	 * took seconds for a listing of long paths */
	const unsigned char *p = (const unsigned char *)name;
	while (*p) {
		const unsigned char *q = p;
		while (*q && !(*q < 0x20 || *q == 0x7f || *q == '\\'))
			q++;
		fwrite(p, 1, (size_t)(q - p), f);
		if (!*q)
			break;
		fprintf(f, "\\x%02x", *q);
		p = q + 1;
	}
}

void json_hex(FILE *f, const uint8_t *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
	fputc('"', f);
}

/* The global options in effect, as arguments for another stager, into v
 * (room for 8); their number. */
static size_t global_args(const char **v)
{
	size_t n = 0;
	const char *gv[][2] = {{"--scratch", g_opts.scratch},
	                       {"--config", g_opts.config},
	                       {"--bwlimit", g_opts.bwlimit}};
	for (size_t i = 0; i < sizeof gv / sizeof gv[0]; i++)
		if (gv[i][1]) {
			v[n++] = gv[i][0];
			v[n++] = gv[i][1];
		}
	if (g_opts.quiet)
		v[n++] = "--quiet";
	if (g_opts.verbose)
		v[n++] = "--verbose";
	return n;
}

void cli_fanout_opts(stg_fanout_opts *fo)
{
	/* the same path on every node of a cluster */
	static char self[PATH_MAX];
	static const char *args[9];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0)
		self[n] = '\0';
	else
		snprintf(self, sizeof self, "stager");
	args[global_args(args)] = NULL;
	stg_fanout_opts_init(fo);
	fo->program = self;
	fo->args = args;
}
