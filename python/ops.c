/*
 * ops.c - stager.stage() and stager.collect(): the tool's operations, with
 * its settings (site file, user file, STAGER_* variables, then the
 * caller's), its node cache, slots and limits.
 *
 * Each runs on a thread of its own, signals blocked there, while the
 * calling thread waits without the GIL and asks Python for its signals
 * every 50 ms: on SIGINT (KeyboardInterrupt) or any handler that raises,
 * the operation is cancelled (stg_cancel: nothing partial is published),
 * waited for, and the exception goes on.
 */
#include "ext.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct op {
	stg_ctx *ctx;
	stg_cache *cache;
	bool collect;
	const char *src, *dest;
	stg_stage_opts so;
	stg_stage_result sres;
	stg_collect_opts co;
	stg_collect_totals ct;
	stg_err err;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} op;

static void *op_main(void *arg)
{
	op *o = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	o->err = o->collect ? stg_collect_every(o->ctx, o->cache, o->src, o->dest, &o->co, 0, -1,
	                                        &o->ct)
	                    : stg_stage(o->ctx, o->cache, o->src, &o->so, &o->sres);
	pthread_mutex_lock(&o->mu);
	o->done = true;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

/* Run o to its end; 0, or -1 with Python's exception set (then the
 * operation was cancelled). */
static int run(op *o)
{
	pthread_t th;
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	int failed = 0;
	if (pthread_create(&th, NULL, op_main, o)) {
		Py_BEGIN_ALLOW_THREADS op_main(o);
		Py_END_ALLOW_THREADS goto out;
	}
	for (;;) {
		bool done;
		Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&o->mu);
		if (!o->done) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 50 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&o->cv, &o->mu, &ts);
		}
		done = o->done;
		pthread_mutex_unlock(&o->mu);
		Py_END_ALLOW_THREADS if (done) break;
		if (!failed && PyErr_CheckSignals()) {
			failed = 1;
			stg_cancel(o->ctx);
		}
	}
	Py_BEGIN_ALLOW_THREADS pthread_join(th, NULL);
	Py_END_ALLOW_THREADS out : pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	return failed ? -1 : 0;
}

/* The settings: the tool's, then config_path's (must exist) instead of the
 * user's file, then the caller's dict of key -> str.  NULL with the
 * exception set. */
static stg_config *settings(stg_ctx *ctx, const char *config_path, PyObject *extra)
{
	stg_config *cfg = stg_config_new();
	if (!cfg)
		return (stg_config *)PyErr_NoMemory();
	stg_err err = stg_config_load_standard(ctx, cfg, config_path);
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	while (!err && extra && PyDict_Next(extra, &pos, &k, &v)) {
		const char *ks = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
		const char *vs = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
		if (!ks || !vs) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "settings are str: str");
			stg_config_free(cfg);
			return NULL;
		}
		err = stg_config_set(ctx, cfg, ks, vs, "the caller");
	}
	if (err) {
		raise_err(err, ctx, config_path);
		stg_config_free(cfg);
		return NULL;
	}
	return cfg;
}

/* A context that logs to Python, settings, the cache: 0, or -1 with the
 * exception set (and nothing left open). */
static int prepare(op *o, const char *config_path, PyObject *extra)
{
	stg_config *cfg = NULL;
	if (!(o->ctx = stg_ctx_new())) {
		PyErr_NoMemory();
		return -1;
	}
	stg_set_log(o->ctx, on_log, NULL);
	if (!(cfg = settings(o->ctx, config_path, extra)))
		goto fail;
	stg_err err;
	Py_BEGIN_ALLOW_THREADS err = stg_cache_open(o->ctx, cfg, &o->cache);
	Py_END_ALLOW_THREADS stg_config_free(cfg);
	if (err) {
		raise_err(err, o->ctx, NULL);
		goto fail;
	}
	return 0;
fail:
	stg_ctx_free(o->ctx);
	o->ctx = NULL;
	return -1;
}

static void finish(op *o)
{
	stg_cache_close(o->cache);
	stg_ctx_free(o->ctx);
}

/* A list of str as a NULL-ended array of UTF-8 strings (borrowed from the
 * list's items, which the caller keeps); NULL with the exception set. */
static const char **str_list(PyObject *seq, size_t *n)
{
	*n = 0;
	if (!seq || seq == Py_None)
		return calloc(1, sizeof(char *));
	if (!PyList_Check(seq) && !PyTuple_Check(seq))
		return PyErr_Format(PyExc_TypeError, "include is a list of patterns"), NULL;
	Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
	const char **v = calloc((size_t)len + 1, sizeof *v);
	if (!v)
		return (const char **)PyErr_NoMemory();
	for (Py_ssize_t i = 0; i < len; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
		if (!PyUnicode_Check(it) || !(v[i] = PyUnicode_AsUTF8(it))) {
			free(v);
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError,
				                "include is a list of str patterns");
			return NULL;
		}
	}
	*n = (size_t)len;
	return v;
}

PyObject *py_stage(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *kwlist[] = {"src", "dest",   "include",  "copy", "verify",
	                         "pin", "config", "settings", NULL};
	PyObject *src = NULL, *dest = NULL, *include = NULL, *config = NULL, *extra = NULL;
	int copy = 0, verify = 0, pin = 1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O&OpppO&O!:stage", kwlist,
	                                 PyUnicode_FSConverter, &src, PyUnicode_FSConverter, &dest,
	                                 &include, &copy, &verify, &pin, PyUnicode_FSConverter,
	                                 &config, &PyDict_Type, &extra))
		return NULL;
	op o = {0};
	PyObject *res = NULL;
	char *owner = NULL;
	size_t n_inc;
	const char **inc = str_list(include, &n_inc);
	if (!inc || prepare(&o, config ? PyBytes_AS_STRING(config) : NULL, extra))
		goto out;
	stg_stage_opts_init(&o.so);
	o.so.dest = dest ? PyBytes_AS_STRING(dest) : NULL;
	o.so.include = inc;
	o.so.n_include = n_inc;
	o.so.copy = copy;
	o.so.verify = verify;
	o.so.no_pin = !pin;
	/* pinned by this process, which uses what it staged, unless a job
	 * owns it */
	const char *job = getenv("SLURM_JOB_ID");
	if (pin && !(job && *job))
		o.so.owner = owner = stg_owner_process((int)getpid());
	o.src = PyBytes_AS_STRING(src);
	if (run(&o) == 0) {
		if (o.err) {
			raise_err(o.err, o.ctx, o.src);
		} else {
			char hex[STG_DIGEST_HEXLEN + 1];
			stg_digest_hex(o.sres.digest, hex);
			res = Py_BuildValue(
			        "{sNsssssOsKsKsKsd}", "path",
			        PyUnicode_DecodeFSDefault(o.sres.path), "digest", hex, "kind",
			        o.sres.kind, "hit", o.sres.hit ? Py_True : Py_False, "files",
			        (unsigned long long)o.sres.files, "content_bytes",
			        (unsigned long long)o.sres.content_bytes, "source_bytes",
			        (unsigned long long)o.sres.source_bytes, "seconds", o.sres.seconds);
		}
	}
	if (!o.err)
		stg_stage_result_free(&o.sres);
	finish(&o);
out:
	free(owner);
	free(inc);
	Py_XDECREF(src);
	Py_XDECREF(dest);
	Py_XDECREF(config);
	return res;
}

PyObject *py_collect(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *kwlist[] = {"src", "dest", "pack", "level", "config", "settings", NULL};
	PyObject *src = NULL, *dest = NULL, *config = NULL, *extra = NULL;
	int pack = 0, level = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|piO&O!:collect", kwlist,
	                                 PyUnicode_FSConverter, &src, PyUnicode_FSConverter, &dest,
	                                 &pack, &level, PyUnicode_FSConverter, &config,
	                                 &PyDict_Type, &extra))
		return NULL;
	op o = {.collect = true};
	PyObject *res = NULL;
	char *dest_x = NULL;
	if (prepare(&o, config ? PyBytes_AS_STRING(config) : NULL, extra))
		goto out;
	/* %j, %a, %N ... as the tool expands them */
	stg_err err = stg_expand_pattern(o.ctx, PyBytes_AS_STRING(dest), &dest_x);
	if (err) {
		raise_err(err, o.ctx, PyBytes_AS_STRING(dest));
		finish(&o);
		goto out;
	}
	stg_collect_opts_init(&o.co);
	o.co.pack = pack;
	o.co.level = level;
	o.src = PyBytes_AS_STRING(src);
	o.dest = dest_x;
	/* what is written: DEST, or DEST.tar.zst as a pack (collect_record.c) */
	size_t dl = strlen(dest_x);
	bool suffix = pack && (dl < 8 || strcmp(dest_x + dl - 8, ".tar.zst"));
	if (run(&o) == 0) {
		PyObject *d = o.err ? NULL : PyUnicode_DecodeFSDefault(dest_x);
		PyObject *written =
		        d && suffix ? PyUnicode_FromFormat("%U.tar.zst", d) : Py_XNewRef(d);
		Py_XDECREF(d);
		if (o.err)
			raise_err(o.err, o.ctx, o.src);
		else
			res = Py_BuildValue("{sNsKsKsKsKsKsKsd}", "dest", written, "files",
			                    (unsigned long long)o.ct.files, "sent_files",
			                    (unsigned long long)o.ct.sent_files, "sent_bytes",
			                    (unsigned long long)o.ct.sent_bytes, "unchanged",
			                    (unsigned long long)o.ct.unchanged, "failed",
			                    (unsigned long long)o.ct.failed, "changing",
			                    (unsigned long long)o.ct.changing, "seconds",
			                    o.ct.seconds);
	}
	finish(&o);
out:
	free(dest_x);
	Py_XDECREF(src);
	Py_XDECREF(dest);
	Py_XDECREF(config);
	return res;
}
