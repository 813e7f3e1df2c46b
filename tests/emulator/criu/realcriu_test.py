#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Real CRIU dumps and restores libhsakmt processes on the emulated GPU.

    realcriu_test.py --criu-list LIST --criu-version V --realcriu-lib DIR \
        --kfd-emu K --wrapper W --workload X --machine NAME \
        --scenario SCENARIO [--plugin P.so] [--emu-fault RULE] [--keep]

The CRIU binary is the one scripts/build-criu.sh listed for V in LIST
(tests/realcriu's realcriu.find_criu; `--criu PATH` names one directly).
Each scenario runs under `kfd-emu --machine NAME` (with a --fault for each
--emu-fault) the workload (kfdemu_criu_workload), real CRIU through the
kfdemu-criu wrapper (the adapter first, then the plugin under test), and
checks (see README.md, "Real CRIU"). The scenarios are the rows of
SCENARIOS below: each says what runs, with which workload flags, CRIU
environment and machine, what it checks (--help lists them) and which CTest
tests it is registered as (--list, read by criu.cmake at configure time),
so a new scenario is one row.

Exit: 0 pass, 1 fail, 77 NOT RUN (CRIU not listed / not usable, not root,
sanitizer build, no upstream plugin for --interop; pre-copy on a kernel
without soft-dirty tracking, pre-copy-untracked on one with it).
"""
import argparse
import functools
import json
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import textwrap
import time
from typing import Callable, NamedTuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import harness  # noqa: E402
from harness import log  # noqa: E402

CRIU_TIMEOUT = 120
STREAM_BOUND = 256 << 10  # KFD_MAX_BUFFER_SIZE of the stream scenario

# other-machine: the two machines (kfd-emu overrides; the second profile if
# not the first's) and the GPU mapping the plugin must find (first machine's
# gpu_id -> second's, minors likewise).
OTHER_MACHINE = {
    "MI100": {
        "first": ["--gpu-ids", "0xa1a1", "--minors", "128"],
        "second": ["--gpu-ids", "0x1111", "--minors", "140"],
        "gpus": {0xa1a1: 0x1111},
        "minors": {128: 140},
    },
    # VRAM 64G,32G on the first and 32G,64G on the second: the 64G GPU can
    # only go to the second machine's 64G GPU (the plugin's vram_size rule),
    # so the GPUs change order.
    "2xMI210": {
        "first": ["--gpu-ids", "0xa1a1,0xb2b2", "--minors", "128,129", "--vram", "64G,32G"],
        "second": ["--gpu-ids", "0x1111,0x2222", "--minors", "140,135", "--vram", "32G,64G"],
        "gpus": {0xa1a1: 0x2222, 0xb2b2: 0x1111},
        "minors": {128: 135, 129: 140},
    },
    # A 2-GPU node (PCIe, peer links) onto the 8-GPU XGMI node, whose
    # device cgroup gives the restore the two GPUs of its second CPU node
    # (KFD restores onto as many GPUs as the cgroup allows).
    "2xMI300X": {
        "first": [],
        "second_machine": "8xMI300X",
        "second": ["--device-cgroup", "132,133"],
        "gpus": {0x3a07: 0xc358, 0xd259: 0x7b6a},
        "minors": {128: 132, 129: 133},
    },
    # The 8-GPU XGMI node onto another of its kind, every GPU another
    # gpu_id and render minor (dedup-other-machine's replicas). The hive is
    # a full mesh, so any mapping that keeps the GPUs of a CPU node together
    # fits: the plugin's choice is read from its restore log and checked
    # for that (chosen_mapping). gpu_id -> render minor, by CPU node.
    "8xMI300X": {
        "first": [],
        "second": ["--gpu-ids", "0x1a01,0x1a02,0x1a03,0x1a04,0x1a05,0x1a06,0x1a07,0x1a08",
                   "--minors", "150,151,152,153,154,155,156,157"],
        "numa_first": [{0x6a01: 128, 0x2f13: 129, 0x91c4: 130, 0x4e27: 131},
                       {0xc358: 132, 0x7b6a: 133, 0x1d8e: 134, 0xe4b2: 135}],
        "numa_second": [{0x1a01 + i: 150 + i for i in range(4)}, {0x1a05 + i: 154 + i for i in range(4)}],
    },
}


# refused-8xMI300X: the machine the restore is refused on.
REFUSING_MACHINE = "8xMI300X"


class Failure(harness.Failed):
    """A failed step; `after_dump`: the dump had succeeded (the phase exits
    3, not harness.STEP_FAILED)."""

    def __init__(self, what, after_dump=False):
        super().__init__(what)
        self.after_dump = after_dump


def expect(cond, what, after_dump=True):
    if not cond:
        raise Failure(what, after_dump)


def wait_for(pred, timeout, what=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    if what:
        log(f"timed out after {timeout}s waiting for {what}")
    return False


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] not in "ZX"
    except OSError:
        return False


def show_log(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            tail = f.readlines()[-lines:]
    except OSError:
        return
    log(f"--- last {len(tail)} lines of {path}")
    for line in tail:
        sys.stdout.write("    " + line)
    sys.stdout.flush()


def plugin_errors(path):
    """The plugin's error lines in a CRIU log ("amdgpu_plugin: Error: ...")."""
    try:
        with open(path, errors="replace") as f:
            return [l.rstrip("\n") for l in f if "amdgpu_plugin: Error:" in l]
    except OSError:
        return []


class Emu:
    """`kfd-emu ctl` of the machine we run in."""

    def __init__(self, kfd_emu):
        self.kfd_emu = kfd_emu

    def ctl(self, *query):
        r = subprocess.run([self.kfd_emu, "ctl", *map(str, query)], capture_output=True, text=True,
                           timeout=30)
        return json.loads(r.stdout if r.returncode == 0 else r.stderr)

    def faults(self, spec):
        subprocess.run([self.kfd_emu, "ctl", "faults", spec], check=True, capture_output=True, timeout=30)

    def process(self, pid):
        for p in self.ctl("processes")["processes"]:
            if p["pid"] == pid:
                return p
        return None


# --------------------------------------------------------------------------
# What the checks compare: fd table, daemon connections, BOs, mappings, queues
# --------------------------------------------------------------------------

def fd_table(pid):
    """{fd: target} from /proc/PID/fd (the shim answers readlink of device
    fds with the device path)."""
    out = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            pass
    return out


def daemon_connections(pid):
    """The fds of PID that are Unix stream sockets connected to the
    daemon's socket ($KFDEMU_SOCKET), from `ss -xap`: a client socket's peer
    is the daemon's accepted socket, which carries the listener's path."""
    sock = os.environ["KFDEMU_SOCKET"]
    r = subprocess.run(["ss", "-x", "-a", "-p", "-n", "-H"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise Failure(f"ss -xap failed: {r.stderr.strip()}")
    local_path = {}
    rows = []
    for line in r.stdout.splitlines():
        t = line.split()
        if len(t) < 8:
            continue
        try:
            ino, peer = int(t[5]), int(t[7])
        except ValueError:
            continue
        local_path[ino] = t[4]
        rows.append((ino, peer, " ".join(t[8:])))
    fds = set()
    for ino, peer, procs in rows:
        for m in re.finditer(r"pid=(\d+),fd=(\d+)", procs):
            if int(m.group(1)) == pid and local_path.get(peer) == sock:
                fds.add(int(m.group(2)))
    return fds


def queue_sig(q):
    return sorted((x["gpu_id"], x["type"], x["ring_base"], x["ring_size"], x["priority"]) for x in q["queues"])


def snapshot(emu, pid):
    return {
        "pid": pid,
        "fds": {str(k): v for k, v in fd_table(pid).items()},
        "daemon_fds": sorted(daemon_connections(pid)),
        "bos": emu.ctl("bos", pid)["bos"],
        "vmas": emu.ctl("vmas", pid)["vmas"],
        "queues": emu.ctl("queues", pid),
    }


def render_path(path, minors):
    m = re.fullmatch(r"/dev/dri/renderD(\d+)", path)
    if m and minors:
        return f"/dev/dri/renderD{minors.get(int(m.group(1)), 'unmapped-' + m.group(1))}"
    return path


def check_running(emu, pid, before, what):
    """The process's KFD state is live: not paused, not evicted, its queues
    (as many as before, the same rings) active, but those dumped inactive."""
    p = emu.process(pid)
    expect(p is not None, f"{what}: the model has no process {pid}")
    expect(not p["paused"] and not p["evicted"],
           f"{what}: process {pid} paused={p['paused']} evicted={p['evicted']} (evict_count {p['evict_count']})")
    q = emu.ctl("queues", pid)
    was = {x["id"]: x["state"] for x in before["queues"]["queues"]}
    expect(q.get("state") == "active" and
           all(x["state"] == ("inactive" if was.get(x["id"]) == "inactive" else "active") for x in q["queues"]),
           f"{what}: queues of {pid} not active: {q}")
    expect(queue_sig(q) == queue_sig(before["queues"]),
           f"{what}: queues of {pid} {queue_sig(q)} != before {queue_sig(before['queues'])}")
    return len(q["queues"])


def check_fds(pid, before, minors, what, extra=frozenset()):
    """The fd table equals the one before, by number and target (render
    nodes through `minors`); sockets: the daemon connections are the same
    numbers and connected to the daemon now too, other sockets and pipes by
    type. `extra`: fds not compared (one known to be left by another)."""
    now = {fd: t for fd, t in fd_table(pid).items() if fd not in extra}
    then = {int(k): v for k, v in before["fds"].items()}
    expect(sorted(now) == sorted(then),
           f"{what}: fd numbers {sorted(now)} != before {sorted(then)}; extra "
           f"{ {k: now[k] for k in now.keys() - then.keys()} }, missing { {k: then[k] for k in then.keys() - now.keys()} }")
    daemon_now = daemon_connections(pid)
    expect(daemon_now == set(before["daemon_fds"]),
           f"{what}: daemon connections at fds {sorted(daemon_now)} != before {before['daemon_fds']}")
    for fd, target in then.items():
        anon = re.fullmatch(r"(socket|pipe|anon_inode):.*", target)
        if anon:
            expect(now[fd].startswith(anon.group(1) + ":"), f"{what}: fd {fd} is {now[fd]}, was {target}")
        else:
            want = render_path(target, minors)
            expect(now[fd] == want or now[fd] == cr_link_name(want),
                   f"{what}: fd {fd} is {now[fd]}, want {want} (dumped: {target})")
    return now


def cr_link_name(path):
    """The name CRIU restores a deleted file under when another file has
    taken its name meanwhile (files-reg.c: "<path>.cr_link", then unlinked),
    e.g. libhsakmt's /dev/shm/hsakmt_shared_mem created again by another
    ROCm process on the machine. None for a file that was not deleted."""
    suffix = " (deleted)"
    return path[:-len(suffix)] + ".cr_link" + suffix if path.endswith(suffix) else None


def check_restored(emu, pid, before, gpus=None, minors=None, unchecked_vas=()):
    """The restored process against its dumped snapshot (see roundtrip).
    Contents first: a restore that lost GPU memory says so before anything
    else it got wrong. `unchecked_vas`: BOs whose contents may change after
    the snapshot, so only their placement is checked here (queues' CWSR
    areas, where the dump's pause saves the waves of a dispatch in flight;
    memory the caller compares with the dump's own copy)."""
    after = {b["va"]: b for b in emu.ctl("bos", pid)["bos"]}
    for b in before["bos"]:
        va = b["va"]
        expect(va in after, f"BO at {va:#x} missing after restore")
        a = after[va]
        # A doorbell page is registers, not memory: what a process rang
        # before the dump is not restored (on a GPU neither).
        expect(a["checksum"] == b["checksum"] or b["type"] == "doorbell" or va in unchecked_vas,
               f"BO at {va:#x}: checksum {a['checksum']} != dumped {b['checksum']}")
        expect(a["gpu_id"] == b["gpu_id"], f"BO at {va:#x}: user gpu_id {a['gpu_id']} != dumped {b['gpu_id']}")
        want_gpu = gpus[b["actual_gpu_id"]] if gpus else b["actual_gpu_id"]
        expect(a["actual_gpu_id"] == want_gpu,
               f"BO at {va:#x}: on GPU {a['actual_gpu_id']:#x}, want {want_gpu:#x}")
        expect(a["size"] == b["size"] and a["type"] == b["type"], f"BO at {va:#x}: {a} != dumped {b}")
    fds = check_fds(pid, before, minors, "restored")
    vmas_after = emu.ctl("vmas", pid)["vmas"]
    want = sorted((v["start"], v["end"], render_path(v["path"], minors)) for v in before["vmas"])
    got = sorted((v["start"], v["end"], v["path"]) for v in vmas_after)
    expect(got == want, f"device mappings after restore {got} != {want}")
    nq = check_running(emu, pid, before, "restored")
    log(f"restored {pid}: fd table as dumped ({len(fds)} fds, daemon connections at {before['daemon_fds']}),"
        f" {len(after)} BOs with dumped contents, {len(got)} device mappings, {nq} active queue(s)")


def verdict(work, pid, timeout=60):
    """Lets the workload in `work` go on and returns its verdict."""
    open(os.path.join(work, "go"), "w").close()
    result = os.path.join(work, "result")
    wait_for(lambda: os.path.exists(result) or not alive(pid), timeout, f"the verdict of {pid}")
    wait_for(lambda: os.path.exists(result), 2)
    v = open(result).read().strip() if os.path.exists(result) else f"(no result: {pid} died or hangs)"
    log(f"workload {pid} ({work}): {v}")
    return v


def wait_exit(pid, timeout):
    """Exit status of `pid`, our child or (restored, reparented to us as the
    subreaper) our orphan; None on timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    return None


def expect_none_left(run, pid, what):
    """After a restore of `pid` that failed or was refused: within 5 s no
    such process runs, no child of ours is left, and the model holds no
    process of that pid."""
    expect(wait_for(lambda: not alive(pid), 5), f"{what}: process {pid} is alive")
    left = reap_children()
    expect(not left, f"{what}: processes left: {left}")
    expect(wait_for(lambda: run.emu.process(pid) is None, 5),
           f"{what}: the model still has process {pid}: {run.emu.process(pid)}")


def reap_children():
    """Reaps our ended children; returns the pids of those still alive
    (we are a subreaper, so orphaned restored tasks are among them)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    kids = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                kids.update(int(x) for x in f.read().split())
        except OSError:
            pass
    return sorted(k for k in kids if alive(k))


# --------------------------------------------------------------------------
# The steps
# --------------------------------------------------------------------------

class Run:
    def __init__(self, args, criu, work):
        self.args = args
        self.criu = criu
        self.work = work
        # (tests/rocm reuses this class with arguments of its own, without --images-dir)
        self.images = getattr(args, "images_dir", "") or os.path.join(work, "images")
        self.version = getattr(args, "criu_version", "")
        self.emu = Emu(args.kfd_emu)
        self.wl = None
        # (tests/rocm's scenarios are not in SCENARIOS: PLAIN)
        self.sc = SCENARIOS.get(args.scenario, PLAIN)
        self.env = dict(os.environ, **dict(self.sc.criu_env))
        # Upstream's plugin reads complete pages files only: a checkpoint it
        # restores is dumped without deduplication (a deduplicated one
        # needs amdgpu-img flatten first; the man page, DEDUPLICATION). A
        # tree's processes share some of the runtime's chunks.
        if getattr(args, "interop", "") == "upstream-restore":
            self.env["KFD_DEDUP"] = "0"
        # CRIU's log level: -v4 (debug) but for log-default (CRIU's default, 2).
        self.verbosity = ["-v4"] if self.sc.verbose else []
        self.stream = self.sc.stream
        self.streamer = None
        self.criu_pids = {}

    def dirs(self):
        """The workload directories: the process's, and its child's (tree,
        scm-holder)."""
        tree = "--tree" in self.sc.flags or "--scm-holder" in self.sc.flags
        return [self.work] + ([os.path.join(self.work, "child")] if tree else [])

    def start(self):
        """Starts the workload; returns [(dir, pid)] once all are ready."""
        # CRIU's --link-remap files (link_remap.<id> beside the unlinked
        # file) that were there before (mixed: each dump's are set aside).
        if not hasattr(self, "remaps_before"):
            self.remaps_before = set(glob.glob("/dev/shm/link_remap.*"))
        os.makedirs(self.images, exist_ok=True)
        out = open(os.path.join(self.work, "workload.log"), "w")
        cmd = [self.args.workload, *self.sc.flags, *(self.sc.interop_flags if self.args.interop else ()), self.work]
        self.wl = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        out.close()
        readies = [os.path.join(d, "ready") for d in self.dirs()]
        if not wait_for(lambda: all(map(os.path.exists, readies)) or self.wl.poll() is not None, 60,
                        "the workload"):
            self.wl.kill()
            raise Failure("workload not ready")
        if self.wl.poll() is not None:
            show_log(os.path.join(self.work, "workload.log"))
            raise Failure(f"workload exited early ({self.wl.returncode})")
        procs = []
        for d, r in zip(self.dirs(), readies):
            with open(r) as f:
                procs.append((d, int(f.readline())))
        expect(procs[0][1] == self.wl.pid, f"workload pid {procs[0][1]} != {self.wl.pid}", False)
        return procs

    def plugin_for(self, action):
        """The plugin CRIU loads for `action`: --interop puts upstream's on
        one side."""
        upstream = getattr(self.args, "upstream_so", "")
        if upstream and action == getattr(self.args, "interop", "").split("-")[-1]:
            return upstream
        return self.args.plugin

    def criu_run(self, action, extra, log_name):
        plugin = self.plugin_for(action)
        wrapper = [self.args.wrapper] + (["--plugin", plugin] if plugin else [])
        # --link-remap: libhsakmt maps glibc's temporary semaphore file
        # /dev/shm/sem.XXXXXX, unlinked after sem_open linked it under its
        # name (see README.md "Real CRIU").
        cmd = wrapper + ["--", self.criu, action] + extra + ["-o", log_name, "-D", self.images] + \
            self.verbosity + ["--link-remap"] + (["--stream"] if self.stream else [])
        if self.stream:
            self.start_streamer("capture" if action == "dump" else "serve")
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=self.env)
        self.criu_pids[action] = p.pid  # the wrapper execs CRIU
        try:
            rc = p.wait(timeout=CRIU_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise Failure(f"criu {action} did not end within {CRIU_TIMEOUT}s (hang)", action == "restore")
        log(f"criu {action}: exit {rc} after {time.monotonic() - t0:.3f}s")
        if self.stream:
            self.end_streamer(rc)
        return rc

    def start_streamer(self, mode):
        """The stand-in image streamer for `criu --stream`, listening in
        the image directory."""
        self.store = os.path.join(self.work, "stream-store")
        self.report = os.path.join(self.work, "stream-report.json")
        cmd = [sys.executable, self.args.streamer, mode, "--images-dir", self.images, "--store", self.store]
        if mode == "serve":
            # The adapter reads mm-<pid>.img from the image directory (the
            # VMAs' lengths): a copy there, none of the plugin's files.
            cmd += ["--report", self.report, "--copy-out", "mm-*.img"]
        self.streamer = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.streamer.stdout.readline().strip()
        expect(line == "socket-init", f"streamer {mode} did not start: {line!r}", mode == "serve")

    def end_streamer(self, criu_rc):
        try:
            rc = self.streamer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.streamer.kill()
            self.streamer.wait()
            rc = "hang"
        self.streamer = None
        log(f"streamer: exit {rc}")
        expect(criu_rc != 0 or rc == 0, f"the image streamer failed ({rc}) while CRIU succeeded")

    def dump(self, pids):
        rc = self.criu_run("dump", ["-t", str(pids[0])], "dump.log")
        if rc != 0:
            show_log(os.path.join(self.images, "dump.log"))
            raise Failure(f"criu dump failed ({rc})")
        self.wl.wait(timeout=30)
        log(f"dumped: workload ended with {self.wl.returncode}")
        self.wl = None
        # The pids must be free for the restore: a dumped child is our
        # zombie (we are its subreaper) until reaped.
        expect(wait_for(lambda: not reap_children() and not any(os.path.exists(f"/proc/{p}") for p in pids), 10,
                        "the dumped tasks to go"), f"dumped tasks {pids} still exist", False)

    def restore(self, pid):
        pidfile = os.path.join(self.work, "restored.pid")
        rc = self.criu_run("restore", ["-d", "--pidfile", pidfile], "restore.log")
        if rc != 0:
            show_log(os.path.join(self.images, "restore.log"))
            raise Failure(f"criu restore failed ({rc})", True)
        with open(pidfile) as f:
            rpid = int(f.read().strip())
        expect(rpid == pid, f"restored pid {rpid} != {pid}")

    def verdicts(self, procs):
        # The child's first: the parent's verdict waits for the child.
        for d, pid in reversed(procs):
            v = verdict(d, pid)
            if v != "OK":
                show_log(os.path.join(self.work, "workload.log"))
            expect(v == "OK", f"workload {pid}: {v}")

    def cleanup(self):
        if self.streamer is not None and self.streamer.poll() is None:
            self.streamer.kill()
            self.streamer.wait()
        if self.wl is not None and self.wl.poll() is None:
            self.wl.kill()
            self.wl.wait()
        for pid in reap_children():
            os.kill(pid, signal.SIGKILL)
        # The dump's --link-remap files stay: a restore phase after this
        # one (other-machine) needs them, and the test's /dev/shm is its
        # own (harness.private_dev_shm), gone with the test.
        reap_children()


def round_trip(run):
    if getattr(run.args, "interop", ""):
        return interop_round_trip(run)
    procs = run.start()
    before = {pid: snapshot(run.emu, pid) for _, pid in procs}
    for pid, s in before.items():
        log(f"workload {pid}: {len(s['bos'])} BOs, {len(s['vmas'])} device mappings, {len(s['fds'])} fds"
            f" (daemon connections at {s['daemon_fds']}), {len(s['queues']['queues'])} queue(s)")
        expect(s["bos"] and s["vmas"] and s["queues"]["queues"], "the workload has no BOs, mappings or queues",
               False)
    run.dump([pid for _, pid in procs])
    started = "amdgpu_plugin: guardian started (pid "
    dump_log = open(os.path.join(run.images, "dump.log"), errors="replace").read()
    # Upstream's plugin (--interop, or bench.py's --plugin) prints no
    # configuration line and starts no guardian.
    if not run.verbosity or "amdgpu_plugin: configuration:" not in dump_log:
        started = ""  # no debug lines, or upstream's plugin
    expect(started in dump_log, "the dump log does not say the guardian started", False)
    expect(not (still := guardians_left()), f"guardian processes left after the dump: {still}", False)
    run.restore(procs[0][1])
    expect(not (still := guardians_left()), f"guardian processes left after the restore: {still}")
    for _, pid in procs:
        check_restored(run.emu, pid, before[pid])
    run.verdicts(procs)


def scm_holder_refused(run):
    """scm-holder: the parent holds its child's /dev/kfd file, received
    through a Unix socket. CRIU would restore the file in the parent (a
    shared file goes to the task of lowest pid), where KFD cannot recreate
    the child's GPU state: the dump is refused, and both run on as the
    kernel has them (the child's queues active, the parent refused)."""
    procs = run.start()
    (_, holder), (_, owner) = procs
    before = snapshot(run.emu, owner)
    held = [fd for fd, t in fd_table(holder).items() if t == "/dev/kfd"]
    log(f"holder {holder}: /dev/kfd at fd {held}; owner {owner}: {len(before['bos'])} BOs, "
        f"{len(before['queues']['queues'])} queue(s)")
    expect(len(held) == 1, f"the holder {holder} holds /dev/kfd at {held}, want one fd", False)
    expect(run.emu.process(holder) is None, f"the model has a KFD process for the holder {holder}", False)
    holder_before = {"fds": {str(k): v for k, v in fd_table(holder).items()},
                     "daemon_fds": sorted(daemon_connections(holder))}
    rc = run.criu_run("dump", ["-t", str(holder)], "dump.log")
    dump_log = os.path.join(run.images, "dump.log")
    expect(rc != 0, "criu dump of a /dev/kfd file its owner's parent holds succeeded: its restore would fail",
           False)
    errs = plugin_errors(dump_log)
    want = f"pid {owner}'s /dev/kfd file is also held by pid {holder}, which CRIU would restore it in"
    if not any(want in e for e in errs):
        show_log(dump_log)
    expect(any(want in e for e in errs), f"no plugin error says '{want}': {errs}", False)
    log(f"dump refused as it must; the plugin said: {errs[0].strip()}")
    ours = sorted(n for n in os.listdir(run.images) if OURS.fullmatch(n)) + temp_files(run.images)
    expect(not ours, f"files of ours left by the refused dump: {ours}", False)
    expect(not (still := guardians_left()), f"guardian processes left after the dump: {still}", False)
    for pid in (holder, owner):
        expect(alive(pid), f"the workload {pid} did not survive the refused dump", False)
    check_fds(owner, before, None, "owner after the refused dump")
    check_fds(holder, holder_before, None, "holder after the refused dump")
    nq = check_running(run.emu, owner, before, "after the refused dump")
    expect(run.emu.process(holder) is None, f"the model has a KFD process for the holder {holder}", False)
    log(f"after the refused dump: {holder} and {owner} run, fd tables unchanged, {owner} not paused, "
        f"{nq} active queue(s)")
    run.verdicts(procs)
    run.wl.wait(timeout=30)


OURS = re.compile(r"amdgpu-[^/]*\.img")  # every file of the plugin
PAGES = re.compile(r"amdgpu-(drm-)?pages-[^/]*\.img")
PAGES_SEAL = 32  # bytes after a pages file's payload (src/image/pages_file.h)


# --interop: the workload's GEM BOs as upstream's plugin can carry them.
# All CPU-mappable: upstream asks every GEM BO's mmap offset
# (DRM_IOCTL_AMDGPU_GEM_MMAP, in amdgpu_plugin_drm_dump_file and
# amdgpu_plugin_drm_restore_file), which the kernel refuses (EPERM) for a BO
# made with AMDGPU_GEM_CREATE_NO_CPU_ACCESS (amdgpu_mode_dumb_mmap). At GPU
# VAs 64 GiB up: upstream's sdma_copy_bo maps its staging BOs in the
# process's VM at VAs of a fresh libdrm VA manager (4 GiB up), which the
# kernel refuses (EINVAL, amdgpu_vm_bo_map) where the process's own mappings
# already are; its dump then writes those BOs without contents and exits 0.
# Not above the hole: upstream's restore maps at the masked 48-bit address
# GET_MAPPING_INFO reports, which GEM_VA refuses as inside the hole.
INTEROP_GEM_FLAGS = ("--gem-cpu-visible", "--gem-va-offset")

# --interop: what upstream's plugin is known to get wrong, each with the log
# line that shows it (the test says it and checks the rest; it never hides
# it). criu-dev's parallel restore of a single process on 2+ GPUs reads every
# GPU after the first past the end of its pages file and exits 0; its thread
# logs "Unable to read file (read:N buf_len:M)" and "failed to read from
# storage".
UPSTREAM_PARALLEL_DEFECT = re.compile(r"Unable to read file \(read:\d+ buf_len:\d+\)|failed to read from storage")


def upstream_errors(path):
    """Upstream's plugin's error lines in a CRIU log (CRIU's "Error (<file>:
    <line>): amdgpu_plugin: ..."), but for its probe for a KFD image under
    each render file's id, whose miss it logs as an error and then restores
    the file as a render node."""
    try:
        with open(path, errors="replace") as f:
            return [l.rstrip("\n") for l in f if re.search(r"Error \(amdgpu_plugin[^)]*\): amdgpu_plugin: ", l)
                    and not re.search(r"amdgpu-kfd-\d+\.img: Failed to open for read", l)]
    except OSError:
        return []


def interop_fds(run, pid, before):
    """check_fds, except that upstream's restore is known to leave render-node
    fds the dumped process did not have: those are named as its defect."""
    extra = {fd: t for fd, t in fd_table(pid).items() if str(fd) not in before["fds"]}
    if run.args.interop == "upstream-restore" and extra and \
            all(re.fullmatch(r"/dev/dri/renderD\d+", t) for t in extra.values()):
        log(f"KNOWN UPSTREAM DEFECT: upstream's restore leaves {pid} render-node fds it did not have: {extra};"
            f" every dumped fd is checked")
    else:
        extra = {}
    return len(check_fds(pid, before, None, f"restored {pid}", set(extra)))


def interop_round_trip(run):
    """--interop: upstream's plugin dumps and ours restores, or the reverse,
    on one machine (see the header)."""
    procs = run.start()
    before = {pid: snapshot(run.emu, pid) for _, pid in procs}
    for pid, s in before.items():
        expect(s["bos"] and s["queues"]["queues"], "the workload has no BOs or queues", False)
    run.dump([pid for _, pid in procs])
    names = sorted(n for n in os.listdir(run.images) if OURS.fullmatch(n))
    log(f"{run.args.interop}: {run.plugin_for('dump') or 'our plugin'} dumped {names}")
    run.restore(procs[0][1])
    restore_log = os.path.join(run.images, "restore.log")
    gpus = {b["actual_gpu_id"] for s in before.values() for b in s["bos"]}
    # GPUs whose BOs upstream's parallel restore left without contents.
    unfilled = set()
    errors = []
    if run.args.interop == "upstream-restore":
        errors = upstream_errors(restore_log)
        if errors:
            expect(all(UPSTREAM_PARALLEL_DEFECT.search(e) for e in errors) and len(procs) == 1 and
                   len(gpus) > 1 and run.version.startswith("dev"),
                   f"upstream's restore logged errors that no known defect explains: {errors[:5]}")
            log(f"KNOWN UPSTREAM DEFECT: criu-dev's parallel restore of one process on {len(gpus)} GPUs reads "
                f"the GPUs after the first past their pages files and exits 0; it logged {len(errors)} error "
                f"line(s), e.g.: {errors[0].strip()}")
    else:
        expect(not plugin_errors(restore_log), f"our restore logged errors: {plugin_errors(restore_log)[:5]}")
    for _, pid in procs:
        after = {b["va"]: b for b in run.emu.ctl("bos", pid)["bos"]}
        wrong = []
        for b in before[pid]["bos"]:
            a = after.get(b["va"])
            expect(a is not None, f"{pid}: BO at {b['va']:#x} missing after restore")
            expect(a["actual_gpu_id"] == b["actual_gpu_id"],
                   f"{pid}: BO at {b['va']:#x} restored on GPU {a['actual_gpu_id']:#x}, dumped from "
                   f"{b['actual_gpu_id']:#x} (the same machine: each GPU must keep its identity)")
            expect(a["size"] == b["size"] and a["type"] == b["type"], f"{pid}: BO {a} != dumped {b}")
            if a["checksum"] != b["checksum"]:
                wrong.append(b)
        if errors and run.args.interop == "upstream-restore":
            unfilled = {b["actual_gpu_id"] for b in wrong}
            log(f"{pid}: {len(before[pid]['bos']) - len(wrong)} BOs with their dumped contents; "
                f"{len(wrong)} without, on GPUs {sorted(hex(g) for g in unfilled)} (the defect's)")
            expect(len(unfilled) < len(gpus), f"{pid}: no GPU's BOs have their contents: {wrong[:3]}")
        else:
            expect(not wrong, f"{pid}: BOs without their dumped contents: "
                              f"{[(hex(b['va']), hex(b['actual_gpu_id'])) for b in wrong]}")
        nfds = interop_fds(run, pid, before[pid])
        got = sorted((v["start"], v["end"], v["path"]) for v in run.emu.ctl("vmas", pid)["vmas"])
        want = sorted((v["start"], v["end"], v["path"]) for v in before[pid]["vmas"])
        expect(got == want, f"{pid}: device mappings after restore {got} != {want}")
        nq = check_running(run.emu, pid, before[pid], f"restored {pid}")
        log(f"restored {pid}: {len(after)} BOs each on the GPU it was dumped from, {nfds} dumped fds, "
            f"{len(got)} device mappings, {nq} active queue(s)")
    if unfilled:
        for d, pid in procs:
            v = verdict(d, pid)
            log(f"{pid}'s own verdict after upstream's incomplete restore (not required to pass): {v}")
        return
    run.verdicts(procs)


def stream_round_trip(run):
    """kfd-gem through the stand-in image streamer (see the header)."""
    procs = run.start()
    before = {pid: snapshot(run.emu, pid) for _, pid in procs}
    run.dump([pid for _, pid in procs])
    local = sorted(os.listdir(run.images))
    log(f"image directory after the streamed dump: {local}")
    # kfdemu-adapter.img: the emulator's adapter writes it there itself.
    expect(not [n for n in local if OURS.fullmatch(n) or ".tmp-" in n or
                (n.endswith(".img") and n != "kfdemu-adapter.img")],
           f"image files written to the image directory in stream mode: {local}")
    with open(os.path.join(run.store, "streamer-index.json")) as f:
        captured = {e["name"]: e["size"] for e in json.load(f)}
    ours = {n: sz for n, sz in captured.items() if OURS.fullmatch(n)}
    log(f"captured {len(captured)} files; ours: {ours}")
    expect(any(n.startswith("amdgpu-kfd-") for n in ours), f"no amdgpu-kfd image captured: {sorted(captured)}")
    seal = {n: PAGES_SEAL if PAGES.fullmatch(n) else 0 for n in ours}  # the plugin's seal after a pages payload
    for n, size in ours.items():
        with open(os.path.join(run.store, n), "rb") as f:
            head = f.read(8)
        expect(len(head) == 8 and int.from_bytes(head, "little") == size - 8 - seal[n],
               f"captured {n}: header {head.hex()} does not frame its {size} bytes")
    bos = [b for s in before.values() for b in s["bos"] if b["type"] in ("vram", "gtt")]
    for n in ours:
        m = re.fullmatch(r"amdgpu-pages-\d+-([0-9a-f]+)\.img", n)
        if m:
            want = sum(b["size"] for b in bos if b["actual_gpu_id"] == int(m.group(1), 16))
            payload = ours[n] - 8 - seal[n]
            expect(payload in (0, want) or want == 0, f"captured {n}: {payload} payload bytes, the GPU's BOs have {want}")
    expect(max(b["size"] for b in bos) > STREAM_BOUND, "no BO larger than KFD_MAX_BUFFER_SIZE")
    peak = run.emu.ctl("userptr", run.criu_pids["dump"])
    log(f"dump staging (emulator's userptr count of CRIU {run.criu_pids['dump']}): {peak}")
    expect(0 < peak["peak"] <= STREAM_BOUND, f"dump staging peak {peak['peak']} bytes, bound {STREAM_BOUND}")
    run.restore(procs[0][1])
    # The restore copies in the restored task, whose userptr count also
    # holds its own restored userptr BOs: the plugin's summary lines
    # instead, one per GPU of each copy (KFD BOs, then each render node's).
    with open(os.path.join(run.images, "restore.log"), errors="replace") as f:
        peaks = [int(m.group(1)) for m in re.finditer(r"restored \d+ BOs with contents, .*peak staging (\d+) bytes", f.read())]
    log(f"restore staging per GPU and copy (the plugin's summary lines): {peaks}")
    expect(peaks and 0 < max(peaks) <= STREAM_BOUND, f"restore staging peaks {peaks}, bound {STREAM_BOUND}")
    with open(run.report) as f:
        rep = json.load(f)
    served = [n for n in rep["served"] if OURS.fullmatch(n)]
    log(f"streamer served {len(rep['served'])} files; ours: {served}; not requested: "
        f"{[n for n in rep['not_requested'] if OURS.fullmatch(n)]}")
    expect(not [n for n in rep["already_served"] if OURS.fullmatch(n)],
           f"files of ours requested twice: {rep['already_served']}")
    must = [n for n, sz in ours.items()
            if n.startswith("amdgpu-kfd-") or (n.startswith(("amdgpu-pages-", "amdgpu-drm-pages-")) and sz > 8)]
    expect(set(must) <= set(served), f"files of ours not served: {sorted(set(must) - set(served))}")
    for _, pid in procs:
        check_restored(run.emu, pid, before[pid])
    run.verdicts(procs)


def gpu_files(images):
    """{name: bytes} of every file of ours in `images`, hidden ones too."""
    out = {}
    for n in os.listdir(images):
        if n.lstrip(".").startswith("amdgpu-") and ".img" in n:
            with open(os.path.join(images, n), "rb") as f:
                out[n] = f.read()
    return out


def dump_fault(run, hang=False):
    procs = run.start()
    (d, pid), = procs
    # An older checkpoint in the directory (the issue: a failed dump
    # deleted its pages file): the failed dump must leave it byte for byte.
    expect(run.criu_run("dump", ["-t", str(pid), "--leave-running"], "dump-older.log") == 0,
           "the older checkpoint's dump (--leave-running) failed", False)
    older = gpu_files(run.images)
    expect(any(n.startswith("amdgpu-pages-") for n in older), f"the older dump wrote no pages file: {sorted(older)}",
           False)
    before = snapshot(run.emu, pid)
    run.emu.faults("sdma:nth=1:hang" if hang else "sdma:nth=1")
    t0 = time.monotonic()
    rc = run.criu_run("dump", ["-t", str(pid)], "dump.log")
    took = time.monotonic() - t0
    dump_log = os.path.join(run.images, "dump.log")
    expect(rc != 0, "criu dump succeeded despite the SDMA fault", False)
    errs = plugin_errors(dump_log)
    if not errs:
        show_log(dump_log)
    expect(errs, "the dump log has no 'amdgpu_plugin: Error:' line", False)
    log(f"dump failed as it must; the plugin said: {errs[0].strip()}")
    if hang:
        # KFD_SDMA_TIMEOUT=1 (Run): the plugin's limit, not CRIU's.
        want = "SDMA copy (job seq "
        expect(any(want in e and "not finished after 1 s, the limit KFD_SDMA_TIMEOUT sets (default 60)" in e
                   and "raise KFD_SDMA_TIMEOUT" in e for e in errs),
               f"no error line says the SDMA copy timed out under KFD_SDMA_TIMEOUT=1: {errs}", False)
        expect(took < 30, f"the dump with a hung SDMA engine took {took:.1f}s (KFD_SDMA_TIMEOUT=1)", False)
    else:
        counters = run.emu.ctl("counters")
        expect(counters["sdma_failed"] >= 1, f"no SDMA job failed: {counters}", False)
    run.emu.faults("")
    after = gpu_files(run.images)
    expect(after == older, f"the failed dump changed the older checkpoint's GPU files: "
                           f"{sorted(set(after) ^ set(older)) or [n for n in older if after[n] != older[n]]}", False)
    log(f"the older checkpoint's {len(older)} GPU files are there byte for byte, nothing else of ours")
    expect(alive(pid) and run.wl.poll() is None, f"the workload {pid} did not survive the failed dump", False)
    check_fds(pid, before, None, "after the failed dump")
    nq = check_running(run.emu, pid, before, "after the failed dump")
    log(f"after the failed dump: {pid} runs, fd table unchanged, not paused, {nq} active queue(s)")
    v = verdict(d, pid)
    expect(v == "OK", f"workload {pid} after the failed dump: {v}", False)
    run.wl.wait(timeout=30)


SUMMARY = re.compile(
    r"amdgpu_plugin: (dump|restore): (\d+) GPU files?, (\d+) GPUs?, (\d+) BOs \((\d+) with contents\), (\d+) bytes "
    r"\((?:\d+ bytes|[0-9.]+ [KMGT]iB)\) in ([0-9.]+) s, ([0-9.]+) GB/s, staging peak (\d+) bytes of (\d+) MiB per GPU"
    r"(, checksums matched for (\d+) bytes)?$")
CONFIG_LINE = "amdgpu_plugin: configuration: KFD_CAPABILITY_CHECK=0 (the other checks on), KFD_MAX_BUFFER_SIZE unset"


def plugin_lines(path):
    with open(path, errors="replace") as f:
        return [l.rstrip("\n") for l in f if "amdgpu_plugin" in l]


def image_totals(run):
    """What the images hold (amdgpu-img show --json), as the summary counts it."""
    out = subprocess.run([run.args.amdgpu_img, "show", "--json", run.images], capture_output=True, text=True)
    expect(out.returncode == 0, f"amdgpu-img show failed: {out.stderr}", False)
    j = json.loads(out.stdout)
    bos = [b for k in j["kfd"] for b in k["bos"]] + [b for r in j["render"] for b in r["bos"]]
    copied = [b for b in bos if b.get("pages_file")]
    gpus = {d["gpu_id"] for k in j["kfd"] for d in k["devices"] if d["kind"] == "gpu"} | \
        {r["gpu_id"] for r in j["render"]}
    return {"files": len(j["kfd"]) + len(j["render"]), "gpus": len(gpus), "bos": len(bos),
            "copied": len(copied), "bytes": sum(b["size"] for b in copied)}


def check_default_log(path, stage, want):
    """The plugin's lines in a CRIU log at the default level (log-default)."""
    lines = plugin_lines(path)
    log(f"{stage} log, the plugin's lines at CRIU's default level:\n  " + "\n  ".join(lines))
    config = [l for l in lines if l.startswith(CONFIG_LINE)]
    summary = [m for m in map(SUMMARY.fullmatch, lines) if m]
    expect(len(config) == 1, f"{stage}: {len(config)} configuration lines naming KFD_CAPABILITY_CHECK=0, want 1",
           stage == "restore")
    expect(len(summary) == 1 and summary[0].group(1) == stage,
           f"{stage}: {len(summary)} summary lines, want 1", stage == "restore")
    expect(len(lines) == 2, f"{stage}: the plugin wrote {len(lines)} lines at the default level, want 2",
           stage == "restore")
    m = summary[0]
    got = {"files": int(m.group(2)), "gpus": int(m.group(3)), "bos": int(m.group(4)), "copied": int(m.group(5)),
           "bytes": int(m.group(6))}
    expect(got == want, f"{stage} summary {got} != the images' {want}", stage == "restore")
    secs, gbps, peak, per_gpu = float(m.group(7)), float(m.group(8)), int(m.group(9)), int(m.group(10))
    # Both figures are printed rounded (seconds to 3 decimals, GB/s to 2):
    # the rate must lie in the range the rounded time allows.
    lo = got["bytes"] / (secs + 0.0005) / 1e9 - 0.005
    hi = got["bytes"] / max(secs - 0.0005, 1e-9) / 1e9 + 0.005
    expect(secs > 0 and lo <= gbps <= hi,
           f"{stage}: {gbps} GB/s is not {got['bytes']} bytes / {secs} s", stage == "restore")
    expect(0 < peak <= per_gpu * (1 << 20) * got["gpus"], f"{stage}: staging peak {peak} above the bound",
           stage == "restore")
    if stage == "restore":
        expect(m.group(12) is not None and int(m.group(12)) == got["bytes"],
               f"restore: checksums matched for {m.group(12)} bytes, want all {got['bytes']}", True)


def log_default(run):
    procs = run.start()
    (d, pid), = procs
    before = snapshot(run.emu, pid)
    run.dump([pid])
    want = image_totals(run)
    log(f"the images hold: {want}")
    expect(want["gpus"] >= 2 and want["copied"] > 0, f"the images hold too little to test: {want}", False)
    check_default_log(os.path.join(run.images, "dump.log"), "dump", want)
    run.restore(pid)
    check_default_log(os.path.join(run.images, "restore.log"), "restore", want)
    check_restored(run.emu, pid, before)
    run.verdicts(procs)


def restore_failure(run, how):
    procs = run.start()
    (d, pid), = procs
    run.dump([pid])
    if how == "truncated":
        where = run.store if run.stream else run.images  # streamed: the stand-in streamer's store
        pages = [os.path.join(where, n) for n in os.listdir(where) if n.startswith("amdgpu-pages")]
        expect(pages, f"no amdgpu-pages file in {sorted(os.listdir(where))}")
        victim = max(pages, key=os.path.getsize)
        size = os.path.getsize(victim)
        os.truncate(victim, size // 2)
        log(f"truncated {os.path.basename(victim)} from {size} to {size // 2} bytes")
    elif how == "copy":
        run.emu.faults("sdma:nth=1")
        log("fault rule sdma:nth=1 set")
    else:
        run.emu.faults("CRIU_OP:RESTORE")
        log("fault rule CRIU_OP:RESTORE set")
    pidfile = os.path.join(run.work, "restored.pid")
    rc = run.criu_run("restore", ["-d", "--pidfile", pidfile], "restore.log")
    restore_log = os.path.join(run.images, "restore.log")
    expect(rc != 0, "criu restore succeeded despite the damage")
    errs = plugin_errors(restore_log)
    if not errs:
        show_log(restore_log)
    expect(errs, "the restore log has no 'amdgpu_plugin: Error:' line")
    log(f"restore failed as it must; the plugin said: {errs[0].strip()}")
    if how == "fault":
        # The failed ioctl is named once (not "CRIU_OP RESTORE: KFD CRIU_OP RESTORE: ...").
        said = " ".join(errs)
        expect(said.count("CRIU_OP RESTORE") == 1, f"the failed CRIU_OP RESTORE is not named exactly once: {errs}")
    if how == "copy":
        expect(any("parallel restore" in e and "killed the restored task(s)" in e for e in errs),
               f"no error line of the parallel restore killing the task: {errs}")
    expect_none_left(run, pid, "after the failed restore")
    log(f"no process {pid} left (system and model)")


def other_machine_dump(run, state_file):
    procs = run.start()
    (d, pid), = procs
    before = snapshot(run.emu, pid)
    expect(before["bos"] and before["vmas"] and before["queues"]["queues"], "the workload has no BOs, mappings or queues", False)
    log(f"first machine: workload {pid}: {len(before['bos'])} BOs on GPUs "
        f"{sorted({hex(b['actual_gpu_id']) for b in before['bos']})}, render fds "
        f"{sorted(v for v in before['fds'].values() if 'renderD' in v)}")
    run.dump([pid])
    with open(state_file, "w") as f:
        json.dump({"dir": d, "before": before}, f)


def other_machine_restore(run, state_file):
    with open(state_file) as f:
        st = json.load(f)
    before = st["before"]
    pid = before["pid"]
    plan = OTHER_MACHINE[run.args.machine]
    run.restore(pid)
    gpus, minors = (plan["gpus"], plan["minors"]) if "gpus" in plan else chosen_mapping(run, plan)
    check_restored(run.emu, pid, before, gpus=gpus, minors=minors)
    run.verdicts([(st["dir"], pid)])


MAPPED = re.compile(r"amdgpu_plugin: gpu (0x[0-9a-f]+): restoring onto local gpu (0x[0-9a-f]+) \(renderD(\d+)\)")


def chosen_mapping(run, plan):
    """The GPU mapping the plugin's restore log names, checked against an
    OTHER_MACHINE plan given by CPU node (numa_first, numa_second): every
    checkpointed GPU onto a distinct GPU of the second machine with that
    GPU's render minor, the GPUs of one CPU node onto the GPUs of one CPU
    node. Returns (gpu_id map, render minor map)."""
    text = open(os.path.join(run.images, "restore.log"), errors="replace").read()
    chosen = {int(a, 16): (int(b, 16), int(m)) for a, b, m in MAPPED.findall(text)}
    first = {g: m for node in plan["numa_first"] for g, m in node.items()}
    second = {g: m for node in plan["numa_second"] for g, m in node.items()}
    expect(set(chosen) == set(first) and sorted(g for g, _ in chosen.values()) == sorted(second),
           f"the restore log maps {sorted(hex(g) for g in chosen)} onto "
           f"{sorted(hex(g) for g, _ in chosen.values())}, want every GPU of {sorted(hex(g) for g in first)} "
           f"onto one of {sorted(hex(g) for g in second)}")
    expect(all(second[g] == m for g, m in chosen.values()), f"render minors not those of the GPUs: {chosen}")
    for node in plan["numa_first"]:
        onto = [i for i, n in enumerate(plan["numa_second"]) if any(chosen[g][0] in n for g in node)]
        expect(len(onto) == 1, f"the GPUs of one CPU node {sorted(hex(g) for g in node)} went to CPU nodes {onto}")
    log("the plugin's mapping: " + ", ".join(f"{a:#x} -> {b:#x}" for a, (b, _) in sorted(chosen.items())))
    return {a: b for a, (b, _) in chosen.items()}, {first[a]: m for a, (_, m) in chosen.items()}


def refused_restore(run, state_file):
    with open(state_file) as f:
        pid = json.load(f)["before"]["pid"]
    pidfile = os.path.join(run.work, "restored.pid")
    rc = run.criu_run("restore", ["-d", "--pidfile", pidfile], "restore.log")
    expect(rc != 0, f"criu restore succeeded on {REFUSING_MACHINE}")
    with open(os.path.join(run.images, "restore.log"), errors="replace") as f:
        text = f.read()
    m = re.search(r"amdgpu_plugin: Error: restore refused before any GPU state was changed: (cannot map "
                  r"checkpointed gpu 0x[0-9a-f]{4} \(node \d+, renderD\d+\) to a local GPU; the 8 usable local "
                  r"GPUs refused it:)\n((?:  .*\n)+)", text)
    if not m:
        show_log(os.path.join(run.images, "restore.log"))
    expect(m, "no grouped refusal of the 8 local GPUs in the restore log")
    reasons = [l[2:] for l in m.group(2).splitlines()]
    log(f"the plugin said: {m.group(1)}\n  " + "\n  ".join(reasons))
    lists = {r.rsplit(" on gpu ", 1)[1] if " on gpu " in r else "" for r in reasons}
    expect(len(reasons) >= 2 and len(set(reasons)) == len(reasons), f"reasons repeated or missing: {reasons}")
    expect(len(lists) == 1 and len(next(iter(lists)).split(", ")) == 8,
           f"the reasons do not each list the same 8 local GPUs: {sorted(lists)}")
    for r in reasons:
        if "KFD_CAPABILITY_CHECK" in r:
            expect(r.startswith("capability: "), f"KFD_CAPABILITY_CHECK suggested for another property: {r}")
        expect("(cannot be relaxed)" in r or re.search(r"\(relax with KFD_[A-Z_]+_CHECK=0\)", r),
               f"a reason says neither its switch nor that none exists: {r}")
    expect(not alive(pid), f"a process {pid} is alive after the refused restore")


def render_round_trip(run):
    """A process with a render node and no /dev/kfd: its fd table and
    render-node mappings come back as dumped, and the restored process finds
    its GEM BOs' contents, handles and VAs (its own verdict)."""
    procs = run.start()
    pid = procs[0][1]
    before = {"fds": {str(k): v for k, v in fd_table(pid).items()}, "daemon_fds": sorted(daemon_connections(pid)),
              "vmas": run.emu.ctl("vmas", pid)["vmas"]}
    renders = [v for v in before["vmas"] if v["path"].startswith("/dev/dri/renderD")]
    expect(len(renders) >= 2, f"the workload has {len(renders)} render-node mappings, want the GTT and VRAM BOs'",
           False)
    expect(not any(p == "/dev/kfd" for p in before["fds"].values()), "the render workload opened /dev/kfd", False)
    run.dump([pid])
    names = sorted(os.listdir(run.images))
    drm_pages = [n for n in names if n.startswith("amdgpu-drm-pages-")]
    expect(any(n.startswith("amdgpu-renderD-") for n in names) and len(drm_pages) == 3,
           f"images: want amdgpu-renderD-*.img and 3 amdgpu-drm-pages files, have {names}", False)
    run.restore(pid)
    fds = check_fds(pid, before, None, "restored")
    got = sorted((v["start"], v["end"], v["path"]) for v in run.emu.ctl("vmas", pid)["vmas"])
    want = sorted((v["start"], v["end"], v["path"]) for v in before["vmas"])
    expect(got == want, f"device mappings after restore {got} != {want}")
    log(f"restored {pid}: fd table as dumped ({len(fds)} fds), {len(got)} device mappings, images {drm_pages}")
    run.verdicts(procs)


DMABUF_ROLES = ("exporter", "importer", "holder")


def task_tree(pid):
    """`pid` and its descendants, parent first."""
    out = [pid]
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            for c in f.read().split():
                out += task_tree(int(c))
    return out


def dmabuf_round_trip(run, root):
    """Three processes sharing one BO through a dma-buf (dmabuf_tree.cpp)."""
    os.makedirs(run.images, exist_ok=True)
    out = open(os.path.join(run.work, "workload.log"), "w")
    run.wl = subprocess.Popen([run.args.workload, "--dir", run.work, "--root", root], stdin=subprocess.DEVNULL,
                              stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    readies = [os.path.join(run.work, "ready." + r) for r in DMABUF_ROLES]
    if not wait_for(lambda: all(map(os.path.exists, readies)) or run.wl.poll() is not None, 60, "the workload"):
        raise Failure("workload not ready")
    if run.wl.poll() is not None:
        show_log(os.path.join(run.work, "workload.log"))
        raise Failure(f"workload exited early ({run.wl.returncode})")
    pids = task_tree(run.wl.pid)
    expect(len(pids) == 3, f"the dma-buf tree has {len(pids)} processes, want 3", False)
    before = {p: {"fds": {str(k): v for k, v in fd_table(p).items()}, "daemon_fds": sorted(daemon_connections(p)),
                  "vmas": run.emu.ctl("vmas", p)["vmas"]} for p in pids}
    run.dump(pids)
    names = sorted(os.listdir(run.images))
    renders = [n for n in names if n.startswith("amdgpu-renderD-")]
    dmabufs = [n for n in names if n.startswith("amdgpu-dmabuf_")]
    pages = [n for n in names if n.startswith("amdgpu-drm-pages-")]
    expect(len(renders) == 2 and len(dmabufs) == 1 and len(pages) == 1,
           f"images: want 2 amdgpu-renderD, 1 amdgpu-dmabuf and 1 amdgpu-drm-pages file, have {names}", False)
    run.restore(pids[0])
    for p in pids:
        check_fds(p, before[p], None, f"restored {p}")
        got = sorted((v["start"], v["end"], v["path"]) for v in run.emu.ctl("vmas", p)["vmas"])
        want = sorted((v["start"], v["end"], v["path"]) for v in before[p]["vmas"])
        expect(got == want, f"{p}: device mappings after restore {got} != {want}")
    text = open(os.path.join(run.images, "restore.log"), errors="replace").read()
    created = re.findall(r"shared BO \d+ \(\d+ bytes\): created by the restore of (\S+)", text)
    expect(len(created) == 1, f"CRIU's log shows the shared BO created {len(created)} times")
    log(f"restored {pids}: fd tables and device mappings as dumped; the BO created by {created[0]}'s restore; "
        f"images {renders + dmabufs + pages}")
    open(os.path.join(run.work, "go"), "w").close()
    results = [os.path.join(run.work, "result." + r) for r in DMABUF_ROLES]
    wait_for(lambda: all(map(os.path.exists, results)), 60, "the restored tasks' verdicts")
    verdicts = {r: (open(f).read().strip() if os.path.exists(f) else "(no result)")
                for r, f in zip(DMABUF_ROLES, results)}
    log(f"verdicts: {verdicts}")
    expect(all(v == "OK" for v in verdicts.values()), f"restored tree: {verdicts}")


def mixed_checkpoints(run):
    """Files of two dumps of the same program mixed, swapped, deleted or
    added (see the header): each case restored from a copy of the first
    dump's directory. A refusal must come from the plugin before any GPU
    state changed, naming a file of the case, and leave no process; a
    restore that succeeds must give back the first dump's process exactly;
    amdgpu-img verify must give the same verdict."""
    root = run.work
    dumps = {}
    # The same layout in both processes (no address randomization: CRIU
    # numbers the files it meets walking the mappings in address order), so
    # that both dumps give their GPU files the same CRIU file ids and names.
    import ctypes
    ADDR_NO_RANDOMIZE = 0x0040000
    ctypes.CDLL(None, use_errno=True).personality(ADDR_NO_RANDOMIZE)
    for name in ("A", "B"):
        run.work = os.path.join(root, name)
        run.images = os.path.join(root, "dump-" + name)
        os.makedirs(run.work)
        procs = run.start()
        (_, pid), = procs
        dumps[name] = {"dir": run.images, "work": run.work, "pid": pid, "before": snapshot(run.emu, pid)}
        run.dump([pid])
        # The dump's --link-remap files (libhsakmt's deleted semaphore),
        # kept aside: B's dump would name its own the same, and each
        # restore of A's consumes A's.
        dumps[name]["remaps"] = {}
        for f in set(glob.glob("/dev/shm/link_remap.*")) - run.remaps_before:
            with open(f, "rb") as src:
                dumps[name]["remaps"][f] = src.read()
            os.unlink(f)
    a, b = dumps["A"], dumps["B"]
    # The GPU files; each dump's manifest (amdgpu-binding.img) stays with
    # its CRIU images (verify_parity_test.py mixes manifests).
    def gpu_files(d):
        return sorted(n for n in os.listdir(d) if OURS.fullmatch(n) and n != "amdgpu-binding.img")
    names = gpu_files(a["dir"])
    # B's file of the same role as each of A's (CRIU's file ids usually
    # agree; when they do not, a file of B copied under A's name is also
    # one read as another file).
    b["as_a"] = same_roles(names, gpu_files(b["dir"]))
    kfd = next(n for n in names if n.startswith("amdgpu-kfd-"))
    kid = kfd[len("amdgpu-kfd-"):-len(".img")]
    pages = [n for n in names if n.startswith(f"amdgpu-pages-{kid}-")]
    renders = [n for n in names if n.startswith("amdgpu-renderD-")]
    log(f"dump A: pid {a['pid']}, dump B: pid {b['pid']}, GPU files {names}; B's by role: {b['as_a']}")
    # (what, {from_b: [...], swap: (x, y), delete: [...], extra: (file of B, new name)}, outcome)
    cases = [("the KFD image of dump B", {"from_b": [kfd]}, "refused"),
             ("the KFD image and its pages files of dump B", {"from_b": [kfd] + pages}, "refused"),
             ("every GPU file of dump B", {"from_b": names}, "refused"),
             ("every GPU file of dump B but " + renders[0], {"from_b": [n for n in names if n != renders[0]]},
              "refused"),
             ("a render image of dump B", {"from_b": [renders[0]]}, "refused"),
             ("a pages file of dump B", {"from_b": [pages[0]]}, "either"),
             ("the KFD image deleted", {"delete": [kfd]}, "missing"),
             ("an extra KFD image (dump B's, as file 9999)", {"extra": (kfd, "amdgpu-kfd-9999.img")}, "restored")]
    if len(renders) >= 2:
        cases.append(("two render images swapped", {"swap": (renders[0], renders[1])}, "refused"))
    for what, change, outcome in cases:
        mixed_case(run, a, b, what, change, outcome)


def same_roles(a_names, b_names):
    """{A's file name: B's file of the same role}: the KFD image, the pages
    file of each GPU, and the render images in order of their ids."""
    def role(n):
        m = re.fullmatch(r"amdgpu-(kfd|pages|renderD)-(\d+)(?:-([0-9a-f]+))?\.img", n)
        expect(m, f"a GPU file of an unexpected name: {n}", False)
        return m.group(1), int(m.group(2)), m.group(3) or ""
    def keyed(names):
        out = {}
        for kind in ("kfd", "pages", "renderD"):
            files = sorted((role(n)[1], role(n)[2], n) for n in names if role(n)[0] == kind)
            for i, (_, gpu, n) in enumerate(files):
                out[(kind, gpu if kind == "pages" else i)] = n
        return out
    ka, kb = keyed(a_names), keyed(b_names)
    expect(ka.keys() == kb.keys(), f"the two dumps of one program wrote other GPU files: {a_names} vs {b_names}",
           False)
    return {ka[k]: kb[k] for k in ka}


def mixed_case(run, a, b, what, change, outcome):
    """One case of mixed_checkpoints."""
    d = os.path.join(run.work + "-cases", re.sub(r"[^A-Za-z0-9]+", "-", what))
    shutil.copytree(a["dir"], d, ignore=shutil.ignore_patterns("*.log"))
    touched = list(change.get("from_b", [])) + list(change.get("delete", [])) + list(change.get("swap", ()))
    for n in change.get("from_b", []):
        shutil.copy(os.path.join(b["dir"], b["as_a"][n]), os.path.join(d, n))
    for n in change.get("delete", []):
        os.unlink(os.path.join(d, n))
    if "swap" in change:
        x, y = (os.path.join(d, n) for n in change["swap"])
        os.rename(x, x + ".swap")
        os.rename(y, x)
        os.rename(x + ".swap", y)
    if "extra" in change:
        src, dst = change["extra"]
        shutil.copy(os.path.join(b["dir"], b["as_a"][src]), os.path.join(d, dst))
        touched.append(dst)
    v = subprocess.run([run.args.amdgpu_img, "verify", d], capture_output=True, text=True)
    bad = [l for l in v.stdout.splitlines() if l.startswith("BAD ")]
    run.images = d
    pidfile = os.path.join(d, "restored.pid")
    for f, data in a["remaps"].items():
        with open(f, "wb") as dst:
            dst.write(data)
    rc = run.criu_run("restore", ["-d", "--pidfile", pidfile], "restore.log")
    for f in a["remaps"]:
        if os.path.exists(f):
            os.unlink(f)
    text = open(os.path.join(d, "restore.log"), errors="replace").read()
    errs = plugin_errors(os.path.join(d, "restore.log"))
    pid = a["pid"]
    if rc == 0:
        expect(outcome in ("restored", "either"), f"{what}: criu restore succeeded; it must be refused")
        with open(pidfile) as f:
            expect(int(f.read()) == pid, f"{what}: restored another pid")
        check_restored(run.emu, pid, a["before"])
        expect(not errs, f"{what}: restored, but the plugin logged errors: {errs}")
        if outcome == "restored":
            expect(re.search(r"amdgpu_plugin: .*amdgpu-kfd-9999\.img: CRIU restores no file 9999", text),
                   f"{what}: no warning names the extra image")
        expect(v.returncode == 0, f"{what}: restored correctly, but amdgpu-img verify says {bad or v.stdout}")
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid) and not reap_children(), 10)
        expect(wait_for(lambda: run.emu.process(pid) is None, 5), f"{what}: the model keeps {pid}")
        log(f"{what}: restored, as dumped; verify exit 0")
        return
    expect(outcome in ("refused", "missing", "either"), f"{what}: criu restore failed ({rc}): {errs or text[-800:]}")
    if outcome == "missing":
        # Named when CRIU asks for it, or before, from the dump's manifest.
        said = [l for l in text.splitlines() if "amdgpu_plugin:" in l and
                ("none for this file" in l or "is missing: dump" in l)]
        expect(said and change["delete"][0] in said[0], f"{what}: no plugin line names the missing image")
        line = said[0]
    elif outcome == "either":
        # Contents are checked as they are copied: a pages file of other
        # contents fails the copy, and the task is killed before it resumes.
        named = [e for e in errs if any(n in e for n in touched)]
        expect(named and ("killed the restored task" in named[0] or "before any GPU state" in named[0]),
               f"{what}: CRIU failed ({rc}) without a plugin error naming {touched}: {errs or text[-800:]}")
        line = named[0]
    else:
        refusal = [e for e in errs if "restore refused before any GPU state was changed" in e]
        expect(refusal, f"{what}: CRIU failed ({rc}) without the plugin's refusal before any GPU state: "
                        f"{errs or text[-800:]}")
        line = refusal[0]
        expect(any(n in line for n in touched) or outcome == "either",
               f"{what}: the refusal names none of {touched}: {line}")
    expect_none_left(run, pid, what)
    expect(v.returncode != 0 and bad, f"{what}: the restore failed, but amdgpu-img verify passed: {v.stdout}")
    log(f"{what}: refused ({line.split('amdgpu_plugin: ')[-1].strip()[:160]}); verify: {bad[0][:160]}")


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

# --------------------------------------------------------------------------
# CRIU killed half-way: the plugin's guardian (plugin/guardian.h)
# --------------------------------------------------------------------------

KILL_SDMA_GBPS = 0.2  # per engine, as bench/bench.py bench_machine() writes it
KILL_VRAM_MIB = 256   # per GPU: about 1.3 s of copy at that rate
# What of each 256 MiB VRAM BO the workload's SDMA checks copy on the slow
# machine and in evicted-dump (KFDEMU_WORKLOAD_SDMA_CHECK_MIB, its first
# MiB; its CPU check still reads every byte): the whole BO out and a fresh
# 256 MiB one in took about 5 s of a 2-GPU verdict at 0.2 GB/s (and 5 CPU-s
# of evicted_dump_2xMI210), which tests the engines no better.
SDMA_CHECK_MIB = 8
# How long a workload on the slow machine may take for its verdict after a
# killed CRIU. When its SDMA checks still copied each 256 MiB VRAM BO out
# and a fresh one in (about 10 s alone), three such tests at once on 2
# CPUs (ctest -j3 starts the longest tests together) took over 60 s, the
# workload running in its pattern check (gdb), not hung.
SLOW_VERDICT_SECONDS = 180
GUARDIAN_COMM = "amdgpu-guard"
GUARDIAN_LOG = "amdgpu-guardian.log"


def slow_machine(work, profile):
    """`profile`'s machine file with slow SDMA engines and VRAM backed at
    allocation, as bench/bench.py bench_machine() writes it."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "profiles", profile + ".machine")
    lines = []
    for line in open(src):
        lines.append(line.rstrip("\n"))
        if line.startswith("gpu "):
            lines += [f"  sdma_gbps {KILL_SDMA_GBPS:g}", "  vram_resident 1"]
    path = os.path.join(work, f"{profile}-slow.machine")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def children_by_role():
    """(guardians, others) among our live children, from one look at each:
    an orphaned guardian's parent is the nearest subreaper, this process
    (ended ones are reaped first). A child that ends while it is looked at
    is in neither list."""
    gs, others = [], []
    for k in reap_children():
        try:
            with open(f"/proc/{k}/comm") as f:
                (gs if f.read().strip() == GUARDIAN_COMM else others).append(k)
        except OSError:
            pass
    return gs, others


def guardians():
    """Guardian processes that are ours (see children_by_role)."""
    return children_by_role()[0]


# How long a guardian may take to end once it has nothing left to do. It
# exits at once, but its last step can wait on the filesystem: after a
# killed dump it unlinks the temporary files, and on a filesystem mounted
# with `discard` (this VM's root) the unlink of a large file waits for the
# device's discard, which took 0.7 s on a quiet machine and over 2 s under
# CI's load. One still there after this long is one that never ends.
GUARDIAN_EXIT_S = 10.0


def in_kernel(pid):
    """Where `pid` is: its state, wait channel and kernel stack, innermost
    first (/proc/PID/stack needs root), one line."""
    def read(name):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                return f.read()
        except OSError as e:
            return f"({e.strerror})"
    stat = read("stat")
    if stat.startswith("("):
        return f"gone {stat}"
    stack = read("stack")
    if not stack.startswith("("):
        stack = " < ".join(line.split()[-1].split("+")[0] for line in stack.splitlines() if line.strip())
    return f"state {stat.split(') ')[-1][:1]}, wchan {read('wchan')}, stack {stack}"


def guardians_left(within=GUARDIAN_EXIT_S):
    """Our guardian processes still there after up to `within` seconds of
    waiting for them to end; logs where each still there after 2 s (the
    plugin's own wait, Guardian::finish) is."""
    if wait_for(lambda: not guardians(), min(2.0, within)):
        return []
    for pid in guardians():
        log(f"guardian {pid} still there after 2 s: {in_kernel(pid)}")
    wait_for(lambda: not guardians(), within - 2.0)
    return guardians()


def criu_popen(run, action, extra, log_name, timeout_wrap=False):
    """CRIU as Run.criu_run starts it, not waited for; in a session of its
    own, so a process-group kill reaches CRIU (and `timeout`) only."""
    plugin = run.plugin_for(action)
    cmd = [run.args.wrapper] + (["--plugin", plugin] if plugin else []) + \
        ["--", run.criu, action] + extra + ["-o", log_name, "-D", run.images] + run.verbosity + ["--link-remap"]
    if timeout_wrap:
        cmd = ["timeout", str(CRIU_TIMEOUT)] + cmd
    return subprocess.Popen(cmd, env=run.env, start_new_session=True)


def temp_files(images):
    return sorted(n for n in os.listdir(images) if n.startswith(".amdgpu-") and ".tmp-" in n)


def temp_files_left(images):
    """The temporary files of ours still in `images` after up to
    GUARDIAN_EXIT_S of waiting for a killed dump's guardian to remove
    them (its unlink waits for the filesystem, as its exit does)."""
    wait_for(lambda: not temp_files(images), GUARDIAN_EXIT_S)
    return temp_files(images)


def guardian_log(images):
    try:
        with open(os.path.join(images, GUARDIAN_LOG)) as f:
            return f.read()
    except OSError:
        return ""


def queues_running(emu, pid):
    p = emu.process(pid)
    q = emu.ctl("queues", pid)
    return p is not None and not p["paused"] and not p["evicted"] and q.get("state") == "active" and \
        all(x["state"] == "active" for x in q["queues"])


def kill_criu(p, how):
    """Ends CRIU as `how` says; returns its exit status."""
    if how in ("dump-killed", "dump-killed-tree"):
        p.send_signal(signal.SIGKILL)
    else:
        # dump-termed: CRIU's own SIGTERM; dump-timeout: timeout passes it
        # on to CRIU and to its whole process group.
        p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise Failure(f"CRIU ({how}) did not end within 30 s of its signal", False)


def dump_killed(run):
    """dump-killed, -termed, -timeout: one process, killed during its copy.
    dump-killed-tree: a parent and a child, killed during the child's copy,
    after the parent's KFD image was written (under criu-dev the parent is
    still paused then: after its copy, before the unpause)."""
    how = run.sc.name
    procs = run.start()
    pids = [pid for _, pid in procs]
    p = criu_popen(run, "dump", ["-t", str(pids[0])], "dump.log", timeout_wrap=how == "dump-timeout")
    kfd_images = lambda: [n for n in os.listdir(run.images) if re.fullmatch(r"amdgpu-kfd-\d+\.img", n)]
    want_images = len(procs) - 1  # a tree: the first process's copy is over

    def copying():
        # A pages file of a KFD file whose image is not written yet is
        # being copied (other temporary files come and go between copies).
        done = {re.fullmatch(r"amdgpu-kfd-(\d+)\.img", n).group(1) for n in kfd_images()}
        busy = {m.group(1) for m in (re.match(r"\.amdgpu-pages-(\d+)-", n) for n in temp_files(run.images)) if m}
        return (busy - done and len(done) >= want_images) or p.poll() is not None

    expect(wait_for(copying, 60, "the dump's GPU copy"), "the dump's copy never started", False)
    expect(p.poll() is None, f"criu dump ended ({p.returncode}) before its copy could be interrupted", False)
    paused = [pid for pid in pids if run.emu.ctl("queues", pid).get("state") == "paused"]
    expect(pids[-1] in paused, f"queues of {pids[-1]} not paused during its copy: {run.emu.ctl('queues', pids[-1])}",
           False)
    after_dump_killed(run, procs, p, how, paused, "during the copy")


def after_dump_killed(run, procs, p, how, paused, when, gpu_pids=None):
    """Kills `p` (criu dump of `procs`, `paused` of them paused now) as
    `how` says, then: within 1 s the queues of every process with GPU
    state (`gpu_pids`; default: all) are active, within GUARDIAN_EXIT_S no
    temporary file (temp_files_left) and no guardian is left, the
    guardian's log says what it did, and each process completes its next
    GPU work."""
    pids = [pid for _, pid in procs]
    gpu_pids = pids if gpu_pids is None else gpu_pids
    g = guardians()
    expect(len(g) == 1, f"guardian processes during the dump: {g} (want exactly one)", False)
    tmps = temp_files(run.images)
    images = sorted(n for n in os.listdir(run.images) if OURS.fullmatch(n))
    rc = kill_criu(p, how)
    t0 = time.monotonic()
    log(f"criu dump ({how}) ended with {rc} {when}; paused then: {paused}; our images then: "
        f"{images}; temporary files then: {tmps}; guardian {g[0]}")
    running = wait_for(lambda: all(queues_running(run.emu, pid) for pid in gpu_pids), 1.0)
    took = time.monotonic() - t0
    if not running:
        log(f"guardian log: {guardian_log(run.images)!r}")
    expect(running, "queues not running 1 s after CRIU ended: " +
           "; ".join(f"{run.emu.ctl('queues', pid)}, {run.emu.process(pid)}" for pid in gpu_pids), False)
    log(f"queues of {gpu_pids} active {took:.3f} s after CRIU ended")
    expect(not (left := temp_files_left(run.images)), f"temporary files left in the image directory: {left}", False)
    expect(not (still := guardians_left()), f"guardian processes left {GUARDIAN_EXIT_S:.0f} s after: {still}", False)
    said = guardian_log(run.images)
    log(f"guardian log:\n{said.rstrip()}")
    for pid in paused:
        expect(f"pid {pid}: GPU queues resumed (UNPAUSE)" in said, f"the guardian's log does not say it unpaused {pid}",
               False)
    for t in tmps:
        expect(f"removed the temporary file {t}" in said, f"the guardian's log does not name {t}", False)
    for pid in pids:
        expect(alive(pid), f"the workload {pid} did not survive", False)
    for d, pid in reversed(procs):  # the child's first: the parent's verdict waits for it
        v = verdict(d, pid, SLOW_VERDICT_SECONDS)
        expect(v == "OK", f"workload {pid} after CRIU was killed: {v}", False)
    run.wl.wait(timeout=30)


def restore_killed(run):
    procs = run.start()
    (d, pid), = procs
    run.dump([pid])
    expect(not (still := guardians_left()), f"guardian processes left after the dump: {still}", False)
    pidfile = os.path.join(run.work, "restored.pid")
    p = criu_popen(run, "restore", ["-d", "--pidfile", pidfile], "restore.log")
    restored = lambda: (run.emu.process(pid) or {}).get("restored") or p.poll() is not None
    expect(wait_for(restored, 60, "the restore's KFD state"), "no KFD state was restored")
    expect(p.poll() is None, f"criu restore ended ({p.returncode}) before its copy could be interrupted")
    time.sleep(0.3)  # into the copy
    expect(p.poll() is None, f"criu restore ended ({p.returncode}) before its copy could be interrupted")
    g = guardians()
    expect(len(g) == 1, f"guardian processes during the restore: {g} (want exactly one)")
    after_restore_killed(run, pid, p, g, "during the copy")


def after_restore_killed(run, pid, p, g, when):
    """SIGKILLs `p` (criu restore of `pid`; `g` the guardian), then: the
    restored task is gone (within 2 s; within 10 s on a loaded machine,
    where its state and wait channel at 2 s are logged: the guardian's log
    below says whether it killed the task at once), nothing of ours runs,
    the model holds no process, no guardian is left, and the guardian's log
    says it killed the task."""
    p.send_signal(signal.SIGKILL)
    rc = p.wait(timeout=30)
    log(f"criu restore ended with {rc} {when}; guardian {g[0]}")
    if not wait_for(lambda: not alive(pid), 2.0):
        log(f"the restored task {pid} still exists 2 s after CRIU was killed ({in_kernel(pid)})")
        expect(wait_for(lambda: not alive(pid), 8.0), f"the restored task {pid} still runs 10 s after CRIU was killed")
    left = children_by_role()[1]  # a guardian ending meanwhile is not one left
    expect(not left, f"processes left after the killed restore: {left}")
    expect(wait_for(lambda: run.emu.process(pid) is None, 5),
           f"the model still has process {pid}: {run.emu.process(pid)}")
    expect(not (still := guardians_left()), f"guardian processes left {GUARDIAN_EXIT_S:.0f} s after: {still}")
    said = guardian_log(run.images)
    log(f"guardian log:\n{said.rstrip()}")
    expect(f"pid {pid}: killed (SIGKILL)" in said, "the guardian's log does not say it killed the task")


# CRIU killed where a `stall` fault holds it (a scenario's `stall`:
# `kfd-emu ctl faults CALL:stall`: the call blocks without effect until CRIU
# has ended, as if CRIU had been killed right before making it;
# `CALL:stall-after`: the call takes effect, then blocks, as if CRIU had
# been killed right after it returned).


def stall_criu(run, p, call):
    """Waits until CRIU (`p`) is held in `call` (the model counts the
    stall)."""
    stalled = lambda: run.emu.ctl("counters")["stalls"] >= 1 or p.poll() is not None
    expect(wait_for(stalled, 60, f"CRIU at {call}"), f"CRIU never reached {call}", False)
    expect(p.poll() is None, f"CRIU ended ({p.returncode}) before it reached {call}", False)


def dump_killed_at(run):
    """dump-killed-info, dump-killed-paused, dump-killed-copied: one process
    (1 or 2 GPUs), CRIU SIGKILLed right after the pausing PROCESS_INFO (the
    plugin has not seen its answer), after the pause and before any copy
    (no file of ours exists yet in either), or after the copy and the KFD
    image, before the unpause (every file of ours complete); then as
    dump-killed. dump-killed-before-info: SIGKILLed right before that
    PROCESS_INFO (nothing paused): the same, and the guardian, told of the
    file, logs that there was nothing to resume. dump-killed-info-holder,
    dump-killed-info-scm-holder: as dump-killed-info with a second holder
    of the /dev/kfd file (a forked child; the parent the child sent it to,
    tried first: the guardian logs its EBADF before the owner's resume)."""
    scenario, call = run.sc.name, run.sc.stall
    procs = run.start()
    scm = scenario == "dump-killed-info-scm-holder"
    # The process with GPU state (scm: the child; the parent, the tree's
    # root, holds its /dev/kfd file).
    if scm:
        (_, holder), (_, pid) = procs
    else:
        (_, pid), = procs
    run.emu.faults(call)
    p = criu_popen(run, "dump", ["-t", str(procs[0][1])], "dump.log")
    stall_criu(run, p, call)
    q = run.emu.ctl("queues", pid)
    before = scenario == "dump-killed-before-info"
    expect((q.get("state") == "paused") != before, f"queues of {pid} at {call}: {q}", False)
    ours = sorted(n for n in os.listdir(run.images) if OURS.fullmatch(n))
    gpus = len((run.emu.process(pid) or {}).get("devices", []))
    if scenario in ("dump-killed-info", "dump-killed-info-holder", "dump-killed-info-scm-holder",
                    "dump-killed-before-info", "dump-killed-paused"):
        expect(not ours and not temp_files(run.images), f"files of ours before the copy: {ours}", False)
    else:
        kfd = [n for n in ours if re.fullmatch(r"amdgpu-kfd-\d+\.img", n)]
        pages = [n for n in ours if n.startswith("amdgpu-pages-")]
        expect(len(kfd) == 1 and len(pages) == gpus and not temp_files(run.images),
               f"at the unpause: want one KFD image and {gpus} pages file(s), no temporary file; "
               f"have {ours}, {temp_files(run.images)}", False)
    after_dump_killed(run, procs, p, "dump-killed", [] if before else [pid], f"at {call}", gpu_pids=[pid])
    if scenario in ("dump-killed-info-holder", "dump-killed-info-scm-holder"):
        said = guardian_log(run.images)
        expect("stay paused" not in said, f"the guardian reports a failure with two candidate owners: {said}", False)
    if scm:
        dump_log = open(os.path.join(run.images, "dump.log"), errors="replace").read()
        expect("the guardian knows it before its pause (2 candidate processes)" in dump_log,
               "the dump log does not say the guardian was given both processes as candidates", False)
        # /proc order: the holder (older) was tried first, refused, and
        # the owner resumed after it.
        skipped = said.find(f"pid {holder}: holds the file but is not its KFD process (EBADF)")
        resumed = said.find(f"pid {pid}: GPU queues resumed (UNPAUSE)")
        expect(0 <= skipped < resumed,
               f"the guardian's log does not say it tried the holder {holder} first (EBADF), then resumed {pid}",
               False)
    if before:
        said = guardian_log(run.images)
        expect(f"pid {pid}: its GPU queues were not paused when CRIU ended: nothing to resume" in said,
               f"the guardian's log does not say it found {pid} not paused", False)


def restore_killed_at(run):
    """restore-killed-copied: a good dump, then CRIU's restore SIGKILLed
    after the GPU copy (every BO holds its dumped contents), before RESUME;
    then as restore-killed."""
    procs = run.start()
    (_, pid), = procs
    dumped = {b["va"]: b["checksum"] for b in run.emu.ctl("bos", pid)["bos"]}
    run.dump([pid])
    expect(not (still := guardians_left()), f"guardian processes left after the dump: {still}", False)
    call = run.sc.stall
    run.emu.faults(call)
    pidfile = os.path.join(run.work, "restored.pid")
    p = criu_popen(run, "restore", ["-d", "--pidfile", pidfile], "restore.log")
    stall_criu(run, p, call)
    now = {b["va"]: b["checksum"] for b in run.emu.ctl("bos", pid)["bos"]}
    expect(now == dumped, f"at {call}, BOs of {pid} (va: checksum) {now} != dumped {dumped}")
    proc = run.emu.process(pid) or {}
    expect(proc.get("restored") and proc.get("evicted"), f"at {call}, the model's process {pid}: {proc}")
    g = guardians()
    expect(len(g) == 1, f"guardian processes during the restore: {g} (want exactly one)")
    after_restore_killed(run, pid, p, g, f"at {call}")


def render_killed(run):
    """render-killed: a process with a render node and no /dev/kfd (its GEM
    BOs KFDEMU_WORKLOAD_VRAM_MIB large), CRIU SIGKILLed while one of its
    amdgpu-drm-pages files is written (nothing paused: no KFD): within
    GUARDIAN_EXIT_S no temporary file and no guardian is left, the
    guardian's log names each file it removed, and the process completes
    its GEM SDMA copies."""
    procs = run.start()
    (d, pid), = procs
    p = criu_popen(run, "dump", ["-t", str(pid)], "dump.log")
    copying = lambda: any(n.startswith(".amdgpu-drm-pages-") for n in temp_files(run.images)) or \
        p.poll() is not None
    expect(wait_for(copying, 60, "the render node's copy"), "the render node's copy never started", False)
    expect(p.poll() is None, f"criu dump ended ({p.returncode}) before its copy could be interrupted", False)
    g = guardians()
    expect(len(g) == 1, f"guardian processes during the dump: {g} (want exactly one)", False)
    tmps = temp_files(run.images)
    rc = kill_criu(p, "dump-killed")
    log(f"criu dump ended with {rc} during the render node's copy; temporary files then: {tmps}; guardian {g[0]}")
    expect(tmps, "no temporary file when CRIU was killed: nothing for the guardian to remove", False)
    expect(not (left := temp_files_left(run.images)), f"temporary files left in the image directory: {left}", False)
    expect(not (still := guardians_left()), f"guardian processes left {GUARDIAN_EXIT_S:.0f} s after: {still}", False)
    said = guardian_log(run.images)
    log(f"guardian log:\n{said.rstrip()}")
    for t in tmps:
        expect(f"removed the temporary file {t}" in said, f"the guardian's log does not name {t}", False)
    expect("UNPAUSE" not in said, "the guardian unpaused something in a dump without KFD", False)
    v = verdict(d, pid)
    expect(v == "OK", f"workload {pid} after CRIU was killed: {v}", False)
    run.wl.wait(timeout=30)


def inside(args, criu):
    """Runs in a kfd-emu: the scenario, or one phase of a two-machine one."""
    harness.become_subreaper()
    sc = SCENARIOS[args.scenario]
    if sc.vram_mib:
        os.environ["KFDEMU_WORKLOAD_VRAM_MIB"] = str(sc.vram_mib)
    if sc.slow:
        os.environ["KFDEMU_WORKLOAD_SDMA_CHECK_MIB"] = str(SDMA_CHECK_MIB)
    run = Run(args, criu, args.work)
    try:
        sc.run(run)
    finally:
        run.cleanup()


# --------------------------------------------------------------------------
# Incremental checkpoints: periodic dumps against the previous one, pre-copy
# --------------------------------------------------------------------------

PERIODIC_DUMPS = 3
PERIODIC_VRAM_MIB = 16  # per GPU; the workload rewrites 1 MiB of it between dumps
DEDUP_VRAM_MIB = 8  # per GPU and process, the same bytes everywhere (dedup)
# KFD_MAX_BUFFER_SIZE of the incremental dumps: staging writes of 192 or
# 384 KiB, so that every 1 MiB chunk is cut across writes.
PERIODIC_BOUND = 768 << 10
SUMMARY_DUMP = re.compile(r"amdgpu_plugin: dump: .*?\((\d+) with contents\), (\d+) bytes")
SUMMARY_INCREMENTAL = re.compile(r"incremental on (\d+) GPUs?: (\d+) bytes \([^)]*\) written, (\d+) bytes "
                                 r"\([^)]*\) taken from the parent checkpoint, chunks hashed on up to (\d+) "
                                 r"threads? per GPU \(at most (\d+)\)")
SUMMARY_RESTORE = re.compile(r"amdgpu_plugin: restore: .*checksums matched for (\d+) bytes")


def tracks_memory(criu):
    """Whether this kernel lets CRIU track memory (soft-dirty): --track-mem
    and pre-dump need it."""
    return subprocess.run([criu, "check", "--feature", "mem_dirty_track"], capture_output=True).returncode == 0


def xor_byte(path, at, mask):
    """The byte at offset `at` of the file `path` xor `mask`, in place."""
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ mask]))


def pages_payload(images):
    """Payload bytes of the KFD pages files in `images`, as their 8-byte
    headers announce them (the plugin's seal follows the payload)."""
    total = 0
    for f in glob.glob(os.path.join(images, "amdgpu-pages-*.img")):
        with open(f, "rb") as fh:
            total += int.from_bytes(fh.read(8), "little")
    return total


def periodic_dump(run, pid, k, track, leave_running=True, parent_gpu=True):
    """The k-th `criu dump --leave-running` of the periodic scenario, into
    WORK/ckpt-k with --prev-images-dir ../ckpt-(k-1) after the first;
    returns (bytes of the BOs, bytes written, bytes from the parent).
    pre-copy: `leave_running` False for its final dump; `parent_gpu` False
    when ckpt-(k-1) holds no GPU image (a pre-dump's), so dump k must be
    complete."""
    run.images = os.path.join(run.work, f"ckpt-{k}")
    os.makedirs(run.images, exist_ok=True)
    extra = ["-t", str(pid)] + (["--leave-running"] if leave_running else [])
    saved_env = run.env
    if k > 1:
        run.env = dict(run.env, KFD_MAX_BUFFER_SIZE=str(PERIODIC_BOUND))
    if k > 1 and track:
        extra += track + ["--prev-images-dir", f"../ckpt-{k - 1}"]
    elif k > 1:
        gpu_only_parent(run.work, k)
    try:
        rc = run.criu_run("dump", extra, "dump.log")
    finally:
        run.env = saved_env
    log_path = os.path.join(run.images, "dump.log")
    if rc != 0:
        show_log(log_path)
        raise Failure(f"criu dump {k} failed ({rc})", False)
    if k > 1:
        peak = run.emu.ctl("userptr", run.criu_pids["dump"])["peak"]
        expect(0 < peak <= PERIODIC_BOUND, f"dump {k}: staging peak {peak} bytes, KFD_MAX_BUFFER_SIZE "
               f"{PERIODIC_BOUND}", False)
    text = open(log_path, errors="replace").read()
    total = SUMMARY_DUMP.search(text)
    expect(total is not None, f"dump {k}: no summary line in {log_path}", False)
    total = int(total.group(2))
    incr = SUMMARY_INCREMENTAL.search(text)
    written = pages_payload(run.images)
    if k == 1 or not parent_gpu:
        expect(incr is None, f"dump {k} (no parent GPU image) says it is incremental: {incr and incr.group(0)}",
               False)
        expect(written == total, f"dump {k} wrote {written} bytes of pages, its BOs hold {total}", False)
        log(f"dump {k}: complete, {total} bytes")
        return total, written, 0
    expect(incr is not None, f"dump {k}: no incremental clause in its summary line", False)
    said_written, said_parent = int(incr.group(2)), int(incr.group(3))
    threads, cap = int(incr.group(4)), int(incr.group(5))
    expect(1 <= threads <= min(cap, os.cpu_count()), f"dump {k}: chunks hashed on {threads} threads per GPU, "
           f"at most {cap} and {os.cpu_count()} cores", False)
    expect(said_written == written, f"dump {k}: the summary says {said_written} bytes written, its pages files "
           f"hold {written}", False)
    expect(said_written + said_parent == total, f"dump {k}: {said_written} written + {said_parent} from the "
           f"parent != {total} bytes of BOs", False)
    log(f"dump {k}: {written} of {total} bytes written, {said_parent} taken from ../ckpt-{k - 1}, chunks hashed "
        f"on up to {threads} thread(s) per GPU")
    return total, written, said_parent


def gpu_only_parent(work, k):
    """Without memory tracking CRIU refuses a parent with CPU pages (its
    pid-reuse check needs the parent inventory's uptime, which only
    --track-mem writes): WORK/ckpt-k gets a `parent` link to
    WORK/ckpt-(k-1).gpu, which holds (hard links to) the plugin's files of
    ckpt-(k-1) and its own parent link, so CRIU sees no parent pages and
    the plugin the chain it would see under --prev-images-dir."""
    prev, gdir = os.path.join(work, f"ckpt-{k - 1}"), os.path.join(work, f"ckpt-{k - 1}.gpu")
    os.makedirs(gdir, exist_ok=True)
    for f in glob.glob(os.path.join(prev, "amdgpu-*.img")):
        os.link(f, os.path.join(gdir, os.path.basename(f)))
    if k > 2:
        os.symlink(f"../ckpt-{k - 2}.gpu", os.path.join(gdir, "parent"))
    os.symlink(f"../ckpt-{k - 1}.gpu", os.path.join(work, f"ckpt-{k}", "parent"))


def periodic_step(run, k):
    """Lets the workload check its memory and GPUs after dump k (and
    rewrite a MiB of each VRAM BO through its GPU, but after the last)."""
    open(os.path.join(run.work, f"step{k}"), "w").close()
    done = os.path.join(run.work, f"step{k}.done")
    result = os.path.join(run.work, "result")
    wait_for(lambda: os.path.exists(done) or os.path.exists(result), 60, f"step {k} of the workload")
    if not os.path.exists(done):
        show_log(os.path.join(run.work, "workload.log"))
        why = open(result).read().strip() if os.path.exists(result) else "no answer within 60 s"
        raise Failure(f"after dump {k} (--leave-running): the workload says {why}", False)


def periodic_incremental(run):
    """periodic: criu dump --leave-running three times, each after the
    first with --track-mem --prev-images-dir ../ckpt-(k-1) where the kernel
    tracks memory (else with a parent link to the previous dump's GPU files,
    gpu_only_parent), while the workload checks its BOs and GPUs after each dump and
    rewrites 1 MiB of each GPU's 16 MiB VRAM BO through the GPU between
    dumps. Checked: after every dump the process runs (not paused, queues
    active, no guardian left) and its GPU work succeeds; the first dump is
    complete; each later one is incremental, its pages files hold exactly
    the bytes its summary says it wrote, written + taken from the parent =
    the BOs' bytes, at least the rewritten MiB per GPU and at most one more
    MiB per GPU written. Then the process is killed and restored from the
    last checkpoint (a chain of three): every byte's checksum matched (the
    summary line), and the restored process checks every BO's contents
    with its patches and its GPUs."""
    procs = run.start()
    pid = procs[0][1]
    before = snapshot(run.emu, pid)
    with open(os.path.join(run.work, "ready")) as f:
        gpus = len(f.read().split("\n")[1:-1]) - 1  # a VRAM BO per GPU, then the GTT BO
    track = ["--track-mem"] if tracks_memory(run.criu) else []
    if not track:
        log("this kernel does not track memory (criu check --feature mem_dirty_track), so CRIU refuses "
            "--prev-images-dir: each dump's parent link is made by the test, to the previous dump's GPU files "
            "only (gpu_only_parent)")
    totals = []
    for k in range(1, PERIODIC_DUMPS + 1):
        totals.append(periodic_dump(run, pid, k, track))
        expect(alive(pid), f"dump {k} (--leave-running): process {pid} is gone", False)
        check_running(run.emu, pid, before, f"after dump {k} (--leave-running)")
        expect(not (still := guardians_left()), f"guardian processes left after dump {k}: {still}", False)
        periodic_step(run, k)
    mib = 1 << 20
    full = totals[0][0]
    for k, (total, written, _) in enumerate(totals[1:], start=2):
        expect(total == full, f"dump {k}: {total} bytes of BOs, dump 1 had {full}", False)
        expect(gpus * mib <= written <= 2 * gpus * mib,
               f"dump {k}: wrote {written} bytes; the workload rewrote {gpus} MiB ({gpus} GPU(s)) since dump "
               f"{k - 1}", False)
    run.wl.kill()
    run.wl.wait()
    run.wl = None
    expect(wait_for(lambda: not reap_children() and not os.path.exists(f"/proc/{pid}"), 10, "the workload to go"),
           f"process {pid} still exists", False)
    run.images = os.path.join(run.work, f"ckpt-{PERIODIC_DUMPS}")
    if run.args.interop == "upstream-restore":
        # The chain flattened, then restored by upstream's plugin.
        flat = os.path.join(run.work, "flat")
        f = amdgpu_img(run, "flatten", run.images, flat)
        expect(f.returncode == 0, f"flatten: {f.stdout}{f.stderr}")
        run.images = flat
        run.restore(pid)
        log(f"upstream's plugin restored the flattened chain of {PERIODIC_DUMPS}")
        run.verdicts(procs)
        return
    run.restore(pid)
    text = open(os.path.join(run.images, "restore.log"), errors="replace").read()
    m = SUMMARY_RESTORE.search(text)
    expect(m is not None and int(m.group(1)) == full,
           f"restore: checksums matched for {m and m.group(1)} bytes, the BOs hold {full}")
    log(f"restore from a chain of {PERIODIC_DUMPS}: checksums matched for {full} bytes")
    expect(not (still := guardians_left()), f"guardian processes left after the restore: {still}")
    run.verdicts(procs)
    inspect_chain(run, full)


def metadata_round_trip(run):
    """gem-metadata (see the header)."""
    round_trip(run)
    j = json.loads(amdgpu_img(run, "show", "--json", run.images).stdout)
    want = {"flags": 0x8000000000000123, "tiling_info": 0x00003a0000004c05, "size": 37}
    plain = {"flags": 0x42, "tiling_info": 0x7, "size": 0, "data": ""}
    pick = lambda found: sorted(({k: m[k] for k in want} for m in found), key=lambda m: m["size"])
    render = [b["metadata"] for r in j["render"] for b in r["bos"] if b.get("metadata")]
    shared = [d["metadata"] for d in j["dmabuf"] if d.get("metadata")]
    log(f"metadata in the images: render BOs {render}, dma-bufs {shared}")
    expect(pick(render) == [{k: plain[k] for k in want}, want] and plain in render,
           f"render image: want a BO with metadata {want} and one with {plain}, have {render}", False)
    expect(pick(shared) == [want], f"dma-bufs: want one with metadata {want}, have {shared}", False)
    v = amdgpu_img(run, "verify", run.images)
    expect(v.returncode == 0, f"amdgpu-img verify of the checkpoint with metadata: {v.stdout}{v.stderr}", False)
    text = amdgpu_img(run, "show", run.images).stdout
    line = f"metadata 37 bytes flags {want['flags']:#x} tiling {want['tiling_info']:#x}"
    expect(text.count(line) == 2, f"amdgpu-img show: want '{line}' on the render BO and the dma-buf:\n{text}",
           False)


SUMMARY_DEDUP = re.compile(r"deduplicated: (\d+) bytes \([^)]*\) written, (\d+) bytes")
DEDUP_CHAIN_DUMPS = 2


def dedup_chain_dump(run, pid, k, track):
    """The k-th `criu dump --leave-running` of dedup into WORK/ckpt-k,
    incremental against ckpt-(k-1) after the first (as periodic_dump);
    returns (bytes of the BOs, pages bytes written, bytes not written again
    (deduplicated), bytes taken from the parent), checking that the
    summary's figures add up to the BOs' bytes and that the pages files
    hold exactly what it says was written."""
    run.images = os.path.join(run.work, f"ckpt-{k}")
    os.makedirs(run.images, exist_ok=True)
    extra = ["-t", str(pid), "--leave-running"]
    if k > 1 and track:
        extra += track + ["--prev-images-dir", f"../ckpt-{k - 1}"]
    elif k > 1:
        gpu_only_parent(run.work, k)
    rc = run.criu_run("dump", extra, "dump.log")
    if rc != 0:
        show_log(os.path.join(run.images, "dump.log"))
        raise Failure(f"criu dump {k} failed ({rc})", False)
    total, written, saved, parent = dedup_summary(run, f"dump {k}", incremental=k > 1)
    log(f"dump {k}: {written} of {total} bytes written, {saved} not written again, {parent} taken from the parent")
    return total, written, saved, parent


def dedup_summary(run, what, incremental=False):
    """The plugin's summary in run.images/dump.log with its deduplicated
    clause, and an incremental clause exactly when `incremental`: (bytes of
    the BOs, pages bytes written, bytes not written again (deduplicated),
    bytes taken from the parent), checked to add up to the BOs' bytes, the
    pages files holding exactly what it says was written."""
    text = open(os.path.join(run.images, "dump.log"), errors="replace").read()
    total, dedup, incr = SUMMARY_DUMP.search(text), SUMMARY_DEDUP.search(text), SUMMARY_INCREMENTAL.search(text)
    expect(total is not None and dedup is not None, f"{what}: no summary line with a deduplicated clause", False)
    expect((incr is not None) == incremental, f"{what}: incremental clause {incr and incr.group(0)}", False)
    total, written, saved = int(total.group(2)), pages_payload(run.images), int(dedup.group(2))
    parent = int(incr.group(3)) if incr else 0
    expect(int(dedup.group(1)) == written, f"{what}: the summary says {dedup.group(1)} bytes written, its pages "
           f"files hold {written}", False)
    expect(written + saved + parent == total, f"{what}: {written} written + {saved} deduplicated + {parent} from "
           f"the parent != {total} bytes of BOs", False)
    return total, written, saved, parent


def dedup_chain(run):
    """dedup: a tree of two processes (workload --tree --replica) whose VRAM
    BO on every GPU holds the same bytes, dumped twice with
    --leave-running, the second incremental
    against the first (--track-mem --prev-images-dir where the kernel
    tracks memory, else gpu_only_parent); between them the workload
    rewrites the same MiB of every replica with the same bytes on every GPU
    and in both processes (workload --periodic --replica). Checked: dump 1
    stores one copy of the 4 replicas (at least 3 not written again); dump
    2 writes the rewritten MiB once (1 MiB: its other 3 copies deduplicated
    within the dump, the rest taken from dump 1), every figure of both
    summaries adding up to the BOs' bytes; the processes keep running
    after each dump. Then they are killed and restored from the chain (each
    process checks every BO with its patch and its GPUs); amdgpu-img show
    gives dump 1's per-GPU deduplication line, verify passes on the chain
    (every referenced chunk read through its checksums, in this dump and
    the parent), and flatten writes a complete checkpoint of the chain
    (pages files of all the BOs' bytes, no parent, no deduplicated chunk)
    that verify passes."""
    procs = run.start()
    before = {pid: snapshot(run.emu, pid) for _, pid in procs}
    track = ["--track-mem"] if tracks_memory(run.criu) else []
    sums = []
    for k in range(1, DEDUP_CHAIN_DUMPS + 1):
        sums.append(dedup_chain_dump(run, procs[0][1], k, track))
        for d, pid in procs:
            expect(alive(pid), f"dump {k} (--leave-running): process {pid} is gone", False)
            check_running(run.emu, pid, before[pid], f"after dump {k} (--leave-running)")
            open(os.path.join(d, f"step{k}"), "w").close()
        for d, pid in procs:
            done = os.path.join(d, f"step{k}.done")
            wait_for(lambda: os.path.exists(done) or os.path.exists(os.path.join(d, "result")), 60,
                     f"step {k} of {pid}")
            if not os.path.exists(done):
                show_log(os.path.join(run.work, "workload.log"))
                raise Failure(f"after dump {k} (--leave-running): workload {pid} did not finish step {k}", False)
    mib, replica = 1 << 20, DEDUP_VRAM_MIB << 20
    expect(sums[0][2] >= 3 * replica, f"dump 1: {sums[0][2]} bytes not written again, want >= {3 * replica}")
    expect(sums[1][1] == mib and sums[1][2] >= 3 * mib,
           f"dump 2: wrote {sums[1][1]} bytes and deduplicated {sums[1][2]}; the workload rewrote the same MiB "
           f"in 4 replicas, so want 1 MiB written and 3 deduplicated")
    pids = [pid for _, pid in procs]
    run.wl.kill()
    run.wl.wait()
    run.wl = None
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    expect(wait_for(lambda: not reap_children() and not any(os.path.exists(f"/proc/{p}") for p in pids), 10,
                    "the workload to go"), f"processes {pids} still exist", False)
    run.restore(pids[0])
    run.verdicts(procs)
    log(f"restored from the chain of {DEDUP_CHAIN_DUMPS}: every BO checked by both processes")
    shown = amdgpu_img(run, "show", os.path.join(run.work, "ckpt-1")).stdout
    expect("deduplicated: GPU 0x" in shown, "amdgpu-img show gives no per-GPU deduplication line")
    v = amdgpu_img(run, "verify", run.images)
    expect(v.returncode == 0, f"verify of the chain: {v.stdout[-2000:]}{v.stderr[-2000:]}")
    flat = os.path.join(run.work, "flat")
    f = amdgpu_img(run, "flatten", run.images, flat)
    expect(f.returncode == 0, f"flatten: {f.stdout}{f.stderr}")
    expect(pages_payload(flat) == sums[0][0], f"flattened pages files hold {pages_payload(flat)} bytes, the BOs "
           f"{sums[0][0]}")
    j = json.loads(amdgpu_img(run, "show", "--json", flat).stdout)
    expect(all("parent" not in k and not any("bytes_stored_elsewhere" in b for b in k["bos"]) for k in j["kfd"]),
           "the flattened KFD images name a parent or deduplicated chunks")
    v = amdgpu_img(run, "verify", flat)
    expect(v.returncode == 0, f"verify of the flattened checkpoint: {v.stdout[-2000:]}{v.stderr[-2000:]}")
    log("amdgpu-img flatten of the deduplicated chain: complete, verified")


def amdgpu_img(run, *args):
    out = subprocess.run([run.args.amdgpu_img, *args], capture_output=True, text=True)
    log(f"amdgpu-img {' '.join(args)}: exit {out.returncode}")
    return out


def inspect_chain(run, full):
    """amdgpu-img on the chain of the periodic scenario: verify reads every
    GPU byte of the last checkpoint through its parents; flatten writes a
    complete checkpoint (no parent in its KFD image, pages files of all the
    BOs' bytes) that verify passes; a damaged byte of the first checkpoint,
    still taken from it by the last, fails verify and flatten of the last."""
    last = os.path.join(run.work, f"ckpt-{PERIODIC_DUMPS}")
    v = amdgpu_img(run, "verify", "-v", last)
    expect(v.returncode == 0 and "with its parents" in v.stdout, f"verify of the chain: {v.stdout}{v.stderr}")
    flat = os.path.join(run.work, "flat")
    f = amdgpu_img(run, "flatten", last, flat)
    expect(f.returncode == 0, f"flatten: {f.stdout}{f.stderr}")
    expect(pages_payload(flat) == full, f"flattened pages files hold {pages_payload(flat)} bytes, the BOs {full}")
    v = amdgpu_img(run, "verify", flat)
    expect(v.returncode == 0, f"verify of the flattened checkpoint: {v.stdout}{v.stderr}")
    j = json.loads(amdgpu_img(run, "show", "--json", flat).stdout)
    expect(all("parent" not in k for k in j["kfd"]), "the flattened KFD image names a parent")
    first = sorted(glob.glob(os.path.join(run.work, "ckpt-1", "amdgpu-pages-*.img")))
    first = [p for p in first if os.path.getsize(p) > 8][0]
    # A byte of the last MiB of the first BO (after the 8-byte header): no dump rewrote it.
    xor_byte(first, 8 + (PERIODIC_VRAM_MIB - 1) * (1 << 20) + 12345, 0xff)
    v = amdgpu_img(run, "verify", last)
    expect(v.returncode == 1 and "do not match their checksum" in v.stdout and
           f"parent/parent/{os.path.basename(first)} at payload offset" in v.stdout,
           f"verify of the chain with a damaged parent (naming the file of ckpt-1): {v.stdout}{v.stderr}")
    f = amdgpu_img(run, "flatten", last, flat + "-2")
    expect(f.returncode != 0 and "do not match their checksum" in f.stderr,
           f"flatten of the chain with a damaged parent: {f.stdout}{f.stderr}")
    log("amdgpu-img: verify follows the chain, flatten writes a complete checkpoint; a damaged parent byte is "
        "found by both")


# pre-copy: CRIU's log line for each device mapping a plugin claimed
# (proc_parse.c, handle_vma), the one for a mapping none claimed, and the
# BUG a pre-dump hits without soft-dirty (mem.c, task_reset_dirty_track:
# BUG_ON(!kdat.has_dirty_track); pre-dump forces --track-mem after
# check_options has let it through).
CLAIMED_VMA = "Found device file mapping, plugin is available"
UNCLAIMED_VMA = "Can't handle non-regular mapping"
SOFT_DIRTY_BUG = re.compile(r"Error \(criu/mem\.c:\d+\): BUG at criu/mem\.c:\d+")


def criu_calls(emu):
    """The model's counts of KFD CRIU calls (AMDKFD_IOC_CRIU_OP and its
    sub-ops: PROCESS_INFO is the one that pauses) and SDMA jobs."""
    c = emu.ctl("counters")
    return {k: v for k, v in c["ioctls"].items() if "CRIU" in k}, c["sdma_jobs"]


def pre_dump(run, pid, before, track):
    """`criu pre-dump -t PID -D WORK/ckpt-1` with our plugin (pre-copy):
    the checks of the scenario's first half (see the top)."""
    run.images = os.path.join(run.work, "ckpt-1")
    os.makedirs(run.images)
    calls = criu_calls(run.emu)
    rc = run.criu_run("pre-dump", ["-t", str(pid)], "pre-dump.log")
    path = os.path.join(run.images, "pre-dump.log")
    text = open(path, errors="replace").read()
    expect(plugin_errors(path) == [], f"the pre-dump logged plugin errors: {plugin_errors(path)}", False)
    claimed = text.count(CLAIMED_VMA)
    expect(UNCLAIMED_VMA not in text and claimed > 0,
           f"the pre-dump: {claimed} device mappings claimed, unclaimed ones: {UNCLAIMED_VMA in text}", False)
    after = criu_calls(run.emu)
    expect(after == calls, f"the pre-dump made KFD CRIU calls or GPU copies: {calls} before, {after} after", False)
    ours = [n for n in os.listdir(run.images) if "amdgpu" in n]
    expect(not ours, f"the pre-dump wrote files of ours: {ours}", False)
    if track:
        if rc != 0:
            show_log(path)
        expect(rc == 0, f"criu pre-dump failed ({rc}) on a kernel that tracks memory", False)
        how = "succeeded"
    else:
        bug = SOFT_DIRTY_BUG.search(text)
        errors = [l for l in text.splitlines() if "Error (" in l]
        last = errors[-1] if errors else ""
        if rc == 0 or not bug or not last.endswith(bug.group(0)):
            show_log(path)
        expect(rc != 0 and bug is not None, f"criu pre-dump (exit {rc}) did not stop at CRIU's soft-dirty BUG in "
               f"mem.c", False)
        expect(last.endswith(bug.group(0)), f"the pre-dump's last error is not the soft-dirty BUG: {last}", False)
        how = f"failed (exit {rc}) at {bug.group(0)} only"
    expect(wait_for(lambda: alive(pid), 1) and alive(pid), f"process {pid} is gone after the pre-dump", False)
    check_running(run.emu, pid, before, "after the pre-dump")
    expect(not (still := guardians_left()), f"guardian processes left after the pre-dump: {still}", False)
    log(f"criu pre-dump {how}: {claimed} device mappings claimed by a plugin, no KFD CRIU call, no GPU copy, no "
        f"file of ours; process {pid} runs with active queues")


def pre_copy(run, tracked):
    """pre-copy and pre-copy-untracked (see the top): criu pre-dump, the
    GPU memory pre-copied by a dump --leave-running, the final dump writing
    what changed since, the restore from it. NotRun up front when the
    kernel's soft-dirty tracking is not what the scenario needs."""
    if tracked != tracks_memory(run.criu):
        raise harness.NotRun(
            "criu pre-dump needs the kernel's soft-dirty page tracking (CONFIG_MEM_SOFT_DIRTY), which this kernel "
            "lacks (criu check --feature mem_dirty_track fails): the pre-copy flow cannot run here; "
            "pre_copy_untracked runs what can" if tracked else
            "this kernel tracks memory (soft-dirty): pre_copy runs the whole pre-copy flow here")
    procs = run.start()
    pid = procs[0][1]
    before = snapshot(run.emu, pid)
    with open(os.path.join(run.work, "ready")) as f:
        gpus = len(f.read().split("\n")[1:-1]) - 1  # a VRAM BO per GPU, then the GTT BO
    track = ["--track-mem"] if tracked else []
    pre_dump(run, pid, before, track)
    # The GPU memory's pre-copy: the pre-dump's directory holds no GPU
    # image, so this dump is complete.
    total, _, _ = periodic_dump(run, pid, 2, track, parent_gpu=False)
    expect(alive(pid), f"dump 2 (--leave-running): process {pid} is gone", False)
    check_running(run.emu, pid, before, "after dump 2 (--leave-running)")
    expect(not (still := guardians_left()), f"guardian processes left after dump 2: {still}", False)
    periodic_step(run, 1)  # checks its GPUs, rewrites a MiB of each VRAM BO
    last = snapshot(run.emu, pid)
    final, written, parent = periodic_dump(run, pid, 3, track, leave_running=False)
    mib = 1 << 20
    expect(final == total, f"the final dump: {final} bytes of BOs, the pre-copy {total}", False)
    expect(gpus * mib <= written <= 2 * gpus * mib,
           f"the final dump wrote {written} bytes; the workload rewrote {gpus} MiB ({gpus} GPU(s)) since the "
           f"pre-copy", False)
    run.wl.wait(timeout=30)
    run.wl = None
    expect(wait_for(lambda: not reap_children() and not os.path.exists(f"/proc/{pid}"), 10, "the dumped task"),
           f"process {pid} still exists after the final dump", False)
    run.restore(pid)
    text = open(os.path.join(run.images, "restore.log"), errors="replace").read()
    m = SUMMARY_RESTORE.search(text)
    expect(m is not None and int(m.group(1)) == final,
           f"restore: checksums matched for {m and m.group(1)} bytes, the BOs hold {final}")
    expect(not (still := guardians_left()), f"guardian processes left after the restore: {still}")
    check_restored(run.emu, pid, last)
    periodic_step(run, 2)  # the restored process checks its BOs and GPUs
    run.verdicts(procs)
    log(f"pre-copy: the final dump wrote {written} of {final} bytes ({parent} from the pre-copy), the restore "
        f"from it passed" + ("" if tracked else "; the pre-dump itself cannot run on this kernel (no soft-dirty)"))


def queue_states(q):
    """What a client set on each queue after creating it (`ctl queues`)."""
    return sorted((x["id"], x["gpu_id"], x["type"], x["percentage"], x["state"], x["gws"], tuple(x["cu_mask"]))
                  for x in q["queues"])


def queue_state_round_trip(run):
    """queue-state: a CU-masked AQL queue holding the GPU's GWS and an
    inactive SDMA queue with a FENCE pending (workload.cpp --queue-state).
    Restored, every queue has its dumped CU mask, GWS and state in the
    model; the rest is checked as in roundtrip; the process itself finds
    the GWS held and the FENCE run once it gives the ring back."""
    procs = run.start()
    pid = procs[0][1]
    before = snapshot(run.emu, pid)
    states = queue_states(before["queues"])
    log(f"workload {pid}: queues (id, gpu, type, percentage, state, gws, cu_mask) {states}")
    expect(any(s[5] and s[6] for s in states) and any(s[4] == "inactive" for s in states),
           f"the workload has no CU-masked GWS queue or no inactive queue: {states}", False)
    run.dump([pid])
    run.restore(pid)
    after = queue_states(run.emu.ctl("queues", pid))
    expect(after == states, f"queue state after restore {after} != dumped {states}")
    check_restored(run.emu, pid, before)
    run.verdicts(procs)


def svm_ranges(emu, pid):
    """The process's SVM ranges in the model (`ctl svm`), the GPU whose VRAM
    holds each as a flag (a restore on another machine may renumber it)."""
    return [{**r, "vram_gpu_id": r["vram_gpu_id"] != 0} for r in emu.ctl("svm", pid)["ranges"]]


def svm_round_trip(run):
    """svm: SVM ranges made through libhsakmt (workload.cpp --svm), one in
    VRAM, three split from one in system memory. Restored (KFD CRIU carries
    them; RESUME sets them again), the model has the same ranges with the
    same attributes and the VRAM one in VRAM again; the process finds the
    same hsaKmtSVMGetAttr answers; the rest is checked as in roundtrip."""
    procs = run.start()
    pid = procs[0][1]
    before = snapshot(run.emu, pid)
    ranges = svm_ranges(run.emu, pid)
    log(f"workload {pid}: SVM ranges {ranges}")
    expect(len(ranges) == 4 and sum(r["vram_gpu_id"] for r in ranges) == 1,
           f"the workload has not 4 SVM ranges, one in VRAM: {ranges}", False)
    run.dump([pid])
    run.restore(pid)
    after = svm_ranges(run.emu, pid)
    expect(after == ranges, f"SVM ranges after restore {after} != dumped {ranges}")
    check_restored(run.emu, pid, before)
    run.verdicts(procs)


def cp_queues(q):
    """The CP (PM4 compute, type 0) queues, their CP read pointer and their
    MQD's control stack (size, stack and wave-state offsets)."""
    return sorted((x["id"], x["state"], x["engine"]["rptr"], x["engine"]["hung"],
                   tuple(x["ctl_stack"][k] for k in ("size", "offset", "wg_state_offset")))
                  for x in q["queues"] if x["type"] == 0 and "engine" in x)


def cp_queue_round_trip(run):
    """cp-queue: a CP (PM4) compute queue paused with packets pending
    (workload.cpp --cp-queue): dumped while its CP waits at a WAIT_REG_MEM
    (after a WRITE_DATA it ran), with a WRITE_DATA and a RELEASE_MEM behind
    it. Restored, the model has the queue active with its CP still at the
    WAIT_REG_MEM (read pointer 5 dwords, from the checkpointed MQD); the
    rest is checked as in roundtrip; the process itself finds nothing more
    run, sets the flag, and gets the WRITE_DATA, the RELEASE_MEM's event and
    the read pointer at the end, without the first WRITE_DATA again. The
    queue's control stack (libhsakmt gives it a CWSR area) comes back with
    the size and offsets it was dumped with."""
    procs = run.start()
    pid = procs[0][1]
    before = snapshot(run.emu, pid)
    cps = cp_queues(before["queues"])
    log(f"workload {pid}: CP queues (id, state, read pointer, hung, control stack) {cps}")
    expect(cps and all(c[1] == "active" and c[2] == 5 and not c[3] and c[4][0] > 0 for c in cps),
           f"the workload has no CP queue with a control stack waiting at its second packet: {cps}", False)
    run.dump([pid])
    run.restore(pid)
    after = cp_queues(run.emu.ctl("queues", pid))
    expect(after == cps, f"CP queues after restore {after} != dumped {cps}")
    check_restored(run.emu, pid, before)
    run.verdicts(procs)


# The VRAM filler of evicting-restore and evicted-dump: a process that
# creates, on each emulated GPU's render node (minors 128 up, in `ctl
# counters`' vram order), one GEM BO of VRAM the size of that GPU's VRAM
# (argv[2:]) through DRM_IOCTL_AMDGPU_GEM_CREATE. "hold": writes a pattern
# into each BO's first and last page (GEM_MMAP, mmap), says "ready" and
# holds them until stdin ends. "thrash:PID": says "ready" after its first
# round and, until stdin ends or PID is gone, creates them, holds them
# 5 ms, closes them (DRM_IOCTL_GEM_CLOSE) and waits 5 ms.
FILLER = r"""
import fcntl, mmap, os, select, struct, sys, time
GEM_CREATE, GEM_MMAP, GEM_CLOSE, VRAM = 0xC0206440, 0xC0086441, 0x40086409, 4
fds = [os.open(f"/dev/dri/renderD{128 + i}", os.O_RDWR) for i in range(len(sys.argv) - 2)]
def create():
    out = []
    for fd, size in zip(fds, map(int, sys.argv[2:])):
        r = fcntl.ioctl(fd, GEM_CREATE, struct.pack("QQQQ", size, 4096, VRAM, 0))
        out.append((fd, size, struct.unpack_from("I", r)[0]))
    return out
if sys.argv[1] == "hold":
    for i, (fd, size, handle) in enumerate(create()):
        off = struct.unpack("Q", fcntl.ioctl(fd, GEM_MMAP, struct.pack("II", handle, 0)))[0]
        for at in (0, size - 4096):
            m = mmap.mmap(fd, 4096, offset=off + at)
            m[:] = bytes([0x5a ^ i]) * 4096
            m.close()
    print("ready", flush=True)
    sys.stdin.read()
    sys.exit(0)
first, pid = True, sys.argv[1].split(":")[1]
while not select.select([sys.stdin], [], [], 0)[0] and os.path.exists(f"/proc/{pid}"):
    held = create()
    time.sleep(0.005)
    for fd, _, handle in held:
        fcntl.ioctl(fd, GEM_CLOSE, struct.pack("II", handle, 0))
    if first:
        print("ready", flush=True)
        first = False
    time.sleep(0.005)
"""


def start_filler(run, mode):
    """FILLER in `mode` over every GPU's VRAM, once it says it is ready."""
    vram = run.emu.ctl("counters")["vram"]
    filler = subprocess.Popen([sys.executable, "-c", FILLER, mode] + [str(g["size"]) for g in vram],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = filler.stdout.readline().strip()
    if line != "ready":
        filler.kill()
        filler.wait()
        raise Failure(f"the VRAM filler ({mode}) did not start ({line!r})")
    return filler, vram


def stop_filler(filler):
    filler.stdin.close()
    filler.wait(timeout=30)


def evicted_dump(run):
    """evicted-dump: dumped while another process keeps taking every GPU's
    VRAM (FILLER thrash: GEM BOs the size of the VRAM, created and closed
    every 10 ms), so the process's KFD BOs are evicted to GTT and restored
    (100 ms later) over and over, also while the dump has it paused (seen
    in the model during the dump). Restored without the filler: every BO
    with its dumped contents and the process neither paused nor evicted,
    as in roundtrip; the process's own verdict. The workload's VRAM BOs
    are 256 MiB per GPU, so that the dump's copy keeps it paused a while;
    its SDMA checks copy their first SDMA_CHECK_MIB (its BOs' contents are
    the model's checksums and its CPU check)."""
    os.environ["KFDEMU_WORKLOAD_VRAM_MIB"] = "256"
    os.environ["KFDEMU_WORKLOAD_SDMA_CHECK_MIB"] = str(SDMA_CHECK_MIB)
    procs = run.start()
    pid = procs[0][1]
    before = snapshot(run.emu, pid)
    # It ends with the dumped process (Run.dump waits for our children).
    filler, _ = start_filler(run, f"thrash:{pid}")
    seen = {"paused_evicted": 0, "samples": 0}
    done = threading.Event()

    def watch():
        while not done.is_set():
            p = run.emu.process(pid)
            if p is not None:
                seen["samples"] += 1
                seen["paused_evicted"] += bool(p["paused"] and p["mem_evicted"])
            time.sleep(0.005)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run.dump([pid])
    finally:
        done.set()
        watcher.join()
        stop_filler(filler)
    counts = run.emu.ctl("counters")
    log(f"during the dump: {seen['paused_evicted']} of {seen['samples']} samples saw {pid} paused with its"
        f" BOs evicted; {counts['process_evictions']} process evictions, {counts['process_restores']} restores")
    expect(seen["paused_evicted"] >= 1, f"the dump never had {pid} paused with its BOs evicted ({seen})", False)
    run.restore(pid)
    check_restored(run.emu, pid, before)
    run.verdicts(procs)


def evicting_restore(run):
    """evicting-restore: dumped, then a restore onto GPUs whose VRAM another
    process's GEM BOs fill (FILLER). CRIU RESTORE's KFD allocations are
    within KFD's limit, so they evict the filler's BOs to GTT, contents kept,
    instead of failing. Restored: every VRAM BO of the process resident in
    VRAM, the process neither paused nor evicted (no VRAM eviction pending:
    its own BOs were never evicted), each GPU counting the evictions; the
    rest is checked as in roundtrip, and by the process's own verdict."""
    procs = run.start()
    pid = procs[0][1]
    before = snapshot(run.emu, pid)
    run.dump([pid])
    vram = run.emu.ctl("counters")["vram"]
    expect(all(g["used"] == 0 for g in vram), f"VRAM in use after the dump: {vram}", False)
    filler, vram = start_filler(run, "hold")
    try:
        gems = run.emu.ctl("files", filler.pid)
        held = [h for f in gems["files"] for h in f.get("handles", [])]
        expect(len(held) == len(vram) and all(h["resident"] == "vram" for h in held),
               f"the filler's BOs are not all in VRAM: {held}", False)
        log(f"filler {filler.pid}: {len(held)} GEM BO(s) fill the VRAM of {len(vram)} GPU(s)")
        run.restore(pid)
        after = run.emu.ctl("files", filler.pid)
        moved = [h for f in after["files"] for h in f.get("handles", [])]
        expect(all(h["resident"] == "gtt" and h["evictions"] == 1 for h in moved),
               f"the filler's BOs were not evicted to GTT by the restore: {moved}")
        expect(sorted(h["checksum"] for h in moved) == sorted(h["checksum"] for h in held),
               f"the evicted BOs' contents changed: {held} -> {moved}")
        counts = run.emu.ctl("counters")["vram"]
        expect(all(g["evictions"] >= 1 for g in counts), f"a GPU counts no eviction: {counts}")
        bos = run.emu.ctl("bos", pid)["bos"]
        expect(all(b["resident"] == "vram" for b in bos if b["type"] == "vram"),
               f"restored VRAM BOs not in VRAM: {[b for b in bos if b['resident'] != b['type']]}")
        p = run.emu.process(pid)
        expect(not p["mem_evicted"] and p["mem_evictions"] == 0 and p["evict_count"] == 0,
               f"the restored process was evicted: {p}")
        log(f"restored {pid}: {sum(b['type'] == 'vram' for b in bos)} VRAM BOs resident; the filler's"
            f" {len(moved)} BO(s) in GTT with their contents; evictions per GPU {[g['evictions'] for g in counts]}")
        check_restored(run.emu, pid, before)
        run.verdicts(procs)
    finally:
        stop_filler(filler)


def upstream_plugin(list_file, version):
    """Upstream's amdgpu_plugin.so that scripts/build-criu.sh built from the
    sources of CRIU `version` (its upstream-plugins.txt)."""
    import realcriu
    try:
        with open(list_file) as f:
            for line in f:
                ver, _, path = line.rstrip("\n").partition("\t")
                if ver == version:
                    if not os.path.isfile(path):
                        raise realcriu.NotRun(f"upstream's plugin of CRIU {version}: {path} does not exist")
                    return path
    except FileNotFoundError:
        raise realcriu.NotRun(f"{list_file or '(no --upstream-list)'} does not exist: scripts/build-criu.sh "
                              f"built no upstream plugin")
    raise realcriu.NotRun(f"no upstream plugin of CRIU {version} in {list_file} (scripts/build-criu.sh builds "
                          f"one from each CRIU source tarball; an installed criu or CRIU_BIN has none)")


# --------------------------------------------------------------------------
# The scenarios: one row each. The row is the scenario's whole description:
# what runs inside the kfd-emu, the workload's flags, CRIU's environment,
# the machine, its documentation (--help) and the CTest tests registered
# from it (--list, read by criu.cmake at configure time).
# --------------------------------------------------------------------------

class Test(NamedTuple):
    """A CTest test of a scenario: emu_realcriu_<criu>_<name>."""
    name: str
    machine: str
    interop: str = ""     # --interop: upstream's plugin dumps or restores
    emu_fault: str = ""   # --emu-fault: a kfd-emu fault rule from the start
    env: str = ""         # NAME=VALUE in the test's environment


class Scenario(NamedTuple):
    name: str
    run: Callable         # fn(Run), inside the kfd-emu; with `second`, once per machine (args.phase)
    tests: tuple = ()     # the registered tests
    flags: tuple = ()     # the workload's (workload.cpp)
    criu_env: tuple = ()  # (NAME, VALUE) pairs in CRIU's environment
    vram_mib: int = 0     # KFDEMU_WORKLOAD_VRAM_MIB (0: the workload's default)
    slow: bool = False    # on slow_machine(): CRIU killed during a copy
    stall: str = ""       # the kfd-emu fault rule holding CRIU (dump_killed_at, restore_killed_at)
    second: Callable = None  # fn(machine) -> the plan of the restore's machine (None: not defined for it)
    interop: tuple = ()   # the --interop ways it takes
    interop_flags: tuple = ()  # the workload's, added with --interop
    needs: tuple = ()     # what CTest passes it: "dmabuf-tree", "streamer", "amdgpu-img", "upstream-list" (NEEDS)
    verbose: bool = True  # CRIU at -v4 (False: CRIU's default log level)
    stream: bool = False  # criu --stream through the stand-in image streamer
    negative: bool = False  # passes only when the round trip fails after a good dump (phase exit 3)
    doc: str = ""         # what it does and checks (--help)


# A scenario's tests: <stem>_<machine> (the machine alone without a stem).
def tests(stem, *machines, **kw):
    return tuple(Test(f"{stem}_{m}" if stem else m, m, **kw) for m in machines)


# What CTest passes for a scenario's `needs`, in this order: placeholders
# that criu.cmake replaces ({target:T}: the file of CMake target T;
# {source}, {build}: the source and build trees).
UPSTREAM_LIST = "{build}/realcriu/upstream-plugins.txt"
NEEDS = {
    "dmabuf-tree": ["--workload", "{target:dmabuf-tree}"],
    "streamer": ["--streamer", "{source}/tests/streamer/streamer.py"],
    "amdgpu-img": ["--amdgpu-img", "{target:amdgpu-img}"],
    "upstream-list": ["--upstream-list", UPSTREAM_LIST],  # without --interop (verify_parity_test.py)
}
TEST_TIMEOUT = 300
TEST_LABELS = ["realcriu", "emulator"]
BOTH = ("MI100", "2xMI210")
INTEROP = ("upstream-dump", "upstream-restore")
# A kernel that disables DRM_IOCTL_GEM_CHANGE_HANDLE again (Linux 6.18.36,
# 7.0 stable, mainline since June 2026: EINVAL for every call), with gaps in
# the GEM handles (KFDEMU_WORKLOAD_GEM_GAPS: BOs made and freed between the
# workload's, so a restore making the BOs one after the other would not get
# their handles): the restore places BOs at their handles without the ioctl.
NO_CHANGE_HANDLE = {"emu_fault": "DRM_IOCTL_GEM_CHANGE_HANDLE:every:errno=EINVAL",
                    "env": "KFDEMU_WORKLOAD_GEM_GAPS=1"}
KILLED = {"flags": ("--user-queue",), "vram_mib": KILL_VRAM_MIB, "slow": True}


def interop_tests(stem, *machines, ways=INTEROP):
    """interop_<way>_<stem>_<machine> (interop_<way>_<machine> without a stem)."""
    return tuple(Test(f"interop_{w.replace('-', '_')}_{stem + '_' if stem else ''}{m}", m, interop=w)
                 for w in ways for m in machines)


def other_machine(run):
    """other-machine: dumped on the first machine, restored on the second."""
    state = os.path.join(run.work, "state.json")
    (other_machine_dump if run.args.phase == "dump" else other_machine_restore)(run, state)


def dedup_other_machine(run):
    """dedup-other-machine: other-machine with a VRAM BO of the same bytes
    on every GPU (workload --replica); the dump also checks that the
    replicas were written once."""
    state = os.path.join(run.work, "state.json")
    if run.args.phase != "dump":
        with open(state) as f:
            damaged_source_refused(run, json.load(f)["before"]["pid"])
        other_machine_restore(run, state)
        return
    other_machine_dump(run, state)
    total, written, saved, _ = dedup_summary(run, "dump")
    with open(state) as f:
        gpus = {b["actual_gpu_id"] for b in json.load(f)["before"]["bos"] if b["type"] == "vram"}
    replica = DEDUP_VRAM_MIB << 20
    expect(len(gpus) >= 2 and saved >= (len(gpus) - 1) * replica,
           f"{saved} bytes not written again, want at least {len(gpus) - 1} of the {len(gpus)} GPUs' "
           f"{DEDUP_VRAM_MIB} MiB replicas", False)
    log(f"dump: {written} of {total} bytes written, {saved} not written again ({len(gpus)} GPUs' replicas)")


def damaged_source_refused(run, pid):
    """dedup-other-machine's first restore: one byte flipped in the first
    chunk a replica BO stores (a chunk the other replicas refer to) makes
    CRIU's restore fail with the plugin's refusal naming that pages file,
    the deduplicated chunk and the BOs that use it, and leaves no process
    (system and model); then the byte is flipped back."""
    shown = json.loads(amdgpu_img(run, "show", "--json", run.images).stdout)
    replicas = [b for k in shown["kfd"] for b in k["bos"] if b["size"] == DEDUP_VRAM_MIB << 20]
    stores = [b for b in replicas if b.get("bytes_stored_elsewhere", 0) < b["size"]]
    expect(stores and any(b.get("bytes_stored_elsewhere", 0) for b in replicas),
           f"no replica BO stores a chunk another refers to: {replicas}", False)
    # A byte of the chunk, after the pages file's 8-byte header.
    path, at = os.path.join(run.images, stores[0]["pages_file"]), 8 + stores[0]["pages_offset"] + 17
    xor_byte(path, at, 0x20)
    pidfile = os.path.join(run.work, "restored-damaged.pid")  # CRIU leaves it behind
    rc = run.criu_run("restore", ["-d", "--pidfile", pidfile], "restore-damaged.log")
    text = open(os.path.join(run.images, "restore-damaged.log"), errors="replace").read()
    refusal = [l for l in text.splitlines() if "amdgpu_plugin: Error:" in l and "do not match their checksum" in l]
    if rc == 0 or not refusal:
        show_log(os.path.join(run.images, "restore-damaged.log"))
    expect(rc != 0, "criu restore succeeded with a damaged stored chunk")
    expect(refusal and "a deduplicated chunk that" in refusal[0] and stores[0]["pages_file"] in refusal[0],
           f"no refusal naming {stores[0]['pages_file']} and the BOs that refer to its chunk: {refusal}")
    expect_none_left(run, pid, "after the refused restore")
    log(f"damaged stored chunk refused, no process left: {refusal[0].split('Error: ', 1)[1][:300]}")
    xor_byte(path, at, 0x20)


def refused(run):
    """refused-8xMI300X: dumped on the first machine, refused on the second."""
    state = os.path.join(run.work, "state.json")
    (other_machine_dump if run.args.phase == "dump" else refused_restore)(run, state)


def pre_copy_or_not_run(run, tracked):
    with harness.not_run():
        pre_copy(run, tracked)


SCENARIOS = {s.name: s for s in (
    Scenario("roundtrip", round_trip,
             tests("", *BOTH) + interop_tests("", *BOTH), interop=INTEROP,
             doc="dump + restore (same daemon, same pid); after each, no guardian process (plugin/guardian.h) is "
                 "left. Restored: the fd table equals the dumped one by number and target (daemon connections: the "
                 "same numbers, connected to the daemon before and after, nothing else); every BO has its dumped "
                 "contents (model checksums) on its GPU; the device mappings are back; the queues are there and "
                 "active (not paused, not evicted), the process neither paused nor evicted; then the restored "
                 "process itself verifies its patterns, copies with SDMA (libdrm_amdgpu on its own render-node "
                 "files) from its restored VRAM BOs and into new KFD BOs, waits on its event, destroys its queue "
                 "(\"OK\" in DIR/result)."),
    Scenario("tree", round_trip,
             tests("tree", *BOTH) + interop_tests("tree", "2xMI210"), flags=("--tree",), interop=INTEROP,
             doc="roundtrip for a parent and a child, each with its own KFD context (dump -t parent)."),
    Scenario("fork-holder", round_trip,
             tests("fork_holder", "2xMI210"), flags=("--fork-holder", "--user-queue"),
             doc="roundtrip (with a user-mode SDMA queue) of a ROCm process with a child forked after its GPU "
                 "state, holding its /dev/kfd and render files but using no GPU (a PyTorch DataLoader worker): the "
                 "child's fds restored as the parent's files, KFD's process still the parent's (the child gets "
                 "EBADF), the parent's GPU work goes on."),
    Scenario("scm-holder", scm_holder_refused,
             tests("scm_holder", "MI100"), flags=("--scm-holder", "--user-queue"),
             doc="a child makes the GPU state (workload --scm-holder --user-queue) and sends its /dev/kfd file to "
                 "its parent over a Unix socket (SCM_RIGHTS), which holds it unused; dump -t parent. CRIU would "
                 "restore the file in the parent (lowest pid), where KFD cannot recreate the child's state: the "
                 "dump fails with the plugin's error naming both pids, no file of ours or guardian is left, both "
                 "run on with their fd tables unchanged, the child not paused with active queues, the parent with "
                 "no KFD process; then the child's checks (kcmp: the parent's fd is its file; its user-queue work) "
                 "and the parent's (EBADF through the file) pass."),
    Scenario("kfd-gem", round_trip,
             tests("kfd_gem", "2xMI210") + tests("kfd_gem_no_change_handle", "2xMI210", **NO_CHANGE_HANDLE),
             flags=("--kfd-gem",), interop=INTEROP, interop_flags=INTEROP_GEM_FLAGS,
             doc="roundtrip with GEM BOs of the process's own (libdrm_amdgpu) on libhsakmt's render-node file: a "
                 "GTT BO, a CPU-invisible VRAM BO filled by SDMA, a VRAM BO at two GPU VAs; the restored process "
                 "checks them (CPU mappings, SDMA copies out of them through their restored handles and VAs)."),
    Scenario("kfd-gem-high-va", round_trip,
             tests("kfd_gem_high_va", "MI100"), flags=("--kfd-gem", "--gem-high-va"),
             doc="kfd-gem with the GEM BOs at VAs above the hole (libdrm's high range, as Mesa maps), which the "
                 "kernel reports masked to 48 bits: the restore maps them at their canonical VAs."),
    Scenario("render", render_round_trip,
             tests("render", "MI100") + tests("render_no_change_handle", "MI100", **NO_CHANGE_HANDLE),
             flags=("--render",),
             doc="a process with a render node and no /dev/kfd (the same GEM BOs): the dump writes amdgpu-renderD "
                 "and 3 amdgpu-drm-pages files; restored, the fd table and render-node mappings are as dumped and "
                 "the process checks its BOs as in kfd-gem."),
    Scenario("other-machine", other_machine,
             tests("other_machine", "2xMI210") + tests("bigger_machine", "2xMI300X"),
             second=OTHER_MACHINE.get,
             doc="dump on one machine, restore on a second kfd-emu at the same root and socket paths (kfd-emu "
                 "--root) after the first is gone, with other gpu_ids, other render minors and (2xMI210) the GPUs "
                 "in the other order (VRAM sizes swapped, so only one mapping fits), or (2xMI300X) onto the "
                 "8xMI300X node with a device cgroup of two GPUs: BOs on the mapped GPUs, render fds and mappings "
                 "on the mapped minors, then as roundtrip."),
    Scenario("refused-8xMI300X", refused,
             (Test("refused_MI100_on_8xMI300X", "MI100"),),
             second=lambda _: {"first": [], "second_machine": REFUSING_MACHINE, "second": []},
             doc="other-machine from MACHINE onto the 8xMI300X node, where no GPU can stand in for the checkpointed "
                 "one: CRIU's restore fails with the plugin's refusal, one line per reason, each listing all 8 "
                 "local GPUs, none repeated, and KFD_CAPABILITY_CHECK suggested on the capability line only."),
    Scenario("dump-fault", dump_fault, tests("dump_fault", "MI100"),
             doc="an SDMA fault (`kfd-emu ctl faults sdma:nth=1`) fails the dump, in a directory holding an older "
                 "checkpoint of the process (a `criu dump --leave-running` before): CRIU exits non-zero with the "
                 "plugin's \"Error:\" line in its log; the older checkpoint's GPU files are there byte for byte and "
                 "no other file of ours; the process runs on with its fd table unchanged, not paused, "
                 "queues active, and completes its work."),
    Scenario("sdma-timeout", functools.partial(dump_fault, hang=True),
             tests("sdma_timeout", "MI100"), criu_env=(("KFD_SDMA_TIMEOUT", "1"),),
             doc="dump-fault with the SDMA engine hung (`sdma:nth=1:hang`) and KFD_SDMA_TIMEOUT=1: the dump fails "
                 "within seconds with the plugin's error naming KFD_SDMA_TIMEOUT and the 1 s limit."),
    Scenario("restore-truncated", functools.partial(restore_failure, how="truncated"),
             tests("restore_truncated", "MI100"),
             doc="the dump's largest amdgpu-pages file is cut in half: then as restore-fault."),
    Scenario("restore-fault", functools.partial(restore_failure, how="fault"),
             tests("restore_fault", "MI100"),
             doc="CRIU_OP:RESTORE fails (injected): CRIU's restore exits non-zero within its time limit with the "
                 "plugin's \"Error:\" line, and no restored process is left (none alive, none in the model)."),
    Scenario("restore-copy-fault", functools.partial(restore_failure, how="copy"),
             tests("restore_copy_fault", "2xMI210"),
             doc="the first SDMA job of the restore fails (injected): it runs in CRIU's main process (the parallel "
                 "restore, the default), after the task has restored its files; the plugin's \"Error:\" line names "
                 "the parallel restore and the task it killed, CRIU's restore exits non-zero, and no restored "
                 "process is left (as restore-fault)."),
    Scenario("broken-vma-map", round_trip, tests("broken_vma_map", "MI100"),
             criu_env=(("KFDEMU_ADAPTER_BREAK_VMA_MAP", "1"),), negative=True,
             doc="the adapter shifts the plugin's UPDATE_VMA_MAP offsets by a page "
                 "(KFDEMU_ADAPTER_BREAK_VMA_MAP=1): passes only if the dump succeeds and the restore or the "
                 "restored process fails."),
    Scenario("dmabuf-holder-root", functools.partial(dmabuf_round_trip, root="holder"),
             tests("dmabuf_tree_no_change_handle", "MI100", **NO_CHANGE_HANDLE) + tests("dmabuf_tree", "MI100"),
             needs=("dmabuf-tree",),
             doc="the tree of tests/e2e/dmabuf_tree.cpp (--workload dmabuf-tree): an exporter, an importer and a "
                 "holder of the bare dma-buf of one GEM BO, the holder (or the exporter) the root, so dumped first. "
                 "The dump writes two amdgpu-renderD images, one amdgpu-dmabuf image and exactly one "
                 "amdgpu-drm-pages file; restored (CRIU restores the three tasks at once), each task's fd table and "
                 "device mappings are as dumped, CRIU's log shows the BO created once, and the three restored "
                 "processes check the BO's bytes in their views, then that the exporter's new write shows in the "
                 "importer's mapping and in the holder's mmap of its dma-buf (one BO, not copies)."),
    Scenario("dmabuf-exporter-root", functools.partial(dmabuf_round_trip, root="exporter"),
             needs=("dmabuf-tree",),
             doc="dmabuf-holder-root with the exporter the root (dumped first)."),
    Scenario("stream", stream_round_trip, tests("stream", "2xMI210"), flags=("--kfd-gem",),
             criu_env=(("KFD_MAX_BUFFER_SIZE", str(STREAM_BOUND)),), needs=("streamer",), stream=True,
             doc="kfd-gem with `criu dump/restore --stream` through the stand-in image streamer "
                 "(tests/streamer/streamer.py, capture then serve) and KFD_MAX_BUFFER_SIZE=256K, below the 2 MiB "
                 "VRAM BO: the checks of kfd-gem, plus: none of our files (nor any temporary) in the image "
                 "directory; the captured amdgpu-* files well framed, every non-empty KFD pages file the size of "
                 "its GPU's BOs, render BOs in amdgpu-drm-pages files; each served at most once and every KFD image "
                 "and non-empty pages file served; the staging peak of the dump (the emulator's count of the "
                 "userptr memory CRIU registered) and each restore copy's peak (the plugin's summary lines) within "
                 "the bound."),
    Scenario("stream-truncated", functools.partial(restore_failure, how="truncated"),
             tests("stream_truncated", "MI100"), criu_env=(("KFD_MAX_BUFFER_SIZE", str(STREAM_BOUND)),),
             needs=("streamer",), stream=True,
             doc="restore-truncated with --stream: the largest pages file is cut in half in the stand-in streamer's "
                 "store."),
    Scenario("log-default", log_default, tests("log_default", "2xMI210"),
             criu_env=(("KFD_CAPABILITY_CHECK", "0"),), needs=("amdgpu-img",), verbose=False,
             doc="roundtrip with CRIU at its default log level (no -v) and KFD_CAPABILITY_CHECK=0: each of the dump "
                 "and restore logs holds exactly two lines of the plugin, the configuration naming "
                 "KFD_CAPABILITY_CHECK=0 and the summary, whose GPU files, GPUs, BOs, BOs with contents and bytes "
                 "are those of the images (amdgpu-img show --json), with the staging peak within the bound and GB/s "
                 "= bytes / seconds; the restore's says every byte's checksum matched."),
    Scenario("mixed", mixed_checkpoints, tests("mixed", *BOTH), needs=("amdgpu-img",),
             doc="two dumps of the same program (A, then B: another pid), then restores from copies of A's "
                 "directory with, in turn: B's KFD image; B's KFD image and pages files; all of B's GPU files; all "
                 "but one render image; one render image of B; one pages file of B; the KFD image deleted; an extra "
                 "image (B's KFD image as file 9999); two render images swapped (2 GPUs). Each restore is either "
                 "refused by the plugin before any GPU state changed, naming a file of the case, with no process "
                 "left (a deleted image: the plugin names it), or (the extra image, or a pages file of identical "
                 "contents) restores A's process exactly as dumped; a pages file of other contents fails its "
                 "checksums as it is copied, and the plugin kills the task before it resumes, naming the file; "
                 "amdgpu-img verify agrees (exit 0 exactly when the restore succeeds)."),
    Scenario("dump-killed", dump_killed, tests("dump_killed", *BOTH), **KILLED,
             doc="CRIU SIGKILLed during the dump's GPU copy on a machine with slow SDMA (sdma_gbps 0.2, "
                 "KFDEMU_WORKLOAD_VRAM_MIB=256), once the pages file is being written and the process is paused, "
                 "with exactly one guardian (comm amdgpu-guard) running: within 1 s its queues are active again "
                 "(not paused, not evicted), within 10 s no temporary file and no guardian is left (it exits at "
                 "once, but its unlink of a large temporary file waits for the filesystem's discard: over 2 s "
                 "under CI's load; where it is after 2 s is logged), the "
                 "guardian's log (amdgpu-guardian.log beside the images) says what it did, and the process "
                 "(workload --user-queue) then completes an SDMA copy, a fence and a TRAP-signalled event wait "
                 "through a KFD SDMA user queue, which never runs while the queues are paused."),
    Scenario("dump-termed", dump_killed, tests("dump_termed", *BOTH), **KILLED,
             doc="dump-killed with SIGTERM (CRIU's own handler runs)."),
    Scenario("dump-timeout", dump_killed, tests("dump_timeout", *BOTH), **KILLED,
             doc="dump-killed with CRIU run under coreutils timeout, which gets SIGTERM and passes it to its whole "
                 "process group."),
    Scenario("dump-killed-tree", dump_killed, tests("dump_killed_tree", "2xMI210"),
             **{**KILLED, "flags": ("--tree", "--user-queue")},
             doc="dump-killed for a parent and a child (workload --tree --user-queue), CRIU killed during the "
                 "child's copy after the parent's KFD image was written (under criu-dev the parent is still paused "
                 "then: after its copy, before its unpause): every process paused then is resumed within 1 s and "
                 "both complete their user-queue work."),
    Scenario("restore-killed", restore_killed, tests("restore_killed", *BOTH), **KILLED,
             doc="a good dump (no guardian left after it), then CRIU's restore SIGKILLed during its GPU copy (the "
                 "same slow machine): within 2 s the restored task is gone (killed by the guardian: its GPU memory "
                 "was only partly copied), the model holds no process, nothing of ours runs, no guardian is left, "
                 "and the guardian's log says it killed the task."),
    Scenario("render-killed", render_killed, tests("render_killed", "MI100"),
             **{**KILLED, "flags": ("--render",)},
             doc="a process with a render node and no /dev/kfd (workload --render, its GEM BOs "
                 "KFDEMU_WORKLOAD_VRAM_MIB=256 large, the slow machine), CRIU SIGKILLed while an amdgpu-drm-pages "
                 "file is written (nothing is paused): exactly one guardian ran, within 10 s no temporary file and "
                 "no guardian is left (as dump-killed), the guardian's log names each file it removed, and the process completes its "
                 "GEM SDMA copies."),
    Scenario("dump-killed-info", dump_killed_at, tests("dump_killed_info", *BOTH),
             flags=("--user-queue",), stall="CRIU_OP:PROCESS_INFO:stall-after",
             doc="dump-killed at another point, on the usual machine: CRIU is held by a `stall` fault (`kfd-emu ctl "
                 "faults CALL:stall`: the call blocks without effect until CRIU has ended, as if CRIU had been "
                 "killed right before it; `CALL:stall-after`: the call takes effect first, as if CRIU had been "
                 "killed right after it) (here: CRIU_OP:PROCESS_INFO:stall-after) right after its PROCESS_INFO (the "
                 "process paused, the plugin has not seen the answer: the guardian knows the file and its candidate "
                 "owners only), at its CHECKPOINT (the process paused, no file of ours yet) or at its UNPAUSE (the "
                 "KFD image and one pages file per GPU complete; under criu-dev after every task was dumped), then "
                 "SIGKILLed: the checks of dump-killed."),
    Scenario("dump-killed-info-holder", dump_killed_at,
             tests("dump_killed_info_holder", "MI100"), flags=("--user-queue", "--fork-holder"),
             stall="CRIU_OP:PROCESS_INFO:stall-after",
             doc="as dump-killed-info with the fork-holder workload (a child holding the /dev/kfd file: two "
                 "candidate owners), and the child's own checks."),
    Scenario("dump-killed-info-scm-holder", dump_killed_at,
             tests("dump_killed_info_scm_holder", "MI100"), flags=("--scm-holder", "--user-queue"),
             stall="CRIU_OP:PROCESS_INFO:stall-after",
             doc="dump-killed-info-holder same with workload --scm-holder (a child's /dev/kfd file sent to its "
                 "parent, which holds it; dump -t parent), the parent the first candidate in /proc order: the dump "
                 "log says the guardian had 2 candidates, and the guardian's log says KFD refused the parent "
                 "(EBADF) before it resumed the child."),
    Scenario("dump-killed-before-info", dump_killed_at,
             tests("dump_killed_before_info", *BOTH), flags=("--user-queue",), stall="CRIU_OP:PROCESS_INFO:stall",
             doc="CRIU held by a `stall` at its PROCESS_INFO (nothing paused) and SIGKILLed: the checks of "
                 "dump-killed, and the guardian's log says it found the process not paused."),
    Scenario("dump-killed-paused", dump_killed_at, tests("dump_killed_paused", *BOTH),
             flags=("--user-queue",), stall="CRIU_OP:CHECKPOINT:stall",
             doc="dump-killed-info with CRIU held at its CHECKPOINT (CRIU_OP:CHECKPOINT:stall: the process paused, "
                 "no file of ours yet)."),
    Scenario("dump-killed-copied", dump_killed_at, tests("dump_killed_copied", *BOTH),
             flags=("--user-queue",), stall="CRIU_OP:UNPAUSE:stall",
             doc="dump-killed-info with CRIU held at its UNPAUSE (CRIU_OP:UNPAUSE:stall: the KFD image and one "
                 "pages file per GPU complete; under criu-dev after every task was dumped)."),
    Scenario("restore-killed-copied", restore_killed_at,
             tests("restore_killed_copied", *BOTH), flags=("--user-queue",), stall="CRIU_OP:RESUME:stall",
             doc="a good dump, then CRIU's restore held at its RESUME (every BO already holds its dumped contents, "
                 "the process restored and evicted) and SIGKILLed: the checks of restore-killed."),
    Scenario("queue-state", queue_state_round_trip, tests("queue_state", *BOTH),
             flags=("--queue-state",),
             doc="roundtrip of an AQL queue given a CU mask and the GPU's GWS and an inactive SDMA queue (no ring) "
                 "with a FENCE pending, all through libhsakmt (workload --queue-state): restored, every queue's CU "
                 "mask, GWS and state are as dumped; the restored process finds the GWS held, the FENCE not run, "
                 "and run once its ring is given back."),
    Scenario("cp-queue", cp_queue_round_trip, tests("cp_queue", *BOTH), flags=("--cp-queue",),
             doc="roundtrip of a CP (PM4) compute queue (workload --cp-queue) waiting at a WAIT_REG_MEM with "
                 "packets pending behind it: restored at that read pointer with its control stack as dumped; the "
                 "restored process finds the first WRITE_DATA not run again, releases the wait and gets the rest "
                 "and the event."),
    Scenario("gem-metadata", metadata_round_trip, tests("dmabuf_metadata", *BOTH),
             flags=("--metadata",), needs=("amdgpu-img",),
             doc="roundtrip with a CPU-visible VRAM GEM BO on libhsakmt's render-node file given amdgpu metadata "
                 "(flags, tiling info, 37 bytes of data) through libdrm, its dma-buf held open, and a GTT GEM BO "
                 "with flags and tiling info but no data (workload --metadata). The images carry the metadata in "
                 "the render image's BOs and in the dma-buf image's shared BO (amdgpu-img show, and --json; "
                 "--amdgpu-img) and amdgpu-img verify passes; restored, the process finds it byte for byte through "
                 "amdgpu_bo_query_info and KFD's GET_DMABUF_INFO (hsaKmtRegisterGraphicsHandleToNodes) and the BO's "
                 "bytes through its CPU mapping and its dma-buf."),
    Scenario("svm", svm_round_trip, tests("svm", *BOTH), flags=("--svm",),
             doc="roundtrip of SVM ranges made through libhsakmt (workload --svm), one prefetched to VRAM, two in "
                 "system memory with other attributes: restored as dumped (the VRAM one in VRAM); the restored "
                 "process finds the same hsaKmtSVMGetAttr answers and bytes."),
    Scenario("svm_pending", svm_round_trip, tests("svm_pending", *BOTH), flags=("--svm", "--svm-pending"),
             doc="svm with GPU work pending on the VRAM-resident range (workload --svm-pending): an inactive SDMA "
                 "queue holds a copy into it when it is dumped; restored, the range is in VRAM with its own "
                 "bytes, and once the queue gets its ring back the copy runs, and a copy out of the range after "
                 "it brings the new bytes."),
    Scenario("dedup", dedup_chain, tests("dedup", "2xMI210"),
             flags=("--tree", "--replica", "--periodic", str(DEDUP_CHAIN_DUMPS), "--named-semaphore"),
             vram_mib=DEDUP_VRAM_MIB, needs=("amdgpu-img",),
             doc="deduplicated checkpoints (KFD_DEDUP's default) with an incremental chain and flatten "
                 "(dedup_chain): a tree of two processes whose VRAM BO on every GPU holds the same bytes (workload "
                 "--tree --replica, 8 MiB each) dumped twice with --leave-running, the second incremental against "
                 "the first after the same MiB of every replica was rewritten alike (--periodic 2): dump 1 stores "
                 "one copy of the 4 replicas, dump 2 writes the rewritten MiB once, every summary figure adds up; "
                 "restored from the chain (both processes check every BO); amdgpu-img show gives the per-GPU "
                 "line, verify passes on the chain, and flatten writes a complete checkpoint that verify passes. "
                 "--named-semaphore as periodic (a --leave-running dump removes its --link-remap links)."),
    Scenario("dedup-other-machine", dedup_other_machine,
             tests("dedup_other_machine", "2xMI210", "8xMI300X"), flags=("--replica", "--named-semaphore"),
             vram_mib=DEDUP_VRAM_MIB, second=OTHER_MACHINE.get, needs=("amdgpu-img",),
             doc="other-machine with replicated GPU memory (workload --replica: every GPU's VRAM BO holds the same 8 "
                 "MiB): the dump's summary says every replica but one was not written again and the pages files hold "
                 "what it says was written; on the second machine a first restore with one byte flipped in a stored "
                 "replica chunk is refused naming its pages file and the BOs that use it, no process left; with the "
                 "byte back, restored (2xMI210: the GPUs in the other order; 8xMI300X: another 8-GPU node, every GPU "
                 "another gpu_id and render minor): BOs on the mapped GPUs with their dumped contents, render fds and "
                 "mappings on the mapped minors, then the process checks every BO. --named-semaphore: CRIU's failed "
                 "restore removes the --link-remap link the second would need."),
    Scenario("periodic", periodic_incremental,
             tests("periodic", *BOTH) + interop_tests("periodic", "MI100", ways=("upstream-restore",)),
             flags=("--periodic", "3", "--named-semaphore"), vram_mib=PERIODIC_VRAM_MIB, needs=("amdgpu-img",),
             interop=("upstream-restore",),
             doc="three `criu dump --leave-running`, each after the first incremental against the previous one, "
                 "while the process rewrites a MiB of each GPU's VRAM between them (the later dumps with "
                 "KFD_MAX_BUFFER_SIZE=768K: every chunk cut across staging writes, the peak checked); then a "
                 "restore from the chain of three (periodic_incremental); with --interop upstream-restore, the "
                 "chain is flattened (amdgpu-img flatten) and upstream's plugin restores it. The workload runs with "
                 "--named-semaphore: the restore is from a --leave-running dump, which removes its --link-remap "
                 "links (workload.cpp); the test's own /dev/shm starts empty (harness.private_dev_shm), as on a "
                 "fresh machine."),
    Scenario("pre-copy", functools.partial(pre_copy_or_not_run, tracked=True),
             tests("pre_copy", "MI100"), flags=("--periodic", "2"), vram_mib=PERIODIC_VRAM_MIB,
             doc="`criu pre-dump -D ckpt-1` with our plugin (docs/incremental.md, \"CRIU's flows\"): it runs no KFD "
                 "CRIU call (none counted by the model: nothing paused) and no GPU copy, writes no file of ours, "
                 "claims every device mapping (CRIU logs each found with a plugin), logs no plugin error, and "
                 "leaves the process running with its queues active and no guardian. Where the kernel tracks memory "
                 "(soft-dirty) the pre-dump succeeds; where it does not, CRIU must fail at its own soft-dirty check "
                 "(the BUG in mem.c's task_reset_dirty_track) and nowhere else. Then the pre-copy of GPU memory: "
                 "`criu dump --leave-running` into ckpt-2 (parent ckpt-1: it holds no GPU image, so the dump is "
                 "complete), the process checks its GPUs and rewrites a MiB of each GPU's VRAM BO, the final `criu "
                 "dump` into ckpt-3 against ckpt-2 writes only the changed MiB per GPU (at most one more), and the "
                 "restore from ckpt-3 gives every BO its contents, the process's fds, mappings and queues, and its "
                 "own checks, with --track-mem and --prev-images-dir. Needs a kernel that tracks memory "
                 "(soft-dirty): NOT RUN up front elsewhere, naming CONFIG_MEM_SOFT_DIRTY (pre-copy-untracked runs "
                 "there)."),
    Scenario("pre-copy-untracked", functools.partial(pre_copy_or_not_run, tracked=False),
             tests("pre_copy_untracked", "MI100"), flags=("--periodic", "2"), vram_mib=PERIODIC_VRAM_MIB,
             doc="pre-copy on a kernel without soft-dirty, where CRIU cannot pre-dump: the pre-dump with our plugin "
                 "must fail at CRIU's own soft-dirty check and nowhere else (no KFD call, no copy, no file of ours, "
                 "the process running, as above); the rest as pre-copy without --track-mem, the parents linked by "
                 "the test (gpu_only_parent). NOT RUN up front where the kernel tracks memory (pre-copy runs the "
                 "whole flow there)."),
    Scenario("evicting-restore", evicting_restore, tests("evicting_restore", *BOTH),
             doc="dumped, then restored while another process's GEM BOs fill every GPU's VRAM: the restore's KFD "
                 "allocations evict them to GTT (contents kept) instead of failing; the restored process's VRAM BOs "
                 "are resident and it has no eviction pending; then as roundtrip."),
    Scenario("evicted-dump", evicted_dump, tests("evicted_dump", *BOTH),
             doc="dumped while another process's GEM BOs take every GPU's VRAM every 10 ms, so the process's BOs "
                 "are evicted and restored over and over, also while the dump has it paused (seen in the model); "
                 "restored as roundtrip."),
)}
# A scenario not in the table (tests/rocm's Run subclass): none of the settings.
PLAIN = Scenario("", None)
INTEROP_DOC = (
    "(with roundtrip, tree or kfd-gem) upstream's amdgpu_plugin.so, built from the same CRIU's sources "
    "(--upstream-list, scripts/build-criu.sh), dumps and ours restores, or ours dumps and upstream's restores, on "
    "one machine. Checked: every BO is back on the GPU it was dumped from (each GPU keeps its identity) with its "
    "dumped contents, the dumped fds and device mappings, active queues, and the restored process's own verdict. "
    "Known upstream defects are said as \"KNOWN UPSTREAM DEFECT:\" with what shows them, and the rest is still "
    "checked: upstream's restore leaves extra render-node fds (not compared); criu-dev's parallel restore of one "
    "process on 2+ GPUs logs errors and leaves the BOs of the GPUs after the first without contents (the first "
    "GPU's are checked; the process's verdict is shown, not required). Error lines of our plugin, or of upstream's "
    "that no known defect explains, fail the test. With kfd-gem (no registered test: it fails for upstream's "
    "reasons) it shows criu-dev's upstream defects with a process's own GEM BOs, the workload's GEM BOs made as "
    "upstream's plugin can get furthest with them (INTEROP_GEM_FLAGS): upstream's dump marks a GEM BO as "
    "imported when a KFD BO's dma-buf got the same handle in CRIU's own render file (our restore refuses the "
    "image); upstream's restore remaps a BO's CPU mapping only where its CPU address is its last GPU VA.")


def ctest_list(scenarios=None):
    """--list: every scenario's CTest tests as criu.cmake registers them:
    the arguments after --scenario and --sanitized (NEEDS' placeholders).
    `scenarios`: another script's table (hostile_dir_test.py's), else
    SCENARIOS."""
    out = []
    for sc in (SCENARIOS if scenarios is None else scenarios).values():
        def needs(*names):
            return [a for n in names if n in sc.needs for a in NEEDS[n]]
        for t in sc.tests:
            args = needs("dmabuf-tree") + (["--emu-fault", t.emu_fault] if t.emu_fault else []) + \
                needs("streamer", "amdgpu-img", "upstream-list") + \
                (["--interop", t.interop, "--upstream-list", UPSTREAM_LIST] if t.interop else [])
            out.append({"name": t.name, "scenario": sc.name, "machine": t.machine, "args": args,
                        "env": [t.env] if t.env else [], "timeout": TEST_TIMEOUT, "labels": TEST_LABELS})
    return out


class ListTests(argparse.Action):
    """--list: prints ctest_list() of the table `scenarios` (default
    SCENARIOS) as JSON and exits (no other argument needed)."""

    def __init__(self, scenarios=None, **kw):
        super().__init__(nargs=0, **kw)
        self.scenarios = scenarios

    def __call__(self, parser, namespace, values, option_string=None):
        print("[\n" + ",\n".join(json.dumps(t) for t in ctest_list(self.scenarios)) + "\n]")
        parser.exit()


def scenarios_doc(scenarios):
    """--help's list of the scenarios of a table (their docs)."""
    out = ["scenarios (--scenario):"]
    for sc in scenarios.values():
        out += [f"  {sc.name}", textwrap.fill(sc.doc, 100, initial_indent=" " * 6, subsequent_indent=" " * 6)]
    return out


def scenarios_help():
    """--help's list of the scenarios (SCENARIOS' docs) and of --interop."""
    out = scenarios_doc(SCENARIOS)
    out += ["--interop upstream-dump | upstream-restore (with " +
            ", ".join(n for n, sc in SCENARIOS.items() if sc.interop) + "):",
            textwrap.fill(INTEROP_DOC, 100, initial_indent=" " * 6, subsequent_indent=" " * 6)]
    return "\n".join(out)


def add_run_args(ap, required=True):
    """The arguments of every real-CRIU test script (this one, hostile_dir_test.py,
    verify_parity_test.py, streamer_test.py): the CRIU, the emulator, the wrapper and
    the workload to run, the plugin under test, and the run inside kfd-emu (internal).
    `required` False: the script reports NOT RUN itself when one is missing."""
    ap.add_argument("--criu-list", default="")
    ap.add_argument("--criu-version", default="")
    ap.add_argument("--criu", default="", help="a CRIU binary (instead of --criu-list/--criu-version)")
    ap.add_argument("--realcriu-lib", required=required, default="", help="tests/realcriu (realcriu.py)")
    for name in ("--kfd-emu", "--wrapper", "--workload"):
        ap.add_argument(name, required=required, default="")
    ap.add_argument("--machine", default="MI100")
    ap.add_argument("--plugin", default=os.environ.get("KFDEMU_CRIU_PLUGIN", ""),
                    help="the plugin under test (default: the wrapper's, the build's amdgpu_plugin.so;"
                         " also $KFDEMU_CRIU_PLUGIN)")
    ap.add_argument("--sanitized", default="")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--phase", default="", help=argparse.SUPPRESS)	# internal: inside kfd-emu
    ap.add_argument("--work", default="", help=argparse.SUPPRESS)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=scenarios_help(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action=ListTests, help="print the CTest tests of every scenario (JSON) and exit")
    add_run_args(ap)
    ap.add_argument("--scenario", default="roundtrip", choices=SCENARIOS, metavar="SCENARIO",
                    help="one of the scenarios below")
    ap.add_argument("--amdgpu-img", default="", help="the inspector (log-default reads the images with it)")
    ap.add_argument("--streamer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                       "streamer", "streamer.py"),
                    help="the stand-in image streamer (stream scenario)")
    ap.add_argument("--emu-fault", action="append", default=[],
                    help="a fault rule for kfd-emu --fault, in effect from the start (repeatable); e.g. "
                         "DRM_IOCTL_GEM_CHANGE_HANDLE:every:errno=EINVAL, a kernel that disables the ioctl")
    ap.add_argument("--images-dir", default="",
                    help="where CRIU's images go (created; default: the work directory's images/); "
                         "the benchmark's fixed-rate store")
    ap.add_argument("--interop", default="", choices=["", "upstream-dump", "upstream-restore"],
                    help="upstream's plugin (from --upstream-list) dumps or restores, ours the other step"
                         " (the scenarios below that take it)")
    ap.add_argument("--upstream-list", default="",
                    help="scripts/build-criu.sh's upstream-plugins.txt: '<version>\\t<amdgpu_plugin.so>' lines")
    ap.add_argument("--upstream-so", default="", help=argparse.SUPPRESS)	# internal: found in --upstream-list
    return ap.parse_args()


def check_interop(args, sc):
    if args.interop not in sc.interop:
        takes = "; ".join(f"{n} ({', '.join(x.interop)})" for n, x in SCENARIOS.items() if x.interop)
        raise SystemExit(f"--interop {args.interop} does not take the scenario {args.scenario}; those that take "
                         f"--interop: {takes}")
    args.upstream_so = upstream_plugin(args.upstream_list, args.criu_version)


def run_machines(args, sc, plan, me, faults, work):
    """Runs the scenario in its kfd-emu (two-machine scenarios: the dump's,
    then the restore's); returns the exit status of the phase that ended it."""
    if not sc.second:
        machine = slow_machine(work, args.machine) if sc.slow else args.machine
        emu = [args.kfd_emu, "--machine", machine] + faults
        return subprocess.run(emu + ["--"] + me + ["--phase", "all"]).returncode
    # Both machines at one root path: the restored shim keeps the root
    # and socket paths of its dump. The second starts after the first
    # has ended (kfd-emu --root refuses a root that is in use).
    root = harness.machine_root("kfdemu-realcriu-root.")
    emu = [args.kfd_emu, "--root", root, "--machine", args.machine] + faults
    log(f"first machine: {' '.join(plan['first'])}")
    rc = subprocess.run(emu + plan["first"] + ["--"] + me + ["--phase", "dump"]).returncode
    if rc == 0:
        log(f"second machine: {' '.join(plan['second'])}")
        second = [args.kfd_emu, "--root", root, "--machine", plan.get("second_machine", args.machine)] + faults
        rc = subprocess.run(second + plan["second"] + ["--"] + me + ["--phase", "restore"]).returncode
    shutil.rmtree(root, ignore_errors=True)
    return rc


def verdict_of(sc, rc):
    """(passed, why) of the scenario whose phases ended with `rc`."""
    if not sc.negative:
        return rc == 0, ""
    # Only a failure after a good dump counts: the restore or the
    # restored process must be what the wrong offsets broke.
    if rc == 0:
        return False, ": the round trip succeeded although UPDATE_VMA_MAP answered wrong offsets"
    if rc != 3:
        return False, ": the round trip failed before the restore, so the wrong offsets were not tested"
    return True, ": the falsified UPDATE_VMA_MAP answers made the restore fail"


def main():
    args = parse_args()
    sc = SCENARIOS[args.scenario]
    if args.phase:
        harness.run_phase(lambda: inside(args, args.criu),
                          lambda e: 3 if getattr(e, "after_dump", False) else harness.STEP_FAILED)

    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    plan = None
    with harness.not_run():
        criu = realcriu.require_criu(args, own_run=True)
        if sc.second:
            plan = sc.second(args.machine)
            if plan is None:
                raise harness.NotRun(f"no second machine defined for {args.machine}")
        if args.interop:
            check_interop(args, sc)

    work = harness.work_dir("kfdemu-realcriu.")
    log(f"CRIU {criu}, machine {args.machine}, scenario {args.scenario}, work {work}")
    faults = [a for f in args.emu_fault for a in ("--fault", f)]
    if faults:
        log(f"kfd-emu fault rules: {args.emu_fault}")
    me = harness.self_command(__file__, "--criu", criu, "--work", work)
    if args.interop:
        me += ["--upstream-so", args.upstream_so]
        log(f"interop: upstream's plugin {args.upstream_so} {args.interop.split('-')[1]}s, ours the other step")
    rc = run_machines(args, sc, plan, me, faults, work)
    if rc == harness.NOT_RUN:
        # The phase said NOT RUN and why (pre-copy and soft-dirty).
        shutil.rmtree(work, ignore_errors=True)
        sys.exit(harness.NOT_RUN)
    ok, why = verdict_of(sc, rc)
    harness.finish(ok, work, args.keep, why)


if __name__ == "__main__":
    main()
