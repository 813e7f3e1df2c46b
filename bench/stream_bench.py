#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Rows for streamed checkpoints (not a test).

    python3 bench/stream_bench.py [--mib N] [--markdown FILE.md]
        [--bin-dir build --criu-version V --vram-mib M]

Compression of GPU memory on the way out (what `criu-image-streamer capture
| zstd -1` or `| lz4` does to a pages file): for each kind of contents, N
MiB (default 64) in a file on tmpfs, compressed by `zstd -1` and by `lz4 -1`
(the Debian 12 CLIs, one thread) into tmpfs and decompressed back: bytes out
and the ratio, and the wall time of each way as MB/s of the original bytes.
The kinds:
  zeros        never-written memory (a pages file's sparse runs when
               streamed: a stream has no holes);
  fp32 weights IEEE single floats drawn from a normal distribution of
               standard deviation 0.02 (as a model's initialised weights);
  bf16 weights the same floats cut to their upper 16 bits (bfloat16, as
               models are stored for inference);
  random       os.urandom (encrypted or already-compressed data).

With --bin-dir (a build with real CRIU, tests/emulator/criu/streamer_test.py
and $AMDCR_STREAMER_BIN or criu-image-streamer on PATH): the CRIU dump and
restore times of the kfd-gem workload with M MiB VRAM BOs per GPU on
2xMI210, through a file dump (realcriu_test.py other-machine: images in the
page cache) and through the stream (streamer_test.py migrate-style: capture
| zstd -1 | TCP between two network namespaces | zstd -d | serve), from
each harness's "criu dump/restore: exit 0 after S s" lines, both with
KFD_MAX_BUFFER_SIZE=256K (streamer_test.py's). The two do not
write to one store: the file dump's store is the page cache, the stream's is
node B's serve (memory) behind zstd and a socket.
"""
import argparse
import array
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = {"zstd -1": (["zstd", "-1", "-q", "-c"], ["zstd", "-d", "-q", "-c"]),
         "lz4 -1": (["lz4", "-1", "-q", "-c"], ["lz4", "-d", "-q", "-c"])}


def contents(kind, size):
    if kind == "zeros":
        return bytes(size)
    if kind == "random":
        return os.urandom(size)
    rng = random.Random(40)
    floats = array.array("f", (rng.gauss(0.0, 0.02) for _ in range(size // 4 if kind == "fp32 weights" else size // 2)))
    raw = floats.tobytes()
    if kind == "fp32 weights":
        return raw
    # bfloat16: the upper half of each little-endian float32.
    return array.array("H", raw)[1::2].tobytes()


def timed(cmd, src, dst):
    with open(src, "rb") as i, open(dst, "wb") as o:
        t0 = time.monotonic()
        subprocess.run(cmd, stdin=i, stdout=o, check=True)
        return time.monotonic() - t0


def compression_rows(mib, tmp):
    rows = []
    size = mib << 20
    for kind in ("zeros", "fp32 weights", "bf16 weights", "random"):
        src = os.path.join(tmp, "in")
        with open(src, "wb") as f:
            f.write(contents(kind, size))
        for name, (comp, decomp) in TOOLS.items():
            packed, back = os.path.join(tmp, "packed"), os.path.join(tmp, "back")
            tc = timed(comp, src, packed)
            td = timed(decomp, packed, back)
            out = os.path.getsize(packed)
            if os.path.getsize(back) != size:
                raise SystemExit(f"{name} on {kind}: {os.path.getsize(back)} bytes back of {size}")
            rows.append([kind, name, f"{size}", f"{out}", f"{out / size:.4f}", f"{size / tc / 1e6:.0f}",
                         f"{size / td / 1e6:.0f}"])
    return ["contents", "compressor", "bytes in", "bytes out", "ratio", "compress MB/s", "decompress MB/s"], rows


def harness_times(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    text = p.stdout + p.stderr
    if "PASS" not in text:
        tail = "\n".join(text.splitlines()[-15:])
        raise SystemExit(f"{' '.join(cmd[:3])} ...: no PASS\n{tail}")
    got = dict(re.findall(r"criu (dump|restore): exit 0 after ([0-9.]+)s", text))
    wire = re.search(r"(\d+) bytes captured, (\d+) on the wire", text)
    return got, wire


def criu_rows(args):
    b = os.path.abspath(args.bin_dir)
    common = ["--criu-list", f"{b}/realcriu/criu-bins.txt", "--criu-version", args.criu_version,
              "--realcriu-lib", f"{REPO}/tests/realcriu", "--kfd-emu", f"{b}/tests/emulator/kfd-emu",
              "--wrapper", f"{b}/tests/emulator/kfdemu-criu", "--workload",
              f"{b}/tests/emulator/kfdemu_criu_workload", "--machine", "2xMI210"]
    # The stream's staging bound (streamer_test.py sets it) for both.
    env = dict(os.environ, KFDEMU_WORKLOAD_VRAM_MIB=str(args.vram_mib), KFD_MAX_BUFFER_SIZE=str(256 << 10))
    crit = f"{REPO}/tests/emulator/criu"
    rows = []
    file_t, _ = harness_times([sys.executable, f"{crit}/realcriu_test.py"] + common + ["--scenario", "other-machine"], env)
    rows.append(["file dump (page cache)", file_t.get("dump", "?"), file_t.get("restore", "?"), "-"])
    stream_t, wire = harness_times([sys.executable, f"{crit}/streamer_test.py"] + common + ["--scenario", "migrate"], env)
    rows.append(["stream: capture \\| zstd -1 \\| TCP \\| zstd -d \\| serve", stream_t.get("dump", "?"),
                 stream_t.get("restore", "?"), f"{wire.group(2)} of {wire.group(1)}" if wire else "?"])
    head = [f"2xMI210, {args.vram_mib} MiB VRAM BOs per GPU, CRIU {args.criu_version}", "criu dump s",
            "criu restore s", "bytes on the wire of captured"]
    return head, rows


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--markdown", default="")
    ap.add_argument("--bin-dir", default="")
    ap.add_argument("--criu-version", default="4.2.1")
    ap.add_argument("--vram-mib", type=int, default=128)
    args = ap.parse_args()
    for tool in ("zstd", "lz4"):
        if not shutil.which(tool):
            raise SystemExit(f"no {tool} (scripts/install-deps.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="stream-bench.", dir="/dev/shm")
    try:
        tables = [table(*compression_rows(args.mib, tmp))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.bin_dir:
        tables.append(table(*criu_rows(args)))
    text = "\n\n".join(tables)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
