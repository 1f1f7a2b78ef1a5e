/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-info: what this build contains (version, optional parts), what
 * it sees at run time (CUDA devices, transports, socket interface) and the
 * governor's current decisions for host and device memory; -c lists every
 * configuration variable; --estimate prints the memory estimate of a
 * model (cli/info_estimate.c); --plugin-path where the NCCL plugins are.
 * Layer: plugin (a command over core/transport).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg_build.h"

#include "collguard/collguard.h"
#include "core/backend/nccl_cost.h"
#include "core/base/parse.h"
#include "core/context.h"
#include "core/observe/metrics_http.h"
#include "plugin/cli/info_cuda.h"
#include "plugin/cli/info_estimate.h"
#include "transport/sock.h"
#include "transport/transport.h"

static void cg__usage(FILE *out)
{
    fprintf(out,
            "usage: collguard-info [-c] [--markdown] [-h]\n"
            "       collguard-info --plugin-path [net|tuner]\n"
            "       collguard-info --estimate [COUNT] [--shapes FILE] "
            "[estimate options]\n"
            "  (none)       build, devices, transports, governor budget\n"
            "  -c           every configuration variable: value, doc\n"
            "  --markdown   the variable table as Markdown "
            "(docs/configuration.md)\n"
            "  --estimate   memory per rank of data-parallel training "
            "(--estimate -h: its options)\n"
            "  --plugin-path  the folder of the NCCL plugins; with net or "
            "tuner, the\n"
            "               plugin's file (for NCCL_NET_PLUGIN, "
            "NCCL_TUNER_PLUGIN)\n");
}

/* The NCCL plugins' folder: the library folder of an installed tree or
 * wheel (this command's bin/ + CG_BIN_TO_LIBDIR), else plugin/nccl/ of a
 * build tree (this command's folder + nccl/). which: NULL for the folder,
 * "net" or "tuner" for that plugin's file. */
static int cg__plugin_path(const char *which)
{
    static const char *const names[] = {"libnccl-net-collguard.so",
                                        "libnccl-tuner-collguard.so"};
    const char *rel[] = {CG_BIN_TO_LIBDIR, "nccl"};
    char exe[PATH_MAX], path[PATH_MAX + 64], real[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (n <= 0) {
        perror("collguard-info: readlink /proc/self/exe");
        return 1;
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        bool both = true;
        for (size_t k = 0; k < 2 && both; k++) {
            snprintf(path, sizeof(path), "%s/%s/%s", exe, rel[i], names[k]);
            both = access(path, R_OK) == 0;
        }
        snprintf(path, sizeof(path), "%s/%s", exe, rel[i]);
        if (!both || !realpath(path, real))
            continue;
        if (!which)
            printf("%s\n", real);
        else
            printf("%s/%s\n", real, names[strcmp(which, "net") == 0 ? 0 : 1]);
        return 0;
    }
    fprintf(stderr,
            "collguard-info: %s and %s not found in %s/%s or %s/nccl "
            "(installed without the NCCL plugins?)\n",
            names[0], names[1], exe, CG_BIN_TO_LIBDIR, exe);
    return 1;
}

static void cg__print_snapshot(const char *what, cg_governor_t *gov)
{
    cg_governor_snapshot_t s;
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32];

    if (cg_governor_sample(gov) != CG_OK) {
        printf("  %-7s probe failed: %s\n", what, cg_last_error());
        return;
    }
    cg_governor_snapshot(gov, &s);
    printf("  %-7s free %s of %s, reserve %s -> budget %s\n", what,
           cg_format_size(s.free_bytes, a, sizeof(a)),
           cg_format_size(s.total_bytes, b, sizeof(b)),
           cg_format_size(s.reserve_bytes, c, sizeof(c)),
           cg_format_size(s.budget_bytes, d, sizeof(d)));
    printf("          fusion buffer %s, chunk %s, NCCL_BUFFSIZE %s, "
           "pressure %s\n",
           cg_format_size(s.fusion_bytes, e, sizeof(e)),
           cg_format_size(s.chunk_bytes, f, sizeof(f)),
           cg_format_size(s.nccl_buffsize, g, sizeof(g)),
           cg_pressure_name(s.pressure));
}

/* What AUTO would choose for CUDA tensors on this GPU, for a job with
 * one rank per host (core/engine/hvd_gpu_auto.c weighs the same). */
static void cg__auto_line(cg_ctx_h ctx, cg_governor_t *gov)
{
    cg_nccl_cost_in_t in = {.override_bytes = ctx->cfg.nccl_cost,
                            .buffsize = cg_governor_nccl_buffsize(gov)};
    uint64_t est = cg_nccl_cost_estimate(&in), budget = cg_governor_budget(gov);
    char a[32], b[32];

    if ((cg_backend_kind_t)ctx->cfg.gpu_operations != CG_BACKEND_AUTO ||
        !(cg_build_features() & CG_FEATURE_NCCL))
        return;
    printf("          AUTO for CUDA tensors: %s (NCCL's communicator %s "
           "%s budget %s%s)\n", est <= budget ? "NCCL" : "COLLGUARD, host-staged",
           cg_format_size(est, a, sizeof(a)),
           est <= budget ? "fits the" : "exceeds the",
           cg_format_size(budget, b, sizeof(b)),
           ctx->cfg.nccl_cost ? ", CG_NCCL_COST" : ", estimated for one rank per host");
}

static void cg__governor_for(cg_ctx_h ctx, const char *what,
                             cg_mem_probe_t probe)
{
    cg_governor_params_t gp;
    cg_governor_t *gov;

    memset(&gp, 0, sizeof(gp));
    gp.cfg = &ctx->cfg;
    gp.probe = probe;
    gp.log = &ctx->log;
    if (cg_governor_create(&gp, &gov) != CG_OK) {
        printf("  %-7s unavailable: %s\n", what, cg_last_error());
        return;
    }
    cg__print_snapshot(what, gov);
    if (strcmp(what, "cuda") == 0)
        cg__auto_line(ctx, gov);
    cg_governor_destroy(gov);
}

static void cg__transport_line(cg_ctx_h ctx, cg_transport_kind_t kind,
                               const char *name)
{
    cg_transport_params_t tp;
    cg_transport_t *t;

    memset(&tp, 0, sizeof(tp));
    tp.kind = kind;
    tp.rank = -1;
    tp.timeout_ns = ctx->cfg.timeout_ns;
    tp.ifname = ctx->cfg.socket_ifname;
    tp.nsocks = ctx->cfg.socket_nsocks;
    tp.ucx_shm_zcopy = ctx->cfg.ucx_shm_zcopy;
    tp.log = NULL; /* failures are reported on this line instead */
    tp.mem = cg_governor_mem_ops(ctx->gov);
    if (cg_transport_create(&tp, &t) != CG_OK) {
        printf("  %-7s unavailable: %s\n", name, cg_last_error());
        return;
    }
    printf("  %-7s ok\n", name);
    cg_transport_destroy(t);
}

int main(int argc, char **argv)
{
    bool list = false, markdown = false;
    cg_ctx_h ctx;
    unsigned f = cg_build_features();

    if (argc > 1 && strcmp(argv[1], "--estimate") == 0)
        return cg_info_estimate(argc - 2, argv + 2);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0) {
            list = true;
        } else if (strcmp(argv[i], "--markdown") == 0) {
            markdown = true;
        } else if (strcmp(argv[i], "--plugin-path") == 0) {
            const char *which = i + 1 < argc ? argv[i + 1] : NULL;
            if (which && strcmp(which, "net") && strcmp(which, "tuner")) {
                fprintf(stderr, "collguard-info: --plugin-path takes net or "
                                "tuner, not '%s'\n", which);
                return 2;
            }
            if (which && i + 2 < argc) {
                fprintf(stderr, "collguard-info: --plugin-path takes no "
                                "option after '%s'\n", which);
                return 2;
            }
            return cg__plugin_path(which);
        } else if (strcmp(argv[i], "-h") == 0 ||
                   strcmp(argv[i], "--help") == 0) {
            cg__usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "collguard-info: unknown option '%s'\n", argv[i]);
            cg__usage(stderr);
            return 2;
        }
    }
    if (markdown) {
        cg_config_t defaults;
        cg_config_defaults(&defaults);
        cg_config_print(&defaults, stdout, true);
        return 0;
    }
    if (cg_ctx_create(NULL, &ctx) != CG_OK) {
        fprintf(stderr, "collguard-info: %s\n", cg_last_error());
        return 1;
    }
    if (list) {
        printf("configuration (value now; (set) = from the environment):\n");
        cg_config_print(&ctx->cfg, stdout, false);
        cg_ctx_destroy(ctx);
        return 0;
    }

    printf("collguard %s\n", cg_version());
    printf("built with: CUDA %s, NCCL %s, MPI %s, UCX %s\n",
           (f & CG_FEATURE_CUDA) ? "yes" : "no",
           (f & CG_FEATURE_NCCL) ? "yes" : "no",
           (f & CG_FEATURE_MPI) ? "yes" : "no",
           (f & CG_FEATURE_UCX) ? "yes" : "no");
    printf("metrics endpoint (CG_METRICS_PORT, libmicrohttpd): %s\n",
           cg_metrics_http_built() ? "yes" : "no");
    printf("devices:\n");
    cg_info_cuda();

    printf("transports (built: %s):\n", cg_transport_built());
    if (f & CG_FEATURE_UCX)
        cg__transport_line(ctx, CG_TRANSPORT_UCX, "ucx");
    cg__transport_line(ctx, CG_TRANSPORT_SOCKET, "socket");
    {
        cg_sockaddr_t addr;
        char ifname[64], buf[96];
        if (cg_sock_pick_addr(ctx->cfg.socket_ifname, &addr, ifname,
                              sizeof(ifname)) == CG_OK)
            printf("  socket interface %s (%s)\n", ifname,
                   cg_sockaddr_str(&addr, buf, sizeof(buf)));
        else
            printf("  socket interface none: %s\n", cg_last_error());
    }

    printf("governor (CG_MEM_PROBE=%s governs %s memory):\n",
           cg_mem_probe_name(ctx->cfg.mem_probe), ctx->probe.name);
    {
        cg_host_probe_t hp;
        cg_mem_probe_t probe;
        memset(&hp, 0, sizeof(hp)); /* real /proc and cgroup paths */
        cg_host_probe_init(&hp, &probe);
        cg__governor_for(ctx, "host", probe);
        cg_cuda_probe_t *cp;
        if (cg_cuda_probe_create(&cp, &probe) == CG_OK) {
            cg__governor_for(ctx, "cuda", probe);
            cg_cuda_probe_destroy(cp);
        } else {
            printf("  cuda    no device: %s\n", cg_last_error());
        }
    }
    cg_ctx_destroy(ctx);
    return 0;
}
