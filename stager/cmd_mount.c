/*
 * cmd_mount.c - stager mount PACK... MOUNTPOINT [--foreground] [--cache] [--cache-size SIZE]
 *               stager umount MOUNTPOINT
 *               stager env ENV_DIR... [--foreground] [--all-nodes]
 *
 * --node-ready (not in --help) is the task each other node of `env
 * --all-nodes` runs: it serves in the foreground and says "stager-node
 * ready NODE" on stdout once it does (or "stager-node failed NODE WHY").
 *
 * In the background (the default), a process of its own mounts and serves
 * (stg_mount_spawn); `stager mount` returns when the tree can be read, with
 * the error's exit status if it cannot.  --foreground serves here, until
 * unmounted or SIGTERM, SIGINT or SIGHUP.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

enum { OPT_FOREGROUND = OPT_FIRST_LOCAL, OPT_CACHE_SIZE, OPT_CACHE, OPT_ALL_NODES, OPT_NODE_READY };

struct mounted {
	const char *pack, *mp;
	size_t n; /* packs */
};

/* "'PACK'", or "'PACK' and N more packs" */
static void say_mounted(void *arg)
{
	const struct mounted *w = arg;
	if (w->n == 1)
		cli_info("mounted '%s' at '%s'; serving until it is unmounted (`stager umount %s`)",
		         w->pack, w->mp, w->mp);
	else
		cli_info("mounted '%s' and %zu more packs at '%s'; serving until it is unmounted "
		         "(`stager umount %s`)",
		         w->pack, w->n - 1, w->mp, w->mp);
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
	if (argc - optind < 2)
		return cli_usage("stager mount PACK... MOUNTPOINT");
	size_t n = (size_t)(argc - optind - 1);
	const char *const *packs = (const char *const *)argv + optind;
	const char *mp = argv[argc - 1];
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (!cache)
		goto out;
	if (!foreground) {
		int pid;
		stg_err err = stg_mount_spawn(ctx, cache, packs, n, mp, &mo, 0, &pid, NULL);
		rc = err ? cli_fail(ctx, err) : EXIT_OK;
		if (!err && n == 1)
			cli_info("mounted '%s' at '%s' (process %d; `stager umount %s` ends it)",
			         packs[0], mp, pid, mp);
		else if (!err)
			cli_info("mounted '%s' and %zu more packs at '%s' (process %d; `stager "
			         "umount %s` ends it)",
			         packs[0], n - 1, mp, pid, mp);
		goto out;
	}
	struct mounted w = {packs[0], mp, n};
	stg_err err = stg_mount_foreground(ctx, cache, packs, n, mp, &mo, say_mounted, &w);
	rc = err ? cli_fail(ctx, err) : EXIT_OK;
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

/* "'ENV' served from this node" */
static void say_served(void *arg)
{
	cli_info("'%s' served from this node; until it is unmounted (`stager umount %s`)",
	         (const char *)arg, (const char *)arg);
}

/* --node-ready: the line env --all-nodes waits for */
static void say_node_ready(void *arg)
{
	(void)arg;
	char me[256];
	printf("stager-node ready %s\n", stg_node_name(me, sizeof me));
	fflush(stdout);
}

int cmd_env(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"foreground", no_argument, NULL, OPT_FOREGROUND},
	        {"all-nodes", no_argument, NULL, OPT_ALL_NODES},
	        {"node-ready", no_argument, NULL, OPT_NODE_READY},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	bool foreground = false, all_nodes = false, node_ready = false;
	int c, rc;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		if (c == OPT_FOREGROUND)
			foreground = true;
		else if (c == OPT_ALL_NODES)
			all_nodes = true;
		else if (c == OPT_NODE_READY)
			node_ready = true;
		else
			return cli_usage("unexpected option");
	}
	if (argc - optind < 1)
		return cli_usage("stager env ENV_DIR...");
	if (foreground && argc - optind > 1)
		return cli_usage("--foreground serves one env: give one ENV_DIR");
	if (foreground && all_nodes)
		return cli_usage("--all-nodes serves in the background: not with --foreground");
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_cache *cache = cli_cache(ctx, cfg, &rc);
	if (!cache)
		goto out;
	rc = EXIT_OK;
	const char *job = getenv("SLURM_JOB_ID");
	for (int i = optind; i < argc && rc == EXIT_OK; i++) {
		stg_err err;
		if (foreground) {
			err = stg_env_foreground(ctx, cache, argv[i],
			                         node_ready ? say_node_ready : say_served, argv[i]);
			if (err && node_ready) {
				char me[256];
				printf("stager-node failed %s %s\n", stg_node_name(me, sizeof me),
				       stg_errmsg(ctx));
				fflush(stdout);
			}
		} else {
			int pid;
			stg_fanout_opts fo;
			cli_fanout_opts(&fo);
			err = all_nodes ? stg_env_all_nodes(ctx, cache, argv[i], &fo, &pid)
			                : stg_env_spawn(ctx, cache, argv[i], 0, &pid, NULL);
			if (!err && all_nodes && stg_job_nodes() > 1)
				cli_info("'%s' served on the job's %u nodes until the job ends "
				         "(here by "
				         "process %d)",
				         argv[i], stg_job_nodes(), pid);
			else if (!err && job && *job)
				cli_info(
				        "'%s' served from this node until job %s ends (process %d)",
				        argv[i], job, pid);
			else if (!err)
				cli_info("'%s' served from this node until `stager umount %s` "
				         "(process %d)",
				         argv[i], argv[i], pid);
		}
		if (err == STG_ENOTSUP && !foreground)
			/* no FUSE here: the job goes on with the env as it is */
			cli_error("%s: '%s' is used from the shared filesystem as it is (slower: "
			          "every import asks it)",
			          stg_errmsg(ctx), argv[i]);
		else if (err)
			rc = cli_fail(ctx, err);
	}
out:
	stg_cache_close(cache);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return rc;
}
