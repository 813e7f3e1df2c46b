#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Real CRIU dumps and restores a libhsakmt process on the emulated GPU.

    CRIU_BIN=/path/to/criu realcriu_test.py --kfd-emu K --wrapper W \
        --workload X [--machine NAME] [--plugin P.so] [--break-vma-map]

Runs itself under `kfd-emu --machine NAME`, starts the workload
(kfdemu_criu_workload), dumps it with `kfdemu-criu CRIU dump` and restores it
with `kfdemu-criu CRIU restore` (same daemon, same pid), then checks:
- every BO of the restored process has the dumped contents (the model's
  checksums, `kfd-emu ctl bos`), and its device mappings are recorded
  (`kfd-emu ctl vmas`);
- the restored process itself finds its patterns through its own mappings
  and keeps using KFD (new BO, event set+wait, queue destroy): DIR/result.
--break-vma-map falsifies the plugin's UPDATE_VMA_MAP answer (one page off,
KFDEMU_ADAPTER_BREAK_VMA_MAP=1 in the adapter): the test then passes only if
the round trip fails.

Exit: 0 pass, 1 fail, 77 NOT RUN (no $CRIU_BIN, sanitizer build).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def log(msg):
    print(msg, flush=True)


def not_run(reason):
    log(f"NOT RUN: {reason}")
    sys.exit(77)


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    log(f"timed out after {timeout}s waiting for {what}")
    return False


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] not in "ZX"
    except OSError:
        return False


def ctl(kfd_emu, *query):
    out = subprocess.run([kfd_emu, "ctl", *query], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def show_log(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            tail = f.readlines()[-lines:]
    except OSError:
        return
    log(f"--- last {len(tail)} lines of {path}")
    for l in tail:
        sys.stdout.write("    " + l)
    sys.stdout.flush()


class Failure(Exception):
    """A failed step; `after_dump`: the dump had succeeded."""

    def __init__(self, what, after_dump=False):
        super().__init__(what)
        self.after_dump = after_dump


def expect(cond, what, after_dump=True):
    if not cond:
        raise Failure(what, after_dump)


def round_trip(args, criu, work):
    """Dump + restore + checks; raises Failure."""
    images = os.path.join(work, "images")
    os.mkdir(images)
    out = open(os.path.join(work, "workload.log"), "w")
    wl = subprocess.Popen([args.workload, work], stdin=subprocess.DEVNULL, stdout=out,
                          stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    ready = os.path.join(work, "ready")
    if not wait_for(lambda: os.path.exists(ready) or wl.poll() is not None, 60, "the workload"):
        wl.kill()
        raise Failure("workload not ready")
    if wl.poll() is not None:
        show_log(os.path.join(work, "workload.log"))
        raise Failure(f"workload exited early ({wl.returncode})")
    with open(ready) as f:
        pid = int(f.readline())
    expect(pid == wl.pid, f"workload pid {pid} != {wl.pid}", False)
    before = {b["va"]: b for b in ctl(args.kfd_emu, "bos", str(pid))["bos"]}
    vmas_before = ctl(args.kfd_emu, "vmas", str(pid))["vmas"]
    log(f"workload {pid}: {len(before)} BOs, {len(vmas_before)} device mappings")
    expect(before and vmas_before, "the workload has no BOs or device mappings", False)

    env = dict(os.environ)
    if args.break_vma_map:
        env["KFDEMU_ADAPTER_BREAK_VMA_MAP"] = "1"
    # --link-remap: libhsakmt maps glibc's temporary semaphore file
    # /dev/shm/sem.XXXXXX, unlinked after sem_open linked it under its
    # name (see README.md "Real CRIU").
    common = ["-D", images, "-v4", "--link-remap"]
    wrapper = [args.wrapper] + (["--plugin", args.plugin] if args.plugin else [])
    dump = subprocess.run(wrapper + ["--", criu, "dump", "-t", str(pid), "-o", "dump.log"] + common,
                          env=env)
    if dump.returncode != 0:
        show_log(os.path.join(images, "dump.log"))
        raise Failure(f"criu dump failed ({dump.returncode})")
    wl.wait(timeout=30)
    log(f"dumped: workload ended with {wl.returncode}")
    wait_for(lambda: not alive(pid), 10, "the dumped task to go")

    restore = subprocess.run(wrapper + ["--", criu, "restore", "-d", "-o", "restore.log",
                              "--pidfile", os.path.join(work, "restored.pid")] + common, env=env)
    if restore.returncode != 0:
        show_log(os.path.join(images, "restore.log"))
        raise Failure(f"criu restore failed ({restore.returncode})", True)
    with open(os.path.join(work, "restored.pid")) as f:
        rpid = int(f.read().strip())
    expect(rpid == pid, f"restored pid {rpid} != {pid}")
    log(f"restored as {rpid}")
    try:
        after = {b["va"]: b for b in ctl(args.kfd_emu, "bos", str(rpid))["bos"]}
        for va, b in before.items():
            expect(va in after, f"BO at {va:#x} missing after restore")
            expect(after[va]["checksum"] == b["checksum"],
                   f"BO at {va:#x}: checksum {after[va]['checksum']} != dumped {b['checksum']}")
        vmas_after = ctl(args.kfd_emu, "vmas", str(rpid))["vmas"]
        want = sorted((v["start"], v["end"], v["path"]) for v in vmas_before)
        got = sorted((v["start"], v["end"], v["path"]) for v in vmas_after)
        expect(got == want, f"device mappings after restore {got} != before {want}")
        log(f"emulator: {len(after)} BOs with dumped contents, {len(got)} device mappings")

        open(os.path.join(work, "go"), "w").close()
        result = os.path.join(work, "result")
        if not wait_for(lambda: os.path.exists(result) or not alive(rpid), 60, "the workload's verdict"):
            raise Failure("no verdict from the restored workload", True)
        wait_for(lambda: os.path.exists(result), 2, "result file")
        verdict = open(result).read().strip() if os.path.exists(result) else "(no result: process died)"
        log(f"restored workload: {verdict}")
        if verdict != "OK":
            show_log(os.path.join(work, "workload.log"))
        expect(verdict == "OK", f"restored workload: {verdict}")
    finally:
        if alive(rpid):
            os.kill(rpid, signal.SIGKILL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kfd-emu", required=True)
    ap.add_argument("--wrapper", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--machine", default="MI100")
    ap.add_argument("--break-vma-map", action="store_true")
    ap.add_argument("--plugin", default=os.environ.get("KFDEMU_CRIU_PLUGIN", ""),
                    help="the plugin under test (default: the wrapper's, the build's amdgpu_plugin.so;"
                         " also $KFDEMU_CRIU_PLUGIN)")
    ap.add_argument("--sanitized", default="")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    criu = os.environ.get("CRIU_BIN", "")
    if not criu:
        not_run("no CRIU binary: set CRIU_BIN to a CRIU 4.x built from source")
    if not os.access(criu, os.X_OK):
        not_run(f"CRIU_BIN={criu} is not an executable")
    if args.sanitized.upper() not in ("", "OFF", "0", "FALSE", "NO"):
        not_run(f"sanitizer build ({args.sanitized}): CRIU cannot load a sanitized plugin")
    if os.geteuid() != 0:
        not_run("CRIU needs root")

    if not os.environ.get("KFDEMU_SOCKET"):
        cmd = [args.kfd_emu, "--machine", args.machine, "--", sys.executable, os.path.abspath(__file__)]
        os.execv(args.kfd_emu, cmd + sys.argv[1:])

    work = tempfile.mkdtemp(prefix="kfdemu-realcriu.")
    log(f"CRIU {criu}, machine {args.machine}, work {work}")
    ok = False
    failed_after_dump = False
    try:
        round_trip(args, criu, work)
        ok = True
    except Failure as e:
        log(f"round trip failed: {e}")
        failed_after_dump = e.after_dump
    except subprocess.SubprocessError as e:
        log(f"round trip failed: {e}")
    if args.break_vma_map:
        # Only a failure after a good dump counts: the restore or the
        # restored process must be what the wrong offsets broke.
        if ok:
            log("FAIL: the round trip succeeded although UPDATE_VMA_MAP answered wrong offsets")
        elif not failed_after_dump:
            log("FAIL: the round trip failed before the restore, so the wrong offsets were not tested")
        else:
            log("PASS: the falsified UPDATE_VMA_MAP answers made the restore fail")
        ok = not ok and failed_after_dump
    else:
        log("PASS" if ok else "FAIL")
    if ok and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log(f"work directory kept: {work}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
