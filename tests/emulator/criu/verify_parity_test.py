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
  - an EXT file id in CRIU's files.img changed (the last one below 128,
    to another): refused naming the GPU images;
  - the KFD image cut by one byte: refused naming it;
  - unchanged: restored (the process exactly as before dump 2, its GPU
    work checked by the workload), verify exit 0.
Six restores: about 33 s in all with the dumps (2-core machine under
load).

Exit: 0 pass, 1 fail, 77 NOT RUN (CRIU not listed or not usable, not
root, sanitizer build).
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import realcriu_test as rt  # noqa: E402
from realcriu_test import expect, harness, log  # noqa: E402

MANIFEST = "amdgpu-binding.img"
REFUSED = "restore refused before any GPU state was changed"


def dump_into(run, pid, k, leave_running):
    """criu dump of `pid` into WORK/ckpt-k."""
    run.images = os.path.join(run.work, f"ckpt-{k}")
    os.makedirs(run.images, exist_ok=True)
    rc = run.criu_run("dump", ["-t", str(pid)] + (["--leave-running"] if leave_running else []), "dump.log")
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


def parity_case(run, target, donor, what, change, outcome, pid, before, remaps):
    """One case: a copy of `target` changed by `change` ({"from_donor":
    [names], "delete": [names], "edit": (name, fn(path)), "names": [the
    files the refusal may name]}), verified and restored; `outcome`
    "restored" or "refused"."""
    d = os.path.join(run.work, "cases", re.sub(r"[^A-Za-z0-9]+", "-", what))
    shutil.copytree(target, d, ignore=shutil.ignore_patterns("*.log"))
    touched = list(change.get("from_donor", [])) + list(change.get("delete", []))
    for n in change.get("delete", []):
        os.unlink(os.path.join(d, n))
    for n in change.get("from_donor", []):
        shutil.copy(os.path.join(donor, n), os.path.join(d, n))
    if "edit" in change:
        name, fn = change["edit"]
        fn(os.path.join(d, name))
        touched += change.get("names", [name])
    v = subprocess.run([run.args.amdgpu_img, "verify", d], capture_output=True, text=True)
    bad = [l for l in v.stdout.splitlines() if l.startswith("BAD ")]
    run.images = d
    pidfile = os.path.join(d, "restored.pid")
    # The dump's --link-remap files, which each restore consumes.
    for f, data in remaps.items():
        with open(f, "wb") as out:
            out.write(data)
    rc = run.criu_run("restore", ["-d", "--pidfile", pidfile], "restore.log")
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
        expect(rt.verdict(run.work, pid) == "OK", f"{what}: the restored workload failed")
        os.kill(pid, signal.SIGKILL)
        rt.wait_for(lambda: not rt.alive(pid) and not rt.reap_children(), 10)
        expect(rt.wait_for(lambda: run.emu.process(pid) is None, 5), f"{what}: the model keeps {pid}")
        log(f"{what}: restored, as dumped; verify exit 0")
        return
    expect(outcome == "refused", f"{what}: criu restore failed ({rc}): {errs or text[-800:]}")
    refusal = [e for e in errs if REFUSED in e]
    expect(refusal, f"{what}: CRIU failed ({rc}) without the plugin's refusal before any GPU state: "
                    f"{errs or text[-800:]}")
    expect(any(n in refusal[0] for n in touched), f"{what}: the refusal names none of {touched}: {refusal[0]}")
    expect(rt.wait_for(lambda: not rt.alive(pid), 5) and not rt.reap_children(), f"{what}: a process is left")
    expect(rt.wait_for(lambda: run.emu.process(pid) is None, 5), f"{what}: the model has process {pid}")
    expect(v.returncode != 0 and bad, f"{what}: the restore was refused, but amdgpu-img verify passed: {v.stdout}")
    log(f"{what}: refused ({refusal[0].split('amdgpu_plugin: ')[-1].strip()[:200]}); verify: {bad[0][:200]}")


def earlier_checkpoint(run):
    procs = run.start()
    pid = procs[0][1]
    first = dump_into(run, pid, 1, True)
    before = rt.snapshot(run.emu, pid)
    second = dump_into(run, pid, 2, False)
    run.wl.wait(timeout=30)
    run.wl = None
    expect(rt.wait_for(lambda: not rt.reap_children() and not os.path.exists(f"/proc/{pid}"), 10,
                       "the workload to go"), f"process {pid} still exists", False)
    # Dump 2's --link-remap files (libhsakmt's deleted semaphore), set
    # aside: each restore consumes them.
    remaps = {}
    for f in set(glob.glob("/dev/shm/link_remap.*")) - run.remaps_before:
        with open(f, "rb") as src:
            remaps[f] = src.read()
        os.unlink(f)
    names = ours(second)
    expect(MANIFEST in names, f"dump 2 wrote no {MANIFEST}: {names}", False)
    expect(ours(first) == names, f"the two dumps of one process wrote other GPU files: {ours(first)} vs {names}",
           False)
    gpu = [n for n in names if n != MANIFEST]
    kfd = next(n for n in gpu if n.startswith("amdgpu-kfd-"))
    log(f"process {pid}: two dumps, GPU files {names}")
    # The restore that succeeds last: its process writes to the workload's
    # log, whose size CRIU checks at every later restore.
    cases = [("every GPU file of the earlier checkpoint", {"delete": names, "from_donor": names}, "refused"),
             ("the earlier checkpoint's GPU files without its manifest", {"delete": gpu, "from_donor": gpu},
              "refused"),
             ("the manifest deleted", {"delete": [MANIFEST]}, "refused"),
             ("an EXT id of files.img changed", {"edit": ("files.img", edit_ext_id), "names": gpu}, "refused"),
             ("the KFD image cut by one byte", {"edit": (kfd, cut_one_byte)}, "refused"),
             ("unchanged", {}, "restored")]
    for what, change, outcome in cases:
        parity_case(run, second, first, what, change, outcome, pid, before, remaps)


def inside(args, criu):
    harness.become_subreaper()
    run = rt.Run(args, criu, args.work)
    try:
        earlier_checkpoint(run)
    finally:
        run.cleanup()


def main():
    ap = argparse.ArgumentParser()
    rt.add_run_args(ap)
    ap.add_argument("--amdgpu-img", required=True)
    ap.add_argument("--scenario", default="earlier", choices=["earlier"])
    args = ap.parse_args()
    # What realcriu_test.Run reads: its round trip's workload, no streamer,
    # no interop.
    args.interop = ""
    args.images_dir = ""
    run_as = "roundtrip"

    if args.phase:
        args.scenario = run_as
        harness.run_phase(lambda: inside(args, args.criu))

    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    with harness.not_run():
        criu = realcriu.require_criu(args)
    harness.private_dev_shm()
    work = harness.work_dir("kfdemu-parity.")
    log(f"CRIU {criu}, machine {args.machine}, scenario {args.scenario}, work {work}")
    me = harness.self_command(__file__, "--criu", criu, "--work", work)
    rc = subprocess.run([args.kfd_emu, "--machine", args.machine, "--"] + me + ["--phase", "all"]).returncode
    if rc == harness.NOT_RUN:
        shutil.rmtree(work, ignore_errors=True)
        sys.exit(harness.NOT_RUN)
    harness.finish(rc == 0, work, args.keep)


if __name__ == "__main__":
    main()
