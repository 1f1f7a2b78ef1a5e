/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Implementation of the strict value parsers in parse.h. Part of core/base.
 */
#include "core/base/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parses a non-negative decimal number with optional fraction; returns the
 * end pointer, or NULL when there is no number. Rejects signs, hex, inf/nan
 * and exponents (a size like "1e99" is an error, not a huge value). */
static const char *cg__parse_number(const char *s, double *v_p)
{
    const char *p = s;
    double v = 0.0, scale = 0.1;
    int digits = 0;

    while (isspace((unsigned char)*p))
        p++;
    while (isdigit((unsigned char)*p)) {
        v = v * 10.0 + (*p - '0');
        p++;
        digits++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            v += (*p - '0') * scale;
            scale *= 0.1;
            p++;
            digits++;
        }
    }
    if (digits == 0)
        return NULL;
    *v_p = v;
    return p;
}

static const char *cg__skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

/* Splits "<number><spaces><suffix>" into the number and the lower-cased
 * suffix ("" when none). False on a missing number, a suffix longer than
 * cap - 1, or anything after the suffix. */
static bool cg__number_suffix(const char *s, double *v_p, char *suffix,
                              size_t cap)
{
    size_t n = 0;
    const char *p = cg__parse_number(s, v_p);

    if (p == NULL)
        return false;
    p = cg__skip_space(p);
    while (*p && !isspace((unsigned char)*p)) {
        if (n == cap - 1)
            return false;
        suffix[n++] = (char)tolower((unsigned char)*p++);
    }
    suffix[n] = '\0';
    return *cg__skip_space(p) == '\0';
}

bool cg_parse_size(const char *s, uint64_t *bytes_p)
{
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {
        {"", 1.0},          {"b", 1.0},
        {"k", 1024.0},      {"kb", 1024.0},      {"kib", 1024.0},
        {"m", 1048576.0},   {"mb", 1048576.0},   {"mib", 1048576.0},
        {"g", 1073741824.0}, {"gb", 1073741824.0}, {"gib", 1073741824.0},
        {"t", 1099511627776.0}, {"tb", 1099511627776.0},
        {"tib", 1099511627776.0},
    };
    char suffix[8];
    double v;

    if (!cg__number_suffix(s, &v, suffix, sizeof(suffix)))
        return false;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(units[i].suffix, suffix) != 0)
            continue;
        if (units[i].mult == 1.0 && v != floor(v))
            return false; /* "1.5" bytes */
        double bytes = v * units[i].mult;
        if (bytes >= 18446744073709551615.0)
            return false;
        *bytes_p = (uint64_t)bytes;
        return true;
    }
    return false;
}

bool cg_parse_fraction(const char *s, double *frac_p)
{
    double v;
    const char *p = cg__parse_number(s, &v);

    if (p == NULL)
        return false;
    p = cg__skip_space(p);
    if (*p == '%') {
        v /= 100.0;
        p++;
    }
    if (*cg__skip_space(p) != '\0' || v > 1.0)
        return false;
    *frac_p = v;
    return true;
}

bool cg_parse_duration(const char *s, uint64_t bare_unit_ns, uint64_t *ns_p)
{
    static const struct {
        const char *suffix;
        double ns;
    } units[] = {{"ns", 1.0},  {"us", 1e3},   {"ms", 1e6},
                 {"s", 1e9},   {"m", 60e9},   {"h", 3600e9}};
    double v, mult = (double)bare_unit_ns;
    char suffix[4];

    if (!cg__number_suffix(s, &v, suffix, sizeof(suffix)))
        return false;
    if (suffix[0] != '\0') {
        size_t i;
        for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
            if (strcmp(units[i].suffix, suffix) == 0)
                break;
        if (i == sizeof(units) / sizeof(units[0]))
            return false;
        mult = units[i].ns;
    }
    if (v * mult >= 1.8e19)
        return false;
    *ns_p = (uint64_t)(v * mult + 0.5);
    return true;
}

bool cg_parse_bool(const char *s, bool *b_p)
{
    static const char *const yes[] = {"1", "true", "yes", "on", "y"};
    static const char *const no[] = {"0", "false", "no", "off", "n"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *b_p = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *b_p = false;
            return true;
        }
    }
    return false;
}

bool cg_parse_int(const char *s, int64_t min, int64_t max, int64_t *v_p)
{
    char *end;
    long long v;

    if (*cg__skip_space(s) == '\0')
        return false;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *cg__skip_space(end) != '\0' || v < min || v > max)
        return false;
    *v_p = v;
    return true;
}

const char *cg_format_size(uint64_t bytes, char *buf, unsigned len)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    unsigned i = 0;

    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else if (v == floor(v))
        snprintf(buf, len, "%.0f %s", v, names[i]);
    else
        snprintf(buf, len, "%.2f %s", v, names[i]);
    return buf;
}
