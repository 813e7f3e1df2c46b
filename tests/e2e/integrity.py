#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Image integrity end to end: damaged images and failed dumps.

    integrity.py --bin-dir BUILD flips          (CTest e2e_integrity_flips)
    integrity.py --bin-dir BUILD dump_cleanup   (CTest e2e_integrity_dump_cleanup)
    integrity.py --bin-dir BUILD render_flips   (CTest e2e_integrity_render_flips)
    integrity.py --bin-dir BUILD render_dump_cleanup
                                        (CTest e2e_integrity_render_dump_cleanup)
    integrity.py --bin-dir BUILD dump_cleanup_keeps_old
                                        (CTest e2e_integrity_dump_cleanup_keeps_old)

flips: a small 2-GPU checkpoint is dumped; then, on one emulated machine,
one byte of one image file at a time is flipped and the whole restore runs
(criu-host, the plugin, the verifier inside the restored task, which checks
every BO bit-exact against the workload's manifest). Every flip must end in
one of two ways: the restore fails cleanly (non-zero, an error line from the
plugin, no verifier run, no fd leaked), or it succeeds with identical GPU
memory (the verifier passes). A crash, a hang, or a verifier that finds
wrong contents fails the test. One restore costs about 0.2 s, so by default
(about 700 restores, 30 s on a quiet 2-core VM) the flipped bytes are: every byte of a file up
to 256 bytes (renderD, dmabuf images); of the dump's manifest
(amdgpu-binding.img) every 9th byte and the last 10; of the KFD image (about
80 KiB) the first 128 bytes (header, counts, first device entry), the last
32 (the seal) and 250 others drawn at random (seed $AMDCR_FLIP_SEED, else the
clock; the log names it, a failure names file and byte); of each pages file
its header, the first, middle and last byte of every checksum chunk and every
65537th byte. Every single byte of the KFD image is flipped in-process by the
unit test image_seal (test_image).
AMDCR_FLIP_ALL=1 flips every byte of every file (one restore per byte:
about 20 minutes for the KFD image alone); AMDCR_FLIP_AT=FILE:OFFSET,..
flips only those bytes (the dump's file ids and gpu ids are the same each
run on the same machine profile). A control runs one flip with KFD_VERIFY=0 and
expects the verifier to find the damage, so the matrix can fail.

dump_cleanup: an injected failure where the dump's first files are
complete (the second GPU's SDMA job, the CHECKPOINT of a second process
after the first one's images were written): the image directory holds no
file of ours afterwards, under any name (temporaries included). A failure
at each other step of the dump (each ioctl and the first SDMA job) is
e2e_dump_faults' (e2e.py), with the same check.

dump_cleanup_keeps_old: dump_cleanup's SDMA and second-CHECKPOINT faults in
a directory that holds an older checkpoint of the same workload: every old
file is there byte for byte unless the failed dump had replaced it
(same name), no file of the failed dump is left, and the plugin's count of
removed files equals the old files gone.

render_flips: the same for a render-node checkpoint (kfdemu_criu_workload
--render on MI100: amdgpu-renderD-<id>.img and three amdgpu-drm-pages
files), restored with tests/e2e's render verifier, which besides handles,
VAs and CPU-mapped contents compares every BO's contents, the CPU-invisible
VRAM BO's too, with the emulator's checksum of it from before the dump. By
default (about 30 s) a sparser set: every 9th byte and the seal of the
render image (every byte is flipped in-process by the unit test
render_seal), the header ends and the first and last byte of every
checksum chunk of each pages file; AMDCR_FLIP_ALL and AMDCR_FLIP_AT as
above. Its control flips a byte of the CPU-invisible BO with KFD_VERIFY=0.

render_dump_cleanup: one injected failure at each step of a render node
file's dump (its GEM ioctls, the copy engine's setup, an SDMA job, one in
the middle of a copy bounded to 64 KiB), and, in a process with KFD and
GEM BOs on two GPUs, in its first render file after the KFD images were
written and in its second after the first one's images were: no file of
ours is left, and the dumped process runs on and passes its own checks.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e  # noqa: E402  (the shared machinery: Bins, Run, run_host, checks)

CHUNK = 1 << 20  # image/content_checksum.h kChecksumChunkBytes
VRAM = "4K,1M+4K,2M"  # per GPU: BOs of 1, 2 and 2 chunks
GTT = "8K"


def ours(name):
    return name.startswith("amdgpu-") or name.startswith(".amdgpu-")


KFD_SAMPLE = 250  # the KFD image's bytes flipped between header and seal


def offsets(name, size, full, rng, sparse=False):
    """The bytes of one image file to flip (see the module's docstring);
    `rng` draws the KFD image's sample."""
    if full:
        return list(range(size))
    if sparse and "-pages-" not in name:
        return sorted(set(range(0, size, 9)) | set(range(max(0, size - 10), size)))
    if sparse:
        picked = {0, 7}  # the header's ends
        for start in range(8, size, CHUNK):
            picked.update((start, min(size, start + CHUNK) - 1))
        return sorted(picked)
    if name == "amdgpu-binding.img":
        return sorted(set(range(0, size, 9)) | set(range(max(0, size - 10), size)))
    if size <= 256:
        return list(range(size))
    if "-pages-" not in name:
        inner = range(128, size - 32)
        return sorted(set(range(128)) | set(range(size - 32, size)) |
                      set(rng.sample(inner, min(KFD_SAMPLE, len(inner)))))
    picked = set(range(8))  # the header
    for start in range(8, size, CHUNK):
        end = min(size, start + CHUNK)
        picked.update((start, (start + end) // 2, end - 1))
    picked.update(range(8, size, 65537))
    return sorted(picked)


def classify(rc, text, fn="verify_gpu_state"):
    """'clean' (failed with a plugin error, nothing verified), 'identical'
    (restored, the verifier `fn` passed), or a description of what went
    wrong."""
    verified = [l for l in text.splitlines() if fn + "() = 0 (pass)" in l]
    wrong = [l for l in text.splitlines() if fn + "()" in l and "(FAIL)" in l]
    died = [l for l in text.splitlines() if "died before its verifier result" in l]
    leaks = [l for l in text.splitlines() if "leaked by a plugin" in l]
    if leaks:
        return "fd leaked: " + leaks[0]
    if wrong:
        return "restored with WRONG contents: " + wrong[0]
    if died or rc < 0 or rc > 128:
        return "crashed (rc %d): %s" % (rc, (died or [""])[0])
    if rc == 0:
        return "identical" if verified else "rc 0 without a verified task"
    errs = [l for l in e2e.plugin_lines(text) if "fail" in l or "error" in l.lower()]
    if not errs:
        return "failed (rc %d) without an error line from the plugin" % rc
    return "clean"


def inner_flips(bins, a):
    st = json.load(open(a.spec))
    src = os.path.join(st["images_state"], "images")
    manifest = os.path.join(st["images_state"], "manifest")
    verifier = ["--verifier", bins.verify + ":verify_gpu_state", "--verifier-arg", manifest + "," + bins.emu]
    return flip_matrix(bins, a, st, src, verifier, "verify_gpu_state")


def flip_matrix(bins, a, st, src, verifier, fn):
    """One restore per flipped byte of the images in `src` (see the module's
    docstring), each classified; the counts go to STATE/<inner step>.json."""
    work = os.path.join(a.state, "images")
    names = sorted(n for n in os.listdir(src) if ours(n))
    plugins = ["--plugin", bins.plugin]
    counts = {"clean": 0, "identical": 0}
    bad = []
    reasons = {}
    rng = random.Random(st.get("seed", 0))
    flips = [(n, o) for n in names
             for o in offsets(n, os.path.getsize(os.path.join(src, n)), st["full"], rng, st.get("sparse", False))]
    if st.get("control"):
        flips = [(n, 8 + 4096 + 5) for n in names if "-pages-" in n and st["control"] in n][:1]
    if st.get("only"):
        flips = [(n, int(o)) for n, o in st["only"]]
    t0 = time.time()
    before = digests(src, every=True)
    for i, (name, off) in enumerate(flips):
        path = flipped_copy(src, work, name)
        with open(path, "r+b") as f:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x5a]))
        rc, text, _, _ = e2e.run_host(bins, ["restore", "-D", work] + plugins + verifier, st.get("env", {}),
                                      os.path.join(a.state, "restore.log"))
        what = classify(rc, text, fn)
        if what in counts:
            counts[what] += 1
            if what == "clean":
                first = [l for l in e2e.plugin_lines(text) if "fail" in l or "error" in l.lower()][0]
                msg = first.split("amdgpu_plugin: ")[-1].split("failed: ")[-1]
                key = name.split("-")[1] + ": " + msg.split(": bytes")[0][:70]
                reasons[key] = reasons.get(key, 0) + 1
        else:
            bad.append("%s byte %d: %s" % (name, off, what))
        if i % 100 == 99:
            e2e.log("  %d/%d flips, %.0f s" % (i + 1, len(flips), time.time() - t0))
    after = digests(src, every=True)
    bad += ["%s: changed by a restore (through its hard link)" % n for n in before if after.get(n) != before[n]]
    json.dump({"counts": counts, "bad": bad, "flips": len(flips), "files": names, "reasons": reasons,
               "seconds": time.time() - t0}, open(os.path.join(a.state, a.inner + ".json"), "w"))
    return 0


def flipped_copy(src, work, name):
    """WORK made afresh as a copy of the checkpoint in SRC in which file
    `name` is a copy of its own and every other regular file a hard link
    (a restore only reads them: flip_matrix checks that SRC's files stay
    as they were); the path of WORK's `name`. Linking instead of copying
    the checkpoint saves about a sixth of the flips' CPU time."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for n in os.listdir(src):
        s, w = os.path.join(src, n), os.path.join(work, n)
        if n != name and os.path.isfile(s) and not os.path.islink(s):
            os.link(s, w)
        elif os.path.isdir(s) and not os.path.islink(s):
            shutil.copytree(s, w, symlinks=True)
        else:
            shutil.copy2(s, w, follow_symlinks=False)
    return os.path.join(work, name)


def sc_flips(run):
    d = run.dump(["--machine", "2xMI210"], ["--vram", VRAM, "--gtt", GTT])
    e2e.expect_good_dump(d, "2xMI210")
    full = os.environ.get("AMDCR_FLIP_ALL") == "1"
    only = [x.rsplit(":", 1) for x in os.environ.get("AMDCR_FLIP_AT", "").split(",") if x]
    # Control: with KFD_VERIFY=0 a flipped pages byte restores wrong
    # contents, and the verifier must say so (or this test proves nothing).
    ctl = run.machine(["--machine", "2xMI210"], "flips",
                      {"images_state": d["state"], "full": False, "control": "-pages-",
                       "env": {"KFD_VERIFY": "0"}})
    e2e.check(ctl["flips"] == 1 and any("WRONG contents" in b for b in ctl["bad"]),
              "control: with KFD_VERIFY=0 a flipped pages byte was not caught by the verifier: %s" % ctl)
    e2e.log("  control (KFD_VERIFY=0): the flipped byte restored wrong contents, the verifier caught it")
    seed = int(os.environ.get("AMDCR_FLIP_SEED") or time.time_ns() % 2**32)
    e2e.log("  the KFD image's sample: AMDCR_FLIP_SEED=%d" % seed)
    r = run.machine(["--machine", "2xMI210"], "flips",
                    {"images_state": d["state"], "full": full, "only": only, "seed": seed})
    report_flips(r)


# ---- render-node checkpoints (kfdemu_criu_workload --render / --kfd-gem) ----

def start_render_workload(bins, work, mode):
    """kfdemu_criu_workload MODE WORK (tests/emulator/criu/workload.cpp),
    until it is ready to be dumped."""
    wl = os.path.join(e2e.ARGS.bin_dir, "tests/emulator/kfdemu_criu_workload")
    p = subprocess.Popen([wl, mode, work], stdout=open(os.path.join(work, "wl.log"), "w"),
                         stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(work, "ready")):
        e2e.check(p.poll() is None, "workload exited (%s) before it was ready" % p.returncode)
        e2e.check(time.time() < deadline, "workload not ready after 60 s")
        time.sleep(0.05)
    return p


def inner_render_dump(bins, a):
    """Each case of the spec in turn on this one machine (see render_dump_one);
    STATE/render_dump.json: their results, in order."""
    cases = json.load(open(a.spec))["cases"]
    out = []
    for i, case in enumerate(cases):
        work = os.path.join(a.state, "%02d" % i)
        os.makedirs(work)
        out.append(render_dump_one(bins, work, case))
    json.dump({"cases": out}, open(os.path.join(a.state, "render_dump.json"), "w"))
    return 0


def render_dump_one(bins, work, st):
    """Dumps a render-node workload (`mode`) into WORK/images with `fault` set
    for the dump only; the workload then runs its own checks. Returns: rc,
    log, the files left, the workload's verdict, and (`sums`) the emulator's
    checksum of each GEM BO before the dump."""
    images = os.path.join(work, "images")
    os.makedirs(images, exist_ok=True)
    p = start_render_workload(bins, work, st["mode"])
    out = {"sums": {}}
    try:
        if st.get("sums"):
            for f in e2e.ctl(bins, "files", str(p.pid))["files"]:
                for h in f.get("handles", []):
                    out["sums"][str(h["handle"])] = h["checksum"]
        if st.get("fault"):
            e2e.ctl(bins, "faults", st["fault"])
        rc, text, _, _ = e2e.run_host(bins, ["dump", "-t", str(p.pid), "-D", images, "--plugin", bins.plugin],
                                      st.get("env", {}), os.path.join(work, "dump.log"))
        if st.get("fault"):
            e2e.ctl(bins, "faults", "")
        open(os.path.join(work, "go"), "w").close()
        p.wait(timeout=60)
        res = os.path.join(work, "result")
        out.update(rc=rc, log=text, left=sorted(n for n in os.listdir(images) if ours(n)),
                   result=open(res).read().strip() if os.path.exists(res) else "no result (%s)" % p.returncode)
        out["state"] = work
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out


def inner_render_flips(bins, a):
    st = json.load(open(a.spec))
    dumped = st["images_state"]  # a render_dump_one's WORK
    # The render verifier's description of the BOs, plus the emulator's
    # checksum of every BO before the dump: the verifier compares the
    # restored BOs' contents with it, those the CPU cannot map too.
    desc = os.path.join(a.state, "render")
    with open(desc, "w") as f:
        f.write(open(os.path.join(dumped, "render")).read())
        f.write("emu %s\n" % bins.emu)
        for h, c in sorted(st["sums"].items()):
            f.write("sum %s %s\n" % (h, c))
    verifier = ["--verifier", os.path.join(e2e.ARGS.bin_dir, "tests/e2e/librender_verify.so") + ":verify_render",
                "--verifier-arg", desc]
    return flip_matrix(bins, a, st, os.path.join(dumped, "images"), verifier, "verify_render")


def report_flips(r):
    e2e.log("  %d flips over %s in %.0f s: %d failed cleanly, %d restored identical memory" %
            (r["flips"], ", ".join(r["files"]), r["seconds"], r["counts"]["clean"], r["counts"]["identical"]))
    for k, n in sorted(r["reasons"].items(), key=lambda x: -x[1])[:8]:
        e2e.log("    %5d x %s" % (n, k))
    e2e.check(not r["bad"], "%d flips went wrong:\n  %s" % (len(r["bad"]), "\n  ".join(r["bad"][:20])))
    e2e.check(r["counts"]["clean"] > 0, "no flip was refused")


def sc_render_flips(run):
    d = run.machine(["--machine", "MI100"], "render_dump", {"cases": [{"mode": "--render", "sums": True}]})["cases"][0]
    e2e.check(d["rc"] == 0 and d["result"] == "OK",
              "render dump: rc %d, workload %s:\n%s" % (d["rc"], d["result"], d["log"][-2000:]))
    e2e.check(len(d["sums"]) >= 3, "the emulator lists %d GEM BOs of the workload" % len(d["sums"]))
    # Control: with KFD_VERIFY=0 a flipped byte of the VRAM BO the CPU
    # cannot map (its second BO) restores wrong contents, and the verifier
    # must see it through the emulator's checksum.
    ctl = run.machine(["--machine", "MI100"], "render_flips",
                      {"images_state": d["state"], "sums": d["sums"], "full": False, "control": "-0001.img",
                       "env": {"KFD_VERIFY": "0"}})
    e2e.check(ctl["flips"] == 1 and any("WRONG contents" in b for b in ctl["bad"]),
              "control: with KFD_VERIFY=0 a flipped byte of the CPU-invisible BO was not caught: %s" % ctl)
    e2e.log("  control (KFD_VERIFY=0): a flipped byte of the CPU-invisible VRAM BO restored wrong "
            "contents, the verifier caught it")
    full = os.environ.get("AMDCR_FLIP_ALL") == "1"
    only = [x.rsplit(":", 1) for x in os.environ.get("AMDCR_FLIP_AT", "").split(",") if x]
    r = run.machine(["--machine", "MI100"], "render_flips",
                    {"images_state": d["state"], "sums": d["sums"], "full": full, "only": only, "sparse": True})
    report_flips(r)


# The steps of a render node file's dump (--render: a process with only a
# render node, on MI100), each failing once: its own ioctls, the copy
# engine's setup (each of its ioctls is failed in e2e_dump_faults) and an
# SDMA job.
RENDER_DUMP_FAULTS = [
    "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES", "DRM_IOCTL_AMDGPU_GEM_OP", "DRM_IOCTL_AMDGPU_GEM_MMAP",
    "DRM_IOCTL_PRIME_HANDLE_TO_FD", "DRM_IOCTL_AMDGPU_CTX", "DRM_IOCTL_AMDGPU_GEM_USERPTR", "sdma",
]


def render_cleanup_cases():
    """Per machine: [(workload mode, fault, env, what must be in the log first)]"""
    mi100 = [("--render", t + ":nth=1", {}, None) for t in RENDER_DUMP_FAULTS]
    # A 64 KiB bound: the copy goes in many passes; one fails after the
    # first BO's pages file was complete.
    mi100.append(("--render", "sdma:nth=60", {"KFD_MAX_BUFFER_SIZE": "64K"}, None))
    # KFD + GEM BOs on the first GPU's render node (--kfd-gem, 2xMI210):
    # the first render file fails after the KFD images were written; the
    # second (GEM_LIST_HANDLES' 3rd call: each file counts, then lists)
    # after the first one's render image and pages files were too.
    two = [("--kfd-gem", "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES:nth=1", {}, "wrote amdgpu-kfd-"),
           ("--kfd-gem", "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES:nth=3", {}, "wrote amdgpu-renderD-")]
    return [("MI100", mi100), ("2xMI210", two)]


def sc_render_dump_cleanup(run):
    for machine, cases in render_cleanup_cases():
        r = run.machine(["--machine", machine], "render_dump",
                        {"cases": [{"mode": m, "fault": f + ":errno=EIO", "env": env} for m, f, env, _ in cases]})
        for (mode, fault, env, before), d in zip(cases, r["cases"]):
            what = "%s %s %s%s" % (machine, mode, fault, "".join(" %s=%s" % kv for kv in env.items()))
            e2e.check(d["rc"] != 0, "%s: the dump succeeded despite the fault" % what)
            e2e.check(not d["left"], "%s: files of the failed dump are left: %s" % (what, d["left"]))
            e2e.check(d["result"] == "OK", "%s: the dumped process after the failed dump: %s" % (what, d["result"]))
            errs = [l for l in e2e.plugin_lines(d["log"]) if "failed" in l or "error" in l.lower()]
            e2e.check(errs, "%s: no error line from the plugin" % what)
            if before:
                e2e.check(before in d["log"], "%s: the fault hit before '%s' (the case tests nothing)" % (what, before))
            removed = [l for l in e2e.plugin_lines(d["log"]) if "removed the" in l]
            e2e.log("  %-62s -> no file left%s" % (what, (" (" + removed[0].split("amdgpu_plugin: ")[-1] + ")")
                                                       if removed else ""))


def sc_dump_cleanup(run):
    small = ["--vram", "4K,1M+4K", "--gtt", "8K"]
    # The second GPU's SDMA job fails after the first GPU's pages file may
    # be complete. Two GPU processes: the second one's CHECKPOINT fails
    # after the first one's KFD image and pages files are written.
    cases = [("sdma:nth=2", small), ("CRIU_OP:CHECKPOINT:nth=2", small + ["--children", "1"])]
    dumps = run.dumps(["--machine", "2xMI210"], [wl for _, wl in cases],
                      ["%s:errno=EIO" % t for t, _ in cases], skip_checks=True)
    for (target, _), d in zip(cases, dumps):
        e2e.check(d["rc"] != 0, "%s: the dump succeeded despite the fault" % target)
        e2e.check(not d["ours_left"], "%s: files of the failed dump are left: %s" % (target, d["ours_left"]))
        e2e.check(d["queues_state"] == "active", "%s: queues %s" % (target, d["queues_state"]))
        removed = [l for l in e2e.plugin_lines(d["log"]) if "removed the" in l]
        e2e.check(removed, "%s: the plugin's log names no file it removed (the fault hit before any file was "
                  "written: the case tests nothing)" % target)
        e2e.log("  fault %-36s -> no file left (%s)" % (target, removed[0].split("amdgpu_plugin: ")[-1]))


def digests(d, every=False):
    """{name: sha256} of our files in directory d (`every`: of each of its
    regular files)."""
    return {n: hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(d))
            if ours(n) or (every and os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n)))}


def sc_dump_cleanup_keeps_old(run):
    """A dump that fails in a directory holding an older checkpoint of the
    same workload removes the files it wrote and no other, and puts back
    the older files it had replaced: every old file is there byte for
    byte, no file of the failed dump (nor a kept copy) is left, and where
    the dump had replaced old files by its own the log says it put them
    back."""
    small = ["--vram", "4K,1M+4K", "--gtt", "8K"]
    # The first GPU's SDMA job fails: nothing was committed. The second's:
    # the first GPU's pages file may be. The second process's CHECKPOINT:
    # the first process's KFD image and pages files were. The render
    # node's GEM BO copy (the third SDMA job): the whole KFD checkpoint
    # (image and both pages files) was.
    cases = [("sdma:nth=1", small, False), ("sdma:nth=2", small, False),
             ("CRIU_OP:CHECKPOINT:nth=2", small + ["--children", "1"], True),
             ("sdma:nth=3", small + ["--gem", "4K"], True)]
    # The older checkpoints (one per workload) on one machine, then the
    # failed dumps into copies of them on another.
    wls = list(dict.fromkeys(tuple(wl) for _, wl, _ in cases))
    olds = {}
    for wl, o in zip(wls, run.cases(["--machine", "2xMI210"], [e2e.dump_spec(list(wl)) for wl in wls])):
        e2e.check(o["rc"] == 0, "the older checkpoint (%s): dump failed" % " ".join(wl))
        olds[wl] = os.path.join(o["state"], "images")
    failed = run.cases(["--machine", "2xMI210"],
                       [e2e.dump_spec(wl, fault="%s:errno=EIO" % target, skip_checks=True, old_images=olds[tuple(wl)])
                        for target, wl, _ in cases])
    for (target, wl, replaced), d in zip(cases, failed):
        before = digests(olds[tuple(wl)])
        e2e.check(d["rc"] != 0, "%s: the dump succeeded despite the fault" % target)
        images = os.path.join(d["state"], "images")
        after = digests(images)
        changed = sorted(n for n in after if n in before and after[n] != before[n])
        e2e.check(not changed, "%s: old files changed (replaced and not put back): %s" % (target, changed))
        new = sorted(n for n in after if n not in before)
        e2e.check(not new, "%s: files of the failed dump are left: %s" % (target, new))
        missing = sorted(n for n in before if n not in after)
        e2e.check(not missing, "%s: old files gone: %s" % (target, missing))
        hidden = sorted(n for n in os.listdir(images) if n.startswith(".amdgpu-"))
        e2e.check(not hidden, "%s: hidden files left: %s" % (target, hidden))
        said = [l for l in e2e.plugin_lines(d["log"]) if "GPU image files it had written" in l]
        back = int(said[-1].split("put back the ")[1].split()[0]) if said else 0
        e2e.check(back > 0 or not replaced, "%s: the dump had replaced old files, but the log says none was put "
                  "back: %s" % (target, said))
        e2e.log("  fault %-28s -> %d of %d old files byte for byte, %d of them put back after the dump had "
                "replaced them" % (target, len(before), len(before), back))


SCENARIOS = {"flips": sc_flips, "dump_cleanup": sc_dump_cleanup,
             "dump_cleanup_keeps_old": sc_dump_cleanup_keeps_old, "render_flips": sc_render_flips,
             "render_dump_cleanup": sc_render_dump_cleanup}
INNER = {"flips": inner_flips, "render_dump": inner_render_dump, "render_flips": inner_render_flips}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--inner")
    ap.add_argument("--state")
    ap.add_argument("--spec")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("scenario", nargs="?")
    args = ap.parse_args()
    e2e.ARGS = args
    bins = e2e.Bins(os.path.abspath(args.bin_dir))
    if args.inner in INNER:
        return INNER[args.inner](bins, args)
    if args.inner:
        inner = {"dump": e2e.inner_dump, "restore": e2e.inner_restore, "cases": e2e.inner_cases}
        return inner[args.inner](bins, args)
    scratch = tempfile.mkdtemp(prefix="amdcr-integrity-%s-" % args.scenario, dir=os.environ.get("AMDCR_E2E_TMP"))
    run = Run(bins, scratch)
    try:
        SCENARIOS[args.scenario](run)
        e2e.log("integrity %s: passed" % args.scenario)
        return 0
    except e2e.Failed as e:
        e2e.log("integrity %s: FAILED: %s" % (args.scenario, e))
        e2e.log("(scratch kept in %s)" % scratch)
        args.keep = True
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


class Run(e2e.Run):
    """e2e.Run whose inner steps run this script (it knows the 'flips' step)."""

    def machine(self, machine_args, step, spec):
        self.n += 1
        state = os.path.join(self.scratch, "%02d-%s" % (self.n, step))
        os.makedirs(state, exist_ok=True)
        spec_path = os.path.join(state, "spec.json")
        json.dump(spec, open(spec_path, "w"))
        cmd = [self.bins.emu] + machine_args + ["--", sys.executable, os.path.abspath(__file__),
                                                "--bin-dir", e2e.ARGS.bin_dir, "--inner", step,
                                                "--state", state, "--spec", spec_path]
        r = subprocess.run(cmd, timeout=7200)
        e2e.check(r.returncode == 0, "%s on %s: the inner step failed (%d)" % (step, machine_args, r.returncode))
        out = json.load(open(os.path.join(state, step + ".json")))
        out["state"] = state
        return out


if __name__ == "__main__":
    sys.exit(main())
