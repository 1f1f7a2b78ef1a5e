/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The listing of every variable: `collguard-info -c` (current value, set
 * or not, aliases, doc) and `collguard-info --markdown`, the table of
 * docs/configuration.md (name, default, doc).
 * Layer: core/config; calls core/base only.
 */
#include "core/config/config_impl.h"

#include <stdio.h>
#include <string.h>

void cg_config_print(const cg_config_t *cfg, FILE *out, bool markdown)
{
    if (markdown)
        fprintf(out, "| variable | default | meaning |\n|---|---|---|\n");
    for (int i = 0; i < CG_CFG_COUNT; i++) {
        const cg__field_t *f = &cg__config_fields[i];
        char value[96], aliases[96] = "";
        cg__config_format_value(f, cfg, value, sizeof(value));
        for (int a = 0; a < 2 && f->aliases[a] != NULL; a++)
            snprintf(aliases + strlen(aliases),
                     sizeof(aliases) - strlen(aliases), "%s%s",
                     a ? ", " : " (also ", f->aliases[a]);
        if (aliases[0])
            strcat(aliases, ")");
        if (markdown)
            fprintf(out, "| `%s`%s | `%s` | %s |\n", f->name, aliases,
                    f->defval[0] ? f->defval : "(unset)", f->doc);
        else
            fprintf(out, "  %-24s %-12s%s%s\n      %s\n", f->name, value,
                    cfg->set_by_user[i] ? " (set)" : "", aliases, f->doc);
    }
}
