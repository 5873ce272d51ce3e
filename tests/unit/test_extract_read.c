/* test_extract_read.c - extraction's readers (extract_read.c), run here
 * as extract.c runs them, with this test as the worker that takes their
 * queue: every needed frame, in order, byte for byte (the last ones from
 * what the trailer's read kept), with one or two readers and few buffers;
 * progress never backwards, ending at the total; a pack cut short fails
 * at the first frame it lacks ("truncated", named) after the frames
 * before it came through whole; a read error (EIO, named); cancel; the
 * first error kept; direct reads refused by the filesystem (EINVAL on an
 * unaligned O_DIRECT read) turned off and the frame read again; no direct
 * reads on a local disk; small frames read a chunk at a time into shared
 * memory (ex_chunk), with every frame still its own buffer, and the
 * chunk free again only when each of its frames is. */
#include "unit.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "extract_state.h"
#include "extract_read.h"
#include "extract.h"

#include <errno.h>

typedef struct fx {
	UT_FX;
	stg_pack *p;
	uint8_t *file; /* the pack's bytes */
	size_t file_len;
	uint64_t last_done, calls; /* progress */
	bool backwards;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_fill_file(f->src, "random", 2 * 1024 * 1024, 3);
	char *text = ut_malloc(1024 * 1024);
	for (size_t i = 0; i < 1024 * 1024; i++)
		text[i] = "line of text\n"[i % 13];
	ut_write(f->src, "text", text, 1024 * 1024);
	free(text);
	f->pack = ut_join(f->dir, "p.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, NULL); /* 64 KiB frames */
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &f->p), STG_OK);
	f->file = ut_read(f->pack, &f->file_len);
	assert_true(f->p->t.n_frames > 40);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	stg_pack_close(f->p);
	free(f->file);
	return ut_teardown(state);
}

static void progress(void *arg, const char *what, uint64_t done, uint64_t total)
{
	fx *f = arg;
	assert_string_equal(what, "verify");
	f->backwards |= done <= f->last_done || done > total;
	f->last_done = done;
	f->calls++;
}

/* What the readers delivered. */
typedef struct got {
	size_t n;                    /* frames taken from the queue, in order */
	size_t chunked;              /* of them, read with others before them */
	stg_err err;                 /* the run's error */
	char errmsg[STG_ERRMSG_MAX]; /* and its message */
} got;

/* Run n_readers readers over frames[0..n) of f's pack with n_bufs buffers
 * (with n_chunks > 0: chunks of up to READ_CHUNK_FRAMES frames, and a
 * buffer for each frame they can hold); this thread takes the queue and
 * checks each frame against the file. */
static void run_chunked(fx *f, const size_t *frames, size_t n, int n_readers, int n_bufs,
                        size_t n_chunks, got *g)
{
	ex_tree tr = {.ctx = f->ctx, .p = f->p, .rootfd = -1};
	ex_state s;
	memset(&s, 0, sizeof s);
	s.ctx = f->ctx;
	s.p = f->p;
	s.t = &f->p->t;
	s.tr = &tr;
	s.frames = frames;
	s.n_frames = n;
	for (size_t i = 0; i < n; i++) {
		const stg_frame *fr = &s.t->frames[frames[i]];
		s.total += fr->comp_size;
		if (fr->comp_size > s.comp_max)
			s.comp_max = fr->comp_size;
	}
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv_read, NULL);
	pthread_cond_init(&s.cv_work, NULL);
	pthread_cond_init(&s.cv_piece, NULL);
	pthread_mutex_init(&s.progress_mu, NULL);
	s.chunk_frames = 1;
	ex_chunk *chunks = NULL;
	if (n_chunks) {
		s.chunk_frames = READ_CHUNK_FRAMES;
		n_bufs = (int)(n_chunks * READ_CHUNK_FRAMES);
		chunks = calloc(n_chunks, sizeof *chunks);
		for (size_t i = 0; i < n_chunks; i++) {
			chunks[i].next = s.chunk_free;
			s.chunk_free = &chunks[i];
		}
	}
	ex_buf *bufs = calloc((size_t)n_bufs, sizeof *bufs);
	for (int i = 0; i < n_bufs; i++) {
		bufs[i].next = s.free_list;
		s.free_list = &bufs[i];
	}
	s.n_free = (size_t)n_bufs;
	s.readers = n_readers;
	pthread_t th[2];
	for (int i = 0; i < n_readers; i++)
		assert_int_equal(pthread_create(&th[i], NULL, stg__ex_reader, &s), 0);
	memset(g, 0, sizeof *g);
	pthread_mutex_lock(&s.mu);
	for (;;) {
		while (!s.qhead && s.readers > 0)
			pthread_cond_wait(&s.cv_work, &s.mu);
		ex_buf *b = s.qhead;
		if (!b)
			break;
		s.qhead = b->next;
		if (!s.qhead)
			s.qtail = NULL;
		pthread_mutex_unlock(&s.mu);
		/* the next frame in order, its bytes as the file holds them */
		assert_true(g->n < n);
		assert_int_equal(b->frame, frames[g->n]);
		assert_int_equal(b->refs, 1);
		const stg_frame *fr = &s.t->frames[b->frame];
		assert_memory_equal(b->data, f->file + fr->comp_off, fr->comp_size);
		if (n_chunks) { /* inside its chunk, where the pack has it */
			assert_non_null(b->chunk);
			assert_true(b->chunk->refs > 0);
			assert_true(b->data >= b->chunk->data &&
			            b->data + fr->comp_size <= b->chunk->data + READ_CHUNK);
			g->chunked += b->data != b->chunk->data;
		}
		g->n++;
		pthread_mutex_lock(&s.mu);
		b->next = s.free_list;
		s.free_list = b;
		s.n_free++;
		if (b->chunk && !--b->chunk->refs) {
			b->chunk->next = s.chunk_free;
			s.chunk_free = b->chunk;
		}
		pthread_cond_broadcast(&s.cv_read);
	}
	pthread_mutex_unlock(&s.mu);
	for (int i = 0; i < n_readers; i++)
		pthread_join(th[i], NULL);
	g->err = s.err;
	snprintf(g->errmsg, sizeof g->errmsg, "%s", s.errmsg);
	assert_int_equal(s.next_queued, g->n);
	if (!s.err) {
		assert_int_equal(s.done, s.total);
		assert_int_equal(g->n, n);
	}
	/* every buffer and chunk back */
	assert_int_equal(s.n_free, (size_t)n_bufs);
	size_t free_chunks = 0;
	for (ex_chunk *c = s.chunk_free; c; c = c->next)
		free_chunks++;
	assert_int_equal(free_chunks, n_chunks);
	for (int i = 0; i < n_bufs; i++)
		if (!bufs[i].chunk)
			free(bufs[i].data);
	for (size_t i = 0; i < n_chunks; i++)
		free(chunks[i].data);
	free(chunks);
	free(bufs);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv_read);
	pthread_cond_destroy(&s.cv_work);
	pthread_cond_destroy(&s.cv_piece);
	pthread_mutex_destroy(&s.progress_mu);
}

static void run_readers(fx *f, const size_t *frames, size_t n, int n_readers, int n_bufs, got *g)
{
	run_chunked(f, frames, n, n_readers, n_bufs, 0, g);
}

static size_t *all_frames(fx *f, size_t *n)
{
	*n = f->p->t.n_frames;
	size_t *frames = ut_malloc(*n * sizeof *frames);
	for (size_t i = 0; i < *n; i++)
		frames[i] = i;
	return frames;
}

static void test_in_order(void **state)
{
	fx *f = *state;
	size_t n;
	size_t *frames = all_frames(f, &n);
	/* the last frames come from the tail the trailer's read kept */
	assert_non_null(f->p->tail);
	assert_true(f->p->t.frames[n - 1].comp_off + f->p->t.frames[n - 1].comp_size >
	            f->p->tail_off);
	stg_set_progress(f->ctx, progress, f);
	static const int shapes[][2] = {{1, 1}, {2, 2}, {2, 3}, {1, 4}};
	for (size_t k = 0; k < 4; k++) {
		got g;
		f->last_done = 0;
		f->calls = 0;
		run_readers(f, frames, n, shapes[k][0], shapes[k][1], &g);
		if (g.err)
			fail_msg("%s", g.errmsg);
		assert_int_equal(g.n, n);
		assert_false(f->backwards);
		assert_true(f->calls > 0);
		uint64_t total = 0;
		for (size_t i = 0; i < n; i++)
			total += f->p->t.frames[i].comp_size;
		assert_int_equal(f->last_done, total);
	}
	/* a chunk at a time: one reader with one chunk, two with two (the
	 * last frames' read partly from what the trailer's read kept) */
	for (size_t k = 1; k <= 2; k++) {
		got g;
		f->last_done = 0;
		run_chunked(f, frames, n, (int)k, 0, k, &g);
		if (g.err)
			fail_msg("%s", g.errmsg);
		assert_int_equal(g.n, n);
		assert_true(g.chunked > n / 2);
		assert_false(f->backwards);
	}
	/* a subset: every third frame */
	size_t m = 0;
	for (size_t i = 0; i < n; i += 3)
		frames[m++] = i;
	got g;
	run_readers(f, frames, m, 2, 2, &g);
	assert_int_equal(g.err, STG_OK);
	assert_int_equal(g.n, m);
	/* ... and with chunks: frames that do not follow on are read apart */
	run_chunked(f, frames, m, 2, 0, 2, &g);
	assert_int_equal(g.err, STG_OK);
	assert_int_equal(g.n, m);
	assert_int_equal(g.chunked, 0);
	free(frames);
}

/* The pack cut short after it was opened: the frames before the cut come
 * through whole, the first one past it is named. */
static void test_truncated(void **state)
{
	fx *f = *state;
	size_t n;
	size_t *frames = all_frames(f, &n);
	/* a frame halfway to what the trailer's read kept */
	size_t k = 0;
	while (f->p->t.frames[k].comp_off < f->p->tail_off / 2)
		k++;
	assert_true(k > 2);
	const stg_frame *cut = &f->p->t.frames[k];
	assert_true(cut->comp_off + cut->comp_size < f->p->tail_off);
	assert_int_equal(truncate(f->pack, (off_t)(cut->comp_off + cut->comp_size / 2)), 0);
	got g;
	/* one reader: every frame before the cut is queued before it fails
	 * (with two, the one past the cut may fail while the other's frame
	 * before it still waits its turn) */
	run_readers(f, frames, n, 1, 3, &g);
	assert_int_equal(g.err, STG_ECORRUPT);
	char want[64];
	snprintf(want, sizeof want, "damaged pack: frame %zu is truncated", k);
	assert_string_equal(g.errmsg, want);
	assert_int_equal(g.n, k);
	/* a chunk read that the cut ends: the cut frame named, none of that
	 * chunk's frames passed on (nor any after) */
	run_chunked(f, frames, n, 2, 0, 2, &g);
	assert_int_equal(g.err, STG_ECORRUPT);
	assert_string_equal(g.errmsg, want);
	assert_true(g.n <= k);
	free(frames);
}

/* A read that fails: EIO, the frame and the system's word named. */
static void test_read_error(void **state)
{
	fx *f = *state;
	size_t n;
	size_t *frames = all_frames(f, &n);
	int wr = open(f->pack, O_WRONLY);
	assert_true(wr >= 0);
	int keep = f->p->fd;
	f->p->fd = wr; /* pread: EBADF */
	got g;
	run_readers(f, frames, n, 1, 2, &g);
	f->p->fd = keep;
	close(wr);
	assert_int_equal(g.err, STG_EIO);
	assert_string_equal(g.errmsg, "reading frame 0 of the pack: Bad file descriptor");
	assert_int_equal(g.n, 0);
	free(frames);
}

static void test_cancel_and_first_error(void **state)
{
	fx *f = *state;
	size_t n;
	size_t *frames = all_frames(f, &n);
	stg_cancel(f->ctx);
	got g;
	run_readers(f, frames, n, 2, 2, &g);
	assert_int_equal(g.err, STG_EINTR);
	assert_string_equal(g.errmsg, "interrupted");
	assert_int_equal(g.n, 0);
	/* the first error is the one kept */
	ex_state s;
	memset(&s, 0, sizeof s);
	s.ctx = ut_ctx(0);
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv_read, NULL);
	pthread_cond_init(&s.cv_work, NULL);
	pthread_cond_init(&s.cv_piece, NULL);
	assert_false(stg__ex_failed(&s));
	stg__ex_fail(&s, STG_ECORRUPT, "frame %d is bad", 7);
	stg__ex_fail(&s, STG_EIO, "later");
	assert_true(stg__ex_failed(&s));
	assert_int_equal(s.err, STG_ECORRUPT);
	assert_string_equal(s.errmsg, "frame 7 is bad");
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv_read);
	pthread_cond_destroy(&s.cv_work);
	pthread_cond_destroy(&s.cv_piece);
	stg_ctx_free(s.ctx);
	free(frames);
}

/* Direct reads: not on a local disk; refused by a read (frames are not
 * aligned: EINVAL), then off for the rest of the pack. */
static void test_direct(void **state)
{
	fx *f = *state;
	size_t n;
	size_t *frames = all_frames(f, &n);
	ex_state s;
	memset(&s, 0, sizeof s);
	s.ctx = f->ctx;
	s.p = f->p;
	s.t = &f->p->t;
	s.frames = frames;
	s.n_frames = n;
	s.total = 64ull << 20; /* large frames */
	int fl = fcntl(f->p->fd, F_GETFL);
	assert_int_equal(stg__ex_direct_begin(&s), -1);
	assert_false(s.direct);
	assert_int_equal(fcntl(f->p->fd, F_GETFL), fl);
	/* the buffers: through the page cache a frame a read, about 32 MiB
	 * ahead; direct, small frames a chunk at a time, large ones not */
	s.comp_max = 256 << 10;
	assert_int_equal(stg__ex_buffers(&s, 2), 128);
	assert_int_equal(s.chunk_frames, 1);
	assert_int_equal(stg__ex_readers(&s), 1);
	s.direct = true;
	assert_int_equal(stg__ex_buffers(&s, 2), (32 / 4) * READ_CHUNK_FRAMES);
	assert_int_equal(s.chunk_frames, READ_CHUNK_FRAMES);
	assert_int_equal(s.n_chunks, 32 / 4);
	assert_int_equal(stg__ex_readers(&s), 2);
	s.comp_max = 4 << 20;
	s.n_chunks = 0;
	assert_int_equal(stg__ex_buffers(&s, 2), 8);
	assert_int_equal(s.chunk_frames, 1);
	assert_int_equal(s.n_chunks, 0);
	s.direct = false;
	s.comp_max = 0;

	if (fcntl(f->p->fd, F_SETFL, fl | O_DIRECT)) {
		fprintf(stderr, "# this filesystem refuses O_DIRECT: the refusal by a read is "
		                "not tested\n");
	} else {
		/* what run_readers sets up, with direct reads on */
		ex_tree tr = {.ctx = f->ctx, .p = f->p, .rootfd = -1};
		s.tr = &tr;
		s.direct = true;
		s.total = 0;
		for (size_t i = 0; i < n; i++) {
			s.total += s.t->frames[i].comp_size;
			if (s.t->frames[i].comp_size > s.comp_max)
				s.comp_max = s.t->frames[i].comp_size;
		}
		pthread_mutex_init(&s.mu, NULL);
		pthread_cond_init(&s.cv_read, NULL);
		pthread_cond_init(&s.cv_work, NULL);
		pthread_cond_init(&s.cv_piece, NULL);
		pthread_mutex_init(&s.progress_mu, NULL);
		ex_buf bufs[2] = {{0}};
		bufs[0].next = &bufs[1];
		s.free_list = &bufs[0];
		s.n_free = 2;
		s.chunk_frames = 1;
		s.readers = 1;
		assert_true(stg__ex_cached(&s) == false);
		/* one reader on this thread, one buffer at a time: take each
		 * frame as it is queued */
		s.n_frames = 2;
		stg__ex_reader(&s);
		assert_int_equal(s.err, STG_OK);
		assert_int_equal(s.next_queued, 2);
		assert_true(s.direct_refused);
		assert_true(stg__ex_cached(&s));
		assert_int_equal(fcntl(f->p->fd, F_GETFL) & O_DIRECT, 0);
		for (ex_buf *b = s.qhead; b; b = b->next) {
			const stg_frame *fr = &s.t->frames[b->frame];
			assert_memory_equal(b->data, f->file + fr->comp_off, fr->comp_size);
		}
		free(bufs[0].data);
		free(bufs[1].data);
		pthread_mutex_destroy(&s.mu);
		pthread_cond_destroy(&s.cv_read);
		pthread_cond_destroy(&s.cv_work);
		pthread_cond_destroy(&s.cv_piece);
		pthread_mutex_destroy(&s.progress_mu);
	}
	free(frames);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_in_order), T(test_truncated), T(test_read_error), T(test_cancel_and_first_error),
        T(test_direct),
};

UT_MAIN(tests)
