# SPDX-License-Identifier: Apache-2.0
# One rank of `collguard-run -np 2 /usr/bin/python3 hvd_ctypes.py LIB MPI`
# (MPI: 1 when built with MPI): loads
# libcollguard_hvd.so and calls it exactly the way Horovod's HorovodBasics
# (horovod/common/basics.py) does -- ctypes.CDLL(path, RTLD_GLOBAL), no
# restype (every return read as a C int), ctypes arrays for rank lists,
# c_char_p/c_bool for the timeline -- and checks what Horovod's Python would
# see, plus the collective core that horovod_init starts (cg_hvd_global_core,
# for the collguard Python module) and a dynamic timeline. Exits non-zero on
# the first failed check.
import ctypes
import json
import os
import sys


def check(what, got, want):
    if got != want:
        sys.stderr.write("hvd_ctypes.py rank %s: %s = %r, expected %r\n"
                         % (os.environ.get("CG_RUN_RANK"), what, got, want))
        sys.exit(1)


def init(lib, comm, process_sets):
    """HorovodBasics.init with comm a list of ranks and process_sets given
    by rank lists."""
    sizes = [len(ps) for ps in process_sets]
    flat = [r for ps in process_sets for r in ps]
    ps_args = [(ctypes.c_int * len(flat))(*flat),
               (ctypes.c_int * len(sizes))(*sizes),
               ctypes.c_int(len(sizes))]
    return lib.horovod_init((ctypes.c_int * len(comm))(*comm),
                            ctypes.c_int(len(comm)), *ps_args)


def ids_and_ranks(lib):
    """HorovodBasics._get_process_set_ids_and_ranks."""
    num = int(lib.horovod_number_of_process_sets())
    ids_array = (ctypes.c_int * num)()
    lib.horovod_process_set_ids(ids_array)
    ret = {}
    for ps_id in ids_array:
        ps_size = int(lib.horovod_process_set_size(ctypes.c_int(ps_id)))
        ranks_array = (ctypes.c_int * ps_size)()
        res = int(lib.horovod_process_set_ranks(ctypes.c_int(ps_id),
                                                ranks_array))
        check("process_set_ranks(%d)" % ps_id, res, 0)
        ret[ps_id] = list(ranks_array)
    return ret


def add(lib, ranks):
    """HorovodBasics._add_process_set_impl, before its error mapping."""
    return int(lib.horovod_add_process_set((ctypes.c_int * len(ranks))(*ranks),
                                           ctypes.c_int(len(ranks))))


def has_core(lib):
    """The collective core horovod_init started (a pointer, or None)."""
    lib.cg_hvd_global_core.restype = ctypes.c_void_p
    return lib.cg_hvd_global_core() is not None


def start_timeline(lib, path, mark_cycles):
    """HorovodBasics.start_timeline's call."""
    return lib.horovod_start_timeline(ctypes.c_char_p(path.encode("utf-8")),
                                      ctypes.c_bool(mark_cycles))


def dynamic_timeline(lib, rank):
    """HOROVOD_TIMELINE=DYNAMIC: nothing is written until start_timeline;
    rank 0 writes a file that parses once stopped."""
    path = "/tmp/cg_hvd_ctypes_tl_%d.json" % os.getppid()
    if rank == 0 and os.path.exists(path):
        os.unlink(path)
    os.environ["HOROVOD_TIMELINE"] = "DYNAMIC"
    os.environ["HOROVOD_TIMELINE_MARK_CYCLES"] = "1"
    check("init with DYNAMIC", bool(init(lib, [], [])), True)
    check("global core with DYNAMIC", has_core(lib), True)
    check("no file before start", rank == 0 and os.path.exists(path), False)
    check("stop before start", lib.horovod_stop_timeline(), 1)
    check("start_timeline", start_timeline(lib, path, True), 1)
    check("start_timeline again", start_timeline(lib, path, False), 1)
    check("stop_timeline", lib.horovod_stop_timeline(), 1)
    if rank == 0:
        with open(path) as f:
            events = json.load(f)
        check("timeline is an array with process 0's metadata",
              [e["name"] for e in events[:2]],
              ["process_name", "process_sort_index"])
        os.unlink(path)
    lib.horovod_shutdown()
    del os.environ["HOROVOD_TIMELINE"]
    del os.environ["HOROVOD_TIMELINE_MARK_CYCLES"]


def main():
    lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    rank = int(os.environ["CG_RUN_RANK"])
    size = int(os.environ["CG_RUN_SIZE"])

    # HorovodBasics.__init__ reads the reduce ops before any init.
    ops = [lib.horovod_reduce_op_average(), lib.horovod_reduce_op_sum(),
           lib.horovod_reduce_op_adasum(), lib.horovod_reduce_op_min(),
           lib.horovod_reduce_op_max(), lib.horovod_reduce_op_product()]
    check("reduce ops", ops, [0, 1, 2, 3, 4, 5])
    check("size before init", lib.horovod_size(), -1)
    check("is_initialized before init", bool(lib.horovod_is_initialized()),
          False)
    check("mpi_built", bool(lib.horovod_mpi_built()), sys.argv[2] == "1")
    check("gloo_built", bool(lib.horovod_gloo_built()), False)
    check("nccl_built is an int", isinstance(lib.horovod_nccl_built(), int),
          True)
    check("global core before init", has_core(lib), False)

    # hvd.init(process_sets="dynamic")
    os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    check("init", bool(init(lib, [], [])), True)
    check("rank", lib.horovod_rank(), rank)
    check("size", lib.horovod_size(), size)
    check("local_rank", lib.horovod_local_rank(), rank)
    check("local_size", lib.horovod_local_size(), size)
    check("cross_size", lib.horovod_cross_size(), 1)
    check("is_homogeneous", bool(lib.horovod_is_homogeneous()), True)
    check("global core", has_core(lib), True)
    check("start_timeline", lib.horovod_start_timeline(
        ctypes.c_char_p("/tmp/tl.json".encode("utf-8")), ctypes.c_bool(True)),
        -2)
    check("stop_timeline", lib.horovod_stop_timeline(), 1)
    check("add [1]", add(lib, [1]), 1)
    check("add [1] again", add(lib, [1]), -6)
    check("ids and ranks", ids_and_ranks(lib), {0: [0, 1], 1: [1]})
    check("process_set_rank(1)",
          lib.horovod_process_set_rank(ctypes.c_int(1)), 0 if rank else -4)
    check("remove 1", lib.horovod_remove_process_set(ctypes.c_int(1)), 1)
    check("remove 1 again", lib.horovod_remove_process_set(ctypes.c_int(1)),
          -3)
    lib.horovod_shutdown()
    check("rank after shutdown", lib.horovod_rank(), -1)
    check("global core after shutdown", has_core(lib), False)

    # hvd.init(comm=[1, 0], process_sets=[ProcessSet([0])]) after shutdown.
    del os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"]
    check("init again", bool(init(lib, [1, 0], [[0]])), True)
    check("rank in [1, 0]", lib.horovod_rank(), 1 - rank)
    check("sets given at init", ids_and_ranks(lib), {0: [0, 1], 1: [0]})
    check("add without dynamic", add(lib, [0]), -2)
    check("no core for a reordered world", has_core(lib), False)
    lib.horovod_shutdown()

    dynamic_timeline(lib, rank)
    print("ok")


if __name__ == "__main__":
    main()
