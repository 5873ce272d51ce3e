/*
 * pack_read.c - open a pack: find and decode its trailer with one read at
 * the end of the file (two when the manifest is larger than the first
 * read), and hand out its manifest.
 */
#include "pack_read.h"
#include "pace.h"
#include "ctx.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int stg__pack_pread(const stg_pack *p, void *buf, size_t len, uint64_t off)
{
	if (p->fd >= 0) {
		/* what the trailer's read brought in is not read again (the last
		 * frame, a whole small pack): the page cache may not hold it */
		if (p->tail_len && off + len > p->tail_off && off < p->size) {
			uint64_t from = off > p->tail_off ? off : p->tail_off;
			uint64_t to = off + len < p->size ? off + len : p->size;
			memcpy((uint8_t *)buf + (from - off), p->tail + (from - p->tail_off),
			       (size_t)(to - from));
			if (to < off + len) { /* past the end */
				errno = 0;
				return -1;
			}
			len = (size_t)(from - off);
			if (!len)
				return 0;
		}
		if (p->bw)
			stg__bucket_take(p->bw_ctx, p->bw, (double)len);
		return stg__pread_full(p->fd, buf, len, off);
	}
	if (off > p->size || len > p->size - off) {
		errno = 0;
		return -1;
	}
	memcpy(buf, p->mem + off, len);
	return 0;
}

uint64_t stg__pack_unread(const stg_pack *p, uint64_t off, uint64_t len)
{
	if (p->fd < 0 || !p->tail_len || off + len <= p->tail_off)
		return len;
	return off < p->tail_off ? p->tail_off - off : 0;
}

const char *stg__rec_path(const stg_pack *p, const stg_rec *r, char *buf)
{
	return stg__trailer_path(&p->t, r, buf);
}

const char *stg__rec_link(const stg_pack *p, const stg_rec *r)
{
	return stg__trailer_link(&p->t, r);
}

static stg_err read_trailer(stg_ctx *ctx, stg_pack *p)
{
	size_t first = p->size < STG_TAIL_READ ? (size_t)p->size : STG_TAIL_READ;
	uint8_t *tail = malloc(first ? first : 1);
	if (!tail)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	if (stg__pack_pread(p, tail, first, p->size - first)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "reading the pack's trailer");
		goto out;
	}
	size_t need = 0;
	err = stg__trailer_decode(ctx, tail, first, p->size, &p->t, &need);
	if (!err && !need && p->fd >= 0) {
		/* kept: the frames it ends with need not be read again */
		p->tail = tail;
		p->tail_len = first;
		p->tail_off = p->size - first;
		return STG_OK;
	}
	if (err || !need)
		goto out;
	/* the manifest is larger than the first read: read the rest of it.
	 * need is bounded by the file size, which the footer was checked
	 * against. */
	uint8_t *big = realloc(tail, need);
	if (!big) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory reading a %zu-byte trailer", need);
		goto out;
	}
	tail = big;
	memmove(tail + (need - first), tail, first);
	if (stg__pack_pread(p, tail, need - first, p->size - need)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "reading the pack's trailer");
		goto out;
	}
	err = stg__trailer_decode(ctx, tail, need, p->size, &p->t, &need);
	if (!err && need)
		err = stg__fail(ctx, STG_ECORRUPT, "damaged pack: trailer size changed");
	free(tail);
#ifdef __GLIBC__
	/* a large trailer's buffers go back to the system now, not at exit
	 * (glibc keeps freed blocks below its growing mmap threshold) */
	malloc_trim(0);
#endif
	return err;
out:
	free(tail);
	return err;
}

stg_err stg_pack_open_fd(stg_ctx *ctx, int fd, stg_pack **out)
{
	*out = NULL;
	struct stat st;
	if (fstat(fd, &st))
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot stat the pack");
	if (S_ISDIR(st.st_mode))
		return stg__fail(ctx, STG_ENOENT, "is a directory, not a pack");
	if (!S_ISREG(st.st_mode))
		return stg__fail(ctx, STG_ENOENT, "not a regular file");
	stg_pack *p = calloc(1, sizeof *p);
	if (!p)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (p->fd < 0) {
		free(p);
		return stg__fail_errno(ctx, STG_EIO, errno, "dup");
	}
	p->size = (uint64_t)st.st_size;
	p->dev = st.st_dev;
	stg_err err = read_trailer(ctx, p);
	if (err) {
		stg_pack_close(p);
		return err;
	}
	*out = p;
	return STG_OK;
}

stg_err stg_pack_open(stg_ctx *ctx, const char *path, stg_pack **out)
{
	*out = NULL;
	/* without blocking: a FIFO in a pack's place would wait for a writer
	 * (open_fd then refuses what is not a regular file) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot open '%s'", path);
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	stg_err err = stg_pack_open_fd(ctx, fd, out);
	close(fd);
	if (err) {
		/* put the path in front of the detail (the errno stays) */
		char msg[STG_ERRMSG_MAX];
		snprintf(msg, sizeof msg, "%s", ctx->errmsg);
		int errnum = ctx->errnum;
		stg__fail(ctx, err, "'%s': %s", path, msg);
		ctx->errnum = errnum;
	}
	return err;
}

stg_err stg_pack_open_mem(stg_ctx *ctx, const void *buf, size_t len, stg_pack **out)
{
	*out = NULL;
	stg_pack *p = calloc(1, sizeof *p);
	if (!p)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	p->fd = -1;
	p->mem = buf;
	p->size = len;
	stg_err err = read_trailer(ctx, p);
	if (err) {
		stg_pack_close(p);
		return err;
	}
	*out = p;
	return STG_OK;
}

void stg_pack_close(stg_pack *p)
{
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	stg__trailer_free(&p->t);
	free(p->tail);
	free(p);
}

void stg_pack_get_info(const stg_pack *p, stg_pack_info *info)
{
	memset(info, 0, sizeof *info);
	memcpy(info->digest, p->t.digest, STG_DIGEST_LEN);
	info->pack_size = p->size;
	info->data_size = p->t.data_size;
	info->tar_size = p->t.tar_size;
	info->content_size = p->t.content_size;
	info->entries = p->t.n_entries;
	info->frames = p->t.n_frames;
	info->deltas = p->t.n_deltas;
	info->format_version = p->t.version ? p->t.version : STG_FORMAT_VERSION;
	for (size_t i = 0; i < p->t.n_entries; i++) {
		switch (p->t.recs[i].type) {
		case STG_FILE: info->files++; break;
		case STG_DIR: info->dirs++; break;
		case STG_SYMLINK: info->symlinks++; break;
		case STG_HARDLINK: info->hardlinks++; break;
		}
	}
}

size_t stg_pack_count(const stg_pack *p)
{
	return p->t.n_entries;
}

int stg_pack_entry(const stg_pack *p, size_t i, stg_entry *e)
{
	if (i >= p->t.n_entries)
		return -1;
	const stg_rec *r = &p->t.recs[i];
	/* a path in a directory is built, into this thread's buffer */
	static _Thread_local char path[STG_PATH_MAX + 1];
	e->path = stg__rec_path(p, r, path);
	e->link = stg__rec_link(p, r);
	e->type = (stg_type)r->type;
	e->mode = r->mode;
	e->size = r->size;
	e->mtime = r->mtime;
	e->mtime_nsec = r->mtime_nsec;
	e->tar_offset = r->tar_off;
	e->data_offset = r->data_off;
	memcpy(e->xxh3, r->xxh3, 16);
	return 0;
}

int stg_pack_delta(const stg_pack *p, size_t i, uint8_t base[STG_DIGEST_LEN], const char **name)
{
	if (i >= p->t.n_deltas)
		return -1;
	memcpy(base, p->t.deltas[i].base, STG_DIGEST_LEN);
	*name = p->t.names + p->t.deltas[i].name_off;
	return 0;
}

int stg_pack_frame(const stg_pack *p, size_t i, uint64_t *offset, uint64_t *size,
                   uint64_t *tar_offset, uint64_t *tar_size)
{
	if (i >= p->t.n_frames)
		return -1;
	const stg_frame *f = &p->t.frames[i];
	*offset = f->comp_off;
	*size = f->comp_size;
	*tar_offset = f->raw_off;
	*tar_size = f->raw_size;
	return 0;
}

bool stg__pack_changed(const stg_pack *p, const struct stat *then)
{
	/* a rename over the pack unlinks it, which changes its ctime but not
	 * its bytes: the ctime counts only while the links stay as they were */
	struct stat st;
	return !(fstat(p->fd, &st) == 0 && st.st_size == then->st_size &&
	         st.st_mtim.tv_sec == then->st_mtim.tv_sec &&
	         st.st_mtim.tv_nsec == then->st_mtim.tv_nsec &&
	         (st.st_nlink != then->st_nlink || (st.st_ctim.tv_sec == then->st_ctim.tv_sec &&
	                                            st.st_ctim.tv_nsec == then->st_ctim.tv_nsec)));
}
