#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What `cmake --install` ships, and that CRIU finds the plugin there.

    check_install.py --build DIR --work DIR files
    check_install.py --build DIR --work DIR criu --criu-list LIST --criu-version V --bins DIR

Both first run `cmake --install DIR --prefix /usr --strip` into the DESTDIR
WORK/dest (the form README tells users to install).

  files  the tree holds exactly INSTALLED below, no more; the plugin has no
         debug sections left and exports nothing but CR_PLUGIN_DESC.
  criu   real CRIU loads the plugin from WORK/dest/usr/lib/criu given as its
         --libdir (what /usr/lib/criu is on a real system): a GPU-less
         counter is dumped and restored, CRIU logs the plugin with its hook
         count, and neither run fails or logs a plugin error.

Exit 0 pass, 1 fail, 77 NOT RUN (criu: no usable CRIU here).
"""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "realcriu"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import harness  # noqa: E402
import realcriu as rc  # noqa: E402
from harness import Failed, log  # noqa: E402

# Everything a package built from this tree contains (paths under the prefix).
INSTALLED = [
    "bin/amdgpu-img",
    "lib/criu/amdgpu_plugin.so",
    "share/amdgpu-img/amdgpu-img-show.schema.json",
    "share/man/man1/amdgpu-img.1",
    "share/man/man1/criu-amdgpu-plugin.1",
]
PREFIX = "/usr"
PLUGIN = "lib/criu/amdgpu_plugin.so"


def install(build, work):
    dest = os.path.join(work, "dest")
    shutil.rmtree(dest, ignore_errors=True)
    env = dict(os.environ, DESTDIR=dest)
    r = subprocess.run(["cmake", "--install", build, "--prefix", PREFIX, "--strip"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed("cmake --install failed:\n" + r.stdout + r.stderr)
    return os.path.join(dest, PREFIX.lstrip("/"))


def case_files(root):
    found = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, files in os.walk(root) for f in files)
    if found != sorted(INSTALLED):
        missing = sorted(set(INSTALLED) - set(found))
        extra = sorted(set(found) - set(INSTALLED))
        raise Failed(f"installed tree differs: missing {missing}, unexpected {extra}")
    log(f"installed exactly: {', '.join(found)}")
    so = os.path.join(root, PLUGIN)
    sections = subprocess.run(["readelf", "-SW", so], capture_output=True, text=True, check=True).stdout
    debug = sorted({w for w in sections.split() if w.startswith(".debug")})
    if debug:
        raise Failed(f"{PLUGIN} is installed with debug sections {debug} (--strip did not strip it)")
    syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                          check=True).stdout.split()
    exported = sorted(s for s in syms[2::3])
    if exported != ["CR_PLUGIN_DESC"]:
        raise Failed(f"{PLUGIN} exports {exported}, expected only CR_PLUGIN_DESC")
    log(f"{PLUGIN}: {os.path.getsize(so)} bytes, no debug sections, exports only CR_PLUGIN_DESC")


def case_criu(root, a, work):
    criu = rc.find_criu(a.criu_list, a.criu_version)
    rc.require_usable(criu)
    hooks = rc.criu_hook_count(criu)
    harness.become_subreaper()
    libdir = os.path.dirname(os.path.join(root, PLUGIN))
    pid, _ = rc.start_counter(os.path.join(a.bins, "realcriu-counter"), work)
    c = rc.Criu(criu, libdir, work)
    try:
        d = c.dump(pid, os.path.join(work, "images"))
    finally:
        rc.end_process(pid)
    lines = [l for l in rc.plugin_lines(d.log) if l[0] == "amdgpu_plugin"]
    if lines != [("amdgpu_plugin", 512, hooks)]:
        raise Failed(f"CRIU did not load the installed plugin as expected: {lines}\n{d.describe()}")
    if not d.ok():
        raise Failed(f"dump with the installed plugin failed\n{d.describe()}")
    r = c.restore(os.path.join(work, "images"), os.path.join(work, "restored.pid"))
    if not r.ok():
        raise Failed(f"restore with the installed plugin failed\n{r.describe()}")
    pid = int(open(os.path.join(work, "restored.pid")).read())
    try:
        problems = rc.log_problems(d.log + r.log, ["amdgpu_plugin"])
        if problems:
            raise Failed("CRIU's log:\n  " + "\n  ".join(problems))
    finally:
        rc.end_process(pid)
    log(f"criu {a.criu_version} loaded {libdir}/amdgpu_plugin.so (hooks {hooks}); dump and restore passed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--criu-list")
    ap.add_argument("--criu-version")
    ap.add_argument("--bins")
    ap.add_argument("case", choices=["files", "criu"])
    a = ap.parse_args()
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    root = install(a.build, work)
    if a.case == "files":
        case_files(root)
    else:
        case_criu(root, a, work)
    return 0


if __name__ == "__main__":
    harness.main_guard(main)
