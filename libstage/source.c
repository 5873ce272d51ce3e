/*
 * source.c - what every kind of dataset source shares: opening it within
 * a shared-FS slot, reading a file by range within the bandwidth limit,
 * letting it go while another process builds its entry and taking it
 * again, closing it.  The kinds (source_pack.c, source_archive.c,
 * source_dir.c) are built on these; stage.c chooses among them.
 *
 * A source holds its slot from open to close (except while let go), so the
 * node's slots count the processes reading the shared filesystem; its
 * reads are charged to the bandwidth limit unless it is a local copy.
 * What is read is what was opened: the kind is chosen on the open file's
 * fstat(), not on the stat() that came before the slot.
 */
#include "source.h"
#include "ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

stg_err stg__source_open(stg_ctx *ctx, stg_cache *c, const char *name, const struct stat *st,
                         stg_source *s)
{
	memset(s, 0, sizeof *s);
	s->name = s->path = name;
	s->fd = -1;
	s->slot.fd = s->slot.lease_fd = -1;
	s->bw = &c->lim.bw;
	s->st = *st;
	/* a miss reads the shared filesystem: within a slot */
	stg_err err = stg__slot_acquire(ctx, &c->lim, &s->slot);
	if (err)
		return err;
	if (S_ISREG(st->st_mode)) {
		s->fd = open(name,
		             O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO put there meanwhile */
		if (s->fd < 0)
			return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", name);
		fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_NONBLOCK);
		/* what is read is what was opened: SRC may have been replaced
		 * while this stage waited for its slot */
		if (fstat(s->fd, &s->st) || !S_ISREG(s->st.st_mode))
			return stg__fail(ctx, STG_ENOENT, "'%s' is not a file or directory", name);
		stg__ident_of(&s->st, &s->id);
		s->indexed = true;
	}
	return STG_OK;
}

void stg__source_let_go(stg_source *s)
{
	if (s->ops && s->ops->close)
		s->ops->close(s);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	stg__slot_release(&s->slot);
}

stg_err stg__source_take_again(stg_ctx *ctx, stg_cache *c, stg_source *s)
{
	stg_err err;
	if (!s->local && (err = stg__slot_acquire(ctx, &c->lim, &s->slot)))
		return err;
	if ((s->fd = open(s->path, O_RDONLY | O_CLOEXEC)) < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", s->path);
	return s->ops->reopen(ctx, c, s);
}

void stg__source_close(stg_source *s)
{
	stg__source_let_go(s);
	s->ops = NULL;
}

ssize_t stg__source_pread(stg_ctx *ctx, const stg_source *s, void *buf, size_t len, uint64_t off)
{
	stg__bucket_take(ctx, s->bw, (double)len);
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(s->fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}
