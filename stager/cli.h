/*
 * cli.h - what the stager commands share: global options, messages,
 * progress display, JSON output, and the command table's shape.
 *
 * The tool holds no staging logic: each cmd_<verb>.c parses its options,
 * calls libstage, prints, and maps the result to an exit status.
 */
#ifndef STAGER_CLI_H
#define STAGER_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "libstage.h"

enum {
	EXIT_OK = 0,
	EXIT_USAGE = 1,
	EXIT_SOURCE = 2,
	EXIT_SPACE = 3,
	EXIT_INTEGRITY = 4,
	EXIT_INTERRUPTED = 5,
	EXIT_REMOTE = 6,
	EXIT_IO = 7,
};

typedef enum { PROGRESS_AUTO, PROGRESS_BAR, PROGRESS_LINES, PROGRESS_NONE } progress_mode;

/* Global options, valid before or after the command name. */
typedef struct cli_opts {
	int quiet;
	int verbose;
	progress_mode progress;
	const char *scratch;
	const char *config;
	const char *bwlimit;
} cli_opts;

extern cli_opts g_opts;
extern const char *g_cmd; /* the running command's name, for messages */

typedef struct cli_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	const char *help; /* full text for `stager CMD --help` */
} cli_cmd;

extern const cli_cmd cli_commands[];

/* getopt_long codes of the global options */
enum {
	OPT_QUIET = 1000,
	OPT_VERBOSE,
	OPT_PROGRESS,
	OPT_BWLIMIT,
	OPT_SCRATCH,
	OPT_CONFIG,
	OPT_HELP,
	OPT_FIRST_LOCAL, /* commands number their own long-only options from here */
};

#define CLI_GLOBAL_OPTIONS                                                                         \
	{"quiet", no_argument, NULL, OPT_QUIET}, {"verbose", no_argument, NULL, OPT_VERBOSE},      \
	        {"progress", required_argument, NULL, OPT_PROGRESS},                               \
	        {"bwlimit", required_argument, NULL, OPT_BWLIMIT},                                 \
	        {"scratch", required_argument, NULL, OPT_SCRATCH},                                 \
	        {"config", required_argument, NULL, OPT_CONFIG},                                   \
	{                                                                                          \
		"help", no_argument, NULL, OPT_HELP                                                \
	}

/* Handle a global option (or -h/--help); returns -1 if c is not one,
 * else an exit status to return now (or -2 to go on). */
int cli_global_option(int c, const char *arg);
/* Parse a command line that takes only the global options: -1 when they
 * parsed (optind at the first operand), else an exit status to return. */
int cli_global_options_only(int argc, char **argv);
/* Check the global options make sense for a command that does not go
 * through the shared-FS limits; an exit status or 0. */
int cli_check_globals(void);

/* Before a command runs (main): its name and arguments; stdout becomes
 * the tool's own stream (a progress bar is ended before a result goes
 * out after it; what goes out is counted). */
void cli_begin(const cli_cmd *cmd, int argc, char **argv);
/* After it, with its exit status, which it returns: a command that was
 * asked for --json and failed without printing anything prints
 * {"ok": false, "command", "exit", "error"} (its last error message).
 * Also before exit() on a fatal error. */
int cli_finish(int status);

/* "stager: CMD: message" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The message of a failed libstage call; returns its exit status. */
int cli_fail(stg_ctx *ctx, stg_err err);
/* A usage error: message, hint, exit status 1. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A context with the log and progress callbacks set and SIGINT, SIGTERM
 * and SIGHUP wired to stg_cancel(). */
stg_ctx *cli_ctx(void);
void cli_ctx_done(stg_ctx *ctx);
void cli_progress_end(void);

/* Settings from the site file (/etc/stager.conf, or $STAGER_SITE_CONFIG),
 * the user file (--config, or ~/.config/stager/config), STAGER_* variables
 * and the global flags; exits with a message on a bad setting. */
stg_config *cli_config(stg_ctx *ctx);
/* The cache under the effective scratch root; NULL after a message. */
stg_cache *cli_cache(stg_ctx *ctx, stg_config *cfg, int *status);

int cli_parse_threads(const char *s, int *out);
/* A zstd level, 1 to 19; 0, or -1 if s is not one. */
int cli_parse_level(const char *s, int *out);
void cli_print_help(const cli_cmd *cmd);
const cli_cmd *cli_find(const char *name);

/* A name from a pack (outside input) as a line of text shows it: control
 * bytes and backslashes as \xNN, so that it neither drives the terminal
 * nor spans lines. */
void cli_put_name(FILE *f, const char *name);

/* JSON output on stdout. */
void json_str(FILE *f, const char *s);
/* ,"kept_elsewhere":[...]: the notes of kept results on other nodes, on
 * stdout (cmd_status.c) */
void cli_kept_notes_json(const stg_kept_note *v, size_t n);
void json_hex(FILE *f, const uint8_t *p, size_t n);

/* How stage --all-nodes and run --all-nodes start stager on the other
 * nodes: this program (/proc/self/exe), with the global options in
 * effect. */
void cli_fanout_opts(stg_fanout_opts *fo);

/* The commands. */
int cmd_pack(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_unpack(int argc, char **argv);
int cmd_stage(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_clean(int argc, char **argv);
int cmd_collect(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_where(int argc, char **argv);
int cmd_hint(int argc, char **argv);
int cmd_features(int argc, char **argv);
int cmd_not_built(int argc, char **argv);

#endif
