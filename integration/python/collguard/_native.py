# SPDX-License-Identifier: Apache-2.0
"""Finds and loads collguard's native module mpi_lib_v2 twice, as Horovod
does: as a CPython extension module (the binding functions) and through
ctypes with RTLD_GLOBAL (Horovod's C ABI, horovod_init, horovod_rank, ...;
the module links libcollguard_hvd.so, so both share one state).

Lookup: ``COLLGUARD_LIB`` (the module file, or a folder holding it), else
``mpi_lib_v2<EXT_SUFFIX>`` beside this package."""
import ctypes
import importlib.machinery
import importlib.util
import os
import sysconfig

_MODULE = "mpi_lib_v2"


def _suffix():
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def module_path():
    """The path of the module file that will be loaded."""
    env = os.environ.get("COLLGUARD_LIB")
    name = _MODULE + _suffix()
    if env:
        path = os.path.join(env, name) if os.path.isdir(env) else env
        if not os.path.isfile(path):
            raise ImportError("collguard: COLLGUARD_LIB=%s: no file %s"
                              % (env, path))
        return path
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    if not os.path.isfile(path):
        raise ImportError("collguard: %s not found beside the package (%s); "
                          "set COLLGUARD_LIB to the built module "
                          "(build/integration/python/mpi_lib_v2/%s)"
                          % (name, os.path.dirname(path), name))
    return path


def _load():
    path = module_path()
    loader = importlib.machinery.ExtensionFileLoader(
        "collguard." + _MODULE, path)
    spec = importlib.util.spec_from_file_location(
        "collguard." + _MODULE, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return path, mod, ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


PATH, mpi_lib, CLIB = _load()
