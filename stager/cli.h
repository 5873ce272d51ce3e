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
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

#include "stage.h"

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
/* Check the global options make sense for a command that does not go
 * through the shared-FS limits; an exit status or 0. */
int cli_check_globals(void);

/* "stager: CMD: message" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The message of a failed libstage call; returns its exit status. */
int cli_fail(stg_ctx *ctx, stg_err err);
/* A usage error: message, hint, exit status 1. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A context with the log and progress callbacks set and SIGINT/SIGTERM
 * wired to stg_cancel() (and to cli_interrupted). */
extern volatile sig_atomic_t cli_interrupted;
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
/* mkdir -p (mode 0700); 0 or -1 with errno. */
int cli_mkdirs(const char *path);
/* A zstd level, 1 to 19; 0, or -1 if s is not one. */
int cli_parse_level(const char *s, int *out);
/* Seconds on the monotonic clock. */
double cli_now(void);
void cli_print_help(const cli_cmd *cmd);
const cli_cmd *cli_find(const char *name);

/* JSON output on stdout. */
void json_str(FILE *f, const char *s);
void json_hex(FILE *f, const uint8_t *p, size_t n);

/* One collect, reported; the totals accumulate over calls. */
typedef struct collect_totals {
	unsigned rounds;
	uint64_t files, sent_files, sent_bytes, unchanged, retries, failed, changing;
	double seconds;
	int status; /* of the last round */
} collect_totals;

int cli_collect_once(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                     const stg_collect_opts *o, collect_totals *t);
void cli_collect_json(const char *src, const char *dest, const collect_totals *t);

/* stage --all-nodes (allnodes.c): -1 if the allocation has one node
 * (stage as usual), else an exit status.  fwd: the options and arguments
 * the other nodes' stagers are given.  The staged path (the same on every
 * node) is printed, or put in *path (malloc'ed) if path is not NULL. */
int cli_stage_all_nodes(stg_ctx *ctx, stg_cache *cache, const char *src, stg_stage_opts *so,
                        const char *const *fwd, int json, char **path);
int cli_node_probe(stg_ctx *ctx, stg_cache *cache, const char *src, stg_stage_opts *so,
                   const char *digest_hex);
int cli_node_receive(stg_ctx *ctx, stg_cache *cache, const char *src, stg_stage_opts *so,
                     const char *copy, const char *digest_hex);
/* This node's name: $SLURMD_NODENAME, else the short host name. */
const char *cli_node_name(void);
/* The nodes of the Slurm job we are in (0: not in one). */
unsigned cli_job_nodes(void);
/* The global options in effect, as arguments for another stager, into v
 * (room for 8); their number. */
size_t cli_global_args(const char **v);
/* run --all-nodes: a step of one `stager collect --node-ready` per node
 * collecting src to dest (every seconds apart, when told, and when
 * stopped); returns once every node's collector has made src, or -1 after
 * a message.  *in and *out: the step's stdin and stdout.
 * cli_node_collectors_now has them collect now; cli_node_collectors_end
 * stops them (each collects one last time) and returns srun's status. */
pid_t cli_node_collectors(const char *src, const char *dest, const stg_collect_opts *co,
                          uint64_t every, int *in, int *out);
void cli_node_collectors_now(int in);
int cli_node_collectors_end(pid_t pid, int in, int out);

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
int cmd_not_built(int argc, char **argv);

/* run's time budget inside a Slurm job (budget.c) */
typedef struct run_budget {
	stg_job_clock clock;
	bool active;    /* a known time limit, and something to collect */
	uint64_t bytes; /* sent by measured collects ... */
	double secs;    /* ... in this many seconds */
	double since;   /* the start of the last collect that ended (wall) */
	double checked; /* the last look at what is pending (cli_now) */
	bool warned;
	bool due; /* collects are due: the end is near */
} run_budget;
/* The wall clock (the job's end and files' mtimes are in its time). */
double budget_wall(void);
/* Learn the job's clock; warn if run was started without exec. */
void budget_start(run_budget *b, size_t n_collects);
/* The interval of periodic collects when --every is not given (0: none). */
uint64_t budget_default_every(const run_budget *b);
/* A collect that began at started sent bytes in secs. */
void budget_measured(run_budget *b, uint64_t bytes, double secs, double started);
/* When to look again (cli_now() time; 0: never). */
double budget_next_check(const run_budget *b);
/* Look (at most every 15 s): must a collect start now to end in time?
 * Warns once, early, when the last collect would not fit. */
bool budget_due(run_budget *b, char *const *srcs, size_t n);

#endif
