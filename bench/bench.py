#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Benchmarks of the plugin's data path on the emulated GPU (not a test).

    python3 bench/bench.py --bin-dir build [--quick] [--integrity-only]

Prints one table. Every limit is measured in the same run, on the same
machine, in the same directory:
  - storage limit: a plain sequential write (read) of the same number of
    bytes, 8 MiB at a time, to (from) a file in the image directory's file
    system, without fsync, as the plugin writes its pages files;
  - SDMA limit: the emulator's bandwidth model (kfd-emu --sdma-gbps, per
    engine; one engine per GPU is used), set near the storage speed so that
    copy and I/O take about as long each: where pipelining matters most.
Throughput of the plugin = bytes copied / duration of the per-GPU jobs
(imports, DMA and file I/O), from the plugin's own per-GPU summary lines
(GPUs run in parallel: the slowest one's time). Page-cache speed varies a
lot on a shared VM, so each repetition measures its own limits right
before its dump and the table gives the median ratio of 3 repetitions
(--quick: 1), every repetition listed. The emulated SDMA is a CPU copy: on
a machine with few cores, limits above what the cores can copy alongside
the file I/O cannot be reached (see the per-repetition rows). Peak RSS = ru_maxrss of the dumping process (criu-host with
the plugin), minus that of a dump of a tiny workload (the fixed cost).

Parallel restore (issue 11 part 4, issue 14): the same checkpoint restored
with KFD_PARALLEL_RESTORE=0 (each task copies its own GPU memory in its
RESTORE_EXT_FILE) and =1 (CRIU's main process copies it while the tasks go
on), alternately, median of the repetitions: copy throughput against
min(storage read, SDMA) measured in the same repetition, and the host's
whole restore time. Under criu-host the tasks have little else to restore,
so the whole-restore times show the cost of the hand-over, not the overlap
with CRIU's own work (memory pages), which only real CRIU has.
(--parallel-only: only these rows.)

Integrity and sparse files (issue 13): dump and restore throughput with
checksums (the default) against KFD_VERIFY=0 (none computed or checked),
the same workload back to back, median ratio of the repetitions; and one
BO of the full size left zero (gpu-workload --zero) against a random one
on one GPU: dump time (whole per-GPU job) and the pages file's allocated
disk blocks (st_blocks), and the restore time of each.
"""
import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import e2e  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30


def storage_limits(directory, nbytes):
    """(write GB/s, read GB/s) of a plain sequential file of nbytes."""
    path = os.path.join(directory, "storage-probe")
    block = b"\xa5" * (8 * MiB)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    t0 = time.time()
    done = 0
    while done < nbytes:
        done += os.write(fd, block[:min(len(block), nbytes - done)])
    os.close(fd)
    wt = time.time() - t0
    fd = os.open(path, os.O_RDONLY)
    t0 = time.time()
    while os.read(fd, 8 * MiB):
        pass
    os.close(fd)
    rt = time.time() - t0
    os.unlink(path)
    return nbytes / wt / 1e9, nbytes / rt / 1e9


class Table:
    def __init__(self):
        self.rows = []

    def add(self, what, value, limit="", ratio="", target="", verdict=""):
        self.rows.append((what, value, limit, ratio, target, verdict))

    def show(self):
        head = ("measure", "value", "limit", "ratio", "target", "")
        widths = [max(len(str(r[i])) for r in self.rows + [head]) for i in range(6)]
        for r in [head] + self.rows:
            print("  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip())


def verdict(ok):
    return "met" if ok else "NOT MET"


def drop(*steps):
    """Deletes what the steps left on disk (images of several GiB)."""
    for st in steps:
        shutil.rmtree(st["state"], ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--quick", action="store_true", help="1 GiB instead of 4 GiB, fewer small BOs")
    ap.add_argument("--integrity-only", action="store_true", help="only the checksum and sparse-file rows")
    ap.add_argument("--parallel-only", action="store_true", help="only the parallel restore rows")
    ap.add_argument("--reps", type=int, help="repetitions of --parallel-only (default 3, --quick 1)")
    args = ap.parse_args()
    e2e.ARGS = argparse.Namespace(bin_dir=os.path.abspath(args.bin_dir))
    bins = e2e.Bins(e2e.ARGS.bin_dir)
    scratch = tempfile.mkdtemp(prefix="amdcr-bench-", dir=os.environ.get("AMDCR_E2E_TMP"))
    run = e2e.Run(bins, scratch)
    try:
        return measure(args, run, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args, run, scratch):
    table = Table()
    total = (1 if args.quick else 4) * GiB
    per_gpu = total // 2
    if args.parallel_only:
        parallel_restore(run, table, scratch, total, args.reps or (1 if args.quick else 3))
        print()
        table.show()
        return 0
    if args.integrity_only:
        integrity_and_sparse(args, run, table, total, 1 if args.quick else 3)
        print()
        table.show()
        return 0

    # -- dump and restore throughput ----------------------------------------
    # Page-cache write speed varies a lot from one moment to the next on a
    # shared VM, so each repetition measures its own limits right before
    # its dump, sets the SDMA model from them, and the table gives the
    # median ratio (each repetition listed below it).
    half = "%dM" % (per_gpu // MiB // 2)
    reps = 1 if args.quick else 3
    dump_rows, restore_rows = [], []
    machine = None
    for rep in range(reps):
        w_gbps, r_gbps = storage_limits(scratch, total)
        engine_gbps = round(w_gbps / 2, 2)  # two GPUs copy in parallel
        sdma_gbps = 2 * engine_gbps
        machine = ["--machine", "2xMI210", "--sdma-gbps", str(engine_gbps)]
        print("bench: rep %d: %.2f GiB over 2 emulated GPUs; storage write %.2f GB/s, read %.2f GB/s; "
              "SDMA model %.2f GB/s per engine; %d CPUs" %
              (rep + 1, total / GiB, w_gbps, r_gbps, engine_gbps, os.cpu_count()), flush=True)
        d = run.dump(machine, ["--vram", "%s,%s" % (half, half), "--gtt", ""], skip_checks=True)
        e2e.check(d["rc"] == 0, "dump failed:\n" + d["log"][-2000:])
        b, s, _ = e2e.copy_summary(d["log"], "dumped")
        lim = min(w_gbps, sdma_gbps)
        dump_rows.append((b / s / 1e9, lim, w_gbps, sdma_gbps, d["seconds"], b))
        r = run.restore(machine, d)
        e2e.check(r["rc"] == 0, "restore failed:\n" + r["log"][-2000:])
        b, s, _ = e2e.copy_summary(r["log"], "restored")
        lim = min(r_gbps, sdma_gbps)
        restore_rows.append((b / s / 1e9, lim, r_gbps, bool(e2e.verified_tasks(r["log"])), b))
        drop(d, r)  # 4 GiB of images per repetition

    def median_row(rows):
        return sorted(rows, key=lambda x: x[0] / x[1])[len(rows) // 2]

    thr, lim, w, sd, secs, b = median_row(dump_rows)
    table.add("dump %.2f GiB, 2 GPUs (median of %d)" % (b / GiB, reps), "%.2f GB/s" % thr, "%.2f GB/s" % lim,
              "%.2f" % (thr / lim), ">= 0.90", verdict(thr / lim >= 0.9))
    for i, (t, l, w, sd, secs, _) in enumerate(dump_rows):
        table.add("  rep %d: storage %.2f, SDMA %.2f GB/s; dump wall %.2f s" % (i + 1, w, sd, secs),
                  "%.2f GB/s" % t, "%.2f GB/s" % l, "%.2f" % (t / l))
    thr, lim, rd, ok, b = median_row(restore_rows)
    table.add("restore %.2f GiB, 2 GPUs (median of %d)" % (b / GiB, reps), "%.2f GB/s" % thr,
              "%.2f GB/s" % lim, "%.2f" % (thr / lim), ">= 0.90", verdict(thr / lim >= 0.9))
    for i, (t, l, rd, ok, _) in enumerate(restore_rows):
        table.add("  rep %d: read %.2f GB/s; verified in the restored task: %s" % (i + 1, rd, "yes" if ok else "NO"),
                  "%.2f GB/s" % t, "%.2f GB/s" % l, "%.2f" % (t / l))
    engine_gbps = float(machine[-1])

    # -- memory -------------------------------------------------------------
    base = run.dump(machine, ["--vram", "4K", "--gtt", ""], skip_checks=True)
    e2e.check(base["rc"] == 0, "baseline dump failed")
    base_rss = base["host_maxrss"]
    rss_work = ["--vram", "256M,256M", "--gtt", ""]
    for bound in ["16M", "64M", "256M", None]:
        env = {"KFD_MAX_BUFFER_SIZE": bound} if bound else {}
        m = run.dump(machine, rss_work, env=env, skip_checks=True)
        e2e.check(m["rc"] == 0, "dump with KFD_MAX_BUFFER_SIZE=%s failed" % bound)
        drop(m)
        extra = m["host_maxrss"] - base_rss
        allowed = (int(bound[:-1]) * MiB if bound else 2 * 64 * MiB) + 32 * MiB
        mb, ms, mpeak = e2e.copy_summary(m["log"], "dumped")
        table.add("peak extra RSS, KFD_MAX_BUFFER_SIZE=%s" % (bound or "unset (64M/GPU)"),
                  "%.1f MiB" % (extra / MiB), "%.0f MiB" % (allowed / MiB), "%.2f" % (extra / allowed),
                  "<= 1.00", verdict(extra <= allowed))
        table.add("  throughput at that bound", "%.2f GB/s" % (mb / ms / 1e9))

    # -- many small BOs -----------------------------------------------------
    # The emulator's daemon holds one fd per BO, and a second while it
    # installs the dma-bufs of a CHECKPOINT (the kernel has no such cost):
    # with a low hard fd limit (no CAP_SYS_RESOURCE to raise it), use the
    # largest power of two that fits, and say so.
    wanted = 4096 if args.quick else 16384
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nsmall = wanted
    while nsmall > 1024 and hard != resource.RLIM_INFINITY and 2 * nsmall + 4096 > hard:
        nsmall //= 2
    if nsmall != wanted:
        print("bench: %d small BOs instead of %d: the fd hard limit is %d and the emulator needs "
              "2 fds per BO during CHECKPOINT" % (nsmall, wanted, hard), flush=True)
    one = ["--machine", "MI100", "--sdma-gbps", str(engine_gbps)]
    pairs = []
    for rep in range(reps):
        big = run.dump(one, ["--vram", "%dM" % (nsmall * 64 // 1024), "--gtt", ""], skip_checks=True)
        e2e.check(big["rc"] == 0, "large-BO dump failed")
        small = run.dump(one, ["--vram", "64Kx%d" % nsmall, "--gtt", "", "--no-queues"], skip_checks=True)
        e2e.check(small["rc"] == 0, "small-BO dump failed:\n" + small["log"][-2000:])
        drop(big)
        bb, bs, _ = e2e.copy_summary(big["log"], "dumped")
        sb, ss, _ = e2e.copy_summary(small["log"], "dumped")
        pairs.append((sb / ss / 1e9, bb / bs / 1e9, small))
    pairs.sort(key=lambda p: p[0] / p[1])
    s_gbps, b_gbps, small = pairs[len(pairs) // 2]
    ratio = s_gbps / b_gbps
    table.add("%d x 64 KiB vs 1 x %d MiB BO (median of %d)" % (nsmall, nsmall * 64 // 1024, reps),
              "%.2f vs %.2f GB/s" % (s_gbps, b_gbps), "", "%.2f" % ratio, ">= 0.70", verdict(ratio >= 0.7))
    for i, (sg, bg, _) in enumerate(pairs):
        table.add("  pair %d (sorted by ratio)" % (i + 1), "%.2f vs %.2f GB/s" % (sg, bg), "", "%.2f" % (sg / bg))
    before, after = small["counters_before"]["ioctls"], small["counters"]["ioctls"]
    n = sum(after.values()) - sum(before.values())
    table.add("  ioctls per BO during that dump", "%.2f" % (n / nsmall))
    subs = [l for l in small["log"].splitlines() if "submissions" in l]
    if subs:
        table.add("  SDMA submissions", subs[-1].split(",")[-1].strip())

    integrity_and_sparse(args, run, table, total, reps)
    parallel_restore(run, table, scratch, total, reps)

    print()
    table.show()
    print("\n(limits and values measured in this run)")
    return 0


def pages_blocks(step):
    """(allocated bytes, apparent bytes) of a dump's pages files."""
    d = os.path.join(step["state"], "images")
    alloc = size = 0
    for n in os.listdir(d):
        if n.startswith("amdgpu-pages-"):
            st = os.stat(os.path.join(d, n))
            alloc += st.st_blocks * 512
            size += st.st_size
    return alloc, size


def integrity_and_sparse(args, run, table, total, reps):
    half = "%dM" % (total // 2 // MiB // 2)
    machine = ["--machine", "2xMI210"]
    work = ["--vram", "%s,%s" % (half, half), "--gtt", ""]
    dumps, restores = [], []
    for rep in range(reps):
        runs = {}
        for verify in ("1", "0"):
            d = run.dump(machine, work, env={"KFD_VERIFY": verify}, skip_checks=True)
            e2e.check(d["rc"] == 0, "dump (KFD_VERIFY=%s) failed:\n%s" % (verify, d["log"][-2000:]))
            b, s, _ = e2e.copy_summary(d["log"], "dumped")
            r = run.restore(machine, d, env={"KFD_VERIFY": verify})
            e2e.check(r["rc"] == 0, "restore (KFD_VERIFY=%s) failed:\n%s" % (verify, r["log"][-2000:]))
            rb, rs, _ = e2e.copy_summary(r["log"], "restored")
            runs[verify] = (b / s / 1e9, rb / rs / 1e9)
            drop(d, r)
        dumps.append((runs["1"][0], runs["0"][0]))
        restores.append((runs["1"][1], runs["0"][1]))
    for what, rows in (("dump", dumps), ("restore", restores)):
        rows.sort(key=lambda p: p[0] / p[1])
        w, wo = rows[len(rows) // 2]
        table.add("%s with checksums vs KFD_VERIFY=0, %.2f GiB (median of %d)" % (what, total / GiB, reps),
                  "%.2f vs %.2f GB/s" % (w, wo), "", "%.2f" % (w / wo), ">= 0.95", verdict(w / wo >= 0.95))
        for i, (a, b) in enumerate(rows):
            table.add("  pair %d (sorted by ratio)" % (i + 1), "%.2f vs %.2f GB/s" % (a, b), "", "%.2f" % (a / b))

    # Sparse: one BO of `total` bytes on one GPU, zero vs random.
    one = ["--machine", "MI100"]
    size = "%dM" % (total // MiB)
    res = {}
    for kind, extra in (("random", []), ("zero", ["--zero"])):
        d = run.dump(one, ["--vram", size, "--gtt", ""] + extra, skip_checks=True)
        e2e.check(d["rc"] == 0, "%s dump failed:\n%s" % (kind, d["log"][-2000:]))
        b, s, _ = e2e.copy_summary(d["log"], "dumped")
        alloc, apparent = pages_blocks(d)
        r = run.restore(one, d, verify=False)
        e2e.check(r["rc"] == 0, "%s restore failed:\n%s" % (kind, r["log"][-2000:]))
        rb, rs, _ = e2e.copy_summary(r["log"], "restored")
        res[kind] = (s, alloc, apparent, rs)
        drop(d, r)
    (rs_, ra, rap, rr), (zs, za, zap, zr) = res["random"], res["zero"]
    table.add("zero-filled %.0f GiB BO: dump time vs a random one" % (total / GiB), "%.2f vs %.2f s" % (zs, rs_),
              "", "%.3f" % (zs / rs_), "<= 0.10", verdict(zs / rs_ <= 0.10))
    table.add("  its pages file: allocated vs the random one's", "%.1f vs %.1f MiB" % (za / MiB, ra / MiB),
              "%.0f MiB apparent" % (zap / MiB), "%.4f" % (za / ra), "<= 0.01", verdict(za / ra <= 0.01))
    table.add("  restore time, zero vs random", "%.2f vs %.2f s" % (zr, rr), "", "%.2f" % (zr / rr))


def parallel_restore(run, table, scratch, total, reps):
    """Serial (KFD_PARALLEL_RESTORE=0) against parallel restore of one
    2-GPU checkpoint of `total` bytes (see the header)."""
    per_gpu = total // 2
    half = "%dM" % (per_gpu // MiB // 2)
    rows = {"0": [], "1": []}
    for rep in range(reps):
        w_gbps, r_gbps = storage_limits(scratch, total)
        engine_gbps = round(w_gbps / 2, 2)
        sdma_gbps = 2 * engine_gbps
        machine = ["--machine", "2xMI210", "--sdma-gbps", str(engine_gbps)]
        print("bench: parallel restore rep %d: storage read %.2f GB/s, SDMA model %.2f GB/s per engine" %
              (rep + 1, r_gbps, engine_gbps), flush=True)
        d = run.dump(machine, ["--vram", "%s,%s" % (half, half), "--gtt", ""], skip_checks=True)
        e2e.check(d["rc"] == 0, "dump failed:\n" + d["log"][-2000:])
        order = ["0", "1"] if rep % 2 == 0 else ["1", "0"]
        for mode in order:
            r = run.restore(machine, d, env={"KFD_PARALLEL_RESTORE": mode})
            e2e.check(r["rc"] == 0 and e2e.verified_tasks(r["log"]),
                      "restore (KFD_PARALLEL_RESTORE=%s) failed:\n%s" % (mode, r["log"][-2000:]))
            b, s, _ = e2e.copy_summary(r["log"], "restored")
            rows[mode].append((b / s / 1e9, min(r_gbps, sdma_gbps), r["seconds"], b))
            drop(r)
        drop(d)
    for mode, what in (("0", "serial (each task copies)"), ("1", "parallel (CRIU's main process copies)")):
        ordered = sorted(rows[mode], key=lambda x: x[0] / x[1])
        thr, lim, secs, b = ordered[len(ordered) // 2]
        table.add("restore %.2f GiB, 2 GPUs, %s, median of %d" % (b / GiB, what, reps), "%.2f GB/s" % thr,
                  "%.2f GB/s" % lim, "%.2f" % (thr / lim), ">= 0.90", verdict(thr / lim >= 0.9))
        for i, (t, l, sec, _) in enumerate(rows[mode]):
            table.add("  rep %d: whole restore (criu-host) %.2f s" % (i + 1, sec), "%.2f GB/s" % t,
                      "%.2f GB/s" % l, "%.2f" % (t / l))


if __name__ == "__main__":
    sys.exit(main())

