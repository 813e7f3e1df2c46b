#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A HIP program in a podman container, checkpointed, exported and restored
on another emulated machine, under runc and real CRIU.

    hip_container_test.py (tests/container's arguments; --workload hip_train)

tests/hip's training loop (`hip_train --steps 12 --gate-after 5`) is the
init of a podman container on an emulated 2xMI210 (tests/container's
machinery: the image made of the program and the libraries it loads, HIP's
amd_comgr and its LLVM among them; the devices passed with --device; our
plugin through the org.criu.config annotation). At its gate (after step 5,
between two kernels) `podman container checkpoint --export`; on a second
machine (other gpu_ids, the GPUs in the other order: container_test's
MACHINES["second"]) `podman container restore --import`: the restored init
has every BO with its dumped contents on the mapped GPU, its fd table, its
device mappings and its queues active; then the gate file is made, the
container exits 0 and its output (steps 6-11 and the final weights'
checksum) equals the program's --cpu-only run, line for line.

Exit: 0 pass, 1 fail, 77 NOT RUN (as tests/container: not root, podman,
runc or busybox-static missing, CRIU not usable, sanitizer build; the
program not built).
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "container"))
import container_test as ct  # noqa: E402
import harness  # noqa: E402
from harness import Failed, NotRun, log  # noqa: E402

STEPS, GATE = 12, 5
IMAGE = "localhost/hip-train:1"
GATE_TIMEOUT = 240
# What HIP loads with dlopen (ldd does not list it): the code object
# manager, whose own libraries ldd gives.
DLOPENED = ["libamd_comgr.so.2"]
LIBDIRS = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"]


def rootfs_tar(args, work):
    """container_test's image (busybox, the program, the shim, their
    libraries) plus what HIP dlopens and its libraries."""
    rootfs = os.path.join(work, "rootfs")
    ct.make_rootfs(args, rootfs)
    extra = []
    for name in DLOPENED:
        path = next((os.path.join(d, name) for d in LIBDIRS if os.path.exists(os.path.join(d, name))), None)
        if not path:
            raise NotRun(f"{name} (which HIP loads) is not installed")
        extra += [path] + ct.ldd_libs(path)
    for f in sorted(set(extra)):
        dst = os.path.join(rootfs, f.lstrip("/"))
        if not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.realpath(f), dst)
    subprocess.run(["tar", "-C", rootfs, "-cf", os.path.join(work, "rootfs.tar"), "."], check=True)
    shutil.rmtree(rootfs)


def lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def program(wl):
    """The container's init: the training loop, its output in `wl`."""
    return ["/bin/sh", "-c", f"exec /kfdemu/workload --steps {STEPS} --gate-after {GATE} --gate {wl}/gate "
            f">{wl}/out.log 2>{wl}/err.log"]


def phase_first(args, rc, emu, work):
    pm, wl = ct.run_container(work, [128, 129], program, image=IMAGE)
    out = os.path.join(wl, "out.log")
    if not rc.wait_for(lambda: f"gate {GATE}" in lines(out), GATE_TIMEOUT, "the program's gate"):
        rc.show_log(out)
        rc.show_log(os.path.join(wl, "err.log"))
        raise Failed(f"the program did not reach gate {GATE}")
    pid = pm.pid("gpu")
    before = rc.snapshot(emu, pid)
    log(f"container init {pid} at gate {GATE}: {len(before['bos'])} BOs, {len(before['vmas'])} device mappings, "
        f"{len(before['queues']['queues'])} queue(s)")
    ct.export_checkpoint(rc, pm, work, {"before": before, "wl": wl}, image=IMAGE)


def phase_second(args, rc, emu, work):
    pm, storage, st = ct.load_export(work)
    ct.import_checkpoint(rc, pm, storage, os.path.join(work, "gpu.tar.zst"))
    gpus, minors = ct.MACHINES["second"][1]
    ct.check_restored(rc, emu, pm.pid("gpu"), st["before"], gpus, minors, "restored on the second machine")
    open(os.path.join(st["wl"], "gate"), "w").close()
    code = pm.run("wait", "gpu", timeout=ct.PODMAN_TIMEOUT).stdout.strip()
    got = lines(os.path.join(st["wl"], "out.log"))
    r = subprocess.run([args.workload, "--steps", str(STEPS), "--cpu-only"], capture_output=True, text=True,
                       timeout=120)
    want = r.stdout.splitlines()
    want.insert(GATE + 1, f"gate {GATE}")
    if code != "0" or got != want:
        rc.show_log(os.path.join(st["wl"], "out.log"))
        rc.show_log(os.path.join(st["wl"], "err.log"))
    pm.run("rm", "-f", "-t", "0", "-a")
    rc.expect(code == "0", f"the restored container exited with {code}")
    rc.expect(got == want, f"the restored program's output {got} != the uninterrupted run's {want}")
    log(f"the restored container exited 0; its {len(got)} lines equal the uninterrupted run's (last: {got[-1]})")


def inside(args):
    rc, emu = ct.machine_helpers(args)
    (phase_first if args.phase == "first" else phase_second)(args, rc, emu, args.work)


def run_machines(args, work, criu):
    root = os.path.join(work, "machine")
    rootfs_tar(args, work)
    ct.write_criu_side(args, work, root, criu)
    ct.write_podman_conf(work)
    me = harness.self_command(__file__, "--work", work, "--criu", criu)
    emu = [args.kfd_emu, "--root", root]
    log(f"first machine: {' '.join(ct.FIRST)}")
    code = subprocess.run(emu + ct.FIRST + ["--"] + me + ["--phase", "first"]).returncode
    if code == 0:
        second = ct.MACHINES["second"][0]
        log(f"second machine: {' '.join(second)}")
        code = subprocess.run(emu + second + ["--"] + me + ["--phase", "second"]).returncode
    return code == 0


def main():
    ap = argparse.ArgumentParser()
    ct.add_common_args(ap)
    args = ap.parse_args()
    with harness.not_run():
        if not os.path.exists(args.workload):
            raise NotRun(f"{args.workload} was not built (hipcc; tests/hip/README.md)")
    ct.run_test(args, __file__, [("podman", "podman"), ("runc", "runc")], "hip-container.", inside, run_machines,
                ct.podman_cleanup)


if __name__ == "__main__":
    main()
