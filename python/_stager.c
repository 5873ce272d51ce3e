/*
 * _stager.c - stager's Python module (stager._stager): libstage for Python.
 *
 * Pack, a pack's files read at random (stg_reader: frames checked, cached
 * and decoded only as far as needed), and stage() and collect(), the
 * tool's operations with its settings, node cache, slots and limits
 * (ops.c); its errors and log are errors.c's.  The pure-Python layer
 * (stager/__init__.py, stager/torch.py) builds on these.
 *
 * The GIL is released whenever libstage reads, decodes or waits.  A Pack is
 * safe to share between threads: each read counts itself in while it runs;
 * close() marks the Pack closed (later reads fail at once), waits for the
 * reads already in progress only (but those of its own thread, under the
 * signal handler that closes it: they end), then frees the reader.  In a forked child
 * the Pack is the parent's copy: nothing there waits on the parent's threads
 * or locks (their copies may be held for ever); the child's first read
 * makes a reader of its own over the parent's manifest (stg_reader_fork:
 * its pages stay shared, not a copy per worker), and its close forgets the
 * parent's reader.  Long work answers SIGINT: a whole-file read goes
 * in pieces and asks Python for its signals between them; stage() and
 * collect() run on a thread of their own while the calling thread asks for
 * signals every 50 ms, and cancel the operation (stg_cancel) on one.
 */
#include "ext.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- Pack ---------------------------------------------------------------- */

typedef struct {
	PyObject_HEAD stg_reader *r;
	pthread_mutex_t mu;  /* over reads and closed */
	pthread_cond_t idle; /* reads fell to 0 */
	size_t reads;        /* reads in progress (in the process pid) */
	bool closed;         /* close() began: no read starts */
	PyObject *path;      /* str, as given */
	size_t cache;        /* its options, for a forked child's reopen */
	int prefetch;
	pid_t pid; /* the process that opened it (its threads are there) */
	char digest[STG_DIGEST_HEXLEN + 1];
} Pack;

/* In another process than the one that opened it: a forked child, where
 * mu, idle and reads are copies that the parent's threads may have held at
 * the fork, and that no thread here will ever release. */
static bool pack_foreign(const Pack *p)
{
	return p->pid != getpid();
}

/* The reads of this thread that are running Python's signal handlers
 * (pack_signals), innermost first: a close() from one of those handlers
 * must not wait for them (they wait for it), and marks them closed. */
typedef struct handling {
	Pack *p;
	bool closed; /* closed by a handler of this thread: its reader is gone */
	struct handling *next;
} handling;
static _Thread_local handling *handlers;

#define CHUNK (8u << 20) /* a whole-file read asks for signals this often */

/* Open the pack at path (its file system encoding) with these options and
 * its digest in hex at digest; NULL with the exception set. */
static stg_reader *pack_open(const char *path, size_t cache, int prefetch, char *digest)
{
	stg_ctx *ctx = stg_ctx_new();
	if (!ctx)
		return (stg_reader *)PyErr_NoMemory();
	stg_reader_opts o;
	stg_reader_opts_init(&o);
	o.cache_bytes = cache;
	o.prefetch = prefetch;
	stg_reader *r = NULL;
	stg_err err;
	Py_BEGIN_ALLOW_THREADS err = stg_reader_open(ctx, path, &o, &r);
	Py_END_ALLOW_THREADS if (err) raise_err(err, ctx, path);
	stg_ctx_free(ctx);
	if (r) {
		stg_pack_info info;
		stg_pack_get_info(stg_reader_pack(r), &info);
		stg_digest_hex(info.digest, digest);
	}
	return r;
}

/* In a forked child, at its first read: a reader of its own (GIL held; 0,
 * or -1 with the exception set and p unchanged).  It shares the parent's
 * manifest and file descriptor as the fork left them (stg_reader_fork:
 * their pages stay shared, not a copy per worker) and has its own cache,
 * locks and read-ahead thread; the parent's reader is left as it is (its
 * locks and its threads' state are copies that nothing here may wait on
 * or free).  A pack changed since it was opened, or no longer at its
 * path, is refused. */
static int pack_reopen(Pack *p)
{
	PyObject *path = PyUnicode_EncodeFSDefault(p->path);
	if (!path)
		return -1;
	stg_ctx *ctx = stg_ctx_new();
	if (!ctx) {
		Py_DECREF(path);
		PyErr_NoMemory();
		return -1;
	}
	stg_reader_opts o;
	stg_reader_opts_init(&o);
	o.cache_bytes = p->cache;
	o.prefetch = p->prefetch;
	stg_reader *r = NULL;
	stg_err err;
	/* (the GIL is released meanwhile: another thread of the child's may
	 * do it too; the first to finish is kept) */
	stg_reader *parent = p->r;
	Py_BEGIN_ALLOW_THREADS err = stg_reader_fork(ctx, parent, PyBytes_AS_STRING(path), &o, &r);
	Py_END_ALLOW_THREADS if (err) raise_err(err, ctx, PyBytes_AS_STRING(path));
	stg_ctx_free(ctx);
	Py_DECREF(path);
	if (!r)
		return -1;
	if (!pack_foreign(p) || !p->r || p->closed) {
		/* another thread was first, or closed it meanwhile */
		stg_reader_close(r);
		if (p->r && !p->closed)
			return 0;
		PyErr_SetString(PyExc_ValueError, "I/O operation on a closed Pack");
		return -1;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->reads = 0;
	p->r = r;
	p->pid = getpid();
	return 0;
}

/* Take the handle for a read (GIL held on entry and exit); 0, or -1 with
 * ValueError if the pack is closed.  In a forked child, the first opens
 * the pack again. */
static int pack_hold(Pack *p)
{
	/* (closed and the pid checked first: a child touches no lock) */
	if (!p->r || p->closed) {
		PyErr_SetString(PyExc_ValueError, "I/O operation on a closed Pack");
		return -1;
	}
	if (pack_foreign(p) && pack_reopen(p))
		return -1;
	/* (held only a moment, never by a thread that waits for the GIL) */
	pthread_mutex_lock(&p->mu);
	p->reads++;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

static void pack_release(Pack *p)
{
	pthread_mutex_lock(&p->mu);
	if (--p->reads == 0)
		pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->mu);
}

/* The index of name (a path or an index; held); -1 with KeyError if the
 * pack has no such file, IndexError if no file has that index. */
static Py_ssize_t pack_index(Pack *p, PyObject *name)
{
	Py_ssize_t i;
	int rc = index_of(name, &i);
	if (rc < 0)
		return -1;
	if (rc > 0) {
		if (i < 0 || (size_t)i >= stg_reader_count(p->r)) {
			PyErr_SetObject(PyExc_IndexError, name);
			return -1;
		}
		return i;
	}
	PyObject *b = name_bytes(name);
	if (!b)
		return -1;
	size_t j;
	rc = stg_reader_find(p->r, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b), &j);
	Py_DECREF(b);
	if (rc) {
		PyErr_SetObject(PyExc_KeyError, name);
		return -1;
	}
	return (Py_ssize_t)j;
}

/* A failed read of file i as an exception (held). */
static PyObject *read_failed(Pack *p, size_t i, int rc)
{
	stg_entry e;
	stg_reader_file(p->r, i, &e);
	char why[512], msg[1024];
	if (rc == ENOMEM)
		return PyErr_NoMemory();
	rc = stg_reader_why(p->r, i, rc, why, sizeof why);
	snprintf(msg, sizeof msg, "'%s' in the pack: %s", e.path, why);
	PyObject *path = PyUnicode_EncodeFSDefault(p->path);
	const char *fn = path ? PyBytes_AS_STRING(path) : NULL;
	if (rc == EIO)
		raise_status(4, EIO, msg, fn);
	else
		raise_status(7, rc, msg, fn);
	Py_XDECREF(path);
	return NULL;
}

static int Pack_init(Pack *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"path", "cache_bytes", "prefetch", NULL};
	PyObject *path;
	Py_ssize_t cache = 64 << 20;
	int prefetch = 1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|np:Pack", kwlist, PyUnicode_FSConverter,
	                                 &path, &cache, &prefetch))
		return -1;
	if (cache < 0) {
		Py_DECREF(path);
		PyErr_SetString(PyExc_ValueError, "cache_bytes must be positive");
		return -1;
	}
	if (self->r || pack_foreign(self)) {
		Py_DECREF(path);
		PyErr_SetString(PyExc_RuntimeError,
		                self->r ? "Pack is already open"
		                        : "this Pack was made by another process "
		                          "(before a fork): make a new one here");
		return -1;
	}
	stg_reader *r = pack_open(PyBytes_AS_STRING(path), (size_t)cache, prefetch, self->digest);
	if (!r) {
		Py_DECREF(path);
		return -1;
	}
	self->r = r;
	self->closed = false;
	self->cache = (size_t)cache;
	self->prefetch = prefetch;
	Py_XSETREF(self->path, PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(path),
	                                                        PyBytes_GET_SIZE(path)));
	Py_DECREF(path);
	return self->path ? 0 : -1;
}

static PyObject *Pack_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	(void)args;
	(void)kw;
	Pack *self = (Pack *)type->tp_alloc(type, 0);
	if (self) {
		self->pid = getpid();
		pthread_mutex_init(&self->mu, NULL);
		pthread_cond_init(&self->idle, NULL);
	}
	return (PyObject *)self;
}

static PyObject *Pack_close(Pack *self, PyObject *unused)
{
	(void)unused;
	if (!self->r || self->closed)
		Py_RETURN_NONE; /* (closed, or being closed by another thread) */
	if (pack_foreign(self)) {
		/* a fork's copy: the parent's reads and its reader's threads
		 * are not here to wait for or join, its memory is the parent's
		 * to free */
		self->r = NULL;
		self->closed = true;
		Py_RETURN_NONE;
	}
	/* no read starts from here on (the GIL is held: a read between its
	 * check and its count cannot interleave) */
	self->closed = true;
	/* this thread's own reads, under the signal handler that called
	 * this, end once it returns: not waited for */
	size_t mine = 0;
	for (handling *h = handlers; h; h = h->next)
		if (h->p == self) {
			h->closed = true;
			mine++;
		}
	Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->mu);
	while (self->reads > mine)
		pthread_cond_wait(&self->idle, &self->mu);
	pthread_mutex_unlock(&self->mu);
	Py_END_ALLOW_THREADS stg_reader *r = self->r;
	self->r = NULL;
	Py_BEGIN_ALLOW_THREADS stg_reader_close(r);
	Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static void Pack_dealloc(Pack *self)
{
	/* (no read is in progress: each holds a reference) */
	if (pack_foreign(self)) {
		/* the parent's: its copies of the locks may be held, and
		 * destroying a condition variable may wait for its waiters */
	} else {
		stg_reader_close(self->r);
		pthread_cond_destroy(&self->idle);
		pthread_mutex_destroy(&self->mu);
	}
	Py_XDECREF(self->path);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t Pack_len(Pack *self)
{
	if (pack_hold(self))
		return -1;
	Py_ssize_t n = (Py_ssize_t)stg_reader_count(self->r);
	pack_release(self);
	return n;
}

static PyObject *Pack_names(Pack *self, PyObject *unused)
{
	(void)unused;
	if (pack_hold(self))
		return NULL;
	size_t n = stg_reader_count(self->r);
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		stg_entry e;
		stg_reader_file(self->r, i, &e);
		PyObject *s = PyUnicode_DecodeFSDefault(e.path);
		if (!s)
			Py_CLEAR(list);
		else
			PyList_SET_ITEM(list, (Py_ssize_t)i, s);
	}
	pack_release(self);
	return list;
}

/* _entry(name or index) -> (index, size, mode, mtime_ns, frame) */
static PyObject *Pack_entry(Pack *self, PyObject *name)
{
	if (pack_hold(self))
		return NULL;
	Py_ssize_t i = pack_index(self, name);
	PyObject *res = NULL;
	if (i >= 0) {
		stg_entry e;
		stg_reader_file(self->r, (size_t)i, &e);
		res = Py_BuildValue("nKILn", i, (unsigned long long)e.size, 0100000u | e.mode,
		                    (long long)e.mtime * 1000000000LL + e.mtime_nsec,
		                    (Py_ssize_t)stg_reader_frame(self->r, (size_t)i));
	}
	pack_release(self);
	return res;
}

/* _frames() -> bytes: each file's frame, a native uint32 each (for
 * array('I')); a list of a million ints would cost 30 MB. */
static PyObject *Pack_frames(Pack *self, PyObject *unused)
{
	(void)unused;
	if (pack_hold(self))
		return NULL;
	size_t n = stg_reader_count(self->r);
	PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint32_t)));
	if (out) {
		uint32_t *v = (uint32_t *)PyBytes_AS_STRING(out);
		for (size_t i = 0; i < n; i++)
			v[i] = (uint32_t)stg_reader_frame(self->r, i);
	}
	pack_release(self);
	return out;
}

/* _frame(k) -> (offset, size, tar_offset, tar_size): frame k in the file */
static PyObject *Pack_frame(Pack *self, PyObject *index)
{
	Py_ssize_t k;
	if (index_arg(index, &k))
		return NULL;
	if (pack_hold(self))
		return NULL;
	uint64_t off, size, toff, tsize;
	PyObject *res =
	        k < 0 || stg_pack_frame(stg_reader_pack(self->r), (size_t)k, &off, &size, &toff,
	                                &tsize)
	                ? PyErr_Format(PyExc_IndexError, "no frame %zd", k)
	                : Py_BuildValue("KKKK", (unsigned long long)off, (unsigned long long)size,
	                                (unsigned long long)toff, (unsigned long long)tsize);
	pack_release(self);
	return res;
}

/* _prefetch(frame): fetch and check it in the background */
static PyObject *Pack_prefetch(Pack *self, PyObject *index)
{
	Py_ssize_t k;
	if (index_arg(index, &k))
		return NULL;
	if (pack_hold(self))
		return NULL;
	if (k >= 0)
		stg_reader_prefetch(self->r, (size_t)k, 1);
	pack_release(self);
	Py_RETURN_NONE;
}

/* _name(index) -> str */
static PyObject *Pack_name(Pack *self, PyObject *index)
{
	Py_ssize_t i;
	if (index_arg(index, &i))
		return NULL;
	if (pack_hold(self))
		return NULL;
	stg_entry e;
	PyObject *res = stg_reader_file(self->r, (size_t)i, &e) || i < 0
	                        ? PyErr_Format(PyExc_IndexError, "no file %zd", i)
	                        : PyUnicode_DecodeFSDefault(e.path);
	pack_release(self);
	return res;
}

/* Between two pieces of a read (held): Python's signal handlers run, the
 * read still counted (another thread's close waits for it to complete),
 * but a close() from a handler of this thread does not wait for it, and
 * the read then ends.  0 (held), or -1 with the exception set (released). */
static int pack_signals(Pack *p)
{
	handling h = {.p = p, .next = handlers};
	handlers = &h;
	int rc = PyErr_CheckSignals();
	handlers = h.next;
	if (pack_foreign(p)) {
		/* a handler forked: the count and its lock are the parent's
		 * copies, the reader the parent's */
		if (!rc)
			PyErr_SetString(PyExc_ValueError,
			                "this process was forked during the read: read again");
		return -1;
	}
	if (rc || h.closed) {
		if (!rc)
			PyErr_SetString(PyExc_ValueError,
			                p->r && !p->closed ? "the Pack was closed during the read"
			                                   : "I/O operation on a closed Pack");
		pack_release(p);
		return -1;
	}
	return 0;
}

/* read(name) -> bytes, checked against the file's XXH3-128 */
static PyObject *Pack_read(Pack *self, PyObject *name)
{
	if (pack_hold(self))
		return NULL;
	Py_ssize_t i = pack_index(self, name);
	if (i < 0) {
		pack_release(self);
		return NULL;
	}
	stg_entry e;
	stg_reader_file(self->r, (size_t)i, &e);
	if (e.size > (uint64_t)PY_SSIZE_T_MAX) {
		pack_release(self);
		return PyErr_NoMemory();
	}
	PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)e.size);
	XXH3_state_t *xs = XXH3_createState();
	if (!out || !xs) {
		XXH3_freeState(xs);
		Py_XDECREF(out);
		pack_release(self);
		return PyErr_NoMemory();
	}
	XXH3_128bits_reset(xs);
	uint8_t *buf = (uint8_t *)PyBytes_AS_STRING(out);
	int rc = 0;
	for (uint64_t done = 0; !rc && done < e.size;) {
		size_t want = e.size - done < CHUNK ? (size_t)(e.size - done) : CHUNK, got = 0;
		Py_BEGIN_ALLOW_THREADS rc =
		        stg_reader_pread(self->r, (size_t)i, buf + done, want, done, &got);
		if (!rc && got != want)
			rc = EIO;
		if (!rc)
			XXH3_128bits_update(xs, buf + done, got);
		Py_END_ALLOW_THREADS done += got;
		if (!rc && done < e.size && pack_signals(self)) {
			XXH3_freeState(xs);
			Py_DECREF(out);
			return NULL;
		}
	}
	if (!rc) {
		XXH128_canonical_t h;
		XXH128_canonicalFromHash(&h, XXH3_128bits_digest(xs));
		if (memcmp(h.digest, e.xxh3, 16))
			rc = EIO;
	}
	XXH3_freeState(xs);
	if (rc) {
		Py_DECREF(out);
		read_failed(self, (size_t)i, rc);
		pack_release(self);
		return NULL;
	}
	pack_release(self);
	return out;
}

/* _readinto(index, offset, buffer) -> bytes read (0 at the end) */
static PyObject *Pack_readinto(Pack *self, PyObject *args)
{
	Py_ssize_t i;
	unsigned long long off;
	Py_buffer b;
	if (!PyArg_ParseTuple(args, "nKw*:_readinto", &i, &off, &b))
		return NULL;
	if (pack_hold(self)) {
		PyBuffer_Release(&b);
		return NULL;
	}
	if (i < 0 || (size_t)i >= stg_reader_count(self->r)) {
		pack_release(self);
		PyBuffer_Release(&b);
		return PyErr_Format(PyExc_IndexError, "no file %zd", i);
	}
	size_t got = 0;
	int rc;
	Py_BEGIN_ALLOW_THREADS rc =
	        stg_reader_pread(self->r, (size_t)i, b.buf, (size_t)b.len, off, &got);
	Py_END_ALLOW_THREADS PyBuffer_Release(&b);
	PyObject *res = rc ? read_failed(self, (size_t)i, rc) : PyLong_FromSize_t(got);
	pack_release(self);
	return res;
}

static PyObject *Pack_stats(Pack *self, PyObject *unused)
{
	(void)unused;
	if (pack_hold(self))
		return NULL;
	stg_reader_stats s;
	stg_reader_get_stats(self->r, &s);
	stg_pack_info info;
	stg_pack_get_info(stg_reader_pack(self->r), &info);
	pack_release(self);
	return Py_BuildValue("{sKsKsKsKsKsK}", "frames", (unsigned long long)info.frames,
	                     "frames_fetched", (unsigned long long)s.frames_fetched,
	                     "frames_cached", (unsigned long long)s.frames_cached, "bytes_fetched",
	                     (unsigned long long)s.bytes_fetched, "bytes_decoded",
	                     (unsigned long long)s.bytes_decoded, "pack_bytes",
	                     (unsigned long long)info.pack_size);
}

static PyObject *Pack_enter(Pack *self, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(self);
}

static PyObject *Pack_exit(Pack *self, PyObject *args)
{
	(void)args;
	return Pack_close(self, NULL);
}

static PyObject *Pack_get_path(Pack *self, void *c)
{
	(void)c;
	return Py_NewRef(self->path ? self->path : Py_None);
}

static PyObject *Pack_get_digest(Pack *self, void *c)
{
	(void)c;
	return PyUnicode_FromString(self->digest);
}

static PyObject *Pack_get_closed(Pack *self, void *c)
{
	(void)c;
	return PyBool_FromLong(self->r == NULL || self->closed);
}

static PyMethodDef Pack_methods[] = {
        {"close", (PyCFunction)Pack_close, METH_NOARGS,
         "Close the pack: later reads fail; waits for the reads in progress only."},
        {"names", (PyCFunction)Pack_names, METH_NOARGS, "The regular files' paths, in pack order."},
        {"read", (PyCFunction)Pack_read, METH_O,
         "read(name) -> bytes: the file, checked against its XXH3-128."},
        {"_entry", (PyCFunction)Pack_entry, METH_O,
         "_entry(name) -> (index, size, mode, mtime_ns, frame)"},
        {"_frames", (PyCFunction)Pack_frames, METH_NOARGS,
         "The frame of each file's first byte, in pack order (uint32s)."},
        {"_name", (PyCFunction)Pack_name, METH_O, "_name(index) -> the file's path"},
        {"_prefetch", (PyCFunction)Pack_prefetch, METH_O,
         "_prefetch(frame): fetch and check that frame in the background"},
        {"_frame", (PyCFunction)Pack_frame, METH_O,
         "_frame(k) -> (offset, size, tar_offset, tar_size) of frame k"},
        {"_readinto", (PyCFunction)Pack_readinto, METH_VARARGS,
         "_readinto(index, offset, buffer) -> bytes read"},
        {"stats", (PyCFunction)Pack_stats, METH_NOARGS,
         "What reading cost so far: frames fetched and served from the cache, bytes."},
        {"__enter__", (PyCFunction)Pack_enter, METH_NOARGS, NULL},
        {"__exit__", (PyCFunction)Pack_exit, METH_VARARGS, NULL},
        {NULL, NULL, 0, NULL},
};

static PyGetSetDef Pack_getset[] = {
        {"path", (getter)Pack_get_path, NULL, "The pack's path, as given.", NULL},
        {"digest", (getter)Pack_get_digest, NULL, "The pack's SHA-256, in hex.", NULL},
        {"closed", (getter)Pack_get_closed, NULL, "True once closed.", NULL},
        {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Pack_seq = {.sq_length = (lenfunc)Pack_len};

static PyTypeObject PackType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stager._stager.Pack",
        .tp_basicsize = sizeof(Pack),
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
        .tp_doc = "The C half of stager.Pack.",
        .tp_new = Pack_new,
        .tp_init = (initproc)Pack_init,
        .tp_dealloc = (destructor)Pack_dealloc,
        .tp_methods = Pack_methods,
        .tp_getset = Pack_getset,
        .tp_as_sequence = &Pack_seq,
};

static PyMethodDef module_methods[] = {
        {"_set_log", set_log, METH_O, "Where libstage's messages go: fn(level, message)."},
        {"stage", (PyCFunction)(void (*)(void))py_stage, METH_VARARGS | METH_KEYWORDS, NULL},
        {"collect", (PyCFunction)(void (*)(void))py_collect, METH_VARARGS | METH_KEYWORDS, NULL},
        {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
        PyModuleDef_HEAD_INIT,
        "stager._stager",
        "libstage for Python (see the stager package).",
        -1,
        module_methods,
};

PyMODINIT_FUNC PyInit__stager(void); /* (the one name the module exports) */
PyMODINIT_FUNC PyInit__stager(void)
{
	if (PyType_Ready(&PackType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (!m)
		return NULL;
	if (add_errors(m) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	if (PyModule_AddObjectRef(m, "Pack", (PyObject *)&PackType) < 0 ||
	    PyModule_AddStringConstant(m, "version", stg_version()) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
