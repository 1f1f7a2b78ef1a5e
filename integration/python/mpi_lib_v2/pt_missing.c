/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Horovod's binding functions for operations collguard's engine does not
 * have yet (grouped allreduce/allgather/reducescatter, alltoall):
 * each raises NotImplementedError naming what is missing,
 * so a script fails at the call instead of getting another operation's
 * result. Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

static PyObject *pt__missing(const char *what, const char *why)
{
    PyErr_Format(PyExc_NotImplementedError,
                 "collguard: %s is not implemented: %s", what, why);
    return NULL;
}

#define PT__MISSING(fn, what, why)                                           \
    PyObject *fn(PyObject *self, PyObject *args)                             \
    {                                                                        \
        (void)self;                                                          \
        (void)args;                                                          \
        return pt__missing(what, why);                                       \
    }

PT__MISSING(pt_grouped_allreduce, "grouped_allreduce",
            "the engine has no grouped operations (members fused and "
            "completed together); use allreduce per tensor")
PT__MISSING(pt_grouped_allgather, "grouped_allgather",
            "the engine has no grouped operations (members fused and "
            "completed together); use allgather per tensor")
PT__MISSING(pt_alltoall, "alltoall", "the engine has no alltoall")
PT__MISSING(pt_grouped_reducescatter, "grouped_reducescatter",
            "the engine has no grouped operations (members fused and "
            "completed together); use reducescatter per tensor")
