/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prints the metrics renderer's text for a GPU snapshot with every shim
 * series (counters zero): every name the library exports, for
 * tests/core/observe/grafana_check.py.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/observe/metrics_format.h"

int main(void)
{
    cg_governor_snapshot_t snap = {.kind = CG_MEM_KIND_DEVICE, .device = 0,
                                   .oom_eta_s = -1.0,
                                   .early_warning_age_s = -1.0};
    cg_hvd_stats_t stats = {0};
    size_t need = cg_metrics_format(NULL, 0, 0, "cuda", &snap, &stats);
    char *buf = malloc(need);

    if (buf == NULL)
        return 1;
    cg_metrics_format(buf, need, 0, "cuda", &snap, &stats);
    fputs(buf, stdout);
    free(buf);
    return 0;
}
