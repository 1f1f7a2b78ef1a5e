/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict parsers for configuration values: sizes ("4M", "64MiB", "1G",
 * "1048576"), percentages ("25%", "0.25"), durations ("5s", "100ms", a bare
 * number in the field's unit), booleans and integers. Each rejects trailing
 * garbage, signs where none belong, and overflow; none ever falls back to a
 * default. Part of core/base; calls nothing.
 */
#ifndef CG_BASE_PARSE_H
#define CG_BASE_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* Size in bytes. Suffixes (case-insensitive): none/B, K/KB/KiB, M/MB/MiB,
 * G/GB/GiB, T/TB/TiB: all binary (1K = 1024), as NCCL and Horovod read them.
 * Fractions allowed with a suffix ("1.5G"). */
bool cg_parse_size(const char *s, uint64_t *bytes_p);
/* "25%" -> 0.25; "0.25" -> 0.25. Must lie in [0, 1]. */
bool cg_parse_fraction(const char *s, double *frac_p);
/* Duration in nanoseconds. Suffixes: ns, us, ms, s, m, h; a bare number is
 * taken in bare_unit_ns (e.g. 1e6 for a field documented in ms). */
bool cg_parse_duration(const char *s, uint64_t bare_unit_ns, uint64_t *ns_p);
/* 1/0, true/false, yes/no, on/off (case-insensitive). */
bool cg_parse_bool(const char *s, bool *b_p);
/* Decimal integer within [min, max]. */
bool cg_parse_int(const char *s, int64_t min, int64_t max, int64_t *v_p);

/* Formats bytes as "64 MiB" / "1.5 GiB" / "512 B" into buf. */
const char *cg_format_size(uint64_t bytes, char *buf, unsigned len);

#endif
