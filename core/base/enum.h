/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One name list per enum. A list is an X-macro, X(ENUMERATOR, "name"), from
 * which the enumerators (0, 1, ... in list order), a NULL-terminated array
 * of the names (index = value, as the configuration table parses them) and
 * a name function are generated, so an enum and its names cannot drift
 * apart (CG_STATUS_MAP in collguard/status.h is the public example). Also
 * the one list that two layers below core/config name: the transport kind.
 * Part of core/base; calls nothing.
 */
#ifndef CG_BASE_ENUM_H
#define CG_BASE_ENUM_H

#define CG_ENUM_ITEM(e, s) e,
#define CG_ENUM_NAME(e, s) s,
#define CG_ENUM_CASE(e, s) \
    case e:                \
        return s;

/* static inline const char *fn(type v): the name of v, "unknown" for a
 * value outside the list. */
#define CG_ENUM_NAME_FN(fn, type, map)         \
    static inline const char *fn(type v)       \
    {                                          \
        switch (v) {                           \
            map(CG_ENUM_CASE) default : break; \
        }                                      \
        return "unknown";                      \
    }

/* CG_TRANSPORT: which point-to-point transport (transport/transport.h). */
#define CG_TRANSPORT_KIND_MAP(X)   \
    X(CG_TRANSPORT_AUTO, "auto")   \
    X(CG_TRANSPORT_UCX, "ucx")     \
    X(CG_TRANSPORT_SOCKET, "socket")

typedef enum { CG_TRANSPORT_KIND_MAP(CG_ENUM_ITEM) } cg_transport_kind_t;

/* "auto", "ucx" or "socket". */
CG_ENUM_NAME_FN(cg_transport_kind_name, cg_transport_kind_t,
                CG_TRANSPORT_KIND_MAP)

#endif
