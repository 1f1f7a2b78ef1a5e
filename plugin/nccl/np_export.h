/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one way a plugin symbol leaves its library: everything else is
 * hidden (-fvisibility=hidden), so NCCL sees only the ncclNetPlugin_vN /
 * ncclTunerPlugin_vN tables. Layer: plugin/nccl.
 */
#ifndef CG_PLUGIN_NCCL_EXPORT_H
#define CG_PLUGIN_NCCL_EXPORT_H

#define CG_NCCL_EXPORT __attribute__((visibility("default")))

#endif
