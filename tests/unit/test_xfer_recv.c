/* test_xfer_recv.c - the receiving end's first steps (xfer_recv.c), on
 * manifests made here and read from memory: a manifest read whole with
 * its digest and root; parents that are not directories of the tree,
 * hardlinks to what is not an earlier file, a path twice, a count that
 * does not match, other messages and a cut stream refused; which files
 * are received as resumable copies; and what the partial directory keeps
 * from an earlier transfer (files and directories as the manifest has
 * them, partial copies of its files) and removes (the rest, links first
 * of all, never through them). */
#include "unit.h"
#include "xfer_recv.h"

#include <errno.h>

typedef struct mf {
	char *path;
	int fd;
	stg_wire w;
	uint8_t batch[1 << 16];
	size_t blen;
	uint64_t count;
} mf;

/* A manifest stream written to a file. */
static void mf_begin(mf *m, stg_ctx *ctx, const char *dir)
{
	m->path = ut_join(dir, "stream");
	m->fd = open(m->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(stg__wire_init(&m->w, ctx, -1, m->fd), STG_OK);
	m->blen = 0;
	m->count = 0;
}

static void mf_add(mf *m, uint8_t type, const char *path, uint64_t size, const char *link)
{
	stg_wentry e = {.type = type,
	                .mode = type == STG_DIR ? 0755 : 0644,
	                .size = type == STG_FILE ? size : 0,
	                .mtime = 1700000000,
	                .path = (char *)path,
	                .link = (char *)link};
	if (type == STG_FILE)
		memset(e.xxh3, 0x11, 16);
	size_t n = stg__wentry_encode(&e, m->batch + m->blen + 2);
	m->batch[m->blen] = (uint8_t)n;
	m->batch[m->blen + 1] = (uint8_t)(n >> 8);
	m->blen += 2 + n;
	m->count++;
}

static void mf_flush(mf *m)
{
	if (m->blen)
		assert_int_equal(stg__wire_send_chunk(&m->w, STG_W_ENTRY, m->batch, m->blen),
		                 STG_OK);
	m->blen = 0;
}

static void mf_end(mf *m, uint64_t count)
{
	mf_flush(m);
	uint8_t end[52];
	stg__put64(end, count);
	for (int i = 0; i < 32; i++)
		end[8 + i] = (uint8_t)i;
	stg__put32(end + 40, 040750);
	stg__put64(end + 44, 1234567);
	assert_int_equal(stg__wire_send(&m->w, STG_W_ENTRIES_END, end, sizeof end, NULL, 0),
	                 STG_OK);
}

typedef struct fx {
	UT_FX;
	mf m;
	uint8_t *img;
	size_t img_len;
	stg_wire rw;
	receiver rc;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->rc.part = -1;
	mf_begin(&f->m, f->ctx, f->dir);
	*state = f;
	return 0;
}

static void rc_free(fx *f)
{
	receiver *rc = &f->rc;
	for (size_t i = 0; i < rc->n; i++) {
		XXH3_freeState(rc->r[i].pre);
		free(rc->r[i].rname);
	}
	free(rc->r);
	stg__arena_free(&rc->names); /* the entries' paths */
	if (rc->map)
		stg__strmap_free(&rc->paths);
	if (rc->rmap)
		stg__strmap_free(&rc->rnames);
	if (rc->part >= 0)
		close(rc->part);
	memset(rc, 0, sizeof *rc);
	rc->part = -1;
	if (f->img) {
		stg__wire_free(&f->rw);
		free(f->img);
		f->img = NULL;
	}
}

static int teardown(void **state)
{
	fx *f = *state;
	rc_free(f);
	stg__wire_free(&f->m.w);
	close(f->m.fd);
	free(f->m.path);
	return ut_teardown(state);
}

/* Read the stream written so far with a fresh receiver. */
static stg_err read_manifest(fx *f)
{
	rc_free(f);
	f->img = ut_read(f->m.path, &f->img_len);
	assert_int_equal(stg__wire_init(&f->rw, f->ctx, -1, -1), STG_OK);
	f->rw.mem = f->img;
	f->rw.mem_len = f->img_len;
	receiver *rc = &f->rc;
	rc->ctx = f->ctx;
	rc->w = &f->rw;
	rc->part = rc->dest = rc->parent = rc->rec = -1;
	assert_int_equal(stg__strmap_init(&rc->paths, 64), 0);
	rc->map = true;
	return stg__recv_read_manifest(rc);
}

static void restart(fx *f)
{
	stg__wire_free(&f->m.w);
	close(f->m.fd);
	free(f->m.path);
	mf_begin(&f->m, f->ctx, f->dir);
}

static void test_good(void **state)
{
	fx *f = *state;
	mf *m = &f->m;
	mf_add(m, STG_DIR, "d", 0, NULL);
	mf_add(m, STG_FILE, "d/big", 2 << 20, NULL);
	mf_flush(m); /* two batches */
	mf_add(m, STG_FILE, "d/small", 10, NULL);
	mf_add(m, STG_HARDLINK, "hard", 0, "d/big");
	mf_add(m, STG_SYMLINK, "link", 0, "d/small");
	mf_end(m, 5);
	assert_int_equal(read_manifest(f), STG_OK);
	receiver *rc = &f->rc;
	assert_int_equal(rc->n, 5);
	assert_string_equal(rc->r[1].e.path, "d/big");
	assert_int_equal(rc->r[1].e.size, 2 << 20);
	assert_string_equal(rc->r[3].e.link, "d/big");
	assert_int_equal(rc->digest[31], 31);
	assert_int_equal(rc->root_mode, 0750);
	assert_int_equal(rc->root_mtime, 1234567);
	assert_int_equal(stg__strmap_get(&rc->paths, "link", 4), 4);
	/* the large file is received as a resumable copy, the small one not */
	assert_int_equal(stg__recv_resume_names_init(rc), STG_OK);
	assert_true(rc->r[1].resumable);
	assert_false(rc->r[2].resumable);
	char data[XFER_RNAME], rec[XFER_RNAME];
	stg__resume_names("d/big", data, rec);
	assert_string_equal(rc->r[1].rname, data);
}

static void test_hostile(void **state)
{
	fx *f = *state;
	static const struct {
		const char *why;
		int kind;
	} cases[] = {
	        {"refusing 'x/y': its parent is not a directory of the tree", 0},
	        {"refusing 'f/y': its parent is not a directory of the tree", 1},
	        {"refusing 'h': a hardlink to what is not a file before it", 2},
	        {"refusing 'h': a hardlink to what is not a file before it", 3},
	        {"'d' twice in the manifest", 4},
	        {"the manifest arrived incomplete", 5},
	        {"protocol error: message 9 in the manifest", 6},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		restart(f);
		mf *m = &f->m;
		uint64_t count = 0;
		mf_add(m, STG_DIR, "d", 0, NULL);
		mf_add(m, STG_FILE, "f", 5, NULL);
		count = 2;
		switch (cases[i].kind) {
		case 0: mf_add(m, STG_FILE, "x/y", 1, NULL), count++; break;
		case 1: mf_add(m, STG_FILE, "f/y", 1, NULL), count++; break;
		case 2: mf_add(m, STG_HARDLINK, "h", 0, "d"), count++; break;
		case 3:
			mf_add(m, STG_HARDLINK, "h", 0, "later");
			mf_add(m, STG_FILE, "later", 1, NULL);
			count += 2;
			break;
		case 4: mf_add(m, STG_DIR, "d", 0, NULL), count++; break;
		case 5: count++; break;
		case 6: {
			mf_flush(m);
			uint8_t x[9] = {0};
			assert_int_equal(stg__wire_send(&m->w, STG_W_FILE, x, sizeof x, NULL, 0),
			                 STG_OK);
			break;
		}
		}
		mf_end(m, count);
		stg_err err = read_manifest(f);
		assert_int_not_equal(err, STG_OK);
		if (strcmp(stg_errmsg(f->ctx), cases[i].why))
			fail_msg("case %zu: '%s', want '%s'", i, stg_errmsg(f->ctx), cases[i].why);
		assert_int_equal(err, cases[i].kind == 6 ? STG_EREMOTE : STG_ECORRUPT);
	}
	/* a stream cut before its end */
	restart(f);
	mf_add(&f->m, STG_DIR, "d", 0, NULL);
	mf_flush(&f->m);
	assert_int_equal(read_manifest(f), STG_EREMOTE);
	/* the sender's ERROR: its code and message */
	restart(f);
	stg__fail(f->ctx, STG_ENOENT, "cannot read '/src': gone");
	stg__wire_send_error(&f->m.w, STG_ENOENT);
	assert_int_equal(read_manifest(f), STG_ENOENT);
	assert_non_null(strstr(stg_errmsg(f->ctx), "cannot read '/src': gone"));
}

/* A manifest path that is itself a resume name keeps that file from being
 * received as a resumable copy (the names would collide in the partial
 * root). */
static void test_resume_name_taken(void **state)
{
	fx *f = *state;
	char data[XFER_RNAME], rec[XFER_RNAME];
	stg__resume_names("big", data, rec);
	mf_add(&f->m, STG_FILE, "big", 4 << 20, NULL);
	mf_add(&f->m, STG_FILE, data, 1, NULL);
	mf_end(&f->m, 2);
	assert_int_equal(read_manifest(f), STG_OK);
	assert_int_equal(stg__recv_resume_names_init(&f->rc), STG_OK);
	assert_false(f->rc.r[0].resumable);
}

static void test_clean_partial(void **state)
{
	fx *f = *state;
	mf *m = &f->m;
	mf_add(m, STG_DIR, "d", 0, NULL);
	mf_add(m, STG_FILE, "d/big", 2 << 20, NULL);
	mf_add(m, STG_FILE, "d/was-dir", 3, NULL);
	mf_add(m, STG_DIR, "d/was-file", 0, NULL);
	mf_add(m, STG_SYMLINK, "link", 0, "d/big");
	mf_end(m, 5);
	assert_int_equal(read_manifest(f), STG_OK);
	assert_int_equal(stg__recv_resume_names_init(&f->rc), STG_OK);
	/* what an earlier transfer left */
	char *part = ut_join(f->dir, "part");
	mkdir(part, 0700);
	ut_mkdir(part, "d");
	ut_write(part, "d/big", "old", 3);
	ut_mkdir(part, "d/was-dir");
	ut_write(part, "d/was-dir/x", "x", 1);
	ut_write(part, "d/was-file", "x", 1);
	ut_write(part, "stale", "x", 1);
	ut_mkdir(part, "stale-dir");
	ut_write(part, "stale-dir/y", "y", 1);
	char data[XFER_RNAME], rec[XFER_RNAME], odata[XFER_RNAME], orec[XFER_RNAME];
	stg__resume_names("d/big", data, rec);
	stg__resume_names("d/gone", odata, orec);
	ut_write(part, data, "partial", 7);
	ut_write(part, rec, "record", 6);
	ut_write(part, odata, "partial", 7);
	ut_write(part, orec, "record", 6);
	char *outside = ut_join(f->dir, "outside");
	mkdir(outside, 0755);
	ut_write(outside, "keep", "k", 1);
	char *l = ut_join(part, "link"), *l2 = ut_join(part, "d/escape");
	assert_int_equal(symlink("d/big", l), 0);
	assert_int_equal(symlink(outside, l2), 0);
	char *d = ut_join(part, "d");
	chmod(d, 0500); /* a run killed after it set the final modes */
	f->rc.part = open(part, O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__recv_clean_partial(&f->rc), STG_OK);
	int p = f->rc.part;
	assert_true(ut_exists_at(p, "d"));
	assert_true(ut_exists_at(p, "d/big"));
	assert_true(ut_exists_at(p, data));
	assert_true(ut_exists_at(p, rec));
	assert_false(ut_exists_at(p, odata));
	assert_false(ut_exists_at(p, orec));
	assert_false(ut_exists_at(p, "d/was-dir"));
	assert_false(ut_exists_at(p, "d/was-file"));
	assert_false(ut_exists_at(p, "stale"));
	assert_false(ut_exists_at(p, "stale-dir"));
	assert_false(ut_exists_at(p, "link"));
	assert_false(ut_exists_at(p, "d/escape"));
	char *keep = ut_join(outside, "keep");
	assert_int_equal(access(keep, F_OK), 0);
	struct stat st;
	assert_int_equal(stat(d, &st), 0);
	assert_true(st.st_mode & S_IWUSR);
	free(keep);
	free(d);
	free(l);
	free(l2);
	free(outside);
	free(part);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_good),
        T(test_hostile),
        T(test_resume_name_taken),
        T(test_clean_partial),
};

UT_MAIN(tests)
