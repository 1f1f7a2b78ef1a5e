/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The numbering of mpi_lib_v2's unnamed ops: Horovod names the n-th
 * unnamed op of a kind "<kind>.noname.<n>", n counted per process set
 * and kind (not by handle), and a completed join restarts a set's count
 * on every rank alike. Calls nothing of the module's other files (the
 * bottom of its DAG beside pt_tensor.c). Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

/* Unnamed ops so far: (prefix, process set) -> count. */
static PyObject *pt__noname;

int pt_names_init(void)
{
    pt__noname = PyDict_New();
    return pt__noname == NULL ? -1 : 0;
}

/* The next number of an unnamed op of kind prefix on process set psid,
 * or -1 with an exception set. Counted per set and kind, not by handle:
 * ranks that issued other operations in between, or ops on sets other
 * ranks are not in, still give the n-th unnamed allreduce of a set the
 * same name; a completed join restarts the count (pt_names_restart). */
long long pt_names_next(const char *prefix, int psid)
{
    PyObject *key = Py_BuildValue("(si)", prefix, psid), *cur, *next;
    long long n = 0;

    if (key == NULL)
        return -1;
    cur = PyDict_GetItemWithError(pt__noname, key);
    if (cur != NULL)
        n = PyLong_AsLongLong(cur);
    else if (PyErr_Occurred())
        n = -1;
    next = n >= 0 ? PyLong_FromLongLong(n + 1) : NULL;
    if (next == NULL || PyDict_SetItem(pt__noname, key, next) != 0)
        n = -1;
    Py_XDECREF(next);
    Py_DECREF(key);
    return n;
}

void pt_names_restart(int psid)
{
    PyObject *key, *value, *drop = PyList_New(0);
    Py_ssize_t pos = 0;

    if (drop == NULL) {
        PyErr_Clear();
        return;
    }
    while (PyDict_Next(pt__noname, &pos, &key, &value))
        if (PyLong_AsLong(PyTuple_GET_ITEM(key, 1)) == psid)
            (void)PyList_Append(drop, key);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(drop); i++)
        (void)PyDict_DelItem(pt__noname, PyList_GET_ITEM(drop, i));
    Py_DECREF(drop);
    PyErr_Clear();
}
