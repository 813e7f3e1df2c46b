#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Tests of amdgpu-img (label inspect), on real checkpoints.

    inspect_test.py --bin-dir BUILD checkpoint DIR   make the checkpoints (fixture)
    inspect_test.py --bin-dir BUILD show|verify|diff|hostile DIR
    inspect_test.py --bin-dir BUILD upstream CODEC... images written by upstream's code

`checkpoint` runs gpu-workload on an emulated 2xMI210 and dumps it twice with
criu-host and the plugin, into DIR/a and DIR/b (the workload's manifest, what
it allocated where, is DIR/manifest), then the same workload without its
3 MiB BOs into DIR/other. The other steps
check amdgpu-img against those facts. Each check prints "ok - ..."; the first
failure exits 1.
"""
import argparse
import glob
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from harness import Failed  # noqa: E402
SRC = os.path.dirname(os.path.dirname(HERE))
SCHEMA = os.path.join(SRC, "src/inspect/amdgpu-img-show.schema.json")
VRAM = "4K,1M+4K,3M"   # per GPU; 3 MiB spans three 1 MiB chunks
OTHER_VRAM = "4K,1M+4K"
GTT = "8K"
PASSED = []


def ok(cond, msg):
    if not cond:
        raise Failed(msg)
    PASSED.append(msg)
    print("ok - " + msg, flush=True)


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def img(a, *args):
    return run([os.path.join(a.bin_dir, "amdgpu-img")] + list(args))


# --------------------------------------------------------------------------
# The fixture: two dumps of one running workload
# --------------------------------------------------------------------------

def start_workload(a, name, vram):
    manifest, ready = os.path.join(a.dir, name), os.path.join(a.dir, name + ".ready")
    # Without address space randomization (setarch -R), both workloads get
    # the same VAs for the BOs they have in common.
    p = subprocess.Popen(["setarch", platform.machine(), "-R",
                          os.path.join(a.bin_dir, "tests/e2e/gpu-workload"), "--manifest", manifest,
                          "--ready", ready, "--vram", vram, "--gtt", GTT])
    deadline = time.time() + 300
    while not os.path.exists(ready):
        if p.poll() is not None or time.time() > deadline:
            p.kill()
            raise Failed("gpu-workload did not get ready (%s)" % p.poll())
        time.sleep(0.05)
    return p


def dump(a, pid, side):
    b = a.bin_dir
    d = os.path.join(a.dir, side)
    os.makedirs(d)
    env = dict(os.environ, CRIU_HOST_KFDEMU=os.path.join(b, "tests/emulator/kfd-emu"))
    r = run([os.path.join(b, "tests/host/criu-host"), "dump", "-t", str(pid), "-D", d,
             "--plugin", os.path.join(b, "amdgpu_plugin.so"), "-o", d + ".log"], env=env)
    if r.returncode != 0:
        log = open(d + ".log").read() if os.path.exists(d + ".log") else ""
        raise Failed("criu-host dump %s: %d\n%s%s" % (side, r.returncode, r.stdout + r.stderr, log[-3000:]))


def inner_dump(a):
    """Inside the emulated machine: a and b, two dumps of one workload;
    other, a dump of the same workload without its 3 MiB VRAM BOs."""
    for name, vram, sides in (("manifest", VRAM, ("a", "b")), ("manifest.other", OTHER_VRAM, ("other",))):
        p = start_workload(a, name, vram)
        try:
            for side in sides:
                dump(a, p.pid, side)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
    return 0


def make_checkpoint(a):
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    r = subprocess.run([os.path.join(a.bin_dir, "tests/emulator/kfd-emu"), "--machine", "2xMI210", "--",
                        sys.executable, os.path.abspath(__file__), "--bin-dir", a.bin_dir, "inner-dump", a.dir],
                       timeout=900)
    ok(r.returncode == 0, "two checkpoints of gpu-workload on an emulated 2xMI210 (VRAM %s, GTT %s)" % (VRAM, GTT))


def manifest_bos(a):
    bos = []
    for line in open(os.path.join(a.dir, "manifest")):
        f = line.split()
        if f[0] == "bo":
            bos.append({"type": f[3], "addr": int(f[4], 16), "size": int(f[5])})
    return bos


def scratch_copy(a, name):
    d = os.path.join(tempfile.mkdtemp(prefix="amdcr-inspect-"), name)
    shutil.copytree(os.path.join(a.dir, "a"), d)
    return d


# --------------------------------------------------------------------------
# show
# --------------------------------------------------------------------------

def show_json(a, d):
    r = img(a, "show", "--json", d)
    ok(r.returncode == 0, "show --json %s exits 0 (%s)" % (os.path.basename(d), r.stderr.strip()))
    return json.loads(r.stdout)


def check_schema(doc, what):
    import jsonschema
    jsonschema.validate(doc, json.load(open(SCHEMA)))
    ok(True, "%s validates against src/inspect/amdgpu-img-show.schema.json" % what)
    # The schema can fail: a document missing a required field is refused.
    broken = json.loads(json.dumps(doc))
    del broken["kfd"][0]["bos"][0]["size"]
    try:
        jsonschema.validate(broken, json.load(open(SCHEMA)))
        ok(False, "the schema refuses a BO without its size")
    except jsonschema.ValidationError:
        ok(True, "the schema refuses a BO without its size (control)")


def t_show(a):
    d = os.path.join(a.dir, "a")
    doc = show_json(a, d)
    check_schema(doc, "show --json")
    ok(len(doc["kfd"]) == 1 and not doc["errors"], "one KFD image, no errors")
    k = doc["kfd"][0]
    gpus = [x for x in k["devices"] if x["kind"] == "gpu"]
    ok(k["num_of_gpus"] == 2 and len(gpus) == 2, "2 GPUs listed")
    ok(sorted(g["properties"]["drm_render_minor"] for g in gpus) == [128, 129], "their render minors 128, 129")
    want = manifest_bos(a)
    by_addr = {b["addr"]: b for b in k["bos"]}
    for m in want:
        b = by_addr.get(m["addr"])
        ok(b is not None and b["size"] == m["size"] and b["type"] == m["type"],
           "%s BO at %#x (%d bytes) of the workload's manifest is in show --json" % (m["type"], m["addr"], m["size"]))
    # Contents layout: each GPU's VRAM/GTT BOs back to back in its pages file.
    for g in gpus:
        off = 0
        for b in (b for b in k["bos"] if b["gpu_id"] == g["gpu_id"] and b["type"] in ("vram", "gtt")):
            ok(b["pages_file"] == "amdgpu-pages-%d-%04x.img" % (k["id"], g["gpu_id"]) and b["pages_offset"] == off,
               "BO %d of GPU %#x at offset %d of its pages file" % (b["index"], g["gpu_id"], off))
            off += b["size"]
        pages = os.path.join(d, "amdgpu-pages-%d-%04x.img" % (k["id"], g["gpu_id"]))
        ok(os.path.getsize(pages) - 8 >= off, "GPU %#x's pages file holds its BOs" % g["gpu_id"])
    ok(k["integrity"] == "verified", "the plugin's KFD image: seal verified")
    content = [b for b in k["bos"] if b["type"] in ("vram", "gtt")]
    ok(all(b["checksum"] and b["checksum"]["chunks"] == -(-b["size"] // b["checksum"]["chunk_bytes"]) for b in content),
       "each of its %d VRAM/GTT BOs has checksums, one per chunk" % len(content))
    ok(all(b["checksum"] is None for b in k["bos"] if b["type"] not in ("vram", "gtt")),
       "BOs without contents have none")
    r = img(a, "show", d)
    ok(r.returncode == 0 and "process %d" % k["pid"] in r.stdout and "seal verified" in r.stdout,
       "show (text) names the process %d and its verified seal" % k["pid"])
    for m in want:
        ok("VA 0x%012x" % m["addr"] in r.stdout, "show (text) lists the BO at %#x" % m["addr"])
    # A damaged image: show still shows the rest, reports it, exits 1.
    c = scratch_copy(a, "damaged")
    kfd = glob.glob(c + "/amdgpu-kfd-*.img")[0]
    with open(kfd, "r+b") as f:
        f.truncate(os.path.getsize(kfd) - 3)
    r = img(a, "show", "--json", c)
    doc = json.loads(r.stdout)
    ok(r.returncode == 1 and len(doc["errors"]) == 1 and doc["errors"][0]["file"] == os.path.basename(kfd),
       "show --json of a truncated KFD image: exit 1, the file under errors")
    r = img(a, "show", "/nonexistent/amdgpu-img-test")
    ok(r.returncode == 2 and "nonexistent" in r.stderr, "show of a missing directory: exit 2, names it")


# --------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------

def t_verify(a):
    d = os.path.join(a.dir, "a")
    r = img(a, "verify", "-v", d)
    ok(r.returncode == 0 and " 0 problems" in r.stdout, "verify of a good checkpoint: exit 0 (%s)" % r.stdout.strip().splitlines()[-1])
    good = sorted(l.split()[1] for l in r.stdout.splitlines() if l.startswith("ok "))
    ok(len(good) == 6 and len([g for g in good if g.startswith("amdgpu-pages-")]) == 2 and
       len([g for g in good if g.startswith("amdgpu-renderD-")]) == 2 and "amdgpu-binding.img" in good,
       "verify -v: the KFD image, its 2 pages files, 2 render images and the dump's manifest ok (%s)"
       % " ".join(good))

    c = scratch_copy(a, "truncated")
    pages = sorted(glob.glob(c + "/amdgpu-pages-*.img"))[0]
    with open(pages, "r+b") as f:
        f.truncate(os.path.getsize(pages) - 4096)
    r = img(a, "verify", c)
    ok(r.returncode == 1 and os.path.basename(pages) in r.stdout, "verify of a truncated pages file: exit 1, names it")

    c = scratch_copy(a, "corrupt")
    kfd = glob.glob(c + "/amdgpu-kfd-*.img")[0]
    with open(kfd, "r+b") as f:
        f.seek(8)
        f.write(b"\xff\xff\xff\xff")
    r = img(a, "verify", c)
    ok(r.returncode == 1 and "BAD " + os.path.basename(kfd) in r.stdout,
       "verify of a KFD image with corrupted bytes: exit 1, names it")

    # One flipped byte in a BO's contents: its chunk's checksum finds it.
    doc = json.loads(img(a, "show", "--json", d).stdout)
    k = doc["kfd"][0]
    big = [b for b in k["bos"] if b["type"] == "vram" and b["size"] == 3 << 20][0]
    c = scratch_copy(a, "flipped")
    with open(os.path.join(c, big["pages_file"]), "r+b") as f:
        f.seek(8 + big["pages_offset"] + (2 << 20) + 7)
        v = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([v[0] ^ 1]))
    r = img(a, "verify", c)
    ok(r.returncode == 1 and ("BAD %s" % big["pages_file"]) in r.stdout and ("0x%x" % big["addr"]) in r.stdout,
       "verify of a pages file with one flipped bit: exit 1, names the file and the BO (%s)" %
       [l for l in r.stdout.splitlines() if l.startswith("BAD")][:1])
    r = img(a, "verify", d)
    total = sum(b["size"] for b in k["bos"] if b["type"] in ("vram", "gtt"))
    ok("%d bytes of contents read, %d of them matched their checksums" % (total, total) in r.stdout,
       "verify of the good checkpoint matched all %d bytes against their checksums" % total)

    c = scratch_copy(a, "stray")
    shutil.copy(pages, os.path.join(c, "amdgpu-pages-77-1234.img"))
    r = img(a, "verify", c)
    ok(r.returncode == 1 and "amdgpu-pages-77-1234.img: pages file that no image refers to" in r.stdout,
       "verify of a checkpoint with a stray pages file: exit 1, names it")

    c = scratch_copy(a, "missing")
    os.unlink(os.path.join(c, os.path.basename(pages)))
    r = img(a, "verify", c)
    ok(r.returncode == 1 and "missing" in r.stdout, "verify of a checkpoint without a pages file: exit 1")

    # A file id too long for an int is no image (it used to abort the reader).
    c = scratch_copy(a, "longid")
    shutil.copy(glob.glob(c + "/amdgpu-kfd-*.img")[0], os.path.join(c, "amdgpu-kfd-99999999999.img"))
    r = img(a, "verify", c)
    ok(r.returncode == 0 and "amdgpu-kfd-99999999999.img: not an amdgpu image name" in r.stdout,
       "verify with amdgpu-kfd-99999999999.img: still 0, that name a warning")

    e = tempfile.mkdtemp(prefix="amdcr-inspect-empty-")
    r = img(a, "verify", e)
    ok(r.returncode == 3, "verify of a directory without amdgpu images: exit 3")
    r = img(a, "verify", "/nonexistent/amdgpu-img-test")
    ok(r.returncode == 2, "verify of a missing directory: exit 2")
    r = img(a, "verify")
    ok(r.returncode == 2 and "usage" in r.stderr, "verify without a directory: usage, exit 2")


# --------------------------------------------------------------------------
# hostile: files planted in the checkpoint
# --------------------------------------------------------------------------

def t_hostile(a):
    """A FIFO or symbolic link under an image's name, a FIFO under CRIU's
    files.img or pstree.img: verify refuses it at once, naming it, and
    reads nothing through a link."""
    away = tempfile.mkdtemp(prefix="amdcr-inspect-away-")
    for kind in ("kfd", "pages"):
        c = scratch_copy(a, "fifo-" + kind)
        name = os.path.basename(sorted(glob.glob(c + "/amdgpu-%s-*.img" % kind))[0])
        os.unlink(os.path.join(c, name))
        os.mkfifo(os.path.join(c, name))
        # Without O_NONBLOCK the open of a FIFO with no writer never
        # returns: run()'s timeout would end the test (TimeoutExpired).
        t0 = time.monotonic()
        r = run([os.path.join(a.bin_dir, "amdgpu-img"), "verify", c], timeout=30)
        ok(r.returncode == 1 and name in r.stdout and "a FIFO, not a regular file" in r.stdout,
           "verify with a FIFO as %s: exit 1 in %.1f s, names it (%s)" %
           (name, time.monotonic() - t0, [l for l in r.stdout.splitlines() if name in l][:1]))
    # CRIU's files.img and pstree.img (bound by the manifest: planted
    # beside a checkpoint of criu-host, which writes none, they are read).
    for name in ("files.img", "pstree.img"):
        c = scratch_copy(a, "fifo-" + name)
        os.mkfifo(os.path.join(c, name))
        t0 = time.monotonic()
        r = run([os.path.join(a.bin_dir, "amdgpu-img"), "verify", c], timeout=30)
        ok(r.returncode == 1 and "BAD amdgpu-binding.img: %s: a FIFO, not a regular file" % name in r.stdout,
           "verify with a FIFO as CRIU's %s: exit 1 in %.1f s, names it (%s)" %
           (name, time.monotonic() - t0, [l for l in r.stdout.splitlines() if name in l][:1]))
    for kind in ("kfd", "pages"):
        c = scratch_copy(a, "link-" + kind)
        name = os.path.basename(sorted(glob.glob(c + "/amdgpu-%s-*.img" % kind))[0])
        moved = os.path.join(away, name)
        shutil.move(os.path.join(c, name), moved)
        os.symlink(moved, os.path.join(c, name))
        r = img(a, "verify", c)
        ok(r.returncode == 1 and name in r.stdout and "a symbolic link, not followed" in r.stdout,
           "verify with %s a symbolic link to the real file elsewhere: exit 1, not followed (%s)" %
           (name, [l for l in r.stdout.splitlines() if name in l][:1]))
    shutil.rmtree(away)


# --------------------------------------------------------------------------
# diff
# --------------------------------------------------------------------------

def t_diff(a):
    da, db = os.path.join(a.dir, "a"), os.path.join(a.dir, "b")
    r = img(a, "diff", da, da)
    ok(r.returncode == 0 and r.stdout == "", "diff of a checkpoint with itself: exit 0, no output")
    r = img(a, "diff", da, db)
    ok(r.returncode in (0, 1) and "contents differ" not in r.stdout and "only in" not in r.stdout,
       "diff of two dumps of the same idle workload: same BOs, same contents (%s)" %
       (r.stdout.strip().replace("\n", "; ") or "identical"))

    # One changed byte in the 3 MiB BO's second MiB.
    doc = json.loads(img(a, "show", "--json", da).stdout)
    k = doc["kfd"][0]
    big = [b for b in k["bos"] if b["type"] == "vram" and b["size"] == 3 << 20][0]
    c = scratch_copy(a, "changed")
    with open(os.path.join(c, big["pages_file"]), "r+b") as f:
        f.seek(8 + big["pages_offset"] + (1 << 20) + 12345)
        v = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([v[0] ^ 0x5a]))
    r = img(a, "diff", da, c)
    want = "BO GPU 0x%04x VA 0x%x (vram, 3 MiB): contents differ in 1 of 3 chunks of 1 MiB: [0x100000, 0x200000)" % (
        big["gpu_id"], big["addr"])
    ok(r.returncode == 1 and want in r.stdout and len(r.stdout.splitlines()) == 1,
       "diff finds the one changed byte: '%s'" % want)
    r = img(a, "diff", "--chunk", "64K", da, c)
    ok(r.returncode == 1 and "1 of 48 chunks of 64 KiB: [0x100000, 0x110000)" in r.stdout,
       "diff --chunk 64K narrows it to [0x100000, 0x110000)")

    # A BO set that differs: the workload without its 3 MiB BOs.
    r = img(a, "diff", da, os.path.join(a.dir, "other"))
    want = "BO GPU 0x%04x VA 0x%x (vram, 3 MiB): only in %s" % (big["gpu_id"], big["addr"], da)
    ok(r.returncode == 1 and want in r.stdout,
       "diff against the workload without its 3 MiB BOs: '%s'" % want)
    # BOs after the 3 MiB ones moved (other VAs): as many on each side,
    # except the two 3 MiB BOs, one per GPU.
    import collections
    kinds = {}
    for side in (da, os.path.join(a.dir, "other")):
        kinds[side] = collections.Counter(l.split("(")[1].split(")")[0] for l in r.stdout.splitlines()
                                          if l.endswith("only in " + side))
    extra = kinds[da] - kinds[os.path.join(a.dir, "other")]
    ok(extra == collections.Counter({"vram, 3 MiB": 2}) and not kinds[os.path.join(a.dir, "other")] - kinds[da],
       "... and the BO sets differ by exactly the two 3 MiB VRAM BOs (%s)" % dict(extra))
    r = img(a, "diff", "--chunk", "0", da, c)
    ok(r.returncode == 2, "diff --chunk 0: exit 2")


# --------------------------------------------------------------------------
# upstream's images
# --------------------------------------------------------------------------

def t_upstream(a, codecs):
    for codec in codecs:
        ver = os.path.basename(codec).replace("interop-upstream-", "")
        d = tempfile.mkdtemp(prefix="amdcr-inspect-up-")
        r = run([codec, "write-kfd", os.path.join(d, "amdgpu-kfd-3.img")])
        ok(r.returncode == 0, "CRIU %s's generated code wrote a KFD image" % ver)
        render = run([codec, "write-render", os.path.join(d, "amdgpu-renderD-5.img")]).returncode == 0
        doc = json.loads(img(a, "show", "--json", d).stdout)
        check_schema(doc, "show --json of CRIU %s's images" % ver)
        k = doc["kfd"][0]
        ok(k["pid"] == 4242 and [b["type"] for b in k["bos"]] == ["vram", "gtt", "vram", "doorbell"],
           "CRIU %s's KFD image: pid 4242, BOs vram, gtt, vram, doorbell" % ver)
        ok(k["integrity"] == "unsealed" and all(b["checksum"] is None for b in k["bos"]),
           "CRIU %s's KFD image: unsealed, no checksums" % ver)
        ok(render, "CRIU %s's generated code wrote a render image" % ver)
        r0 = doc["render"][0]
        if ver.startswith("dev"):
            ok(len(doc["render"]) == 1 and len(r0["bos"]) == 2 and not r0["gpu_id_only"],
               "CRIU %s's render image: 2 BOs" % ver)
        else:
            # 4.0-4.2.1: gpu_id alone; the minor is the KFD image's GPU's.
            ok(len(doc["render"]) == 1 and r0["gpu_id_only"] and r0["bos"] == [] and r0["id"] == 5 and
               r0["gpu_id"] == 0x1a2b and r0["drm_render_minor"] == 129,
               "CRIU %s's render image: gpu_id alone, read as file 5 on renderD129 (the KFD image's) (%s)" %
               (ver, {k: v for k, v in r0.items() if k != "bos"}))
            text = img(a, "show", d).stdout
            ok("amdgpu-renderD-5.img: render node renderD129 of GPU 0x1a2b, 0 BOs" in text and
               "CRIU 4.0-4.2.1 image" in text, "show says so in text too")
        r = img(a, "verify", d)
        ok(r.returncode == 1 and "amdgpu-pages-3-1a2b.img: missing" in r.stdout,
           "verify of CRIU %s's KFD image without its pages file: exit 1, missing" % ver)
        # Pages files of the right sizes, as upstream frames them.
        for name, size in [("amdgpu-pages-3-1a2b.img", 0x1000 + 0x2000 + 0x4000)] + (
                [(b["pages_file"], b["size"]) for b in doc["render"][0]["bos"] if b["pages_file"]] if render else []):
            with open(os.path.join(d, name), "wb") as f:
                f.write(size.to_bytes(8, "little") + bytes(size))
        r = img(a, "verify", d)
        imports = [b for b in (doc["render"][0]["bos"] if render else []) if b.get("is_import")]
        if imports:
            # An imported BO that no file of the checkpoint holds: the
            # restore refuses the image before any GPU state, so verify too.
            bad = [l for l in r.stdout.splitlines() if l.startswith("BAD ")]
            ok(r.returncode == 1 and len(bad) == 1 and "amdgpu-renderD-5.img" in bad[0] and
               "is an imported dma-buf that names no BO of the checkpoint" in bad[0],
               "verify of CRIU %s's images with their pages files: exit 1, the render image's import named, as "
               "the restore refuses it (%s)" % (ver, r.stdout.strip()))
        else:
            ok(r.returncode == 0, "verify of CRIU %s's images with their pages files: exit 0 (%s)" %
               (ver, r.stdout.strip()))
        if ver.startswith("dev"):
            t_metadata(a, codec, d)


def t_metadata(a, codec, up):
    """This plugin's render image of the same sample (interop-our-codec),
    whose BO 0 has amdgpu metadata (37 bytes of 0x5a), beside upstream's
    without: show prints it, diff finds it and nothing else."""
    ours = os.path.join(os.path.dirname(codec), "interop-our-codec")  # built beside the upstream codecs
    ok(os.access(ours, os.X_OK), "the plugin's codec %s is built" % ours)
    d = tempfile.mkdtemp(prefix="amdcr-inspect-md-")
    for f in os.listdir(up):
        shutil.copy(os.path.join(up, f), d)
    ok(run([ours, "write-render", d, "5"]).returncode == 0, "the plugin's codec wrote its render image")
    doc = json.loads(img(a, "show", "--json", d).stdout)
    check_schema(doc, "show --json of a render image with metadata")
    md = [b["metadata"] for b in doc["render"][0]["bos"]]
    ok(md == [{"flags": 0x8000000000000123, "tiling_info": 0x3a0000004c05, "size": 37, "data": "5a" * 37}, None],
       "show --json: BO 0's metadata, none on BO 1 (%s)" % md)
    ok("metadata 37 bytes flags 0x8000000000000123 tiling 0x3a0000004c05" in img(a, "show", d).stdout,
       "show prints BO 0's metadata")
    r = img(a, "diff", up, d)
    ok(r.returncode == 1 and r.stdout == "amdgpu-renderD-5.img: BO 0: metadata none -> present\n",
       "diff against upstream's image of the same BOs: only the metadata (%r)" % r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("step")
    ap.add_argument("dir")
    ap.add_argument("codecs", nargs="*")
    a = ap.parse_args()
    a.bin_dir = os.path.abspath(a.bin_dir)
    a.dir = os.path.abspath(a.dir)
    if a.step == "inner-dump":
        return inner_dump(a)
    try:
        if a.step == "checkpoint":
            make_checkpoint(a)
        elif a.step == "upstream":
            if not a.codecs:
                print("NOT RUN: no upstream codec (no CRIU tarball; see tests/interop)")
                return 77
            t_upstream(a, a.codecs)
        else:
            if not os.path.exists(os.path.join(a.dir, "manifest")):
                print("FAIL: no checkpoint in %s (the inspect_checkpoint fixture failed?)" % a.dir)
                return 1
            {"show": t_show, "verify": t_verify, "diff": t_diff, "hostile": t_hostile}[a.step](a)
    except (Failed, subprocess.TimeoutExpired) as e:
        print("FAIL: %s" % e, flush=True)
        print("%d passed, 1 failed" % len(PASSED))
        return 1
    print("%d passed, 0 failed" % len(PASSED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
