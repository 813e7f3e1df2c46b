#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Streamed checkpoints through the real criu-image-streamer, on the
emulated GPU, under real CRIU with the plugin under test.

    streamer_test.py --criu-list LIST --criu-version V --realcriu-lib DIR \
        --kfd-emu K --wrapper W --workload X --machine NAME \
        --scenario SCENARIO [--streamer-bin PATH] [--keep]

The streamer is --streamer-bin, else $AMDCR_STREAMER_BIN, else
`criu-image-streamer` on PATH; without one the test is NOT RUN and says so
(Debian 12 has no package of it, and this project neither ships nor builds
it: see tests/emulator/README.md, "Streamed checkpoints"). CRIU, the
wrapper, the workload and the checks are realcriu_test.py's.

Every scenario sends the checkpoint as users build the pipeline: CRIU's
`dump --stream` into `criu-image-streamer capture`, through `zstd -1`, over
TCP from a network namespace of the test ("node A") to another ("node B",
the two joined by a veth pair: `ip netns`), where `zstd -d` feeds
`criu-image-streamer serve` for `criu restore --stream`. The relays on
either end of the socket are this script (--relay send|recv), standing for
nc or ssh. Nothing of the checkpoint is written to disk on either node.

migrate         the kfd-gem workload (KFD and render-node BOs, queues) is
                dumped on one emulated machine and restored on another
                (realcriu_test.py's OTHER_MACHINE: other gpu_ids, minors and
                GPU order) from what came over the socket, with
                KFD_MAX_BUFFER_SIZE=256K below its 2 MiB VRAM BOs. Checked:
                no file of the plugin in either image directory; the dump's
                staging peak (`ctl userptr` of CRIU) and each restore copy's
                (the plugin's summary lines) within the bound; the restore
                log's checksums matched for every byte of contents; the
                restored process's BOs (contents, GPU), fds, device mappings
                and queues as dumped, mapped onto the second machine's GPUs;
                then its own checks ("OK"); both streamers end without error
                and the compressed bytes on the wire are fewer than the
                bytes captured.
migrate-stall   migrate with 32 MiB VRAM BOs and a receiver that stops
                reading for 3 s after its first MiB: CRIU's dump waits (it
                ends after the stall: the stall falls within CRIU's dump, the
                process frozen) with the same staging bound, and the restore
                is as in migrate.
parent-aborts   an incremental streamed dump: a file dump of the process
                (`criu dump --leave-running` into ckpt-1), whose plugin files
                the streamed dump's image directory then has as its `parent`
                (as realcriu_test.py's periodic scenario links them without
                memory tracking). CRIU itself (4.2.1 and criu-dev) aborts
                such a dump before it dumps any file ("BUG at
                criu/img-streamer.c:234": it opens a parent image for
                reading through the capture streamer); checked: that line,
                no file of the plugin, no guardian, and the process runs on
                (not paused, queues active) and passes its own checks.
checksum-mismatch  migrate with one byte of the stream changed on node B:
                the decompressed stream is kept in a file there, the byte in
                the middle of the largest amdgpu-pages file's contents (found
                by a 64-byte window that occurs once in the stream) is
                flipped, and the stream then fed to serve. The restore must
                fail its checksums: CRIU fails, the plugin's error names
                the pages file, no task of that pid is left (system and
                model).
reader-dies     the receiver exits after 64 KiB of a dump of 64 MiB VRAM
                BOs: `criu dump` fails, the plugin's error names the file it
                was writing, the process runs on (not paused, queues active)
                and passes its own checks, no temporary file and no guardian
                is left.
dmabuf-refused  the dma-buf tree (tests/e2e/dmabuf_tree.cpp: render-node
                BOs shared through a dma-buf by three processes): the dump
                is refused by the plugin naming --stream (see the man page,
                STREAMING), the three processes run on and pass their
                checks.

The emulator's CRIU adapter (not the plugin) reads the dump's mm-<pid>.img
and its own kfdemu-adapter.img from the image directory at restore (see
tests/emulator/README.md, "Real CRIU"): node B's stream is also extracted
(`criu-image-streamer extract`) beside it and those two files alone are
copied in; the plugin's files are only served.

Exit: 0 pass, 1 fail, 77 NOT RUN (no streamer, zstd or ip; CRIU not listed
or not usable; not root; sanitizer build).
"""
import argparse
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "common"))
import harness  # noqa: E402
from harness import log  # noqa: E402
import realcriu_test as rc  # noqa: E402
from realcriu_test import expect, Failure  # noqa: E402

STREAMER = "criu-image-streamer"
NO_STREAMER = (f"no {STREAMER}: set AMDCR_STREAMER_BIN=/path/to/{STREAMER} or put it on PATH (Debian 12 has "
               f"no package of it and this project does not build it; see tests/emulator/README.md, "
               f"\"Streamed checkpoints\")")
PORT = 7070
CHUNK = 1 << 20
STALL_AFTER, STALL_SECONDS = 1 << 20, 3.0
# migrate-stall's VRAM BOs: the dump must outgrow what the pipes, zstd and
# the sockets buffer (some MiB), so that the stall holds CRIU itself.
STALL_VRAM_MIB = 32
DIE_AFTER = 64 << 10
DIES_VRAM_MIB = 64
# The plugin's streamed dump refuses shared dma-buf BOs (dump_dmabuf.cpp).
DMABUF_REFUSAL = re.compile(r"amdgpu_plugin: .*(does not checkpoint .*with --stream)")
RESTORE_CHECKSUMS = re.compile(r"amdgpu_plugin: restore: .*checksums matched for (\d+) bytes")
RESTORE_PEAKS = re.compile(r"restored \d+ BOs with contents, .*peak staging (\d+) bytes")
# The workload's flags, as realcriu_test.py's Run reads them: a row of its
# scenario table each (run by this file, not by realcriu_test.py's main).
for _s in ("migrate", "migrate-stall", "parent-aborts", "checksum-mismatch", "reader-dies"):
    rc.SCENARIOS[_s] = rc.Scenario(_s, run=None, flags=("--kfd-gem",))


# --------------------------------------------------------------------------
# The two nodes and the socket between them
# --------------------------------------------------------------------------

class Nodes:
    """Two network namespaces joined by a veth pair: node A sends from
    10.77.0.1, node B listens at 10.77.0.2."""
    A_ADDR, B_ADDR = "10.77.0.1", "10.77.0.2"

    def __init__(self, tag):
        self.a, self.b = f"amdcr-a-{tag}", f"amdcr-b-{tag}"
        va, vb = f"amdcra{tag}"[:15], f"amdcrb{tag}"[:15]
        steps = [["netns", "add", self.a], ["netns", "add", self.b],
                 ["link", "add", va, "type", "veth", "peer", "name", vb],
                 ["link", "set", va, "netns", self.a], ["link", "set", vb, "netns", self.b],
                 ["-n", self.a, "addr", "add", f"{self.A_ADDR}/24", "dev", va],
                 ["-n", self.b, "addr", "add", f"{self.B_ADDR}/24", "dev", vb],
                 ["-n", self.a, "link", "set", va, "up"], ["-n", self.b, "link", "set", vb, "up"],
                 ["-n", self.a, "link", "set", "lo", "up"], ["-n", self.b, "link", "set", "lo", "up"]]
        for s in steps:
            p = subprocess.run(["ip"] + s, capture_output=True, text=True)
            if p.returncode != 0:
                self.close()
                raise harness.NotRun(f"ip {' '.join(s)}: {p.stderr.strip()} (the test needs network namespaces)")
        log(f"nodes: {self.a} ({self.A_ADDR}) -veth- {self.b} ({self.B_ADDR})")

    def on(self, node):
        return ["ip", "netns", "exec", node]

    def close(self):
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def relay_send(addr, port):
    """stdin to a TCP connection to addr:port (what nc or ssh would do)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=5)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                sys.exit(f"relay send: cannot connect to {addr}:{port}: {e}")
            time.sleep(0.1)
    s.settimeout(None)
    total = 0
    try:
        while True:
            buf = os.read(0, CHUNK)
            if not buf:
                break
            s.sendall(buf)
            total += len(buf)
    except OSError as e:
        sys.exit(f"relay send: after {total} bytes to {addr}:{port}: {e}")
    s.close()


def relay_recv(addr, port, count_file, stall_after, die_after):
    """One TCP connection at addr:port to stdout, its byte count into
    count_file at the end; stops reading for STALL_SECONDS after
    stall_after bytes, exits (closing the connection) after die_after."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    conn, _ = ls.accept()
    total, stalled = 0, False
    while True:
        buf = conn.recv(min(CHUNK, die_after - total) if die_after else CHUNK)
        if not buf:
            break
        view = memoryview(buf)
        while view:
            view = view[os.write(1, view):]
        total += len(buf)
        if stall_after and not stalled and total >= stall_after:
            stalled = True
            t0 = time.monotonic()  # CLOCK_MONOTONIC: comparable with the test's
            time.sleep(STALL_SECONDS)
            with open(count_file + ".stall", "w") as f:
                json.dump([t0, time.monotonic()], f)
        if die_after and total >= die_after:
            with open(count_file, "w") as f:
                f.write(str(total))
            os._exit(1)  # the reader dies: its end of the connection closes
    with open(count_file, "w") as f:
        f.write(str(total))


class Receiver:
    """Node B's end: the relay, `zstd -d`, and the stream copied to
    `criu-image-streamer serve` (for CRIU) and to `... extract` into a side
    directory (the emulator adapter's files, see the header)."""

    def __init__(self, args, nodes, work, die_after=0, stall_after=0, keep=False):
        self.work = work
        self.images = os.path.join(work, "images-b")
        self.side = os.path.join(work, "side-b")
        os.makedirs(self.images)
        self.count_file = os.path.join(work, "wire-bytes")
        relay = nodes.on(nodes.b) + harness.self_command(__file__, "--relay", "recv", "--work", work)
        relay += ["--stall-after", str(stall_after), "--die-after", str(die_after)]
        self.procs, self.copier, self.copy_error, self.kept = {}, None, "", ""
        if die_after:
            self.procs["relay"] = subprocess.Popen(relay, stdout=subprocess.DEVNULL)
            return
        self.procs["relay"] = subprocess.Popen(relay, stdout=subprocess.PIPE)
        self.kept = os.path.join(work, "stream") if keep else ""
        with open(self.kept or os.devnull, "wb") as kept:
            self.procs["zstd -d"] = subprocess.Popen(["zstd", "-d", "-q", "-c"], stdin=self.procs["relay"].stdout,
                                                     stdout=kept if keep else subprocess.PIPE)
        self.procs["relay"].stdout.close()
        self.args = args
        if keep:
            return  # fed to serve and extract by corrupt_and_serve
        self.serve_progress = os.path.join(work, "serve.progress")
        self.procs["serve"] = self.streamer(args, self.images, "serve", self.serve_progress)
        self.procs["extract"] = self.streamer(args, self.side, "extract", os.path.join(work, "extract.progress"))
        self.copier = threading.Thread(target=self.copy, daemon=True)
        self.copier.start()

    def streamer(self, args, images, op, progress):
        with open(progress, "w") as pf, open(os.path.join(self.work, f"{op}.err"), "w") as err:
            return subprocess.Popen([args.streamer_bin, "--images-dir", images, "--progress-fd", str(pf.fileno()),
                                     op], stdin=subprocess.PIPE, stderr=err, pass_fds=[pf.fileno()])

    def copy(self):
        src = self.procs["zstd -d"].stdout
        outs = [self.procs["serve"].stdin, self.procs["extract"].stdin]
        try:
            while True:
                buf = src.read1(CHUNK)
                if not buf:
                    break
                for o in outs:
                    o.write(buf)
        except OSError as e:  # serve or extract ended early: their stderr says why
            self.copy_error = str(e)
        for o in outs:
            try:
                o.close()
            except OSError:
                pass

    def corrupt_and_serve(self):
        """checksum-mismatch: the kept stream extracted, one byte of the
        largest amdgpu-pages file's contents flipped in it, then served."""
        for name in ("relay", "zstd -d"):
            expect(self.procs[name].wait(timeout=60) == 0, f"node B: {name} failed")
        with open(self.kept, "rb") as f:
            stream = bytearray(f.read())
        self.feed("extract", self.side, stream)
        expect(self.procs["extract"].wait(timeout=60) == 0 and not streamer_errors(self.work, "extract"),
               f"extract: {streamer_errors(self.work, 'extract')}")
        pages = glob.glob(os.path.join(self.side, "amdgpu-pages-*.img"))
        expect(pages, f"no amdgpu-pages file in the stream: {sorted(os.listdir(self.side))}")
        victim = max(pages, key=os.path.getsize)
        with open(victim, "rb") as f:
            data = f.read()
        window = data[len(data) // 2:len(data) // 2 + 64]
        at = stream.find(window)
        expect(at >= 0 and stream.find(window, at + 1) < 0, f"the window of {victim} is not once in the stream")
        stream[at + 32] ^= 0x40
        log(f"node B: flipped the byte at stream offset {at + 32}, byte {len(data) // 2 + 32} of "
            f"{os.path.basename(victim)} ({len(data)} bytes)")
        with open(os.path.join(self.work, "victim"), "w") as f:
            f.write(os.path.basename(victim))
        self.feed("serve", self.images, stream)

    def feed(self, op, images, stream):
        progress = os.path.join(self.work, f"{op}.progress")
        self.procs[op] = self.streamer(self.args, images, op, progress)
        try:
            self.procs[op].stdin.write(stream)
        finally:
            self.procs[op].stdin.close()

    def wire_bytes(self):
        with open(self.count_file) as f:
            return int(f.read())

    def stream_in(self, images_a):
        """After the dump: waits for the stream's end; the adapter's files
        into node B's image directory."""
        if self.kept:
            self.corrupt_and_serve()
        for name in ("relay", "zstd -d", "extract"):
            rc_ = self.procs[name].wait(timeout=60)
            expect(rc_ == 0, f"node B: {name} exited {rc_}")
        if self.copier:
            self.copier.join(timeout=60)
        expect(not self.copy_error, f"node B: the stream could not be handed on: {self.copy_error} "
               f"(serve: {streamer_errors(self.work, 'serve')}, extract: {streamer_errors(self.work, 'extract')})")
        expect(not streamer_errors(self.work, "extract"), f"extract: {streamer_errors(self.work, 'extract')}")
        mms = glob.glob(os.path.join(self.side, "mm-*.img"))
        expect(mms, f"node B: no mm-*.img in the extracted stream: {sorted(os.listdir(self.side))}")
        for f in mms + [os.path.join(images_a, "kfdemu-adapter.img")]:
            shutil.copy(f, self.images)
        log(f"node B: stream received ({self.wire_bytes()} bytes on the wire), extracted "
            f"{len(os.listdir(self.side))} files beside; copied {[os.path.basename(f) for f in mms]} and "
            f"kfdemu-adapter.img for the emulator's adapter")

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def streamer_errors(work, op):
    """criu-image-streamer exits 0 after an error too: its stderr says."""
    try:
        with open(os.path.join(work, f"{op}.err")) as f:
            return [ln.strip() for ln in f if "Error" in ln]
    except OSError:
        return []


# --------------------------------------------------------------------------
# Node A's end, in the phases
# --------------------------------------------------------------------------

class StreamRun(rc.Run):
    """realcriu_test's Run with `criu --stream` through the real streamer:
    capture | zstd -1 | relay to node B at dump; node B's serve at restore."""

    def __init__(self, args, criu, work):
        super().__init__(args, criu, work)
        self.stream = True
        self.env["KFD_MAX_BUFFER_SIZE"] = str(rc.STREAM_BOUND)
        self.pipeline = []
        self.captured = None

    def start_streamer(self, mode):
        if mode == "serve":
            progress = os.path.join(self.work, "serve.progress")
            ok = rc.wait_for(lambda: "socket-init" in read_text(progress), 60, "node B's serve")
            expect(ok, f"node B's serve did not listen: {streamer_errors(self.work, 'serve')}")
            return
        r, w = os.pipe()
        err = open(os.path.join(self.work, "capture.err"), "w")
        cap = subprocess.Popen([self.args.streamer_bin, "--images-dir", self.images, "--progress-fd", str(w),
                                "capture"], stdout=subprocess.PIPE, stderr=err, pass_fds=[w])
        os.close(w)
        err.close()
        z = subprocess.Popen(["zstd", "-1", "-q", "-c"], stdin=cap.stdout, stdout=subprocess.PIPE)
        cap.stdout.close()
        send = ["ip", "netns", "exec", self.args.node_a] + \
            harness.self_command(__file__, "--relay", "send", "--relay-addr", Nodes.B_ADDR)
        snd = subprocess.Popen(send, stdin=z.stdout)
        z.stdout.close()
        self.pipeline = [("capture", cap), ("zstd -1", z), ("relay send", snd)]
        self.progress = os.fdopen(r)
        self.criu_span = [time.monotonic()]
        line = self.progress.readline().strip()
        expect(line == "socket-init", f"capture did not start: {line!r} {streamer_errors(self.work, 'capture')}",
               False)

    def end_streamer(self, criu_rc):
        if not self.pipeline:
            return
        self.criu_span.append(time.monotonic())  # CRIU has ended
        codes = {}
        for name, p in self.pipeline:
            try:
                codes[name] = p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[name] = "hang"
        self.pipeline = []
        rest = self.progress.read().split()
        self.progress.close()
        stats = [json.loads(x) for x in rest if x.startswith("{")]
        errs = streamer_errors(self.work, "capture")
        log(f"node A's pipeline: exits {codes}, capture progress {rest}, errors {errs}")
        if criu_rc == 0:
            expect(all(c == 0 for c in codes.values()) and not errs and stats,
                   f"the pipeline failed ({codes}, {errs}) while CRIU succeeded", False)
            self.captured = sum(s["size"] for s in stats[-1]["shards"])

    def cleanup(self):
        for _, p in self.pipeline:
            if p.poll() is None:
                p.kill()
            p.wait()
        super().cleanup()


def no_files_of_ours(images, what):
    names = sorted(os.listdir(images))
    expect(not [n for n in names if rc.OURS.fullmatch(n) or ".tmp-" in n], f"{what}: plugin files on disk: {names}")


def file_dump_parent(run, pid):
    """migrate-parent: a file dump of pid into WORK/ckpt-1, the process
    left running; its plugin files (hard links in WORK/ckpt-1.gpu) become
    the `parent` of the streamed dump's image directory."""
    streamed = run.images
    run.images, run.stream = os.path.join(run.work, "ckpt-1"), False
    os.makedirs(run.images)
    try:
        rc_ = run.criu_run("dump", ["-t", str(pid), "--leave-running"], "dump.log")
    finally:
        run.images, run.stream = streamed, True
    expect(rc_ == 0, f"the file dump into ckpt-1 failed ({rc_})", False)
    gdir = os.path.join(run.work, "ckpt-1.gpu")
    os.makedirs(gdir)
    for f in glob.glob(os.path.join(run.work, "ckpt-1", "amdgpu-*.img")):
        os.link(f, os.path.join(gdir, os.path.basename(f)))
    os.symlink("../ckpt-1.gpu", os.path.join(streamed, "parent"))
    log(f"file dump into ckpt-1 (left running); parent of the streamed dump: {sorted(os.listdir(gdir))}")


def mismatch_restore(run, state_file):
    with open(state_file) as f:
        pid = json.load(f)["before"]["pid"]
    with open(os.path.join(run.work, "victim")) as f:
        victim = f.read()
    rc_ = run.criu_run("restore", ["-d", "--pidfile", os.path.join(run.work, "restored.pid")], "restore.log")
    expect(rc_ != 0, "criu restore succeeded from a stream with a flipped byte in a pages file")
    errs = rc.plugin_errors(os.path.join(run.images, "restore.log"))
    log(f"restore failed ({rc_}); the plugin's errors: {errs[:3]}")
    expect(any(victim in e and "checksum" in e for e in errs), f"no error of the plugin naming {victim}'s checksum")
    expect(rc.wait_for(lambda: not rc.alive(pid), 5), f"a process {pid} is alive after the failed restore")
    left = rc.reap_children()
    expect(not left, f"processes left after the failed restore: {left}")
    expect(rc.wait_for(lambda: run.emu.process(pid) is None, 5), f"the model still has process {pid}")
    log(f"no process {pid} left (system and model)")


def parent_aborts(run):
    (d, pid), = run.start()
    file_dump_parent(run, pid)
    before = rc.snapshot(run.emu, pid)
    rc_ = run.criu_run("dump", ["-t", str(pid)], "dump.log")
    expect(rc_ != 0, "the streamed dump beside a parent succeeded (CRIU aborted it so far: see the header)", False)
    bug = re.search(r"Error \(criu/img-streamer\.c:\d+\): BUG at criu/img-streamer\.c:\d+",
                    read_text(os.path.join(run.images, "dump.log")))
    expect(bug, f"the dump failed ({rc_}) otherwise than at CRIU's img-streamer BUG", False)
    log(f"streamed dump beside a parent: CRIU ended {rc_}: {bug.group(0)}")
    expect(not (still := rc.guardians_left()), f"guardians left: {still}")
    no_files_of_ours(run.images, "after the aborted dump")
    rc.check_running(run.emu, pid, before, "after the aborted dump")
    run.verdicts([(d, pid)])


def migrate_dump(run, state_file):
    (d, pid), = run.start()
    before = rc.snapshot(run.emu, pid)
    t0 = time.monotonic()
    run.dump([pid])
    took = time.monotonic() - t0
    no_files_of_ours(run.images, "node A after the dump")
    bos = [b for b in before["bos"] if b["type"] in ("vram", "gtt")]
    expect(max(b["size"] for b in bos) > rc.STREAM_BOUND, "no BO larger than KFD_MAX_BUFFER_SIZE")
    peak = run.emu.ctl("userptr", run.criu_pids["dump"])["peak"]
    expect(0 < peak <= rc.STREAM_BOUND, f"dump staging peak {peak} bytes, bound {rc.STREAM_BOUND}")
    criu_s = run.criu_span[1] - run.criu_span[0]
    log(f"node A: dumped {pid} in {took:.2f}s (CRIU {criu_s:.2f}s; {len(before['bos'])} BOs), {run.captured} bytes "
        f"captured, staging peak {peak} bytes")
    with open(state_file, "w") as f:
        json.dump({"dir": d, "before": before, "captured": run.captured, "criu_span": run.criu_span}, f)


def migrate_restore(run, state_file):
    with open(state_file) as f:
        st = json.load(f)
    before, pid = st["before"], st["before"]["pid"]
    plan = rc.OTHER_MACHINE[run.args.machine]
    t0 = time.monotonic()
    run.restore(pid)
    log(f"node B: restored {pid} in {time.monotonic() - t0:.2f}s")
    text = read_text(os.path.join(run.images, "restore.log"))
    sums = [int(x) for x in RESTORE_CHECKSUMS.findall(text)]
    contents = sum(b["size"] for b in before["bos"] if b["type"] in ("vram", "gtt"))
    expect(sums and sum(sums) > 0, f"no 'checksums matched' summary in restore.log: {sums}")
    peaks = [int(x) for x in RESTORE_PEAKS.findall(text)]
    expect(peaks and 0 < max(peaks) <= rc.STREAM_BOUND, f"restore staging peaks {peaks}, bound {rc.STREAM_BOUND}")
    log(f"node B: checksums matched for {sums} bytes (its VRAM and GTT BOs hold {contents}), staging peaks {peaks}")
    no_files_of_ours(run.images, "node B after the restore")
    rc.check_restored(run.emu, pid, before, gpus=plan["gpus"], minors=plan["minors"])
    run.verdicts([(st["dir"], pid)])


def reader_dies(run):
    (d, pid), = run.start()
    before = rc.snapshot(run.emu, pid)
    rc_ = run.criu_run("dump", ["-t", str(pid)], "dump.log")
    expect(rc_ != 0, "criu dump succeeded although node B's reader died", False)
    text = read_text(os.path.join(run.images, "dump.log"))
    errs = rc.plugin_errors(os.path.join(run.images, "dump.log"))
    log(f"dump failed ({rc_}) as the reader died; the plugin's errors: {errs[:3]}")
    expect(any(re.search(r"amdgpu-(pages|drm-pages|kfd|renderD)-[^ ]*\.img", e) for e in errs),
           f"no error of the plugin naming its file: {errs[:5]} / {text[-2000:]}")
    expect(not (still := rc.guardians_left()), f"guardians left: {still}")
    expect(not rc.temp_files(run.images), f"temporary files left: {rc.temp_files(run.images)}")
    no_files_of_ours(run.images, "node A after the failed dump")
    rc.check_running(run.emu, pid, before, "after the failed dump")
    run.verdicts([(d, pid)])


def dmabuf_refused(run):
    os.makedirs(run.images, exist_ok=True)
    with open(os.path.join(run.work, "workload.log"), "w") as out:
        run.wl = subprocess.Popen([run.args.workload, "--dir", run.work, "--root", "holder"],
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    readies = [os.path.join(run.work, "ready." + r) for r in rc.DMABUF_ROLES]
    expect(rc.wait_for(lambda: all(map(os.path.exists, readies)) or run.wl.poll() is not None, 60,
                       "the workload") and run.wl.poll() is None, "the dma-buf tree did not start", False)
    pids = rc.task_tree(run.wl.pid)
    rc_ = run.criu_run("dump", ["-t", str(pids[0])], "dump.log")
    expect(rc_ != 0, "criu dump --stream of shared dma-buf BOs succeeded (the plugin refuses them)", False)
    text = read_text(os.path.join(run.images, "dump.log"))
    m = DMABUF_REFUSAL.search(text)
    errs = rc.plugin_errors(os.path.join(run.images, "dump.log"))
    expect(m, f"the dump failed ({rc_}) without the plugin's refusal: {errs[:5]}")
    log(f"dump refused ({rc_}): {m.group(0)}")
    expect(not (still := rc.guardians_left()), f"guardians left: {still}")
    no_files_of_ours(run.images, "after the refused dump")
    open(os.path.join(run.work, "go"), "w").close()
    results = [os.path.join(run.work, "result." + r) for r in rc.DMABUF_ROLES]
    rc.wait_for(lambda: all(map(os.path.exists, results)), 60, "the tree's verdicts")
    verdicts = {r: (open(f).read().strip() if os.path.exists(f) else "(no result)")
                for r, f in zip(rc.DMABUF_ROLES, results)}
    log(f"verdicts after the refused dump: {verdicts}")
    expect(all(v == "OK" for v in verdicts.values()), f"the tree after the refused dump: {verdicts}")


def inside(args, criu):
    harness.become_subreaper()
    if args.scenario in ("reader-dies", "migrate-stall"):
        os.environ["KFDEMU_WORKLOAD_VRAM_MIB"] = str(DIES_VRAM_MIB if args.scenario == "reader-dies" else STALL_VRAM_MIB)
    run = StreamRun(args, criu, args.work)
    try:
        if args.phase == "dump":
            migrate_dump(run, os.path.join(args.work, "state.json"))
        elif args.phase == "restore" and args.scenario == "checksum-mismatch":
            mismatch_restore(run, os.path.join(args.work, "state.json"))
        elif args.phase == "restore":
            migrate_restore(run, os.path.join(args.work, "state.json"))
        elif args.scenario == "reader-dies":
            reader_dies(run)
        elif args.scenario == "parent-aborts":
            parent_aborts(run)
        else:
            dmabuf_refused(run)
    finally:
        run.cleanup()


# --------------------------------------------------------------------------
# The outer run
# --------------------------------------------------------------------------

def find_streamer(args):
    path = args.streamer_bin or os.environ.get("AMDCR_STREAMER_BIN", "") or shutil.which(STREAMER) or ""
    if not path:
        raise harness.NotRun(NO_STREAMER)
    if not os.access(path, os.X_OK):
        raise harness.NotRun(f"{path} (the streamer named) is not an executable file")
    for tool in ("zstd", "ip"):
        if not shutil.which(tool):
            raise harness.NotRun(f"no {tool} (scripts/install-deps.sh installs it)")
    return os.path.abspath(path)


def migrate(args, me, work, nodes):
    plan = rc.OTHER_MACHINE[args.machine]
    stall = STALL_AFTER if args.scenario == "migrate-stall" else 0
    recv = Receiver(args, nodes, work, stall_after=stall, keep=args.scenario == "checksum-mismatch")
    root = harness.machine_root("kfdemu-stream-root.")
    try:
        images_a = os.path.join(work, "images-a")
        log(f"first machine (node A): {' '.join(plan['first'])}")
        emu = [args.kfd_emu, "--root", root, "--machine", args.machine]
        rc_ = subprocess.run(emu + plan["first"] + ["--"] + me + ["--phase", "dump", "--images-dir", images_a]
                             ).returncode
        if rc_ != 0:
            return rc_
        recv.stream_in(images_a)
        with open(os.path.join(work, "state.json")) as f:
            st = json.load(f)
        wire = recv.wire_bytes()
        expect(0 < wire < st["captured"], f"{wire} bytes on the wire for {st['captured']} captured (zstd -1)")
        if stall:
            with open(recv.count_file + ".stall") as f:
                span = json.load(f)
            c0, c1 = st["criu_span"]
            log(f"node B's reader stalled {span[0] - c0:.2f}s to {span[1] - c0:.2f}s into CRIU's dump of {c1 - c0:.2f}s")
            expect(c0 < span[0] and span[1] < c1, "the stall did not fall within CRIU's dump")
        log(f"second machine (node B): {' '.join(plan['second'])}")
        rc_ = subprocess.run(emu + plan["second"] + ["--"] + me + ["--phase", "restore", "--images-dir", recv.images]
                             ).returncode
        serve = recv.procs["serve"].wait(timeout=30)
        errs = streamer_errors(work, "serve")
        log(f"serve: exit {serve}, errors {errs}; {st['captured']} bytes captured, {wire} on the wire "
            f"({wire / st['captured']:.3f})")
        # checksum-mismatch: the plugin stops reading the damaged file, so
        # serve's write into CRIU's pipe fails (EPIPE), as it must.
        expect(rc_ != 0 or args.scenario == "checksum-mismatch" or (serve == 0 and not errs),
               f"serve failed ({serve}, {errs}) while the restore passed")
        return rc_
    finally:
        recv.close()
        shutil.rmtree(root, ignore_errors=True)


def outer(args, criu, work, nodes):
    me = harness.self_command(__file__, "--criu", criu, "--work", work, "--node-a", nodes.a,
                              "--streamer-bin", args.streamer_bin)
    if args.scenario.startswith("migrate") or args.scenario == "checksum-mismatch":
        return migrate(args, me, work, nodes)
    recv = Receiver(args, nodes, work, die_after=DIE_AFTER) if args.scenario == "reader-dies" else \
        Receiver(args, nodes, work)
    try:
        return subprocess.run([args.kfd_emu, "--machine", args.machine, "--"] + me +
                              ["--phase", "all", "--images-dir", os.path.join(work, "images-a")]).returncode
    finally:
        recv.close()


def main():
    ap = argparse.ArgumentParser()
    rc.add_run_args(ap, required=False)
    ap.add_argument("--scenario", default="migrate", choices=["migrate", "migrate-stall", "parent-aborts",
                                                              "checksum-mismatch", "reader-dies", "dmabuf-refused"])
    ap.add_argument("--streamer-bin", default="", help=f"the {STREAMER} binary (else $AMDCR_STREAMER_BIN, PATH)")
    ap.add_argument("--images-dir", default="", help=argparse.SUPPRESS)
    ap.add_argument("--node-a", default="", help=argparse.SUPPRESS)
    ap.add_argument("--relay", default="", choices=["", "send", "recv"], help=argparse.SUPPRESS)
    ap.add_argument("--relay-addr", default=Nodes.B_ADDR, help=argparse.SUPPRESS)
    ap.add_argument("--stall-after", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--die-after", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.interop = ""  # realcriu_test's Run reads these
    args.upstream_so = ""

    if args.relay == "send":
        relay_send(args.relay_addr, PORT)
        sys.exit(0)
    if args.relay == "recv":
        relay_recv(Nodes.B_ADDR, PORT, os.path.join(args.work, "wire-bytes"), args.stall_after, args.die_after)
        sys.exit(0)
    if args.phase:
        harness.run_phase(lambda: inside(args, args.criu))

    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    with harness.not_run():
        criu = realcriu.require_criu(args, own_run=True)
        args.streamer_bin = find_streamer(args)
        if os.geteuid() != 0:
            raise harness.NotRun("not root (network namespaces, CRIU)")
    work = harness.work_dir("kfdemu-stream.")
    log(f"CRIU {criu}, streamer {args.streamer_bin}, machine {args.machine}, scenario {args.scenario}, work {work}")
    with harness.not_run():
        nodes = Nodes(os.getpid() % 100000)
    try:
        rc_ = outer(args, criu, work, nodes)
    except Failure as e:
        log(f"FAIL: {e}")
        rc_ = 1
    finally:
        nodes.close()
    harness.finish(rc_ == 0, work, args.keep)


if __name__ == "__main__":
    main()
