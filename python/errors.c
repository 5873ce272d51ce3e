/*
 * errors.c - what stager's Python module raises and logs: stager.Error and
 * its subclasses (one per exit status of the tool, with the system's errno
 * where one caused the failure), libstage's log to Python's logging, and
 * the arguments it refuses: file names (str or bytes) and indices (any
 * integer with __index__, not a bool).
 */
#include "ext.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------- */

/* stager.Error and its subclasses, by exit status (0 unused). */
static PyObject *err_class[8];

static const struct {
	const char *name, *doc;
	int status, errnum;
} err_spec[] = {
        {"stager.Error", "A stager operation failed; status is the tool's exit status.", 7, EIO},
        {"stager.UsageError", "A wrong argument or setting (exit status 1).", 1, EINVAL},
        {"stager.SourceError", "The source is missing or unreadable (exit status 2).", 2, ENOENT},
        {"stager.SpaceError", "Not enough space (exit status 3); the message has the figures.", 3,
         ENOSPC},
        {"stager.IntegrityError",
         "A checksum failed, or a pack is damaged or hostile (exit status 4).", 4, EIO},
        {"stager.Interrupted", "The operation was interrupted (exit status 5).", 5, EINTR},
        {"stager.RemoteError", "A remote or transport failure (exit status 6).", 6, EREMOTEIO},
};

/* Raise the class of exit status status with message msg about filename
 * (may be NULL). */
PyObject *raise_status(int status, int errnum, const char *msg, const char *filename)
{
	PyObject *cls = err_class[status >= 1 && status <= 7 && err_class[status] ? status : 7];
	PyObject *fn = filename ? PyUnicode_DecodeFSDefault(filename) : NULL;
	PyObject *e = fn ? PyObject_CallFunction(cls, "isO", errnum, msg, fn)
	                 : PyObject_CallFunction(cls, "is", errnum, msg);
	Py_XDECREF(fn);
	if (e) {
		PyErr_SetObject(cls, e);
		Py_DECREF(e);
	}
	return NULL;
}

PyObject *raise_err(stg_err err, const stg_ctx *ctx, const char *filename)
{
	int status = stg_exit_status(err);
	int errnum = err == STG_EEXIST ? EEXIST : err == STG_ENOMEM ? ENOMEM : EIO;
	for (size_t i = 0; i < sizeof err_spec / sizeof err_spec[0]; i++)
		if (err_spec[i].status == status && status != 7 && err != STG_EEXIST)
			errnum = err_spec[i].errnum;
	if (err == STG_ENOMEM)
		return PyErr_NoMemory();
	/* the system's own errno where one caused it (EACCES, not ENOENT,
	 * for a pack the user may not read) */
	if (ctx && stg_errno(ctx))
		errnum = stg_errno(ctx);
	const char *msg = ctx ? stg_errmsg(ctx) : NULL;
	return raise_status(status, errnum, msg && *msg ? msg : stg_strerror(err), filename);
}

/* ---- the log ------------------------------------------------------------- */

static PyObject *log_fn; /* stager's: fn(level, message) */

void on_log(void *arg, stg_log_level level, const char *msg)
{
	(void)arg;
	PyGILState_STATE g = PyGILState_Ensure();
	if (log_fn) {
		PyObject *r = PyObject_CallFunction(log_fn, "is", (int)level, msg);
		if (r)
			Py_DECREF(r);
		else
			PyErr_Clear();
	}
	PyGILState_Release(g);
}

PyObject *set_log(PyObject *self, PyObject *fn)
{
	(void)self;
	if (fn != Py_None && !PyCallable_Check(fn))
		return PyErr_Format(PyExc_TypeError, "a callable or None");
	Py_XDECREF(log_fn);
	log_fn = fn == Py_None ? NULL : Py_NewRef(fn);
	Py_RETURN_NONE;
}

int add_errors(PyObject *m)
{
	for (size_t i = 0; i < sizeof err_spec / sizeof err_spec[0]; i++) {
		PyObject *base = i == 0 ? PyExc_OSError : err_class[7];
		PyObject *dict = Py_BuildValue("{si}", "status", err_spec[i].status);
		PyObject *cls = dict ? PyErr_NewExceptionWithDoc(err_spec[i].name, err_spec[i].doc,
		                                                 base, dict)
		                     : NULL;
		Py_XDECREF(dict);
		if (!cls || PyModule_AddObjectRef(m, strchr(err_spec[i].name, '.') + 1, cls) < 0) {
			Py_XDECREF(cls);
			return -1;
		}
		err_class[err_spec[i].status] = cls;
	}
	return 0;
}

/* ---- arguments: file names and indices --------------------------------- */

/* A name argument (str or bytes) as bytes: a new reference, or NULL with
 * TypeError. */
PyObject *name_bytes(PyObject *name)
{
	if (PyUnicode_Check(name))
		return PyUnicode_EncodeFSDefault(name);
	if (PyBytes_Check(name))
		return Py_NewRef(name);
	return PyErr_Format(PyExc_TypeError, "a file name is str or bytes, not %s",
	                    Py_TYPE(name)->tp_name);
}

/* An integer index (int, numpy's integers, a one-element integer tensor:
 * whatever has __index__) as *i: 1; 0 if obj is not one (str, bytes
 * ...); -1 with TypeError for a bool, numpy.bool_ or a boolean tensor
 * (True is no file number) or with the exception __index__ raised. */
int index_of(PyObject *obj, Py_ssize_t *i)
{
	if (PyUnicode_Check(obj) || PyBytes_Check(obj) || !PyIndex_Check(obj))
		return 0;
	bool boolean = PyBool_Check(obj);
	if (!boolean && !PyLong_Check(obj)) {
		/* numpy.bool_ and torch.bool have __index__ too: their dtype
		 * says what they are */
		PyObject *dtype = PyObject_GetAttrString(obj, "dtype");
		PyObject *s = dtype ? PyObject_Str(dtype) : NULL;
		const char *name = s ? PyUnicode_AsUTF8(s) : NULL;
		boolean = name && (!strcmp(name, "bool") || !strcmp(name, "torch.bool"));
		Py_XDECREF(s);
		Py_XDECREF(dtype);
		PyErr_Clear();
	}
	if (boolean) {
		PyErr_Format(PyExc_TypeError, "a file index is an integer, not %s",
		             Py_TYPE(obj)->tp_name);
		return -1;
	}
	PyObject *n = PyNumber_Index(obj);
	if (!n)
		return -1;
	*i = PyLong_AsSsize_t(n);
	Py_DECREF(n);
	if (*i == -1 && PyErr_Occurred()) {
		if (!PyErr_ExceptionMatches(PyExc_OverflowError))
			return -1;
		PyErr_Clear();
		*i = PY_SSIZE_T_MAX; /* no such file */
	}
	return 1;
}

/* An index argument (the _name, _frame, _prefetch of file or frame
 * numbers): 0, or -1 with TypeError. */
int index_arg(PyObject *obj, Py_ssize_t *i)
{
	int rc = index_of(obj, i);
	if (rc == 0)
		PyErr_Format(PyExc_TypeError, "an index is an integer, not %s",
		             Py_TYPE(obj)->tp_name);
	return rc == 1 ? 0 : -1;
}
