/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-run: the built-in launcher for one host. Starts N ranks with the
 * CG_RUN_* variables the bootstrap reads (rank, size, local/cross layout, a
 * rendezvous on 127.0.0.1 at a free port, a job secret), forwards their
 * output line by line prefixed "[rank] ", and stops the job when a rank
 * fails, the job times out, or the launcher is interrupted (SIGTERM, then
 * SIGKILL after a grace period). A separate program: calls libc and
 * core/base's parsers only; all of its state lives in main's frame.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/base/parse.h"

#define CG_RUN_NP_MAX 1024
#define CG_RUN_LINE_MAX 65536

/* Variables of other launchers that would make a rank's bootstrap pick
 * them instead of ours; removed from each rank's environment. */
static const char *const cg_run_scrub[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", NULL};

typedef struct cg_run_stream {
    int fd;                 /* read end, -1 once at EOF */
    int out;                /* 1 or 2 */
    size_t used;
    char buf[CG_RUN_LINE_MAX];
} cg_run_stream_t;

typedef struct cg_run_rank {
    pid_t pid;              /* 0 once reaped */
    int status;             /* from waitpid */
    cg_run_stream_t io[2];  /* stdout, stderr */
} cg_run_rank_t;

typedef struct cg_run_job {
    int np;
    uint64_t timeout_ns;    /* 0: none */
    uint64_t grace_ns;
    char **argv;
    cg_run_rank_t *ranks;
    int alive;
    int exit_code;          /* first failure's code; 0 while none */
    uint64_t kill_at_ns;    /* SIGKILL stragglers then; 0: not stopping */
} cg_run_job_t;

static void cg_run_usage(FILE *f)
{
    fprintf(f,
            "usage: collguard-run -np N [--timeout DURATION] [--grace "
            "DURATION] [--] command [args...]\n"
            "Starts N ranks of command on this host for collguard's "
            "bootstrap.\n"
            "  -np N, -n N           number of ranks, 1..%d\n"
            "  --timeout DURATION    stop the job after this long (\"90s\", "
            "\"5m\"; bare number: seconds); default none\n"
            "  --grace DURATION      wait this long after SIGTERM before "
            "SIGKILL; default 3s\n"
            "  -h, --help            this text\n"
            "Each rank gets CG_RUN_RANK, CG_RUN_SIZE, CG_RUN_LOCAL_RANK, "
            "CG_RUN_LOCAL_SIZE,\nCG_RUN_CROSS_RANK=0, CG_RUN_CROSS_SIZE=1, "
            "CG_RUN_RENDEZVOUS=127.0.0.1:PORT\nand CG_RUN_SECRET; stdin is "
            "/dev/null; output lines are prefixed \"[rank] \".\n"
            "Exit status: 0 when every rank exits 0; else the first failed "
            "rank's status\n(128+signal if killed), 124 on --timeout, "
            "128+signal when interrupted.\n", CG_RUN_NP_MAX);
}

static void cg_run_msg(const char *fmt, ...)
{
    va_list ap;
    fputs("collguard-run: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Exit code 2 for usage errors, after a message naming the problem. */
static int cg_run_parse(int argc, char **argv, cg_run_job_t *job)
{
    int i;

    job->np = 0;
    job->grace_ns = 3000000000ull;
    /* Options come in pairs (name value) except -h and --. */
    for (i = 1; i < argc && argv[i][0] == '-'; i += 2) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        int64_t n;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cg_run_usage(stdout);
            exit(0);
        }
        if (strcmp(a, "-np") == 0 || strcmp(a, "-n") == 0 ||
            strcmp(a, "--np") == 0) {
            if (v == NULL || !cg_parse_int(v, 1, CG_RUN_NP_MAX, &n)) {
                cg_run_msg("%s '%s' is not a number of ranks in 1..%d", a,
                           v ? v : "", CG_RUN_NP_MAX);
                return 2;
            }
            job->np = (int)n;
        } else if (strcmp(a, "--timeout") == 0 || strcmp(a, "--grace") == 0) {
            uint64_t ns;
            if (v == NULL || !cg_parse_duration(v, 1000000000ull, &ns)) {
                cg_run_msg("%s '%s' is not a duration (e.g. 30s, 500ms, 2m)",
                           a, v ? v : "");
                return 2;
            }
            if (strcmp(a, "--timeout") == 0)
                job->timeout_ns = ns;
            else
                job->grace_ns = ns;
        } else {
            cg_run_msg("unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    if (job->np == 0) {
        cg_run_msg("-np N is required (see --help)");
        return 2;
    }
    if (i >= argc) {
        cg_run_msg("no command given (see --help)");
        return 2;
    }
    job->argv = argv + i;
    return 0;
}

/* The rendezvous socket: bound to a free port on 127.0.0.1 and listening
 * before any rank starts; rank 0 inherits it (CG_RUN_RENDEZVOUS_FD), so
 * the port cannot be taken by another process in between. *port_p set. */
static int cg_run_listen(int *port_p)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *port_p = ntohs(a.sin_port);
    return fd;
}

static void cg_run_setenv_int(const char *name, int v)
{
    char s[16];
    snprintf(s, sizeof(s), "%d", v);
    setenv(name, s, 1);
}

/* In the child: environment, pipes, own process group, then exec. */
static void cg_run_child(const cg_run_job_t *job, int r, int out_fd,
                         int err_fd, int lfd, const char *rdv,
                         const char *secret, const sigset_t *old_mask)
{
    int devnull = open("/dev/null", O_RDONLY);

    setpgid(0, 0);
    if (devnull >= 0)
        dup2(devnull, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    for (int i = 0; cg_run_scrub[i] != NULL; i++)
        unsetenv(cg_run_scrub[i]);
    cg_run_setenv_int("CG_RUN_RANK", r);
    cg_run_setenv_int("CG_RUN_SIZE", job->np);
    cg_run_setenv_int("CG_RUN_LOCAL_RANK", r);
    cg_run_setenv_int("CG_RUN_LOCAL_SIZE", job->np);
    cg_run_setenv_int("CG_RUN_CROSS_RANK", 0);
    cg_run_setenv_int("CG_RUN_CROSS_SIZE", 1);
    setenv("CG_RUN_RENDEZVOUS", rdv, 1);
    setenv("CG_RUN_SECRET", secret, 1);
    unsetenv("CG_RUN_RENDEZVOUS_FD");
    if (r == 0 && fcntl(lfd, F_SETFD, 0) == 0)
        cg_run_setenv_int("CG_RUN_RENDEZVOUS_FD", lfd);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    execvp(job->argv[0], job->argv);
    fprintf(stderr, "collguard-run: cannot run '%s': %s\n", job->argv[0],
            strerror(errno));
    _exit(127);
}

static int cg_run_spawn(cg_run_job_t *job, const sigset_t *old_mask)
{
    char rdv[64], secret[17];
    uint64_t s = 0;
    int port = 0, rc = 0;
    int lfd = cg_run_listen(&port);

    if (lfd < 0) {
        cg_run_msg("cannot listen on a free port of 127.0.0.1: %s",
                   strerror(errno));
        return 1;
    }
    if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s))
        s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    snprintf(rdv, sizeof(rdv), "127.0.0.1:%d", port);
    snprintf(secret, sizeof(secret), "%016llx", (unsigned long long)s);
    for (int r = 0; r < job->np; r++) {
        cg_run_rank_t *rk = &job->ranks[r];
        int p[2][2];

        if (pipe2(p[0], O_CLOEXEC) < 0 || pipe2(p[1], O_CLOEXEC) < 0) {
            cg_run_msg("pipe for rank %d failed: %s", r, strerror(errno));
            rc = 1;
            break;
        }
        rk->pid = fork();
        if (rk->pid < 0) {
            cg_run_msg("fork of rank %d failed: %s", r, strerror(errno));
            rk->pid = 0;
            rc = 1;
            break;
        }
        if (rk->pid == 0)
            cg_run_child(job, r, p[0][1], p[1][1], lfd, rdv, secret,
                         old_mask);
        setpgid(rk->pid, rk->pid);
        job->alive++;
        for (int k = 0; k < 2; k++) {
            close(p[k][1]);
            fcntl(p[k][0], F_SETFL, O_NONBLOCK);
            rk->io[k].fd = p[k][0];
            rk->io[k].out = k + 1;
        }
    }
    close(lfd); /* rank 0 holds it now */
    return rc;
}

static void cg_run_write(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* our own output is gone: drop it */
        p += n;
        len -= (size_t)n;
    }
}

static void cg_run_emit(int r, cg_run_stream_t *s, const char *line,
                        size_t len)
{
    char prefix[16];
    int plen = snprintf(prefix, sizeof(prefix), "[%d] ", r);

    cg_run_write(s->out, prefix, (size_t)plen);
    cg_run_write(s->out, line, len);
    cg_run_write(s->out, "\n", 1);
}

/* Reads what is there; emits whole lines, a full buffer as one line, and
 * the unterminated tail at EOF. */
static void cg_run_drain(int r, cg_run_stream_t *s)
{
    for (;;) {
        ssize_t n = read(s->fd, s->buf + s->used, sizeof(s->buf) - s->used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            if (s->used > 0)
                cg_run_emit(r, s, s->buf, s->used);
            s->used = 0;
            close(s->fd);
            s->fd = -1;
            return;
        }
        s->used += (size_t)n;
        char *start = s->buf, *nl;
        while ((nl = memchr(start, '\n', s->used - (size_t)(start - s->buf)))
               != NULL) {
            cg_run_emit(r, s, start, (size_t)(nl - start));
            start = nl + 1;
        }
        s->used -= (size_t)(start - s->buf);
        memmove(s->buf, start, s->used);
        if (s->used == sizeof(s->buf)) {
            cg_run_emit(r, s, s->buf, s->used);
            s->used = 0;
        }
    }
}

static uint64_t cg_run_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cg_run_signal_all(cg_run_job_t *job, int sig)
{
    for (int r = 0; r < job->np; r++) {
        if (job->ranks[r].pid > 0)
            kill(-job->ranks[r].pid, sig);
    }
}

/* Starts stopping the job (once): sig (SIGTERM, or the interrupt being
 * forwarded) now, SIGKILL after the grace period. */
static void cg_run_stop(cg_run_job_t *job, int code, int sig)
{
    if (job->kill_at_ns != 0)
        return;
    job->exit_code = code;
    job->kill_at_ns = cg_run_now() + job->grace_ns;
    cg_run_signal_all(job, sig);
}

static void cg_run_reap(cg_run_job_t *job)
{
    int st;
    pid_t pid;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (int r = 0; r < job->np; r++) {
            cg_run_rank_t *rk = &job->ranks[r];
            if (rk->pid != pid)
                continue;
            rk->pid = 0;
            rk->status = st;
            job->alive--;
            if (job->kill_at_ns != 0 || (WIFEXITED(st) &&
                                         WEXITSTATUS(st) == 0))
                break;
            if (WIFEXITED(st))
                cg_run_msg("rank %d (pid %d) exited with status %d; stopping "
                           "the other %d rank(s)", r, (int)pid,
                           WEXITSTATUS(st), job->alive);
            else
                cg_run_msg("rank %d (pid %d) was killed by signal %d (%s); "
                           "stopping the other %d rank(s)", r, (int)pid,
                           WTERMSIG(st), strsignal(WTERMSIG(st)), job->alive);
            cg_run_stop(job, WIFEXITED(st) ? WEXITSTATUS(st)
                                           : 128 + WTERMSIG(st), SIGTERM);
            break;
        }
    }
}

static void cg_run_on_signal(cg_run_job_t *job, int sfd)
{
    struct signalfd_siginfo si;

    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            cg_run_reap(job);
        } else if (job->kill_at_ns != 0) {
            cg_run_signal_all(job, SIGKILL); /* second interrupt */
        } else {
            cg_run_msg("got signal %d (%s); forwarding it to %d rank(s)",
                       (int)si.ssi_signo, strsignal((int)si.ssi_signo),
                       job->alive);
            cg_run_stop(job, 128 + (int)si.ssi_signo, (int)si.ssi_signo);
        }
    }
}

/* Forwards output and signals until every rank is reaped and its output
 * drained (at most 1 s after the last exit if a grandchild holds a pipe). */
static void cg_run_loop(cg_run_job_t *job, int sfd)
{
    struct pollfd *pfd = calloc((size_t)job->np * 2 + 1, sizeof(*pfd));
    uint64_t start = cg_run_now(), drain_until = 0;

    if (pfd == NULL) {
        cg_run_msg("out of memory for %d ranks; stopping them", job->np);
        cg_run_signal_all(job, SIGKILL);
        while (job->alive > 0 && wait(NULL) > 0)
            job->alive--;
        job->exit_code = 1;
        return;
    }

    for (;;) {
        uint64_t now = cg_run_now(), wake = now + 1000000000ull;
        int n = 1, open_fds = 0;

        if (job->timeout_ns != 0 && job->kill_at_ns == 0 &&
            now - start >= job->timeout_ns) {
            cg_run_msg("job exceeded --timeout %.1f s; stopping %d rank(s)",
                       (double)job->timeout_ns / 1e9, job->alive);
            cg_run_stop(job, 124, SIGTERM);
        }
        if (job->kill_at_ns != 0 && now >= job->kill_at_ns && job->alive) {
            cg_run_msg("%d rank(s) still running %.1f s after being told to "
                       "stop; killing them", job->alive,
                       (double)job->grace_ns / 1e9);
            cg_run_signal_all(job, SIGKILL);
            job->kill_at_ns = UINT64_MAX;
        }
        if (job->alive == 0 && drain_until == 0)
            drain_until = now + 1000000000ull;
        pfd[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
        for (int r = 0; r < job->np; r++) {
            for (int k = 0; k < 2; k++) {
                pfd[n] = (struct pollfd){.fd = job->ranks[r].io[k].fd,
                                         .events = POLLIN};
                open_fds += (pfd[n++].fd >= 0) ? 1 : 0;
            }
        }
        if (job->alive == 0 && (open_fds == 0 || now >= drain_until))
            break;
        if (job->kill_at_ns > now && job->kill_at_ns < wake)
            wake = job->kill_at_ns;
        poll(pfd, (nfds_t)n, (int)((wake - now) / 1000000ull) + 1);
        if (pfd[0].revents & POLLIN)
            cg_run_on_signal(job, sfd);
        for (int i = 1; i < n; i++) {
            if (pfd[i].fd >= 0 && pfd[i].revents != 0)
                cg_run_drain((i - 1) / 2, &job->ranks[(i - 1) / 2]
                                              .io[(i - 1) % 2]);
        }
    }
    free(pfd);
}

int main(int argc, char **argv)
{
    cg_run_job_t job;
    sigset_t mask, old_mask;
    int sfd, rc;

    memset(&job, 0, sizeof(job));
    rc = cg_run_parse(argc, argv, &job);
    if (rc != 0)
        return rc;
    job.ranks = calloc((size_t)job.np, sizeof(*job.ranks));
    if (job.ranks == NULL) {
        cg_run_msg("out of memory for %d ranks", job.np);
        return 1;
    }
    for (int r = 0; r < job.np; r++)
        job.ranks[r].io[0].fd = job.ranks[r].io[1].fd = -1;
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &old_mask);
    sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        cg_run_msg("signalfd failed: %s", strerror(errno));
        return 1;
    }
    if (cg_run_spawn(&job, &old_mask) != 0)
        cg_run_stop(&job, 1, SIGTERM);
    cg_run_loop(&job, sfd);
    for (int r = 0; r < job.np; r++) {
        for (int k = 0; k < 2; k++) {
            if (job.ranks[r].io[k].fd >= 0)
                close(job.ranks[r].io[k].fd);
        }
    }
    close(sfd);
    free(job.ranks);
    return job.exit_code;
}
