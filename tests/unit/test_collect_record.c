/* test_collect_record.c - collect's record on scratch (collect_record.c):
 * lines appended and read back (files, links, directories, DEST's
 * identity, where temporaries go, temporaries out and resolved), paths
 * with newlines, records replaced by path, a torn last line or a foreign
 * or unsafe line keeping what came before, compaction. */
#include "ut_collect.h"

typedef ut_fx fx;

static collector *new_collector(fx *f, stg_collect_result *res)
{
	collector *k = calloc(1, sizeof *k);
	k->ctx = f->ctx;
	k->c = f->c;
	k->res = res;
	k->srcfd = k->destfd = k->logfd = -1;
	k->umask = -1;
	snprintf(k->id, sizeof k->id, "0123456789abcdef");
	snprintf(k->src, sizeof k->src, "/scratch/job/out");
	assert_int_equal(stg__strmap_init(&k->map, 1024), 0);
	assert_int_equal(stg__strmap_init(&k->dirs, 64), 0);
	return k;
}

static char *record_text(fx *f)
{
	char *p = ut_join(stg_cache_root(f->c), "collect/0123456789abcdef");
	char *t = ut_read_text(p);
	free(p);
	return t;
}

static void write_record(fx *f, const char *text)
{
	char *d = ut_join(stg_cache_root(f->c), "collect");
	mkdir(d, 0700);
	ut_write(d, "0123456789abcdef", text, strlen(text));
	free(d);
}

static crec file_rec(const char *path, uint64_t size, uint8_t seed)
{
	crec r = {.type = 'f',
	          .size = size,
	          .ino = 1000 + seed,
	          .mtime_ns = 1700000000123456789ll,
	          .ctime_ns = 1700000001000000007ll,
	          .mode = 0640,
	          .path = strdup(path)};
	for (int i = 0; i < 16; i++)
		r.xxh3[i] = (uint8_t)(seed * 16 + i);
	return r;
}

static void test_round_trip(void **state)
{
	fx *f = *state;
	stg_collect_result res = {0};
	collector *k = new_collector(f, &res);
	assert_int_equal(stg__col_record_open(k), STG_OK);
	assert_int_equal(k->log_lines, 0);
	assert_int_equal(k->n_recs, 0);
	/* the record is private, in collect/ */
	char *cd = ut_join(stg_cache_root(f->c), "collect");
	struct stat st;
	assert_int_equal(stat(cd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	free(cd);
	assert_int_equal(stg__col_log_line(k, "stager-collect 1", NULL), 0);
	assert_int_equal(stg__col_log_line(k, "S ", k->src), 0);
	assert_int_equal(stg__col_log_line(k, "D 42 4242", NULL), 0);
	assert_int_equal(stg__col_log_line(k, "P ", "/shared/res\nults"), 0);
	crec a = file_rec("ckpt/model.bin", 123456789012ull, 1);
	crec b = file_rec("odd\nname\\x", 7, 2);
	crec l = {.type = 'l', .ino = 9, .mtime_ns = 5, .ctime_ns = 6, .path = strdup("latest")};
	crec d = {.type = 'd', .path = strdup("ckpt")};
	crec *ra = stg__col_rec_set(k, &a), *rb = stg__col_rec_set(k, &b);
	crec *rl = stg__col_rec_set(k, &l), *rd = stg__col_rec_set(k, &d);
	assert_non_null(ra);
	assert_non_null(rb);
	assert_non_null(rl);
	assert_non_null(rd);
	assert_int_equal(stg__col_log_rec(k, rd), 0);
	assert_int_equal(stg__col_log_rec(k, stg__col_rec_find(k, "ckpt/model.bin")), 0);
	assert_int_equal(stg__col_log_rec(k, stg__col_rec_find(k, "odd\nname\\x")), 0);
	assert_int_equal(stg__col_log_rec(k, stg__col_rec_find(k, "latest")), 0);
	stg__col_log_line(k, "t ", "ckpt/.stager-tmp.h.1.0");
	stg__col_log_line(k, "t ", "ckpt/.stager-tmp.h.1.1");
	stg__col_log_line(k, "x ", "ckpt/.stager-tmp.h.1.0");
	assert_int_equal(k->log_lines, 11);
	ut_collector_free(k);

	char *text = record_text(f);
	assert_non_null(strstr(text, "f 123456789012 1700000000123456789 1700000001000000007 1001 "
	                             "640 101112131415161718191a1b1c1d1e1f ckpt/model.bin\n"));
	assert_non_null(strstr(text, " odd\\nname\\\\x\n"));
	assert_non_null(strstr(text, "l 5 6 9 latest\n"));
	assert_non_null(strstr(text, "d ckpt\n"));
	free(text);

	/* read back */
	k = new_collector(f, &res);
	assert_int_equal(stg__col_record_open(k), STG_OK);
	assert_false(k->rewrite);
	assert_int_equal(k->log_lines, 11);
	assert_int_equal(k->n_recs, 4);
	assert_int_equal(k->dest_dev, 42);
	assert_int_equal(k->dest_ino, 4242);
	assert_string_equal(k->where, "/shared/res\nults");
	crec *r = stg__col_rec_find(k, "ckpt/model.bin");
	assert_non_null(r);
	assert_int_equal(r->type, 'f');
	assert_int_equal(r->size, 123456789012ull);
	assert_int_equal(r->ino, 1001);
	assert_true(r->mtime_ns == 1700000000123456789ll);
	assert_true(r->ctime_ns == 1700000001000000007ll);
	assert_int_equal(r->mode, 0640);
	assert_int_equal(r->xxh3[0], 0x10);
	assert_int_equal(r->xxh3[15], 0x1f);
	r = stg__col_rec_find(k, "odd\nname\\x");
	assert_non_null(r);
	assert_int_equal(r->size, 7);
	r = stg__col_rec_find(k, "latest");
	assert_int_equal(r->type, 'l');
	assert_int_equal(r->ino, 9);
	assert_int_equal(stg__col_rec_find(k, "ckpt")->type, 'd');
	assert_null(stg__col_rec_find(k, "nope"));
	/* one temporary still out */
	assert_int_equal(k->n_pending, 1);
	assert_string_equal(k->pending[0], "ckpt/.stager-tmp.h.1.1");
	/* a later line for a path replaces the earlier */
	crec a2 = file_rec("ckpt/model.bin", 5, 3);
	crec *s = stg__col_rec_set(k, &a2);
	assert_int_equal(s->size, 5);
	assert_string_equal(s->path, "ckpt/model.bin");
	assert_int_equal(k->n_recs, 4);
	assert_int_equal(stg__col_log_rec(k, s), 0);
	ut_collector_free(k);
	k = new_collector(f, &res);
	assert_int_equal(stg__col_record_open(k), STG_OK);
	assert_int_equal(stg__col_rec_find(k, "ckpt/model.bin")->size, 5);
	assert_int_equal(k->n_recs, 4);

	/* compacted: one line per path, the pending temporary kept */
	stg__col_record_compact(k);
	assert_false(k->rewrite);
	text = record_text(f);
	assert_memory_equal(
	        text, "stager-collect 1\nS /scratch/job/out\nD 42 4242\nP /shared/res\\nults\n",
	        strlen("stager-collect 1\nS /scratch/job/out\nD 42 4242\nP "
	               "/shared/res\\nults\n"));
	size_t lines = 0;
	for (char *p = text; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 4 + 4 + 1);
	assert_non_null(strstr(text, "t ckpt/.stager-tmp.h.1.1\n"));
	assert_null(strstr(text, "x "));
	assert_int_equal(k->log_lines, 2 + 4 + 1);
	/* appending still works after the rewrite */
	assert_int_equal(stg__col_log_line(k, "x ", "ckpt/.stager-tmp.h.1.1"), 0);
	free(text);
	ut_collector_free(k);
	k = new_collector(f, &res);
	assert_int_equal(stg__col_record_open(k), STG_OK);
	assert_int_equal(k->n_pending, 0);
	assert_int_equal(k->n_recs, 4);
	ut_collector_free(k);
}

static void test_damaged(void **state)
{
	fx *f = *state;
	stg_collect_result res = {0};
	/* a torn last line (a kill mid-write): what came before is kept, the
	 * record rewritten */
	write_record(f, "stager-collect 1\nS /scratch/job/out\nd a\nd b\nf 12 1 2 3 644 "
	                "00112233445566778899aabbccddeeff a/x");
	collector *k = new_collector(f, &res);
	assert_int_equal(stg__col_record_open(k), STG_OK);
	assert_int_equal(k->n_recs, 2);
	assert_null(stg__col_rec_find(k, "a/x"));
	char *text = record_text(f);
	assert_null(strstr(text, "a/x"));
	assert_non_null(strstr(text, "d b\n"));
	free(text);
	ut_collector_free(k);
	/* lines that are not ours, unsafe paths, bad hashes: the same */
	static const char *const bad[] = {
	        "q what\n",
	        "f 12 1 2 3 644 0011 a/x\n",
	        "f 12 1 2 3 644 00112233445566778899aabbccddeeff ../escape\n",
	        "f 12 1 2 3 644 00112233445566778899aabbccddeeff /abs\n",
	        "d a/./b\n",
	        "l 1 2 x\n",
	        "D x y\n",
	        "t bad\\escape\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char buf[512];
		snprintf(buf, sizeof buf, "stager-collect 1\nS /s\nd keep\n%sd after\n", bad[i]);
		write_record(f, buf);
		k = new_collector(f, &res);
		assert_int_equal(stg__col_record_open(k), STG_OK);
		if (k->n_recs != 1 || !stg__col_rec_find(k, "keep"))
			fail_msg("'%s': %zu records", bad[i], k->n_recs);
		assert_null(stg__col_rec_find(k, "after"));
		ut_collector_free(k);
	}
	/* not a record at all: started again */
	write_record(f, "something else\nd a\n");
	k = new_collector(f, &res);
	assert_int_equal(stg__col_record_open(k), STG_OK);
	assert_int_equal(k->n_recs, 0);
	text = record_text(f);
	assert_memory_equal(text, "stager-collect 1\nS /scratch/job/out\n", 35);
	free(text);
	ut_collector_free(k);
	/* cleared */
	write_record(f, "stager-collect 1\nd a\nd b\n");
	k = new_collector(f, &res);
	assert_int_equal(stg__col_record_open(k), STG_OK);
	assert_int_equal(k->n_recs, 2);
	stg__col_recs_clear(k);
	assert_int_equal(k->n_recs, 0);
	assert_null(stg__col_rec_find(k, "a"));
	ut_collector_free(k);
}

#define T(name) cmocka_unit_test_setup_teardown(name, ut_setup_cache, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_round_trip),
        T(test_damaged),
};

UT_MAIN(tests)
