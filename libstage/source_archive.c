/*
 * source_archive.c - any other file as a source: an archive that
 * libarchive reads (tar of any compression, zip, 7z, cpio, ISO 9660, ...),
 * unpacked under the packs' rules (archive_unpack.c) into a cache entry
 * like a pack's.
 *
 * An archive is named by its SHA-256, known only once all of it was read:
 * so its builder is found by the file's identity (stage.c locks
 * "src-<dev>-<ino>", and the index says what a builder built), and it
 * waits for another builder holding its slot.  Staging it reads it whole
 * in one stream, with no parallel extraction; it says so once.
 */
#include "archive_unpack.h"
#include "ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define READER_MEM_MAX ((rlim_t)4 << 30) /* address space of an archive reader */

/*
 * libarchive reads hostile bytes, and some archives make it loop forever
 * without reading or writing anything, or crash.  So the archive is read in
 * a child process that reports its progress (bytes read or written) through
 * shared memory; the parent kills it when progress stops for stall_timeout
 * seconds, when it crashes, or when the stage is cancelled.  The child only
 * ever writes inside the entry's temporary directory.
 */
typedef struct ar_shared {
	volatile uint64_t progress;
	stg_err err;
	char msg[STG_ERRMSG_MAX];
	stg_unpacked u;
} ar_shared;

static stg_err unpack_isolated(stg_ctx *ctx, stg_cache *c, const stg_source *s,
                               const stg_entry_build *eb, stg_unpacked *out)
{
	ar_shared *sh =
	        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return stg__fail_errno(ctx, STG_ENOMEM, errno, "cannot map memory");
	memset(sh, 0, sizeof *sh);
	pid_t pid = fork();
	if (pid < 0) {
		munmap(sh, sizeof *sh);
		return stg__fail_errno(ctx, STG_ENOMEM, errno, "cannot start a process");
	}
	if (pid == 0) {
		/* the child: default signals, so SIGKILL and SIGTERM end it */
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
#ifndef __SANITIZE_ADDRESS__
		/* a header may ask libarchive for any amount of memory: cap
		 * it, so such an archive fails here instead of starving the
		 * node (AddressSanitizer needs its huge reservations) */
		struct rlimit rl;
		if (getrlimit(RLIMIT_AS, &rl) == 0 &&
		    (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > READER_MEM_MAX)) {
			rl.rlim_cur = READER_MEM_MAX;
			setrlimit(RLIMIT_AS, &rl);
		}
#endif
		stg_ctx child = *ctx;
		child.log_fn = NULL; /* the parent's terminal belongs to the parent */
		child.progress_fn = NULL;
		sh->err =
		        stg__archive_unpack(&child, c, s, eb->tfd, eb->dfd, &sh->progress, &sh->u);
		snprintf(sh->msg, sizeof sh->msg, "%s", child.errmsg);
		_exit(0);
	}
	uint64_t last = 0;
	double quiet = 0, limit = (double)c->stall_timeout;
	stg_err err = STG_OK;
	int status = 0;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			err = stg__fail_errno(ctx, STG_EIO, errno, "lost the archive reader");
			break;
		}
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
		uint64_t now = sh->progress;
		quiet = now == last ? quiet + 0.05 : 0;
		last = now;
		if (stg__cancelled(ctx) || quiet > limit) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			err = stg__cancelled(ctx)
			              ? stg__fail(ctx, STG_EINTR, "interrupted")
			              : stg__fail(ctx, STG_ECORRUPT,
			                          "damaged archive: reading it made no progress "
			                          "for %u "
			                          "s (libarchive loops on it); refusing it",
			                          c->stall_timeout);
			break;
		}
	}
	if (!err && WIFSIGNALED(status))
		err = stg__fail(ctx, STG_ECORRUPT,
		                "damaged archive: reading it crashed the reader (signal %d); "
		                "refusing it",
		                WTERMSIG(status));
	else if (!err && (!WIFEXITED(status) || WEXITSTATUS(status)))
		/* the child does nothing but read the archive */
		err = stg__fail(ctx, STG_ECORRUPT,
		                "damaged archive: the reader failed on it (status %d); refusing it",
		                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	else if (!err && sh->err == STG_ENOMEM)
		err = stg__fail(
		        ctx, STG_ECORRUPT,
		        "damaged archive: reading it needs more memory than a reader may use "
		        "(%u GiB): %s",
		        (unsigned)(READER_MEM_MAX >> 30), sh->msg);
	else if (!err && sh->err)
		err = stg__fail(ctx, sh->err, "%s", sh->msg);
	if (!err)
		*out = sh->u;
	munmap(sh, sizeof *sh);
	return err;
}

/* ---- the kind ------------------------------------------------------------------- */

/* Any regular file that is not a pack. */
static bool archive_claims(const stg_source *s)
{
	return S_ISREG(s->st.st_mode);
}

static stg_err archive_open(stg_ctx *ctx, stg_cache *c, stg_source *s, const stg_stage_opts *o,
                            stg_stage_result *res)
{
	(void)c;
	(void)res;
	if (o->n_include)
		return stg__fail(ctx, STG_EUSAGE,
		                 "--include needs a pack: '%s' is another kind of archive (make a "
		                 "pack with 'stager pack' to stage parts of it)",
		                 s->name);
	if (s->st.st_size == 0)
		return stg__fail(ctx, STG_ECORRUPT, "'%s' is empty: not a pack or an archive",
		                 s->name);
	return STG_OK;
}

/* What the archive unpacks to at least, as far as can be told before
 * reading it: its own size, or what its first zstd frame says it holds
 * (zstd writes that when it compresses a file). */
static uint64_t least_unpacked(const stg_source *s)
{
	uint64_t need = (uint64_t)s->st.st_size;
	uint8_t head[18]; /* ZSTD_FRAMEHEADERSIZE_MAX (zstd.h hides it) */
	ssize_t n = pread(s->fd, head, sizeof head, 0);
	if (n > 0) {
		unsigned long long cs = ZSTD_getFrameContentSize(head, (size_t)n);
		if (cs != ZSTD_CONTENTSIZE_UNKNOWN && cs != ZSTD_CONTENTSIZE_ERROR && cs > need)
			need = cs;
	}
	return need;
}

static stg_err archive_build(stg_ctx *ctx, stg_cache *c, stg_source *s, const char *name,
                             const stg_stage_opts *o, stg_stage_result *res)
{
	(void)o;
	/* room for at least what it unpacks to, where that is known */
	stg_err err = stg__room_for(ctx, c, least_unpacked(s), NULL);
	if (err)
		return err;
	stg_entry_build eb;
	stg_unpacked u;
	if ((err = stg__entry_begin(ctx, c, name, &eb)))
		goto out;
	posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if ((err = unpack_isolated(ctx, c, s, &eb, &u))) {
		/* a pack cut short has lost its trailer: it reads as an archive
		 * whose stream ends too soon, and that is what to tell the user */
		char m[512];
		snprintf(m, sizeof m, "%s", stg_errmsg(ctx));
		if (err == STG_ECORRUPT && (strstr(m, "runcated") || strstr(m, "nexpected end")))
			err = stg__fail(ctx, STG_ECORRUPT,
			                "truncated: it ends before its data does (a copy "
			                "cut short, or a disk that filled while it was written); "
			                "nothing was staged: copy or pack it again (%s)",
			                m);
		goto out;
	}
	stg__log(ctx, STG_LOG_INFO,
	         "'%s' is not a pack: it was read and unpacked in one stream, with no "
	         "parallel extraction; 'stager pack' makes it faster to stage",
	         s->name);
	res->source_bytes += u.bytes;
	res->files = u.files;
	res->content_bytes = u.content;
	memcpy(res->digest, u.sha, 32);
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(u.sha, hex);
	stg_meta m = {0};
	snprintf(m.kind, sizeof m.kind, "archive");
	snprintf(m.source, sizeof m.source, "%s", s->name);
	m.size = u.disk + 64 * 1024;
	m.files = u.files;
	m.content = u.content;
	/* published unless the same bytes are cached already (another name) */
	err = stg__entry_publish(ctx, c, &eb, hex, &m);
out:
	stg__entry_end(c, &eb);
	return err;
}

const stg_source_ops stg__source_archive = {
        .kind = "archive",
        .claims = archive_claims,
        .open = archive_open,
        .read = stg__source_pread,
        .build = archive_build,
        .bare = 1u << STG_EINTR | 1u << STG_ENOMEM,
        .open_names_it = true,
};
