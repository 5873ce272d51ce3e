/* test_collect.c - stg_collect (collect.c) from a scratch tree to a
 * "shared" directory, both temporary: the first run sends everything with
 * modes, mtimes and links; an unchanged run sends nothing and leaves DEST
 * alone; a changed file is sent, a touched one is not, a removed one stays
 * in DEST; a DEST removed since is filled again; --pack makes one verified
 * pack, and a new one only on a change; a file that keeps changing while
 * it is copied never replaces the good copy; leftovers of a killed collect
 * are removed; errors are named. */
#include "unit.h"
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

typedef ut_fx fx;

static void set_mtime(const char *dir, const char *name, time_t t)
{
	char *p = ut_join(dir, name);
	struct timespec ts[2] = {{t, 0}, {t, 123}};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
	free(p);
}

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "scratch-out");
	f->dest = ut_join(f->dir, "shared/results");
	mkdir(f->src, 0755);
	ut_mkdir(f->src, "ckpt");
	ut_mkdir(f->src, "ckpt/deep");
	ut_fill_file(f->src, "ckpt/model.bin", 200000, 1);
	ut_fill_file(f->src, "ckpt/deep/opt.bin", 5000, 2);
	ut_write(f->src, "log.txt", "epoch 1\n", 8);
	ut_write(f->src, "empty", "", 0);
	char *x = ut_join(f->src, "run.sh");
	ut_write(f->src, "run.sh", "#!/bin/sh\n", 10);
	chmod(x, 0750);
	free(x);
	ut_symlink(f->src, "latest", "ckpt/model.bin");
	set_mtime(f->src, "ckpt/model.bin", 1700000000);
	set_mtime(f->src, "latest", 1700000001);
	set_mtime(f->src, "ckpt/deep", 1700000002);
	set_mtime(f->src, "ckpt", 1700000003);
	f->c = ut_cache(f->ctx, f->dir, NULL);
	*state = f;
	return 0;
}

static stg_err collect(fx *f, int pack, stg_collect_result *r)
{
	stg_collect_opts o;
	stg_collect_opts_init(&o);
	o.pack = pack;
	stg_err err = stg_collect(f->ctx, f->c, f->src, f->dest, &o, r);
	return err;
}

typedef struct prog {
	int calls;
	uint64_t done, total;
} prog;

static void progress(void *arg, const char *what, uint64_t done, uint64_t total)
{
	prog *p = arg;
	assert_string_equal(what, "collect");
	p->calls++;
	p->done = done;
	p->total = total;
}

static void test_incremental(void **state)
{
	fx *f = *state;
	prog p = {0};
	stg_set_progress(f->ctx, progress, &p);
	stg_collect_result r;
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_string_equal(r.dest, f->dest);
	assert_int_equal(r.files, 5);
	assert_int_equal(r.sent_files, 6); /* and the link */
	assert_int_equal(r.sent_bytes, 200000 + 5000 + 8 + 10);
	assert_int_equal(r.unchanged, 0);
	assert_int_equal(r.failed, 0);
	assert_int_equal(p.done, r.sent_bytes);
	assert_int_equal(p.total, r.sent_bytes);
	stg_collect_result_free(&r);
	ut_tree_holds(f->src, f->dest, false);
	ut_no_temporaries(f->dest, true);
	/* directory mtimes as SRC's, once filled */
	char *ck = ut_join(f->dest, "ckpt");
	struct stat st;
	assert_int_equal(stat(ck, &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1700000003);
	/* unchanged: nothing sent, DEST not touched */
	struct stat before;
	assert_int_equal(stat(f->dest, &before), 0);
	p.calls = 0;
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 0);
	assert_int_equal(r.sent_bytes, 0);
	assert_int_equal(r.unchanged, 5);
	assert_int_equal(p.calls, 0);
	stg_collect_result_free(&r);
	struct stat after;
	assert_int_equal(stat(f->dest, &after), 0);
	assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	assert_int_equal(before.st_ctim.tv_nsec, after.st_ctim.tv_nsec);
	/* a changed file: only it */
	ut_write(f->src, "log.txt", "epoch 1\nepoch 2\n", 16);
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 1);
	assert_int_equal(r.sent_bytes, 16);
	assert_int_equal(r.unchanged, 4);
	stg_collect_result_free(&r);
	ut_tree_holds(f->src, f->dest, false);
	/* touched, same bytes: hashed here, not sent */
	set_mtime(f->src, "ckpt/deep/opt.bin", 1800000000);
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 0);
	stg_collect_result_free(&r);
	/* the same size, other bytes: sent */
	ut_fill_file(f->src, "ckpt/deep/opt.bin", 5000, 3);
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 1);
	stg_collect_result_free(&r);
	/* a new mode alone: sent */
	char *x = ut_join(f->src, "run.sh");
	chmod(x, 0700);
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 1);
	stg_collect_result_free(&r);
	ut_tree_holds(f->src, f->dest, false);
	/* removed in SRC: DEST keeps it */
	assert_int_equal(unlink(x), 0);
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 0);
	stg_collect_result_free(&r);
	char *dx = ut_join(f->dest, "run.sh");
	assert_int_equal(access(dx, F_OK), 0);
	/* DEST removed since: everything again */
	ut_rmtree(f->dest);
	f->log.text[0] = '\0';
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 5);
	stg_collect_result_free(&r);
	ut_tree_holds(f->src, f->dest, false);
	assert_non_null(strstr(f->log.text, "is not the directory collected to before: sending "
	                                    "everything"));
	ut_no_temporaries(f->dest, true);
	free(dx);
	free(x);
	free(ck);
}

static void test_pack(void **state)
{
	fx *f = *state;
	stg_collect_result r;
	assert_int_equal(collect(f, 1, &r), STG_OK);
	char want[4200];
	snprintf(want, sizeof want, "%s.tar.zst", f->dest);
	assert_string_equal(r.dest, want);
	assert_int_equal(r.files, 5);
	assert_int_equal(r.sent_files, 5);
	stg_collect_result_free(&r);
	/* a pack that verifies and holds the tree (the link kept as it is) */
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, want, &p), STG_OK);
	assert_int_equal(stg_verify(f->ctx, p), STG_OK);
	char *out = ut_join(f->dir, "unpacked");
	assert_int_equal(stg_unpack(f->ctx, p, out, NULL, NULL), STG_OK);
	stg_pack_close(p);
	ut_tree_holds(f->src, out, false);
	struct stat st1, st2;
	assert_int_equal(stat(want, &st1), 0);
	/* unchanged: the same pack */
	assert_int_equal(collect(f, 1, &r), STG_OK);
	assert_int_equal(r.sent_files, 0);
	assert_int_equal(r.unchanged, 5);
	stg_collect_result_free(&r);
	assert_int_equal(stat(want, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	/* a file added: a new pack, swapped in whole */
	ut_write(f->src, "new", "n", 1);
	assert_int_equal(collect(f, 1, &r), STG_OK);
	assert_int_equal(r.sent_files, 6);
	stg_collect_result_free(&r);
	assert_int_equal(stat(want, &st2), 0);
	assert_int_not_equal(st1.st_ino, st2.st_ino);
	/* no temporary beside it, none on scratch */
	char *sh = ut_join(f->dir, "shared");
	ut_no_temporaries(sh, true);
	char *col = ut_join(stg_cache_root(f->c), "collect");
	DIR *d = opendir(col);
	struct dirent *de;
	while ((de = readdir(d)))
		assert_null(strstr(de->d_name, ".tar.zst"));
	closedir(d);
	/* the name given with .tar.zst is not doubled */
	stg_collect_opts o;
	stg_collect_opts_init(&o);
	o.pack = 1;
	assert_int_equal(stg_collect(f->ctx, f->c, f->src, want, &o, &r), STG_OK);
	assert_string_equal(r.dest, want);
	stg_collect_result_free(&r);
	free(col);
	free(sh);
	free(out);
}

static void test_errors(void **state)
{
	fx *f = *state;
	stg_collect_result r;
	char *missing = ut_join(f->dir, "missing");
	assert_int_equal(stg_collect(f->ctx, f->c, missing, f->dest, NULL, &r), STG_ENOENT);
	char want[4400];
	snprintf(want, sizeof want, "cannot read '%s': No such file or directory", missing);
	assert_string_equal(stg_errmsg(f->ctx), want);
	stg_collect_result_free(&r);
	char *file = ut_join(f->src, "log.txt");
	assert_int_equal(stg_collect(f->ctx, f->c, file, f->dest, NULL, &r), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is not a directory (collect copies a "
	                                           "directory's contents)"));
	stg_collect_result_free(&r);
	char *inside = ut_join(f->src, "ckpt/out");
	assert_int_equal(stg_collect(f->ctx, f->c, f->src, inside, NULL, &r), STG_EUSAGE);
	snprintf(want, sizeof want, "'%s' is inside '%s': collect it elsewhere", inside, f->src);
	assert_string_equal(stg_errmsg(f->ctx), want);
	stg_collect_result_free(&r);
	assert_int_equal(stg_collect(f->ctx, f->c, f->src, f->src, NULL, &r), STG_EUSAGE);
	stg_collect_result_free(&r);
	/* a sibling whose name starts alike is not inside */
	char *sibling = ut_join(f->dir, "scratch-out2");
	assert_int_equal(stg_collect(f->ctx, f->c, f->src, sibling, NULL, &r), STG_OK);
	stg_collect_result_free(&r);
	/* DEST has a file where SRC has a directory: the rest goes on, the
	 * run fails naming it, the user's file stays */
	char *sh = ut_join(f->dir, "shared");
	assert_int_equal(mkdir(sh, 0755), 0);
	assert_int_equal(mkdir(f->dest, 0755), 0);
	free(sh);
	ut_write(f->dest, "ckpt", "mine", 4);
	f->log.text[0] = '\0';
	assert_int_equal(collect(f, 0, &r), STG_EIO);
	assert_true(r.failed >= 1);
	char *log = ut_join(f->dest, "log.txt");
	assert_int_equal(access(log, F_OK), 0);
	assert_non_null(strstr(stg_errmsg(f->ctx), "of the files could not be collected; first: "));
	assert_non_null(strstr(f->log.text, "cannot collect the directory 'ckpt': DEST has a file "
	                                    "of that name"));
	ut_content_is(f->dest, "ckpt", "mine");
	stg_collect_result_free(&r);
	free(log);
	free(sibling);
	free(inside);
	free(file);
	free(missing);
}

/* A private SRC gives a private DEST. */
static void test_private(void **state)
{
	fx *f = *state;
	assert_int_equal(chmod(f->src, 0700), 0);
	stg_collect_result r;
	assert_int_equal(collect(f, 0, &r), STG_OK);
	stg_collect_result_free(&r);
	struct stat st;
	assert_int_equal(stat(f->dest, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
}

/* A file written while it is copied (a checkpoint being saved) never
 * replaces the good copy; the next collect sends it. */
static void test_changing(void **state)
{
	fx *f = *state;
	stg_collect_result r;
	assert_int_equal(collect(f, 0, &r), STG_OK);
	stg_collect_result_free(&r);
	char *model = ut_join(f->dest, "ckpt/model.bin");
	size_t len0;
	uint8_t *good = ut_read(model, &len0);
	/* large enough that a copy takes a while */
	ut_fill_file(f->src, "ckpt/model.bin", 24 << 20, 9);
	ut_writer w = {.path = ut_join(f->src, "ckpt/model.bin"), .off = 0, .us = 200};
	ut_writer_start(&w);
	f->log.text[0] = '\0';
	stg_err err = collect(f, 0, &r);
	ut_writer_stop(&w);
	assert_int_equal(err, STG_OK);
	assert_int_equal(r.changing, 1);
	assert_int_equal(r.failed, 0);
	stg_collect_result_free(&r);
	assert_non_null(strstr(f->log.text, "'ckpt/model.bin' kept changing while it was "
	                                    "collected: DEST keeps its previous copy"));
	size_t len;
	uint8_t *now = ut_read(model, &len);
	assert_int_equal(len, len0);
	assert_memory_equal(now, good, len);
	free(now);
	ut_no_temporaries(f->dest, true);
	/* settled: the next collect sends it */
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 1);
	assert_int_equal(r.changing, 0);
	stg_collect_result_free(&r);
	ut_tree_holds(f->src, f->dest, false);
	free(good);
	free(w.path);
	free(model);
}

/* progress's first call (a file sent): "zz.pt.tmp", listed, not yet sent,
 * renamed to "zz.pt" (a checkpoint's atomic write) */
static void rename_tmp(void *arg, const char *what, uint64_t done, uint64_t total)
{
	(void)what;
	(void)done;
	(void)total;
	fx *f = arg;
	char *from = ut_join(f->src, "zz.pt.tmp"), *to = ut_join(f->src, "zz.pt");
	if (access(from, F_OK) == 0)
		assert_int_equal(rename(from, to), 0);
	free(from);
	free(to);
}

/* A file renamed away while a collect runs: no warning, its new name sent
 * by the same collect (SRC walked again), and the figures true: what this
 * collect sent before it looked again is sent, not "unchanged". */
static void test_renamed_away(void **state)
{
	fx *f = *state;
	ut_write(f->src, "zz.pt.tmp", "step 1\n", 7);
	stg_set_progress(f->ctx, rename_tmp, f);
	int warned = f->log.warnings;
	stg_collect_result r;
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(f->log.warnings, warned);
	assert_int_equal(r.files, 6);
	assert_int_equal(r.sent_files, 7); /* and the link */
	assert_int_equal(r.unchanged, 0);
	assert_int_equal(r.failed, 0);
	stg_collect_result_free(&r);
	ut_tree_holds(f->src, f->dest, false);
	char *gone = ut_join(f->dest, "zz.pt.tmp");
	assert_int_equal(access(gone, F_OK), -1);
	free(gone);
	/* again, nothing renamed: all unchanged */
	stg_set_progress(f->ctx, NULL, NULL);
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 0);
	assert_int_equal(r.unchanged, 6);
	stg_collect_result_free(&r);
}

/* What a killed collect left: the temporary it logged, and its marker. */
static void test_leftovers(void **state)
{
	fx *f = *state;
	stg_collect_result r;
	assert_int_equal(collect(f, 0, &r), STG_OK);
	stg_collect_result_free(&r);
	/* the record: the only file in collect/ */
	char *col = ut_join(stg_cache_root(f->c), "collect");
	DIR *d = opendir(col);
	struct dirent *de;
	char rec[256] = "";
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			snprintf(rec, sizeof rec, "%s", de->d_name);
	closedir(d);
	assert_int_equal(strlen(rec), 16);
	char *rp = ut_join(col, rec);
	FILE *fp = fopen(rp, "a");
	fputs("t ckpt/.stager-tmp.deadhost.1.0\n", fp);
	fclose(fp);
	ut_write(f->dest, "ckpt/.stager-tmp.deadhost.1.0", "partial", 7);
	/* a change, so that DEST is written to */
	ut_write(f->src, "log.txt", "epoch 3\n", 8);
	assert_int_equal(collect(f, 0, &r), STG_OK);
	assert_int_equal(r.sent_files, 1);
	stg_collect_result_free(&r);
	ut_no_temporaries(f->dest, true);
	/* nothing pending: the record says so */
	char *text = ut_read_text(rp);
	assert_non_null(strstr(text, "x ckpt/.stager-tmp.deadhost.1.0\n"));
	free(text);
	free(rp);
	free(col);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_incremental), T(test_pack),         T(test_errors),    T(test_private),
        T(test_changing),    T(test_renamed_away), T(test_leftovers),
};

UT_MAIN(tests)
