/*
 * cmd_collect.c - stager collect SRC DEST [--pack] [--every INTERVAL]
 *                                [--level N] [--json]
 *
 * With --every, collects at once and then every INTERVAL (with idle I/O
 * priority) until SIGTERM, SIGINT or SIGHUP, which end it after one last
 * collect at normal priority (exit 0 if that succeeds); a second signal
 * interrupts that collect (exit 5).
 */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <unistd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OPT_JSON = OPT_FIRST_LOCAL, OPT_PACK, OPT_EVERY, OPT_LEVEL, OPT_NODE_READY, OPT_KEPT };

static volatile sig_atomic_t stop_signals, now_signals;
static stg_ctx *volatile every_ctx;

static void on_stop(int sig)
{
	(void)sig;
	if (++stop_signals > 1 && every_ctx)
		stg_cancel(every_ctx);
}

/* SIGUSR1, SIGUSR2 (Slurm's early warning): collect now */
static void on_now(int sig)
{
	(void)sig;
	now_signals++;
}

int cli_collect_once(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                     const stg_collect_opts *o, collect_totals *t)
{
	stg_collect_result res;
	stg_err err = stg_collect(ctx, cache, src, dest, o, &res);
	t->rounds++;
	t->files = res.files;
	t->sent_files += res.sent_files;
	t->sent_bytes += res.sent_bytes;
	t->unchanged = res.unchanged;
	t->retries += res.retries;
	t->failed = res.failed;
	t->changing = res.changing;
	t->seconds += res.seconds;
	int rc = EXIT_OK;
	if (err) {
		rc = cli_fail(ctx, err);
	} else {
		char a[16];
		if (res.sent_files)
			cli_info("collected '%s' to '%s': %llu sent (%s), %llu unchanged, %.2f s",
			         src, res.dest, (unsigned long long)res.sent_files,
			         stg_format_size(res.sent_bytes, a, sizeof a),
			         (unsigned long long)res.unchanged, res.seconds);
		else if (g_opts.verbose)
			cli_info("'%s' unchanged since the last collect to '%s'", src, res.dest);
	}
	stg_collect_result_free(&res);
	t->status = rc;
	return rc;
}

void cli_collect_json(const char *src, const char *dest, const collect_totals *t)
{
	printf("{\"src\":");
	json_str(stdout, src);
	printf(",\"dest\":");
	json_str(stdout, dest);
	printf(",\"rounds\":%u,\"files\":%llu,\"sent_files\":%llu,\"sent_bytes\":%llu,"
	       "\"unchanged\":%llu,\"retries\":%llu,\"failed\":%llu,\"changing\":%llu,"
	       "\"seconds\":%.3f,"
	       "\"status\":%d}\n",
	       t->rounds, (unsigned long long)t->files, (unsigned long long)t->sent_files,
	       (unsigned long long)t->sent_bytes, (unsigned long long)t->unchanged,
	       (unsigned long long)t->retries, (unsigned long long)t->failed,
	       (unsigned long long)t->changing, t->seconds, t->status);
}

/* --kept: each kept result, collected to its DEST (or not) */
typedef struct kept_out {
	stg_ctx *ctx;
	int json, first;
	unsigned done, left;
} kept_out;

static void on_kept(void *arg, const stg_kept *k, stg_err err, const stg_collect_result *res)
{
	kept_out *o = arg;
	char a[16];
	if (err)
		o->left++;
	else
		o->done++;
	if (o->json) {
		printf("%s{\"kept\":", o->first ? "" : ",");
		json_str(stdout, k->path);
		printf(",\"dest\":");
		json_str(stdout, k->dest);
		printf(",\"sent_files\":%llu,\"sent_bytes\":%llu,\"status\":%d}",
		       (unsigned long long)res->sent_files, (unsigned long long)res->sent_bytes,
		       err ? stg_exit_status(err) : 0);
		o->first = 0;
	} else if (err) {
		cli_error("'%s' not collected to '%s': %s (kept; try again later)", k->path,
		          k->dest, stg_errmsg(o->ctx));
	} else {
		cli_info("collected kept results '%s' to '%s': %llu sent (%s); removed from kept/",
		         k->path, k->dest, (unsigned long long)res->sent_files,
		         stg_format_size(res->sent_bytes, a, sizeof a));
	}
}

static int collect_kept(stg_ctx *ctx, stg_cache *cache, const stg_collect_opts *co, int json)
{
	kept_out o = {.ctx = ctx, .json = json, .first = 1};
	if (json)
		printf("{\"kept\":[");
	stg_err err = stg_collect_kept(ctx, cache, co, on_kept, &o);
	if (json)
		printf("],\"collected\":%u,\"left\":%u}\n", o.done, o.left);
	if (!json && !o.done && !o.left)
		cli_info("no kept results under '%s'", stg_cache_root(cache));
	return err ? stg_exit_status(err) : EXIT_OK;
}

/* --node-ready: the lead's stager says "now" on stdin (collect now), and
 * closes it to stop us (collect once more and end). */
static bool listen_stdin, stdin_closed;

static void wait_stdin(double left)
{
	struct pollfd p = {.fd = 0, .events = POLLIN};
	int ms = left > 3600 ? 3600 * 1000 : (int)(left * 1000) + 1;
	if (poll(&p, 1, ms) <= 0)
		return;
	char buf[256];
	ssize_t n = read(0, buf, sizeof buf);
	if (n > 0 && memmem(buf, (size_t)n, "now", 3))
		now_signals++;
	else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
		stdin_closed = true; /* not a signal: a later one is the first */
}

/* Collect every interval seconds until a signal; then once more. */
static int collect_every(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                         const stg_collect_opts *o, uint64_t interval, collect_totals *t)
{
	int rc = EXIT_OK;
	while (!stop_signals && !stdin_closed) {
		stg_io_idle(1);
		double t0 = cli_now();
		now_signals = 0;
		rc = cli_collect_once(ctx, cache, src, dest, o, t);
		if (rc == EXIT_USAGE || rc == EXIT_SOURCE)
			return rc; /* will not get better */
		/* sleep until the next round (signals cut it short) */
		for (double left; (left = t0 + (double)interval - cli_now()) > 0 && !stop_signals &&
		                  !stdin_closed && !now_signals;) {
			if (listen_stdin) {
				wait_stdin(left);
				continue;
			}
			struct timespec ts = {(time_t)left,
			                      (long)((left - (double)(time_t)left) * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
	/* the last collect: at normal priority, it is what the job keeps, and
	 * Slurm's SIGKILL follows its SIGTERM (KillWait, 30 s by default): a
	 * shared-FS slot is waited for 10 s at most */
	stg_io_idle(0);
	if (g_opts.verbose)
		cli_info("stopping: collecting one last time");
	stg_collect_opts last = *o;
	last.slot_wait_max = 10;
	rc = cli_collect_once(ctx, cache, src, dest, &last, t);
	every_ctx = NULL;
	return rc;
}

int cmd_collect(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"pack", no_argument, NULL, OPT_PACK},
	        {"every", required_argument, NULL, OPT_EVERY},
	        {"level", required_argument, NULL, OPT_LEVEL},
	        {"json", no_argument, NULL, OPT_JSON},
	        {"kept", no_argument, NULL, OPT_KEPT},
	        /* run --all-nodes: make SRC, say so, collect until stopped */
	        {"node-ready", no_argument, NULL, OPT_NODE_READY},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	stg_collect_opts co;
	stg_collect_opts_init(&co);
	int json = 0, c, rc, node_ready = 0, kept = 0;
	uint64_t every = 0;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case OPT_PACK: co.pack = 1; break;
		case OPT_JSON: json = 1; break;
		case OPT_NODE_READY: node_ready = 1; break;
		case OPT_KEPT: kept = 1; break;
		case OPT_EVERY:
			if (stg_parse_duration(optarg, &every) || every == 0)
				return cli_usage("--every: '%s' is not a time interval (e.g. 10m)",
				                 optarg);
			break;
		case OPT_LEVEL:
			if (cli_parse_level(optarg, &co.level))
				return cli_usage("--level: '%s' is not a level from 1 to 19",
				                 optarg);
			break;
		default: return cli_usage("unexpected option");
		}
	}
	if (kept) {
		if (argc != optind || every || node_ready)
			return cli_usage(
			        "--kept takes no SRC, DEST or --every: it sends every kept "
			        "result to the DEST it was meant for");
		stg_ctx *ctx = cli_ctx();
		stg_config *cfg = cli_config(ctx);
		stg_cache *cache = cli_cache(ctx, cfg, &rc);
		if (cache)
			rc = collect_kept(ctx, cache, &co, json);
		stg_cache_close(cache);
		stg_config_free(cfg);
		cli_ctx_done(ctx);
		return rc;
	}
	if (co.level && !co.pack)
		return cli_usage("--level sets the compression of --pack: a plain collect "
		                 "copies files as they are");
	if (argc - optind != 2)
		return cli_usage(argc - optind < 2
		                         ? "what to collect, and where? stager collect SRC "
		                           "DEST"
		                         : "too many arguments");
	const char *src = argv[optind];
	char *dest = NULL;
	{
		stg_ctx *pctx = stg_ctx_new();
		stg_err perr =
		        pctx ? stg_expand_pattern(pctx, argv[optind + 1], &dest) : STG_ENOMEM;
		if (perr) {
			rc = perr == STG_EUSAGE ? cli_usage("DEST %s", stg_errmsg(pctx))
			                        : cli_fail(pctx, perr);
			stg_ctx_free(pctx);
			return rc;
		}
		stg_ctx_free(pctx);
	}
	if (node_ready) {
		static char who[128];
		snprintf(who, sizeof who, "collect on %s", cli_node_name());
		g_cmd = who;
		if (!every)
			every = UINT32_MAX; /* only when asked or stopped */
		listen_stdin = true;
	}
	stg_ctx *ctx = cli_ctx();
	if (every) {
		/* at once: a stop that comes early must still end in a collect */
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_stop;
		sigemptyset(&sa.sa_mask);
		every_ctx = ctx;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sa.sa_handler = on_now;
		sigaction(SIGUSR1, &sa, NULL);
		sigaction(SIGUSR2, &sa, NULL);
	}
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	collect_totals t = {0};
	if (cache && node_ready) {
		if (cli_mkdirs(src)) {
			cli_error("cannot create '%s': %s", src, strerror(errno));
			rc = EXIT_IO;
			goto out;
		}
		printf("stager-node ready %s\n", cli_node_name());
		fflush(stdout);
	}
	if (cache) {
		rc = every ? collect_every(ctx, cache, src, dest, &co, every, &t)
		           : cli_collect_once(ctx, cache, src, dest, &co, &t);
		if (json)
			cli_collect_json(src, dest, &t);
	}
out:
	stg_cache_close(cache);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	free(dest);
	return rc;
}
