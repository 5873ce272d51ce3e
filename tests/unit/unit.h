/*
 * unit.h - helpers shared by the C unit tests: temporary trees, file
 * writing and comparing, caches and stages, fake commands on PATH, child
 * processes and writer threads, the fixture most tests share (ut_fx, with
 * ut_setup, ut_setup_cache and ut_teardown for cmocka), and a cmocka main
 * that reports in TAP (tests/run.sh counts it).
 */
#ifndef STG_UNIT_H
#define STG_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bytes.h"
#include "collect_mark.h"
#include "config.h"
#include "ctx.h"
#include "extract.h"
#include "extract_tree.h"
#include "fsutil.h"
#include "manifest.h"
#include "pack_read.h"
#include "path.h"
#include "slurm.h"
#include "trailer.h"
#include "units.h"
#include "libstage.h"

/* malloc that aborts when out of memory. */
static inline void *ut_malloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	return p;
}

/* Built with sanitizers: tests/run.sh exports SAN_FLAGS (non-empty under
 * make asan and make ubsan), and ASan says so at compile time too.  Such
 * builds are slow: wall-clock upper bounds are not checked there (lower
 * bounds, a limit never beaten, always are). */
static inline int ut_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 1;
#else
	const char *s = getenv("SAN_FLAGS");
	return s && *s;
#endif
}

/* T seconds is under MAX: a wall-clock upper bound, not checked when
 * sanitized. */
#define ut_assert_time_below(t, max)                                                               \
	do {                                                                                       \
		if (!ut_sanitized())                                                               \
			assert_true((t) < (max));                                                  \
	} while (0)

/* A fresh temporary directory (malloc'ed path). */
static inline char *ut_tmpdir(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *p = ut_malloc(strlen(base) + 32);
	sprintf(p, "%s/stg-unit.XXXXXX", base);
	assert_non_null(mkdtemp(p));
	return p;
}

/* "a/b" (malloc'ed). */
static inline char *ut_join(const char *a, const char *b)
{
	if (!a || !b)
		abort();
	char *p = ut_malloc(strlen(a) + strlen(b) + 2);
	sprintf(p, "%s/%s", a, b);
	return p;
}

/* Write dir/name with len bytes of data (created or truncated, 0644). */
static inline void ut_write(const char *dir, const char *name, const void *data, size_t len)
{
	char *p = ut_join(dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	free(p);
}

/* Make the directory dir/name (0755). */
static inline void ut_mkdir(const char *dir, const char *name)
{
	char *p = ut_join(dir, name);
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
}

/* Read a whole file (malloc'ed); *len set. */
static inline uint8_t *ut_read(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	fstat(fd, &st);
	uint8_t *buf = ut_malloc((size_t)st.st_size + 1);
	assert_int_equal(stg__pread_full(fd, buf, (size_t)st.st_size, 0), 0);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* Remove the tree p (stg__rmtree). */
static inline void ut_rmtree(const char *p)
{
	stg__rmtree(p);
}

/* Deterministic pseudo-random bytes. */
static inline void ut_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

/* Unset the variables through which a Slurm job (the one these tests may
 * run in) reaches the library. */
static inline void ut_no_slurm(void)
{
	static const char *const vars[] = {
	        "SLURM_JOB_ID",   "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_NODEID",
	        "SLURM_JOB_NAME", "SLURMD_NODENAME",    "SLURM_TMPDIR",
	};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
}

/* A configuration that keeps a cache inside root: the scratch root
 * root/scratch, the node slots in root/slots, no free-space floor and no
 * waiting for slots; settings[] are more "key", "value" pairs (NULL
 * ends them). */
static inline stg_config *ut_config(stg_ctx *ctx, const char *root, const char *const *settings)
{
	stg_config *cfg = stg_config_new();
	assert_non_null(cfg);
	char *scratch = ut_join(root, "scratch"), *slots = ut_join(root, "slots");
	assert_int_equal(stg_config_set(ctx, cfg, "scratch_root", scratch, "test"), STG_OK);
	assert_int_equal(stg_config_set(ctx, cfg, "slot_dir", slots, "test"), STG_OK);
	assert_int_equal(stg_config_set(ctx, cfg, "min_free", "0", "test"), STG_OK);
	for (size_t i = 0; settings && settings[i]; i += 2)
		if (stg_config_set(ctx, cfg, settings[i], settings[i + 1], "test"))
			fail_msg("%s", stg_errmsg(ctx));
	free(scratch);
	free(slots);
	return cfg;
}

/* A cache opened with ut_config. */
static inline stg_cache *ut_cache(stg_ctx *ctx, const char *root, const char *const *settings)
{
	stg_config *cfg = ut_config(ctx, root, settings);
	stg_cache *c = NULL;
	if (stg_cache_open(ctx, cfg, &c))
		fail_msg("cache: %s", stg_errmsg(ctx));
	stg_config_free(cfg);
	return c;
}

/* Pack the tree src into out (64 KiB frames); fails the test on error. */
static inline void ut_pack(stg_ctx *ctx, const char *src, const char *out, stg_pack_info *info)
{
	stg_pack_opts o;
	stg_pack_opts_init(&o);
	o.frame_size = 64 * 1024;
	if (stg_pack_dir(ctx, src, out, &o, info))
		fail_msg("pack: %s", stg_errmsg(ctx));
}

/* Write dir/name with len pseudo-random bytes (ut_fill with seed). */
static inline void ut_fill_file(const char *dir, const char *name, size_t len, uint64_t seed)
{
	uint8_t *b = ut_malloc(len + 1);
	ut_fill(b, len, seed);
	ut_write(dir, name, b, len);
	free(b);
}

/* Make dir/name a symlink to target. */
static inline void ut_symlink(const char *dir, const char *name, const char *target)
{
	char *p = ut_join(dir, name);
	assert_int_equal(symlink(target, p), 0);
	free(p);
}

/* Make dir/name a hard link to dir/existing. */
static inline void ut_hardlink(const char *dir, const char *name, const char *existing)
{
	char *p = ut_join(dir, name), *e = ut_join(dir, existing);
	assert_int_equal(link(e, p), 0);
	free(p);
	free(e);
}

/* Is there a path (a link not followed) under the directory dfd? */
static inline bool ut_exists_at(int dfd, const char *path)
{
	struct stat st;
	return fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A whole file as a string (malloc'ed, NUL-terminated). */
static inline char *ut_read_text(const char *path)
{
	size_t len;
	char *t = (char *)ut_read(path, &len);
	t[len] = '\0';
	return t;
}

/* Files a and b hold the same bytes. */
static inline void ut_same_file(const char *a, const char *b)
{
	size_t la, lb;
	uint8_t *ca = ut_read(a, &la), *cb = ut_read(b, &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(ca, cb, la);
	free(ca);
	free(cb);
}

/* a/name and b/name hold the same bytes. */
static inline void ut_same_in(const char *a, const char *b, const char *name)
{
	char *pa = ut_join(a, name), *pb = ut_join(b, name);
	ut_same_file(pa, pb);
	free(pa);
	free(pb);
}

/* dir/name holds exactly the string want. */
static inline void ut_content_is(const char *dir, const char *name, const char *want)
{
	char *p = ut_join(dir, name);
	size_t len;
	uint8_t *b = ut_read(p, &len);
	if (len != strlen(want) || memcmp(b, want, len))
		fail_msg("'%s' holds '%.*s', want '%s'", name, (int)len, (char *)b, want);
	free(b);
	free(p);
}

/* path is a symlink to want. */
static inline void ut_link_is(const char *path, const char *want)
{
	char buf[4096];
	ssize_t n = readlink(path, buf, sizeof buf - 1);
	if (n <= 0)
		fail_msg("'%s' is not a link", path);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

/* Tree b holds what tree a holds: names, types and modes, the contents and
 * mtimes of files, link targets; exact: also every size and the mtimes of
 * directories, and nothing more in b. */
static inline void ut_tree_holds(const char *a, const char *b, bool exact)
{
	DIR *d = opendir(a);
	assert_non_null(d);
	struct dirent *de;
	size_t n = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		char *pa = ut_join(a, de->d_name), *pb = ut_join(b, de->d_name);
		struct stat sa, sb;
		assert_int_equal(lstat(pa, &sa), 0);
		if (lstat(pb, &sb))
			fail_msg("'%s' missing", pb);
		assert_int_equal(sa.st_mode, sb.st_mode);
		if (exact)
			assert_int_equal(sa.st_size, sb.st_size);
		if (S_ISREG(sa.st_mode) || (exact && S_ISDIR(sa.st_mode))) {
			assert_int_equal(sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
			assert_int_equal(sa.st_mtim.tv_nsec, sb.st_mtim.tv_nsec);
		}
		if (S_ISDIR(sa.st_mode)) {
			ut_tree_holds(pa, pb, exact);
		} else if (S_ISREG(sa.st_mode)) {
			ut_same_file(pa, pb);
		} else {
			char ta[256] = {0}, tb[256] = {0};
			assert_true(readlink(pa, ta, sizeof ta - 1) > 0);
			assert_true(readlink(pb, tb, sizeof tb - 1) > 0);
			assert_string_equal(ta, tb);
		}
		free(pa);
		free(pb);
	}
	closedir(d);
	if (!exact)
		return;
	d = opendir(b);
	assert_non_null(d);
	size_t m = 0;
	while ((de = readdir(d)))
		m += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	assert_int_equal(n, m);
}

/* No name of ours (.stager-*) in dir; deep: nor below it. */
static inline void ut_no_temporaries(const char *dir, bool deep)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strncmp(de->d_name, ".stager-", 8))
			fail_msg("'%s/%s' left", dir, de->d_name);
		if (deep && de->d_type == DT_DIR) {
			char *p = ut_join(dir, de->d_name);
			ut_no_temporaries(p, true);
			free(p);
		}
	}
	closedir(d);
}

/* Flip the bits of mask in the byte at off of the file path (again: undone). */
static inline void ut_flip(const char *path, off_t off, uint8_t mask)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= mask;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* A made-up cache key: STG_DIGEST_HEXLEN times the hex digit i (0 to 15). */
static inline const char *ut_key(int i)
{
	static char k[16][STG_DIGEST_HEXLEN + 1];
	memset(k[i], "0123456789abcdef"[i], STG_DIGEST_HEXLEN);
	k[i][STG_DIGEST_HEXLEN] = '\0';
	return k[i];
}

/* Stage src to dest in c with o (NULL: the defaults); owner "job-1" unless
 * o names one. */
static inline stg_err ut_stage(stg_ctx *ctx, stg_cache *c, const char *src, const char *dest,
                               stg_stage_opts *o, stg_stage_result *r)
{
	stg_stage_opts def;
	if (!o) {
		stg_stage_opts_init(&def);
		o = &def;
	}
	o->dest = dest;
	if (!o->owner)
		o->owner = "job-1";
	return stg_stage(ctx, c, src, o, r);
}

/* Write the executable script dir/name (a fake command). */
static inline void ut_script(const char *dir, const char *name, const char *text)
{
	ut_write(dir, name, text, strlen(text));
	char *p = ut_join(dir, name);
	assert_int_equal(chmod(p, 0755), 0);
	free(p);
}

/* The value of the environment variable name (malloc'ed; NULL: unset),
 * for ut_env_restore. */
static inline char *ut_env_save(const char *name)
{
	return getenv(name) ? strdup(getenv(name)) : NULL;
}

/* Set name back to old (from ut_env_save; NULL: unset it), and free old. */
static inline void ut_env_restore(const char *name, char *old)
{
	if (old)
		setenv(name, old, 1);
	else
		unsetenv(name);
	free(old);
}

/* Set PATH to path, or put dir first in it (path NULL); the old PATH for
 * ut_path_restore. */
static inline char *ut_path_set(const char *path, const char *dir)
{
	char *old = ut_env_save("PATH");
	if (path) {
		setenv("PATH", path, 1);
		return old;
	}
	const char *rest = old ? old : "/usr/bin:/bin";
	char *p = ut_malloc(strlen(dir) + strlen(rest) + 2);
	sprintf(p, "%s:%s", dir, rest);
	setenv("PATH", p, 1);
	free(p);
	return old;
}

/* Set PATH back to old (from ut_path_set), and free old. */
static inline void ut_path_restore(char *old)
{
	ut_env_restore("PATH", old);
}

/* Fork a child that runs fn(arg) (takes a lock, say) and then lives on for
 * hold seconds (0: until killed); *child is set at once (ut_kill, should
 * the test fail); returns once fn has returned 0 in the child. */
static inline void ut_child(pid_t *child, int (*fn)(void *), void *arg, double hold)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (fn(arg) || write(p[1], "x", 1) != 1)
			_exit(1);
		if (hold > 0) {
			struct timespec ts = {(time_t)hold,
			                      (long)((hold - (double)(time_t)hold) * 1e9)};
			nanosleep(&ts, NULL);
		} else {
			pause();
		}
		_exit(0);
	}
	*child = pid;
	close(p[1]);
	char x;
	assert_int_equal(read(p[0], &x, 1), 1);
	close(p[0]);
}

/* Kill *child (if any) and wait for it; *child becomes 0. */
static inline void ut_kill(pid_t *child)
{
	if (*child > 0) {
		kill(*child, SIGKILL);
		waitpid(*child, NULL, 0);
	}
	*child = 0;
}

/* A thread that rewrites the byte at off of path every us microseconds
 * (a file changing while it is read) from ut_writer_start to ut_writer_stop. */
typedef struct ut_writer {
	char *path;
	off_t off;
	long us;
	volatile int stop;
	volatile long writes; /* made so far */
	pthread_t th;
} ut_writer;

/* The thread of a ut_writer. */
static inline void *ut_writer_run(void *arg)
{
	ut_writer *w = arg;
	int fd = open(w->path, O_WRONLY);
	uint8_t b = 0;
	while (!w->stop) {
		b++;
		if (pwrite(fd, &b, 1, w->off) == 1)
			w->writes++;
		struct timespec ts = {0, w->us * 1000};
		nanosleep(&ts, NULL);
	}
	close(fd);
	return NULL;
}

/* Start w's thread (w->path, off and us set); it has written once when
 * this returns (a thread not yet run changes nothing). */
static inline void ut_writer_start(ut_writer *w)
{
	w->stop = 0;
	w->writes = 0;
	assert_int_equal(pthread_create(&w->th, NULL, ut_writer_run, w), 0);
	while (w->writes == 0) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
}

/* Stop w's thread and wait for it. */
static inline void ut_writer_stop(ut_writer *w)
{
	w->stop = 1;
	pthread_join(w->th, NULL);
}

/* The warnings (and other messages) of a context, in one buffer. */
typedef struct ut_log {
	int n, warnings;
	char text[16384];
} ut_log;

/* A stg_log_fn that adds msg to the ut_log arg. */
static inline void ut_log_fn(void *arg, stg_log_level level, const char *msg)
{
	ut_log *l = arg;
	size_t used = strlen(l->text);
	l->n++;
	if (level == STG_LOG_WARN)
		l->warnings++;
	snprintf(l->text + used, sizeof l->text - used, "%s\n", msg);
}

/* In a function whose last parameters are fmt, ...: the array buf filled
 * from them (vsnprintf). */
#define UT_VFMT(buf, fmt)                                                                          \
	do {                                                                                       \
		va_list ap_;                                                                       \
		va_start(ap_, fmt);                                                                \
		vsnprintf(buf, sizeof buf, fmt, ap_);                                              \
		va_end(ap_);                                                                       \
	} while (0)

/* A context (assert non-NULL) with threads worker threads (0: the default). */
static inline stg_ctx *ut_ctx(int threads)
{
	stg_ctx *ctx = stg_ctx_new();
	assert_non_null(ctx);
	if (threads)
		stg_set_threads(ctx, threads);
	return ctx;
}

/* The fields of ut_fx (see UT_FX). */
#define UT_FX_FIELDS                                                                               \
	stg_ctx *ctx;            /* logs into log */                                               \
	char *dir;               /* a fresh temporary directory */                                 \
	stg_cache *c;            /* a cache in dir (ut_setup_cache), or NULL */                    \
	char *src, *dest, *pack; /* paths a test may set (malloc'ed), freed with the rest */       \
	ut_log log

/* The fixture most tests share: Slurm's variables unset, a context whose
 * messages land in log, a temporary directory and, maybe, a cache in it. */
typedef struct ut_fx {
	UT_FX_FIELDS;
} ut_fx;

/* First member of a test's own fixture with more fields: ut_fx's fields
 * by their names (f->ctx, f->dir, f->c, f->src ...), all of them as f->ut. */
#define UT_FX                                                                                      \
	union {                                                                                    \
		ut_fx ut;                                                                          \
		struct {                                                                           \
			UT_FX_FIELDS;                                                              \
		};                                                                                 \
	}

/* Fill a zeroed f: Slurm's variables unset, ctx logging into log, dir. */
static inline void ut_fx_init(ut_fx *f)
{
	ut_no_slurm();
	f->ctx = ut_ctx(0);
	stg_set_log(f->ctx, ut_log_fn, &f->log);
	f->dir = ut_tmpdir();
}

/* Undo ut_fx_init (close c, free src, dest and pack): dir removed, Slurm's
 * variables unset. */
static inline void ut_fx_fini(ut_fx *f)
{
	stg_cache_close(f->c);
	free(f->src);
	free(f->dest);
	free(f->pack);
	ut_rmtree(f->dir);
	free(f->dir);
	stg_ctx_free(f->ctx);
	ut_no_slurm();
}

/* A zeroed fixture of size bytes (a ut_fx or one that starts with UT_FX),
 * its ut_fx filled. */
static inline void *ut_fx_new(size_t size)
{
	ut_fx *f = ut_malloc(size);
	memset(f, 0, size);
	ut_fx_init(f);
	return f;
}

/* cmocka setup: a ut_fx without a cache. */
static inline int ut_setup(void **state)
{
	*state = ut_fx_new(sizeof(ut_fx));
	return 0;
}

/* f's cache (closed if open) opened again with settings (ut_cache). */
static inline void ut_fx_cache(ut_fx *f, const char *const *settings)
{
	stg_cache_close(f->c);
	f->c = ut_cache(f->ctx, f->dir, settings);
}

/* cmocka setup: a ut_fx with a cache in dir (ut_cache, no settings). */
static inline int ut_setup_cache(void **state)
{
	ut_fx *f = ut_fx_new(sizeof *f);
	ut_fx_cache(f, NULL);
	*state = f;
	return 0;
}

/* cmocka teardown of ut_setup, ut_setup_cache or ut_fx_new (whose own
 * fields the test freed first). */
static inline int ut_teardown(void **state)
{
	ut_fx_fini(*state);
	free(*state);
	return 0;
}

/* A chain dir/d/d/.../d depth levels deep, made through descriptors (its
 * paths may be longer than PATH_MAX), with a file "f" holding "bottom"
 * at the bottom. */
static inline void ut_make_deep(const char *dir, int depth)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	for (int i = 0; i < depth; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		int sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		assert_true(sub >= 0);
		close(fd);
		fd = sub;
	}
	int f = openat(fd, "f", O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(f >= 0);
	assert_int_equal(write(f, "bottom", 6), 6);
	close(f);
	close(fd);
}

/* How deep the chain of "d" under dir goes, and whether its bottom holds
 * the file ut_make_deep made; through descriptors. */
static inline int ut_deep_depth(const char *dir, bool *bottom)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY), depth = 0, sub;
	assert_true(fd >= 0);
	while ((sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW)) >= 0) {
		close(fd);
		fd = sub;
		depth++;
	}
	char buf[16] = {0};
	int f = openat(fd, "f", O_RDONLY | O_NOFOLLOW);
	*bottom = f >= 0 && read(f, buf, sizeof buf) == 6 && !memcmp(buf, "bottom", 6);
	if (f >= 0)
		close(f);
	close(fd);
	return depth;
}

/* The descriptors this process has open. */
static inline int ut_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = -1; /* d's own */
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* fn(arg) on a thread with a stack of stack bytes (a recursion as deep as
 * a tree would overflow it), its result returned. */
static inline void *ut_on_small_stack(void *(*fn)(void *), void *arg, size_t stack)
{
	pthread_attr_t at;
	pthread_t t;
	void *ret = NULL;
	assert_int_equal(pthread_attr_init(&at), 0);
	assert_int_equal(pthread_attr_setstacksize(&at, stack), 0);
	assert_int_equal(pthread_create(&t, &at, fn, arg), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	pthread_attr_destroy(&at);
	return ret;
}

/* main: run tests, reporting in TAP. */
#define UT_MAIN(tests)                                                                             \
	int main(void)                                                                             \
	{                                                                                          \
		cmocka_set_message_output(CM_OUTPUT_TAP);                                          \
		return cmocka_run_group_tests(tests, NULL, NULL);                                  \
	}

#endif
