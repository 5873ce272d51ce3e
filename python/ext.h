/*
 * ext.h - what the parts of stager's Python module share: the module and
 * Pack (_stager.c), stage() and collect() (ops.c), errors and the log
 * (errors.c).
 */
#ifndef STAGER_PY_EXT_H
#define STAGER_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "libstage.h"

/* Raise the stager.Error subclass of exit status status (1..7) with
 * errno errnum, message msg and filename (may be NULL); NULL. */
PyObject *raise_status(int status, int errnum, const char *msg, const char *filename);
/* The same for a libstage result code, with ctx's message and errno
 * (stg_errno; the class's usual one when 0).  ctx may be NULL. */
PyObject *raise_err(stg_err err, const stg_ctx *ctx, const char *filename);
/* libstage's log, to the Python function set by _set_log (any thread). */
void on_log(void *arg, stg_log_level level, const char *msg);
/* _set_log(fn): where libstage's messages go, fn(level, message). */
PyObject *set_log(PyObject *self, PyObject *fn);
/* stager.Error and its subclasses, added to the module m: 0, or -1 with
 * the exception set. */
int add_errors(PyObject *m);

/* A file name argument (str or bytes) as bytes: a new reference, or NULL
 * with TypeError. */
PyObject *name_bytes(PyObject *name);
/* An integer index (int, numpy's integers, a one-element integer tensor:
 * whatever has __index__) as *i, PY_SSIZE_T_MAX if it is out of range: 1;
 * 0 if obj is not one (str, bytes ...); -1 with TypeError for a bool,
 * numpy.bool_ or a boolean tensor, or with what __index__ raised. */
int index_of(PyObject *obj, Py_ssize_t *i);
/* An argument that must be an index: 0, or -1 with TypeError. */
int index_arg(PyObject *obj, Py_ssize_t *i);

PyObject *py_stage(PyObject *self, PyObject *args, PyObject *kw);
PyObject *py_collect(PyObject *self, PyObject *args, PyObject *kw);

#endif
