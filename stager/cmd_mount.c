/*
 * cmd_mount.c - stager mount PACK MOUNTPOINT [--foreground] [--cache] [--cache-size SIZE]
 *               stager umount MOUNTPOINT
 *
 * In the background (the default), a process of its own mounts and serves
 * (stg_mount_spawn); `stager mount` returns when the tree can be read, with
 * the error's exit status if it cannot.  --foreground serves here.
 */
#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_FOREGROUND = OPT_FIRST_LOCAL, OPT_CACHE_SIZE, OPT_CACHE };

static stg_mount *volatile serving;

static void on_stop(int sig)
{
	(void)sig;
	if (serving)
		stg_mount_stop(serving);
}

/* Serve until unmounted or told to stop (SIGTERM, SIGINT, SIGHUP). */
static int serve(stg_ctx *ctx, stg_mount *m)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop; /* no SA_RESTART: a blocked read returns */
	sigemptyset(&sa.sa_mask);
	serving = m;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	stg_err err = stg_mount_serve(m);
	serving = NULL;
	stg_mount_close(m);
	return err ? cli_fail(ctx, err) : EXIT_OK;
}

int cmd_mount(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"foreground", no_argument, NULL, OPT_FOREGROUND},
	        {"cache-size", required_argument, NULL, OPT_CACHE_SIZE},
	        {"cache", no_argument, NULL, OPT_CACHE},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	bool foreground = false;
	stg_mount_opts mo;
	stg_mount_opts_init(&mo);
	int c, rc;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case OPT_FOREGROUND: foreground = true; break;
		case OPT_CACHE: mo.keep_frames = 1; break;
		case OPT_CACHE_SIZE:
			if (stg_parse_size(optarg, &mo.cache_bytes) || !mo.cache_bytes)
				return cli_usage("--cache-size: '%s' is not a size (e.g. 512M)",
				                 optarg);
			break;
		default: return cli_usage("unexpected option");
		}
	}
	if (argc - optind != 2)
		return cli_usage(argc - optind < 2 ? "stager mount PACK MOUNTPOINT"
		                                   : "too many arguments");
	const char *pack = argv[optind], *mp = argv[optind + 1];
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (!cache)
		goto out;
	if (!foreground) {
		int pid;
		stg_err err = stg_mount_spawn(ctx, cache, pack, mp, &mo, 0, &pid, NULL);
		rc = err ? cli_fail(ctx, err) : EXIT_OK;
		if (!err)
			cli_info("mounted '%s' at '%s' (process %d; `stager umount %s` ends it)",
			         pack, mp, pid, mp);
		goto out;
	}
	stg_mount *m;
	stg_err err = stg_mount_open(ctx, cache, pack, mp, &mo, &m);
	if (err) {
		rc = cli_fail(ctx, err);
		goto out;
	}
	cli_info("mounted '%s' at '%s'; serving until it is unmounted (`stager umount %s`)", pack,
	         mp, mp);
	rc = serve(ctx, m);
out:
	stg_cache_close(cache);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return rc;
}

int cmd_umount(int argc, char **argv)
{
	int rc = cli_global_options_only(argc, argv);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_usage(argc - optind < 1 ? "stager umount MOUNTPOINT"
		                                   : "too many arguments");
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (cache) {
		stg_err err = stg_umount(ctx, cache, argv[optind]);
		rc = err ? cli_fail(ctx, err) : EXIT_OK;
	}
	stg_cache_close(cache);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return rc;
}
