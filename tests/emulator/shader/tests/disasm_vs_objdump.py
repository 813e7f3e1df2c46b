#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The shader core's decoder against LLVM: kfdemu-shader-disasm and
llvm-objdump-15 -d must print the same text for every instruction of the
given code objects, and of the gfx908/gfx90a code objects embedded in
ROCr's libhsa-runtime64 (its image blit kernels). NOT RUN (77) without
llvm-objdump-15.

  disasm_vs_objdump.py DISASM [gfx908:FILE | gfx90a:FILE]...
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

OBJDUMP = "llvm-objdump-15"
ROCR = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1"
MACH = {0x30: "gfx908", 0x3F: "gfx90a"}  # EF_AMDGPU_MACH


def embedded(path, outdir):
    """The AMDGPU ELF images inside a file, written out: [(cpu, path)]."""
    if not os.path.exists(path):
        return []
    data = open(path, "rb").read()
    found, i = [], 0
    while (i := data.find(b"\x7fELF\x02\x01\x01", i + 1)) >= 0:
        if struct.unpack_from("<H", data, i + 18)[0] != 224:  # EM_AMDGPU
            continue
        cpu = MACH.get(struct.unpack_from("<I", data, i + 0x30)[0] & 0xFF)
        shoff = struct.unpack_from("<Q", data, i + 0x28)[0]
        shentsize, shnum = struct.unpack_from("<HH", data, i + 0x3A)
        if cpu:
            out = os.path.join(outdir, "rocr_%x_%s.co" % (i, cpu))
            open(out, "wb").write(data[i:i + shoff + shentsize * shnum])
            found.append((cpu, out))
    return found


def compare(disasm, cpu, path):
    ref = {}
    dump = subprocess.run([OBJDUMP, "-d", "--mcpu=" + cpu, path], capture_output=True, text=True, check=True)
    for line in dump.stdout.splitlines():
        m = re.match(r"\t(.*?)\s*// ([0-9A-F]+): ", line)
        if m:
            ref[int(m.group(2), 16)] = m.group(1).strip()
    mine = {}
    out = subprocess.run([disasm, "--mcpu", cpu, path], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        addr, text = line.split(": ", 1)
        mine[int(addr, 16)] = text
    bad = [(a, t, mine.get(a)) for a, t in sorted(ref.items()) if mine.get(a) != t]
    print("%s %s: %d instructions, %d differ" % (cpu, os.path.basename(path), len(ref), len(bad)))
    for a, t, m in bad[:10]:
        print("  %x: llvm-objdump %r, ours %r" % (a, t, m))
    return len(ref) > 0 and not bad


def main():
    if not shutil.which(OBJDUMP):
        print("NOT RUN: llvm-objdump-15 (Debian's llvm-15) is not installed")
        return 77
    disasm, objects = sys.argv[1], [a.split(":", 1) for a in sys.argv[2:]]
    with tempfile.TemporaryDirectory() as tmp:
        objects += embedded(ROCR, tmp)
        ok = all([compare(disasm, cpu, path) for cpu, path in objects])
    return 0 if ok and objects else 1


if __name__ == "__main__":
    sys.exit(main())
