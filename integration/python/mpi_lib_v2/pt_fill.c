/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A gathered result into its output tensor, for mpi_lib_v2's allgather
 * (pt_finish.c) and alltoall (pt_alltoall.c) once done: output resized to
 * the gathered shape (the first dimension the engine reports, the rest
 * the input's) and filled from the engine's host data, for CPU and CUDA
 * outputs; and the one-argument method call both finishing files use.
 * Calls pt_tensor.c alone. Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <string.h>

int pt_call1(PyObject *o, PyObject *method, PyObject *arg)
{
    PyObject *r = PyObject_CallMethodOneArg(o, method, arg);

    Py_XDECREF(r);
    return (r == NULL) ? -1 : 0;
}

int pt_fill_output(pt_op_t *op, PyObject *output, const void *data,
                   int64_t first)
{
    PyObject *shape, *ptr;
    int64_t numel;
    size_t elem;
    int rc;

    shape = PyTuple_New(op->ndim);
    if (shape == NULL)
        return -1;
    numel = first;
    PyTuple_SET_ITEM(shape, 0, PyLong_FromLongLong(first));
    for (int i = 1; i < op->ndim; i++) {
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(op->shape[i]));
        numel *= op->shape[i];
    }
    rc = pt_call1(output, pt_str_resize, shape);
    Py_DECREF(shape);
    if (rc != 0 || numel == 0)
        return rc;
    {
        PyObject *es = PyObject_CallMethod(output, "element_size", NULL);

        if (es == NULL)
            return -1;
        elem = PyLong_AsSize_t(es);
        Py_DECREF(es);
        if (elem == (size_t)-1 && PyErr_Occurred())
            return -1;
    }
    if (op->is_cuda)
        return pt_tensor_copy_from_host(output, (void *)(uintptr_t)data,
                                        numel, elem, op->dtype);
    ptr = PyObject_CallMethodNoArgs(output, pt_str_data_ptr);
    if (ptr == NULL)
        return -1;
    memcpy(PyLong_AsVoidPtr(ptr), data, (size_t)numel * elem);
    Py_DECREF(ptr);
    return 0;
}
