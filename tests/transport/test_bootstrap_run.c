/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-run, run as a real process: N ranks of bootstrap_check, output
 * prefixes, a failing or killed rank stopping the others, signals
 * forwarded, --timeout, and usage errors.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct run_result {
    int code;          /* exit status, 128+signal, or -1 if it overstayed */
    double elapsed_s;
    char out[8192], err[8192];
} run_result_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs argv with output captured; sends sig after sig_ms when sig != 0. */
static void run(char *const argv[], int sig, int sig_ms, run_result_t *r)
{
    int po[2], pe[2], st = 0;
    size_t used[2] = {0, 0};
    double t0 = now_s();
    bool signalled = false;
    pid_t pid, done;

    memset(r, 0, sizeof(*r));
    cr_assert(pipe(po) == 0 && pipe(pe) == 0);
    pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        execv(argv[0], argv);
        _exit(126);
    }
    close(po[1]);
    close(pe[1]);
    struct pollfd pfd[2] = {{.fd = po[0], .events = POLLIN},
                            {.fd = pe[0], .events = POLLIN}};
    while ((pfd[0].fd >= 0 || pfd[1].fd >= 0) && now_s() - t0 < 20.0) {
        if (sig != 0 && !signalled && (now_s() - t0) * 1000 >= sig_ms) {
            kill(pid, sig);
            signalled = true;
        }
        poll(pfd, 2, 50);
        for (int k = 0; k < 2; k++) {
            char *buf = k ? r->err : r->out;
            if (pfd[k].fd < 0 || pfd[k].revents == 0)
                continue;
            ssize_t n = read(pfd[k].fd, buf + used[k],
                             sizeof(r->out) - 1 - used[k]);
            if (n <= 0) {
                close(pfd[k].fd);
                pfd[k].fd = -1;
            } else {
                used[k] += (size_t)n;
            }
        }
    }
    while ((done = waitpid(pid, &st, WNOHANG)) == 0 && now_s() - t0 < 20.0)
        usleep(5000);
    if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        r->code = -1;
    } else {
        r->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    r->elapsed_s = now_s() - t0;
}

#define HAS(buf, s)                                                           \
    cr_assert(strstr(buf, s) != NULL, "'%s' not in:\n%s", s, buf)

Test(collguard_run, four_ranks_of_bootstrap_check, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "4", BS_CHECK_EXE, NULL};
    run_result_t r;

    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 0, "exit %d, stderr:\n%s", r.code, r.err);
    HAS(r.out, "[0] ok\n");
    HAS(r.out, "[1] ok\n");
    HAS(r.out, "[2] ok\n");
    HAS(r.out, "[3] ok\n");
    HAS(r.err, "via collguard-run");
}

Test(collguard_run, failing_rank_stops_the_others, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "3", "/bin/sh", "-c",
                    "if [ \"$CG_RUN_RANK\" = 1 ]; then echo bye; exit 3; fi; "
                    "exec sleep 30", NULL};
    run_result_t r;

    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 3, "exit %d, stderr:\n%s", r.code, r.err);
    cr_assert_lt(r.elapsed_s, 10.0, "took %.1f s", r.elapsed_s);
    HAS(r.out, "[1] bye\n");
    HAS(r.err, "rank 1 (pid");
    HAS(r.err, "exited with status 3; stopping the other 2 rank(s)");
}

Test(collguard_run, killed_rank_is_named_with_its_signal, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "2", "/bin/sh", "-c",
                    "if [ \"$CG_RUN_RANK\" = 0 ]; then kill -9 $$; fi; "
                    "exec sleep 30", NULL};
    run_result_t r;

    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 128 + 9, "exit %d, stderr:\n%s", r.code, r.err);
    cr_assert_lt(r.elapsed_s, 10.0, "took %.1f s", r.elapsed_s);
    HAS(r.err, "rank 0 (pid");
    HAS(r.err, "killed by signal 9");
}

Test(collguard_run, output_lines_carry_rank_prefixes, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "2", "/bin/sh", "-c",
                    "echo out $CG_RUN_RANK; echo err >&2; printf tail", NULL};
    run_result_t r;

    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 0, "exit %d, stderr:\n%s", r.code, r.err);
    HAS(r.out, "[0] out 0\n");
    HAS(r.out, "[1] out 1\n");
    HAS(r.out, "[1] tail\n");
    HAS(r.err, "[0] err\n");
    HAS(r.err, "[1] err\n");
}

Test(collguard_run, other_launchers_vars_are_scrubbed, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "2", "/bin/sh", "-c",
                    "echo rank ${RANK:-none} of $CG_RUN_SIZE at "
                    "${CG_RUN_RENDEZVOUS%:*}", NULL};
    run_result_t r;

    setenv("RANK", "5", 1);
    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 0, "exit %d, stderr:\n%s", r.code, r.err);
    HAS(r.out, "[1] rank none of 2 at 127.0.0.1\n");
}

Test(collguard_run, sigterm_is_forwarded, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "2", "/bin/sleep", "30", NULL};
    run_result_t r;

    run(argv, SIGTERM, 300, &r);
    cr_assert_eq(r.code, 128 + SIGTERM, "exit %d, stderr:\n%s", r.code,
                 r.err);
    cr_assert_lt(r.elapsed_s, 10.0, "took %.1f s", r.elapsed_s);
    HAS(r.err, "forwarding it to 2 rank(s)");
}

Test(collguard_run, timeout_stops_the_job, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "2", "--timeout", "1s", "--grace",
                    "200ms", "/bin/sleep", "30", NULL};
    run_result_t r;

    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 124, "exit %d, stderr:\n%s", r.code, r.err);
    cr_assert_lt(r.elapsed_s, 8.0, "took %.1f s", r.elapsed_s);
    HAS(r.err, "exceeded --timeout 1.0 s");
}

Test(collguard_run, ranks_ignoring_sigterm_are_killed, .timeout = 60)
{
    char *argv[] = {CG_RUN_EXE, "-np", "2", "--timeout", "500ms", "--grace",
                    "300ms", "/bin/sh", "-c", "trap '' TERM; exec sleep 30",
                    NULL};
    run_result_t r;

    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 124, "exit %d, stderr:\n%s", r.code, r.err);
    cr_assert_lt(r.elapsed_s, 5.0, "took %.1f s", r.elapsed_s);
    HAS(r.err, "2 rank(s) still running 0.3 s after being told to stop");
}

Test(collguard_run, bad_np_is_a_usage_error)
{
    char *abc[] = {CG_RUN_EXE, "-np", "abc", "/bin/true", NULL};
    char *zero[] = {CG_RUN_EXE, "-np", "0", "/bin/true", NULL};
    char *nocmd[] = {CG_RUN_EXE, "-np", "2", NULL};
    run_result_t r;

    run(abc, 0, 0, &r);
    cr_assert_eq(r.code, 2, "exit %d", r.code);
    HAS(r.err, "-np 'abc' is not a number of ranks in 1..1024");
    run(zero, 0, 0, &r);
    cr_assert_eq(r.code, 2, "exit %d", r.code);
    HAS(r.err, "-np '0'");
    run(nocmd, 0, 0, &r);
    cr_assert_eq(r.code, 2, "exit %d", r.code);
    HAS(r.err, "no command given");
}

Test(collguard_run, help_prints_usage)
{
    char *argv[] = {CG_RUN_EXE, "--help", NULL};
    run_result_t r;

    run(argv, 0, 0, &r);
    cr_assert_eq(r.code, 0, "exit %d", r.code);
    HAS(r.out, "usage: collguard-run -np N");
    HAS(r.out, "CG_RUN_RENDEZVOUS");
}
