/* SPDX-License-Identifier: Apache-2.0 */
/*
 * torch tensors through the Python API, without linking libtorch: dtype,
 * shape, contiguity, data pointer, autograd flags and device read by
 * attribute and method calls into a cg_hvd_tensor_t; the current CUDA
 * stream synchronised before the engine reads a device tensor; host
 * results copied into outputs through a CPU tensor over host memory.
 * Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <string.h>

/* torch dtypes the engine reduces or moves. */
typedef struct pt_dtype {
    const char *attr; /* torch.<attr> */
    cg_dtype_t dtype;
    size_t bytes;
    PyObject *obj;    /* torch.<attr>, owned */
} pt_dtype_t;

static pt_dtype_t pt__dtypes[] = {
    {"int8", CG_DTYPE_I8, 1, NULL},     {"uint8", CG_DTYPE_U8, 1, NULL},
    {"int16", CG_DTYPE_I16, 2, NULL},   {"int32", CG_DTYPE_I32, 4, NULL},
    {"int64", CG_DTYPE_I64, 8, NULL},   {"float16", CG_DTYPE_F16, 2, NULL},
    {"float32", CG_DTYPE_F32, 4, NULL}, {"float64", CG_DTYPE_F64, 8, NULL},
    {"bfloat16", CG_DTYPE_BF16, 2, NULL},
};
#define PT__NDTYPES (sizeof(pt__dtypes) / sizeof(pt__dtypes[0]))

static PyObject *pt__torch_frombuffer, *pt__current_stream;
static PyObject *pt__str_dtype, *pt__str_shape, *pt__str_is_contiguous,
    *pt__str_requires_grad, *pt__str_is_leaf, *pt__str_is_cuda,
    *pt__str_get_device, *pt__str_synchronize, *pt__str_view;
PyObject *pt_str_resize, *pt_str_data_ptr, *pt_str_copy, *pt_str_div,
    *pt_str_floor_div, *pt_str_is_floating_point;

static int pt__intern(PyObject **slot, const char *s)
{
    *slot = PyUnicode_InternFromString(s);
    return (*slot == NULL) ? -1 : 0;
}

/* Called once at module import; imports torch (Horovod's Python imports
 * it before this module too). */
int pt_tensor_init_types(void)
{
    PyObject *torch = PyImport_ImportModule("torch");

    if (torch == NULL)
        return -1;
    for (size_t i = 0; i < PT__NDTYPES; i++) {
        pt__dtypes[i].obj = PyObject_GetAttrString(torch, pt__dtypes[i].attr);
        if (pt__dtypes[i].obj == NULL)
            goto err;
    }
    pt__torch_frombuffer = PyObject_GetAttrString(torch, "frombuffer");
    Py_DECREF(torch);
    if (pt__torch_frombuffer == NULL)
        return -1;
    if (pt__intern(&pt__str_dtype, "dtype") ||
        pt__intern(&pt__str_shape, "shape") ||
        pt__intern(&pt__str_is_contiguous, "is_contiguous") ||
        pt__intern(&pt__str_requires_grad, "requires_grad") ||
        pt__intern(&pt__str_is_leaf, "is_leaf") ||
        pt__intern(&pt__str_is_cuda, "is_cuda") ||
        pt__intern(&pt__str_get_device, "get_device") ||
        pt__intern(&pt__str_synchronize, "synchronize") ||
        pt__intern(&pt__str_view, "view") ||
        pt__intern(&pt_str_resize, "resize_") ||
        pt__intern(&pt_str_data_ptr, "data_ptr") ||
        pt__intern(&pt_str_copy, "copy_") ||
        pt__intern(&pt_str_div, "div_") ||
        pt__intern(&pt_str_floor_div, "floor_divide_") ||
        pt__intern(&pt_str_is_floating_point, "is_floating_point"))
        return -1;
    return 0;
err:
    Py_DECREF(torch);
    return -1;
}

static int pt__bool_attr(PyObject *o, PyObject *attr, int *v_p)
{
    PyObject *v = PyObject_GetAttr(o, attr);

    if (v == NULL)
        return -1;
    *v_p = PyObject_IsTrue(v);
    Py_DECREF(v);
    return (*v_p < 0) ? -1 : 0;
}

static int pt__call_int(PyObject *o, PyObject *method, long long *v_p)
{
    PyObject *v = PyObject_CallMethodNoArgs(o, method);

    if (v == NULL)
        return -1;
    *v_p = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*v_p == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int pt__dtype(PyObject *tensor, pt_tensor_t *d)
{
    PyObject *dt = PyObject_GetAttr(tensor, pt__str_dtype);

    if (dt == NULL)
        return -1;
    for (size_t i = 0; i < PT__NDTYPES; i++)
        if (dt == pt__dtypes[i].obj) {
            d->t.dtype = pt__dtypes[i].dtype;
            d->elem_size = pt__dtypes[i].bytes;
            d->dtype = dt;
            Py_DECREF(dt); /* the dtype objects live as long as torch */
            return 0;
        }
    PyErr_Format(PyExc_ValueError,
                 "collguard: tensor dtype %R is not supported (int8, uint8, "
                 "int16, int32, int64, float16, bfloat16, float32, float64 "
                 "are)",
                 dt);
    Py_DECREF(dt);
    return -1;
}

static int pt__shape(PyObject *tensor, pt_tensor_t *d)
{
    PyObject *shape = PyObject_GetAttr(tensor, pt__str_shape);
    Py_ssize_t n;

    if (shape == NULL)
        return -1;
    n = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    if (n < 0 || n > CG_HVD_NDIM_MAX) {
        if (n > CG_HVD_NDIM_MAX)
            PyErr_Format(PyExc_ValueError, "collguard: tensors of %zd "
                         "dimensions are not supported (at most %d)", n,
                         CG_HVD_NDIM_MAX);
        else
            PyErr_SetString(PyExc_TypeError,
                            "collguard: tensor.shape is not a tuple");
        Py_DECREF(shape);
        return -1;
    }
    d->t.ndim = (int)n;
    d->numel = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));

        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(shape);
            return -1;
        }
        d->t.shape[i] = v;
        d->numel *= v;
    }
    Py_DECREF(shape);
    return 0;
}

/* Fills d from tensor (the input of an operation; what names the role in
 * messages). Raises ValueError for an unsupported dtype or a
 * non-contiguous tensor, as Horovod. */
int pt_tensor_describe(PyObject *tensor, const char *what, pt_tensor_t *d)
{
    int contiguous, cuda;
    long long ptr, dev;
    PyObject *c;

    memset(d, 0, sizeof(*d));
    if (pt__dtype(tensor, d) != 0 || pt__shape(tensor, d) != 0)
        return -1;
    c = PyObject_CallMethodNoArgs(tensor, pt__str_is_contiguous);
    if (c == NULL)
        return -1;
    contiguous = PyObject_IsTrue(c);
    Py_DECREF(c);
    if (contiguous < 0)
        return -1;
    if (!contiguous) {
        PyErr_Format(PyExc_ValueError, "collguard: %s tensor is required "
                     "to be contiguous", what);
        return -1;
    }
    if (pt__call_int(tensor, pt_str_data_ptr, &ptr) != 0 ||
        pt__bool_attr(tensor, pt__str_is_cuda, &cuda) != 0)
        return -1;
    d->t.input = (const void *)(uintptr_t)ptr;
    d->t.output = (void *)(uintptr_t)ptr;
    d->is_cuda = cuda != 0;
    d->t.device = -1;
    if (d->is_cuda) {
        if (pt__call_int(tensor, pt__str_get_device, &dev) != 0)
            return -1;
        d->t.field_mask |= CG_HVD_TENSOR_FIELD_DEVICE;
        d->t.device = (int)dev;
    }
    return 0;
}

/* Reads tensor's data pointer into d (as the output when output, else
 * as the input) and, for an output, its autograd flags: the engine
 * refuses to write into a non-leaf tensor that requires grad. */
int pt_tensor_set_data(PyObject *tensor, pt_tensor_t *d, bool output)
{
    long long ptr;
    int rg, leaf;

    if (pt__call_int(tensor, pt_str_data_ptr, &ptr) != 0)
        return -1;
    if (!output) {
        d->t.input = (const void *)(uintptr_t)ptr;
        return 0;
    }
    d->t.output = (void *)(uintptr_t)ptr;
    if (pt__bool_attr(tensor, pt__str_requires_grad, &rg) != 0 ||
        pt__bool_attr(tensor, pt__str_is_leaf, &leaf) != 0)
        return -1;
    d->t.flags = (rg ? CG_HVD_REQUIRES_GRAD : 0u) |
                 (leaf ? CG_HVD_IS_LEAF : 0u);
    return 0;
}

/* The engine reads a device tensor as soon as it is enqueued: wait for
 * the work queued on the tensor's current stream (which produced it). */
int pt_tensor_sync_cuda(PyObject *tensor)
{
    PyObject *dev, *stream, *r;

    if (pt__current_stream == NULL) {
        PyObject *cuda = PyImport_ImportModule("torch.cuda");

        if (cuda == NULL)
            return -1;
        pt__current_stream = PyObject_GetAttrString(cuda, "current_stream");
        Py_DECREF(cuda);
        if (pt__current_stream == NULL)
            return -1;
    }
    dev = PyObject_GetAttrString(tensor, "device");
    if (dev == NULL)
        return -1;
    stream = PyObject_CallOneArg(pt__current_stream, dev);
    Py_DECREF(dev);
    if (stream == NULL)
        return -1;
    r = PyObject_CallMethodNoArgs(stream, pt__str_synchronize);
    Py_DECREF(stream);
    Py_XDECREF(r);
    return (r == NULL) ? -1 : 0;
}

/* output.view(-1).copy_(a CPU tensor over numel elements at data): the
 * copy of a host result into a device (or any) output. */
int pt_tensor_copy_from_host(PyObject *output, void *data, int64_t numel,
                             size_t elem_size, PyObject *dtype)
{
    PyObject *mv, *args, *kw, *host, *flat, *r;
    PyObject *minus_one;

    mv = PyMemoryView_FromMemory(data, (Py_ssize_t)((size_t)numel * elem_size),
                                 PyBUF_WRITE);
    if (mv == NULL)
        return -1;
    args = PyTuple_Pack(1, mv);
    Py_DECREF(mv);
    if (args == NULL)
        return -1;
    kw = Py_BuildValue("{s:O}", "dtype", dtype);
    host = (kw == NULL) ? NULL : PyObject_Call(pt__torch_frombuffer, args, kw);
    Py_DECREF(args);
    Py_XDECREF(kw);
    if (host == NULL)
        return -1;
    minus_one = PyLong_FromLong(-1);
    flat = (minus_one == NULL)
               ? NULL
               : PyObject_CallMethodOneArg(output, pt__str_view, minus_one);
    Py_XDECREF(minus_one);
    r = (flat == NULL) ? NULL
                       : PyObject_CallMethodOneArg(flat, pt_str_copy, host);
    Py_XDECREF(flat);
    Py_DECREF(host);
    Py_XDECREF(r);
    return (r == NULL) ? -1 : 0;
}
