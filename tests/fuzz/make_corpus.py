#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ from real data.

    make_corpus.py --bin-dir BUILD [--out tests/fuzz/corpus]
    make_corpus.py --criu-images DIR --name NAME [--out tests/fuzz/corpus]

BUILD is a normal (gcc) build with the emulator, criu-host, gpu-workload and
the plugin. Seeds (run.sh gives libFuzzer no -max_len: it takes the largest
seed's size, at least 4 KiB):
  kfd_image     payloads of real KFD images: a gpu-workload dump on the
                emulated 2xMI210 (criu-host + plugin), and the sample that
                CRIU 4.2.1's / criu-dev's generated code writes (tests/interop)
  kfd_priv      the same images as RESTORE's arguments: GPU ids, BO buckets,
                private data (the emulated kernel's blob in the dump's)
  render_image  0x00 + render image payloads of those checkpoints, 0x01 + a
                dma-buf image payload
  pages_file    the checkpoint's pages files (whole files, framed)
  inspect       a whole checkpoint in fuzz_inspect's input format
  topology      the sysfs topology trees of the emulator's machines (MI100,
                2xMI210, 8xMI300X with its caches dropped), fuzz_topology's format
  config        KFD_* settings
  criu_fd_tables  (the second form) the ids-<pid>.img and fdinfo-<id>.img
                of a real CRIU checkpoint in DIR, in fuzz_criu_fd_tables'
                input format, as criu_fd_tables/NAME: emu-tree-4.2.1 (a
                tree dumped by CRIU 4.2.1 with upstream's plugin, kept by
                verify_parity_test.py --scenario upstream-gem --keep: two
                tasks, two fd tables) and emu-fork-holder-4.2.1 (realcriu_test.py
                --scenario fork-holder --keep on 2xMI210: a child holding its
                parent's /dev/kfd file, in both fd tables)
Inputs that once crashed a target are added by hand (crash-<what>) and kept,
as is kfd_image/emu-2xMI210-chain (emu-2xMI210 with the incremental
checkpoint fields set: a parent, a BO's chunk in it), made by hand, and
render_image/emu-metadata-{render,dmabuf} (the render and dma-buf images of
realcriu_test.py's gem-metadata scenario: a BO with amdgpu metadata).
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "inspect"))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import harness  # noqa: E402
import inspect_test  # noqa: E402


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def u16(n):
    return n.to_bytes(2, "little")


def u32(n):
    return n.to_bytes(4, "little")


def kfd_priv_seed(payload):
    """fuzz_kfd_priv's input (see fuzz_kfd_priv.cpp) from a criu_kfd payload:
    its GPUs' ids, its BOs as RESTORE's buckets, its private data."""
    gpus, bos, priv = [], b"", b""
    for f, _, v in harness.pb_fields(payload):
        if f == 4:  # device_entries
            gpu = [x for g, _, x in harness.pb_fields(v) if g == 2][0]
            if gpu:
                gpus.append(gpu)
        elif f == 6:  # bo_entries: addr 1, size 2, offset 3, alloc_flags 4, gpu_id 5
            e = {g: x for g, _, x in harness.pb_fields(v)}
            bos += b"".join(e.get(g, 0).to_bytes(8, "little") for g in (1, 2, 3)) + bytes(8)
            bos += e.get(5, 0).to_bytes(4, "little") + e.get(4, 0).to_bytes(4, "little")
            bos += (0xffffffff).to_bytes(4, "little") + bytes(4)
        elif f == 10:
            priv = v
    gpus = (gpus + [0, 0])[:2]
    return (b"".join(g.to_bytes(4, "little") for g in gpus) + (len(bos) // 48).to_bytes(2, "little") +
            bos + priv)


def fd_tables_seed(d):
    """fuzz_criu_fd_tables' input of the CRIU image directory `d`: its
    tasks' ids-<pid>.img (at most 4), then its fdinfo-<id>.img (at most 4)."""
    def piece(path):
        data = read(path)
        if len(data) > 0xffff:
            sys.exit(f"{path}: {len(data)} bytes, more than a u16 length holds")
        return u16(len(data)) + data

    def numbered(prefix):
        return sorted(int(n[len(prefix):-4]) for n in os.listdir(d) if n.startswith(prefix) and n.endswith(".img"))

    pids, tables = numbered("ids-"), numbered("fdinfo-")
    if not 1 <= len(pids) <= 4 or not 1 <= len(tables) <= 4:
        sys.exit(f"{d}: {len(pids)} ids and {len(tables)} fdinfo images; want 1-4 of each")
    out = bytes([len(pids) - 1])
    for pid in pids:
        out += u32(pid) + piece(os.path.join(d, f"ids-{pid}.img"))
    for t in tables:
        out += u32(t) + piece(os.path.join(d, f"fdinfo-{t}.img"))
    return out


def checkpoint(a, tmp):
    """A tiny gpu-workload dump on the emulated 2xMI210 (one 4 KiB VRAM BO
    per GPU, one 4 KiB GTT BO)."""
    d = os.path.join(tmp, "ck")
    r = subprocess.run([os.path.join(a.bin_dir, "tests/emulator/kfd-emu"), "--machine", "2xMI210", "--",
                        sys.executable, os.path.abspath(__file__), "--bin-dir", a.bin_dir, "--inner", d])
    if r.returncode != 0:
        sys.exit("the dump failed")
    return os.path.join(d, "a")


def inner(a):
    ns = argparse.Namespace(bin_dir=a.bin_dir, dir=a.inner)
    os.makedirs(a.inner)
    p = inspect_test.start_workload(ns, "manifest", "4K")
    try:
        inspect_test.dump(ns, p.pid, "a")
    finally:
        p.terminate()
        p.wait(60)
    return 0


def topology(a, machine):
    root = tempfile.mkdtemp(prefix="amdcr-corpus-root-")
    os.rmdir(root)
    subprocess.run([os.path.join(a.bin_dir, "tests/emulator/kfd-emu"), "--machine", machine, "--root", root,
                    "--keep-root", "--", "true"], check=True, capture_output=True)
    top = os.path.join(root, "sys/class/kfd/kfd/topology")
    out = b""
    for d, _, files in sorted(os.walk(top)):
        rel = os.path.relpath(d, top)
        if machine == "8xMI300X" and "/caches" in "/" + rel:
            continue
        for f in sorted(files):
            path = f if rel == "." else rel + "/" + f
            out += path.encode() + b"\0" + read(os.path.join(d, f)) + b"\0"
    shutil.rmtree(root)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir")
    ap.add_argument("--out", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--inner")
    ap.add_argument("--criu-images", help="a real CRIU checkpoint: its fd tables' seed for criu_fd_tables/NAME")
    ap.add_argument("--name")
    a = ap.parse_args()
    if a.criu_images:
        if not a.name:
            ap.error("--criu-images needs --name")
        put(a.out, "criu_fd_tables", a.name, fd_tables_seed(a.criu_images))
        return 0
    if not a.bin_dir:
        ap.error("--bin-dir is required")
    a.bin_dir = os.path.abspath(a.bin_dir)
    if a.inner:
        return inner(a)
    tmp = tempfile.mkdtemp(prefix="amdcr-corpus-")
    ck = checkpoint(a, tmp)
    kfd = glob.glob(ck + "/amdgpu-kfd-*.img")[0]
    put(a.out, "kfd_image", "emu-2xMI210", read(kfd)[8:])
    put(a.out, "kfd_priv", "emu-2xMI210", kfd_priv_seed(read(kfd)[8:]))
    renders = sorted(glob.glob(ck + "/amdgpu-renderD-*.img"))
    for i, r in enumerate(renders):
        put(a.out, "render_image", "emu-2xMI210-%d" % i, b"\0" + read(r)[8:])
    put(a.out, "render_image", "dmabuf-handle-5", b"\x01" + bytes([0x08, 0x05]))
    pages = sorted(glob.glob(ck + "/amdgpu-pages-*.img"))
    for i, p in enumerate(pages):
        put(a.out, "pages_file", "emu-2xMI210-%d" % i, read(p))
    put(a.out, "pages_file", "empty-payload", bytes(8))
    # fuzz_inspect names the pages file after the KFD image's first GPU.
    first = sorted(pages, key=lambda p: 0)[0]
    doc = inspect_test.json.loads(subprocess.run([os.path.join(a.bin_dir, "amdgpu-img"), "show", "--json", ck],
                                                 capture_output=True, text=True).stdout)
    gpu = [d for d in doc["kfd"][0]["devices"] if d["kind"] == "gpu"][0]["gpu_id"]
    first = [p for p in pages if p.endswith("-%04x.img" % gpu)][0]
    k, r = read(kfd), read(renders[0]) if renders else b""
    put(a.out, "inspect", "emu-2xMI210", u32(len(k)) + k + u32(len(r)) + r + read(first))

    for codec in sorted(glob.glob(os.path.join(a.bin_dir, "tests/interop/interop-upstream-*"))):
        ver = os.path.basename(codec).replace("interop-upstream-", "")
        f = os.path.join(tmp, "up-kfd.img")
        subprocess.run([codec, "write-kfd", f], check=True)
        put(a.out, "kfd_image", "upstream-" + ver, read(f)[8:])
        put(a.out, "kfd_priv", "upstream-" + ver, kfd_priv_seed(read(f)[8:]))
        g = os.path.join(tmp, "up-render.img")
        if subprocess.run([codec, "write-render", g]).returncode == 0:
            put(a.out, "render_image", "upstream-" + ver, b"\0" + read(g)[8:])
        pages = 0x1000 + 0x2000 + 0x4000  # the sample's VRAM/GTT BOs
        k = read(f)
        put(a.out, "inspect", "upstream-" + ver,
            u32(len(k)) + k + u32(0) + pages.to_bytes(8, "little") + bytes(pages))

    for m in ("MI100", "2xMI210", "8xMI300X"):
        put(a.out, "topology", "emu-" + m, topology(a, m))

    for name, text in (("defaults", ""),
                       ("all-set", "KFD_MAX_BUFFER_SIZE=64M\nKFD_FW_VER_CHECK=0\nKFD_SDMA_FW_VER_CHECK=no\n"
                                   "KFD_CACHES_COUNT_CHECK=YES\nKFD_NUM_GWS_CHECK=1\nKFD_VRAM_SIZE_CHECK=0\n"
                                   "KFD_NUMA_CHECK=yes\nKFD_CAPABILITY_CHECK=No\nKFD_VERIFY=0\n"),
                       ("bad-values", "KFD_MAX_BUFFER_SIZE=12Q\nKFD_NUMA_CHECK=maybe\nKFD_FW_VER_CHECK=\n"),
                       ("size-forms", "KFD_MAX_BUFFER_SIZE=1g\nKFD_MAX_BUFFER_SIZE=4096\nKFD_MAX_BUFFER_SIZE=18446744073709551615")):
        put(a.out, "config", name, text.encode())
    shutil.rmtree(tmp)
    for t in sorted(os.listdir(a.out)):
        files = os.listdir(os.path.join(a.out, t))
        print("%-13s %d seeds, %d bytes" % (t, len(files), sum(os.path.getsize(os.path.join(a.out, t, f)) for f in files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
