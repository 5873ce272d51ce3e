/*
 * cmd_push.c - stager push LOCAL [USER@]HOST:PATH, stager pull
 * [USER@]HOST:PATH LOCAL, and stager serve (their far end, started over
 * ssh).  The transfer itself is libstage's (xfer.c); this parses options,
 * prints, and maps the result to an exit status.
 */
#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	OPT_JSON = OPT_FIRST_LOCAL,
	OPT_RSH,
	OPT_REMOTE_STAGER,
	OPT_LEVEL,
	OPT_PACK,
	OPT_REPLACE,
	OPT_CHECKSUM
};

static void xfer_json(const char *cmd, const char *src, const char *dest, const stg_xfer_result *r,
                      int status)
{
	printf("{\"command\":\"%s\",\"src\":", cmd);
	json_str(stdout, src);
	printf(",\"dest\":");
	json_str(stdout, dest);
	printf(",\"files\":%llu,\"dirs\":%llu,\"links\":%llu,\"content_bytes\":%llu,"
	       "\"whole_files\":%llu,\"delta_files\":%llu,\"reused_files\":%llu,"
	       "\"resumed_files\":%llu,\"resumed_bytes\":%llu,"
	       "\"sent_content\":%llu,\"hashed_files\":%llu,\"wire_bytes_out\":%llu,"
	       "\"wire_bytes_in\":%llu,\"wire_bytes\":%llu,\"seconds\":%.3f,\"status\":%d}\n",
	       (unsigned long long)r->files, (unsigned long long)r->dirs,
	       (unsigned long long)r->links, (unsigned long long)r->content_bytes,
	       (unsigned long long)r->whole_files, (unsigned long long)r->delta_files,
	       (unsigned long long)r->reused_files, (unsigned long long)r->resumed_files,
	       (unsigned long long)r->resumed_bytes, (unsigned long long)r->sent_content,
	       (unsigned long long)r->hashed_files, (unsigned long long)r->wire_out,
	       (unsigned long long)r->wire_in, (unsigned long long)(r->wire_out + r->wire_in),
	       r->seconds, status);
}

/* the io_timeout setting ($STAGER_IO_TIMEOUT, a config file; checked when
 * set) as stg_xfer_opts takes it: 0 there is no bound */
static int io_timeout_of(const stg_config *cfg)
{
	const char *v = stg_config_get(cfg, "io_timeout", NULL);
	long n = v ? strtol(v, NULL, 10) : 0;
	return n <= 0 ? -1 : n > 1000000 ? 1000000 : (int)n;
}

/* Where a sending end keeps its index of the files it read (libstage's
 * stg_xfer_opts.index_dir): $XDG_CACHE_HOME/stager/xfer, else
 * ~/.cache/stager/xfer; NULL (none) without either. */
static const char *index_dir(char *buf, size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (x && *x == '/')
		snprintf(buf, len, "%s/stager/xfer", x);
	else if (home && *home == '/')
		snprintf(buf, len, "%s/.cache/stager/xfer", home);
	else
		return NULL;
	return buf;
}

/* push and pull: the same options, the arguments the other way round */
static int push_or_pull(int argc, char **argv, bool push)
{
	static const struct option lo[] = {
	        {"rsh", required_argument, NULL, OPT_RSH},
	        {"remote-stager", required_argument, NULL, OPT_REMOTE_STAGER},
	        {"level", required_argument, NULL, OPT_LEVEL},
	        {"json", no_argument, NULL, OPT_JSON},
	        {"pack", no_argument, NULL, OPT_PACK},
	        {"replace", no_argument, NULL, OPT_REPLACE},
	        {"checksum", no_argument, NULL, OPT_CHECKSUM},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	stg_xfer_opts o;
	stg_xfer_opts_init(&o);
	o.rsh = getenv("STAGER_RSH");
	int json = 0, c, rc;
	while ((c = getopt_long(argc, argv, "hqve:", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case 'e':
		case OPT_RSH: o.rsh = optarg; break;
		case OPT_REMOTE_STAGER: o.remote_stager = optarg; break;
		case OPT_JSON: json = 1; break;
		case OPT_PACK:
			if (!push)
				return cli_usage("--pack is for push (pull builds a tree; "
				                 "`stager pack` it after)");
			o.pack = 1;
			break;
		case OPT_REPLACE: o.replace = 1; break;
		case OPT_CHECKSUM: o.checksum = 1; break;
		case OPT_LEVEL:
			if (cli_parse_level(optarg, &o.level))
				return cli_usage("--level: '%s' is not a level from 1 to 19",
				                 optarg);
			break;
		default: return cli_usage("unexpected option");
		}
	}
	if (argc - optind != 2)
		return cli_usage(argc - optind < 2
		                         ? (push ? "what to push, and where? stager push LOCAL "
		                                   "[USER@]HOST:PATH"
		                                 : "what to pull, and where? stager pull "
		                                   "[USER@]HOST:PATH LOCAL")
		                         : "too many arguments");
	if (g_opts.bwlimit && stg_parse_size(g_opts.bwlimit, &o.bwlimit))
		return cli_usage("--bwlimit: '%s' is not a rate", g_opts.bwlimit);
	const char *src = argv[optind], *dest = argv[optind + 1];
	signal(SIGPIPE, SIG_IGN);
	stg_ctx *ctx = cli_ctx();
	/* the far end's stager: --remote-stager, else the remote_stager
	 * setting ($STAGER_REMOTE_STAGER, a config file), else "stager" */
	stg_config *cfg = cli_config(ctx);
	if (!o.remote_stager)
		o.remote_stager = stg_config_get(cfg, "remote_stager", NULL);
	o.io_timeout = io_timeout_of(cfg);
	char idir[4096];
	o.index_dir = index_dir(idir, sizeof idir);
	stg_xfer_result r;
	stg_err err = push ? stg_push(ctx, src, dest, &o, &r) : stg_pull(ctx, src, dest, &o, &r);
	rc = EXIT_OK;
	if (err) {
		rc = cli_fail(ctx, err);
	} else {
		char a[16], b[16], saved[16], resumed[64] = "";
		/* a file resumed within: the bytes of it that were not sent again */
		if (r.resumed_files)
			snprintf(resumed, sizeof resumed, ", %llu resumed (%s saved)",
			         (unsigned long long)r.resumed_files,
			         stg_format_size(r.resumed_bytes, saved, sizeof saved));
		cli_info("%s '%s' to '%s': %llu files (%llu sent whole, %llu as deltas%s, %llu "
		         "already there), %s on the wire of %s, %.2f s",
		         push ? "pushed" : "pulled", src, dest, (unsigned long long)r.files,
		         (unsigned long long)r.whole_files, (unsigned long long)r.delta_files,
		         resumed, (unsigned long long)r.reused_files,
		         stg_format_size(r.wire_out + r.wire_in, a, sizeof a),
		         stg_format_size(r.content_bytes, b, sizeof b), r.seconds);
	}
	if (json)
		xfer_json(push ? "push" : "pull", src, dest, &r, rc);
	stg_config_free(cfg);
	cli_ctx_done(ctx);
	return rc;
}

int cmd_push(int argc, char **argv)
{
	return push_or_pull(argc, argv, true);
}

int cmd_pull(int argc, char **argv)
{
	return push_or_pull(argc, argv, false);
}

int cmd_serve(int argc, char **argv)
{
	int rc = cli_global_options_only(argc, argv);
	if (rc >= 0)
		return rc;
	if (argc != optind)
		return cli_usage("serve takes no arguments: the client says what to do");
	if (isatty(STDIN_FILENO) || isatty(STDOUT_FILENO))
		return cli_usage("serve speaks stager's protocol on stdin and stdout; it is "
		                 "started by push and pull (through ssh), not by hand");
	signal(SIGPIPE, SIG_IGN);
	/* no progress at this end: the client shows it */
	g_opts.progress = PROGRESS_NONE;
	stg_ctx *ctx = cli_ctx();
	stg_config *cfg = cli_config(ctx);
	stg_xfer_opts o;
	stg_xfer_opts_init(&o);
	o.io_timeout = io_timeout_of(cfg);
	char idir[4096];
	o.index_dir = index_dir(idir, sizeof idir);
	stg_xfer_result r;
	stg_err err = stg_serve_with(ctx, STDIN_FILENO, STDOUT_FILENO, &o, &r);
	stg_config_free(cfg);
	/* the client reports the error it was sent; say nothing twice */
	rc = err ? stg_exit_status(err) : EXIT_OK;
	if (err && g_opts.verbose)
		cli_fail(ctx, err);
	cli_ctx_done(ctx);
	return rc;
}
