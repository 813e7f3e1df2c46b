#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Unit tests of bench/incremental.py's computations (no GPU, no root):
the chunks the workload rewrites, the paused time and the summary read
from a dump's log, the spread, and the 8 x MI300X model.

    python3 bench/test_incremental.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import incremental as inc  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def chunks_are_distinct_whole_mibs_of_the_bos():
    bos = [(0x7f0000000000, 64 * MiB), (0x7f1000000000, 8 * MiB + 4096), (0x7f2000000000, 4096)]
    picked = inc.choose_chunks(bos, 0.10, 29, 1000)
    whole = 64 + 8  # the 4 KiB BO and the 4 KiB tail hold no whole chunk
    check(len(picked) == round(0.10 * whole), "10 %% of %d chunks: got %d" % (whole, len(picked)))
    addrs = [a for a, _, _ in picked]
    check(len(set(addrs)) == len(addrs), "chunks drawn twice: %s" % addrs)
    check(addrs == sorted(addrs), "not sorted by address")
    for a, size, _ in picked:
        inside = [(b, s) for b, s in bos if b <= a and a + size <= b + s]
        check(size == MiB and len(inside) == 1 and (a - inside[0][0]) % MiB == 0,
              "chunk %#x+%d is not a whole MiB of one BO" % (a, size))
    seeds = [s for _, _, s in picked]
    check(len(set(seeds)) == len(seeds) and min(seeds) == 1000, "pattern seeds %s" % seeds)
    check(inc.choose_chunks(bos, 0.10, 29, 1000) == picked, "the same seed draws other chunks")
    check([a for a, _, _ in inc.choose_chunks(bos, 0.10, 30, 1000)] != addrs, "another seed draws the same chunks")
    check(inc.choose_chunks(bos, 0, 29, 1000) == [], "0 % changed draws chunks")
    check(len(inc.choose_chunks(bos, 1.0, 29, 1000)) == whole, "100 % changed is not every chunk")


# criu-host's lines around a dump (the plugin's own, verbatim).
LOG = """(00.010000) plugin amdgpu_plugin: DUMP_EXT_FILE(fd=5, id=3) = 0
(00.067799) amdgpu_plugin: pid 15787: GPU queues paused (2 GPUs, 15 BOs, 4 objects)
(00.068256) amdgpu_plugin: pid 15787: incremental dump: compared with amdgpu-kfd-3.img of the parent checkpoint
(01.102469) amdgpu_plugin: pid 15787: GPU queues resumed
(01.115427) Warn: amdgpu_plugin: dump: 3 GPU files, 2 GPUs, 15 BOs (7 with contents), 1073741824 bytes (1.00 GiB) \
in 1.0 s, 1.07 GB/s, staging peak 8732672 bytes of 64 MiB per GPU; incremental on 2 GPUs: 106954752 bytes \
(102.00 MiB) written, 966787072 bytes (922.00 MiB) taken from the parent checkpoint, chunks hashed on up to 2 \
threads per GPU (at most 8)
"""


def paused_time_and_summary_from_the_log():
    p = inc.paused_seconds(LOG)
    check(p is not None and abs(p - (1.102469 - 0.067799)) < 1e-9, "paused %s s" % p)
    check(inc.paused_seconds(LOG.replace("GPU queues resumed", "something else")) is None,
          "paused time without a resumed line")
    check(inc.paused_seconds(LOG.replace("pid 15787: GPU queues resumed", "pid 1: GPU queues resumed")) is None,
          "paused and resumed of two processes taken as one")
    check(inc.incremental_summary(LOG) == (2, 106954752, 966787072, 2), "summary %s" %
          (inc.incremental_summary(LOG),))
    check(inc.incremental_summary(LOG.split("; incremental")[0]) is None, "a complete dump read as incremental")


def vram_bos_from_the_manifest():
    text = ("pid 42\nbo 1 128 vram 0x7f0000000000 1073741824 1073741824 1\n"
            "bo 1 128 gem 0x7f5000000000 2097152 2097152 2\nbo 0 0 gtt 0x7f6000000000 8192 8192 3\n"
            "bo 2 129 vram 0x7f1000000000 4096 4096 4\n")
    got = inc.manifest_vram(text)
    check(got == [(0x7f0000000000, 1 << 30), (0x7f1000000000, 4096)], "manifest VRAM BOs %s" % got)


def spread_and_median():
    check(inc.spread([0.31, 0.12, 0.2]) == "0.12-0.31", "spread %s" % inc.spread([0.31, 0.12, 0.2]))
    check(inc.median([3, 1, 2]) == 2 and inc.median([5]) == 5, "median")


def node_model():
    # 8 GPUs of 192 GiB, 1 % changed, SDMA 50 GB/s, XXH3 10 GB/s per core,
    # 24 cores per GPU (8 hash threads at most), 25 GB/s of storage.
    m = inc.node_dump_model(192 * GiB, 8, 0.01, 50, 10, 24, 25)
    total = 8 * 192 * GiB
    check(abs(m["written"] - 0.01 * total) < 1, "written %s" % m["written"])
    check(abs(m["full_s"] - total / 25e9) < 1e-9, "full %s" % m["full_s"])
    check(m["bound"] == "SDMA read" and abs(m["incr_s"] - 192 * GiB / 50e9) < 1e-9, "1 %%: %s" % m)
    # 50 % changed: the write of the changed half bounds it.
    m = inc.node_dump_model(192 * GiB, 8, 0.5, 50, 10, 24, 25)
    check(m["bound"] == "storage write" and abs(m["incr_s"] - 0.5 * total / 25e9) < 1e-9, "50 %%: %s" % m)
    # One core per GPU hashing at 10 GB/s: hashing bounds it.
    m = inc.node_dump_model(192 * GiB, 8, 0.01, 50, 10, 1, 25)
    check(m["bound"].startswith("hashing") and abs(m["incr_s"] - 192 * GiB / 10e9) < 1e-9, "1 core: %s" % m)


def main():
    for t in (chunks_are_distinct_whole_mibs_of_the_bos, vram_bos_from_the_manifest,
              paused_time_and_summary_from_the_log, spread_and_median, node_model):
        t()
    print("test_incremental: %s" % ("%d failure(s)" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
