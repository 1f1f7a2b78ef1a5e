/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-info --estimate: the command line of the memory estimate
 * (include/collguard/estimate.h). Layer: plugin (a command).
 */
#ifndef CG_PLUGIN_INFO_ESTIMATE_H
#define CG_PLUGIN_INFO_ESTIMATE_H

/* argv: the arguments after --estimate. Returns the exit status: 0, 1
 * when the device cannot be probed, 2 for bad arguments. */
int cg_info_estimate(int argc, char **argv);

#endif
