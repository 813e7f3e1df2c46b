#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The incremental-dump rows of bench.py: what they
compute, and the step that runs inside an emulated machine.

    incremental.py --bin-dir BUILD --inner --state DIR --spec SPEC.json
        (run by bench.py inside kfd-emu)

The step starts gpu-workload (--changes) and dumps it with criu-host
(which leaves it running) once per entry of the spec's "dumps": before a
dump, the workload rewrites the chosen 1 MiB chunks of its VRAM BOs
through its CPU mapping of them (choose_chunks: a fixed seed), the
emulator's own way the workload filled them; a dump after the first one
gets a `parent` link to the previous one's directory (what CRIU's
--prev-images-dir makes). After each dump the workload must still run with
its queues active (it keeps its GPU). It writes SPEC's "out": per dump the
host's exit status, wall time, log, and "pages": the bytes of the files
the plugin wrote (amdgpu-*: pages files and the metadata images).

The pure functions below are unit-tested by test_incremental.py.
"""
import argparse
import json
import os
import random
import re
import signal
import sys
import time

MiB = 1 << 20
CHUNK = MiB  # the plugin's checksum chunk (one per MiB of a BO)

SUMMARY_INCREMENTAL = re.compile(r"incremental on (\d+) GPUs?: (\d+) bytes \([^)]*\) written, (\d+) bytes "
                                 r"\([^)]*\) taken from the parent checkpoint, chunks hashed on up to (\d+) "
                                 r"threads? per GPU")
# criu-host's log lines start with "(SS.UUUUUU)", seconds since it started.
_STAMP = r"^\((\d+\.\d+)\) .*amdgpu_plugin: pid (\d+): GPU queues "
PAUSED = re.compile(_STAMP + r"paused\b", re.M)
RESUMED = re.compile(_STAMP + r"resumed\b", re.M)


def choose_chunks(bos, fraction, seed, pattern_seed):
    """[(addr, CHUNK, pattern seed)]: round(fraction x the whole 1 MiB
    chunks of `bos` ([(addr, size)])) distinct chunks drawn with
    random.Random(seed), sorted by address; each gets its own pattern seed
    from `pattern_seed` on (a new pattern, so its checksum changes)."""
    chunks = [addr + i * CHUNK for addr, size in sorted(bos) for i in range(size // CHUNK)]
    n = round(fraction * len(chunks))
    picked = sorted(random.Random(seed).sample(chunks, n))
    return [(a, CHUNK, pattern_seed + i) for i, a in enumerate(picked)]


def manifest_vram(text):
    """[(addr, size)] of the KFD VRAM BOs a gpu-workload manifest lists
    ("bo NODE MINOR vram|gtt|gem ADDR SIZE FILL SEED" lines): the BOs the
    workload mapped and filled, which it can rewrite."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 8 and f[0] == "bo" and f[3] == "vram":
            out.append((int(f[4], 0), int(f[5])))
    return out


def paused_seconds(log):
    """Seconds the plugin kept the dumped process's GPU queues paused, by
    criu-host's time stamps of the plugin's "GPU queues paused" and
    "... resumed" lines (one process); None when either is missing."""
    p, r = PAUSED.search(log), RESUMED.search(log)
    if not p or not r or p.group(2) != r.group(2):
        return None
    return float(r.group(1)) - float(p.group(1))


def incremental_summary(log):
    """(GPUs, bytes written, bytes taken from the parent, hash threads) of
    the plugin's incremental summary line, or None (a complete dump)."""
    m = SUMMARY_INCREMENTAL.search(log)
    return tuple(int(x) for x in m.groups()) if m else None


def spread(values, fmt="%.2f"):
    """"min-max" of the repetitions."""
    return (fmt + "-" + fmt) % (min(values), max(values))


def median(values):
    """The middle value (the upper one of an even count, as the table's
    other rows take it)."""
    return sorted(values)[len(values) // 2]


# --------------------------------------------------------------------------
# The 8 x MI300X model (docs/performance.md): downtime and bytes of an
# incremental dump from per-byte costs.
# --------------------------------------------------------------------------

def hash_gbps_per_core(nbytes=256 * MiB, runs=3):
    """GB/s of XXH3-64 on one core (the plugin's chunk checksum, from the
    same libxxhash), over `nbytes` of non-zero data already in memory,
    best of `runs`; None without libxxhash."""
    import ctypes
    import ctypes.util
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
    except OSError:
        return None
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    buf = bytearray(bytes(range(1, 256)) * (nbytes // 255 + 1))[:nbytes]
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    best = None
    for _ in range(runs):
        t = time.perf_counter()
        for off in range(0, nbytes, CHUNK):  # one call per MiB, as the plugin hashes
            lib.XXH3_64bits(addr + off, CHUNK)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return nbytes / best / 1e9


def node_dump_model(vram_bytes, gpus, changed, sdma_gbps, hash_gbps_core, cores_per_gpu, write_gbps,
                    hash_threads_max=8):
    """{"written": bytes, "full_s": s, "incr_s": s, "bound": what} of one
    node's dump: `gpus` GPUs of `vram_bytes` each, `changed` the fraction
    of chunks that differ from the parent. A complete dump writes every
    byte (storage-bound: the node's `write_gbps`); an incremental one
    reads every byte through SDMA (per GPU, in parallel) and hashes it on
    min(cores_per_gpu, hash_threads_max) threads per GPU, overlapped with
    the write of the changed bytes: it lasts as long as the slowest of
    the three."""
    total = vram_bytes * gpus
    written = changed * total
    threads = min(cores_per_gpu, hash_threads_max)
    parts = {"SDMA read": vram_bytes / (sdma_gbps * 1e9),
             "hashing (%d threads/GPU)" % threads: vram_bytes / (threads * hash_gbps_core * 1e9),
             "storage write": written / (write_gbps * 1e9)}
    bound = max(parts, key=parts.get)
    return {"written": written, "full_s": total / (write_gbps * 1e9), "incr_s": parts[bound], "bound": bound}


# The paper node (docs/performance.md): assumed public figures, not
# measured here. 2 x 96-core CPUs for 8 GPUs: 24 cores per GPU.
NODE = {"gpus": 8, "vram_bytes": 192 << 30, "sdma_gbps": 50.0, "cores_per_gpu": 24,
        "storage_gbps": (25.0, 5.0), "changed": (0.01, 0.10, 0.50)}


def node_rows(hash_gbps_core):
    """[(storage GB/s, changed fraction, node_dump_model(...))] of the
    paper node with XXH3 at `hash_gbps_core` per core (measured)."""
    return [(w, c, node_dump_model(NODE["vram_bytes"], NODE["gpus"], c, NODE["sdma_gbps"], hash_gbps_core,
                                   NODE["cores_per_gpu"], w))
            for w in NODE["storage_gbps"] for c in NODE["changed"]]


# --------------------------------------------------------------------------
# Inside the emulated machine
# --------------------------------------------------------------------------

def inner(args):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
    import e2e  # noqa: E402

    spec = json.load(open(args.spec))
    bins = e2e.Bins(os.path.abspath(args.bin_dir))
    changes = os.path.join(args.state, "changes")
    p, manifest = e2e.start_workload(bins, args.state, spec["workload"] + ["--changes", changes])
    out = {"pid": p.pid, "dumps": []}
    try:
        with open(manifest) as f:
            vram = manifest_vram(f.read())
        prev = None
        for k, d in enumerate(spec["dumps"]):
            if d["changed"] > 0:
                picked = choose_chunks(vram, d["changed"], spec["seed"] + k, 1000 + 100000 * k)
                rewrite(p, changes, picked)
                d["chunks_changed"] = len(picked)
            os.makedirs(d["dir"])
            if prev:
                os.symlink(os.path.join("..", os.path.basename(prev)), os.path.join(d["dir"], "parent"))
            rc, text, secs, _ = e2e.run_host(bins, ["dump", "-t", str(p.pid), "-D", d["dir"], "--plugin",
                                                     bins.plugin], {}, os.path.join(args.state, "dump-%d.log" % k))
            q = e2e.ctl(bins, "queues", str(p.pid))
            d.update(rc=rc, seconds=secs, log=text, alive=p.poll() is None, queues=q["state"],
                     pages=sum(os.path.getsize(os.path.join(d["dir"], f)) for f in os.listdir(d["dir"])
                               if f.startswith("amdgpu-")))
            out["dumps"].append(d)
            if rc != 0 or not d["alive"] or d["queues"] != "active":
                break
            prev = d["dir"]
    finally:
        e2e.stop(p)
    json.dump(out, open(spec["out"], "w"))
    return 0


def rewrite(p, changes, picked, timeout=300):
    """Has the workload write `picked` ([(addr, size, seed)]) and waits
    until it has."""
    with open(changes + ".tmp", "w") as f:
        f.writelines("%d %d %d\n" % c for c in picked)
    os.rename(changes + ".tmp", changes)
    os.kill(p.pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not os.path.exists(changes + ".done"):
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("gpu-workload did not rewrite its chunks (exit %s)" % p.poll())
        time.sleep(0.01)
    os.unlink(changes + ".done")
    os.unlink(changes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--inner", action="store_true", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--spec", required=True)
    return inner(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
