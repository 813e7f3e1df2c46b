#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""An HSA program checkpointed in the middle of a stream of async copies.

    rocm_criu_test.py --hsa-copy HSA_COPY --kfd-emu K --machine NAME \
        --scenario SCENARIO [--criu-list LIST --criu-version V --realcriu-lib DIR
        --wrapper W | --host CRIU_HOST --plugin P.so] [--keep]

The program is tests/rocm/hsa_copy (Debian's libhsa-runtime64 5.2, the ROCr
runtime, unmodified) with `--stream ROUNDS --progress FILE --gate GATE`
(at least ROUNDS rounds, then on until the test creates GATE): it copies
host -> VRAM -> host, several copies in flight, and VRAM -> VRAM between
GPUs with hsa_amd_memory_async_copy (the runtime's SDMA user queues, its
interrupt signals and its own event thread), verifies every byte and
appends "round K ok" to FILE after each round. The test waits for
WAIT_ROUNDS verified rounds, then:

real CRIU (scenarios run through tests/emulator/criu: realcriu_test.py's
helpers and the kfdemu-criu wrapper with the adapter):
  same     dump the running program and restore it (`restore -d`) on the
           same emulated machine;
  other    dump it on one machine and restore it on a second `kfd-emu
           --root` at the same root with other gpu_ids, render minors and
           (2xMI210) the GPUs in the other order.
  Checked after the restore: the same pid; the fd table as dumped (render
  nodes through the GPU mapping); the same BOs (VA, size, type, user
  gpu_id) on the mapped GPUs; the device mappings; the same queues, active,
  not paused or evicted; then a whole round started after the restore (the
  round in flight at the dump may have copied everything before the freeze)
  verified by the program, after which the restored SDMA queues have
  executed packets; then the test opens GATE and the program exits 0
  with "all copies verified", and the progress file holds every round once,
  in order, all ok.

criu-host (tests/host, the CRIU stand-in) with injected faults:
  host-dump-fault     two dumps fail on injected faults (CRIU_OP:CHECKPOINT
                      with the process paused; the plugin's first SDMA copy
                      submission, DRM_IOCTL_AMDGPU_CS): criu-host exits
                      non-zero with the plugin's error, and after each the
                      program runs on (not paused, queues active) and in the
                      end completes every round with correct data.
  host-restore-fault  a good dump (--kill); restores failing on
                      CRIU_OP:RESTORE and on the plugin's first SDMA copy
                      (DRM_IOCTL_AMDGPU_CS): non-zero exit with the plugin's
                      error, no task left running, no KFD context left in
                      the model.

Debugging: $ROCM_CRIU_TIMEOUT (seconds, default 180) bounds each wait for
a round; $ROCM_CRIU_HOLD=N keeps a restored program that made no progress
for N seconds before it is killed (to attach a debugger).

Exit: 0 pass, 1 fail, 77 NOT RUN (no CRIU listed or usable, not root,
sanitizer build, no hsa_copy).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "emulator", "criu"))
import harness  # noqa: E402
import realcriu_test as rc  # noqa: E402  (the real-CRIU harness' helpers)

from realcriu_test import Failure, expect, log, wait_for, alive, show_log, plugin_errors  # noqa: E402

# The stream: small copies (a round is ~50 verified copies on 2xMI210, a
# few seconds on a loaded machine), enough rounds that the dump lands in
# the middle and the restored program still has several to do.
ROUNDS = 6
WAIT_ROUNDS = 1
SIZES = ["4096", "65549", "1048580"]
GPUS = {"MI100": ["--gpus", "1", "--isa", "gfx908"],
        "2xMI210": ["--gpus", "2", "--isa", "gfx90a", "--isa", "gfx90a"]}
STREAM_TIMEOUT = int(os.environ.get('ROCM_CRIU_TIMEOUT', 180))


def progress_lines(path):
    try:
        with open(path) as f:
            return [l.strip() for l in f if l.strip()]
    except OSError:
        return []


class Stream:
    """hsa_copy --stream in `work`, started as our child."""

    def __init__(self, args, work):
        self.progress = os.path.join(work, "progress")
        self.out = os.path.join(work, "hsa_copy.log")
        self.gate = os.path.join(work, "gate")
        cmd = [args.hsa_copy] + GPUS[args.machine] + ["--stream", str(ROUNDS), "--progress", self.progress,
                                                      "--gate", self.gate]
        for s in SIZES:
            cmd += ["--size", s]
        with open(self.out, "w") as out:
            self.p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        self.pid = self.p.pid

    def wait_rounds(self, n, what):
        ok = wait_for(lambda: len(progress_lines(self.progress)) >= n or self.p.poll() is not None, STREAM_TIMEOUT,
                      f"{n} verified rounds ({what})")
        if not ok or self.p.poll() is not None:
            show_log(self.out)
            raise Failure(f"{what}: hsa_copy {self.pid} has {len(progress_lines(self.progress))} rounds, "
                          f"exit {self.p.poll()}", False)
        bad = [l for l in progress_lines(self.progress) if not l.endswith(" ok")]
        expect(not bad, f"{what}: hsa_copy reported {bad}", False)

    def release(self):
        """Lets the program shut its runtime down after its last round."""
        release(self.gate)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def frozen(pid):
    """Every thread of `pid` is in a ptrace stop (CRIU has seized it)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
        states = []
        for t in tids:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                states.append(f.read().rsplit(") ", 1)[1][0])
    except OSError:
        return False
    return bool(states) and all(st == "t" for st in states)


def release(gate):
    """Lets hsa_copy --gate GATE shut its runtime down after its last round
    (until then its queues exist, whatever round it is in)."""
    open(gate, "w").close()


def show_stuck(emu, pid):
    """What a program that does not exit is doing: its threads' stacks (when
    gdb is installed) and its queues in the model."""
    log(f"{pid} did not exit; its queues: {emu.ctl('queues', pid)}")
    if not shutil.which("gdb"):
        log("(gdb is not installed: no stacks)")
        return
    r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 25"],
                       capture_output=True, text=True, timeout=60)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("#", "Thread"))]
    log("--- stacks of the stuck program\n" + "\n".join(lines[:200]))


def check_finished(progress, out, rc_, what, at_dump=None):
    """The program's own verdict: exit 0, every round once, in order, ok."""
    lines = progress_lines(progress)
    if rc_ != 0:
        show_log(out)
    expect(rc_ == 0, f"{what}: hsa_copy exited with {rc_}")
    want = [f"round {r} ok" for r in range(max(len(lines), ROUNDS))]
    expect(lines == want, f"{what}: progress {lines} != every round once (at least {ROUNDS}), in order, ok")
    text = open(out, errors="replace").read()
    expect("all copies verified" in text and "FAIL" not in text, f"{what}: hsa_copy's log has no clean verdict")
    log(f"{what}: hsa_copy verified all {len(lines)} rounds" +
        (f" ({at_dump} before the dump, {len(lines) - at_dump} after)" if at_dump is not None else "") + ", exit 0")


def bo_shape(bos, gpus=None):
    """{va: (size, type, user gpu_id, actual gpu_id mapped)}: contents change
    while the stream runs, so the checksums are not compared; the program
    checks its data itself."""
    return {b["va"]: (b["size"], b["type"], b["gpu_id"], (gpus or {}).get(b["actual_gpu_id"], b["actual_gpu_id"]))
            for b in bos}


def check_restored(emu, pid, before, gpus=None, minors=None):
    fds = rc.check_fds(pid, before, minors, "restored")
    now = bo_shape(emu.ctl("bos", pid, "nosum")["bos"])
    then = bo_shape(before["bos"], gpus)
    expect(now == then, f"restored BOs differ: missing {sorted(then.keys() - now.keys())}, extra "
                        f"{sorted(now.keys() - then.keys())}, changed "
                        f"{[hex(v) for v in then.keys() & now.keys() if then[v] != now[v]]}")
    got = sorted((v["start"], v["end"], v["path"]) for v in emu.ctl("vmas", pid)["vmas"])
    want = sorted((v["start"], v["end"], rc.render_path(v["path"], minors)) for v in before["vmas"])
    expect(got == want, f"device mappings after restore {got} != {want}")
    nq = rc.check_running(emu, pid, before, "restored")
    log(f"restored {pid}: fd table as dumped ({len(fds)} fds), {len(now)} BOs on the mapped GPUs, "
        f"{len(got)} device mappings, {nq} active queue(s)")


def sdma_packets(emu, pid):
    q = emu.ctl("queues", pid)
    return sum(x.get("engine", {}).get("packets", 0) for x in q["queues"]), q


class CriuRun(rc.Run):
    """realcriu_test's Run (criu_run, cleanup) with hsa_copy as the workload."""

    def start_stream(self):
        self.remaps_before = set(rc.glob.glob("/dev/shm/link_remap.*"))
        os.makedirs(self.images, exist_ok=True)
        # (not self.stream: Run's flag for criu --stream)
        self.hsa = Stream(self.args, self.work)
        self.wl = self.hsa.p
        return self.hsa

    def dump_stream(self, s):
        s.wait_rounds(WAIT_ROUNDS, "before the dump")
        # The fd table (stable while the stream runs) before the dump: in
        # the dump, CRIU's parasite adds its own.
        fds = rc.snapshot(self.emu, s.pid)
        # The stream allocates and frees buffers all the time: what is
        # dumped is what the process holds once CRIU has frozen it, so the
        # BOs, mappings and queues to compare with are taken then (every
        # thread seized), during the dump.
        # CRIU's post-dump action script runs once every file is dumped and
        # before the tasks are killed: it raises a flag and holds CRIU there
        # (30 s at most) until the snapshot is taken. Watching the process
        # state instead raced with a dump that ends in half a second.
        flag = os.path.join(self.work, "frozen-at-post-dump")
        script = os.path.join(self.work, "post-dump.sh")
        with open(script, "w") as f:
            f.write('#!/bin/sh\n[ "$CRTOOLS_SCRIPT_ACTION" = post-dump ] || exit 0\n'
                    f'touch "{flag}"\ni=0\n'
                    f'while [ -e "{flag}" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n')
        os.chmod(script, 0o755)
        result = {}
        dumper = threading.Thread(target=lambda: result.update(rc=self.criu_run(
            "dump", ["-t", str(s.pid), "--action-script", script], "dump.log")))
        dumper.start()
        before = None
        while dumper.is_alive():
            if os.path.exists(flag):
                snap = {"pid": s.pid, "bos": self.emu.ctl("bos", s.pid, "nosum").get("bos"),
                        "vmas": self.emu.ctl("vmas", s.pid).get("vmas"), "queues": self.emu.ctl("queues", s.pid)}
                if snap["bos"] is not None and snap["vmas"] is not None and "queues" in snap["queues"]:
                    before = snap
                os.unlink(flag)
                break
            time.sleep(0.01)
        dumper.join()
        if result.get("rc") != 0:
            show_log(os.path.join(self.images, "dump.log"))
            raise Failure(f"criu dump failed ({result.get('rc')})")
        expect(before is not None, "no snapshot of the process while CRIU had it frozen", False)
        before.update(fds=fds["fds"], daemon_fds=fds["daemon_fds"])
        sdma = [q for q in before["queues"]["queues"] if "engine" in q]  # SDMA user queues run an engine
        log(f"hsa_copy {s.pid} while dumped: {len(before['bos'])} BOs, {len(before['vmas'])} device mappings, "
            f"{len(before['queues']['queues'])} queue(s) ({len(sdma)} SDMA)")
        expect(sdma, f"hsa_copy has no SDMA queue to checkpoint: {before['queues']}", False)
        s.p.wait(timeout=30)
        self.wl = None
        at_dump = len(progress_lines(s.progress))
        # Calls its threads made that reached the emulator while CRIU had it
        # paused: restarted, not served (emulator README, transport limits).
        restarted = self.emu.ctl("counters").get("ioctls", {}).get("restarted_while_paused", 0)
        log(f"dumped in the middle of the stream: {at_dump} of {ROUNDS} rounds done; {restarted} calls of "
            f"the paused process restarted")
        expect(wait_for(lambda: not rc.reap_children() and not os.path.exists(f"/proc/{s.pid}"), 10,
                        "the dumped task to go"), f"dumped task {s.pid} still exists", False)
        return {"pid": s.pid, "before": before, "at_dump": at_dump, "progress": s.progress, "out": s.out, "gate": s.gate}

    def restore_stream(self, st, gpus=None, minors=None):
        pid = st["pid"]
        pidfile = os.path.join(self.work, "restored.pid")
        # --leave-stopped: compared with the dump while it cannot change
        # anything, then let go (SIGCONT).
        rc_ = self.criu_run("restore", ["-d", "--pidfile", pidfile, "--leave-stopped"], "restore.log")
        if rc_ != 0:
            show_log(os.path.join(self.images, "restore.log"))
            raise Failure(f"criu restore failed ({rc_})", True)
        with open(pidfile) as f:
            expect(int(f.read().strip()) == pid, "restored under another pid")
        check_restored(self.emu, pid, st["before"], gpus, minors)
        os.kill(pid, signal.SIGCONT)
        # The round in progress at the dump may have finished its copies
        # before the freeze and only written its progress line after the
        # restore; the round after it starts after the restore, so its
        # copies ran on the restored SDMA queues.
        want = st["at_dump"] + 2
        ok = wait_for(lambda: len(progress_lines(st["progress"])) >= want or not alive(pid), STREAM_TIMEOUT,
                      "a round after the restore")
        if not ok or len(progress_lines(st["progress"])) < want:
            show_log(st["out"])
            if os.environ.get("ROCM_CRIU_HOLD"):  # debugging: keep the stuck process for a while
                log(f"holding {pid} for {os.environ['ROCM_CRIU_HOLD']}s")
                time.sleep(int(os.environ["ROCM_CRIU_HOLD"]))
            raise Failure(f"no round completed after the restore ({progress_lines(st['progress'])}); "
                          f"queues {self.emu.ctl('queues', pid) if alive(pid) else '(process gone)'}")
        if alive(pid):
            packets, q = sdma_packets(self.emu, pid)
            expect(rc.queue_sig(q) == rc.queue_sig(st["before"]["queues"]),
                   f"the runtime's queues changed after the restore: {q}")
            expect(packets > 0, f"the restored SDMA queues executed no packet: {q}")
            log(f"after the restore: round {want - 1} verified, the restored queues executed {packets} packets")
        release(st["gate"])
        code = rc.wait_exit(pid, STREAM_TIMEOUT)
        if code is None and alive(pid):
            show_stuck(self.emu, pid)
        check_finished(st["progress"], st["out"], code, "restored", st["at_dump"])


# --------------------------------------------------------------------------
# criu-host with injected faults
# --------------------------------------------------------------------------

def run_host(args, work, action, extra, name, fault=None):
    emu = rc.Emu(args.kfd_emu)
    if fault:
        emu.faults(fault)
    logfile = os.path.join(work, name)
    env = dict(os.environ, CRIU_HOST_KFDEMU=args.kfd_emu)
    try:
        r = subprocess.run([args.host, action] + extra + ["--plugin", args.plugin, "-v4", "-o", logfile], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=rc.CRIU_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure(f"criu-host {action} did not end within {rc.CRIU_TIMEOUT}s")
    finally:
        if fault:
            emu.faults("")
    log(f"criu-host {action}{' with fault ' + fault if fault else ''}: exit {r.returncode}")
    return r.returncode, logfile


# The faults: on the dump, after the pause (the process must be resumed) and
# in the middle of the plugin's data copy; on the restore, KFD's RESTORE and
# the plugin's first copy into the restored BOs.
DUMP_FAULTS = ["CRIU_OP:CHECKPOINT:nth=1:errno=EIO", "DRM_IOCTL_AMDGPU_CS:nth=1:errno=EIO"]
RESTORE_FAULTS = ["CRIU_OP:RESTORE:nth=1:errno=EIO", "DRM_IOCTL_AMDGPU_CS:nth=1:errno=EIO"]


def host_dump_fault(args, work):
    emu = rc.Emu(args.kfd_emu)
    s = Stream(args, work)
    try:
        s.wait_rounds(WAIT_ROUNDS, "before the dumps")
        before = rc.snapshot(emu, s.pid)
        images = os.path.join(work, "images")
        for i, fault in enumerate(DUMP_FAULTS):
            os.makedirs(images, exist_ok=True)
            at = len(progress_lines(s.progress))
            code, logfile = run_host(args, work, "dump", ["-t", str(s.pid), "-D", images], f"dump{i}.log", fault)
            expect(code != 0, f"{fault}: criu-host dump succeeded despite the fault")
            errs = plugin_errors(logfile)
            if not errs:
                show_log(logfile)
            expect(errs, f"{fault}: the dump log has no 'amdgpu_plugin: Error:' line")
            expect(alive(s.pid) and s.p.poll() is None, f"{fault}: hsa_copy did not survive the failed dump")
            rc.check_fds(s.pid, before, None, f"after the failed dump ({fault})")
            nq = rc.check_running(emu, s.pid, before, f"after the failed dump ({fault})")
            log(f"{fault}: dump failed ({errs[0].split('Error:', 1)[1].strip()[:120]}); hsa_copy runs, "
                f"{nq} active queue(s)")
            # The program goes on copying before the next dump.
            s.wait_rounds(at + 1, f"after the failed dump ({fault})")
            shutil.rmtree(images, ignore_errors=True)
        s.release()
        code = rc.wait_exit(s.pid, STREAM_TIMEOUT)
        check_finished(s.progress, s.out, code, "after two failed dumps")
    finally:
        s.kill()


def host_restore_fault(args, work):
    emu = rc.Emu(args.kfd_emu)
    s = Stream(args, work)
    images = os.path.join(work, "images")
    os.makedirs(images, exist_ok=True)
    try:
        s.wait_rounds(WAIT_ROUNDS, "before the dump")
        code, logfile = run_host(args, work, "dump", ["-t", str(s.pid), "-D", images, "--kill"], "dump.log")
        if code != 0:
            show_log(logfile)
        expect(code == 0, f"criu-host dump failed ({code})", False)
        s.p.wait(timeout=30)
        expect(wait_for(lambda: emu.process(s.pid) is None, 10), f"the model still has the dumped {s.pid}", False)
    finally:
        s.kill()
    for i, fault in enumerate(RESTORE_FAULTS):
        code, logfile = run_host(args, work, "restore", ["-D", images], f"restore{i}.log", fault)
        expect(code != 0, f"{fault}: criu-host restore succeeded despite the fault")
        errs = plugin_errors(logfile)
        if not errs:
            show_log(logfile)
        expect(errs, f"{fault}: the restore log has no 'amdgpu_plugin: Error:' line")
        left = rc.reap_children()
        expect(not left, f"{fault}: processes left after the failed restore: {left}")
        procs = emu.ctl("processes")["processes"]
        expect(wait_for(lambda: not emu.ctl("processes")["processes"], 5),
               f"{fault}: KFD contexts left in the model after the failed restore: {procs}")
        log(f"{fault}: restore failed ({errs[0].split('Error:', 1)[1].strip()[:120]}); no task, no KFD context left")


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def inside(args):
    harness.become_subreaper()
    if args.scenario == "host-dump-fault":
        return host_dump_fault(args, args.work)
    if args.scenario == "host-restore-fault":
        return host_restore_fault(args, args.work)
    run = CriuRun(args, args.criu, args.work)
    state = os.path.join(args.work, "state.json")
    try:
        if args.phase in ("all", "dump"):
            st = run.dump_stream(run.start_stream())
            # CRIU's link_remap files of this dump: the restore needs them
            # (the cleanup of a dump-only phase must leave them).
            st["remaps"] = sorted(set(rc.glob.glob("/dev/shm/link_remap.*")) - run.remaps_before)
            with open(state, "w") as f:
                json.dump(st, f)
            if args.phase == "dump":
                run.remaps_before |= set(st["remaps"])
        if args.phase in ("all", "restore"):
            with open(state) as f:
                st = json.load(f)
            if args.phase == "restore":  # the cleanup removes ours only
                run.remaps_before = set(rc.glob.glob("/dev/shm/link_remap.*")) - set(st["remaps"])
            plan = rc.OTHER_MACHINE[args.machine] if args.scenario == "other" else {}
            run.restore_stream(st, plan.get("gpus"), plan.get("minors"))
    finally:
        run.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hsa-copy", required=True)
    ap.add_argument("--kfd-emu", required=True)
    ap.add_argument("--machine", default="2xMI210", choices=sorted(GPUS))
    ap.add_argument("--scenario", required=True, choices=["same", "other", "host-dump-fault", "host-restore-fault"])
    ap.add_argument("--criu-list", default="")
    ap.add_argument("--criu-version", default="")
    ap.add_argument("--criu", default="")
    ap.add_argument("--realcriu-lib", required=True, help="tests/realcriu (realcriu.py)")
    ap.add_argument("--wrapper", default="")
    ap.add_argument("--host", default="", help="criu-host (host-* scenarios)")
    ap.add_argument("--plugin", default=os.environ.get("KFDEMU_CRIU_PLUGIN", ""))
    ap.add_argument("--sanitized", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--phase", default="", help=argparse.SUPPRESS)
    ap.add_argument("--work", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.workload = args.hsa_copy  # what realcriu_test's Run expects

    if args.phase:
        harness.run_phase(lambda: inside(args))

    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    host = args.scenario.startswith("host-")
    with harness.not_run():
        if not os.path.exists(args.hsa_copy):
            raise harness.NotRun(f"{args.hsa_copy} was not built (libhsa-runtime-dev missing)")
        if host:
            if not os.path.exists(args.host) or not os.path.exists(args.plugin):
                raise harness.NotRun(f"criu-host ({args.host}) or the plugin ({args.plugin}) was not built")
            criu = ""
        else:
            criu = realcriu.require_criu(args)
            if args.scenario == "other" and args.machine not in rc.OTHER_MACHINE:
                raise harness.NotRun(f"no second machine defined for {args.machine}")

    harness.private_dev_shm()
    work = harness.work_dir("rocm-criu.")
    log(f"{'criu-host' if host else 'CRIU ' + criu}, machine {args.machine}, scenario {args.scenario}, work {work}")
    me = harness.self_command(__file__, "--work", work, *(["--criu", criu] if criu else []))
    t0 = time.monotonic()
    if args.scenario == "other":
        root = harness.machine_root("rocm-criu-root.")
        plan = rc.OTHER_MACHINE[args.machine]
        emu = [args.kfd_emu, "--root", root, "--machine", args.machine]
        log(f"first machine: {' '.join(plan['first'])}")
        code = subprocess.run(emu + plan["first"] + ["--"] + me + ["--phase", "dump"]).returncode
        if code == 0:
            log(f"second machine: {' '.join(plan['second'])}")
            code = subprocess.run(emu + plan["second"] + ["--"] + me + ["--phase", "restore"]).returncode
        shutil.rmtree(root, ignore_errors=True)
    else:
        code = subprocess.run([args.kfd_emu, "--machine", args.machine, "--"] + me + ["--phase", "all"]).returncode
    harness.finish(code == 0, work, args.keep, f" after {time.monotonic() - t0:.1f}s")


if __name__ == "__main__":
    main()
