/*
 * main.c - stager's dispatch: the command named (or one close to it),
 * the global options before it, usage.
 *
 * Every command of DESIGN.md is in the table (commands.c) from the start,
 * with its help; a command that is not built yet says so and exits 1
 * rather than pretend.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int cmd_not_built(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			cli_print_help(cli_find(g_cmd));
			return EXIT_OK;
		}
	}
	cli_error("not built yet in this version of stager (%s); see 'stager --help' "
	          "for what is",
	          STG_VERSION_STRING);
	return EXIT_USAGE;
}

static void usage(FILE *f)
{
	fputs("usage: stager [GLOBAL OPTIONS] COMMAND [ARGS]\n"
	      "\n"
	      "Move training data between a cluster's shared filesystem and a compute\n"
	      "node's local disk: pack, stage, collect, clean.\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (const cli_cmd *c = cli_commands; c->name; c++)
		fprintf(f, "  %-9s %s%s\n", c->name, c->summary,
		        c->run == cmd_not_built ? " (not built yet)" : "");
	fputs("\n"
	      "Global options: --quiet, --verbose, --progress=auto|bar|lines|none,\n"
	      "  --bwlimit RATE, --scratch DIR, --config FILE, --help, --version\n"
	      "\n"
	      "Exit status: 0 ok, 1 usage, 2 source missing or unreadable, 3 not enough\n"
	      "space, 4 integrity failure, 5 interrupted, 6 remote failure, 7 other I/O.\n"
	      "\n"
	      "'stager COMMAND --help' describes a command; `man stager` has it all.\n",
	      f);
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 32 || lb > 32)
		return 99;
	size_t d[33][33];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			d[i][j] = c;
		}
	return d[la][lb];
}

/* A global option before the command failed, its message told: a
 * command asked for --json still gets its object (cli_finish). */
static int global_failed(int rc, int argc, char **argv, int from)
{
	for (int j = from; rc != EXIT_OK && j < argc; j++) {
		const cli_cmd *cmd = argv[j][0] == '-' ? NULL : cli_find(argv[j]);
		if (cmd) {
			cli_begin(cmd, argc - j, argv + j);
			return cli_finish(rc);
		}
	}
	return rc;
}

int main(int argc, char **argv)
{
	/* deep trees are walked with a descriptor per level */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int i = 1;
	/* global options before the command */
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return EXIT_OK;
		}
		if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("stager %s (libstage %s)\n", STG_VERSION_CLI, stg_version());
			return EXIT_OK;
		}
		static const struct option lo[] = {CLI_GLOBAL_OPTIONS, {NULL, 0, NULL, 0}};
		const char *val = NULL;
		int code = !strcmp(a, "-q") ? 'q' : !strcmp(a, "-v") ? 'v' : -1;
		for (const struct option *o = lo; code == -1 && o->name; o++) {
			size_t n = strlen(o->name);
			if (strncmp(a + 2, o->name, n) || a[0] != '-' || a[1] != '-')
				continue;
			if (a[2 + n] == '\0') {
				code = o->val;
				if (o->has_arg) {
					if (i + 1 >= argc) {
						g_cmd = NULL;
						return cli_usage("%s needs a value", a);
					}
					val = argv[++i];
				}
			} else if (a[2 + n] == '=' && o->has_arg) {
				code = o->val;
				val = a + 3 + n;
			}
			if (code != -1)
				break;
		}
		g_cmd = NULL;
		if (code == -1 || code == OPT_HELP)
			return global_failed(cli_usage("unknown option '%s'", a), argc, argv,
			                     i + 1);
		int rc = cli_global_option(code, val);
		if (rc != -2)
			return global_failed(rc, argc, argv, i + 1);
	}
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *name = argv[i];
	if (!strcmp(name, "help")) {
		if (i + 1 < argc && cli_find(argv[i + 1])) {
			g_cmd = argv[i + 1];
			cli_print_help(cli_find(argv[i + 1]));
		} else {
			usage(stdout);
		}
		return EXIT_OK;
	}
	const cli_cmd *cmd = cli_find(name);
	if (!cmd) {
		fprintf(stderr, "stager: '%s' is not a stager command.", name);
		const cli_cmd *best = NULL;
		size_t bd = 3;
		for (const cli_cmd *c = cli_commands; c->name; c++) {
			size_t d = edit_distance(name, c->name);
			if (d < bd) {
				bd = d;
				best = c;
			}
		}
		if (best)
			fprintf(stderr, " Did you mean '%s'?", best->name);
		fprintf(stderr, "\nsee 'stager --help'\n");
		return EXIT_USAGE;
	}
	g_cmd = cmd->name;
	/* getopt names argv[0] in its messages */
	char prog[64];
	snprintf(prog, sizeof prog, "stager: %s", cmd->name);
	argv[i] = prog;
	cli_begin(cmd, argc - i, argv + i);
	return cli_finish(cmd->run(argc - i, argv + i));
}
