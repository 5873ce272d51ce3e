/* test_xfer_resume.c - resuming a file cut mid-transfer (xfer_resume.c):
 * names tied to the path; a partial copy written, flushed and recorded;
 * what is offered next time (all of it on this boot, only what was
 * flushed after a reboot, cut to the file's size, nothing without a valid
 * record, never through a link), with the XXH3 of the offered bytes;
 * kept or removed on close; the record dropped once the copy is done. */
#include "unit.h"
#include "xfer_resume.h"
#include "rsjob.h"

#include <errno.h>
#include <sys/wait.h>

typedef struct fx {
	UT_FX;
	int dfd;
	char boot[XFER_BOOT];
	uint8_t *buf;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	stg__boot_id(f->boot);
	f->buf = ut_malloc(XFER_BLOCK);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	close(f->dfd);
	free(f->buf);
	return ut_teardown(state);
}

static void test_names(void **state)
{
	fx *f = *state;
	char d1[XFER_RNAME], r1[XFER_RNAME], d2[XFER_RNAME], r2[XFER_RNAME];
	stg__resume_names("a/big.bin", d1, r1);
	stg__resume_names("a/big.bin", d2, r2);
	assert_string_equal(d1, d2);
	assert_memory_equal(d1, ".stager-resume.", 15);
	assert_int_equal(strlen(d1), 15 + 32);
	char want[XFER_RNAME + 4];
	snprintf(want, sizeof want, "%s.ck", d1);
	assert_string_equal(r1, want);
	stg__resume_names("a/big.bin2", d2, r2);
	assert_string_not_equal(d1, d2);
	assert_true(stg__resume_named(d1));
	assert_true(stg__resume_named(r1));
	assert_false(stg__resume_named("big.bin"));
	assert_false(stg__resume_named(".stager-tmp.x"));
	/* the boot's id, as the kernel says */
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY);
	if (fd >= 0) {
		char k[64] = {0};
		assert_true(read(fd, k, sizeof k - 1) > 0);
		close(fd);
		k[strcspn(k, "\n")] = '\0';
		assert_string_equal(f->boot, k);
	}
}

static stg_err offer(fx *f, const char *path, uint64_t size, const char *boot, uint64_t *off,
                     XXH128_hash_t *h)
{
	XXH3_state_t *st = NULL;
	stg_err err = stg__resume_offer(f->ctx, f->dfd, path, size, boot, f->buf, off, &st);
	if (st) {
		*h = XXH3_128bits_digest(st);
		XXH3_freeState(st);
	} else {
		assert_int_equal(*off, 0);
	}
	return err;
}

static void test_keep_and_offer(void **state)
{
	fx *f = *state;
	size_t len = 3 << 20;
	uint8_t *data = ut_malloc(len);
	ut_fill(data, len, 9);
	stg_rfile rf;
	assert_int_equal(stg__rfile_open(&rf, f->dfd, "d/big", 0, f->boot), 0);
	assert_true(ut_exists_at(f->dfd, rf.name));
	assert_true(ut_exists_at(f->dfd, rf.rec));
	for (size_t off = 0; off < len; off += 100000) {
		size_t k = len - off < 100000 ? len - off : 100000;
		assert_int_equal(stg__rfile_write(&rf, data + off, k), 0);
	}
	assert_int_equal(rf.len, len);
	char name[XFER_RNAME], rec[XFER_RNAME];
	snprintf(name, sizeof name, "%s", rf.name);
	snprintf(rec, sizeof rec, "%s", rf.rec);
	stg__rfile_close(&rf, true); /* cut: kept */
	assert_true(ut_exists_at(f->dfd, name));
	/* the next transfer: all of it offered, with its hash */
	uint64_t off = 0;
	XXH128_hash_t h;
	assert_int_equal(offer(f, "d/big", len + 500, f->boot, &off, &h), STG_OK);
	assert_int_equal(off, len);
	assert_true(XXH128_isEqual(h, XXH3_128bits(data, len)));
	/* a file that is smaller now: the copy is cut to it */
	assert_int_equal(offer(f, "d/big", 1000000, f->boot, &off, &h), STG_OK);
	assert_int_equal(off, 1000000);
	assert_true(XXH128_isEqual(h, XXH3_128bits(data, 1000000)));
	struct stat st;
	assert_int_equal(fstatat(f->dfd, name, &st, 0), 0);
	assert_int_equal(st.st_size, 1000000);
	/* another path has no copy */
	assert_int_equal(offer(f, "d/other", len, f->boot, &off, &h), STG_OK);
	assert_int_equal(off, 0);
	/* going on from the offer: appended after it, then done */
	assert_int_equal(stg__rfile_open(&rf, f->dfd, "d/big", 1000000, f->boot), 0);
	assert_int_equal(stg__rfile_write(&rf, data + 1000000, len - 1000000), 0);
	stg__rfile_done(&rf);
	assert_false(ut_exists_at(f->dfd, rec));
	stg__rfile_close(&rf, true);
	size_t got;
	char *p = ut_join(f->dir, name);
	uint8_t *b = ut_read(p, &got);
	assert_int_equal(got, len);
	assert_memory_equal(b, data, len);
	free(b);
	free(p);
	/* done: no record, so nothing is offered, and both go */
	assert_int_equal(offer(f, "d/big", len, f->boot, &off, &h), STG_OK);
	assert_int_equal(off, 0);
	assert_false(ut_exists_at(f->dfd, name));
	free(data);
}

static void test_damaged_arrival(void **state)
{
	fx *f = *state;
	stg_rfile rf;
	assert_int_equal(stg__rfile_open(&rf, f->dfd, "x", 0, f->boot), 0);
	assert_int_equal(stg__rfile_write(&rf, (const uint8_t *)"bad bytes", 9), 0);
	char name[XFER_RNAME], rec[XFER_RNAME];
	snprintf(name, sizeof name, "%s", rf.name);
	snprintf(rec, sizeof rec, "%s", rf.rec);
	stg__rfile_close(&rf, false); /* arrived damaged: removed */
	assert_false(ut_exists_at(f->dfd, name));
	assert_false(ut_exists_at(f->dfd, rec));
	/* nothing written: nothing kept */
	assert_int_equal(stg__rfile_open(&rf, f->dfd, "x", 0, f->boot), 0);
	stg__rfile_close(&rf, true);
	assert_false(ut_exists_at(f->dfd, name));
	/* an offer of more than is there is refused, and nothing is left */
	assert_int_equal(stg__rfile_open(&rf, f->dfd, "x", 10, f->boot), -1);
	assert_int_equal(errno, EIO);
	assert_false(ut_exists_at(f->dfd, name));
	assert_false(ut_exists_at(f->dfd, rec));
}

/* kill -9 after 32 MiB and a bit: on this boot all of it is offered, after
 * a reboot only what was flushed and recorded. */
static void test_cut_and_reboot(void **state)
{
	fx *f = *state;
	size_t len = XFER_RESUME_SYNC + (1 << 20);
	pid_t pid = fork();
	if (pid == 0) {
		stg_rfile rf;
		uint8_t *d = malloc(len);
		ut_fill(d, len, 4);
		if (stg__rfile_open(&rf, f->dfd, "ckpt", 0, f->boot) ||
		    stg__rfile_write(&rf, d, XFER_RESUME_SYNC) ||
		    stg__rfile_write(&rf, d + XFER_RESUME_SYNC, len - XFER_RESUME_SYNC))
			_exit(1);
		_exit(0); /* not closed: as killed */
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	uint8_t *d = ut_malloc(len);
	ut_fill(d, len, 4);
	uint64_t off;
	XXH128_hash_t h;
	char other[XFER_BOOT] = "another-boot";
	assert_int_equal(offer(f, "ckpt", len, other, &off, &h), STG_OK);
	assert_int_equal(off, XFER_RESUME_SYNC);
	assert_true(XXH128_isEqual(h, XXH3_128bits(d, XFER_RESUME_SYNC)));
	/* the copy was cut to what is trusted; the record stays */
	char name[XFER_RNAME], rec[XFER_RNAME];
	stg__resume_names("ckpt", name, rec);
	struct stat st;
	assert_int_equal(fstatat(f->dfd, name, &st, 0), 0);
	assert_int_equal(st.st_size, XFER_RESUME_SYNC);
	assert_true(ut_exists_at(f->dfd, rec));
	/* an unknown boot (no id) trusts only the record too */
	char none[XFER_BOOT] = {0};
	assert_int_equal(offer(f, "ckpt", len, none, &off, &h), STG_OK);
	assert_int_equal(off, XFER_RESUME_SYNC);
	stg__resume_remove(f->dfd, "ckpt");
	assert_false(ut_exists_at(f->dfd, name));
	assert_false(ut_exists_at(f->dfd, rec));
	free(d);
}

/* A partial copy of path, len bytes of data, closed as cut (kept); the
 * names of the copy and its record. */
static void cut_copy(fx *f, const char *path, const uint8_t *data, size_t len,
                     char name[XFER_RNAME], char rec[XFER_RNAME])
{
	stg_rfile rf;
	assert_int_equal(stg__rfile_open(&rf, f->dfd, path, 0, f->boot), 0);
	assert_int_equal(stg__rfile_write(&rf, data, len), 0);
	snprintf(name, XFER_RNAME, "%s", rf.name);
	snprintf(rec, XFER_RNAME, "%s", rf.rec);
	stg__rfile_close(&rf, true);
}

static void test_untrusted(void **state)
{
	fx *f = *state;
	stg_rfile rf;
	uint8_t data[5000];
	ut_fill(data, sizeof data, 1);
	char name[XFER_RNAME], rec[XFER_RNAME];
	cut_copy(f, "p", data, sizeof data, name, rec);
	/* a record with a byte changed: nothing offered, both removed */
	char *rp = ut_join(f->dir, rec);
	ut_flip(rp, 50, 1);
	free(rp);
	uint64_t off;
	XXH128_hash_t h;
	assert_int_equal(offer(f, "p", sizeof data, f->boot, &off, &h), STG_OK);
	assert_int_equal(off, 0);
	assert_false(ut_exists_at(f->dfd, name));
	assert_false(ut_exists_at(f->dfd, rec));
	/* no record at all */
	ut_write(f->dir, name, data, sizeof data);
	assert_int_equal(offer(f, "p", sizeof data, f->boot, &off, &h), STG_OK);
	assert_int_equal(off, 0);
	assert_false(ut_exists_at(f->dfd, name));
	/* the copy a link: not followed, not offered, the target untouched */
	assert_int_equal(stg__rfile_open(&rf, f->dfd, "p", 0, f->boot), 0);
	assert_int_equal(stg__rfile_write(&rf, data, sizeof data), 0);
	stg__rfile_close(&rf, true);
	ut_write(f->dir, "target", data, sizeof data);
	assert_int_equal(unlinkat(f->dfd, name, 0), 0);
	assert_int_equal(symlinkat("target", f->dfd, name), 0);
	assert_int_equal(offer(f, "p", sizeof data, f->boot, &off, &h), STG_OK);
	assert_int_equal(off, 0);
	assert_false(ut_exists_at(f->dfd, name));
	struct stat st;
	assert_int_equal(fstatat(f->dfd, "target", &st, 0), 0);
	assert_int_equal(st.st_size, sizeof data);
	/* nor is a link opened to write a copy */
	assert_int_equal(symlinkat("target", f->dfd, name), 0);
	assert_int_equal(stg__rfile_open(&rf, f->dfd, "p", 0, f->boot), -1);
	assert_int_equal(fstatat(f->dfd, "target", &st, 0), 0);
	assert_int_equal(st.st_size, sizeof data);
}

static void test_cancel(void **state)
{
	fx *f = *state;
	uint8_t data[5000];
	ut_fill(data, sizeof data, 2);
	char name[XFER_RNAME], rec[XFER_RNAME];
	cut_copy(f, "c", data, sizeof data, name, rec);
	stg_cancel(f->ctx);
	uint64_t off;
	XXH128_hash_t h;
	assert_int_equal(offer(f, "c", sizeof data, f->boot, &off, &h), STG_EINTR);
	assert_int_equal(off, 0);
	assert_true(ut_exists_at(f->dfd, name)); /* kept for the next transfer */
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_names),          T(test_keep_and_offer), T(test_damaged_arrival),
        T(test_cut_and_reboot), T(test_untrusted),      T(test_cancel),
};

UT_MAIN(tests)
