#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's install and quick start, run as written, on a clean HOME
# and a bare environment (no COLLGUARD_LIB, no PYTHONPATH):
#   wheel    `pip wheel` of the source tree into a fresh virtual
#            environment: the package imports from outside the tree, the
#            console scripts start, the NCCL plugins load with their
#            symbols; then the README's blocks marked `<!-- run:
#            quickstart -->` (venv, `pip install .`, the quick starts).
#   horovod  the README's blocks marked `<!-- run: horovod-build -->`
#            (Horovod 0.28.1 from PyPI's sdist into that venv) and
#            `<!-- run: horovod -->` (collguard under horovod.torch and
#            back): Horovod's own module is set aside and restored bit for
#            bit, and a training script on `import horovod.torch` runs on
#            collguard's library in between. Exits 77 (skipped, saying
#            why) where this machine cannot build Horovod.
# The README's apt-get lines are not run; their packages must be in
# .ci/deps, which CI installs.
# usage: quickstart.sh wheel|horovod SOURCE_DIR OUT_DIR
set -euo pipefail
part=$1 src=$(cd "$2" && pwd) out=$3
readme=$src/README.md
py=/usr/bin/python3
home=$out/home
venv=$home/.venvs/collguard # where the README's commands put it

# The fenced blocks of the README that follow a "<!-- run: TAG -->" line.
blocks() {
    awk -v mark="<!-- run: $1 -->" '
        $0 == mark { want = 1; next }
        want && /^```/ { want = 0; inside = 1; next }
        inside && /^```/ { inside = 0; print ""; next }
        inside { print }' "$readme"
}

# Runs the README's blocks of a tag as one script, in the source tree, in
# an environment with nothing of a build tree in it.
# PRELUDE: what the reader's shell already did (the venv activated).
run_blocks() {
    local tag=$1 prelude=${2:-} script
    script=$(blocks "$tag" | grep -vE '^(sudo )?apt-get ' || true)
    [ -n "$script" ] || { echo "FAIL: README.md has no '<!-- run: $tag -->' block"; exit 1; }
    script="$prelude
$script"
    printf '== the README'\''s %s commands ==\n%s\n== output ==\n' "$tag" "$script"
    (cd "$src" && env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin \
        LANG=C.UTF-8 TERM=dumb \
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        OMPI_MCA_rmaps_base_oversubscribe=1 \
        bash -euo pipefail -c "$script") 2>&1 | tee "$out/$tag.log"
}

# The README's apt-get packages are ones .ci/deps installs.
check_apt() {
    local pkg missing=""
    for pkg in $(blocks "$1" | grep -E '^(sudo )?apt-get install' |
                 tr ' ' '\n' | grep -vE '^(sudo|apt-get|install|-.*|\\)?$'); do
        grep -qw -- "$pkg" "$src/.ci/deps" || missing+=" $pkg"
    done
    [ -z "$missing" ] || { echo "FAIL: README apt-get packages not in .ci/deps:$missing"; exit 1; }
}

# In the venv, from outside the source tree.
vpy() { (cd "$out" && env -i HOME="$home" PATH="$venv/bin:/usr/bin:/bin" "$venv/bin/python" "$@"); }

expect() { # expect FILE PATTERN WHAT
    grep -qE -- "$2" "$1" || { echo "FAIL: $3 (no '$2' in $1)"; exit 1; }
    echo "ok: $3"
}

case $part in
wheel)
    rm -rf "$out"
    mkdir -p "$home"
    t0=$(date +%s)
    echo "== pip wheel $src =="
    "$py" -m pip wheel "$src" --no-deps -w "$out/dist" >"$out/wheel.log" 2>&1 ||
        { tail -n 40 "$out/wheel.log"; echo "FAIL: pip wheel"; exit 1; }
    whl=$(ls "$out"/dist/collguard-*.whl)
    echo "built $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB) in $(( $(date +%s) - t0 )) s"
    "$py" -m zipfile -l "$whl" >"$out/wheel.files" # (grep -q on a pipe: SIGPIPE)
    for f in collguard/mpi_lib_v2 collguard/lib/libcollguard.so \
             collguard/lib/libcollguard_hvd.so \
             collguard/lib/libnccl-net-collguard.so \
             collguard/lib/libnccl-tuner-collguard.so collguard/bin/collguard-run \
             collguard/bin/collguard-info collguard/bin/cg_allreduce_perf \
             collguard/torch/__init__.py collguard/horovod.py; do
        grep -q "^$f" "$out/wheel.files" ||
            { echo "FAIL: the wheel lacks $f"; exit 1; }
    done
    echo "ok: the wheel holds the module, the libraries, both plugins, the commands"

    echo "== the wheel in a fresh venv =="
    wv=$out/venv-wheel
    "$py" -m venv --system-site-packages "$wv"
    "$wv/bin/pip" install -q --no-deps "$whl"
    (cd "$out" && env -i HOME="$home" PATH="$wv/bin:/usr/bin:/bin" "$wv/bin/python" - "$wv" <<'PY'
import ctypes, os, subprocess, sys
import collguard.torch as hvd
venv = sys.argv[1]
assert hvd.__file__.startswith(venv), hvd.__file__
folder = subprocess.check_output(["collguard-info", "--plugin-path"], text=True).strip()
assert folder.startswith(venv) and os.path.isdir(folder), folder
for which, sym in (("net", "ncclNetPlugin_v11"), ("tuner", "ncclTunerPlugin_v5")):
    path = subprocess.check_output(["collguard-info", "--plugin-path", which], text=True).strip()
    assert os.path.dirname(path) == folder, path
    getattr(ctypes.CDLL(path), sym)  # AttributeError if it lacks the table
print("ok: collguard.torch imports from the venv; the plugins at", folder,
      "load with ncclNetPlugin_v11 and ncclTunerPlugin_v5")
PY
    )
    env -i PATH="$wv/bin:/usr/bin:/bin" collguard-run -np 2 cg_allreduce_perf \
        -b 1K -e 64K -f 8 -c 1 -n 2 -w 1 >"$out/perf.log" 2>&1 ||
        { cat "$out/perf.log"; echo "FAIL: cg_allreduce_perf from the venv"; exit 1; }
    expect "$out/perf.log" '# Out of bounds values : 0' \
        "cg_allreduce_perf through the console script, every value checked"
    echo "wheel stage: $(( $(date +%s) - t0 )) s"

    check_apt quickstart
    run_blocks quickstart
    expect "$out/quickstart.log" 'collguard.torch on collguard.s library: 2 ranks.*identical on every rank' \
        "examples/train_torch.py on 2 ranks: parameters identical"
    vpy -c 'import collguard.torch, collguard, sys; assert "site-packages" in collguard.__file__, collguard.__file__'
    echo "ok: pip install . put collguard in the venv's site-packages"
    echo "quick start passed in $(( $(date +%s) - t0 )) s"
    ;;
horovod)
    [ -x "$venv/bin/python" ] || { echo "FAIL: no venv at $venv (the wheel part runs first)"; exit 1; }
    why=""
    [ -f /usr/include/torch/extension.h ] || why+=" no torch C++ headers (libtorch-dev);"
    [ -f /usr/include/pybind11/pybind11.h ] || why+=" no pybind11 headers (pybind11-dev);"
    command -v mpicxx >/dev/null || why+=" no mpicxx (libopenmpi-dev);"
    vpy -c 'import cloudpickle, psutil, yaml' 2>/dev/null || why+=" no cloudpickle/psutil/yaml;"
    if [ -z "$why" ] && ! timeout 60 "$py" -m pip download -q --no-deps --no-binary :all: \
            horovod==0.28.1 -d "$out/sdist" >/dev/null 2>&1; then
        why+=" PyPI's horovod 0.28.1 sdist cannot be fetched;"
    fi
    if [ -n "$why" ]; then
        echo "SKIPPED: Horovod 0.28.1 cannot be built here:$why"
        exit 77
    fi
    t0=$(date +%s)
    check_apt horovod-build
    run_blocks horovod-build ". $venv/bin/activate" >/dev/null 2>&1 ||
        { tail -n 40 "$out/horovod-build.log"; echo "FAIL: Horovod's build as the README gives it"; exit 1; }
    echo "Horovod 0.28.1 built into the venv in $(( $(date +%s) - t0 )) s"
    mod=$(vpy -c 'import importlib.machinery as m, os, sysconfig
s = m.PathFinder.find_spec("horovod")
print(os.path.join(list(s.submodule_search_locations)[0], "torch", "mpi_lib_v2" + sysconfig.get_config_var("EXT_SUFFIX")))')
    before=$(sha256sum "$mod" | cut -d' ' -f1)
    (cd "$src" && env -i HOME="$home" PATH="$venv/bin:/usr/bin:/bin" \
        python examples/train_torch.py --horovod) >"$out/horovod-own.log" 2>&1
    expect "$out/horovod-own.log" "horovod.torch on horovod's library: 1 ranks" \
        "before: horovod.torch runs Horovod's own module"
    run_blocks horovod ". $venv/bin/activate"
    expect "$out/horovod.log" "installed in .*horovod/torch" "python -m collguard.horovod install"
    expect "$out/horovod.log" "runs collguard" "python -m collguard.horovod status names collguard"
    expect "$out/horovod.log" "horovod.torch on collguard.s library: 2 ranks.*identical on every rank" \
        "Horovod's own horovod.torch trains on collguard's library, 2 ranks"
    expect "$out/horovod.log" "Horovod's module restored" "python -m collguard.horovod uninstall"
    [ "$(sha256sum "$mod" | cut -d' ' -f1)" = "$before" ] ||
        { echo "FAIL: Horovod's module differs after uninstall"; exit 1; }
    (cd "$src" && env -i HOME="$home" PATH="$venv/bin:/usr/bin:/bin" \
        python examples/train_torch.py --horovod) >"$out/horovod-after.log" 2>&1
    expect "$out/horovod-after.log" "horovod.torch on horovod's library: 1 ranks" \
        "after: Horovod's own module, bit for bit, runs horovod.torch again"
    echo "Horovod on collguard passed in $(( $(date +%s) - t0 )) s"
    ;;
*)
    echo "usage: quickstart.sh wheel|horovod SOURCE_DIR OUT_DIR" >&2
    exit 2
    ;;
esac
