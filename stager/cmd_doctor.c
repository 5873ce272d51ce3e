/*
 * cmd_doctor.c - stager doctor [PATH]... [--json]: is this node set up
 * right for stager, and what to fix.
 *
 * stg_doctor makes the checks; each is printed as it comes: ok, warn or
 * FAIL, what it found, and for the last two what to do.  Exit 0 if
 * nothing failed, 7 otherwise.
 */
#include "cli.h"

enum { OPT_JSON = OPT_FIRST_LOCAL };

typedef struct report {
	bool json;
	unsigned n, failed, warned;
} report;

static void print_check(void *arg, const stg_check *c)
{
	report *r = arg;
	static const char *const word[] = {"ok", "warn", "FAIL"}, *const jword[] = {"ok", "warn",
	                                                                            "fail"};
	if (r->json) {
		printf("%s{\"check\":", r->n ? "," : "");
		json_str(stdout, c->name);
		printf(",\"status\":\"%s\",\"found\":", jword[c->level]);
		json_str(stdout, c->found);
		printf(",\"fix\":");
		json_str(stdout, c->level == STG_CHECK_OK || !c->fix ? "" : c->fix);
		printf("}");
	} else {
		printf("%-5s %-22s %s\n", word[c->level], c->name, c->found);
		if (c->level != STG_CHECK_OK && c->fix)
			printf("      %-22s -> %s\n", "", c->fix);
	}
	r->n++;
	r->failed += c->level == STG_CHECK_FAIL;
	r->warned += c->level == STG_CHECK_WARN;
}

int cmd_doctor(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"json", no_argument, NULL, OPT_JSON},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	report r = {0};
	int c, rc;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		if (c == OPT_JSON)
			r.json = true;
		else
			return cli_usage("unexpected option");
	}
	if ((rc = cli_check_globals()))
		return rc;
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	if (r.json)
		printf("{\"checks\":[");
	stg_doctor(ctx, cfg, (const char *const *)argv + optind, (size_t)(argc - optind),
	           print_check, &r);
	if (r.json)
		printf("],\"failed\":%u,\"warnings\":%u}\n", r.failed, r.warned);
	else
		printf("\n%u checks: %u failed, %u warnings\n", r.n, r.failed, r.warned);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return r.failed ? EXIT_IO : EXIT_OK;
}
