/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shape of the configuration table, shared by the files of core/config/:
 * a row's type and fields (the rows: config_table.c), and what the other
 * files use of one another: a value parsed and written back by its row's
 * type (config_value.c). Private to core/config/. Layer: core/config.
 */
#ifndef CG_CORE_CONFIG_IMPL_H
#define CG_CORE_CONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config/config.h"

typedef enum {
    CG__T_ENUM,
    CG__T_SIZE,
    CG__T_SIZE_OR_FRAC,
    CG__T_FRACTION,
    CG__T_DURATION,
    CG__T_INT,
    CG__T_STRING,
    CG__T_BOOL
} cg__type_t;

typedef struct {
    cg_config_id_t id;
    const char *name;
    const char *aliases[2]; /* other names read, in order, if name unset */
    cg__type_t type;
    const char *defval;
    size_t offset;
    const char *const *enum_names; /* CG__T_ENUM: index = value */
    int64_t min, max;              /* CG__T_INT bounds; CG__T_ENUM: max > 0
                                      accepts only the values below it */
    uint64_t bare_unit_ns;         /* CG__T_DURATION: unit of a bare number */
    const char *doc;
} cg__field_t;

/* The rows, one per variable, index = cg_config_id_t (config_table.c). */
extern const cg__field_t cg__config_fields[CG_CFG_COUNT];

/* Parses value by f's type into f's field of cfg; false if malformed
 * (config_value.c). */
bool cg__config_parse_field(const cg__field_t *f, const char *value,
                            cg_config_t *cfg);

/* The form f's type accepts, for an error message; written into buf where
 * it depends on the row (an enum's names, an integer's bounds). */
const char *cg__config_accepted_form(const cg__field_t *f, char *buf,
                                     size_t len);

/* f's field of cfg written as collguard-info -c prints it. */
void cg__config_format_value(const cg__field_t *f, const cg_config_t *cfg,
                             char *buf, size_t len);

#endif
