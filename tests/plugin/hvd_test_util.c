/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forked jobs for the Horovod ABI tests (see hvd_test_util.h).
 */
#include "tests/plugin/hvd_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* Variables of launchers the bootstrap would prefer over ours. */
static const char *const hvd_scrub[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "HOROVOD_RANK",
    "HOROVOD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "CG_RUN_RANK", "CG_RUN_SIZE", "HOROVOD_DYNAMIC_PROCESS_SETS",
    "CG_DYNAMIC_PROCESS_SETS", NULL};

static double hvd_mult(void)
{
    const char *s = getenv("CG_TEST_TIMEOUT_MULTIPLIER");
    double m = (s != NULL) ? atof(s) : 1.0;

    return (m < 1.0) ? 1.0 : m;
}

static uint64_t hvd_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int hvd_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void hvd_setenv_int(const char *name, int v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

static void hvd_rank_env(const hvd_job_t *job, int rank, int port)
{
    char addr[64];

    for (int i = 0; hvd_scrub[i] != NULL; i++)
        unsetenv(hvd_scrub[i]);
    if (job->launch == HVD_LAUNCH_TORCHRUN) {
        hvd_setenv_int("RANK", rank);
        hvd_setenv_int("WORLD_SIZE", job->size);
        hvd_setenv_int("LOCAL_RANK", rank % 2);
        hvd_setenv_int("LOCAL_WORLD_SIZE", job->size < 2 ? 1 : 2);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        hvd_setenv_int("MASTER_PORT", port - 1); /* the store adds 1 */
    } else if (job->launch == HVD_LAUNCH_CG_RUN) {
        hvd_setenv_int("CG_RUN_RANK", rank);
        hvd_setenv_int("CG_RUN_SIZE", job->size);
        hvd_setenv_int("CG_RUN_LOCAL_RANK", rank);
        hvd_setenv_int("CG_RUN_LOCAL_SIZE", job->size);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        setenv("CG_RUN_RENDEZVOUS", addr, 1);
        setenv("CG_RUN_SECRET", "hvd-test", 1);
    }
    /* A rank that waits on a failed peer gives up well inside the test. */
    hvd_setenv_int("CG_TIMEOUT", (int)(10 * hvd_mult()));
    for (int i = 0; i < HVD_ENV_MAX && job->env[i] != NULL; i++)
        putenv((char *)job->env[i]);
}

void hvd_job_init(hvd_job_t *job, int size, hvd_launch_t launch)
{
    memset(job, 0, sizeof(*job));
    job->size = size;
    job->launch = launch;
    job->rep = mmap(NULL, HVD_JOB_MAX * sizeof(hvd_rank_t),
                    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                    0);
    if (job->rep == MAP_FAILED)
        abort();
    memset(job->rep, 0, HVD_JOB_MAX * sizeof(hvd_rank_t));
}

static int hvd_reap(pid_t pid, uint64_t end_ms)
{
    int status;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0)
            return -1;
        if (hvd_now_ms() > end_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(2000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : 128 + WTERMSIG(status);
}

int hvd_job_run(hvd_job_t *job, hvd_rank_fn fn)
{
    uint64_t end = hvd_now_ms() + (uint64_t)(20000 * hvd_mult());
    pid_t pids[HVD_JOB_MAX];
    int port = hvd_free_port(), passed = 0;

    for (int r = 0; r < job->size; r++) {
        hvd_rank_t *self = &job->rep[r];

        self->rank = r;
        self->size = job->size;
        self->arg = job->arg;
        pids[r] = fork();
        if (pids[r] == 0) {
            int rc;

            hvd_rank_env(job, r, port);
            rc = fn(self);
#if defined(__SANITIZE_ADDRESS__)
            /* _exit skips LeakSanitizer's exit check: run it here (a leak
             * ends the rank with LSan's exit code). */
            if (rc == 0)
                __lsan_do_leak_check();
#endif
            fflush(stderr);
            _exit(rc);
        }
    }
    for (int r = 0; r < job->size; r++) {
        job->exit_code[r] = hvd_reap(pids[r], end);
        if (job->exit_code[r] == 0 && job->rep[r].failed_line == 0) {
            passed++;
        } else if (job->rep[r].failed_line == 0) {
            job->rep[r].failed_line = -1;
            snprintf(job->rep[r].msg, sizeof(job->rep[r].msg),
                     "exited %d without a failed check (-1: killed at the "
                     "deadline)", job->exit_code[r]);
        }
    }
    return passed;
}

void hvd_job_fini(hvd_job_t *job)
{
    munmap(job->rep, HVD_JOB_MAX * sizeof(hvd_rank_t));
}
