#!/usr/bin/env bash
# .ci/check-layers must fail where it should: a tree with an upward include
# (coll including the engine), an include circle (two governor units
# including each other) and a root file it does not place, each named in
# its output, and the naming rule's three checks; and the same tree
# without them must pass.
set -euo pipefail
script=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/core/coll" "$t/core/engine" "$t/core/governor" "$t/core/backend"
echo '#include "core/engine/hvd_core.h"' >"$t/core/coll/comm.c"
echo '/* engine */' >"$t/core/engine/hvd_core.h"
echo '#include "core/governor/b.h"' >"$t/core/governor/a.h"
echo '#include "core/governor/a.h"' >"$t/core/governor/b.h"
echo '/* unplaced */' >"$t/core/stray.c"
echo 'void cg__hidden(void);' >"$t/core/engine/hvd_queue.h"
echo 'typedef struct cg_thing cg_thing_t;' >"$t/core/engine/hvd_queue_impl.h"
echo '#include "core/engine/hvd_queue_impl.h"' >"$t/core/backend/hvd_gpu.c"
if out=$(CG_LAYERS_ROOT=$t python3 "$script" 2>&1); then
  echo "FAIL: check-layers passed a tree with violations:"; echo "$out"; exit 1
fi
for want in "core/coll/comm.c (core/coll) includes core/engine/hvd_core.h" \
            "include circle between core/governor/a, core/governor/b" \
            "core/stray.c: a file at core/'s root" \
            "core/engine/hvd_queue.h names cg__hidden" \
            "core/engine/hvd_queue_impl.h declares cg_thing_t" \
            "core/backend/hvd_gpu.c includes core/engine/hvd_queue_impl.h, another folder's private header"; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: no '$want' in:"; echo "$out"; exit 1; }
done
echo '/* fixed */' >"$t/core/coll/comm.c"
echo '/* fixed */' >"$t/core/governor/b.h"
rm "$t/core/stray.c" "$t/core/backend/hvd_gpu.c"
echo 'void cg_hvd_queue_fn(void);' >"$t/core/engine/hvd_queue.h"
echo 'typedef struct cg__thing cg__thing_t;' >"$t/core/engine/hvd_queue_impl.h"
CG_LAYERS_ROOT=$t python3 "$script"
echo "check-layers self-test ok"
