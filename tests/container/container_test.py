#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A GPU container under podman + runc + real CRIU, on the emulated GPU.

    container_test.py --criu-list LIST --criu-version V --realcriu-lib DIR \
        --emu-criu-lib DIR --kfd-emu K --adapter A.so --plugin P.so \
        --shim S.so --workload X --case CASE [--keep]

The workload (kfdemu_criu_workload: libhsakmt, libdrm_amdgpu) runs as the
init of a podman container on an emulated 2xMI210 machine, its device nodes
passed in as a runtime passes them (--device of character devices with the
emulated numbers; README.md of tests/container). CRIU (the one listed for V)
runs where runc runs it, on the host, with our plugin loaded through the
container's org.criu.config annotation. Steps:

1. `podman container checkpoint --keep`, `podman container restore --keep`
   (in place): the restored init has every BO with its dumped contents on its
   GPU, its fd table (device files by number and target), its device
   mappings, its queues active, and is neither paused nor evicted.
2. `podman container checkpoint --export`, then a second emulated machine
   (kfd-emu --root at the same root, other gpu_ids, VRAM sizes swapped so the
   GPUs change order) with a new, empty podman storage at the same paths
   (the image moved with `podman save`/`load`): `podman container restore
   --import`. The same
   checks with the GPU mapping (and so the render minors) the plugin must
   choose; then the workload's own verdict: its patterns, SDMA copies from
   its restored VRAM through libdrm_amdgpu, new BOs, its event, its queue.

3. (CASE subset, full) A subset of the host's GPUs, the container's render
   nodes staying renderD128 and renderD129 (CRIU restores its /dev, podman
   its checkpointed device cgroup): machine `missing` (renderD128 and
   renderD130) refuses the import naming /dev/dri/renderD130 and --device,
   with no GPU state left; the archive edited there (renderD129 ->
   renderD130 in the spec and in CRIU's /dev image) restores; machine
   `bigger` (four MI210, the checkpointed gpu_ids outside the container)
   restores onto the container's two GPUs.

CASE all: steps 1, 2. CASE subset: 1, 3 (the first machine, then the subset
machines). CASE full: 1, 2, 3. MACHINES and CASES below name them. CASE
killed: only phase_killed (a checkpoint killed during its GPU copy, on the
first machine with slow SDMA).

CASE leave-running (phase_leave_running): periodic checkpoints without
parent links. `podman container checkpoint --leave-running --keep` twice
(the workload --periodic 3): after each the container is running with the
same init, its queues active, not paused, no guardian left, the checkpoint
directory holds every GPU byte the plugin's summary names, and the workload
checks its BOs and GPUs and rewrites a MiB of each VRAM BO; then the
container is killed and restored in place from the second checkpoint (its
BOs as at that checkpoint, which differ from the first's), and the restored
workload checks its BOs and GPUs again and gives its verdict. Where the
kernel has no soft-dirty tracking it first checks that `--pre-checkpoint`
is refused by runc's CRIU feature check (MemTrack), with no KFD CRIU call
and the container running on with its GPU.

CASE pre-checkpoint (phase_pre_checkpoint): `podman container checkpoint
--pre-checkpoint --keep` (runc checkpoint --pre-dump: no KFD CRIU call, no
GPU copy, no file of ours, the container running with its GPU), the
workload rewrites a MiB of each VRAM BO, `podman container checkpoint
--with-previous --keep` (runc --parent-path ../pre-checkpoint: a complete
GPU dump, the pre-checkpoint holding no GPU image), restore in place: BOs as
at the final checkpoint, the workload's checks and verdict. NOT RUN, before
any container, where CRIU cannot track memory (the kernel's
CONFIG_MEM_SOFT_DIRTY).

Exit: 0 pass, 1 fail, 77 NOT RUN (not root, podman or runc missing or not
working, CRIU not listed / not usable, sanitizer build; CASE pre-checkpoint
where CRIU cannot track memory).
"""
import argparse
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import harness  # noqa: E402
from harness import Failed, NotRun, log  # noqa: E402

PODMAN_TIMEOUT = 180
MACHINE = "2xMI210"
# The machines (kfd-emu overrides). The first runs the container; the
# container's device numbers stay those of the checkpoint on every later
# machine (podman restores --import with the checkpointed spec's device
# list), so the render nodes it gets there are renderD128 and renderD129.
FIRST = ["--machine", MACHINE, "--gpu-ids", "0xa1a1,0xb2b2", "--minors", "128,129", "--vram", "64G,32G"]
# Four MI210 (a machine file the test writes, FOUR_MI210): the
# checkpointed gpu_ids are at minors 130 and 131, outside the container.
FOUR_MI210 = "4xMI210.machine"
# The machines the archive is restored on after the first: name -> (kfd-emu
# options, expected checkpointed gpu -> local gpu and checkpointed minor
# -> local minor, or None: the restore must fail naming the render node
# not passed in).
MACHINES = {
    # Another 2xMI210: other gpu_ids, the 64G GPU at the other minor.
    "second": (["--machine", MACHINE, "--gpu-ids", "0x1111,0x2222", "--minors", "128,129",
                "--vram", "32G,64G"],
               ({0xa1a1: 0x2222, 0xb2b2: 0x1111}, {128: 129, 129: 128})),
    # A subset of the host's GPUs, as with --device of only some nodes.
    # A 2xMI210 whose second GPU is renderD130, which the container is not
    # given: refused before any GPU state, naming it; then the archive
    # with its device list edited (renderD129 -> renderD130), as a user
    # can, restores there.
    "missing": (["--machine", MACHINE, "--gpu-ids", "0x1111,0x2222", "--minors", "128,130",
                 "--vram", "32G,64G"], None),
    # Four MI210 of which the container has renderD128 and 129: the host's
    # view maps onto the same gpu_ids (minors 130, 131), the restored
    # task's onto the two it has (0xa1a1 needs the 64G one).
    "bigger": (["--machine", FOUR_MI210, "--gpu-ids", "0x1111,0x2222,0xa1a1,0xb2b2",
                "--minors", "128,129,130,131", "--vram", "32G,64G,64G,64G"],
               ({0xa1a1: 0x2222, 0xb2b2: 0x1111}, {128: 129, 129: 128})),
}
# The edited archive on the "missing" machine.
EDITED = ({0xa1a1: 0x2222, 0xb2b2: 0x1111}, {128: 130, 129: 128})
CASES = {
    "all": ["second"],
    "subset": ["missing", "bigger"],
    "full": ["second", "missing", "bigger"],
    "killed": [],  # its own first phase (phase_killed), no later machine
    "leave-running": [],  # phase_leave_running
    "pre-checkpoint": [],  # phase_pre_checkpoint
}
# The cases whose first machine runs a phase of their own name.
OWN_PHASE = ("killed", "leave-running", "pre-checkpoint")
# runc's answer to `checkpoint --pre-dump` when CRIU cannot track memory
# (its CRIU feature check, libcontainer).
NO_MEMTRACK = "CRIU does not support MemTrack"  # at runc's debug level
MISSING_FEATURES = "CRIU is missing features"  # its error

# The render node the "missing" machine's restore must name.
MISSING_NODE = "/dev/dri/renderD130"
# The workload's libraries the container image needs besides ldd's list.
DATA_FILES = ["/usr/share/libdrm/amdgpu.ids"]
# The container image podman imports rootfs.tar as.
IMAGE = "localhost/kfdemu-workload:1"


# --------------------------------------------------------------------------
# Outside the machines: the container image, podman's configuration
# --------------------------------------------------------------------------

def ldd_libs(binary):
    r = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise NotRun(f"ldd {binary}: {r.stderr.strip()}")
    libs = []
    for line in r.stdout.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                libs.append(p)
    return libs


def make_rootfs(args, rootfs):
    """busybox, the workload at /kfdemu/workload, the shim at
    /kfdemu/libkfdemu_shim.so, and every library they load."""
    busybox = shutil.which("busybox")
    if not busybox:
        raise NotRun("busybox is not installed (Debian busybox-static)")
    for d in ("bin", "kfdemu", "tmp", "dev", "proc", "sys", "run", "etc"):
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)
    shutil.copy2(busybox, os.path.join(rootfs, "bin/busybox"))
    for applet in ("sh", "ls", "cat", "sleep"):
        os.symlink("busybox", os.path.join(rootfs, "bin", applet))
    shutil.copy2(args.workload, os.path.join(rootfs, "kfdemu/workload"))
    shutil.copy2(args.shim, os.path.join(rootfs, "kfdemu/libkfdemu_shim.so"))
    files = set(ldd_libs(args.workload) + ldd_libs(args.shim)) | {f for f in DATA_FILES if os.path.exists(f)}
    for f in sorted(files):
        dst = os.path.join(rootfs, f.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)
    os.chmod(os.path.join(rootfs, "tmp"), 0o1777)


def rootfs_tar(args, work):
    """The container image's file system (make_rootfs) as WORK/rootfs.tar."""
    rootfs = os.path.join(work, "rootfs")
    make_rootfs(args, rootfs)
    subprocess.run(["tar", "-C", rootfs, "-cf", os.path.join(work, "rootfs.tar"), "."], check=True)
    shutil.rmtree(rootfs)


def write_plugin_dir(args, libdir):
    """The adapter first in readdir order (CRIU's load order), then the
    plugin: as the emulator's kfdemu-criu wrapper does."""
    os.makedirs(libdir)
    os.symlink(args.plugin, os.path.join(libdir, os.path.basename(args.plugin)))
    for i in range(256):
        name = f"kfdemu_criu_adapter_{i}.so"
        os.symlink(args.adapter, os.path.join(libdir, name))
        first = [e.name for e in os.scandir(libdir) if e.name.endswith(".so")][0]
        if first == name:
            return
        os.unlink(os.path.join(libdir, name))
    raise NotRun(f"cannot place the adapter first in {libdir}")


def write_criu_side(args, work, root, criu):
    """bin/criu (what runc runs: real CRIU with the shim, as the emulator
    needs) and criu.conf (the container's org.criu.config: our plugin
    directory, --link-remap for libhsakmt's semaphore)."""
    libdir = os.path.join(work, "criu-plugins")
    write_plugin_dir(args, libdir)
    conf = os.path.join(work, "criu.conf")
    with open(conf, "w") as f:
        f.write(f"libdir {libdir}\nlink-remap\n")
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    wrapper = os.path.join(bindir, "criu")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                "# runc's criu: real CRIU on the emulated machine (the shim, per-call connections).\n"
                f"LD_PRELOAD={args.shim} KFDEMU_ROOT={root} KFDEMU_SOCKET={root}/.kfdemu/socket "
                f"KFDEMU_CONNECT=per-call exec {criu} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    return conf


def write_podman_conf(work):
    """podman's CONTAINERS_CONF: runc, cgroupfs, explicit limits."""
    with open(os.path.join(work, "containers.conf"), "w") as f:
        # podman's default RLIMIT_NOFILE (1048576) needs CAP_SYS_RESOURCE.
        f.write('[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n'
                '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')


class Podman:
    """podman with a private storage (one per machine), runc, our criu
    first on PATH, and without the shim (podman, conmon and runc are the
    runtime, not GPU programs)."""

    def __init__(self, work, storage):
        self.base = ["podman", "--root", os.path.join(storage, "root"), "--runroot",
                     os.path.join(storage, "run"), "--tmpdir", os.path.join(storage, "tmp"),
                     "--storage-driver", "vfs"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KFDEMU_") and k != "LD_PRELOAD"}
        env["CONTAINERS_CONF"] = os.path.join(work, "containers.conf")
        env["PATH"] = os.path.join(work, "bin") + ":" + env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        self.env = env

    def run(self, *a, check=True, timeout=PODMAN_TIMEOUT):
        t0 = time.monotonic()
        try:
            r = subprocess.run(self.base + list(a), env=self.env, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failed(f"podman {' '.join(a[:2])}: no end within {timeout}s")
        if check and r.returncode != 0:
            raise Failed(f"podman {' '.join(a)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
        log(f"podman {' '.join(a[:2])}: exit {r.returncode} after {time.monotonic() - t0:.1f}s")
        return r

    def pid(self, name):
        return int(self.run("inspect", "--format", "{{.State.Pid}}", name).stdout.strip())


# --------------------------------------------------------------------------
# Inside a machine (kfd-emu): the phases
# --------------------------------------------------------------------------

def device_nodes(work, machine, minors):
    """Real character devices with the emulated numbers, for --device: what
    the container's runtime copies into its /dev."""
    d = os.path.join(work, f"devnodes-{machine}")
    os.makedirs(d, exist_ok=True)
    nodes = {"/dev/kfd": (os.path.join(d, "kfd"), os.makedev(510, 0))}
    for m in minors:
        nodes[f"/dev/dri/renderD{m}"] = (os.path.join(d, f"renderD{m}"), os.makedev(226, m))
    for path, dev in nodes.values():
        if not os.path.exists(path):
            os.mknod(path, 0o666 | 0o020000, dev)
    return [f"{host}:{inside}" for inside, (host, _) in nodes.items()]


def check_restored(rc, emu, pid, before, gpus, minors, what):
    """The restored init against its dumped snapshot (realcriu_test's
    snapshot, under another host pid: the container's pid namespace keeps
    its own): the fd table by realcriu_test's check (whose daemon
    connections are none here: the container's sockets are in its network
    namespace, which `ss` on the host does not list), then the BOs, device
    mappings and queues (every BO with its dumped contents but doorbell
    pages)."""
    now = rc.check_fds(pid, before, minors, what)
    after = {b["va"]: b for b in emu.ctl("bos", pid)["bos"]}
    for b in before["bos"]:
        a = after.get(b["va"])
        rc.expect(a is not None, f"{what}: BO at {b['va']:#x} missing")
        # A doorbell page is registers, not memory: what a process rang
        # before the dump is not restored (realcriu_test.check_restored).
        rc.expect(a["checksum"] == b["checksum"] or b["type"] == "doorbell",
                  f"{what}: BO at {b['va']:#x}: checksum {a['checksum']} != dumped {b['checksum']}")
        rc.expect(a["size"] == b["size"] and a["type"] == b["type"] and a["gpu_id"] == b["gpu_id"],
                  f"{what}: BO at {b['va']:#x}: {a} != dumped {b}")
        want_gpu = gpus.get(b["actual_gpu_id"], b["actual_gpu_id"])
        rc.expect(a["actual_gpu_id"] == want_gpu,
                  f"{what}: BO at {b['va']:#x} on GPU {a['actual_gpu_id']:#x}, want {want_gpu:#x}")
    want = sorted((v["start"], v["end"], rc.render_path(v["path"], minors)) for v in before["vmas"])
    got = sorted((v["start"], v["end"], v["path"]) for v in emu.ctl("vmas", pid)["vmas"])
    rc.expect(got == want, f"{what}: device mappings {got} != {want}")
    nq = rc.check_running(emu, pid, before, what)
    log(f"{what}: pid {pid}: fd table as dumped ({len(now)} fds), {len(after)} BOs with their dumped contents "
        f"on GPUs {sorted({hex(b['actual_gpu_id']) for b in after.values()})}, {len(got)} device mappings, "
        f"{nq} active queue(s)")


def timens_offsets(pid):
    """/proc/<pid>/timens_offsets, one line: CRIU restores a container in
    a time namespace whose clocks go on from the dumped values."""
    try:
        with open(f"/proc/{pid}/timens_offsets") as f:
            return "; ".join(l.strip() for l in f)
    except OSError as e:
        return f"(unreadable: {e.strerror})"


def criu_logs(storage):
    """The CRIU logs runc left in the container's userdata (--keep)."""
    out = []
    for dirpath, _, files in os.walk(os.path.join(storage, "root")):
        out += [os.path.join(dirpath, f) for f in files if f in ("dump.log", "restore.log")]
    return out


def show_criu_logs(rc, storage):
    """The tails, and copies beside the storage (podman rm removes them)."""
    for i, p in enumerate(criu_logs(storage)):
        rc.show_log(p, 25)
        shutil.copy(p, f"{storage}-{i}-{os.path.basename(p)}")


def plugin_lines(storage, what):
    lines = []
    for p in criu_logs(storage):
        with open(p, errors="replace") as f:
            lines += [l.rstrip() for l in f if "amdgpu_plugin" in l and what in l]
    return lines


def run_container(work, minors, command, image=IMAGE, env=()):
    """WORK/rootfs.tar imported as `image`, and container "gpu" of it run
    on this machine, given `minors`' render nodes, with the shim, the
    machine and `env` NAME=VALUE settings in its environment; its init
    `command(wl)`, wl a directory of this machine it shares (made here).
    Returns (Podman, wl)."""
    pm = Podman(work, os.path.join(work, "storage"))
    wl = os.path.join(work, "wl")
    os.makedirs(wl)
    os.chmod(wl, 0o777)
    root = os.environ["KFDEMU_ROOT"]
    libdir = os.path.join(work, "criu-plugins")
    pm.run("import", os.path.join(work, "rootfs.tar"), image)
    cmd = ["run", "-d", "--name", "gpu", "--network", "none",
           "--annotation", f"org.criu.config={os.path.join(work, 'criu.conf')}",
           # The machine's root (sysfs, device node files, the daemon's
           # socket) and the workload's directory at their paths; the
           # CRIU plugin directory too: the emulator's adapter, run in the
           # restored task, finds the plugin after it there.
           "-v", f"{root}:{root}", "-v", f"{wl}:{wl}", "-v", f"{libdir}:{libdir}:ro",
           "-e", "LD_PRELOAD=/kfdemu/libkfdemu_shim.so", "-e", f"KFDEMU_ROOT={root}",
           "-e", f"KFDEMU_SOCKET={os.environ['KFDEMU_SOCKET']}"]
    for e in env:
        cmd += ["-e", e]
    for d in device_nodes(work, 1, minors):
        cmd += ["--device", d]
    pm.run(*cmd, image, *command(wl))
    return pm, wl


def start_container(rc, emu, work, minors, flags=(), env=()):
    """The workload (with `flags`, and `env` NAME=VALUE settings) as the
    init of container "gpu" on this machine (run_container), given
    `minors`' render nodes. Returns (Podman, its host pid, its directory,
    its snapshot)."""
    pm, wl = run_container(work, minors, lambda wl: ["/kfdemu/workload", *flags, wl], env=env)
    ready = os.path.join(wl, "ready")
    if not rc.wait_for(lambda: os.path.exists(ready), 60, "the workload in the container"):
        log(pm.run("logs", "gpu", check=False).stdout[-3000:])
        raise Failed("the workload did not get ready")
    pid = pm.pid("gpu")
    return pm, pid, wl, rc.snapshot(emu, pid)


def remove_storage(storage):
    """Removes podman's storage directory, retrying for 10 s: in one run of
    .ci/run the removal right after `podman rm -f` failed with ENOTEMPTY
    (a file appeared in a directory while it was being emptied: something
    of podman's still wrote there after `rm` returned)."""
    for _ in range(40):
        try:
            shutil.rmtree(storage)
            return
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.ENOENT):
                raise
            time.sleep(0.25)
    shutil.rmtree(storage)


def save_state(work, state):
    """What a later machine's phase needs of this one's, as WORK/state.json."""
    with open(os.path.join(work, "state.json"), "w") as f:
        json.dump(state, f)


def load_state(work):
    with open(os.path.join(work, "state.json")) as f:
        return json.load(f)


def export_checkpoint(rc, pm, work, state, image=IMAGE):
    """`podman container checkpoint --export` of container "gpu" to
    WORK/gpu.tar.zst and its image saved to WORK/image.tar, for another
    machine; this machine's containers and storage removed, `state` saved
    (save_state)."""
    storage = os.path.join(work, "storage")
    try:
        pm.run("container", "checkpoint", "--export", os.path.join(work, "gpu.tar.zst"), "gpu")
    except Failed:
        show_criu_logs(rc, storage)
        raise
    pm.run("save", "-o", os.path.join(work, "image.tar"), image)
    pm.run("rm", "-f", "-t", "0", "-a")
    # The second host has podman's storage at the same paths (as every
    # host has its /var/lib/containers): podman 4.3 keeps them in the
    # exported container's config (conmon's pid file), but nothing else.
    remove_storage(storage)
    save_state(work, state)


def load_export(work):
    """On the next machine: podman with a new storage, export_checkpoint's
    image loaded. Returns (Podman, its storage, the state saved)."""
    storage = os.path.join(work, "storage")
    pm = Podman(work, storage)
    st = load_state(work)
    pm.run("load", "-i", os.path.join(work, "image.tar"))
    return pm, storage, st


def import_checkpoint(rc, pm, storage, archive):
    """`podman container restore --keep --import` of `archive`; CRIU's
    logs shown when it fails."""
    try:
        pm.run("container", "restore", "--keep", "--import", archive)
    except Failed:
        show_criu_logs(rc, storage)
        raise


def phase_first(args, rc, emu, work):
    minors = [128, 129]
    pm, pid, wl, before = start_container(rc, emu, work, minors)
    ready = os.path.join(wl, "ready")
    gpus_seen = sorted({b["actual_gpu_id"] for b in before["bos"]})
    log(f"container init {pid} (pid {open(ready).readline().strip()} inside): {len(before['bos'])} BOs on GPUs "
        f"{[hex(g) for g in gpus_seen]}, {len(before['vmas'])} device mappings, "
        f"{len(before['queues']['queues'])} queue(s), render fds "
        f"{sorted(v for v in before['fds'].values() if 'renderD' in v)}")
    rc.expect(before["bos"] and before["vmas"] and before["queues"]["queues"],
              "the workload has no BOs, mappings or queues")
    want_gpus = {0xa1a1: 128, 0xb2b2: 129}
    rc.expect(gpus_seen == sorted(g for g, m in want_gpus.items() if m in minors),
              f"the workload uses GPUs {[hex(g) for g in gpus_seen]}, but the container was given renderD{minors}")

    try:
        pm.run("container", "checkpoint", "--keep", "gpu")
        plugin_dump = plugin_lines(os.path.join(work, "storage"), "")
        rc.expect(plugin_dump, "the dump log has no line of amdgpu_plugin: was it loaded through org.criu.config?")
        # The paused process is found in the container's pid namespace
        # (NSpid), so the guardian of a killed CRIU watches it.
        rc.expect(any("guardian started" in l for l in plugin_dump) and
                  not any("no guardian watches it" in l for l in plugin_dump),
                  f"no guardian watched the container's process: {plugin_dump}")
        pm.run("container", "restore", "--keep", "gpu")
    except Failed:
        show_criu_logs(rc, os.path.join(work, "storage"))
        raise
    check_restored(rc, emu, pm.pid("gpu"), before, {}, {}, "restored in place")

    export_checkpoint(rc, pm, work, {"before": before, "wl": wl})


def restore_import(args, rc, emu, pm, storage, st, archive, expected, what):
    """`podman container restore --import`, then the checks of
    `expected` (gpu map, minor map) and the workload's verdict."""
    gpus, minors = expected
    # An earlier restore's verdict left "go" (and "result"): this restored
    # workload must wait for its own, or it runs while it is checked.
    for name in ("go", "result"):
        if os.path.exists(os.path.join(st["wl"], name)):
            os.unlink(os.path.join(st["wl"], name))
    import_checkpoint(rc, pm, storage, archive)
    for line in plugin_lines(storage, "restoring onto"):
        log(f"  {line}")
    pid = pm.pid("gpu")
    check_restored(rc, emu, pid, st["before"], gpus, minors, what)
    log(f"restored init's time namespace (CRIU's; the workload's clock lags the host's): "
        f"{timens_offsets(pid)}")
    v = rc.verdict(st["wl"], pid)
    pm.run("rm", "-f", "-t", "0", "-a")
    rc.expect(v == "OK", f"the restored workload: {v}")


def edit_devices(archive, edited, old, new):
    """The archive with render node `old` replaced by `new`: what a user
    can do, as podman 4.3's restore takes no --device. The container's
    device cgroup comes from the spec (spec.dump; config.dump's spec and
    --device sources), its /dev nodes from CRIU's image of the /dev tmpfs
    (checkpoint/tmpfs-dev-*.tar.gz.img): both are edited."""
    tmp = archive + ".d"
    os.makedirs(tmp)
    subprocess.run(["tar", "-C", tmp, "-xf", archive], check=True)
    for name in ("spec.dump", "config.dump"):
        path = os.path.join(tmp, name)
        with open(path) as f:
            doc = json.load(f)
        spec = doc if name == "spec.dump" else doc["spec"]
        for d in spec["linux"]["devices"] + spec["linux"]["resources"]["devices"]:
            if d.get("major") == 226 and d.get("minor") == old:
                d["minor"] = new
                if "path" in d:
                    d["path"] = f"/dev/dri/renderD{new}"
        for d in doc.get("device_host_src", []):
            d["path"] = d["path"].replace(f"renderD{old}", f"renderD{new}")
        with open(path, "w") as f:
            json.dump(doc, f)
    edit_dev_images(os.path.join(tmp, "checkpoint"), {old: new})
    subprocess.run(["tar", "-C", tmp, "--zstd", "-cf", edited, "."], check=True)
    shutil.rmtree(tmp)


def edit_dev_images(ckpt, renames):
    """CRIU's images of the container's /dev tmpfs in directory `ckpt`
    (tmpfs-dev-<id>.tar.gz.img, gzipped tars) with each render node
    renderD<old> replaced by renderD<new> (its mode, numbers 226:<new>),
    for `renames` {old: new}. Fails when no image holds them all."""
    edited_images = 0
    for img in sorted(n for n in os.listdir(ckpt) if n.startswith("tmpfs-dev-")):
        path = os.path.join(ckpt, img)
        names = subprocess.run(["tar", "-tzf", path], capture_output=True, text=True, check=True).stdout.split()
        if any(f"./dri/renderD{old}" not in names for old in renames):
            continue
        d = path + ".d"
        os.makedirs(d)
        subprocess.run(["tar", "-C", d, "--numeric-owner", "-xpzf", path], check=True)
        modes = {}
        for old in renames:
            node = os.path.join(d, "dri", f"renderD{old}")
            modes[old] = os.stat(node).st_mode
            os.unlink(node)
        for old, new in renames.items():
            os.mknod(os.path.join(d, "dri", f"renderD{new}"), modes[old], os.makedev(226, new))
        subprocess.run(["tar", "-C", d, "--numeric-owner", "-czf", path, "."], check=True)
        shutil.rmtree(d)
        edited_images += 1
    if not edited_images:
        raise Failed(f"no /dev tmpfs image in {ckpt} holds dri/renderD{sorted(renames)}")


def phase_restore(args, rc, emu, work, expected):
    """The archive restored on this machine (`podman container restore
    --import`): `expected` (gpu map, minor map) must hold after it, or,
    None, the restore must fail naming MISSING_NODE and leave no GPU state;
    then the archive with its device list edited must restore here."""
    pm, storage, st = load_export(work)
    archive = os.path.join(work, "gpu.tar.zst")
    what = f"restored on machine {args.phase}"
    if expected is not None:
        restore_import(args, rc, emu, pm, storage, st, archive, expected, what)
        remove_storage(storage)
        return
    r = pm.run("container", "restore", "--keep", "--import", archive, check=False)
    errors = plugin_lines(storage, "Error")
    for line in errors:
        log(f"  {line}")
    rc.expect(r.returncode != 0, f"the restore without {MISSING_NODE} in the container succeeded")
    said = [l for l in errors if MISSING_NODE in l and f"--device {MISSING_NODE}" in l
            and "container runtime must pass it in" in l]
    if not said:
        show_criu_logs(rc, storage)
    rc.expect(said, f"no plugin error names {MISSING_NODE} and that the runtime must pass it in (--device)")
    left = [p for p in emu.ctl("processes")["processes"] if p.get("bos")]
    rc.expect(not left, f"the failed restore left GPU state in the model: {left}")
    pm.run("rm", "-f", "-t", "0", "-a")
    edited = os.path.join(work, "gpu-edited.tar.zst")
    edit_devices(archive, edited, 129, 130)
    log(f"the archive's device list edited: renderD129 -> renderD130 ({os.path.basename(edited)})")
    restore_import(args, rc, emu, pm, storage, st, edited, EDITED, what + ", edited archive")
    remove_storage(storage)


def descendants(pid):
    """`pid` and every process below it, parents first."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo += sorted(kids.get(p, []))
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "(gone)"


def guardians_in(rc, directory):
    """The guardian processes (comm amdgpu-guard) holding `directory`
    open: a dump's guardian keeps its image directory."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and comm(d) == rc.GUARDIAN_COMM:
            try:
                fds = os.listdir(f"/proc/{d}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{d}/fd/{fd}") == directory:
                        out.append(int(d))
                        break
                except OSError:
                    pass
    return out


def phase_killed(args, rc, emu, work):
    """CASE killed: `podman container checkpoint` of the GPU container
    (workload --user-queue, 256 MiB of VRAM per GPU, slow SDMA) run under
    `timeout -s KILL` (podman 4.3's checkpoint has no --timeout), which
    expires (SIGALRM, its timer's signal) while the plugin copies the first
    GPU's VRAM: timeout SIGKILLs its process group (podman, runc and runc's
    criu; what is left of the tree is SIGKILLed too, and said). Then:
    within 1 s of CRIU's end the container's queues are active, within 2 s
    no temporary file and no guardian is left, the guardian's log says it
    resumed the container's process, podman still reports the container
    running, and the workload completes its next SDMA user-queue copy, fence
    and event wait."""
    harness.become_subreaper()  # what the kill orphans comes to us
    pm, pid, wl, before = start_container(rc, emu, work, [128, 129], ["--user-queue"],
                                          [f"KFDEMU_WORKLOAD_VRAM_MIB={rc.KILL_VRAM_MIB}",
                                           f"KFDEMU_WORKLOAD_SDMA_CHECK_MIB={rc.SDMA_CHECK_MIB}"])
    ckpt = os.path.join(pm.run("inspect", "--format", "{{.StaticDir}}", "gpu").stdout.strip(), "checkpoint")
    log(f"container init {pid}: {len(before['bos'])} BOs; CRIU's images go to {ckpt}")
    temps = lambda: sorted(n for n in (os.listdir(ckpt) if os.path.isdir(ckpt) else [])
                           if n.startswith(".amdgpu-") and ".tmp-" in n)
    out = open(os.path.join(work, "checkpoint-killed.log"), "w")
    p = subprocess.Popen(["timeout", "-s", "KILL", str(PODMAN_TIMEOUT)] + pm.base +
                         ["container", "checkpoint", "--keep", "gpu"],
                         env=pm.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    copying = lambda: any(n.startswith(".amdgpu-pages-") for n in temps()) or p.poll() is not None
    rc.expect(rc.wait_for(copying, 60, "the plugin's copy"), "the checkpoint's GPU copy never started")
    rc.expect(p.poll() is None, f"the checkpoint ended ({p.returncode}) before its copy could be interrupted")
    q = emu.ctl("queues", pid)
    rc.expect(q.get("state") == "paused", f"the container's queues are not paused during the copy: {q}")
    tree = descendants(p.pid)
    named = {t: comm(t) for t in tree}
    criu = [t for t, c in named.items() if c == "criu"]
    g = guardians_in(rc, ckpt)
    rc.expect(len(criu) == 1 and len(g) == 1, f"during the copy: processes {named}, guardians {g}")
    tmps = temps()
    groups = {t: os.getpgid(t) for t in tree if os.path.exists(f"/proc/{t}")}
    os.kill(p.pid, signal.SIGALRM)  # timeout's timer expires
    rc.expect(rc.wait_for(lambda: p.poll() is not None, 10), "timeout did not end after its timer's signal")
    left = [t for t in tree if rc.alive(t)]
    if left:
        log(f"outside timeout's process group, SIGKILLed too: {[(t, named[t]) for t in left]}")
        for t in left:
            os.kill(t, signal.SIGKILL)
    rc.expect(rc.wait_for(lambda: not rc.alive(criu[0]), 5), f"CRIU {criu[0]} still runs")
    t0 = time.monotonic()
    log(f"checkpoint killed (timeout exit {p.returncode}) during the copy: processes {named}, process groups "
        f"{groups}; temporary files then {tmps}; guardian {g[0]}")
    running = rc.wait_for(lambda: rc.queues_running(emu, pid), 1.0)
    took = time.monotonic() - t0
    rc.expect(running, f"the container's queues are not running 1 s after CRIU's end: {emu.ctl('queues', pid)}, "
              f"{emu.process(pid)}; guardian log {rc.guardian_log(ckpt)!r}")
    log(f"queues of {pid} active {took:.3f} s after CRIU ended")
    rc.expect(rc.wait_for(lambda: not temps(), 2.0), f"temporary files left in {ckpt}: {temps()}")
    rc.expect(rc.wait_for(lambda: not guardians_in(rc, ckpt), 2.0),
              f"guardian processes left 2 s after: {guardians_in(rc, ckpt)}")
    said = rc.guardian_log(ckpt)
    log(f"guardian log:\n{said.rstrip()}")
    rc.expect(f"pid {pid}: GPU queues resumed (UNPAUSE)" in said, f"the guardian's log does not say it unpaused {pid}")
    for t in tmps:
        rc.expect(f"removed the temporary file {t}" in said, f"the guardian's log does not name {t}")
    state = pm.run("inspect", "--format", "{{.State.Status}}", "gpu", timeout=60).stdout.strip()
    rc.expect(state == "running" and rc.alive(pid), f"the container is {state} (init {pid} alive: {rc.alive(pid)})")
    v = rc.verdict(wl, pid, rc.SLOW_VERDICT_SECONDS)
    rc.expect(v == "OK", f"the container's workload after the killed checkpoint: {v}")


def container_running(rc, emu, pm, pid, before, ckpt, what):
    """After a --leave-running checkpoint or a refused one: podman reports
    the container running with the same init, whose KFD state is live
    (realcriu_test.check_running), and no guardian holds `ckpt`."""
    state = pm.run("inspect", "--format", "{{.State.Status}} {{.State.Pid}}", "gpu").stdout.split()
    rc.expect(state == ["running", str(pid)], f"{what}: the container is {state}, its init was {pid}")
    rc.check_running(emu, pid, before, what)
    rc.expect(rc.wait_for(lambda: not guardians_in(rc, ckpt), 2.0),
              f"{what}: guardian processes left: {guardians_in(rc, ckpt)}")


def dumped_bytes(rc, storage, ckpt, what):
    """The GPU bytes the plugin's summary line says the last dump (runc's
    dump.log, --keep) wrote; checked against the pages files in `ckpt`."""
    logs = [p for p in criu_logs(storage) if os.path.basename(p) == "dump.log"]
    rc.expect(logs, f"{what}: no dump.log kept")
    with open(max(logs, key=os.path.getmtime), errors="replace") as f:
        text = f.read()
    m = rc.SUMMARY_DUMP.search(text)
    rc.expect(m is not None, f"{what}: no summary line of the plugin in the dump log")
    rc.expect(rc.SUMMARY_INCREMENTAL.search(text) is None, f"{what}: the dump says it is incremental")
    total = int(m.group(2))
    rc.expect(rc.pages_payload(ckpt) == total,
              f"{what}: the pages files in {ckpt} hold {rc.pages_payload(ckpt)} bytes, the summary {total}")
    return total


def checksums(snap):
    return {b["va"]: b["checksum"] for b in snap["bos"]}


def restore_in_place(rc, emu, pm, storage, wl, at, what):
    """The killed or exited container restored in place (`podman
    container restore --keep`) and checked against the snapshot `at`."""
    try:
        pm.run("container", "restore", "--keep", "gpu")
    except Failed:
        show_criu_logs(rc, storage)
        raise
    pid = pm.pid("gpu")
    check_restored(rc, emu, pid, at, {}, {}, what)
    return pid


def pre_checkpoint_refused(rc, emu, pm, pid, before, ckpt):
    """Without soft-dirty: `--pre-checkpoint` is refused by runc for
    CRIU's missing memory tracking, before any KFD CRIU call, and the
    container runs on with its GPU."""
    calls = rc.criu_calls(emu)
    # runc --debug (podman --runtime-flag) says which feature is missing.
    r = pm.run("--runtime-flag", "debug", "container", "checkpoint", "--pre-checkpoint", "--keep", "gpu",
               check=False)
    said = [l for l in r.stderr.splitlines() if "CRIU" in l or "criu" in l]
    rc.expect(r.returncode != 0, "podman container checkpoint --pre-checkpoint succeeded without soft-dirty")
    rc.expect(any(NO_MEMTRACK in l for l in said) and any(MISSING_FEATURES in l for l in said),
              f"--pre-checkpoint refused for another reason: {said[-8:]}")
    rc.expect(rc.criu_calls(emu) == calls, "the refused --pre-checkpoint made KFD CRIU calls or GPU copies")
    container_running(rc, emu, pm, pid, before, ckpt, "after the refused --pre-checkpoint")
    log(f"--pre-checkpoint refused as expected without soft-dirty ({NO_MEMTRACK!r}); the container runs on")


def phase_leave_running(args, rc, emu, work):
    """CASE leave-running (see the top)."""
    storage = os.path.join(work, "storage")
    # --named-semaphore: CRIU removes a --link-remap link after a
    # --leave-running dump, so a container whose process created libhsakmt's
    # semaphore (a deleted mapping) cannot be restored from one (README.md).
    pm, pid, wl, before = start_container(rc, emu, work, [128, 129], ["--named-semaphore", "--periodic", "3"])
    ckpt = os.path.join(pm.run("inspect", "--format", "{{.StaticDir}}", "gpu").stdout.strip(), "checkpoint")
    steps = types.SimpleNamespace(work=wl)
    if not rc.tracks_memory(args.criu):
        pre_checkpoint_refused(rc, emu, pm, pid, before, ckpt)
    snaps = []
    for k in (1, 2):
        try:
            pm.run("container", "checkpoint", "--leave-running", "--keep", "gpu")
        except Failed:
            show_criu_logs(rc, storage)
            raise
        what = f"after checkpoint {k} (--leave-running)"
        container_running(rc, emu, pm, pid, before, ckpt, what)
        total = dumped_bytes(rc, storage, ckpt, what)
        snaps.append(rc.snapshot(emu, pid))
        rc.periodic_step(steps, k)  # checks its BOs and GPUs, rewrites a MiB of each VRAM BO
        log(f"{what}: {total} GPU bytes in {ckpt}; the container runs and its GPU work passed")
    rc.expect(checksums(snaps[0]) != checksums(snaps[1]), "the BOs did not change between the checkpoints")
    pm.run("kill", "gpu")
    pm.run("wait", "gpu")
    for name in ("step2", "step2.done"):  # the restored workload waits for step 2 again
        os.unlink(os.path.join(wl, name))
    pid = restore_in_place(rc, emu, pm, storage, wl, snaps[1], "restored from checkpoint 2")
    for k in (2, 3):
        rc.periodic_step(steps, k)
    v = rc.verdict(wl, pid)
    rc.expect(v == "OK", f"the workload restored from checkpoint 2: {v}")
    pm.run("rm", "-f", "-t", "0", "-a")


def phase_pre_checkpoint(args, rc, emu, work):
    """CASE pre-checkpoint (see the top); run_machines has checked that
    CRIU tracks memory."""
    storage = os.path.join(work, "storage")
    pm, pid, wl, before = start_container(rc, emu, work, [128, 129], ["--periodic", "2"])
    static = pm.run("inspect", "--format", "{{.StaticDir}}", "gpu").stdout.strip()
    pre, ckpt = os.path.join(static, "pre-checkpoint"), os.path.join(static, "checkpoint")
    steps = types.SimpleNamespace(work=wl)
    calls = rc.criu_calls(emu)
    try:
        pm.run("container", "checkpoint", "--pre-checkpoint", "--keep", "gpu")
    except Failed:
        show_criu_logs(rc, storage)
        raise
    rc.expect(rc.criu_calls(emu) == calls, "the pre-checkpoint made KFD CRIU calls or GPU copies")
    ours = [n for n in os.listdir(pre) if "amdgpu" in n]
    rc.expect(not ours, f"the pre-checkpoint wrote files of ours: {ours}")
    container_running(rc, emu, pm, pid, before, pre, "after --pre-checkpoint")
    rc.periodic_step(steps, 1)  # checks its BOs and GPUs, rewrites a MiB of each VRAM BO
    last = rc.snapshot(emu, pid)
    try:
        pm.run("container", "checkpoint", "--with-previous", "--keep", "gpu")
    except Failed:
        show_criu_logs(rc, storage)
        raise
    rc.expect(os.path.islink(os.path.join(ckpt, "parent")), f"{ckpt} has no parent link to the pre-checkpoint")
    total = dumped_bytes(rc, storage, ckpt, "the --with-previous checkpoint")
    pid = restore_in_place(rc, emu, pm, storage, wl, last, "restored from the --with-previous checkpoint")
    rc.periodic_step(steps, 2)
    v = rc.verdict(wl, pid)
    rc.expect(v == "OK", f"the workload restored from the --with-previous checkpoint: {v}")
    log(f"--pre-checkpoint, then --with-previous: {total} GPU bytes written whole (a pre-dump hands the plugin "
        f"no GPU memory); restored")
    pm.run("rm", "-f", "-t", "0", "-a")


def machine_helpers(args):
    """Inside a machine: realcriu_test's helpers (its checks raise its
    Failure, a harness.Failed) and `kfd-emu ctl` of this machine."""
    sys.path.insert(0, args.emu_criu_lib)
    import realcriu_test as rc
    return rc, rc.Emu(args.kfd_emu)


def inside(args):
    rc, emu = machine_helpers(args)
    if args.phase == "first":
        phase_first(args, rc, emu, args.work)
    elif args.phase == "killed":
        phase_killed(args, rc, emu, args.work)
    elif args.phase == "leave-running":
        phase_leave_running(args, rc, emu, args.work)
    elif args.phase == "pre-checkpoint":
        phase_pre_checkpoint(args, rc, emu, args.work)
    else:
        phase_restore(args, rc, emu, args.work, MACHINES[args.phase][1])


def write_four_mi210(path):
    """Four MI210 on PCIe, one CPU node (kfd-emu's 2xMI210 profile,
    twice)."""
    gpus = "".join(f"gpu MI210\n  gpu_id 0x{0x1000 + i:x}\n  render_minor {128 + i}\n  numa 0\n"
                   f"  pci_slot 0000:{0x03 + 0x20 * i:02x}:00.0\n" for i in range(4))
    with open(path, "w") as f:
        f.write("# Four MI210 (gfx90a) on PCIe, one CPU node.\nmachine 4xMI210\n"
                "cpu\n  cores 32\n  memory 256G\n  max_engine_clk_ccompute 3500\n" + gpus)


def podman_cleanup(work):
    for storage in ("storage",):
        if os.path.isdir(os.path.join(work, storage)):
            try:
                Podman(work, os.path.join(work, storage)).run("rm", "-f", "-t", "0", "-a", check=False, timeout=60)
            except Exception as e:  # a cleanup failure must not hide the verdict
                log(f"cleanup of {storage}: {e}")


def require_host(args, tools, script=None):
    """What every container test needs, or exit 77 (NOT RUN and why): the
    CRIU of args.criu / args.criu_version in a build without sanitizers
    (realcriu.require_criu) and usable (as root), each (command, Debian
    package) of `tools` installed and answering --version, busybox-static,
    a private mount namespace. Then, once, re-executes `script` (this file
    by default) in that namespace (`unshare -m`): the engine's mounts, and
    anything a failure leaves mounted, end with the test. Returns the CRIU
    binary. `criu check` runs in that namespace, with a /run of its own,
    where the CRIU that runc runs shares its kernel-feature cache
    (realcriu.private_criu_run)."""
    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    if args.private_ns:
        with harness.not_run():
            criu = args.criu or realcriu.find_criu(args.criu_list, args.criu_version)
            keep = realcriu.private_criu_run(args, criu)
            realcriu.require_usable(criu)
            if keep:
                keep()
        return criu
    with harness.not_run():
        criu = realcriu.require_criu(args, check=False)
        for tool, pkg in tools + [("busybox", "busybox-static")]:
            if not shutil.which(tool):
                raise NotRun(f"{tool} is not installed (Debian {pkg}; scripts/install-deps.sh installs it)")
        for tool, _ in tools:
            r = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise NotRun(f"{tool} --version does not run: {(r.stderr or r.stdout).strip()[-300:]}")
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
        if r.returncode != 0:
            raise NotRun(f"unshare -m is not permitted here: {r.stderr.decode().strip()}")
    os.execvp("unshare", ["unshare", "-m", "--propagation", "private"] +
              harness.self_command(script or __file__, "--private-ns"))
    return criu


def run_test(args, script, tools, prefix, inside, run, cleanup, check=lambda criu: None, what=""):
    """The frame of every container test's main: inside a machine (--phase)
    `inside(args)`, its phase; on the host require_host(args, tools,
    script), `check(criu)` (a NotRun it raises ends the test as NOT RUN), a
    new work directory `prefix`*, then `run(args, work, criu)`'s verdict
    with `cleanup(work)` after it (harness.conclude)."""
    if args.phase:
        harness.run_phase(lambda: inside(args))
    criu = require_host(args, tools, script)
    with harness.not_run():
        check(criu)
    work = harness.work_dir(prefix)
    log(f"CRIU {criu}, {what}work {work}")
    harness.conclude(lambda: run(args, work, criu), work, args.keep, lambda: cleanup(work))


def add_common_args(ap):
    """The arguments of every container test (CMakeLists.txt here)."""
    ap.add_argument("--criu-list", default="")
    ap.add_argument("--criu-version", default="")
    ap.add_argument("--criu", default="")
    ap.add_argument("--realcriu-lib", required=True)
    ap.add_argument("--emu-criu-lib", required=True, help="tests/emulator/criu (realcriu_test.py)")
    ap.add_argument("--kfd-emu", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--sanitized", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--phase", default="", help=argparse.SUPPRESS)
    ap.add_argument("--work", default="", help=argparse.SUPPRESS)
    ap.add_argument("--private-ns", action="store_true", help=argparse.SUPPRESS)


def run_machines(args, work, criu):
    """The container image, runc's criu and podman's configuration, then
    the case's machines one after the other, each running this script's
    phase (--phase) inside it; True when each phase passed."""
    root = os.path.join(work, "machine")
    rootfs_tar(args, work)
    write_criu_side(args, work, root, criu)
    write_podman_conf(work)
    write_four_mi210(os.path.join(work, FOUR_MI210))
    me = harness.self_command(__file__, "--work", work, "--criu", criu)
    emu = [args.kfd_emu, "--root", root]
    first, phase = FIRST, args.case if args.case in OWN_PHASE else "first"
    if args.case == "killed":
        sys.path.insert(0, args.emu_criu_lib)
        import realcriu_test
        first = FIRST[:1] + [realcriu_test.slow_machine(work, MACHINE)] + FIRST[2:]
    log(f"first machine: {' '.join(first)}")
    rc = subprocess.run(emu + first + ["--"] + me + ["--phase", phase]).returncode
    for name in CASES[args.case]:
        if rc != 0:
            break
        machine = MACHINES[name][0]
        machine = [os.path.join(work, m) if m == FOUR_MI210 else m for m in machine]
        log(f"machine {name}: {' '.join(machine)}")
        rc = subprocess.run(emu + machine + ["--"] + me + ["--phase", name]).returncode
    return rc == 0


def require_memory_tracking(args, criu):
    """--case pre-checkpoint: CRIU able to track memory, or NotRun."""
    if args.case != "pre-checkpoint":
        return
    sys.path.insert(0, args.emu_criu_lib)
    import realcriu_test
    if not realcriu_test.tracks_memory(criu):
        raise NotRun("podman container checkpoint --pre-checkpoint runs runc checkpoint --pre-dump, which "
                     f"runc refuses ({NO_MEMTRACK!r}) unless CRIU can track memory: the kernel's "
                     "soft-dirty bits (CONFIG_MEM_SOFT_DIRTY), absent here (criu check --feature "
                     "mem_dirty_track fails); --case leave-running checks that refusal")


def main():
    ap = argparse.ArgumentParser()
    add_common_args(ap)
    ap.add_argument("--case", choices=sorted(CASES), default="all")
    args = ap.parse_args()

    run_test(args, __file__, [("podman", "podman"), ("runc", "runc")], "kfdemu-container.", inside, run_machines,
             podman_cleanup, check=lambda criu: require_memory_tracking(args, criu), what=f"case {args.case}, ")


if __name__ == "__main__":
    main()
