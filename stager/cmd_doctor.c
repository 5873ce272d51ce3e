/*
 * cmd_doctor.c - stager doctor [PATH]... [--hooks DIR] [--hook-user NAME]
 * [--json], stager doctor --prepare [--json]: is this node set up right
 * for stager, and what to fix.
 *
 * stg_doctor makes the checks, then stg_doctor_hooks those of the Slurm
 * hooks (run as root, else skipped); each is printed as it comes: ok,
 * warn or FAIL, what it found, and for the last two what to do.  A hook
 * that went wrong is followed by what it wrote on stderr; in JSON a
 * hook's check also carries what the hook did.  Exit 0 if nothing failed,
 * 7 otherwise.
 */
#include "cli.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_JSON = OPT_FIRST_LOCAL, OPT_HOOKS, OPT_HOOK_USER, OPT_PREPARE };

#define HOOK_LINES_SHOWN 20 /* of a hook's stderr, in text */

typedef struct report {
	bool json, quiet; /* quiet: the ok checks unsaid */
	unsigned n, failed, warned;
} report;

/* The check; in JSON, its object left open for more fields. */
static void print_open(report *r, const stg_check *c)
{
	if (r->quiet && c->level == STG_CHECK_OK)
		return;
	static const char *const word[] = {"ok", "warn", "FAIL"}, *const jword[] = {"ok", "warn",
	                                                                            "fail"};
	if (r->json) {
		printf("%s{\"check\":", r->n ? "," : "");
		json_str(stdout, c->name);
		printf(",\"status\":\"%s\",\"found\":", jword[c->level]);
		json_str(stdout, c->found);
		printf(",\"fix\":");
		json_str(stdout, c->level == STG_CHECK_OK || !c->fix ? "" : c->fix);
	} else {
		printf("%-5s %-22s %s\n", word[c->level], c->name, c->found);
		if (c->level != STG_CHECK_OK && c->fix)
			printf("      %-22s -> %s\n", "", c->fix);
	}
	r->n++;
	r->failed += c->level == STG_CHECK_FAIL;
	r->warned += c->level == STG_CHECK_WARN;
}

static void print_check(void *arg, const stg_check *c)
{
	print_open(arg, c);
	if (((report *)arg)->json && !(((report *)arg)->quiet && c->level == STG_CHECK_OK))
		printf("}");
}

static void json_lines(const char *key, const char *const *v, size_t n)
{
	printf(",\"%s\":[", key);
	for (size_t i = 0; i < n; i++) {
		printf("%s", i ? "," : "");
		json_str(stdout, v[i]);
	}
	printf("]");
}

/* What a hook did, as the fields of its check's JSON object. */
static void json_hook(const stg_hook_result *h)
{
	if (!h->hook) { /* the job's directory, after the round trip */
		printf(",\"job_dir\":{\"path\":");
		json_str(stdout, h->job_dir);
		printf(",\"left\":%s}", h->job_dir_left ? "true" : "false");
		return;
	}
	printf(",\"hook\":{\"name\":");
	json_str(stdout, h->hook);
	printf(",\"path\":");
	json_str(stdout, h->path);
	printf(",\"ran\":%s", h->ran ? "true" : "false");
	if (!h->ran) {
		printf(",\"mode\":\"%04o\",\"owner\":%ld}", h->mode, h->owner);
		return;
	}
	printf(",\"user\":");
	json_str(stdout, h->user);
	printf(",\"job\":");
	json_str(stdout, h->job);
	if (h->exit_status >= 0)
		printf(",\"exit\":%d", h->exit_status);
	else
		printf(",\"exit\":null");
	printf(",\"signal\":%d,\"timed_out\":%s,\"seconds\":%.3f", h->signal,
	       h->timed_out ? "true" : "false", h->seconds);
	json_lines("stdout", h->out_lines, h->n_out);
	json_lines("stderr", h->err_lines, h->n_err);
	if (h->exports) {
		printf(",\"exports\":{");
		for (size_t i = 0; i < h->n_exports; i++) {
			const char *eq = strchr(h->exports[i], '=');
			char *name = strndup(h->exports[i], (size_t)(eq - h->exports[i]));
			printf("%s", i ? "," : "");
			json_str(stdout, name ? name : "");
			printf(":");
			json_str(stdout, eq + 1);
			free(name);
		}
		printf("}");
	}
	if (h->job_dir) {
		printf(",\"job_dir\":");
		json_str(stdout, h->job_dir);
	}
	printf("}");
}

/* A check of the Slurm hooks, and what the hook did (h may be NULL). */
static void print_hook_check(void *arg, const stg_check *c, const stg_hook_result *h)
{
	report *r = arg;
	print_open(r, c);
	if (r->json) {
		if (h)
			json_hook(h);
		printf("}");
		return;
	}
	/* what a hook said when it went wrong: most often the answer */
	for (size_t i = 0; h && c->level != STG_CHECK_OK && i < h->n_err; i++) {
		if (i == HOOK_LINES_SHOWN) {
			printf("      | (%zu more lines)\n", h->n_err - i);
			break;
		}
		printf("      | %s\n", h->err_lines[i]);
	}
}

int cmd_doctor(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"json", no_argument, NULL, OPT_JSON},
	        {"hooks", required_argument, NULL, OPT_HOOKS},
	        {"hook-user", required_argument, NULL, OPT_HOOK_USER},
	        {"prepare", no_argument, NULL, OPT_PREPARE},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	report r = {0};
	stg_doctor_hooks_opts ho;
	stg_doctor_hooks_opts_init(&ho);
	int c, rc, prepare = 0;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		if (c == OPT_JSON)
			r.json = true;
		else if (c == OPT_HOOKS)
			ho.dir = optarg;
		else if (c == OPT_HOOK_USER)
			ho.user = optarg;
		else if (c == OPT_PREPARE)
			prepare = 1;
		else
			return cli_usage("unexpected option");
	}
	if (ho.user && !getpwnam(ho.user))
		return cli_usage("--hook-user: no user '%s' on this node", ho.user);
	if ((rc = cli_check_globals()))
		return rc;
	if (prepare && (optind < argc || ho.dir || ho.user))
		return cli_usage("--prepare checks the node's shared places only: no PATH, "
		                 "--hooks or --hook-user");
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	if (r.json)
		printf("{\"checks\":[");
	stg_err err = STG_OK;
	if (prepare) {
		/* the prolog's, before every job: only what is wrong, with -q */
		r.quiet = g_opts.quiet;
		stg_doctor_prepare(ctx, cfg, print_check, &r);
	} else {
		stg_doctor(ctx, cfg, (const char *const *)argv + optind, (size_t)(argc - optind),
		           print_check, &r);
		err = stg_doctor_hooks(ctx, &ho, print_hook_check, &r);
	}
	if (r.json)
		printf("],\"failed\":%u,\"warnings\":%u}\n", r.failed, r.warned);
	else if (!r.quiet)
		printf("\n%u checks: %u failed, %u warnings\n", r.n, r.failed, r.warned);
	if (err)
		rc = cli_fail(ctx, err);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return err ? rc : r.failed ? EXIT_IO : EXIT_OK;
}
