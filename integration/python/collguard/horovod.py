# SPDX-License-Identifier: Apache-2.0
"""Runs Horovod's own ``horovod.torch`` on collguard:

    python -m collguard.horovod install     # collguard's mpi_lib_v2 in place
    python -m collguard.horovod status      # which one horovod.torch loads
    python -m collguard.horovod uninstall   # Horovod's own back

``install`` sets Horovod's module (``horovod/torch/mpi_lib_v2<EXT>``) aside
under the name ``<file>.horovod`` and copies collguard's module and
``libcollguard_hvd.so`` (which the module finds beside itself) in its
place; a manifest beside them (``collguard-install.json``) records the
files and their digests. ``uninstall`` removes exactly those files, if
unchanged, and restores Horovod's. ``HOROVOD_GPU_OPERATIONS`` and the other
``HOROVOD_*`` settings keep working: collguard reads them.

Horovod is found on ``sys.path`` without being imported (importing
horovod.torch would load the module this command replaces); ``--horovod
DIR`` names the folder holding horovod/ (or horovod/ itself) instead."""
import argparse
import ctypes
import hashlib
import importlib.machinery
import json
import os
import shutil
import sys
import sysconfig

MANIFEST = "collguard-install.json"
ASIDE = ".horovod"
_HERE = os.path.dirname(os.path.abspath(__file__))


class Refused(Exception):
    """A step that cannot be taken; its text says why and what to do."""


def _ext():
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def torch_dir(where=None):
    """horovod/torch/ of the Horovod to change."""
    if where:
        base = os.path.abspath(where)
        if os.path.basename(base) != "horovod":
            base = os.path.join(base, "horovod")
        if not os.path.isfile(os.path.join(base, "__init__.py")):
            raise Refused("--horovod %s: no Horovod package at %s"
                          % (where, base))
    else:
        spec = importlib.machinery.PathFinder.find_spec("horovod")
        if spec is None or not spec.submodule_search_locations:
            raise Refused(
                "Horovod is not installed for %s (no horovod package on "
                "sys.path); install it (pip install horovod, built with "
                "HOROVOD_WITH_PYTORCH=1) or name it with --horovod DIR"
                % sys.executable)
        base = list(spec.submodule_search_locations)[0]
    tdir = os.path.join(base, "torch")
    if not os.path.isfile(os.path.join(tdir, "__init__.py")):
        raise Refused("%s has no torch/ package: this Horovod was built "
                      "without PyTorch (HOROVOD_WITH_PYTORCH=1)" % base)
    return tdir


class _LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


def _loaded_path(handle):
    """The file the dynamic linker loaded for a dlopen handle."""
    lm = ctypes.POINTER(_LinkMap)()
    if ctypes.CDLL(None).dlinfo(ctypes.c_void_p(handle), 2,  # LINKMAP
                                ctypes.byref(lm)) != 0:
        raise Refused("dlinfo failed on libcollguard_hvd.so")
    return os.fsdecode(lm.contents.l_name)


def ours():
    """collguard's module (the one collguard.torch loads: see
    collguard/_native.py) and the libcollguard_hvd.so it links, found as
    the dynamic linker finds it, so any install layout works."""
    try:
        from collguard import _native
        module = _native.PATH
    except ImportError as e:
        raise Refused(str(e))
    try:
        ctypes.CDLL(module, mode=ctypes.RTLD_LOCAL)
        lib = ctypes.CDLL("libcollguard_hvd.so", mode=os.RTLD_NOLOAD)
    except OSError as e:
        raise Refused("%s does not load: %s" % (module, e))
    return [module, _loaded_path(lib._handle)]


def read_manifest(tdir):
    path = os.path.join(tdir, MANIFEST)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def install(tdir):
    """Sets Horovod's module aside (once) and copies collguard's in; a
    failure part way puts Horovod's back."""
    from collguard import __version__
    sources = ours()  # before anything changes
    target = os.path.join(tdir, "mpi_lib_v2" + _ext())
    aside = target + ASIDE
    first = read_manifest(tdir) is None
    if first:
        if not os.path.isfile(target):
            raise Refused(
                "%s is missing: this horovod.torch has no module of its "
                "own to set aside (a broken or partial Horovod install?)"
                % target)
        if os.path.exists(aside):
            raise Refused(
                "%s already exists but no %s does: left from another tool; "
                "move it away and run install again" % (aside, MANIFEST))
        os.replace(target, aside)
    try:
        files = {}
        for src in sources:
            dst = os.path.join(tdir, os.path.basename(src))
            shutil.copy2(src, dst + ".collguard-tmp")
            os.replace(dst + ".collguard-tmp", dst)
            files[os.path.basename(src)] = _digest(dst)
        tmp = os.path.join(tdir, MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"collguard": __version__, "source": _HERE,
                       "files": files, "aside": os.path.basename(aside)},
                      f, indent=1)
        os.replace(tmp, os.path.join(tdir, MANIFEST))
    except BaseException:
        if first:
            for src in sources:
                dst = os.path.join(tdir, os.path.basename(src))
                if os.path.exists(dst) and dst != target:
                    os.remove(dst)
            os.replace(aside, target)
        raise
    print("collguard %s installed in %s (Horovod's module kept as %s)"
          % (__version__, tdir, os.path.basename(aside)))


def uninstall(tdir, force=False):
    manifest = read_manifest(tdir)
    if manifest is None:
        raise Refused("collguard is not installed in %s (no %s)"
                      % (tdir, MANIFEST))
    aside = os.path.join(tdir, manifest["aside"])
    if not os.path.isfile(aside):
        raise Refused("Horovod's own module %s is gone: reinstall Horovod "
                      "(pip install --force-reinstall horovod)" % aside)
    for name, digest in manifest["files"].items():
        path = os.path.join(tdir, name)
        if os.path.exists(path) and _digest(path) != digest and not force:
            raise Refused("%s changed since collguard installed it; "
                          "uninstall --force removes it anyway" % path)
    for name in manifest["files"]:
        path = os.path.join(tdir, name)
        if os.path.exists(path):
            os.remove(path)
    os.replace(aside, aside[:-len(ASIDE)])
    os.remove(os.path.join(tdir, MANIFEST))
    print("collguard removed from %s; Horovod's module restored" % tdir)


def status(tdir):
    """0: collguard installed and intact; 1: Horovod's own; 3: changed."""
    manifest = read_manifest(tdir)
    if manifest is None:
        print("horovod.torch in %s runs Horovod's own module" % tdir)
        return 1
    changed = [n for n, d in manifest["files"].items()
               if not os.path.exists(os.path.join(tdir, n))
               or _digest(os.path.join(tdir, n)) != d]
    print("horovod.torch in %s runs collguard %s (from %s); Horovod's "
          "module is kept as %s%s"
          % (tdir, manifest["collguard"], manifest["source"],
             manifest["aside"],
             "; changed since: " + ", ".join(changed) if changed else ""))
    return 3 if changed else 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m collguard.horovod",
        description="Run Horovod's own horovod.torch on collguard's "
                    "mpi_lib_v2, or restore Horovod's.")
    ap.add_argument("action", choices=("install", "uninstall", "status"))
    ap.add_argument("--horovod", metavar="DIR",
                    help="folder holding the horovod package (default: "
                         "the one on sys.path)")
    ap.add_argument("--force", action="store_true",
                    help="uninstall: remove collguard's files even if "
                         "they changed")
    args = ap.parse_args(argv)
    try:
        tdir = torch_dir(args.horovod)
        if args.action == "install":
            install(tdir)
        elif args.action == "uninstall":
            uninstall(tdir, args.force)
        else:
            return status(tdir)
    except Refused as e:
        sys.stderr.write("collguard.horovod: %s\n" % e)
        return 2
    except OSError as e:
        sys.stderr.write("collguard.horovod: %s: %s\n"
                         % (e.filename or "", e.strerror or e))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
