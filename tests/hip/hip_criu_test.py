#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""HIP programs checkpointed between kernels, or in the middle of one, under
real CRIU, on the emulated GPU, each compared with the same program run
without a checkpoint.

    hip_criu_test.py --criu-list LIST --criu-version V --realcriu-lib DIR \
        --kfd-emu K --wrapper W --workload HIP_PROGRAM --machine NAME \
        --scenario SCENARIO [--amdgpu-img A] [--keep]

The programs are tests/hip's hip_train, hip_streams and hip_long_kernel
(Debian's HIP 5.2.3 runtime, unmodified, on kfd-emu's AQL processor and
shader core). Each
takes `--gate-after K --gate FILE`: after its step (round) K it prints
"gate K" and waits for FILE, between two kernels with no dispatch running
(hip_streams with its next round queued on three streams behind a
barrier-value packet: copies, kernels and events pending). The test waits
for that line, dumps the program there with real CRIU (realcriu_test.py's
Run: the kfdemu-criu wrapper, the adapter, the plugin under test), restores
it (`restore -d`, the same pid), checks it against the snapshot taken at
the gate (fd table, every BO's contents but its queues' CWSR areas', size,
type and GPU, the device mappings, its queues active:
realcriu_test.check_restored; the runtime's uncached host memory, its
signals, which its threads and the CP may write between the gate and the
dump, against the dump's own copy in CRIU's page images), creates FILE,
and compares the program's whole output (stdout, gate lines included) with
its `--cpu-only` run, line for line, and its exit status 0: every loss and
the final weights' checksum bit for bit.

Mid-kernel (hip_long_kernel): the snapshot is taken at gate 0, before the
launch; at gate 1 the kernel's dispatch is in flight (its middle workgroup
held until the program is past the gate) and the test dumps once it has
run MID_KERNEL_INSTRUCTIONS, so the dump's pause saves its waves (kfd-emu's
CWSR). After the restore it checks the fd table and the BOs' placement (not
their contents, which the kernel writes), and that the restored AQL queue
resumed saved waves with some of the grid's workgroups done and some not
(kfd-emu's `queues`), then compares the output as above.

hip_streams also runs with HIP's default GPU_STREAMOPS_CP_WAIT=0 (inside
the streams test): a spinning wait kernel is in flight at the gate, the
dump's pause saves its wave into its queue's CWSR area, and the restored
queue resumes it.

The scenarios are the rows of SCENARIOS (--help lists them, --list prints
their CTest tests as JSON for tests/hip/criu.cmake).

Exit: 0 pass, 1 fail, 77 NOT RUN (CRIU not listed or not usable, not
root, sanitizer build, the program not built).
"""
import argparse
import ctypes
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import time
from typing import Callable, NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "emulator", "criu"))
import harness  # noqa: E402
import realcriu_test as rc  # noqa: E402
from harness import log  # noqa: E402
from realcriu_test import Failure, expect, wait_for  # noqa: E402

# The HIP runtime's start takes 20-40 s on a loaded machine (testkit.h).
GATE_TIMEOUT = 240
EXIT_TIMEOUT = 180


class Program:
    """The HIP program of a scenario in `work`: stdout in out.log (compared),
    stderr in err.log, TMPDIR work/tmp; `p` its Popen when we started it
    (start), None when CRIU restored it in this phase. HIP on gfx90a
    compiles kernels at run time through amd_comgr, in
    $TMPDIR/comgr-XXXXXX, which it removes while it keeps the code object
    mapped: CRIU dumps that deleted file as a ghost and restores it under
    the nearest directory that still exists, as <name>.cr.<ghost id>.ghost.
    Under the shared /tmp two restores at once (ctest -j) collided there
    ("Can't create ghost regfile: File exists"); each test has a TMPDIR of
    its own."""

    def __init__(self, work, pid, p=None):
        self.work, self.pid, self.p = work, pid, p
        self.gate = os.path.join(work, "gate")
        self.out = os.path.join(work, "out.log")
        self.err = os.path.join(work, "err.log")

    @classmethod
    def start(cls, run, sc):
        gates = [a for k in sc.gates for a in ("--gate-after", str(k))]
        cmd = [run.args.workload, *sc.args, *gates, "--gate", os.path.join(run.work, "gate")]
        log(f"program: {' '.join(cmd)}")
        tmp = os.path.join(run.work, "tmp")
        os.makedirs(tmp, exist_ok=True)
        if sc.env:
            log(f"program environment: {' '.join(f'{k}={v}' for k, v in sc.env)}")
        with open(os.path.join(run.work, "out.log"), "w") as out, open(os.path.join(run.work, "err.log"), "w") as err:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                 env=dict(os.environ, TMPDIR=tmp, **dict(sc.env)))
        run.wl = p  # Run.cleanup kills it if the test ends early
        return cls(run.work, p.pid, p)

    def lines(self):
        with open(self.out, errors="replace") as f:
            return f.read().splitlines()

    def wait_gate(self, k):
        """Until the program prints "gate K"."""
        said = lambda: f"gate {k}" in self.lines()
        ok = wait_for(lambda: said() or not rc.alive(self.pid), GATE_TIMEOUT, f"gate {k} of {self.pid}")
        if not ok or not said():
            rc.show_log(self.out)
            rc.show_log(self.err)
            raise Failure(f"the program {self.pid} did not reach gate {k} (exit {self.p and self.p.poll()})", False)

    def release(self):
        open(self.gate, "w").close()

    def sizes(self):
        return {f: os.path.getsize(f) for f in (self.out, self.err)}


def expected_lines(run, sc):
    """The program's --cpu-only output with a "gate K" line after the line
    of step (round) K: what every run must print."""
    r = subprocess.run([run.args.workload, *sc.args, "--cpu-only"], capture_output=True, text=True, timeout=120)
    expect(r.returncode == 0, f"{run.args.workload} --cpu-only failed ({r.returncode}): {r.stderr}", False)
    lines = r.stdout.splitlines()
    for k in sorted(sc.gates, reverse=True):
        lines.insert(k + 1, f"gate {k}")
    return lines


def check_output(prog, code, want, what):
    """The program's exit status 0 and its whole stdout equal to `want`."""
    got = prog.lines()
    if code != 0 or got != want:
        rc.show_log(prog.out)
        rc.show_log(prog.err)
    expect(code == 0, f"{what}: the program exited with {code}")
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    expect(got == want, f"{what}: output line {first + 1}: {got[first:first + 1]} != uninterrupted run's "
                        f"{want[first:first + 1]} ({len(got)} lines, want {len(want)})")
    log(f"{what}: exit 0, all {len(got)} lines equal to the uninterrupted run's (last: {got[-1]})")


def bo_kinds(bos):
    """{type: [count, bytes]} of a snapshot's BOs."""
    kinds = {}
    for b in bos:
        k = kinds.setdefault(b["type"], [0, 0])
        k[0] += 1
        k[1] += b["size"]
    return kinds


# KFD's queue types (kfd_ioctl.h KFD_IOC_QUEUE_TYPE_*).
QUEUE_TYPES = {0: "PM4", 1: "SDMA", 2: "AQL", 3: "SDMA_XGMI", 4: "SDMA_BY_ENG_ID"}


# kfd_ioctl.h: KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED.
KFD_ALLOC_UNCACHED = 1 << 25
# CRIU's images (images/pagemap.proto, criu/include/pagemap.h): a pagemap
# entry's fields and flags; each image starts with two 32-bit magics, then
# entries as a 32-bit length and the message.
PAGEMAP_VADDR, PAGEMAP_COMPAT_NR_PAGES, PAGEMAP_FLAGS, PAGEMAP_NR_PAGES = 1, 2, 4, 5
PE_PARENT, PE_PRESENT = 1 << 0, 1 << 2
PAGE = 4096


def runtime_memory(before):
    """{va: size} of the snapshot's uncached userptr BOs: the fine-grained
    host memory where the HIP runtime (ROCr) keeps its signals (amd_signal_t
    arrays: values, CP timestamps) and queue descriptors. The runtime's
    threads and the CP may write them after the snapshot at the gate and
    before CRIU freezes the program (one CI run: a signal page of
    hip_streams changed there, its restored contents equal to the dump's),
    so they are compared with the dump's own copy (CRIU's page images),
    not with the snapshot. The user's data (device memory, pinned host
    memory) is not uncached and is compared with the snapshot."""
    return {b["va"]: b["size"] for b in before["bos"]
            if b["type"] == "userptr" and b["flags"] & KFD_ALLOC_UNCACHED}


def bo_checksum(data):
    """kfd-emu's BO checksum (tests/common/testcommon/bo_checksum.h, which
    defines it): FNV-1a 64 over the little-endian 64-bit words of `data`,
    the last zero-padded; a run of n zero words is one multiplication by the
    prime's n-th power (the signal pools are mostly zero)."""
    prime, mask = 0x100000001b3, 0xFFFFFFFFFFFFFFFF
    data = bytes(data) + bytes(-len(data) % 8)
    words = memoryview(data).cast("Q")
    h, done = 0xcbf29ce484222325, 0
    for m in re.finditer(rb"[^\x00]+", data):
        lo, hi = max(m.start() // 8, done), -(-m.end() // 8)
        if hi <= done:
            continue
        h = h * pow(prime, lo - done, 1 << 64) & mask
        for w in words[lo:hi]:
            h = ((h ^ w) * prime) & mask
        done = hi
    return h * pow(prime, len(words) - done, 1 << 64) & mask


def _message(b):
    """{field: value} of a protobuf message of varint, 64-bit and
    length-delimited fields (a pagemap entry's)."""
    try:
        return {field: v for field, _, v in harness.pb_fields(b, wires=(0, 1, 2))}
    except ValueError as e:
        raise Failure(f"pagemap entry: {e}", False)


def dumped_memory(images, pid, va, size):
    """The `size` bytes at `va` of process `pid` as CRIU dumped them in
    `images` (its pagemap and pages images; pages in the parent checkpoint
    read from images/parent; pages not dumped are zero, as CRIU restores a
    private anonymous mapping's)."""
    with open(os.path.join(images, f"pagemap-{pid}.img"), "rb") as f:
        b = f.read()
    i, entries = 8, []
    while i < len(b):
        n = struct.unpack_from("<I", b, i)[0]
        entries.append(_message(b[i + 4:i + 4 + n]))
        i += 4 + n
    out = bytearray(size)
    with open(os.path.join(images, f"pages-{entries[0][1]}.img"), "rb") as pages:
        offset = 0
        for e in entries[1:]:
            start, flags = e[PAGEMAP_VADDR], e.get(PAGEMAP_FLAGS, PE_PRESENT)
            n = e.get(PAGEMAP_NR_PAGES, e[PAGEMAP_COMPAT_NR_PAGES]) * PAGE
            lo, hi = max(start, va), min(start + n, va + size)
            if lo < hi and flags & PE_PRESENT:
                pages.seek(offset + lo - start)
                out[lo - va:hi - va] = pages.read(hi - lo)
            elif lo < hi and flags & PE_PARENT:
                out[lo - va:hi - va] = dumped_memory(os.path.join(images, "parent"), pid, lo, hi - lo)
            if flags & PE_PRESENT:
                offset += n
    return bytes(out)


def read_memory(pid, va, size):
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(va)
        return f.read(size)


def check_runtime_memory(run, pid, before):
    """The runtime's memory (runtime_memory) restored as CRIU dumped it; the
    8-byte words the program changed between the gate and the dump logged."""
    after = {b["va"]: b for b in run.emu.ctl("bos", pid)["bos"]}
    changed = []
    for va, gate_hex in before["runtime_bytes"]:
        dumped = dumped_memory(run.images, before["pid"], va, len(gate_hex) // 2)
        want = f"{bo_checksum(dumped):#018x}"
        expect(after[va]["checksum"] == want,
               f"BO at {va:#x}: checksum {after[va]['checksum']} != dumped {want} (CRIU's pages)")
        gate = bytes.fromhex(gate_hex)
        changed += [f"{va + o:#x}" for o in range(0, len(gate), 8) if gate[o:o + 8] != dumped[o:o + 8]]
    log(f"restored {pid}: the runtime's {len(before['runtime_bytes'])} uncached BOs as dumped; words written "
        f"between the gate and the dump: {', '.join(changed) or 'none'}")


def at_gate(run, prog, k):
    """The program at gate K: its snapshot (realcriu_test.snapshot) with the
    bytes of the runtime's memory (runtime_memory), what it holds logged
    (BOs by kind, queues by type, events)."""
    prog.wait_gate(k)
    before = rc.snapshot(run.emu, prog.pid)
    before["runtime_bytes"] = [[va, read_memory(prog.pid, va, size).hex()]
                               for va, size in sorted(runtime_memory(before).items())]
    kinds = ", ".join(f"{t} {n} ({b} bytes)" for t, (n, b) in sorted(bo_kinds(before["bos"]).items()))
    types = [QUEUE_TYPES.get(q["type"], str(q["type"])) for q in before["queues"]["queues"]]
    events = run.emu.ctl("events", prog.pid)["events"]
    log(f"gate {k}: program {prog.pid}: {len(before['bos'])} BOs: {kinds}; {len(before['vmas'])} device "
        f"mappings; queues {', '.join(f'{types.count(t)} {t}' for t in sorted(set(types)))}; {len(events)} events "
        f"({sum(e['signaled'] for e in events)} signaled); {len(before['fds'])} fds")
    expect(before["bos"] and before["queues"]["queues"], "the program has no BOs or queues at its gate", False)
    return before


def dump(run, prog, extra=(), leave_running=False):
    rc_ = run.criu_run("dump", ["-t", str(prog.pid), *extra] + (["--leave-running"] if leave_running else []),
                       "dump.log")
    if rc_ != 0:
        rc.show_log(os.path.join(run.images, "dump.log"))
        raise Failure(f"criu dump failed ({rc_})", False)
    if leave_running:
        expect(rc.alive(prog.pid), f"the program {prog.pid} is gone after dump --leave-running", False)
        return
    prog.p.wait(timeout=30)
    run.wl = None
    expect(wait_for(lambda: not rc.reap_children() and not os.path.exists(f"/proc/{prog.pid}"), 10,
                    "the dumped task to go"), f"dumped task {prog.pid} still exists", False)


def aql_read_indices(queues):
    """{queue id: the AQL processor's read index} of the AQL queues."""
    return {q["id"]: q["engine"]["rptr"] for q in queues["queues"] if "in_flight" in q.get("engine", {})}


def cwsr_areas(before):
    """The VAs of the snapshot's BOs that are its queues' CWSR areas (a
    queue's ctx_save_restore address, kfd-emu's `queues`): the dump's pause
    writes the waves of a dispatch in flight there after the snapshot."""
    starts = {q["ctx_save_restore"]["address"] for q in before["queues"]["queues"]
              if q["ctx_save_restore"]["size"]}
    return {b["va"] for b in before["bos"] if b["va"] in starts}


def restore_and_finish(run, prog, before, want, what, gpus=None, minors=None):
    """Restores the dumped program, checks it against `before` (every BO's
    contents but its queues' CWSR areas' and the runtime's memory's, which
    must equal the dump's copy, and every AQL queue at its dumped read
    index: a queue restored at 0 would run its packets again, one restored
    past a pending packet would skip it), lets it go through its gate and
    compares its output."""
    run.restore(prog.pid)
    expect(not (still := rc.guardians_left()), f"guardian processes left after the restore: {still}")
    cwsr = cwsr_areas(before)
    log(f"contents not compared: the CWSR areas at {', '.join(f'{va:#x}' for va in sorted(cwsr)) or '(none)'}")
    rc.check_restored(run.emu, prog.pid, before, gpus, minors, cwsr | set(runtime_memory(before)))
    check_runtime_memory(run, prog.pid, before)
    dumped, now = aql_read_indices(before["queues"]), aql_read_indices(run.emu.ctl("queues", prog.pid))
    expect(dumped and now == dumped, f"AQL queues' read indices after the restore {now} != dumped {dumped}")
    log(f"restored {prog.pid}: {len(now)} AQL queues at their dumped read indices {sorted(now.values())}")
    if run.sc.waves_at_gate:
        check_resumed_waves(run, prog.pid, mid_grid=False)
    finish(run, prog, want, what)


def finish(run, prog, want, what):
    prog.release()
    code = rc.wait_exit(prog.pid, EXIT_TIMEOUT)
    if code is None and rc.alive(prog.pid):
        log(f"{prog.pid} did not exit; its queues: {run.emu.ctl('queues', prog.pid)}")
    check_output(prog, code, want, what)


def show_images(run):
    """amdgpu-img show of the checkpoint, when --amdgpu-img is given (the
    BOs' kinds, counts and bytes the man page states)."""
    if not run.args.amdgpu_img:
        return
    r = subprocess.run([run.args.amdgpu_img, "show", run.images], capture_output=True, text=True)
    log(f"amdgpu-img show {run.images}: exit {r.returncode}\n" + r.stdout + r.stderr)
    expect(r.returncode == 0, "amdgpu-img show of the checkpoint failed")


# --------------------------------------------------------------------------
# The flows
# --------------------------------------------------------------------------

def same_machine(run):
    """Dumped at the gate, restored on the same machine."""
    want = expected_lines(run, run.sc)
    prog = Program.start(run, run.sc)
    before = at_gate(run, prog, run.sc.gates[0])
    dump(run, prog)
    show_images(run)
    restore_and_finish(run, prog, before, want, "restored")


def streams_both_waits(run):
    """same_machine with the program's barrier-value wait, then again, in a
    work directory of its own, as the streams-spin-wait row (HIP's default
    spinning wait kernel in flight at the gate): one test for both."""
    same_machine(run)
    run.sc = SCENARIOS["streams-spin-wait"]
    run.work = os.path.join(run.work, "spin-wait")
    run.images = os.path.join(run.work, "images")
    os.makedirs(run.images)
    log(f"again with {run.sc.name} in {run.work}")
    same_machine(run)


def on_two_machines(run, reach, restore, what):
    """The two phases of a case restored on the second machine
    (realcriu_test.OTHER_MACHINE: other gpu_ids, minors, GPU order): the
    dump phase starts the program, `reach`(run, prog) takes it to where it
    is dumped (returning its state there) and dumps it; the restore phase
    runs `restore`(run, prog, before, want, what, gpus, minors)."""
    state = os.path.join(run.work, "state.json")
    if run.args.phase == "dump":
        want = expected_lines(run, run.sc)
        prog = Program.start(run, run.sc)
        before = reach(run, prog)
        dump(run, prog)
        with open(state, "w") as f:
            json.dump({"pid": prog.pid, "before": before, "want": want}, f)
        return
    with open(state) as f:
        st = json.load(f)
    plan = rc.OTHER_MACHINE[run.args.machine]
    restore(run, Program(run.work, st["pid"]), st["before"], st["want"], what, plan["gpus"], plan["minors"])


def other_machine(run):
    """Dumped at the gate on the first machine, restored on the second."""
    on_two_machines(run, lambda r, prog: at_gate(r, prog, r.sc.gates[0]), restore_and_finish,
                    "restored on the second machine")


# Mid-kernel: the long kernel's dispatch has run this many wave-instructions
# before the dump is started (its held workgroup spins until the program is
# past gate 1, so it is reached, and the kernel is still in flight at the dump).
# With four workgroups in flight (the shader's kGroupsInFlight) none had
# ended at 1.39 M, 4 of 64 had at 3.1-3.5 M; the check wants some ended.
MID_KERNEL_INSTRUCTIONS = 3_000_000


def wait_mid_kernel(run, prog):
    """Until the program's long kernel is in flight on an AQL queue and has
    run MID_KERNEL_INSTRUCTIONS wave-instructions (kfd-emu's `queues`)."""
    def running():
        for q in run.emu.ctl("queues", prog.pid)["queues"]:
            e = q.get("engine", {})
            if e.get("in_flight") and e["instructions"] >= MID_KERNEL_INSTRUCTIONS:
                return q
        return None
    expect(wait_for(running, GATE_TIMEOUT, "the long kernel mid-flight"),
           f"the long kernel of {prog.pid} is not running: {run.emu.ctl('queues', prog.pid)}", False)
    e = running()["engine"]
    log(f"the long kernel is in flight on its AQL queue: {e['instructions']} wave-instructions run")


def check_placed(emu, pid, before, gpus):
    """The restored BOs where they were dumped (VA, size, type, user and
    actual GPU), contents aside: a kernel ran on them until the dump and
    runs again from the restore."""
    after = {b["va"]: b for b in emu.ctl("bos", pid)["bos"]}
    for b in before["bos"]:
        a = after.get(b["va"])
        want_gpu = gpus[b["actual_gpu_id"]] if gpus else b["actual_gpu_id"]
        expect(a is not None and (a["size"], a["type"], a["gpu_id"], a["actual_gpu_id"]) ==
               (b["size"], b["type"], b["gpu_id"], want_gpu), f"BO at {b['va']:#x} restored as {a}, dumped {b}")


def check_resumed_waves(run, pid, mid_grid=True):
    """The restored process's AQL queue resumed waves saved mid-flight
    (kfd-emu's `queues`, "cwsr" of the engine): some waves and, with
    `mid_grid`, some of the grid's workgroups done and some not."""
    got = [q["engine"]["cwsr"] for q in run.emu.ctl("queues", pid)["queues"]
           if q.get("engine", {}).get("cwsr", {}).get("resumes")]
    expect(len(got) == 1, f"{len(got)} AQL queues resumed saved waves after the restore, want 1")
    c = got[0]
    expect(c["waves"] > 0 and (not mid_grid or 0 < c["groups_done"] < c["groups"]),
           f"the waves resumed were not saved mid-flight: {c}")
    log(f"restored {pid}: its AQL queue resumed {c['waves']} saved waves, {c['groups_done']} of {c['groups']} "
        f"workgroups done at the dump")


def restore_mid_kernel(run, prog, before, want, what, gpus=None, minors=None):
    """Restores the program dumped mid-kernel, checks its fd table, BOs
    (placed, not contents), queues and that its queue resumed the saved
    waves, lets it through its gate and compares its output."""
    run.restore(prog.pid)
    expect(not (still := rc.guardians_left()), f"guardian processes left after the restore: {still}")
    rc.check_fds(prog.pid, before, minors, "restored")
    check_placed(run.emu, prog.pid, before, gpus)
    check_resumed_waves(run, prog.pid)
    finish(run, prog, want, what)


def at_mid_kernel(run, prog):
    """The program's snapshot at gate 0 (before its launch: the BOs' contents
    are not compared, and the kernel would race the snapshot), then at
    gate 1 its long kernel mid-flight; the snapshot."""
    before = at_gate(run, prog, 0)
    prog.release()
    prog.wait_gate(1)
    wait_mid_kernel(run, prog)
    return before


def mid_kernel(run):
    """Dumped while its long kernel runs (gate 1, after the launch),
    restored on the same machine."""
    want = expected_lines(run, run.sc)
    prog = Program.start(run, run.sc)
    before = at_mid_kernel(run, prog)
    dump(run, prog)
    restore_mid_kernel(run, prog, before, want, "restored mid-kernel")


def mid_kernel_other(run):
    """mid_kernel, restored on the second machine (other gpu_ids, minors,
    GPU order)."""
    on_two_machines(run, at_mid_kernel, restore_mid_kernel, "restored mid-kernel on the second machine")


def hsakmt_semaphore():
    """libhsakmt's named semaphore made before the program starts, as any
    ROCm process after the first on a machine finds it: libhsakmt then
    opens it by name instead of creating it (glibc's sem_open(O_CREAT)
    maps a temporary file it links under the name and unlinks, a deleted
    mapping CRIU dumps as a --link-remap link, which a --leave-running dump
    removes again: workload.cpp --named-semaphore). The name and count are
    libhsakmt's (hsakmt_shm.cpp)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sem_open.restype = ctypes.c_void_p
    sem = libc.sem_open(b"/hsakmt_semaphore", os.O_CREAT, 0o666, 1)
    if sem in (None, ctypes.c_void_p(-1).value):
        raise Failure(f"sem_open hsakmt_semaphore: {os.strerror(ctypes.get_errno())}", False)
    libc.sem_close(ctypes.c_void_p(sem))


def leave_running(run):
    """dump --leave-running at the gate: the original goes on and finishes
    with the uninterrupted run's output; then the checkpoint is restored
    (the pid free again) and finishes with the same output."""
    want = expected_lines(run, run.sc)
    hsakmt_semaphore()
    prog = Program.start(run, run.sc)
    before = at_gate(run, prog, run.sc.gates[0])
    sizes = prog.sizes()
    dump(run, prog, leave_running=True)
    rc.check_running(run.emu, prog.pid, before, "after dump --leave-running")
    expect(not (still := rc.guardians_left()), f"guardian processes left after the dump: {still}", False)
    finish(run, prog, want, "the original after dump --leave-running")
    run.wl = None
    expect(wait_for(lambda: run.emu.process(prog.pid) is None and not rc.reap_children(), 10),
           f"the model still has the finished {prog.pid}", False)
    # The restored program writes on from where it was dumped: its files as
    # long as they were then (CRIU checks a regular file's size).
    shutil.copy(prog.out, prog.out + ".original")
    for f, n in sizes.items():
        os.truncate(f, n)
    restore_and_finish(run, prog, before, want, "restored from the --leave-running checkpoint")


def incremental(run):
    """Gate 1: dump --leave-running into ckpt-1; gate 2: dump into ckpt-2
    with ckpt-1 as its parent (--track-mem --prev-images-dir where the
    kernel tracks memory, else the parent link realcriu_test.gpu_only_parent
    makes): the plugin writes only the chunks that changed (its summary's
    incremental clause); the restore from ckpt-2 reads the rest through the
    chain and the program finishes with the uninterrupted run's output."""
    want = expected_lines(run, run.sc)
    hsakmt_semaphore()
    prog = Program.start(run, run.sc)
    track = ["--track-mem"] if rc.tracks_memory(run.criu) else []
    first, second = run.sc.gates
    run.images = os.path.join(run.work, "ckpt-1")
    os.makedirs(run.images)
    before = at_gate(run, prog, first)
    dump(run, prog, track, leave_running=True)
    rc.check_running(run.emu, prog.pid, before, "after dump 1 (--leave-running)")
    prog.release()
    before = at_gate(run, prog, second)
    run.images = os.path.join(run.work, "ckpt-2")
    os.makedirs(run.images)
    if track:
        extra = track + ["--prev-images-dir", "../ckpt-1"]
    else:
        log("this kernel does not track memory: the parent link is made by the test, to dump 1's GPU files "
            "(realcriu_test.gpu_only_parent)")
        rc.gpu_only_parent(run.work, 2)
        extra = []
    dump(run, prog, extra)
    text = open(os.path.join(run.images, "dump.log"), errors="replace").read()
    total, incr = rc.SUMMARY_DUMP.search(text), rc.SUMMARY_INCREMENTAL.search(text)
    expect(total and incr, "dump 2: no summary line with an incremental clause")
    written, parent = int(incr.group(2)), int(incr.group(3))
    expect(written + parent == int(total.group(2)) and parent > 0,
           f"dump 2: {written} bytes written + {parent} from the parent != {total.group(2)} bytes of BOs")
    log(f"dump 2: {written} of {total.group(2)} bytes written, {parent} taken from ckpt-1")
    show_images(run)
    restore_and_finish(run, prog, before, want, "restored from the incremental checkpoint")


# --------------------------------------------------------------------------
# The scenarios: one row each (--help, --list, the flow, the program's
# arguments, its gates and its CTest tests).
# --------------------------------------------------------------------------

class Scenario(NamedTuple):
    name: str
    run: Callable         # fn(run), inside kfd-emu (with `second`: once per machine)
    program: str          # tests/hip's program (--workload)
    args: tuple           # its arguments but the gates
    gates: tuple          # --gate-after K for each
    tests: tuple          # (test name, machine) registered under each CRIU
    second: bool = False  # restored on a second machine (realcriu_test.OTHER_MACHINE)
    pending: str = ""     # NOT RUN: the hip_runtime case whose reason (tests/hip/CMakeLists.txt) it shares
    doc: str = ""
    env: tuple = ()       # (name, value) pairs set in the program's environment
    waves_at_gate: bool = False  # a dispatch in flight at the gate: the restored queue resumes saved waves


TRAIN = ("--steps", "12")
STREAMS = ("--rounds", "4")
LONG = ()  # hip_long_kernel's 2048 rounds
SCENARIOS = {s.name: s for s in (
    Scenario("train", same_machine, "hip_train", TRAIN, (5,), (("train_MI100", "MI100"),),
             doc="the training loop dumped after step 5 of 12 and restored on the same machine: every later "
                 "loss and the final weights' checksum equal to the uninterrupted run's (--cpu-only), bit for "
                 "bit."),
    Scenario("train-other", other_machine, "hip_train", TRAIN, (5,),
             (("train_other_machine_2xMI210", "2xMI210"),), second=True,
             doc="train, restored on a second machine with other gpu_ids and render minors and the GPUs in the "
                 "other order (realcriu_test.OTHER_MACHINE): the BOs on the mapped GPUs, then as train."),
    Scenario("train-leave-running", leave_running, "hip_train", TRAIN, (5,),
             (("train_leave_running_MI100", "MI100"),),
             doc="train with dump --leave-running: the original runs on (queues active, no guardian) and finishes "
                 "with the uninterrupted run's output; then the checkpoint is restored and finishes the same."),
    Scenario("train-incremental", incremental, "hip_train", TRAIN, (3, 7),
             (("train_incremental_MI100", "MI100"),),
             doc="dump --leave-running after step 3 into ckpt-1, then after step 7 a dump into ckpt-2 with ckpt-1 "
                 "as its parent: the plugin writes only what changed (its summary's incremental clause: written + "
                 "taken from the parent = the BOs' bytes, something taken); restored from ckpt-2, then as train."),
    Scenario("streams", streams_both_waits, "hip_streams", STREAMS, (1,), (("streams_MI100", "MI100"),),
             doc="hip_streams dumped at its gate after round 1: round 2 queued on three streams (async copies "
                 "host to device, device to device and device to host, two kernels, three events pending) behind "
                 "a barrier-value packet; restored on the same machine, the round completes and the rest as "
                 "train. Then, in the same test, streams-spin-wait."),
    Scenario("streams-spin-wait", same_machine, "hip_streams", STREAMS, (1,), (),
             env=(("GPU_STREAMOPS_CP_WAIT", "0"),), waves_at_gate=True,
             doc="streams with HIP's default GPU_STREAMOPS_CP_WAIT=0: stream 0 waits in HIP's spinning wait "
                 "kernel, a dispatch in flight at the gate whose waves the dump's pause saves (kfd-emu's CWSR) "
                 "into its queue's CWSR area (contents not compared: the pause writes them after the snapshot); "
                 "restored, its queue resumes the saved waves (kfd-emu's `queues`), the kernel sees the value "
                 "and the round completes as in streams. Run by the streams test, after streams (no test of its "
                 "own)."),
    Scenario("peer-other", other_machine, "hip_streams", STREAMS + ("--peer",), (1,),
             (("peer_other_machine_2xMI210", "2xMI210"),), second=True,
             doc="streams with --peer on two GPUs (stream 1, its kernel reading GPU 0's memory through peer "
                 "access and a peer copy GPU 0 -> GPU 1 on GPU 1), restored on the second machine with the GPUs "
                 "swapped: the peer access and copies go on across the checkpoint."),
    Scenario("mid-kernel", mid_kernel, "hip_long_kernel", LONG, (0, 1), (("mid_kernel_MI100", "MI100"),),
             doc="hip_long_kernel dumped while its kernel runs (waves in flight, some workgroups done), restored on "
                 "the same machine: its AQL queue resumes the waves saved at the dump (kfd-emu's CWSR) and the "
                 "kernel's output equals the CPU's, bit for bit."),
    Scenario("mid-kernel-other", mid_kernel_other, "hip_long_kernel", LONG, (0, 1),
             (("mid_kernel_other_machine_2xMI210", "2xMI210"),), second=True,
             doc="mid-kernel, restored on the second machine (other gpu_ids and render minors, the GPUs in the "
                 "other order)."),
    Scenario("ipc", None, "hip_runtime", ("--case", "ipc"), (), (("ipc_2xMI210", "2xMI210"),), pending="ipc",
             doc="two processes sharing memory through HIP IPC, checkpointed together: NOT RUN, as hip_runtime's "
                 "ipc case (hipIpcGetMemHandle needs an ioctl upstream amdkfd does not have)."),
)}


def ctest_list():
    """--list: every scenario's CTest tests (criu.cmake registers each under
    every CRIU)."""
    return [{"name": name, "scenario": sc.name, "program": sc.program, "machine": machine, "pending": sc.pending}
            for sc in SCENARIOS.values() for name, machine in sc.tests]


class ListTests(argparse.Action):
    def __init__(self, **kw):
        super().__init__(nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(json.dumps(ctest_list(), indent=1))
        parser.exit()


def scenarios_help():
    out = ["scenarios (--scenario):"]
    for sc in SCENARIOS.values():
        gates = f", gates {', '.join(map(str, sc.gates))}" if sc.gates else ""
        out += [f"  {sc.name} ({sc.program} {' '.join(sc.args)}{gates})",
                textwrap.fill(sc.doc, 100, initial_indent=" " * 6, subsequent_indent=" " * 6)]
    return "\n".join(out)


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def inside(args):
    harness.become_subreaper()
    run = rc.Run(args, args.criu, args.work)
    run.sc = SCENARIOS[args.scenario]
    try:
        run.remaps_before = set(glob.glob("/dev/shm/link_remap.*"))
        os.makedirs(run.images, exist_ok=True)
        run.sc.run(run)
    finally:
        run.cleanup()


def run_machines(args, sc, me, work):
    if not sc.second:
        return subprocess.run([args.kfd_emu, "--machine", args.machine, "--"] + me + ["--phase", "all"]).returncode
    plan = rc.OTHER_MACHINE[args.machine]
    root = harness.machine_root("hip-criu-root.")
    emu = [args.kfd_emu, "--root", root, "--machine", args.machine]
    log(f"first machine: {' '.join(plan['first'])}")
    code = subprocess.run(emu + plan["first"] + ["--"] + me + ["--phase", "dump"]).returncode
    if code == 0:
        log(f"second machine: {' '.join(plan['second'])}")
        second = [args.kfd_emu, "--root", root, "--machine", plan.get("second_machine", args.machine)]
        code = subprocess.run(second + plan["second"] + ["--"] + me + ["--phase", "restore"]).returncode
    shutil.rmtree(root, ignore_errors=True)
    return code


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=scenarios_help(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action=ListTests, help="print the CTest tests of every scenario (JSON) and exit")
    rc.add_run_args(ap)
    ap.add_argument("--scenario", required=True, choices=SCENARIOS)
    ap.add_argument("--amdgpu-img", default="", help="amdgpu-img: the checkpoint is shown in the log")
    args = ap.parse_args()
    args.interop = ""
    sc = SCENARIOS[args.scenario]
    if sc.pending:
        with harness.not_run():
            raise harness.NotRun(f"as hip_runtime's {sc.pending} case (tests/hip/README.md)")
    if args.phase:
        harness.run_phase(lambda: inside(args))

    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    with harness.not_run():
        if not os.path.exists(args.workload):
            raise harness.NotRun(f"{args.workload} was not built (hipcc; tests/hip/README.md)")
        criu = realcriu.require_criu(args)
        if sc.second and args.machine not in rc.OTHER_MACHINE:
            raise harness.NotRun(f"no second machine defined for {args.machine}")
    harness.private_dev_shm()
    work = harness.work_dir("hip-criu.")
    log(f"CRIU {criu}, machine {args.machine}, scenario {args.scenario}, work {work}")
    me = harness.self_command(__file__, "--criu", criu, "--work", work)
    t0 = time.monotonic()
    code = run_machines(args, sc, me, work)
    harness.finish(code == 0, work, args.keep, f" after {time.monotonic() - t0:.1f}s")


if __name__ == "__main__":
    main()
