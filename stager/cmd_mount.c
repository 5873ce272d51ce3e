/*
 * cmd_mount.c - stager mount PACK MOUNTPOINT [--foreground] [--cache-size SIZE]
 *               stager umount MOUNTPOINT
 *
 * In the background (the default), a child process mounts and serves; it
 * tells the parent through a pipe whether the mount is there (or why not),
 * so that `stager mount` returns when the tree can be read, with the
 * error's exit status if it cannot.  The child's messages (a damaged
 * frame, a changed pack) go to SCRATCH_ROOT/mounts/log.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OPT_FOREGROUND = OPT_FIRST_LOCAL, OPT_CACHE_SIZE };

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

/* The child's messages: SCRATCH_ROOT/mounts/log, appended to. */
static void log_to_scratch(stg_cache *cache)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/mounts/log", stg_cache_root(cache));
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
	}
	dup2(fd >= 0 ? fd : null, STDERR_FILENO);
	if (fd >= 0)
		close(fd);
	if (null >= 0)
		close(null);
}

/* Mount in a child that serves; the parent waits to hear it is mounted. */
static int mount_in_background(stg_ctx *ctx, stg_cache *cache, const char *pack, const char *mp,
                               const stg_mount_opts *mo)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		cli_error("pipe: %s", strerror(errno));
		return EXIT_IO;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cli_error("fork: %s", strerror(errno));
		return EXIT_IO;
	}
	if (pid == 0) {
		close(p[0]);
		setsid();
		stg_mount *m;
		stg_err err = stg_mount_open(ctx, cache, pack, mp, mo, &m);
		/* the status, then the message: what the parent prints */
		char msg[1200];
		int n = snprintf(msg, sizeof msg, "%d %s", (int)err, err ? stg_errmsg(ctx) : "");
		if (write(p[1], msg, (size_t)(n < (int)sizeof msg ? n : (int)sizeof msg - 1)) < 0)
			_exit(EXIT_IO);
		close(p[1]);
		if (err)
			_exit(stg_exit_status(err));
		log_to_scratch(cache);
		_exit(serve(ctx, m));
	}
	close(p[1]);
	char msg[1200];
	ssize_t n, got = 0;
	while ((n = read(p[0], msg + got, sizeof msg - 1 - (size_t)got)) > 0 ||
	       (n < 0 && errno == EINTR))
		if (n > 0)
			got += n;
	close(p[0]);
	msg[got] = '\0';
	int code = -1;
	char *rest = NULL;
	if (got > 0)
		code = (int)strtol(msg, &rest, 10);
	if (code != 0) {
		int st = 0;
		waitpid(pid, &st, 0);
		if (code > 0 && rest) {
			cli_error("%s", *rest ? rest + 1 : stg_strerror((stg_err)code));
			return stg_exit_status((stg_err)code);
		}
		cli_error("the mount's process ended before it mounted (status %d)",
		          WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return EXIT_IO;
	}
	cli_info("mounted '%s' at '%s' (process %d; `stager umount %s` ends it)", pack, mp,
	         (int)pid, mp);
	return EXIT_OK;
}

int cmd_mount(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"foreground", no_argument, NULL, OPT_FOREGROUND},
	        {"cache-size", required_argument, NULL, OPT_CACHE_SIZE},
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
		rc = mount_in_background(ctx, cache, pack, mp, &mo);
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
	static const struct option lo[] = {
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int c, rc;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		return cli_usage("unexpected option");
	}
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
