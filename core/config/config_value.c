/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One configuration value by its row's type, both ways: text to field
 * (what the environment and the defaults give), field to text (what
 * collguard-info -c prints), the accepted form an error names, and the
 * size-or-fraction type's meaning and spelling.
 * Layer: core/config; calls core/base only.
 */
#include "core/config/config_impl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/base/parse.h"

/* How many of an enum variable's names it accepts. */
static int enum_count(const cg__field_t *f)
{
    int n = 0;

    while (f->enum_names[n] != NULL && (f->max <= 0 || n < f->max))
        n++;
    return n;
}

const char *cg__config_accepted_form(const cg__field_t *f, char *buf,
                                     size_t len)
{
    switch (f->type) {
    case CG__T_ENUM: {
        size_t n = 0;
        buf[0] = '\0';
        for (int i = 0; i < enum_count(f); i++)
            n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s",
                                  i ? ", " : "one of ", f->enum_names[i]);
        return buf;
    }
    case CG__T_SIZE:
        return "a size in bytes: 1048576, 64K, 4M, 64MiB, 1G";
    case CG__T_SIZE_OR_FRAC:
        return "a size (512M, 1GiB) or a percentage of total memory (5%)";
    case CG__T_FRACTION:
        return "a percentage (25%) or a fraction between 0 and 1 (0.25)";
    case CG__T_DURATION:
        return "a duration: 500ms, 5s, 2m (a bare number in the documented "
               "unit)";
    case CG__T_BOOL:
        return "a boolean: 1, 0, true, false, yes, no, on, off";
    case CG__T_INT:
        snprintf(buf, len, "an integer from %lld to %lld",
                 (long long)f->min, (long long)f->max);
        return buf;
    case CG__T_STRING: /* max: longest value (0: 63, socket_ifname) */
        snprintf(buf, len, "a string of at most %lld characters",
                 (long long)(f->max > 0 ? f->max : 63));
        return buf;
    }
    return "?";
}

bool cg__config_parse_field(const cg__field_t *f, const char *value,
                            cg_config_t *cfg)
{
    char *dst = (char *)cfg + f->offset;

    switch (f->type) {
    case CG__T_ENUM:
        for (int i = 0; i < enum_count(f); i++) {
            if (strcasecmp(value, f->enum_names[i]) == 0) {
                *(int *)dst = i;
                return true;
            }
        }
        return false;
    case CG__T_SIZE:
        return cg_parse_size(value, (uint64_t *)dst);
    case CG__T_SIZE_OR_FRAC: {
        cg_size_or_frac_t *v = (cg_size_or_frac_t *)dst;
        if (strchr(value, '%') != NULL) {
            v->bytes = 0;
            return cg_parse_fraction(value, &v->fraction);
        }
        v->fraction = -1.0;
        return cg_parse_size(value, &v->bytes);
    }
    case CG__T_FRACTION:
        return cg_parse_fraction(value, (double *)dst);
    case CG__T_DURATION:
        return cg_parse_duration(value, f->bare_unit_ns, (uint64_t *)dst);
    case CG__T_BOOL:
        return cg_parse_bool(value, (bool *)dst);
    case CG__T_INT: {
        int64_t v;
        if (!cg_parse_int(value, f->min, f->max, &v))
            return false;
        if (f->id == CG_CFG_FAULT_ALLOC)
            *(uint64_t *)dst = (uint64_t)v;
        else
            *(int *)dst = (int)v;
        return true;
    }
    case CG__T_STRING:
        if (strlen(value) > (f->max > 0 ? (size_t)f->max : 63))
            return false;
        strcpy(dst, value);
        return true;
    }
    return false;
}

void cg__config_format_value(const cg__field_t *f, const cg_config_t *cfg,
                             char *buf, size_t len)
{
    const char *src = (const char *)cfg + f->offset;

    switch (f->type) {
    case CG__T_ENUM:
        snprintf(buf, len, "%s", f->enum_names[*(const int *)src]);
        return;
    case CG__T_SIZE:
        cg_format_size(*(const uint64_t *)src, buf, (unsigned)len);
        return;
    case CG__T_SIZE_OR_FRAC:
        cg_config_format_size((const cg_size_or_frac_t *)src, buf, len);
        return;
    case CG__T_FRACTION:
        snprintf(buf, len, "%g%%", *(const double *)src * 100.0);
        return;
    case CG__T_DURATION: {
        uint64_t ns = *(const uint64_t *)src;
        if (ns % 1000000000ull == 0)
            snprintf(buf, len, "%llus", (unsigned long long)(ns / 1000000000ull));
        else
            snprintf(buf, len, "%gms", ns / 1e6);
        return;
    }
    case CG__T_BOOL:
        snprintf(buf, len, "%d", *(const bool *)src ? 1 : 0);
        return;
    case CG__T_INT:
        if (f->id == CG_CFG_FAULT_ALLOC)
            snprintf(buf, len, "%llu",
                     (unsigned long long)*(const uint64_t *)src);
        else
            snprintf(buf, len, "%d", *(const int *)src);
        return;
    case CG__T_STRING:
        snprintf(buf, len, "%s", src[0] ? src : "(unset)");
        return;
    }
}

uint64_t cg_config_resolve_size(const cg_size_or_frac_t *v, uint64_t total)
{
    if (v->fraction >= 0.0)
        return (uint64_t)((double)total * v->fraction);
    return v->bytes;
}

const char *cg_config_format_size(const cg_size_or_frac_t *v, char *buf,
                                  size_t len)
{
    if (v->fraction >= 0.0)
        snprintf(buf, len, "%g%%", v->fraction * 100.0);
    else
        cg_format_size(v->bytes, buf, (unsigned)len);
    return buf;
}
