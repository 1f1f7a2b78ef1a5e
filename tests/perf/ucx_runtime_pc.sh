#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# For a host with UCX's runtime libraries but no headers (the H200 machine):
# makes DIR/lib/pkgconfig/ucx.pc over the host's libuc{p,t,s,m}.so.0 and the
# headers in DIR/include (copy /usr/include/{ucp,uct,ucs,ucm} there from a
# machine with libucx-dev; UCX keeps its ABI backward compatible), and prints
# the directory to put in PKG_CONFIG_PATH.
# usage: PKG_CONFIG_PATH=$(tests/perf/ucx_runtime_pc.sh DIR) cmake -S . -B build-ucx ...
set -eu
d=$(cd "${1:?usage: $0 DIR (with DIR/include/ucp)}" && pwd)
[ -f "$d/include/ucp/api/ucp.h" ] || { echo "$0: no $d/include/ucp/api/ucp.h" >&2; exit 1; }
mkdir -p "$d/lib/pkgconfig"
for l in ucp uct ucs ucm; do
    so=$(ls /usr/lib/x86_64-linux-gnu/lib$l.so.0 /usr/lib64/lib$l.so.0 2>/dev/null | head -1)
    [ -n "$so" ] || { echo "$0: no lib$l.so.0 runtime" >&2; exit 1; }
    ln -sf "$so" "$d/lib/lib$l.so"
done
cat >"$d/lib/pkgconfig/ucx.pc" <<PC
prefix=$d
includedir=\${prefix}/include
libdir=\${prefix}/lib
Name: ucx
Description: UCX headers over this host's runtime libraries
Version: 1.13.1
Cflags: -I\${includedir}
Libs: -L\${libdir} -lucp -luct -lucs -lucm
PC
echo "$d/lib/pkgconfig"
