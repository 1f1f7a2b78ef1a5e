/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard status codes: one X-macro list yields the enum and its strings,
 * so the two cannot drift. 0 is success, 1 "in progress", errors negative.
 * Codes in the peer-failure range (-100 .. -199) mean a remote rank or the
 * link to it failed: the caller fails the operation on every rank.
 */
#ifndef COLLGUARD_STATUS_H
#define COLLGUARD_STATUS_H

#include "collguard/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, text) */
#define CG_STATUS_MAP(X)                                                      \
    X(CG_OK, 0, "success")                                                    \
    X(CG_INPROGRESS, 1, "operation in progress")                              \
    X(CG_ERR_INVALID_PARAM, -1, "invalid parameter")                          \
    X(CG_ERR_NO_MEMORY, -2, "out of memory")                                  \
    X(CG_ERR_CONFIG, -3, "invalid configuration")                             \
    X(CG_ERR_UNSUPPORTED, -4, "not supported in this build")                  \
    X(CG_ERR_NOT_FOUND, -5, "not found")                                      \
    X(CG_ERR_IO, -6, "input/output error")                                    \
    X(CG_ERR_INTERNAL, -7, "internal error")                                  \
    X(CG_ERR_NOT_INITIALIZED, -8, "not initialized")                          \
    X(CG_ERR_BUSY, -9, "resource busy")                                       \
    X(CG_ERR_TRUNCATED, -10, "message longer than receive buffer")           \
    X(CG_ERR_CANCELED, -11, "operation canceled")                             \
    X(CG_ERR_MISMATCH, -12, "operation differs across ranks")                 \
    X(CG_ERR_NO_DEVICE, -13, "no such device")                                \
    X(CG_ERR_TIMEOUT, -100, "timed out waiting for peer")                     \
    X(CG_ERR_PEER_RESET, -101, "connection closed or reset by peer")          \
    X(CG_ERR_HANDSHAKE, -102, "connection handshake refused")                 \
    X(CG_ERR_UNREACHABLE, -103, "peer unreachable")

typedef enum {
#define CG__STATUS_ENUM(name, value, text) name = value,
    CG_STATUS_MAP(CG__STATUS_ENUM)
#undef CG__STATUS_ENUM
} cg_status_t;

#define CG_STATUS_IS_ERR(s) ((s) < 0)
#define CG_STATUS_IS_PEER_FAILURE(s) ((s) <= -100 && (s) > -200)

/* Short text for a status code ("timed out waiting for peer"). Never NULL. */
CG_API const char *cg_status_string(cg_status_t status);
/* The symbolic name ("CG_ERR_TIMEOUT"). Never NULL. */
CG_API const char *cg_status_name(cg_status_t status);
/* Detail of the last error set on the calling thread ("" if none).
 * Thread-safe: the message is thread-local. */
CG_API const char *cg_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
