/* test_pack_bases.c - `pack --base` (pack_bases.c): the bases opened once
 * per digest, their deltas named "<pack>.delta-<16 hex>" beside the pack;
 * a missing, damaged or too-long-named base refused before any work; the
 * deltas written into temporaries (each one a delta from its base to the
 * new pack, checked with stg_delta_check), told to delta_done, none from a
 * base that is the new pack itself; published by rename, or removed when
 * freed unpublished; a delta that cannot be created named. */
#include "unit.h"
#include "pack_bases.h"

#include <errno.h>

typedef struct fx {
	UT_FX;
	char *v1, *v2, *v3; /* packs of three versions of src */
	uint8_t d1[STG_DIGEST_LEN], d2[STG_DIGEST_LEN], d3[STG_DIGEST_LEN];
	int told; /* delta_done calls */
	char told_name[256], told_base[4096];
	stg_delta_info told_info;
} fx;

static void pack_version(fx *f, const char *name, char **out, uint8_t digest[STG_DIGEST_LEN])
{
	*out = ut_join(f->dir, name);
	stg_pack_info info;
	ut_pack(f->ctx, f->src, *out, &info);
	memcpy(digest, info.digest, STG_DIGEST_LEN);
}

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_write(f->src, "keep", "the same in every version\n", 26);
	ut_fill_file(f->src, "big", 300000, 1);
	pack_version(f, "v1.tar.zst", &f->v1, f->d1);
	ut_fill_file(f->src, "big", 300000, 2); /* changed */
	ut_write(f->src, "new", "added in v2\n", 12);
	pack_version(f, "v2.tar.zst", &f->v2, f->d2);
	ut_write(f->src, "keep", "changed in v3\n", 14);
	pack_version(f, "v3.tar.zst", &f->v3, f->d3);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	free(f->v1);
	free(f->v2);
	free(f->v3);
	return ut_teardown(state);
}

static void delta_done(void *arg, const char *base, const stg_delta_info *info)
{
	fx *f = arg;
	f->told++;
	snprintf(f->told_base, sizeof f->told_base, "%s", base);
	snprintf(f->told_name, sizeof f->told_name, "%s", info->name);
	f->told_info = *info;
}

static void opts_with(stg_pack_opts *o, const char *const *bases, size_t n)
{
	stg_pack_opts_init(o);
	o->bases = bases;
	o->n_bases = n;
}

/* The delta name a base of digest d gives out. */
static void delta_name(const char *out, const uint8_t d[STG_DIGEST_LEN], char *buf, size_t len)
{
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(d, hex);
	snprintf(buf, len, "%s.delta-%.16s", out, hex);
}

static void test_open(void **state)
{
	fx *f = *state;
	/* v1 twice (once by another name): one delta from it */
	char *v1_again = ut_join(f->dir, "copy-of-v1.tar.zst");
	char cmd[8300];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", f->v1, v1_again);
	assert_int_equal(system(cmd), 0);
	const char *bases[] = {f->v1, f->v2, v1_again};
	stg_pack_opts o;
	opts_with(&o, bases, 3);
	char *out = ut_join(f->dir, "out/new.tar.zst");
	stg_bases b;
	assert_int_equal(stg__bases_open(f->ctx, &o, out, &b), STG_OK);
	assert_int_equal(b.n, 2);
	assert_ptr_equal(b.given[0], f->v1);
	assert_ptr_equal(b.given[1], f->v2);
	assert_memory_equal(b.base[0], f->d1, STG_DIGEST_LEN);
	assert_memory_equal(b.base[1], f->d2, STG_DIGEST_LEN);
	char want[4400];
	delta_name("new.tar.zst", f->d1, want, sizeof want);
	assert_string_equal(b.name[0], want);
	delta_name(out, f->d2, want, sizeof want);
	assert_string_equal(b.paths[1], want);
	assert_null(b.tmps[0]);
	stg__bases_free(&b);
	assert_int_equal(b.n, 0);
	/* an output without a directory: beside it, in "." */
	assert_int_equal(stg__bases_open(f->ctx, &o, "p.tar.zst", &b), STG_OK);
	delta_name("./p.tar.zst", f->d1, want, sizeof want);
	assert_string_equal(b.paths[0], want);
	stg__bases_free(&b);
	free(out);
	free(v1_again);
}

static void test_open_refused(void **state)
{
	fx *f = *state;
	char *out = ut_join(f->dir, "new.tar.zst");
	stg_bases b;
	stg_pack_opts o;
	/* missing */
	char *missing = ut_join(f->dir, "missing.tar.zst");
	const char *m[] = {f->v1, missing};
	opts_with(&o, m, 2);
	stg_err err = stg__bases_open(f->ctx, &o, out, &b);
	assert_int_equal(err, STG_ENOENT);
	char want[8300];
	snprintf(want, sizeof want, "the base '%s': ", missing);
	assert_memory_equal(stg_errmsg(f->ctx), want, strlen(want));
	stg__bases_free(&b);
	/* damaged: the end of its trailer cut off */
	struct stat st;
	assert_int_equal(stat(f->v2, &st), 0);
	assert_int_equal(truncate(f->v2, st.st_size - 7), 0);
	const char *d[] = {f->v2};
	opts_with(&o, d, 1);
	assert_int_equal(stg__bases_open(f->ctx, &o, out, &b), STG_ECORRUPT);
	snprintf(want, sizeof want, "the base '%s': ", f->v2);
	assert_memory_equal(stg_errmsg(f->ctx), want, strlen(want));
	stg__bases_free(&b);
	/* a pack's name too long to name deltas after it (255 bytes a name) */
	char name[240];
	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	char *longout = ut_join(f->dir, name);
	const char *one[] = {f->v1};
	opts_with(&o, one, 1);
	assert_int_equal(stg__bases_open(f->ctx, &o, longout, &b), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is too long to name its deltas after it"));
	stg__bases_free(&b);
	free(longout);
	free(missing);
	free(out);
}

static void test_write_publish(void **state)
{
	fx *f = *state;
	/* v3 is the new pack; v3 as its own base gives no delta */
	const char *bases[] = {f->v1, f->v3};
	stg_pack_opts o;
	opts_with(&o, bases, 2);
	o.delta_done = delta_done;
	o.delta_arg = f;
	stg_bases b;
	assert_int_equal(stg__bases_open(f->ctx, &o, f->v3, &b), STG_OK);
	assert_int_equal(b.n, 2);
	if (stg__bases_write(f->ctx, f->src, f->v3, &b, &o))
		fail_msg("%s", stg_errmsg(f->ctx));
	assert_non_null(b.tmps[0]);
	assert_null(b.tmps[1]);
	assert_non_null(strstr(f->log.text, "is the same pack (the tree has not changed)"));
	/* told once, of v1's delta: big changed, new added, keep changed */
	assert_int_equal(f->told, 1);
	assert_string_equal(f->told_base, f->v1);
	assert_string_equal(f->told_name, b.name[0]);
	assert_memory_equal(f->told_info.base_digest, f->d1, STG_DIGEST_LEN);
	assert_int_equal(f->told_info.patched, 2);
	assert_int_equal(f->told_info.added, 1);
	/* a temporary beside its final name, not yet there */
	assert_int_equal(access(b.tmps[0], F_OK), 0);
	assert_int_equal(access(b.paths[0], F_OK), -1);
	char *tmp = strdup(b.tmps[0]);
	assert_int_equal(stg__bases_publish(f->ctx, &b, true), STG_OK);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(access(b.paths[0], F_OK), 0);
	char *path = strdup(b.paths[0]), *path2 = strdup(b.paths[1]);
	stg__bases_free(&b);
	assert_int_equal(access(path, F_OK), 0); /* kept once published */
	assert_int_equal(access(path2, F_OK), -1);
	/* a delta from v1 that makes v3 */
	stg_pack *np;
	assert_int_equal(stg_pack_open(f->ctx, f->v3, &np), STG_OK);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	uint8_t base[STG_DIGEST_LEN], target[STG_DIGEST_LEN];
	uint64_t size;
	assert_int_equal(stg_delta_read_header(f->ctx, fd, base, target, &size), STG_OK);
	assert_memory_equal(base, f->d1, STG_DIGEST_LEN);
	assert_memory_equal(target, f->d3, STG_DIGEST_LEN);
	if (stg_delta_check(f->ctx, np, fd, base, NULL))
		fail_msg("%s", stg_errmsg(f->ctx));
	close(fd);
	stg_pack_close(np);
	free(tmp);
	free(path);
	free(path2);
}

/* Freed before publishing (the pack failed): no temporary left, nothing
 * published. */
static void test_unpublished(void **state)
{
	fx *f = *state;
	const char *bases[] = {f->v1, f->v2};
	stg_pack_opts o;
	opts_with(&o, bases, 2);
	stg_bases b;
	assert_int_equal(stg__bases_open(f->ctx, &o, f->v3, &b), STG_OK);
	assert_int_equal(stg__bases_write(f->ctx, f->src, f->v3, &b, &o), STG_OK);
	char *t0 = strdup(b.tmps[0]), *t1 = strdup(b.tmps[1]);
	char *p0 = strdup(b.paths[0]);
	assert_int_equal(access(t1, F_OK), 0);
	stg__bases_free(&b);
	assert_int_equal(access(t0, F_OK), -1);
	assert_int_equal(access(t1, F_OK), -1);
	assert_int_equal(access(p0, F_OK), -1);
	ut_no_temporaries(f->dir, false);
	free(t0);
	free(t1);
	free(p0);
}

/* Deltas that cannot be written: beside a pack in a directory that is
 * gone; and a tree that changed since it was packed. */
static void test_write_fails(void **state)
{
	fx *f = *state;
	const char *bases[] = {f->v1};
	stg_pack_opts o;
	opts_with(&o, bases, 1);
	stg_bases b;
	char *out = ut_join(f->dir, "gone/new.tar.zst");
	assert_int_equal(stg__bases_open(f->ctx, &o, out, &b), STG_OK);
	assert_int_equal(stg__bases_write(f->ctx, f->src, f->v3, &b, &o), STG_EIO);
	char want[8300];
	snprintf(want, sizeof want, "cannot create a file beside '%s': No such file or directory",
	         b.paths[0]);
	assert_string_equal(stg_errmsg(f->ctx), want);
	stg__bases_free(&b);
	/* the tree is no longer what v3 was packed from */
	ut_fill_file(f->src, "big", 300000, 9);
	assert_int_equal(stg__bases_open(f->ctx, &o, f->v3, &b), STG_OK);
	stg_err err = stg__bases_write(f->ctx, f->src, f->v3, &b, &o);
	assert_int_equal(err, STG_EIO);
	snprintf(want, sizeof want, "the delta from '%s': ", f->v1);
	assert_memory_equal(stg_errmsg(f->ctx), want, strlen(want));
	stg__bases_free(&b);
	ut_no_temporaries(f->dir, false);
	free(out);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_open),        T(test_open_refused), T(test_write_publish),
        T(test_unpublished), T(test_write_fails),
};

UT_MAIN(tests)
