#!/usr/bin/env bash
# .ci/check-layers must fail where it should: a tree with an upward include
# (coll including the engine), an include circle (two governor units
# including each other), an include circle inside plugin/nccl/, a call
# circle between two files of transport/ (read from objects compiled into
# a scratch build tree), a root file it does not place (core/config.c, whose
# layer is the folder core/config now), and core/config, the lowest layer
# of core/, including the governor above it, each named in its output, and the naming rule's three checks; the same tree without
# them must pass; and a circle of its KNOWN_CIRCLES list that is gone fails.
set -euo pipefail
script=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/core/coll" "$t/core/engine" "$t/core/governor" "$t/core/backend"
mkdir -p "$t/core/config"
mkdir -p "$t/plugin/nccl" "$t/transport" "$t/build/transport/CMakeFiles/t.dir"
cc=${CC:-cc}
obj() { "$cc" -c "$t/transport/$1.c" -o "$t/build/transport/CMakeFiles/t.dir/$1.c.o"; }
echo '#include "core/engine/hvd_core.h"' >"$t/core/coll/comm.c"
echo '/* engine */' >"$t/core/engine/hvd_core.h"
echo '#include "core/governor/b.h"' >"$t/core/governor/a.h"
echo '#include "core/governor/a.h"' >"$t/core/governor/b.h"
echo '/* unplaced */' >"$t/core/stray.c"
echo '/* config, at its old place */' >"$t/core/config.c"
echo '/* governor */' >"$t/core/governor/governor.h"
echo '#include "core/governor/governor.h"' >"$t/core/config/config_x.c"
echo '#include "core/governor/governor.h"' >"$t/core/context.c"
echo 'void cg__hidden(void);' >"$t/core/engine/hvd_queue.h"
echo 'typedef struct cg_thing cg_thing_t;' >"$t/core/engine/hvd_queue_impl.h"
echo '#include "core/engine/hvd_queue_impl.h"' >"$t/core/backend/hvd_gpu.c"
echo '#include "plugin/nccl/np_q.h"' >"$t/plugin/nccl/np_p.h"
echo '#include "plugin/nccl/np_p.h"' >"$t/plugin/nccl/np_q.h"
printf 'void cg__tb(void);\nvoid cg__ta(void) { cg__tb(); }\n' >"$t/transport/ta.c"
printf 'void cg__ta(void);\nvoid cg__tb(void) { cg__ta(); }\n' >"$t/transport/tb.c"
obj ta; obj tb
if out=$(CG_LAYERS_ROOT=$t python3 "$script" "$t/build" 2>&1); then
  echo "FAIL: check-layers passed a tree with violations:"; echo "$out"; exit 1
fi
for want in "core/coll/comm.c (core/coll) includes core/engine/hvd_core.h" \
            "include circle between core/governor/a, core/governor/b" \
            "core/stray.c: a file at core/'s root" \
            "core/config.c: a file at core/'s root" \
            "core/config/config_x.c (core/config) includes core/governor/governor.h (core/governor)" \
            "core/engine/hvd_queue.h names cg__hidden" \
            "core/engine/hvd_queue_impl.h declares cg_thing_t" \
            "core/backend/hvd_gpu.c includes core/engine/hvd_queue_impl.h, another folder's private header" \
            "include circle between plugin/nccl/np_p, plugin/nccl/np_q" \
            "call circle between transport/ta, transport/tb" \
            "transport/ta calls cg__tb in transport/tb" \
            "transport/tb calls cg__ta in transport/ta"; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: no '$want' in:"; echo "$out"; exit 1; }
done
echo '/* fixed */' >"$t/core/coll/comm.c"
echo '/* fixed */' >"$t/core/governor/b.h"
rm "$t/core/stray.c" "$t/core/config.c" "$t/core/backend/hvd_gpu.c"
echo '/* fixed */' >"$t/core/config/config_x.c"
echo 'void cg_hvd_queue_fn(void);' >"$t/core/engine/hvd_queue.h"
echo 'typedef struct cg__thing cg__thing_t;' >"$t/core/engine/hvd_queue_impl.h"
echo '/* fixed */' >"$t/plugin/nccl/np_q.h"
printf 'void cg__tb(void) { }\n' >"$t/transport/tb.c"
obj tb
CG_LAYERS_ROOT=$t python3 "$script" "$t/build"
# A circle of KNOWN_CIRCLES whose files are all built but call nothing of
# each other fails too: the list only shrinks. Once the list is empty, a
# copy of the script that lists a circle of its own is checked instead.
if ! python3 - "$script" <<'EOF'
import sys, types
m = types.ModuleType("cl"); m.__file__ = sys.argv[1]
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), m.__dict__)
sys.exit(0 if any(k == "call" for k, _ in m.KNOWN_CIRCLES) else 1)
EOF
then
  sed 's|^KNOWN_CIRCLES = \[$|KNOWN_CIRCLES = [("call", ("transport/ka", "transport/kb")),|' \
    "$script" >"$t/check-layers"
  grep -qF '("call", ("transport/ka", "transport/kb"))' "$t/check-layers" ||
    { echo "FAIL: could not plant a circle in a copy of $script"; exit 1; }
  script=$t/check-layers
fi
known=$(python3 - "$script" <<'EOF'
import sys, types
m = types.ModuleType("cl"); m.__file__ = sys.argv[1]
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), m.__dict__)
print(" ".join(next((u for k, u in m.KNOWN_CIRCLES if k == "call"), ())))
EOF
)
if [ -n "$known" ]; then
  for u in $known; do
    d=$(dirname "$u") b=$(basename "$u")
    mkdir -p "$t/$d" "$t/build/$d/CMakeFiles/k.dir"
    echo "void cg__k_$b(void) { }" >"$t/$u.c"
    "$cc" -c "$t/$u.c" -o "$t/build/$d/CMakeFiles/k.dir/$b.c.o"
  done
  if out=$(CG_LAYERS_ROOT=$t python3 "$script" "$t/build" 2>&1); then
    echo "FAIL: check-layers passed a listed circle that is gone:"; echo "$out"; exit 1
  fi
  grep -qF "is listed in KNOWN_CIRCLES but no longer exists" <<<"$out" ||
    { echo "FAIL: a listed circle that is gone not named in:"; echo "$out"; exit 1; }
fi
echo "check-layers self-test ok"
