#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""One BO shared by three processes through a dma-buf, under the CRIU
stand-in (criu-host).

    dmabuf_e2e.py --bin-dir BUILD ROOT ORDER   (CTest e2e_dmabuf_<ROOT>_root_<ORDER>)

Inside `kfd-emu --machine MI100` the tree of tests/e2e/dmabuf_tree.cpp: an
exporter (a GTT BO of its render file, CPU- and GPU-mapped, exported as a
dma-buf), an importer (the dma-buf imported into its own render file,
mapped) and a holder (the bare dma-buf fd). ROOT (exporter, importer or
holder) is the tree's root, which criu-host dumps first: so each of the
three kinds of holder is the first file of the dump once. Checks:

dump     two amdgpu-renderD images, one amdgpu-dmabuf image, and exactly one
         amdgpu-drm-pages file, holding the BO's exact bytes (contents once);
         `amdgpu-img verify` finds every file good; the plugin's staging
         peak within KFD_MAX_BUFFER_SIZE=64K (set for dump and restore); the dumped tree runs on
         and passes its own checks (the exporter's later write seen by the
         other two).
restore  criu-host restores the three tasks in ORDER (concurrent: all at
         once, as CRIU; tree or reverse: one task after the other, parent
         first or last, so the task restored first, which must create the
         BO, is each kind of holder in one test), each runs dmabuf_verify.so: the exporter's and importer's render files hold
         exactly their checkpointed handle, the BO's bytes readable through
         their moved CPU mappings; the holder's fd is a dma-buf of the BO's
         size with its bytes; the three dma-bufs are one (same inode: one BO,
         not copies); the plugin created the BO once (one "created" line),
         with a serial ORDER in the first task's file.
ORDER flip: one byte in the middle of the shared BO's pages file flipped
         after the dump; the restore in each serial order (tree, reverse:
         the BO filled by the file that holds its contents, or by a file
         dumped after it, from the checksums in its shared BO entry) fails
         within its time limit with the plugin's checksum error naming the
         pages file and the shared BO, and leaves no task; control: with
         KFD_VERIFY=0 the plugin restores it and the verifiers see the wrong
         byte (so the checksum is what refused it).
ORDER fault: the restore with `kfd-emu ctl faults
         DRM_IOCTL_AMDGPU_GEM_CREATE` (the first holder cannot create the
         BO): criu-host's restore fails within its time limit (no holder
         waits for a BO that will not come), CRIU's log has the plugin's
         error naming GEM_CREATE, and every restored task is gone.
"""
import argparse
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

ROLES = ("exporter", "importer", "holder")
SIZE = 1 << 20
BOUND = 64 << 10  # KFD_MAX_BUFFER_SIZE: the 1 MiB BO is copied in many passes


class Bins(criu_host.Bins):
    def __init__(self, d):
        super().__init__(d)
        self.workload = os.path.join(d, "tests/e2e/dmabuf-tree")
        self.verify = os.path.join(d, "tests/e2e/libdmabuf_verify.so")
        self.img = os.path.join(d, "amdgpu-img")


def host(bins, args, log):
    """criu-host with the BOs copied in passes of BOUND bytes: (exit
    status, log + output)."""
    return criu_host.run(bins, args, {"KFD_MAX_BUFFER_SIZE": str(BOUND)}, log)[:2]


def staging_within_bound(text, what):
    """The plugin's staging peaks in a log: some, each within BOUND."""
    peaks = [int(x) for x in re.findall(r"peak staging (\d+) bytes", text)]
    check(peaks and max(peaks) <= BOUND, "%s: staging peaks %s, bound %d" % (what, peaks, BOUND))
    return max(peaks)


def first_holder(images, order):
    """The image of the file of the task criu-host restores first in a
    serial `order`: the inventory lists tasks parent first; fds 100, 101,
    102 mark the roles (dmabuf_tree.cpp)."""
    tasks, role_file = [], {}
    for line in open(os.path.join(images, "inventory.host")):
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        if line.startswith("task "):
            tasks.append(f["pid"])
        elif line.startswith("fd ") and f.get("fd") in ("100", "101", "102"):
            role_file[f["task"]] = (int(f["fd"]) - 100, int(f["id"]))
    role, fid = role_file[tasks[0] if order == "tree" else tasks[-1]]
    return ROLES[role], ("amdgpu-dmabuf_%d.img" if role == 2 else "amdgpu-renderD-%d.img") % fid


def restore_fault(bins, images, work):
    subprocess.run([bins.emu, "ctl", "faults", "DRM_IOCTL_AMDGPU_GEM_CREATE:errno=ENOMEM"], check=True,
                   capture_output=True, timeout=60)
    t0 = time.monotonic()
    rc, text = host(bins, ["restore", "-D", images, "--plugin", bins.plugin, "--verifier",
                           bins.verify + ":verify_dmabuf", "--verifier-arg", work], os.path.join(work, "restore.log"))
    took = time.monotonic() - t0
    subprocess.run([bins.emu, "ctl", "faults", ""], check=True, capture_output=True, timeout=60)
    check(rc != 0, "the restore succeeded although GEM_CREATE failed")
    errs = [l for l in text.splitlines() if "amdgpu_plugin:" in l and "Error" in l]
    check(any("DRM_IOCTL_AMDGPU_GEM_CREATE" in l for l in errs), "no plugin error naming GEM_CREATE:\n" + text[-3000:])
    check(took < 60, "the failed restore took %.0f s" % took)
    forked = [int(x) for x in re.findall(r"Task \d+ forked as (\d+)", text)]
    check(len(forked) == 3, "criu-host forked %d tasks, want 3" % len(forked))
    left = [p for p in forked if os.path.exists("/proc/%d" % p)]
    check(not left, "restored tasks left after the failed restore: %s" % left)
    print("restore with GEM_CREATE failing: refused in %.1f s, no task left; %d plugin errors, the first: %s" % (
        took, len(errs), errs[0].split("amdgpu_plugin:", 1)[1].strip()[:160]))
    for l in errs[1:]:
        print("  also: " + l.split("amdgpu_plugin:", 1)[1].strip()[:200])


def restore_flip(bins, images, work, pages):
    path = os.path.join(images, pages)
    with open(path, "r+b") as f:
        f.seek(8 + SIZE // 2 + 5)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x10]))
    for order in ("tree", "reverse"):
        t0 = time.monotonic()
        rc, text = host(bins, ["restore", "-D", images, "--plugin", bins.plugin, "--verifier",
                               bins.verify + ":verify_dmabuf", "--verifier-arg", work, "--restore-order", order],
                        os.path.join(work, "restore-flip-%s.log" % order))
        took = time.monotonic() - t0
        check(rc != 0, "%s restore of a flipped byte succeeded" % order)
        errs = [l for l in text.splitlines() if "amdgpu_plugin:" in l and "Error" in l]
        check(any(pages in l and "shared BO" in l and "checksum" in l for l in errs),
              "%s restore: no plugin error naming %s, the shared BO and a checksum:\n%s" % (
                  order, pages, "\n".join(errs) or text[-3000:]))
        check(took < 60, "the failed %s restore took %.0f s" % (order, took))
        forked = [int(x) for x in re.findall(r"Task \d+ forked as (\d+)", text)]
        left = [p for p in forked if os.path.exists("/proc/%d" % p)]
        check(not left, "restored tasks left after the failed %s restore: %s" % (order, left))
        first = next(l for l in errs if pages in l)
        print("flipped byte, %s restore: refused in %.1f s, no task left: %s" % (
            order, took, first.split("amdgpu_plugin:", 1)[1].strip()[:200]))
    os.environ["KFD_VERIFY"] = "0"
    try:
        rc, text = host(bins, ["restore", "-D", images, "--plugin", bins.plugin, "--verifier",
                               bins.verify + ":verify_dmabuf", "--verifier-arg", work, "--restore-order", "tree"],
                        os.path.join(work, "restore-flip-noverify.log"))
    finally:
        del os.environ["KFD_VERIFY"]
    check(not any("amdgpu_plugin:" in l and "Error" in l for l in text.splitlines()),
          "KFD_VERIFY=0: the plugin refused the restore:\n" + text[-3000:])
    check(rc != 0 and "verify_dmabuf() = 0 (pass)" not in text,
          "KFD_VERIFY=0 control: the verifiers did not see the flipped byte:\n" + text[-3000:])
    print("control, KFD_VERIFY=0: the plugin restores it, the verifiers find the wrong byte")


def inner(bins, root, order, work):
    images = os.path.join(work, "images")
    os.makedirs(images)
    p = subprocess.Popen([bins.workload, "--dir", work, "--root", root, "--size", str(SIZE)],
                         stdout=open(os.path.join(work, "wl.log"), "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while not all(os.path.exists(os.path.join(work, "ready." + r)) for r in ROLES):
            check(p.poll() is None, "workload exited (%s) before it was ready: %s" % (
                p.returncode, open(os.path.join(work, "wl.log")).read()))
            check(time.time() < deadline, "workload not ready after 60 s")
            time.sleep(0.05)
        rc, text = host(bins, ["dump", "-t", str(p.pid), "-D", images, "--plugin", bins.plugin],
                        os.path.join(work, "dump.log"))
        check(rc == 0, "dump failed (%d):\n%s" % (rc, text[-3000:]))
        dpeak = staging_within_bound(text, "dump")
        names = sorted(os.listdir(images))
        renders = [n for n in names if n.startswith("amdgpu-renderD-")]
        dmabufs = [n for n in names if n.startswith("amdgpu-dmabuf_")]
        pages = [n for n in names if n.startswith("amdgpu-drm-pages-")]
        check(len(renders) == 2 and len(dmabufs) == 1, "expected 2 render and 1 dma-buf images: %s" % names)
        check(len(pages) == 1, "the shared BO's contents should be in one pages file: %s" % pages)
        data = open(os.path.join(images, pages[0]), "rb").read()
        # (the plugin's 32-byte seal follows the payload)
        check(data[:8] == struct.pack("<Q", SIZE) and data[8:8 + SIZE] == pattern(1, SIZE) and
              len(data) == 8 + SIZE + 32,
              "%s does not hold the BO's %d bytes" % (pages[0], SIZE))
        v = subprocess.run([bins.img, "verify", images], capture_output=True, text=True, timeout=60)
        check(v.returncode == 0, "amdgpu-img verify: %s%s" % (v.stdout, v.stderr))
        print("dump (%s first): %s, %s, contents once in %s; amdgpu-img verify: good" % (
            root, renders, dmabufs[0], pages[0]))
        open(os.path.join(work, "go"), "w").close()
        p.wait(timeout=60)
        verdicts = {r: open(os.path.join(work, "result." + r)).read().strip() for r in ROLES}
        check(p.returncode == 0 and all(v == "OK" for v in verdicts.values()),
              "the dumped tree after the dump: %s" % verdicts)
        p = None

        if order == "fault":
            restore_fault(bins, images, work)
            return
        if order == "flip":
            restore_flip(bins, images, work, pages[0])
            return
        rc, text = host(bins, ["restore", "-D", images, "--plugin", bins.plugin, "--verifier",
                               bins.verify + ":verify_dmabuf", "--verifier-arg", work, "--restore-order", order],
                        os.path.join(work, "restore.log"))
        passes = text.count("verify_dmabuf() = 0 (pass)")
        check(rc == 0 and passes == 3, "restore failed (%d, %d of 3 verifiers passed):\n%s" % (
            rc, passes, text[-4000:]))
        inodes = {r: open(os.path.join(work, "inode." + r)).read().split() for r in ROLES}
        check(len({tuple(v) for v in inodes.values()}) == 1,
              "the restored tasks hold different buffers: %s" % inodes)
        created = re.findall(r"shared BO \d+ \(\d+ bytes\): created by the restore of (\S+)", text)
        check(len(created) == 1, "the BO was created %d times at restore" % len(created))
        rpeak = staging_within_bound(text, "restore")
        if order != "concurrent":
            role, image = first_holder(images, order)
            check(created[0] == image, "the BO was created by %s's restore, not by the first task's (%s, %s)" % (
                created[0], role, image))
        print("restore (%s): one BO (dma-buf inode %s) in all three tasks, created by %s; handles, mappings "
              "and bytes verified; staging peaks %d (dump), %d (restore), bound %d" % (
                  order, ":".join(inodes["holder"]), created[0], dpeak, rpeak, BOUND))
    finally:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--inner", action="store_true")
    ap.add_argument("--work")
    ap.add_argument("root", choices=ROLES)
    ap.add_argument("order", choices=["concurrent", "tree", "reverse", "fault", "flip"])
    a = ap.parse_args()
    bins = Bins(a.bin_dir)
    if a.inner:
        harness.run_phase(lambda: inner(bins, a.root, a.order, a.work))
    with harness.not_run():
        harness.require_built(bins.emu, bins.host, bins.plugin, bins.workload, bins.verify, bins.img)
    criu_host.run_inside_machine(__file__, bins, "amdcr-dmabuf-e2e-", f": e2e dmabuf ({a.root} root, {a.order} restore)")


if __name__ == "__main__":
    main()
