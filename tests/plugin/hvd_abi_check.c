/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hvd_abi_check: one rank of a real job (collguard-run, or mpirun) driving
 * Horovod's C ABI in libcollguard_hvd.so: -1 before init, the layout
 * against the launcher's variables, MPI flags, dynamic process sets (add,
 * query, remove, id reuse, -6), then shutdown and a second init. Prints
 * "ok" and exits 0; the first failed check and exit 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>

#include "plugin/hvd_abi.h"

#define CHECK_EQ(got, want)                                                  \
    do {                                                                     \
        int g_ = (got), w_ = (want);                                         \
        if (g_ != w_) {                                                      \
            fprintf(stderr, "hvd_abi_check line %d: %s = %d, expected %d\n", \
                    __LINE__, #got, g_, w_);                                 \
            return 1;                                                        \
        }                                                                    \
    } while (0)

/* The launcher's value of one of two variables, or -1. */
static int env_int(const char *a, const char *b)
{
    const char *s = getenv(a);

    if (s == NULL)
        s = getenv(b);
    return (s != NULL) ? atoi(s) : -1;
}

static int check_layout(void)
{
    int under_mpi = getenv("OMPI_COMM_WORLD_RANK") != NULL;

    CHECK_EQ(horovod_rank(), env_int("CG_RUN_RANK", "OMPI_COMM_WORLD_RANK"));
    CHECK_EQ(horovod_size(), env_int("CG_RUN_SIZE", "OMPI_COMM_WORLD_SIZE"));
    CHECK_EQ(horovod_local_rank(), env_int("CG_RUN_LOCAL_RANK",
                                           "OMPI_COMM_WORLD_LOCAL_RANK"));
    CHECK_EQ(horovod_local_size(), env_int("CG_RUN_LOCAL_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE"));
    CHECK_EQ(horovod_cross_rank(), 0);
    CHECK_EQ(horovod_cross_size(), 1);
    CHECK_EQ(horovod_is_homogeneous(), 1);
    /* Under mpirun with MPI built in, the bootstrap runs over MPI. */
    CHECK_EQ(horovod_mpi_enabled(), under_mpi && horovod_mpi_built());
    if (horovod_mpi_enabled())
        CHECK_EQ(horovod_mpi_threads_supported() >= 0, 1);
    else
        CHECK_EQ(horovod_mpi_threads_supported(), -1);
    return 0;
}

static int check_process_sets(void)
{
    int size = horovod_size(), rank = horovod_rank();
    int ends[2] = {size - 1, 0}, firsts[2] = {1, 0}, ids[4], got[4];

    /* With 3 or more ranks the two sets differ from each other and from
     * the world. */
    CHECK_EQ(size >= 3, 1);
    CHECK_EQ(horovod_add_process_set(ends, 2), 1);
    CHECK_EQ(horovod_add_process_set(firsts, 2), 2);
    CHECK_EQ(horovod_add_process_set(ends, 2), -6);
    CHECK_EQ(horovod_number_of_process_sets(), 3);
    CHECK_EQ(horovod_process_set_ranks(1, got), 0);
    CHECK_EQ(got[0], 0);
    CHECK_EQ(got[1], size - 1);
    CHECK_EQ(horovod_process_set_included(1), rank == 0 || rank == size - 1);
    CHECK_EQ(horovod_process_set_rank(2), rank < 2 ? rank : -4);
    CHECK_EQ(horovod_remove_process_set(1), 1);
    CHECK_EQ(horovod_process_set_size(1), -3);
    CHECK_EQ(horovod_add_process_set(ends, 1), 1); /* {size-1}, id reused */
    horovod_process_set_ids(ids);
    CHECK_EQ(ids[1], 2);
    CHECK_EQ(ids[2], 1);
    return 0;
}

int main(void)
{
    CHECK_EQ(horovod_rank(), -1);
    CHECK_EQ(horovod_reduce_op_sum(), 1);
    /* What hvd.init(process_sets="dynamic") does before calling in. */
    setenv("HOROVOD_DYNAMIC_PROCESS_SETS", "1", 1);
    for (int round = 0; round < 2; round++) {
        CHECK_EQ(horovod_init(NULL, 0, NULL, NULL, 0), 1);
        if (check_layout() != 0 || check_process_sets() != 0)
            return 1;
        horovod_shutdown();
        CHECK_EQ(horovod_is_initialized(), 0);
        CHECK_EQ(horovod_number_of_process_sets(), 1);
    }
    printf("ok\n");
    return 0;
}
