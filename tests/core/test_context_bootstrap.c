/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cg_ctx_create with CG_CTX_PARAM_BOOTSTRAP: the context joins the job
 * described by its environment list (not the process environment), its
 * log takes the bootstrap's rank, the bootstrap's memory is the
 * governor's CONTROL bytes, and a malformed launcher variable fails the
 * create cleanly. Two ranks are forked on 127.0.0.1.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/context.h"

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* A context of rank of 2 from an environment list; 0 when all is right. */
static int one_rank(int rank, int port)
{
    char r[32], lr[32], rdv[64];
    const char *env[] = {r, "CG_RUN_SIZE=2", lr, "CG_RUN_LOCAL_SIZE=2",
                         "CG_RUN_SECRET=ctx-test", rdv, "CG_TIMEOUT=10s",
                         NULL};
    cg_ctx_params_t p = {.field_mask = CG_CTX_PARAM_ENV |
                                       CG_CTX_PARAM_BOOTSTRAP,
                         .env = env, .bootstrap = 1};
    cg_governor_snapshot_t snap;
    cg_ctx_h ctx;

    snprintf(r, sizeof(r), "CG_RUN_RANK=%d", rank);
    snprintf(lr, sizeof(lr), "CG_RUN_LOCAL_RANK=%d", rank);
    snprintf(rdv, sizeof(rdv), "CG_RUN_RENDEZVOUS=127.0.0.1:%d", port);
    if (cg_ctx_create(&p, &ctx) != CG_OK)
        return 10;
    if (ctx->bs == NULL || cg_bootstrap_rank(ctx->bs) != rank ||
        cg_bootstrap_size(ctx->bs) != 2 || ctx->log.rank != rank)
        return 11;
    if (cg_ctx_governor_snapshot(ctx, &snap) != CG_OK ||
        snap.current_bytes[CG_MEM_CAT_CONTROL] == 0)
        return 12;
    cg_ctx_destroy(ctx);
    return 0;
}

Test(context_bootstrap, two_ranks_join_from_the_env_list, .timeout = 30)
{
    int port = free_port(), status[2];
    pid_t pid[2];

    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        if (pid[r] == 0)
            _exit(one_rank(r, port));
    }
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(waitpid(pid[r], &status[r], 0), pid[r], "waitpid");
        cr_expect(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
                  "rank %d: exit %d (10 create, 11 layout, 12 CONTROL "
                  "bytes)", r, WEXITSTATUS(status[r]));
    }
}

Test(context_bootstrap, without_the_flag_there_is_none)
{
    const char *env[] = {"CG_RUN_RANK=0", "CG_RUN_SIZE=2", NULL};
    cg_ctx_params_t p = {.field_mask = CG_CTX_PARAM_ENV, .env = env};
    cg_ctx_h ctx;

    cr_assert_eq(cg_ctx_create(&p, &ctx), CG_OK, "%s", cg_last_error());
    cr_assert_null(ctx->bs, "bootstrap %p", (void *)ctx->bs);
    cg_ctx_destroy(ctx);
}

Test(context_bootstrap, malformed_launcher_variable_fails_create)
{
    const char *env[] = {"CG_RUN_RANK=two", "CG_RUN_SIZE=2",
                         "CG_LOG_LEVEL=none", NULL};
    cg_ctx_params_t p = {.field_mask = CG_CTX_PARAM_ENV |
                                       CG_CTX_PARAM_BOOTSTRAP,
                         .env = env, .bootstrap = 1};
    cg_ctx_h ctx = (cg_ctx_h)(uintptr_t)0x1;
    cg_status_t st = cg_ctx_create(&p, &ctx);

    cr_assert_eq(st, CG_ERR_CONFIG, "got %s: %s", cg_status_name(st),
                 cg_last_error());
    cr_assert(strstr(cg_last_error(), "CG_RUN_RANK") != NULL, "error: %s",
              cg_last_error());
    cr_assert_eq(ctx, (cg_ctx_h)(uintptr_t)0x1, "ctx_p written on failure");
}
