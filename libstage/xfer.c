/*
 * xfer.c - push, pull and serve: a tree sent over a pipe pair (ssh), as a
 * delta against what the receiver has, verified, resumable, switched in
 * atomically.  The frames are proto.c's; the sender is xfer_send.c, the
 * receiver xfer_recv.c, xfer_record.c and xfer_switch.c; here are the two
 * ends of a connection (the client that starts the transport, and serve).
 *
 * The sender walks its tree (not following links) and hashes every file
 * once (XXH3-128), and sends the manifest with the tree digest: a SHA-256
 * over every entry's wire encoding in order, which holds path, type, mode,
 * mtime, size, link target and XXH3.  The receiver checks every file's
 * bytes at their final path against its XXH3 once (as they arrive, or when
 * it finds them already there) and the digest over the manifest it built
 * from; so each side reads each file at most once, and the tree as a
 * whole, every file's content included through its XXH3, is checked end
 * to end.
 *
 * Each end keeps a stat-keyed index of the files it read or wrote
 * (xfer_index.c): the sender's in the index directory the tool gives
 * (~/.cache/stager/xfer), the receiver's beside DEST's record
 * (".stager-index.NAME", only of the version it published).  A file whose
 * inode, size, mtime, ctime and mode are still those entered is taken to
 * hold the bytes it held then, and is not read: the sender takes its XXH3
 * from the index, the receiver its sameness.  A re-push of an unchanged
 * tree thus reads no file on either end, and the receiver, finding DEST
 * to be the manifest's tree in every entry (xfer_same.c), builds and
 * switches nothing.  --checksum (STG_FLAG_CHECKSUM) reads every file.
 *
 * The receiver of DEST builds the new version in DEST's sibling
 * ".stager-partial.NAME", a stable name, so that a push interrupted at any
 * moment leaves its completed files there for the next one.  For each file
 * of the manifest it looks, in the partial directory and then in DEST, for
 * a file of the same size and XXH3: reused (kept, or hardlinked from DEST
 * when its mode and mtime agree, else copied), so an unchanged file costs
 * no signature at all.  Otherwise it asks for it: with a librsync
 * signature of the old file at that path when there is one (the sender
 * answers with a delta), else whole.  Every received file is written under
 * a temporary name, checked against its XXH3 and only then renamed to its
 * path: the partial directory holds nothing but complete, checked files
 * at manifest paths.  A large file's temporary name is tied to its path
 * and kept when the transfer is cut, so the next one resumes it within:
 * the receiver offers the bytes it kept (their length and XXH3-128), the
 * sender checks them against its own first bytes and sends the rest, or
 * the whole file if they differ (xfer_resume.c).
 *
 * When all has arrived, anything in the partial directory that the manifest
 * does not name was removed (at the start), links are made, every file not
 * checked in this run (a local copy) is read back, and the digest is
 * compared with the sender's; only then are
 * directory modes set and the tree switched with DEST by
 * renameat2(RENAME_EXCHANGE) (rename for a first push), and the old version
 * removed.  Files of DEST are never written: reuse links or copies them, and
 * a file that needs new metadata is copied first.  So kill -9 of either side
 * leaves DEST as it was, and readers see the old tree or the new one.
 * Where the filesystem has no RENAME_EXCHANGE (NFS, CephFS, GlusterFS), the
 * old version is renamed aside to ".stager-old.NAME" first: DEST is absent
 * for a moment, and a receiver killed then leaves the old version for the
 * next to put back.
 *
 * An existing DEST is replaced only if stager published it (the record
 * ".stager-published.NAME" beside it names its inode, ctime and birth
 * time, and is a regular file of the user's), or it is empty, or the user
 * said --replace; a home directory never.  It is checked when the transfer
 * begins and again, under the lock, just before the switch, and the
 * directory the switch moved aside must be the one checked (else it is put
 * back and nothing is replaced).  A destination written as a directory
 * ("DIR/", "~", ".") means DIR/NAME, as with scp; the client resolves it.
 * The record is kept beside the tree, not in it, so the tree holds exactly
 * what was sent.
 *
 * Confinement: every path the receiver touches is resolved with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) under the partial directory
 * or DEST, manifest paths must be clean and relative with directory parents,
 * and symlinks are data (created last, never followed).  Pushes into one
 * directory are serialised by a flock on it, where the filesystem has one.
 */
#include "bytes.h"
#include "xfer_record.h"
#include "xfer_send.h"
#include "xfer_switch.h"
#include "rsjob.h"
#include "pace.h"
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

_Static_assert(XFER_BLOCK == STG_WIRE_CHUNK, "a transfer buffer holds one wire chunk");

/* ---- the two ends ------------------------------------------------------- */

/* opts->io_timeout as the wire takes it: seconds, <= 0 none. */
static int io_timeout(const stg_xfer_opts *o)
{
	return !o || !o->io_timeout ? STG_WIRE_TIMEOUT : o->io_timeout < 0 ? 0 : o->io_timeout;
}

void stg_xfer_opts_init(stg_xfer_opts *o)
{
	memset(o, 0, sizeof *o);
}

/* Split a command line into words: blanks separate, '...' and "..." quote. */
static char **split_words(const char *s, size_t extra)
{
	size_t cap = strlen(s) / 2 + 2 + extra;
	char **v = calloc(cap, sizeof *v);
	char *buf = malloc(strlen(s) + 1);
	if (!v || !buf) {
		free(v);
		free(buf);
		return NULL;
	}
	size_t n = 0;
	const char *p = s;
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		char *w = buf;
		char q = 0;
		for (; *p && (q || (*p != ' ' && *p != '\t')); p++) {
			if (q && *p == q)
				q = 0;
			else if (!q && (*p == '\'' || *p == '"'))
				q = *p;
			else
				*w++ = *p;
		}
		*w = '\0';
		if (!(v[n++] = strdup(buf)))
			break;
	}
	free(buf);
	return v;
}

static void free_words(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static stg_err spawn(stg_ctx *ctx, const stg_xfer_opts *o, const char *host, pid_t *pid, int *in,
                     int *out)
{
	char **argv = split_words(o->rsh && *o->rsh ? o->rsh : "ssh", 4);
	if (!argv || !argv[0]) {
		free_words(argv);
		return stg__fail(ctx, STG_EUSAGE, "an empty transport command (--rsh)");
	}
	size_t n = 0;
	while (argv[n])
		n++;
	argv[n++] = strdup(host);
	argv[n++] = strdup(o->remote_stager && *o->remote_stager ? o->remote_stager : "stager");
	argv[n++] = strdup("serve");
	int to[2] = {-1, -1}, from[2] = {-1, -1};
	stg_err err = STG_OK;
	if (!argv[n - 1] || !argv[n - 2] || !argv[n - 3]) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot make a pipe");
		goto out;
	}
	*pid = fork();
	if (*pid < 0) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot start '%s'", argv[0]);
		goto out;
	}
	if (*pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		_exit(127);
	}
	*out = to[1];
	*in = from[0];
	to[1] = from[0] = -1;
out:
	for (int i = 0; i < 2; i++) {
		if (to[i] >= 0)
			close(to[i]);
		if (from[i] >= 0)
			close(from[i]);
	}
	free_words(argv);
	return err;
}

/* Is dest written as a directory to put things into: "DIR/", "~", or a
 * last component "." or ".."? */
static bool means_into(const char *dest)
{
	size_t n = strlen(dest);
	const char *last = strrchr(dest, '/');
	last = last ? last + 1 : dest;
	return (n && dest[n - 1] == '/') || !strcmp(dest, "~") || !strcmp(last, ".") ||
	       !strcmp(last, "..");
}

/* scp's and rsync's reading of a destination: one written as a directory
 * (means_into) stands for DIR/NAME, NAME being the source's last component
 * (for a local source "." or "..", its real name).  *out is malloc'ed. */
static stg_err into_path(stg_ctx *ctx, const char *dest, const char *src, bool src_local,
                         char **out)
{
	if (!means_into(dest)) {
		*out = strdup(dest);
		return *out ? STG_OK : stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	char name[STG_PATH_MAX + 1], *real = NULL;
	size_t n = strlen(src);
	while (n > 1 && src[n - 1] == '/')
		n--;
	snprintf(name, sizeof name, "%.*s", (int)n, src);
	const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	if (src_local && (!strcmp(base, ".") || !strcmp(base, "..")) &&
	    (real = realpath(src, NULL)))
		base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
	stg_err err = STG_OK;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || !strcmp(base, "~"))
		err = stg__fail(ctx, STG_EUSAGE,
		                "cannot tell what to call '%s' in '%s': name it in full, as "
		                "DIR/NAME",
		                src, dest);
	else if (!(*out = malloc(strlen(dest) + strlen(base) + 2)))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	else
		sprintf(*out, "%s%s%s", dest, dest[strlen(dest) - 1] == '/' ? "" : "/", base);
	free(real);
	return err;
}

/* The client's half of a connection over in/out. */
static stg_err client_run(stg_ctx *ctx, uint8_t op, const char *path_arg, const char *local_arg,
                          int in, int out, const stg_xfer_opts *o, stg_xfer_result *res,
                          bool *stalled)
{
	stg_wire w;
	stg_bucket bw;
	char *path = NULL, *local = NULL;
	stg_err err = op == STG_OP_PUSH ? into_path(ctx, path_arg, local_arg, true, &path)
	                                : into_path(ctx, local_arg, path_arg, false, &local);
	if (!err && op == STG_OP_PUSH && !(local = strdup(local_arg)))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (!err && op == STG_OP_PULL && !(path = strdup(path_arg)))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	/* a pull that would not be allowed to publish is refused before it
	 * asks for anything */
	if (!err && op == STG_OP_PULL)
		err = stg__receive_check(ctx, local, false, o->replace, "pull");
	if (err || (err = stg__wire_init(&w, ctx, in, out))) {
		free(path);
		free(local);
		return err;
	}
	stg__bucket_init(&bw, (double)o->bwlimit);
	if (o->bwlimit)
		w.bw = &bw;
	if (o->level)
		w.level = o->level;
	/* until the far end says which version it speaks, only a message
	 * begun is bounded: ssh may be asking for a password */
	int tmo = io_timeout(o);
	size_t pl = strlen(path);
	/* a pull's level is the far end's to use: it compresses the data */
	uint8_t hello[15];
	size_t hl = 14;
	memcpy(hello, STG_WIRE_MAGIC, 8);
	stg__put32(hello + 8, w.version);
	hello[12] = op;
	hello[13] = (o->pack ? STG_FLAG_PACK : 0) | (o->replace ? STG_FLAG_REPLACE : 0) |
	            (o->checksum ? STG_FLAG_CHECKSUM : 0);
	if (op == STG_OP_PULL && o->level) {
		hello[13] |= STG_FLAG_LEVEL;
		hello[hl++] = (uint8_t)o->level;
	}
	const uint8_t *p;
	uint32_t len;
	if (pl == 0 || pl > STG_PATH_MAX) {
		err = stg__fail(ctx, STG_EUSAGE, "a bad remote path '%s'", path);
		goto out;
	}
	if ((err = stg__wire_timeout(&w, tmo, false, false)) ||
	    (err = stg__wire_send(&w, STG_W_HELLO, hello, hl, path, pl)) ||
	    (err = stg__wire_expect(&w, STG_W_WELCOME, &p, &len)) ||
	    (err = stg__welcome_decode(&w, p, len)) ||
	    (err = stg__wire_timeout(&w, tmo, w.version >= 3, w.version >= 3)))
		goto out;
	err = op == STG_OP_PUSH
	              ? stg__send_tree(ctx, &w, local, "push", o->index_dir, o->checksum, res)
	              : stg__receive_tree(ctx, &w, local, false, o->replace, o->checksum, "pull",
	                                  res);
	if (err)
		stg__wire_send_error(&w, err);
out:
	res->wire_out = w.bytes_out;
	res->wire_in = w.bytes_in;
	*stalled = w.stalled;
	stg__bucket_destroy(&bw);
	stg__wire_free(&w);
	free(path);
	free(local);
	return err;
}

/* Split "[USER@]HOST:PATH". */
static stg_err split_remote(stg_ctx *ctx, const char *spec, char **host, const char **path)
{
	const char *colon = strchr(spec, ':');
	const char *slash = strchr(spec, '/');
	if (!colon || colon == spec || (slash && slash < colon) || !colon[1])
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not [USER@]HOST:PATH", spec);
	if (!(*host = strndup(spec, (size_t)(colon - spec))))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	*path = colon + 1;
	return STG_OK;
}

static stg_err client(stg_ctx *ctx, uint8_t op, const char *remote, const char *local,
                      const stg_xfer_opts *o, stg_xfer_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	char *host = NULL;
	const char *path = NULL;
	int in = -1, out = -1;
	pid_t pid = -1;
	stg_err err = split_remote(ctx, remote, &host, &path);
	struct stat lst;
	/* what is wrong here is said before connecting */
	if (!err && op == STG_OP_PUSH && stat(local, &lst))
		err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                      "cannot push '%s'", local);
	else if (!err && op == STG_OP_PUSH && !S_ISDIR(lst.st_mode))
		err = stg__fail(ctx, STG_EUSAGE,
		                "'%s' is not a directory: push sends directories, not single "
		                "files; push the directory that holds it (or one made for it)",
		                local);
	bool stalled = false;
	if (!err && (err = spawn(ctx, o, host, &pid, &in, &out)) == STG_OK)
		err = client_run(ctx, op, path, local, in, out, o, res, &stalled);
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	if (pid > 0) {
		int st = 0;
		/* a stalled transport may never notice its closed pipes */
		if (err == STG_EINTR || stalled)
			kill(pid, SIGTERM);
		for (double t1 = stg__now(); stalled && stg__now() - t1 < 2;) {
			if (waitpid(pid, &st, WNOHANG) == pid) {
				pid = -1;
				break;
			}
			stg__nap(ctx, 0.05);
		}
		if (pid > 0 && stalled)
			kill(pid, SIGKILL);
		while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (err == STG_EREMOTE && !stalled && !strstr(stg_errmsg(ctx), "the far end:")) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
			if (WIFEXITED(st) && WEXITSTATUS(st) && res->wire_in > 0)
				/* the far end answered before: the connection was lost */
				stg__fail(ctx, err,
				          "%s (the transport exited with status %d: the "
				          "connection was lost; the same command again resumes)",
				          msg, WEXITSTATUS(st));
			else if (WIFEXITED(st) && WEXITSTATUS(st))
				stg__fail(ctx, err,
				          "%s (the transport exited with status %d: is the host "
				          "reachable, and stager installed there? see --rsh and "
				          "--remote-stager)",
				          msg, WEXITSTATUS(st));
			else if (WIFSIGNALED(st))
				stg__fail(ctx, err, "%s (the transport was killed by signal %d)",
				          msg, WTERMSIG(st));
		}
	}
	free(host);
	res->seconds = stg__now() - t0;
	return err;
}

stg_err stg_push(stg_ctx *ctx, const char *local, const char *remote, const stg_xfer_opts *opts,
                 stg_xfer_result *res)
{
	return client(ctx, STG_OP_PUSH, remote, local, opts, res);
}

stg_err stg_pull(stg_ctx *ctx, const char *remote, const char *local, const stg_xfer_opts *opts,
                 stg_xfer_result *res)
{
	return client(ctx, STG_OP_PULL, remote, local, opts, res);
}

static stg_err client_fd(stg_ctx *ctx, uint8_t op, const char *path, const char *local, int in,
                         int out, const stg_xfer_opts *opts, stg_xfer_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	bool stalled;
	stg_err err = client_run(ctx, op, path, local, in, out, opts, res, &stalled);
	res->seconds = stg__now() - t0;
	return err;
}

stg_err stg_push_fd(stg_ctx *ctx, const char *local, const char *path, int in, int out,
                    const stg_xfer_opts *opts, stg_xfer_result *res)
{
	return client_fd(ctx, STG_OP_PUSH, path, local, in, out, opts, res);
}

stg_err stg_pull_fd(stg_ctx *ctx, const char *path, const char *local, int in, int out,
                    const stg_xfer_opts *opts, stg_xfer_result *res)
{
	return client_fd(ctx, STG_OP_PULL, path, local, in, out, opts, res);
}

stg_err stg_serve(stg_ctx *ctx, int in, int out, stg_xfer_result *res)
{
	return stg_serve_with(ctx, in, out, NULL, res);
}

stg_err stg_serve_with(stg_ctx *ctx, int in, int out, const stg_xfer_opts *opts,
                       stg_xfer_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	stg_wire w;
	stg_err err = stg__wire_init(&w, ctx, in, out);
	if (err)
		return err;
	const uint8_t *p;
	uint32_t len;
	uint8_t op, flags;
	int level, tmo = io_timeout(opts), lock = -1;
	const char *path;
	/* a client sends HELLO at once: waiting for it is bounded */
	if ((err = stg__wire_timeout(&w, tmo, true, false)) ||
	    (err = stg__wire_expect(&w, STG_W_HELLO, &p, &len)) ||
	    (err = stg__hello_decode(ctx, p, len, &op, &flags, &level, &w.version, &path)) ||
	    (err = stg__wire_timeout(&w, tmo, w.version >= 3, w.version >= 3)))
		goto out;
	if (level)
		w.level = level;
	/* "~/x" as a shell would read it (scp and rsync users write it) */
	const char *home = getenv("HOME");
	char *dir = NULL;
	if (path[0] == '~' && (path[1] == '/' || !path[1]) && home && *home) {
		if ((dir = malloc(strlen(home) + strlen(path))))
			sprintf(dir, "%s%s", home, path + 1);
	} else {
		dir = strdup(path);
	}
	uint8_t welcome[12];
	stg__welcome_encode(&w, welcome);
	bool pack = flags & STG_FLAG_PACK, replace = flags & STG_FLAG_REPLACE,
	     checksum = flags & STG_FLAG_CHECKSUM;
	const char *index_dir = opts ? opts->index_dir : NULL;
	if (!dir)
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	/* a destination that may not be replaced is refused before the
	 * client reads (and hashes) its tree: in place of WELCOME */
	else if (op == STG_OP_PUSH && (err = stg__receive_check(ctx, dir, pack, replace, "serve")))
		;
	else if (!(err = stg__wire_send(&w, STG_W_WELCOME, welcome, sizeof welcome, NULL, 0)) &&
	         op == STG_OP_PUSH)
		err = stg__receive_tree(ctx, &w, dir, pack, replace, checksum, "serve", res);
	/* a pull reads the tree only between transfers to it (the keepalive
	 * tells the client that this end waits); the client says first which
	 * lock its receiver holds (before version 4 it took that lock only
	 * later: no wait, since a pull into the very tree it reads would
	 * wait for ever) */
	else if (!err && w.version >= 4 && !(err = stg__wire_expect(&w, STG_W_HOLDS, &p, &len))) {
		if (len != XFER_HOLDS)
			err = stg__fail(ctx, STG_EREMOTE, "protocol error: a bad HOLDS (%u bytes)",
			                (unsigned)len);
		else if (!(err = stg__xfer_read_lock(ctx, dir, p, &lock)))
			err = stg__send_tree(ctx, &w, dir, "serve", index_dir, checksum, res);
	} else if (!err)
		err = stg__send_tree(ctx, &w, dir, "serve", index_dir, checksum, res);
	if (lock >= 0)
		close(lock);
	free(dir);
out:
	if (err)
		stg__wire_send_error(&w, err);
	res->wire_out = w.bytes_out;
	res->wire_in = w.bytes_in;
	res->seconds = stg__now() - t0;
	stg__wire_free(&w);
	return err;
}

/* ---- for the fuzz target ------------------------------------------------- */

static rs_result zero_basis(void *arg, rs_long_t pos, size_t *len, void **buf)
{
	(void)arg;
	if (pos >= 4096)
		return RS_INPUT_ENDED;
	if (*len > (size_t)(4096 - pos))
		*len = (size_t)(4096 - pos);
	memset(*buf, 'x', *len);
	return RS_DONE;
}

static stg_err fuzz_entry(void *arg, const uint8_t *p, uint32_t len)
{
	stg_wentry e;
	stg_err err = stg__wentry_decode(arg, p, len, &e);
	stg__wentry_free(&e);
	return err;
}

/* *out: librsync's output buffer, allocated with the first job (most
 * inputs have none) */
static stg_err fuzz_frames(stg_ctx *ctx, stg_wire *w, uint8_t **out)
{
	rs_job_t *job = NULL;
	rs_signature_t *sig = NULL;
	stg_err err = STG_OK;
	bool done = false;
	for (unsigned k = 0; k < 100000 && !err; k++) {
		uint8_t t, op, flags;
		int level;
		const uint8_t *p, *raw;
		uint32_t len;
		size_t rl;
		const char *path;
		stg_wwant want;
		stg_wfile file;
		bool delta;
		if ((err = stg__wire_read(w, &t, &p, &len)))
			break;
		switch (t) {
		case STG_W_HELLO:
			/* its version sets the shape of WANT and FILE to come */
			err = stg__hello_decode(ctx, p, len, &op, &flags, &level, &w->version,
			                        &path);
			break;
		case STG_W_WELCOME: err = stg__welcome_decode(w, p, len); break;
		case STG_W_ENTRY: err = stg__entries_decode(w, p, len, fuzz_entry, ctx); break;
		case STG_W_FILE:
		case STG_W_WANT:
			if (job)
				rs_job_free(job);
			if (sig)
				rs_free_sumset(sig);
			job = NULL;
			sig = NULL;
			delta = t == STG_W_FILE ? !stg__file_decode(w, p, len, &file) &&
			                                  file.kind == STG_WANT_DELTA
			                        : !stg__want_decode(w, p, len, &want) &&
			                                  want.kind == STG_WANT_DELTA;
			if (delta && !*out && !(*out = malloc(XFER_BLOCK)))
				err = STG_ENOMEM;
			else if (delta)
				job = t == STG_W_FILE ? rs_patch_begin(zero_basis, NULL)
				                      : rs_loadsig_begin(&sig);
			done = false;
			break;
		case STG_W_SIG:
			if (job && !done)
				err = stg__job_feed(ctx, job, p, len, false, *out, NULL, NULL,
				                    &done);
			break;
		case STG_W_DATA:
			if ((err = stg__wire_data(w, p, len, &raw, &rl)))
				break;
			if (job && !done)
				err = stg__job_feed(ctx, job, raw, rl, false, *out, NULL, NULL,
				                    &done);
			break;
		case STG_W_FILE_END:
		case STG_W_WANTS_END:
			if (job && !done)
				err = stg__job_feed(ctx, job, NULL, 0, true, *out, NULL, NULL,
				                    &done);
			if (sig && !err && done)
				rs_build_hash_table(sig);
			if (job)
				rs_job_free(job);
			job = NULL;
			if (sig)
				rs_free_sumset(sig);
			sig = NULL;
			break;
		}
	}
	if (job)
		rs_job_free(job);
	if (sig)
		rs_free_sumset(sig);
	return err;
}

stg_err stg__proto_replay(stg_ctx *ctx, const uint8_t *data, size_t len, const char *dir)
{
	stg_wire w;
	stg_err err = stg__wire_init(&w, ctx, -1, -1);
	if (err)
		return err;
	uint8_t *out = NULL;
	w.mem = data;
	w.mem_len = len;
	fuzz_frames(ctx, &w, &out);
	free(out);
	if (dir) {
		/* the receiver itself, as a client's stream drives serve */
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		const uint8_t *p;
		uint32_t plen;
		uint8_t op, flags;
		int level;
		const char *path;
		stg_xfer_result res = {0};
		w.mem_pos = 0;
		w.out = null;
		w.broken = false;
		w.version = STG_WIRE_VERSION;
		char dest[STG_PATH_MAX];
		snprintf(dest, sizeof dest, "%s/ds", dir);
		uint8_t t;
		/* a client's stream (HELLO) or a server's for a pull (WELCOME) */
		if (!stg__wire_read(&w, &t, &p, &plen) &&
		    ((t == STG_W_WELCOME && !stg__welcome_decode(&w, p, plen)) ||
		     (t == STG_W_HELLO &&
		      !stg__hello_decode(ctx, p, plen, &op, &flags, &level, &w.version, &path))))
			err = stg__receive_tree(ctx, &w, dest, false, false, false, "fuzz", &res);
		if (null >= 0)
			close(null);
		stg__rmtree(dest);
		static const char *const beside[] = {
		        ".stager-partial.ds",       ".stager-published.ds", ".stager-old.ds",
		        ".stager-tmp-published.ds", ".stager-index.ds",     ".stager-tmp-index.ds"};
		for (size_t k = 0; k < sizeof beside / sizeof *beside; k++) {
			snprintf(dest, sizeof dest, "%s/%s", dir, beside[k]);
			stg__rmtree(dest);
		}
	}
	stg__wire_free(&w);
	return err;
}
