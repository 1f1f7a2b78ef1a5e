/* SPDX-License-Identifier: Apache-2.0 */
/* collguard-info's CUDA section (info_cuda.c). Layer: plugin. */
#ifndef CG_PLUGIN_CLI_INFO_CUDA_H
#define CG_PLUGIN_CLI_INFO_CUDA_H

/* Prints the CUDA and NCCL lines under "devices:". */
void cg_info_cuda(void);

#endif
