/* SPDX-License-Identifier: Apache-2.0 */
/* Export macro for collguard's public symbols; the library is built with
 * -fvisibility=hidden, so only CG_API symbols are visible. */
#ifndef COLLGUARD_API_H
#define COLLGUARD_API_H
#if defined(__GNUC__)
#define CG_API __attribute__((visibility("default")))
#else
#define CG_API
#endif
#endif
