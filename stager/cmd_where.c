/*
 * cmd_where.c - data gravity's commands:
 *   stager where PACK... [--json]   the nodes whose cache holds each pack
 *   stager hint PACK...             the sbatch option that prefers them
 *   stager features [--update ...]  the epilog's two halves (as the job's
 *                                   user: list; as root: update the node)
 */
#include "cli.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	OPT_JSON = OPT_FIRST_LOCAL,
	OPT_UPDATE,
	OPT_NODE,
	OPT_USER,
	OPT_STATE_DIR,
	OPT_DRY_RUN,
	OPT_PARTITION
};

/* where and hint: PACK... into w (calloc'ed); an exit status or -1. */
static int where_of(int argc, char **argv, bool *json, stg_where_result **w, size_t *n)
{
	static const struct option lo[] = {
	        {"json", no_argument, NULL, OPT_JSON},
	        {"partition", required_argument, NULL, OPT_PARTITION},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int c, rc;
	/* sbatch's own default: a job goes to $SBATCH_PARTITION when set */
	const char *part = getenv("SBATCH_PARTITION");
	while ((c = getopt_long(argc, argv, "hqvp:", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		if (c == OPT_JSON && json)
			*json = true;
		else if (c == OPT_PARTITION || c == 'p')
			part = optarg;
		else
			return cli_usage("unexpected option");
	}
	if (optind >= argc)
		return cli_usage("which packs? stager %s PACK...", g_cmd);
	if ((rc = cli_check_globals()))
		return rc;
	*n = (size_t)(argc - optind);
	if (!(*w = calloc(*n, sizeof **w))) {
		cli_error("out of memory");
		return EXIT_IO;
	}
	stg_ctx *ctx = cli_ctx();
	stg_err err = stg_where_in(ctx, (const char *const *)argv + optind, *n, part, *w);
	rc = err ? cli_fail(ctx, err) : -1;
	cli_ctx_done(ctx);
	if (err) {
		stg_where_free(*w, *n);
		free(*w);
	}
	return rc;
}

int cmd_where(int argc, char **argv)
{
	bool json = false;
	stg_where_result *w;
	size_t n;
	int rc = where_of(argc, argv, &json, &w, &n);
	if (rc >= 0)
		return rc;
	char **packs = argv + optind;
	if (json)
		printf("{\"packs\":[");
	for (size_t i = 0; i < n; i++) {
		if (json) {
			printf("%s{\"pack\":", i ? "," : "");
			json_str(stdout, packs[i]);
			printf(",\"digest\":");
			json_hex(stdout, w[i].digest, STG_DIGEST_LEN);
			printf(",\"feature\":\"%s\",\"nodes\":[", w[i].feature);
			for (const char *p = w[i].nodes; *p;) {
				const char *e = strchr(p, ',');
				size_t l = e ? (size_t)(e - p) : strlen(p);
				printf("%s\"%.*s\"", p == w[i].nodes ? "" : ",", (int)l, p);
				p += l + (e ? 1 : 0);
			}
			printf("]}");
		} else {
			printf("%s\t%s\n", packs[i], w[i].n_nodes ? w[i].nodes : "-");
		}
	}
	if (json)
		printf("]}\n");
	else if (!g_opts.quiet)
		for (size_t i = 0; i < n; i++)
			if (!w[i].n_nodes) {
				cli_info("'-': no node tells Slurm it caches that pack for you "
				         "(yet: a "
				         "node does when a job that staged it ends, where the site "
				         "set node_features = yes)");
				break;
			}
	stg_where_free(w, n);
	free(w);
	return EXIT_OK;
}

int cmd_hint(int argc, char **argv)
{
	stg_where_result *w;
	size_t n;
	int rc = where_of(argc, argv, NULL, &w, &n);
	if (rc >= 0)
		return rc;
	char out[8192];
	rc = stg_hint(w, n, out, sizeof out) ? EXIT_USAGE : EXIT_OK;
	if (rc)
		cli_error("too many packs for one --prefer");
	else if (*out)
		printf("%s\n", out);
	else
		/* sbatch would take no --prefer anyway; an old hint (one used
		 * after the grace) is what it refuses, with Slurm's "Requested
		 * node configuration is not available" */
		cli_info("nothing printed: no node tells Slurm it caches %s for you "
		         "now; the job runs wherever Slurm puts it (call hint right "
		         "before each sbatch: an older hint's feature may have left)",
		         n == 1 ? "that pack" : "any of those packs");
	stg_where_free(w, n);
	free(w);
	return rc;
}

/* All of standard input, at most max bytes (more: NULL, errno E2BIG). */
static char *read_stdin(size_t max, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	ssize_t r;
	while (b && (r = read(STDIN_FILENO, b + n, cap - n)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(b);
			return NULL;
		}
		n += (size_t)r;
		if (n == cap) {
			char *nb = cap >= max ? NULL : realloc(b, cap * 2);
			if (!nb) {
				free(b);
				errno = cap >= max ? E2BIG : ENOMEM;
				return NULL;
			}
			b = nb;
			cap *= 2;
		}
	}
	*len = n;
	return b;
}

/*
 * Does the user's own file (--config, else the one stg_config_load_standard
 * reads) say node_features = no?  The epilog exports its default/stager
 * into the user's side, and a site that turns data gravity on there
 * (STAGER_NODE_FEATURES=yes) would otherwise win over the user's "no".
 */
static bool own_file_says_no(stg_ctx *ctx)
{
	char path[4096] = "";
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (g_opts.config)
		snprintf(path, sizeof path, "%s", g_opts.config);
	else if (xdg && *xdg == '/')
		snprintf(path, sizeof path, "%s/stager/config", xdg);
	else if (home && *home == '/')
		snprintf(path, sizeof path, "%s/.config/stager/config", home);
	stg_config *own = path[0] ? stg_config_new() : NULL;
	const char *v = NULL, *origin = "default";
	if (own && stg_config_load_file(ctx, own, path, 0) == STG_OK)
		v = stg_config_get(own, "node_features", &origin);
	bool no = v && !strcmp(v, "no") && strcmp(origin, "default");
	stg_config_free(own);
	return no;
}

int cmd_features(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"update", no_argument, NULL, OPT_UPDATE},
	        {"node", required_argument, NULL, OPT_NODE},
	        {"user", required_argument, NULL, OPT_USER},
	        {"state-dir", required_argument, NULL, OPT_STATE_DIR},
	        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	stg_features_update_opts uo = {.state_dir = "/var/lib/stager"};
	const char *user = NULL;
	bool update = false;
	int c, rc;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case OPT_UPDATE: update = true; break;
		case OPT_NODE: uo.node = optarg; break;
		case OPT_USER: user = optarg; break;
		case OPT_STATE_DIR: uo.state_dir = optarg; break;
		case OPT_DRY_RUN: uo.dry_run = 1; break;
		default: return cli_usage("unexpected option");
		}
	}
	if (optind < argc)
		return cli_usage("stager features takes no operands");
	if (!update && (uo.node || user))
		return cli_usage("--node and --user go with --update");
	if (update && (!uo.node || !user))
		return cli_usage("stager features --update --node NODE --user USER < LIST");
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_err err = STG_OK;
	const char *on = stg_config_get(cfg, "node_features", NULL);
	if (!update && ((on && strcmp(on, "yes")) || own_file_says_no(ctx))) {
		/* off: not even the cache opened; a whole list of nothing */
		fflush(stdout);
		err = stg_features_list_none(ctx, STDOUT_FILENO);
	} else if (!update) {
		stg_cache *cache = cli_cache(ctx, cfg, &rc);
		if (!cache) {
			cli_ctx_done(ctx);
			stg_config_free(cfg);
			return rc;
		}
		fflush(stdout);
		err = stg_features_list(ctx, cfg, cache, STDOUT_FILENO);
		stg_cache_close(cache);
	} else {
		struct passwd *pw = getpwnam(user);
		size_t len = 0;
		char *list = NULL;
		if (!pw)
			err = STG_EUSAGE, cli_error("no such user: '%s'", user);
		else if (!(list = read_stdin(64u << 10, &len)))
			err = STG_ECORRUPT,
			cli_error("cannot read the list on standard input: %s", strerror(errno));
		if (!err) {
			stg_features_update_result res;
			uo.uid = pw->pw_uid;
			err = stg_features_update(ctx, cfg, &uo, list, len, &res);
			if (!err && res.changed && !g_opts.quiet)
				cli_info("%s: %zu node features of stager's (%zu added, %zu "
				         "removed)%s",
				         uo.node, res.advertised, res.added, res.removed,
				         uo.dry_run ? " (dry run: Slurm not told)" : "");
		}
		free(list);
	}
	rc = err && *stg_errmsg(ctx) ? cli_fail(ctx, err) : stg_exit_status(err);
	cli_ctx_done(ctx);
	stg_config_free(cfg);
	return rc;
}
