#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Render-node buffer objects under the CRIU stand-in (criu-host).

    render_e2e.py --bin-dir BUILD SCENARIO     (CTest e2e_render_*)

Each scenario runs inside `kfd-emu --machine MI100` a process with a render
node and no /dev/kfd (kfdemu_criu_workload --render: GEM BOs in GTT and
VRAM, one CPU-invisible and filled by SDMA, one at two GPU VAs, CPU
mappings), dumps it with criu-host and the plugin, and checks:

roundtrip  the images: amdgpu-renderD-<id>.img and one amdgpu-drm-pages
           file per BO holding exactly the workload's pattern (the
           CPU-invisible VRAM BO's too, whose bytes exist only on the GPU);
           the dumped process runs on and passes its own checks; the
           restore (criu-host + render_verify.so in the restored task): the
           render fd holds the BOs under their checkpointed handles, mapped
           at their GPU VAs, their contents readable through the CPU
           mappings UPDATE_VMA_MAP moved.
bounded    the same with KFD_MAX_BUFFER_SIZE=64K (the 3 MiB BO goes in many
           passes): the emulator's count of the dumping process's
           registered (userptr) memory and the plugin's peak staging
           figures of dump and restore are within 64 KiB.
two_files  the same with a second open file of the render node holding a
           BO of its own (--second-file: handle 1 in both files, the same
           GPU VA in each file's VM): two render images, and in the
           restored task two distinct open files, each with exactly its own
           handles, VAs and contents (not one file under two fds).
old_kernel GEM_LIST_HANDLES fails with EINVAL (a kernel without it): the
           dump fails naming the ioctl and the kernel that added it, writes
           no render image, and the process runs on and passes its checks.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import criu_host  # noqa: E402
import harness  # noqa: E402
from harness import check  # noqa: E402
from testcommon import pattern  # noqa: E402

BOUND = 64 << 10


class Bins(criu_host.Bins):
    def __init__(self, d):
        super().__init__(d)
        self.workload = os.path.join(d, "tests/emulator/kfdemu_criu_workload")
        self.verify = os.path.join(d, "tests/e2e/librender_verify.so")


def staging(bins, text, pid, what):
    """The staging peak of one run of the host within BOUND: the plugin's
    own figure, and with `pid` the emulator's count of the memory that
    process registered (userptr). (A restore copies in the restored task,
    a process of its own: there only the plugin's figure.)"""
    peaks = [int(x) for x in re.findall(r"peak staging (\d+) bytes", text)]
    check(peaks, "%s: no staging summary line from the plugin" % what)
    check(max(peaks) <= BOUND, "%s: staging peak %d > %d" % (what, max(peaks), BOUND))
    if pid is None:
        return max(peaks)
    up = ctl(bins, "userptr", str(pid))
    check(0 < up["peak"] <= BOUND, "%s: the emulator counts a staging peak of %d, bound %d" % (what, up["peak"], BOUND))
    return up["peak"]


def ctl(bins, *q):
    out = subprocess.run([bins.emu, "ctl", *q], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "kfd-emu ctl %s: %s" % (" ".join(q), out.stderr))
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else out.stdout


def start(bins, work, second=False):
    p = subprocess.Popen([bins.workload, "--render"] + (["--second-file"] if second else []) + [work],
                         stdout=open(os.path.join(work, "wl.log"), "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(work, "ready")):
        check(p.poll() is None, "workload exited (%s) before it was ready" % p.returncode)
        check(time.time() < deadline, "workload not ready after 60 s")
        time.sleep(0.05)
    gems, files = [], 0
    for line in open(os.path.join(work, "render")):
        f = line.split()
        if f[0] == "fd":
            files += 1
        elif f[0] == "gem":
            gems.append({"file": files, "handle": int(f[1]), "cpu": int(f[2]), "size": int(f[3]),
                         "seed": int(f[4])})
    return p, gems, files


def verdict(p, work):
    open(os.path.join(work, "go"), "w").close()
    p.wait(timeout=60)
    v = open(os.path.join(work, "result")).read().strip()
    check(p.returncode == 0 and v == "OK", "the dumped process after the dump: %s" % v)


def inner(bins, scenario, work):
    images = os.path.join(work, "images")
    os.makedirs(images)
    env = {"KFD_MAX_BUFFER_SIZE": str(BOUND)} if scenario == "bounded" else {}
    p, gems, files = start(bins, work, scenario == "two_files")
    try:
        if scenario == "old_kernel":
            ctl(bins, "faults", "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES:errno=EINVAL")
        rc, text, hostpid = criu_host.run(bins, ["dump", "-t", str(p.pid), "-D", images, "--plugin", bins.plugin], env,
                           os.path.join(work, "dump.log"))
        if scenario == "old_kernel":
            ctl(bins, "faults", "")
            check(rc != 0, "the dump succeeded on a kernel without GEM_LIST_HANDLES")
            errs = [l for l in text.splitlines() if "amdgpu_plugin:" in l and "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES" in l]
            check(errs and "Linux 6.18" in errs[0], "no error naming the ioctl and Linux 6.18:\n" + text[-3000:])
            left = [n for n in os.listdir(images) if n.startswith("amdgpu-")]
            check(not left, "images left by the failed dump: %s" % left)
            print("old kernel: dump refused: " + errs[0].split("amdgpu_plugin:", 1)[1].strip()[:200])
            verdict(p, work)
            return
        check(rc == 0, "dump failed (%d):\n%s" % (rc, text[-3000:]))
        if scenario == "bounded":
            dpeak = staging(bins, text, hostpid, "dump")
        names = sorted(os.listdir(images))
        renders = [n for n in names if n.startswith("amdgpu-renderD-")]
        check(len(renders) == files, "%d render images for %d open files: %s" % (len(renders), files, names))
        pages = [n for n in names if n.startswith("amdgpu-drm-pages-")]
        # One file per BO (the second VA of one BO is not a BO).
        bos = {(g["file"], g["handle"]): g for g in gems}
        check(len(pages) == len(bos), "%d drm-pages files for %d BOs: %s" % (len(pages), len(bos), names))
        unmatched = dict(bos)
        for n in pages:
            data = open(os.path.join(images, n), "rb").read()
            (size,) = struct.unpack("<Q", data[:8])
            # the payload, then the plugin's 32-byte seal
            check(size == len(data) - 8 - 32, "%s: header %d, payload and seal %d" % (n, size, len(data) - 8))
            hit = [h for h, g in unmatched.items() if g["size"] == size and data[8:8 + size] == pattern(g["seed"], size)]
            check(hit, "%s: %d bytes match no BO's pattern" % (n, size))
            del unmatched[hit[0]]
        print("dump: %s + %d drm-pages files, each BO's exact bytes" % (" + ".join(renders), len(pages)))
        verdict(p, work)
        p = None
        rc, text, hostpid = criu_host.run(bins, ["restore", "-D", images, "--plugin", bins.plugin, "--verifier",
                                  bins.verify + ":verify_render", "--verifier-arg", os.path.join(work, "render")],
                           env, os.path.join(work, "restore.log"))
        check(rc == 0 and "verify_render() = 0 (pass)" in text, "restore failed (%d):\n%s" % (rc, text[-3000:]))
        if scenario == "bounded":
            rpeak = staging(bins, text, None, "restore")
            print("staging peak %d (dump), %d (restore) bytes, bound %d" % (dpeak, rpeak, BOUND))
        print("restore: verified in the restored task (handles, VAs, CPU-mapped contents)")
    finally:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--inner", action="store_true")
    ap.add_argument("--work")
    ap.add_argument("scenario", choices=["roundtrip", "bounded", "old_kernel", "two_files"])
    a = ap.parse_args()
    bins = Bins(a.bin_dir)
    if a.inner:
        harness.run_phase(lambda: inner(bins, a.scenario, a.work))
    with harness.not_run():
        harness.require_built(bins.emu, bins.host, bins.plugin, bins.workload, bins.verify)
    criu_host.run_inside_machine(__file__, bins, "amdcr-render-e2e-", f": e2e render {a.scenario}")


if __name__ == "__main__":
    main()
