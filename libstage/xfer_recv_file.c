/*
 * xfer_recv_file.c - the receiving end's files as they arrive: each FILE
 * checked against what was asked for, written under a temporary name (a
 * large one as a partial copy kept if the transfer is cut, xfer_resume.c),
 * whole or patched from its old version (librsync), never past its
 * declared size, and renamed to its path only once its XXH3-128 matches.
 * A file that cannot be written for want of space leaves no partial copy:
 * its size is the peer's word, and a copy that filled the disk is no
 * resume.  xfer.c explains the whole transfer.
 */
#include "xfer_recv_file.h"
#include "rsjob.h"
#include "xfer_recv.h"
#include "ctx.h"
#include "bytes.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A file being received. */
typedef struct incoming {
	receiver *rc;
	const stg_wentry *e;
	int fd, basis;
	uint64_t size;
	XXH3_state_t *xs;
	stg_rfile *rf; /* a partial copy, kept if the transfer is cut */
} incoming;

static stg_err write_sink(void *arg, const uint8_t *p, size_t n)
{
	incoming *in = arg;
	in->size = stg__sat_add(in->size, n);
	if (in->size > in->e->size)
		return stg__fail(
		        in->rc->ctx, STG_ECORRUPT, "'%s': more data than its %llu bytes arrived",
		        stg__recv_shown(in->rc, in->e->path), (unsigned long long)in->e->size);
	XXH3_128bits_update(in->xs, p, n);
	if (in->rf ? stg__rfile_write(in->rf, p, n) : stg__write_full(in->fd, p, n))
		return stg__fail_errno(in->rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot write '%s'", stg__recv_shown(in->rc, in->e->path));
	in->rc->done = stg__sat_add(in->rc->done, n);
	stg__progress(in->rc->ctx, in->rc->what, in->rc->done, in->rc->total);
	return STG_OK;
}

stg_err stg__recv_receive_file(receiver *rc, const uint8_t *p, uint32_t len)
{
	stg_wfile f;
	stg_err err = stg__file_decode(rc->w, p, len, &f);
	if (err)
		return err;
	uint32_t idx = f.idx;
	uint8_t kind = f.kind;
	/* the data starts at 0 or where the offer ends, nowhere else */
	if (idx >= rc->n || !rc->r[idx].wanted || rc->r[idx].received ||
	    (kind == STG_WANT_DELTA) != (rc->r[idx].basis != BASIS_NONE) ||
	    (f.off && f.off != rc->r[idx].offer))
		return stg__fail(rc->ctx, STG_EREMOTE,
		                 "protocol error: entry %u was not asked for like this", idx);
	rentry *re = &rc->r[idx];
	incoming in = {.rc = rc, .e = &re->e, .fd = -1, .basis = -1, .size = f.off};
	stg_rfile rf = {.dir = -1, .fd = -1, .ck = -1};
	char tmp[XFER_RNAME];
	rs_job_t *job = NULL;
	if (re->resumable) {
		in.fd = stg__rfile_open(&rf, rc->part, re->e.path, f.off, rc->boot) ? -1 : rf.fd;
		in.rf = &rf;
		snprintf(tmp, sizeof tmp, "%s", rf.name);
	} else {
		stg__recv_tmp_name(rc, tmp, sizeof tmp);
		in.fd = openat(rc->part, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		               0600);
	}
	/* the offered bytes' hash goes on, or, refused, they are sent again */
	re->from = f.off;
	if (f.off) {
		in.xs = re->pre;
		re->pre = NULL;
	} else {
		rc->total = stg__sat_add(rc->total, re->offer);
	}
	if (in.fd < 0 || (!in.xs && !(in.xs = XXH3_createState()))) {
		err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot create '%s'", stg__recv_shown(rc, re->e.path));
		goto out;
	}
	if (!f.off)
		XXH3_128bits_reset(in.xs);
	if (kind == STG_WANT_DELTA) {
		struct stat st;
		in.basis = stg__recv_open_file(re->basis == BASIS_PARTIAL ? rc->part : rc->dest,
		                               re->e.path, &st);
		if (in.basis < 0 || !(job = rs_patch_begin(stg__basis_copy, &in.basis))) {
			err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read the old '%s'",
			                      stg__recv_shown(rc, re->e.path));
			goto out;
		}
	}
	bool done = false;
	for (;;) {
		uint8_t t;
		const uint8_t *dp;
		uint32_t dl;
		if ((err = stg__wire_read(rc->w, &t, &dp, &dl)))
			goto out;
		if (t == STG_W_FILE_END)
			break;
		if (t != STG_W_DATA) {
			err = stg__fail(rc->ctx, STG_EREMOTE,
			                "protocol error: message %u inside a file", t);
			goto out;
		}
		const uint8_t *raw;
		size_t rl;
		if ((err = stg__wire_data(rc->w, dp, dl, &raw, &rl)))
			goto out;
		if (job) {
			if (done && rl) {
				err = stg__fail(rc->ctx, STG_ECORRUPT, "'%s': data after its delta",
				                stg__recv_shown(rc, re->e.path));
				goto out;
			}
			err = stg__job_feed(rc->ctx, job, raw, rl, false, rc->out, write_sink, &in,
			                    &done);
		} else {
			err = write_sink(&in, raw, rl);
		}
		if (err)
			goto out;
	}
	if (job && !done &&
	    (err = stg__job_feed(rc->ctx, job, NULL, 0, true, rc->out, write_sink, &in, &done)))
		goto out;
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(in.xs));
	if (in.size != re->e.size) {
		err = stg__fail(rc->ctx, STG_ECORRUPT,
		                "'%s' arrived damaged (%llu bytes, expected %llu); nothing was "
		                "published",
		                stg__recv_shown(rc, re->e.path), (unsigned long long)in.size,
		                (unsigned long long)re->e.size);
		goto out;
	}
	if (memcmp(c.digest, re->e.xxh3, 16)) {
		err = stg__fail(rc->ctx, STG_ECORRUPT,
		                "'%s' arrived damaged (its XXH3-128 does not match the sender's); "
		                "nothing was published",
		                stg__recv_shown(rc, re->e.path));
		goto out;
	}
	if ((err = stg__recv_finish_file(rc, in.fd, tmp, &re->e)))
		goto out;
	if (in.rf)
		stg__rfile_done(in.rf);
	re->received = re->checked = true;
out:
	if (job)
		rs_job_free(job);
	XXH3_freeState(in.xs);
	if (in.basis >= 0)
		close(in.basis);
	if (in.rf) {
		/* cut: what arrived stays for the next transfer to offer;
		 * damaged, or what filled the disk: it goes */
		stg__rfile_close(in.rf, err != STG_ECORRUPT && err != STG_ENOSPC);
	} else {
		if (in.fd >= 0)
			close(in.fd);
		if (err)
			unlinkat(rc->part, tmp, 0);
	}
	return err;
}
