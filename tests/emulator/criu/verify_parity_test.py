#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""verify_parity_test.py: checkpoints of one process bound to CRIU's images
of their own dump, and `amdgpu-img verify` giving the restore's verdict,
under real CRIU and the emulated GPU (kfd-emu).

Scenario `earlier` (a checkpoint's GPU files swapped for an earlier
dump's of the same process): the round trip's workload (a
/dev/kfd file with BOs, mappings and queues, and a render node file: its
KFD image, pages file and render image) is dumped with
`criu dump --leave-running` into ckpt-1, then a second time (ending it)
into ckpt-2. Each case below is a copy of ckpt-2 changed as it says; on each, `amdgpu-img
verify` runs, then `criu restore`, and both must give the case's verdict:
  - every GPU file of ckpt-1, its manifest (amdgpu-binding.img) included,
    in place of ckpt-2's: refused before any GPU state changed, naming
    the GPU images; verify reports a problem;
  - ckpt-1's GPU files without its manifest (ckpt-2's stays): refused the
    same way;
  - the manifest deleted: refused naming it;
  - every GPU file of ckpt-1, manifest included, with
    KFD_REQUIRE_MANIFEST=0 (for verify and CRIU): refused the same way (a
    manifest that is there is checked);
  - an EXT file id in CRIU's files.img changed (the last one below 128,
    to another): refused naming the GPU images;
  - the KFD image cut by one byte: refused naming it;
  - the render image deleted: refused naming it (the manifest lists it);
  - a killed dump's directory (the manifest missing, files.img empty, the
    core images missing; its inventory, which CRIU checks before any
    plugin, kept): refused naming the manifest;
  - each pages file of ckpt-1 (the same size: the same BOs) in place of
    ckpt-2's, with KFD_VERIFY=0 (for verify and CRIU; no content
    checksums): refused naming it, by its seal (the dump identity after
    its payload, which the metadata image's binding asks for);
  - one byte flipped in each GPU file (the offset drawn by
    random.Random(35)): refused naming it, but a pages file's, found while
    its contents are copied in: the restore fails naming it and no process
    is left ("failed");
  - the copy a post-dump action script made (dump 2 runs criu with
    --action-script, copying $CRTOOLS_IMAGE_DIR at post-dump: the GPU
    files without the manifest, which the plugin writes at its exit, after
    the scripts): refused naming the manifest; with KFD_REQUIRE_MANIFEST=0
    restored (as below) with the plugin's warning, verify exit 0 with a
    warning;
  - unchanged: restored (the process exactly as before dump 2, its GPU
    work checked by the workload), verify exit 0.
Before each restore the workload's log is cut back to its size at dump 2
and its go/result files removed (CRIU checks an open file's size), so
several restores of one checkpoint can succeed. verify's problems must
name a file of the case as the restore's refusal does. Then a process
tree (workload --tree: a parent and a child, each with a KFD context) is
dumped once (tree_cases), and
  - the child's KFD image's pid edited to the parent's: refused naming
    the image (by its seal, which the edit breaks);
  - the two tasks' KFD files (image and pages file) each under the other
    task's file id: refused naming an image (its dump binding names the
    file it was dumped for);
  - the pid edit with the seal made again (libxxhash's XXH3-64 through
    ctypes): refused before any GPU state, naming the image: the restore,
    like verify, finds from CRIU's ids-*.img and fdinfo-*.img the task
    CRIU restores the file in (the task holding it).
Not run: the swap with the bindings' file ids and the pages files'
seals made again too (by the code, it then reaches the task check of the
resealed pid edit, in verify and in the restore). 19 restores: about 10-22 s in
all with the dumps (2-core machine under load).

Scenario `upstream-gem` (CTest
emu_realcriu_<criu>_interop_upstream_dump_kfd_gem_MI100): kfd-gem's
workload (GEM BOs of its own on libhsakmt's render node file, made as
upstream's plugin can carry them) dumped by upstream's amdgpu_plugin.so
built from the same CRIU's sources (--upstream-list), then verified and
restored by ours: refused before any GPU state changed, and verify reports
a problem naming the same file. CRIU 4.2.1's plugin writes the render image
with no BOs: the refusal names the task's mm-<pid>.img, the mapping (render
node, addresses, offset) and the render image "with 0 BOs". criu-dev's
dumps the BOs but marks one imported (its defect, README): the refusal
names the render image and the GEM handle. Then the tree of `earlier`
dumped by upstream's plugin (images without seal, dump identity or
manifest): unchanged, verify exit 0 (our restore of it:
emu_realcriu_*_interop_upstream_dump_tree_2xMI210); the child's KFD
image's pid edited to the parent's, and the two tasks' KFD files each
under the other's id: nothing in the GPU images tells; the restore
refuses before any GPU state and verify reports a problem, both naming
the image, from CRIU's ids and fdinfo images (the task CRIU restores the
file in). An earlier
checkpoint's upstream images are not told apart (no identity: man page,
INTEGRITY). About 4-8 s.

The scenarios are the rows of SCENARIOS (--help lists them, --list gives
their CTest tests, which criu.cmake registers).

Exit: 0 pass, 1 fail, 77 NOT RUN (CRIU not listed or not usable, not
root, sanitizer build).
"""
import argparse
import ctypes
import ctypes.util
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from typing import Callable, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import realcriu_test as rt  # noqa: E402
from realcriu_test import expect, harness, log  # noqa: E402

MANIFEST = "amdgpu-binding.img"
SEED = 35  # the byte flips' offsets
REFUSED = "restore refused before any GPU state was changed"


def dump_into(run, pid, k, leave_running, extra=()):
    """criu dump of `pid` into WORK/ckpt-k."""
    run.images = os.path.join(run.work, f"ckpt-{k}")
    os.makedirs(run.images, exist_ok=True)
    rc = run.criu_run("dump", ["-t", str(pid)] + (["--leave-running"] if leave_running else []) + list(extra),
                      "dump.log")
    if rc != 0:
        rt.show_log(os.path.join(run.images, "dump.log"))
        raise rt.Failure(f"criu dump {k} failed ({rc})")
    if leave_running:
        expect(rt.alive(pid), f"dump {k} (--leave-running): process {pid} is gone", False)
    return run.images


def ours(d):
    return sorted(n for n in os.listdir(d) if rt.OURS.fullmatch(n))


def edit_ext_id(path):
    """Changes the id of the last EXT entry (type 16) of CRIU's files.img
    at `path` whose id is a one-byte varint (id ^ 1, same size); returns
    the old and new id."""
    data = bytearray(open(path, "rb").read())
    at = 8 if data[:4] == bytes.fromhex("19435654") else 4
    found = None
    while at + 4 <= len(data):
        size = int.from_bytes(data[at:at + 4], "little")
        m = at + 4
        if data[m:m + 3] == b"\x08\x10\x10" and data[m + 3] < 0x80:
            found = m + 3
        at = m + size
    expect(found is not None, f"{path}: no EXT entry with a one-byte id", False)
    old = data[found]
    data[found] = old ^ 1
    open(path, "wb").write(data)
    return old, old ^ 1


def cut_one_byte(path):
    os.truncate(path, os.path.getsize(path) - 1)


def flip_one_byte(seed):
    """An edit flipping every bit of one byte of the file, at an offset a
    random.Random(seed) draws among its bytes (its 8-byte header too)."""
    def flip(path):
        size = os.path.getsize(path)
        at = random.Random(seed).randrange(size)
        with open(path, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0xff]))
        log(f"{os.path.basename(path)}: byte {at} of {size} flipped")
    return flip


def as_killed_dump(manifest):
    """What a dump killed before CRIU wrote its images leaves (its
    manifest's path given): the GPU files without their manifest (written
    at the plugin's exit), files.img empty, no core image. (Its inventory,
    missing too, CRIU's restore checks before any plugin: kept.)"""
    d = os.path.dirname(manifest)
    os.unlink(manifest)
    open(os.path.join(d, "files.img"), "wb").close()
    for n in os.listdir(d):
        if n.startswith("core-"):
            os.unlink(os.path.join(d, n))


def post_dump_copy_script(run, dest):
    """A CRIU action script that copies the checkpoint to `dest` at
    post-dump (CRTOOLS_IMAGE_DIR: CRIU's /proc/<pid>/fd/<n> of the image
    directory), as a migration script does."""
    script = os.path.join(run.work, "post-dump-copy.sh")
    with open(script, "w") as f:
        f.write('#!/bin/sh\n[ "$CRTOOLS_SCRIPT_ACTION" = post-dump ] || exit 0\n'
                f'mkdir -p {dest} && cp -a "$CRTOOLS_IMAGE_DIR/." {dest}/\n')
    os.chmod(script, 0o755)
    return ["--action-script", script]


def fresh_workload_files(run, log_size):
    """What a restored workload changes, put back as dumped so that the next
    restore of the same checkpoint can succeed: its log (CRIU checks the
    size of an open file) and its go/result files."""
    os.truncate(os.path.join(run.work, "workload.log"), log_size)
    for n in ("go", "result"):
        if os.path.exists(os.path.join(run.work, n)):
            os.unlink(os.path.join(run.work, n))


def parity_case(run, target, donor, what, change, outcome, pid, before, remaps):
    """One case: a copy of `target` changed by `change` ({"from_donor":
    [names], "delete": [names], "rename": {old: new} (at once: a swap too),
    "edit": (name, fn(path)), "names": [the
    files the refusal may name], "env": {NAME: VALUE} for verify and CRIU,
    "warns": a text verify and the restore must warn with}), verified and
    restored; `outcome` "restored" or "refused"."""
    d = os.path.join(run.work, "cases", re.sub(r"[^A-Za-z0-9]+", "-", what))
    shutil.copytree(target, d, ignore=shutil.ignore_patterns("*.log"))
    touched = list(change.get("from_donor", [])) + list(change.get("delete", []))
    for n in change.get("delete", []):
        os.unlink(os.path.join(d, n))
    # "rename": {old: new}, all at once (a swap of names among themselves).
    renames = change.get("rename", {})
    for old in renames:
        os.rename(os.path.join(d, old), os.path.join(d, f"swap.{old}"))
    for old, new in renames.items():
        os.rename(os.path.join(d, f"swap.{old}"), os.path.join(d, new))
    touched += list(renames)
    for n in change.get("from_donor", []):
        shutil.copy(os.path.join(donor, n), os.path.join(d, n))
    if "edit" in change:
        name, fn = change["edit"]
        fn(os.path.join(d, name))
        touched.append(name)
    touched = change.get("names", touched)
    env = dict(os.environ, **change.get("env", {}))
    v = subprocess.run([run.args.amdgpu_img, "verify", d], capture_output=True, text=True, errors="replace", env=env)
    bad = [l for l in v.stdout.splitlines() if l.startswith("BAD ")]
    run.images = d
    pidfile = os.path.join(d, "restored.pid")
    # The dump's --link-remap files, which each restore consumes.
    for f, data in remaps.items():
        with open(f, "wb") as out:
            out.write(data)
    saved_env, run.env = run.env, dict(run.env, **change.get("env", {}))
    try:
        rc = run.criu_run("restore", ["-d", "--pidfile", pidfile], "restore.log")
    finally:
        run.env = saved_env
    for f in remaps:
        if os.path.exists(f):
            os.unlink(f)
    text = open(os.path.join(d, "restore.log"), errors="replace").read()
    errs = rt.plugin_errors(os.path.join(d, "restore.log"))
    if rc == 0:
        expect(outcome == "restored", f"{what}: criu restore succeeded; it must be refused "
                                      f"(verify: {bad or 'exit %d' % v.returncode})")
        with open(pidfile) as f:
            expect(int(f.read()) == pid, f"{what}: restored another pid")
        rt.check_restored(run.emu, pid, before)
        expect(not errs, f"{what}: restored, but the plugin logged errors: {errs}")
        expect(v.returncode == 0, f"{what}: restored correctly, but amdgpu-img verify says {bad or v.stdout}")
        if "warns" in change:
            warned = [l for l in text.splitlines() if "amdgpu_plugin: Warn:" in l and change["warns"] in l]
            expect(warned, f"{what}: restored without the plugin's warning '{change['warns']}'")
            expect(any(l.startswith("warning: ") and change["warns"] in l for l in v.stdout.splitlines()),
                   f"{what}: verify did not warn '{change['warns']}': {v.stdout}")
        expect(rt.verdict(run.work, pid) == "OK", f"{what}: the restored workload failed")
        os.kill(pid, signal.SIGKILL)
        rt.wait_for(lambda: not rt.alive(pid) and not rt.reap_children(), 10)
        expect(rt.wait_for(lambda: run.emu.process(pid) is None, 5), f"{what}: the model keeps {pid}")
        log(f"{what}: restored, as dumped; verify exit 0")
        return
    expect(outcome in ("refused", "failed"), f"{what}: criu restore failed ({rc}): {errs or text[-800:]}")
    # "failed": found only while the contents are copied in (a damaged
    # pages file), after GPU state exists: the restore fails naming it.
    refusal = [e for e in errs if REFUSED in e or (outcome == "failed" and any(n in e for n in touched))]
    expect(refusal, f"{what}: CRIU failed ({rc}) without the plugin's refusal before any GPU state: "
                    f"{errs or text[-800:]}")
    expect(any(n in refusal[0] for n in touched), f"{what}: the refusal names none of {touched}: {refusal[0]}")
    expect(rt.wait_for(lambda: not rt.alive(pid), 5) and not rt.reap_children(), f"{what}: a process is left")
    expect(rt.wait_for(lambda: run.emu.process(pid) is None, 5), f"{what}: the model has process {pid}")
    expect(v.returncode != 0 and bad, f"{what}: the restore was refused, but amdgpu-img verify passed: {v.stdout}")
    expect(any(n in l for l in bad for n in touched), f"{what}: verify's problems name none of {touched}: {bad}")
    log(f"{what}: {outcome} ({refusal[0].split('amdgpu_plugin: ')[-1].strip()[:200]}); verify: {bad[0][:200]}")


def earlier_checkpoint(run):
    procs = run.start()
    pid = procs[0][1]
    first = dump_into(run, pid, 1, True)
    before = rt.snapshot(run.emu, pid)
    copied = os.path.join(run.work, "ckpt-2-copied")
    second = dump_into(run, pid, 2, False, post_dump_copy_script(run, copied))
    run.wl.wait(timeout=30)
    run.wl = None
    expect(rt.wait_for(lambda: not rt.reap_children() and not os.path.exists(f"/proc/{pid}"), 10,
                       "the workload to go"), f"process {pid} still exists", False)
    log_size = os.path.getsize(os.path.join(run.work, "workload.log"))
    remaps = set_aside_remaps(run)
    names = ours(second)
    expect(MANIFEST in names, f"dump 2 wrote no {MANIFEST}: {names}", False)
    expect(ours(first) == names, f"the two dumps of one process wrote other GPU files: {ours(first)} vs {names}",
           False)
    expect(ours(copied) == [n for n in names if n != MANIFEST],
           f"the post-dump script's copy holds {ours(copied)}: want dump 2's GPU files without {MANIFEST}", False)
    gpu = [n for n in names if n != MANIFEST]
    kfd = next(n for n in gpu if n.startswith("amdgpu-kfd-"))
    render = next(n for n in gpu if n.startswith("amdgpu-renderD-"))
    log(f"process {pid}: two dumps, GPU files {names}")
    lax = {"KFD_REQUIRE_MANIFEST": "0"}
    cases = [("every GPU file of the earlier checkpoint", second, {"delete": names, "from_donor": names}, "refused"),
             ("the earlier checkpoint's GPU files without its manifest", second,
              {"delete": gpu, "from_donor": gpu}, "refused"),
             ("every GPU file of the earlier checkpoint, KFD_REQUIRE_MANIFEST=0", second,
              {"delete": names, "from_donor": names, "env": lax}, "refused"),
             ("the manifest deleted", second, {"delete": [MANIFEST]}, "refused"),
             ("an EXT id of files.img changed", second, {"edit": ("files.img", edit_ext_id), "names": gpu},
              "refused"),
             ("the KFD image cut by one byte", second, {"edit": (kfd, cut_one_byte)}, "refused"),
             ("the render image deleted", second, {"delete": [render]}, "refused"),
             ("a killed dump's directory (no manifest, files.img empty, no core image)", second,
              {"edit": (MANIFEST, as_killed_dump)}, "refused")] + [
             (f"one byte of {n} flipped (seed {SEED})", second, {"edit": (n, flip_one_byte(SEED))},
              "failed" if n.startswith("amdgpu-pages-") else "refused") for n in names] + [
             (f"{n} of the earlier checkpoint (the same size), KFD_VERIFY=0", second,
              {"delete": [n], "from_donor": [n], "env": {"KFD_VERIFY": "0"}}, "refused")
             for n in gpu if "pages-" in n] + [
             ("a copy made by a post-dump action script", copied, {"names": [MANIFEST]}, "refused"),
             ("a copy made by a post-dump action script, KFD_REQUIRE_MANIFEST=0", copied,
              {"env": lax, "warns": f"{MANIFEST} is missing and KFD_REQUIRE_MANIFEST=0"}, "restored"),
             ("unchanged", second, {}, "restored")]
    for what, target, change, outcome in cases:
        fresh_workload_files(run, log_size)
        parity_case(run, target, first, what, change, outcome, pid, before, remaps)


def kfd_pid(data):
    """A KFD image's pid (criu_kfd field 1, its payload's first field) and
    where its varint ends."""
    expect(data[8] == 0x08, "a KFD image's payload does not start with field 1 (pid)", False)
    pid, at, shift = 0, 9, 0
    while True:
        pid |= (data[at] & 0x7f) << shift
        at, shift = at + 1, shift + 7
        if not data[at - 1] & 0x80:
            return pid, at


def edit_kfd_pid(new_pid):
    """An edit of a KFD image's pid to `new_pid`, a varint of the same
    length (the image's seal is not made again)."""
    def edit(path):
        data = bytearray(open(path, "rb").read())
        old, end = kfd_pid(data)
        new = bytearray()
        v = new_pid
        while v >= 0x80:
            new.append(v & 0x7f | 0x80)
            v >>= 7
        new.append(v)
        expect(len(new) == end - 9, f"pids {old} and {new_pid} are varints of other lengths", False)
        data[9:end] = new
        open(path, "wb").write(data)
        log(f"{os.path.basename(path)}: pid {old} -> {new_pid}")
    return edit


def resealed(edit):
    """`edit` of a KFD image, then its seal (criu_kfd field 100, fixed64,
    the payload's last field: XXH3-64, seed 0, of the bytes before it,
    libxxhash's) made again for the edited bytes, as someone who knows the
    format would."""
    def edit_and_seal(path):
        edit(path)
        data = bytearray(open(path, "rb").read())
        key = bytes([(100 << 3 | 1) & 0x7f | 0x80, (100 << 3 | 1) >> 7])
        expect(data[-10:-8] == key, f"{os.path.basename(path)}: no seal at the payload's end", False)
        xxh = ctypes.CDLL(ctypes.util.find_library("xxhash"))
        xxh.XXH3_64bits.restype = ctypes.c_uint64
        xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        body = bytes(data[8:-10])
        data[-8:] = xxh.XXH3_64bits(body, len(body)).to_bytes(8, "little")
        open(path, "wb").write(data)
        log(f"{os.path.basename(path)}: sealed again")
    return edit_and_seal


def kfd_file_ids(ckpt, pids):
    """{pid: CRIU file id of its KFD image} for the tasks `pids` of the
    checkpoint (one KFD image each)."""
    ids = {}
    for n in ours(ckpt):
        m = re.fullmatch(r"amdgpu-kfd-(\d+)\.img", n)
        if m:
            ids[kfd_pid(open(os.path.join(ckpt, n), "rb").read())[0]] = int(m.group(1))
    expect(sorted(ids) == sorted(pids), f"the tree's KFD images are of pids {sorted(ids)}: want {sorted(pids)}",
           False)
    return ids


def swapped_kfd_files(ckpt, a, b):
    """{name: new name} putting the KFD files (image and pages files) of
    file id `a` under id `b` and the reverse."""
    out = {}
    for n in ours(ckpt):
        m = re.fullmatch(r"(amdgpu-(?:kfd|pages)-)(\d+)([.-].*)", n)
        if m and int(m.group(2)) in (a, b):
            out[n] = f"{m.group(1)}{b if int(m.group(2)) == a else a}{m.group(3)}"
    expect(sorted(out) == sorted(out.values()), f"the KFD files of ids {a} and {b} differ in kind: {out}", False)
    return out


def tree_cases(args, criu):
    """The tree cases: a parent and a child each with a KFD context,
    dumped once (by upstream's plugin with --interop upstream-dump: images
    without seal or dump identity); the child's KFD image's pid edited to
    the parent's, and the two tasks' KFD files each under the other's id."""
    args.scenario = "tree"
    sealed = not args.interop
    run = rt.Run(args, criu, os.path.join(args.work, "tree"))
    os.makedirs(run.work, exist_ok=True)
    try:
        procs = run.start()
        (_, parent), (_, child) = procs
        ckpt = dump_into(run, parent, 1, False)
        run.wl.wait(timeout=30)
        run.wl = None
        expect(rt.wait_for(lambda: not rt.reap_children() and not rt.alive(child), 10, "the tree to go"),
               "the dumped tree is still there", False)
        ids = kfd_file_ids(ckpt, (parent, child))
        log(f"{'our' if sealed else 'upstream'} plugin dumped the tree: {ours(ckpt)}; KFD file ids {ids}")
        remaps = set_aside_remaps(run)
        mine = f"amdgpu-kfd-{ids[child]}.img"
        swap = swapped_kfd_files(ckpt, ids[parent], ids[child])
        if sealed:
            # Refused by the image's seal (which the edit breaks) and by
            # the binding's file id (the swap): before any GPU state.
            cases = [("a tree's child KFD image with the parent's pid", {"edit": (mine, edit_kfd_pid(parent))},
                      "refused"),
                     ("a tree's KFD files each under the other task's id", {"rename": swap}, "refused"),
                     # Sealed again: only CRIU's ids and fdinfo images
                     # tell (the task CRIU restores the file in), which
                     # the restore reads before any GPU state, as verify.
                     ("a tree's child KFD image with the parent's pid, sealed again",
                      {"edit": (mine, resealed(edit_kfd_pid(parent)))}, "refused")]
        else:
            v = subprocess.run([args.amdgpu_img, "verify", ckpt], capture_output=True, text=True, errors="replace")
            expect(v.returncode == 0, f"upstream's tree checkpoint unchanged: verify says {v.stdout}")
            log("upstream's tree checkpoint unchanged: verify exit 0 (restored by "
                "emu_realcriu_*_interop_upstream_dump_tree_2xMI210)")
            # No seal, no binding: only CRIU's ids and fdinfo images tell,
            # read by the restore before any GPU state, as by verify.
            cases = [("upstream's tree: the child's KFD image with the parent's pid",
                      {"edit": (mine, edit_kfd_pid(parent))}, "refused"),
                     ("upstream's tree: the KFD files each under the other task's id", {"rename": swap},
                      "refused")]
        for what, change, outcome in cases:
            parity_case(run, ckpt, ckpt, what, change, outcome, parent, None, remaps)
    finally:
        run.cleanup()


def set_aside_remaps(run):
    """The dump's --link-remap files (libhsakmt's deleted semaphore), set
    aside: each restore consumes them."""
    remaps = {}
    for f in set(glob.glob("/dev/shm/link_remap.*")) - run.remaps_before:
        with open(f, "rb") as src:
            remaps[f] = src.read()
        os.unlink(f)
    return remaps


def upstream_gem(run):
    """Scenario upstream-gem: see the header."""
    procs = run.start()
    pid = procs[0][1]
    ckpt = dump_into(run, pid, 1, False)
    run.wl.wait(timeout=30)
    run.wl = None
    expect(rt.wait_for(lambda: not rt.reap_children() and not os.path.exists(f"/proc/{pid}"), 10,
                       "the workload to go"), f"process {pid} still exists", False)
    names = ours(ckpt)
    render = [n for n in names if n.startswith("amdgpu-renderD-")]
    expect(len(render) == 1, f"upstream's dump wrote {names}: want one render image", False)
    log(f"upstream's plugin of CRIU {run.version} dumped {names}")
    if run.version == "4.2.1":
        # Its render image has no BOs: the GEM BOs' CPU mappings (CRIU's
        # mm image) are given back by no image.
        names = [f"mm-{pid}.img", render[0]]
        what = "upstream 4.2.1's GEM checkpoint (render image without BOs)"
    else:
        # criu-dev's dumps the BOs, one of them marked imported (its
        # defect): refused naming the image.
        names = render
        what = "upstream criu-dev's GEM checkpoint (a BO marked imported)"
    parity_case(run, ckpt, ckpt, what, {"names": names}, "refused", pid, None, set_aside_remaps(run))
    if run.version == "4.2.1":
        text = open(os.path.join(run.work, "cases", re.sub(r"[^A-Za-z0-9]+", "-", what), "restore.log"),
                    errors="replace").read()
        expect(re.search(rf"mm-{pid}\.img: task {pid} maps /dev/dri/renderD\d+ at 0x[0-9a-f]+-0x[0-9a-f]+ "
                         rf"\(offset 0x[0-9a-f]+, CRIU file \d+\).*{re.escape(render[0])} with 0 BOs", text),
               f"{what}: the refusal does not name the mapping and the render image")


class Parity(NamedTuple):
    """A scenario: the fields of realcriu_test.py's Scenario that its
    ctest_list reads (criu.cmake registers the tests from --list), and the
    realcriu_test.py scenario whose workload and settings it runs."""
    name: str
    run: Callable         # fn(Run), inside the kfd-emu
    runs_as: str          # realcriu_test.py's scenario: the workload its Run starts
    tests: tuple = ()     # the registered tests (realcriu_test.Test)
    needs: tuple = ()     # what CTest passes it (realcriu_test.NEEDS)
    interop: str = ""     # upstream's plugin dumps (upstream-dump), ours restores
    doc: str = ""         # --help


SCENARIOS = {s.name: s for s in (
    Parity("earlier", earlier_checkpoint, "roundtrip", rt.tests("parity_earlier", "MI100"), needs=("amdgpu-img",),
           doc="a checkpoint's GPU files swapped for an earlier dump's, and the other cases of the header; then "
               "a tree's KFD pid edited"),
    Parity("upstream-gem", upstream_gem, "kfd-gem", rt.tests("interop_upstream_dump_kfd_gem", "MI100"),
           needs=("amdgpu-img", "upstream-list"), interop="upstream-dump",
           doc="kfd-gem's workload dumped by upstream's plugin, refused by the restore and by verify"),
)}


def inside(args, criu):
    harness.become_subreaper()
    run = rt.Run(args, criu, args.work)
    try:
        SCENARIOS[args.parity].run(run)
    finally:
        run.cleanup()
    tree_cases(args, criu)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="\n".join(rt.scenarios_doc(SCENARIOS)),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action=rt.ListTests, scenarios=SCENARIOS,
                    help="print the CTest tests of every scenario (JSON) and exit")
    rt.add_run_args(ap)
    ap.add_argument("--amdgpu-img", required=True)
    ap.add_argument("--scenario", default="earlier", choices=SCENARIOS, metavar="SCENARIO",
                    help="one of the scenarios below")
    ap.add_argument("--upstream-list", default="", help="scripts/build-criu.sh's upstream-plugins.txt (upstream-gem)")
    ap.add_argument("--upstream-so", default="", help=argparse.SUPPRESS)  # internal: found in --upstream-list
    args = ap.parse_args()
    # What realcriu_test.Run reads: the workload of its round trip (earlier)
    # or of kfd-gem as upstream's plugin dumps it (upstream-gem), no
    # streamer.
    args.parity = args.scenario
    args.interop = SCENARIOS[args.scenario].interop
    args.images_dir = ""
    run_as = SCENARIOS[args.scenario].runs_as

    if args.phase:
        args.scenario = run_as
        harness.run_phase(lambda: inside(args, args.criu))

    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    with harness.not_run():
        criu = realcriu.require_criu(args, own_run=True)
        if args.interop:
            args.upstream_so = rt.upstream_plugin(args.upstream_list, args.criu_version)
    work = harness.work_dir("kfdemu-parity.")
    log(f"CRIU {criu}, machine {args.machine}, scenario {args.scenario}, work {work}")
    me = harness.self_command(__file__, "--criu", criu, "--work", work)
    if args.interop:
        me += ["--upstream-so", args.upstream_so]
    rc = subprocess.run([args.kfd_emu, "--machine", args.machine, "--"] + me + ["--phase", "all"]).returncode
    if rc == harness.NOT_RUN:
        shutil.rmtree(work, ignore_errors=True)
        sys.exit(harness.NOT_RUN)
    harness.finish(rc == 0, work, args.keep)


if __name__ == "__main__":
    main()
