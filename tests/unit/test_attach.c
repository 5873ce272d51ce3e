/* test_attach.c - an entry at its destination (attach.c): the index from
 * a source's identity to its digest (a newer identity of a file replaces
 * the old line; paths with newlines), DEST naming (as given, "DIR/" as
 * DIR/NAME without archive suffixes, the job's scratch, a job directory),
 * a link switched atomically or a private writable copy, what may not be
 * replaced, pins, entries evicted meanwhile, and leftovers of dead
 * builders. */
#include "unit.h"
#include "attach.h"
#include "cache.h"

#include <errno.h>

typedef ut_fx fx;

/* A published entry by hand: data/ with a file, a subdirectory and a
 * link, read-only as stage leaves them. */
static void make_entry(stg_cache *c, const char *key)
{
	char p[256];
	snprintf(p, sizeof p, "cache/%s", key);
	assert_int_equal(mkdirat(c->rootfd, p, 0700), 0);
	int e = openat(c->rootfd, p, O_RDONLY | O_DIRECTORY);
	assert_int_equal(mkdirat(e, "data", 0755), 0);
	assert_int_equal(mkdirat(e, "data/sub", 0755), 0);
	int fd = openat(e, "data/sub/f", O_WRONLY | O_CREAT, 0444);
	assert_int_equal(write(fd, key, 8), 8);
	struct timespec ts[2] = {{0, UTIME_OMIT}, {1234567890, 5}};
	futimens(fd, ts);
	close(fd);
	assert_int_equal(symlinkat("sub/f", e, "data/link"), 0);
	assert_int_equal(fchmodat(e, "data/sub", 0555, 0), 0);
	assert_int_equal(fchmodat(e, "data", 0555, 0), 0);
	stg_meta m = {.size = 100, .files = 1, .content = 8};
	snprintf(m.kind, sizeof m.kind, "pack");
	snprintf(m.source, sizeof m.source, "/shared/x.tar.zst");
	assert_int_equal(stg__meta_write(e, &m), 0);
	close(e);
}

static void test_index(void **state)
{
	fx *f = *state;
	ut_write(f->dir, "src", "data", 4);
	char *src = ut_join(f->dir, "src");
	struct stat st;
	assert_int_equal(stat(src, &st), 0);
	stg_ident id;
	stg__ident_of(&st, &id);
	assert_int_equal(id.ino, st.st_ino);
	assert_int_equal(id.size, 4);
	assert_int_equal(id.mtime_ns, st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec);
	char hex[STG_DIGEST_HEXLEN + 1];
	assert_int_equal(stg__index_get(f->c, &id, hex), -1); /* no index yet */
	assert_int_equal(stg__index_put(f->ctx, f->c, &id, ut_key(1), src), 0);
	assert_int_equal(stg__index_get(f->c, &id, hex), 0);
	assert_string_equal(hex, ut_key(1));
	/* another identity: another line */
	stg_ident id2 = id;
	id2.ino++;
	assert_int_equal(stg__index_get(f->c, &id2, hex), -1);
	assert_int_equal(stg__index_put(f->ctx, f->c, &id2, ut_key(2), "/p\nq"), 0);
	assert_int_equal(stg__index_get(f->c, &id2, hex), 0);
	assert_string_equal(hex, ut_key(2));
	assert_int_equal(stg__index_get(f->c, &id, hex), 0);
	assert_string_equal(hex, ut_key(1));
	/* the file changed (same inode, new mtime): its old line is replaced,
	 * the old identity no longer answers */
	stg_ident id3 = id;
	id3.mtime_ns += 1;
	assert_int_equal(stg__index_put(f->ctx, f->c, &id3, ut_key(3), src), 0);
	assert_int_equal(stg__index_get(f->c, &id, hex), -1);
	assert_int_equal(stg__index_get(f->c, &id3, hex), 0);
	assert_string_equal(hex, ut_key(3));
	/* every field counts */
	stg_ident id4 = id3;
	id4.ctime_ns++;
	assert_int_equal(stg__index_get(f->c, &id4, hex), -1);
	id4 = id3;
	id4.dev++;
	assert_int_equal(stg__index_get(f->c, &id4, hex), -1);
	id4 = id3;
	id4.size++;
	assert_int_equal(stg__index_get(f->c, &id4, hex), -1);
	/* two lines, one per file; the path with a newline left out */
	char *ip = ut_join(stg_cache_root(f->c), "index");
	char *text = ut_read_text(ip);
	size_t lines = 0;
	for (size_t i = 0; text[i]; i++)
		lines += text[i] == '\n';
	assert_int_equal(lines, 2);
	assert_non_null(strstr(text, " ?\n"));
	/* damaged lines are skipped, not fatal */
	FILE *fp = fopen(ip, "a");
	fputs("garbage line\nabc 1 2 3 4 5 /x\n", fp);
	fclose(fp);
	assert_int_equal(stg__index_get(f->c, &id3, hex), 0);
	assert_int_equal(stg__index_put(f->ctx, f->c, &id, ut_key(1), src), 0);
	free(text);
	text = ut_read_text(ip);
	assert_null(strstr(text, "garbage"));
	free(text);
	free(ip);
	free(src);
}

static stg_err attach(fx *f, const char *key, const char *src, const char *dest, int copy,
                      stg_stage_result *res)
{
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.dest = dest;
	o.copy = copy;
	memset(res, 0, sizeof *res);
	return stg__attach(f->ctx, f->c, key, src, &o, "job-7", res);
}

static void test_link(void **state)
{
	fx *f = *state;
	make_entry(f->c, ut_key(1));
	make_entry(f->c, ut_key(2));
	char target1[4200], target2[4200];
	snprintf(target1, sizeof target1, "%s/cache/%s/data", stg_cache_root(f->c), ut_key(1));
	snprintf(target2, sizeof target2, "%s/cache/%s/data", stg_cache_root(f->c), ut_key(2));
	char *dest = ut_join(f->dir, "out/deeper/ds");
	stg_stage_result r;
	assert_int_equal(attach(f, ut_key(1), "/shared/ds.tar.zst", dest, 0, &r), STG_OK);
	assert_string_equal(r.path, dest);
	ut_link_is(dest, target1);
	/* filled from meta */
	assert_int_equal(r.files, 1);
	assert_int_equal(r.content_bytes, 8);
	/* pinned by its owner */
	char owners[4][160];
	assert_int_equal(stg__pins_list(f->c, ut_key(1), owners, 4), 1);
	assert_string_equal(owners[0], "job-7");
	stg_stage_result_free(&r);
	/* again: already there */
	assert_int_equal(attach(f, ut_key(1), "/shared/ds.tar.zst", dest, 0, &r), STG_OK);
	stg_stage_result_free(&r);
	/* a new version: the link is switched to the other entry */
	assert_int_equal(attach(f, ut_key(2), "/shared/ds.tar.zst", dest, 0, &r), STG_OK);
	ut_link_is(dest, target2);
	stg_stage_result_free(&r);
	/* nothing left beside it */
	char *out = ut_join(f->dir, "out/deeper");
	int dfd = open(out, O_RDONLY | O_DIRECTORY);
	char **names;
	size_t n;
	assert_int_equal(stg__dir_names(dfd, "", true, &names, &n), 0);
	assert_int_equal(n, 1);
	stg__names_free(names, n);
	close(dfd);
	/* a link of the user's own is not replaced */
	char *mine = ut_join(f->dir, "mine");
	assert_int_equal(symlink("/somewhere/else", mine), 0);
	assert_int_equal(attach(f, ut_key(1), "/s/x", mine, 0, &r), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(f->ctx), "exists (a link to '/somewhere/else'); remove "
	                                           "it or choose another destination"));
	ut_link_is(mine, "/somewhere/else");
	/* nor a file, nor a directory with something in it */
	ut_write(f->dir, "file", "x", 1);
	char *file = ut_join(f->dir, "file");
	assert_int_equal(attach(f, ut_key(1), "/s/x", file, 0, &r), STG_EEXIST);
	ut_mkdir(f->dir, "full");
	ut_write(f->dir, "full/x", "x", 1);
	char *full = ut_join(f->dir, "full");
	assert_int_equal(attach(f, ut_key(1), "/s/x", full, 0, &r), STG_EEXIST);
	char want[4300];
	snprintf(want, sizeof want, "'%s' exists; remove it or choose another destination", full);
	assert_string_equal(stg_errmsg(f->ctx), want);
	/* an empty directory is replaced */
	ut_mkdir(f->dir, "empty");
	char *empty = ut_join(f->dir, "empty");
	assert_int_equal(attach(f, ut_key(1), "/s/x", empty, 0, &r), STG_OK);
	ut_link_is(empty, target1);
	stg_stage_result_free(&r);
	free(empty);
	free(full);
	free(file);
	free(mine);
	free(out);
	free(dest);
}

static void test_names(void **state)
{
	fx *f = *state;
	make_entry(f->c, ut_key(1));
	ut_mkdir(f->dir, "into");
	char *into = ut_join(f->dir, "into/");
	static const struct {
		const char *src, *name;
	} t[] = {
	        {"/shared/imagenet.tar.zst", "imagenet"},
	        {"/shared/a.tgz", "a"},
	        {"/shared/b.tar", "b"},
	        {"/shared/c.zip", "c"},
	        {"/shared/dir/", "dir"},
	        {"/shared/d.tar.gz.bak", "d.tar.gz.bak"},
	        {"/shared/.tar.zst", ".tar.zst"},
	        {"/", "data"},
	        {"..", "data"},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		stg_stage_result r;
		assert_int_equal(attach(f, ut_key(1), t[i].src, into, 0, &r), STG_OK);
		char want[4200];
		snprintf(want, sizeof want, "%s%s", into, t[i].name);
		assert_string_equal(r.path, want);
		stg_stage_result_free(&r);
	}
	/* no DEST, no job scratch: a job directory of the owner's */
	stg_stage_result r;
	assert_int_equal(attach(f, ut_key(1), "/shared/set.tar.zst", NULL, 0, &r), STG_OK);
	char want[4200];
	snprintf(want, sizeof want, "%s/jobs/job-7/set", stg_cache_root(f->c));
	assert_string_equal(r.path, want);
	stg_stage_result_free(&r);
	/* with the job's own scratch: there */
	char *tmp = ut_join(f->dir, "slurm_tmp");
	mkdir(tmp, 0700);
	setenv("SLURM_TMPDIR", tmp, 1);
	assert_int_equal(attach(f, ut_key(1), "/shared/set.tar.zst", NULL, 0, &r), STG_OK);
	snprintf(want, sizeof want, "%s/set", tmp);
	assert_string_equal(r.path, want);
	stg_stage_result_free(&r);
	unsetenv("SLURM_TMPDIR");
	free(tmp);
	free(into);
}

static void test_copy(void **state)
{
	fx *f = *state;
	make_entry(f->c, ut_key(1));
	char *dest = ut_join(f->dir, "a/copy");
	stg_stage_result r;
	assert_int_equal(attach(f, ut_key(1), "/s/x", dest, 1, &r), STG_OK);
	struct stat st;
	assert_int_equal(lstat(dest, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* writable by its owner, top and inside; content and mtimes kept */
	assert_int_equal(st.st_mode & 0777, 0755);
	char *sub = ut_join(dest, "sub"), *file = ut_join(dest, "sub/f"),
	     *link = ut_join(dest, "link");
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0755);
	assert_int_equal(lstat(file, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(st.st_mtim.tv_sec, 1234567890);
	assert_int_equal(st.st_mtim.tv_nsec, 5);
	assert_int_equal(st.st_nlink, 1); /* a copy, not a link to the cache */
	size_t len;
	uint8_t *b = ut_read(file, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(b, ut_key(1), 8);
	free(b);
	ut_link_is(link, "sub/f");
	/* writing the copy leaves the entry alone */
	ut_write(dest, "sub/f", "changed!", 8);
	char entry[4300];
	snprintf(entry, sizeof entry, "%s/cache/%s/data/sub/f", stg_cache_root(f->c), ut_key(1));
	b = ut_read(entry, &len);
	assert_memory_equal(b, ut_key(1), 8);
	free(b);
	stg_stage_result_free(&r);
	/* onto something: refused, untouched */
	assert_int_equal(attach(f, ut_key(1), "/s/x", dest, 1, &r), STG_EEXIST);
	b = ut_read(file, &len);
	assert_memory_equal(b, "changed!", 8);
	free(b);
	free(sub);
	free(file);
	free(link);
	free(dest);
}

static void test_gone_and_unpinned(void **state)
{
	fx *f = *state;
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	/* evicted meanwhile: STG_ENOENT, quietly, nothing made */
	assert_int_equal(attach(f, ut_key(1), "/s/x", dest, 0, &r), STG_ENOENT);
	assert_null(r.path);
	assert_int_equal(access(dest, F_OK), -1);
	char owners[4][160];
	assert_int_equal(stg__pins_list(f->c, ut_key(1), owners, 4), 0);
	/* no_pin */
	make_entry(f->c, ut_key(1));
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.dest = dest;
	o.no_pin = 1;
	memset(&r, 0, sizeof r);
	assert_int_equal(stg__attach(f->ctx, f->c, ut_key(1), "/s/x", &o, "job-7", &r), STG_OK);
	assert_int_equal(stg__pins_list(f->c, ut_key(1), owners, 4), 0);
	stg_stage_result_free(&r);
	free(dest);
}

static void test_leftovers(void **state)
{
	fx *f = *state;
	char p[256];
	const char *k = ut_key(1);
	static const char *const sfx[] = {".tmp.123", ".tmp.456", ".old.789", ""};
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "cache/%s%s", k, sfx[i]);
		assert_int_equal(mkdirat(f->c->rootfd, p, 0700), 0);
		snprintf(p, sizeof p, "cache/%s%s/x", k, sfx[i]);
		int fd = openat(f->c->rootfd, p, O_WRONLY | O_CREAT, 0400);
		close(fd);
	}
	snprintf(p, sizeof p, "cache/%s.tmp.1", ut_key(2));
	assert_int_equal(mkdirat(f->c->rootfd, p, 0700), 0);
	stg__remove_leftovers(f->c, k);
	char **names;
	size_t n;
	assert_int_equal(stg__dir_names(f->c->rootfd, "cache", true, &names, &n), 0);
	assert_int_equal(n, 3);
	char want[3][128];
	snprintf(want[0], sizeof want[0], "%s", k);
	snprintf(want[1], sizeof want[1], "%s.old.789", k);
	snprintf(want[2], sizeof want[2], "%s.tmp.1", ut_key(2));
	for (size_t i = 0; i < n; i++)
		assert_string_equal(names[i], want[i]);
	stg__names_free(names, n);
}

#define T(name) cmocka_unit_test_setup_teardown(name, ut_setup_cache, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_index),     T(test_link), T(test_names), T(test_copy), T(test_gone_and_unpinned),
        T(test_leftovers),
};

UT_MAIN(tests)
