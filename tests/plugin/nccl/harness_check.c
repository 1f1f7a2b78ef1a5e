/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The soft checks' state of one harness program (harness_check.h): linked
 * into each, so that every file of a program that is split in several
 * marks the same run failed and names the same role.
 */
#include "harness_check.h"

int g_fail;
const char *g_who = "?";
