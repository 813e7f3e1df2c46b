#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The device code objects the HIP tests run, and the shader decoder checked
against LLVM's disassembler on every instruction of them.

  code_objects.py extract --out DIR [--mcpu GFX] [SOURCES]
      writes each code object as DIR/<source>.<gfx>.co (an AMDGPU ELF)
  code_objects.py mnemonics [--markdown] [--mcpu GFX] [SOURCES]
      the distinct instruction mnemonics each code object uses (gfx908 and
      gfx90a), from llvm-objdump-15
  code_objects.py compare --mcpu GFX --disasm TOOL [--objdump LLVM_OBJDUMP] [SOURCES]
      disassembles every code object for GFX with llvm-objdump and with
      TOOL (kfdemu-shader-disasm), and requires the same mnemonic and
      operands for every instruction; lists each disagreement (code object,
      offset, both texts) and their count; exit 1 when there is any

SOURCES (all optional; what is absent is named and left out):
  --hip-binary FILE   a program built by hipcc: its .hip_fatbin section is
                      a clang offload bundle holding one ELF per target
  --rocr LIB          Debian's libhsa-runtime64.so.1 (ROCr 5.2): its buffer
                      blit kernels (Fill, CopyMisaligned, CopyAligned) are
                      raw GFX9 machine code in its read-only data, run with
                      an amd_kernel_code_t header ROCr writes in front; each
                      starts with ROCr's kernarg load
                      (s_load_dwordx4 s[4:7], s[0:1], 0x0) and ends at its
                      one s_endpgm. They are wrapped in an ELF here.
  --rocr-image        also ROCr's image blit kernels (ELF code objects in the
                      same library; only hsa_ext_image runs them, no test
                      here does)
  --rocclr LIB        libamdhip64.so.5 (ROCclr): it carries no machine code,
                      only the OpenCL source of its blit kernels, which it
                      compiles at run time with amd_comgr; this script
                      compiles that source with clang-15 and the ROCm device
                      libraries (bitcode). Checked on kfd-emu MI100 and
                      2xMI210 against the program comgr built (caught at
                      hsa_code_object_reader_create_from_memory): the same
                      14 kernels, instruction for instruction; only the
                      order of the functions and their padding differ
"""
import argparse
import bisect
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import harness  # noqa: E402

EM_AMDGPU = 224
# EF_AMDGPU_MACH values (the low byte of e_flags) of the targets tested.
MACH = {"gfx908": 0x30, "gfx90a": 0x3F}
GFX_OF_MACH = {v: k for k, v in MACH.items()}
ELFOSABI_AMDGPU_HSA, ABI_V4 = 64, 2
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
ROCR_KERNARG_LOAD = struct.pack("<II", 0xC00A0100, 0x00000000)
S_ENDPGM = struct.pack("<I", 0xBF810000)
ROCR_BLIT_NAMES = {47: "Fill", 103: "CopyMisaligned", 124: "CopyAligned"}  # by length in words
# The target features HIP compiles its blit program for: those of the ISA
# the emulated MI100 and MI210 report (gfx908:sramecc+:xnack-, ...).
ROCCLR_FEATURES = ":sramecc+:xnack-"
# ROCclr leaves its device-enqueue scheduler kernel out of the blit program
# on these GPUs (the program comgr builds has no such kernel).
ROCCLR_SCHEDULER = b"__amd_rocclr_scheduler"
BITCODE_DIR = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
CLANG = "clang-15"


class CodeObject:
    def __init__(self, name, gfx, data):
        self.name, self.gfx, self.data = name, gfx, data


def elf_end(data, off):
    """The size of the ELF image starting at `off` (its section headers
    come last in what LLVM writes)."""
    shoff, = struct.unpack_from("<Q", data, off + 40)
    shentsize, shnum = struct.unpack_from("<HH", data, off + 58)
    return shoff + shentsize * shnum


def elf_mach(data, off=0):
    """The EF_AMDGPU_MACH of an AMDGPU ELF at `off`, or None."""
    if data[off:off + 4] != b"\x7fELF" or data[off + 4] != 2:
        return None
    if struct.unpack_from("<H", data, off + 18)[0] != EM_AMDGPU:
        return None
    return struct.unpack_from("<I", data, off + 48)[0] & 0xFF


def sections(data):
    """{name: (file offset, size, address)} of an ELF64."""
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        end = data.index(b"\0", stroff + h[0])
        out[data[stroff + h[0]:end].decode()] = (h[4], h[5], h[3])
    return out


def wrap_raw(code, gfx):
    """A minimal relocatable AMDGPU ELF whose .text is `code`."""
    shstr = b"\0.text\0.shstrtab\0"
    text_off = 64
    str_off = text_off + len(code)
    sh_off = (str_off + len(shstr) + 7) & ~7
    hdr = struct.pack("<4sBBBBB7xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, ELFOSABI_AMDGPU_HSA, ABI_V4,
                      1, EM_AMDGPU, 1, 0, 0, sh_off, MACH[gfx], 64, 0, 0, 64, 3, 2)
    null = bytes(64)
    text = struct.pack("<IIQQQQIIQQ", 1, 1, 0x6, 0, text_off, len(code), 0, 0, 256, 0)
    strtab = struct.pack("<IIQQQQIIQQ", 7, 3, 0, 0, str_off, len(shstr), 0, 0, 1, 0)
    body = hdr + code + shstr
    return body + bytes(sh_off - len(body)) + null + text + strtab


def from_hip_binary(path):
    data = open(path, "rb").read()
    fat = sections(data).get(".hip_fatbin")
    if not fat:
        raise harness.Failed(f"{path}: no .hip_fatbin section (not built by hipcc?)")
    base = fat[0]
    if data[base:base + len(BUNDLE_MAGIC)] != BUNDLE_MAGIC:
        raise harness.Failed(f"{path}: .hip_fatbin does not start with a clang offload bundle")
    count, = struct.unpack_from("<Q", data, base + 24)
    pos, out = base + 32, []
    for _ in range(count):
        off, size, tlen = struct.unpack_from("<QQQ", data, pos)
        triple = data[pos + 24:pos + 24 + tlen].decode()
        pos += 24 + tlen
        image = data[base + off:base + off + size]
        mach = elf_mach(image) if size else None
        if mach in GFX_OF_MACH:
            out.append(CodeObject(os.path.basename(path), GFX_OF_MACH[mach], image))
        elif size and not triple.startswith("host"):
            raise harness.Failed(f"{path}: bundle entry {triple} is not a gfx908/gfx90a ELF")
    return out


def from_rocr(path, images):
    data = open(path, "rb").read()
    out = []
    pos = -1
    while (pos := data.find(ROCR_KERNARG_LOAD, pos + 1)) >= 0:
        end = data.find(S_ENDPGM, pos)
        while end >= 0 and (end - pos) % 4:
            end = data.find(S_ENDPGM, end + 1)
        words = (end - pos) // 4 + 1
        name = ROCR_BLIT_NAMES.get(words)
        if name is None:
            raise harness.Failed(f"{path}: unknown raw kernel of {words} words at {pos:#x} "
                                 "(not one of ROCr 5.2's gfx9 blit kernels)")
        code = data[pos:end + 4]
        for gfx in MACH:
            out.append(CodeObject(f"rocr-blit-{name}", gfx, wrap_raw(code, gfx)))
    if len(out) != 2 * len(ROCR_BLIT_NAMES):
        raise harness.Failed(f"{path}: found {len(out) // 2} of ROCr's {len(ROCR_BLIT_NAMES)} gfx9 blit kernels")
    if images:
        pos = -1
        while (pos := data.find(b"\x7fELF", pos + 1)) >= 0:
            mach = elf_mach(data, pos)
            if mach in GFX_OF_MACH:
                out.append(CodeObject("rocr-image-blit", GFX_OF_MACH[mach],
                                      data[pos:pos + elf_end(data, pos)]))
    return out


def from_rocclr(path, work, targets):
    """ROCclr's blit kernels: the OpenCL source in the library, compiled for
    each of `targets` (see the module's doc)."""
    text = open(path, "rb").read()
    chunks = re.findall(rb"[ -~]{60,}", text)
    source = b"\n".join(c for c in chunks if b"__kernel void __amd_rocclr_" in c and ROCCLR_SCHEDULER not in c)
    if not source:
        raise harness.Failed(f"{path}: no __amd_rocclr_ kernel source found")
    if not shutil.which(CLANG):
        raise harness.NotRun(f"{CLANG} is absent (Debian package clang-15)")
    src = os.path.join(work, "rocclr_blit.cl")
    with open(src, "wb") as f:
        f.write(source)
    out = []
    for gfx in targets:
        co = os.path.join(work, f"rocclr_blit.{gfx}.co")
        libs = [f"{BITCODE_DIR}/{b}.bc" for b in
                ("opencl", "ocml", "ockl", "oclc_daz_opt_off", "oclc_unsafe_math_off",
                 "oclc_finite_only_off", "oclc_correctly_rounded_sqrt_on", "oclc_wavefrontsize64_on",
                 f"oclc_isa_version_{gfx[3:]}", "oclc_abi_version_400")]
        cmd = [CLANG, "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={gfx}{ROCCLR_FEATURES}", "-O3",
               "-nogpulib", "-Xclang", "-finclude-default-header", "-mcode-object-version=4"]
        for lib in libs:
            cmd += ["-Xclang", "-mlink-builtin-bitcode", "-Xclang", lib]
        r = subprocess.run(cmd + ["-o", co, src], capture_output=True, text=True)
        if r.returncode:
            raise harness.Failed(f"compiling ROCclr's blit source for {gfx}: {r.stderr.strip()[:2000]}")
        out.append(CodeObject("rocclr-blit", gfx, open(co, "rb").read()))
    return out


def collect(args, work):
    objs = []
    for b in args.hip_binary or []:
        objs += from_hip_binary(b)
    if args.rocr:
        objs += from_rocr(args.rocr, args.rocr_image)
    if args.rocclr:
        objs += from_rocclr(args.rocclr, work, [args.mcpu] if args.mcpu else list(MACH))
    if args.mcpu:
        objs = [o for o in objs if o.gfx == args.mcpu]
    if not objs:
        raise harness.NotRun("no code object source given (--hip-binary, --rocr, --rocclr)")
    # Same name and target twice (ROCr's image kernels): number them.
    seen = {}
    for o in objs:
        key = (o.name, o.gfx)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            o.name = f"{o.name}-{seen[key]}"
    return objs


def write_objects(objs, out):
    os.makedirs(out, exist_ok=True)
    paths = []
    for o in objs:
        p = os.path.join(out, f"{o.name}.{o.gfx}.co")
        with open(p, "wb") as f:
            f.write(o.data)
        paths.append(p)
    return paths


# "<text>  // <address>: <encoding words>" (llvm-objdump-15 -d).
OBJDUMP_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]+):((?:\s+[0-9A-Fa-f]{8}\b)+)")
TOOL_LINE = re.compile(r"^\s*([0-9A-Fa-f]+):\s*(.*?)\s*$")


def normalize(text):
    """One instruction's text without comments and extra blanks; ", " and
    " " as the only separators."""
    text = text.split("//")[0].split(";")[0].strip()
    text = re.sub(r"\s*,\s*", ", ", text)
    return re.sub(r"\s+", " ", text)


def objdump(tool, gfx, path, zeros=True):
    """{address: (text, size in bytes)} of every instruction llvm-objdump
    prints; with `zeros` (-z) also the runs of zero words it skips by
    default (padding, which a decoder reads as v_cndmask_b32)."""
    r = subprocess.run([tool, "-d"] + (["-z"] if zeros else []) + [f"--mcpu={gfx}", path],
                       capture_output=True, text=True)
    if r.returncode:
        raise harness.Failed(f"{tool} {path}: {r.stderr.strip()}")
    out = {}
    for line in r.stdout.splitlines():
        m = OBJDUMP_LINE.match(line)
        if m:
            out[int(m.group(2), 16)] = (normalize(m.group(1)), 4 * len(m.group(3).split()))
    return out


def tool_disasm(tool, gfx, path, text_addr):
    """{address: text} from TOOL (offsets within .text, or addresses)."""
    r = subprocess.run([tool, "--mcpu", gfx, path], capture_output=True, text=True)
    if r.returncode:
        raise harness.Failed(f"{tool} --mcpu {gfx} {path}: exit {r.returncode}: {r.stderr.strip()[:500]}")
    out = {}
    for line in r.stdout.splitlines():
        m = TOOL_LINE.match(line)
        if m:
            out[int(m.group(1), 16)] = normalize(m.group(2))
    if out and min(out) < text_addr:  # offsets within .text
        out = {a + text_addr: t for a, t in out.items()}
    return out


def mnemonic(text):
    return text.split(" ", 1)[0]


def cmd_mnemonics(args, objs, work):
    paths = write_objects(objs, work)
    table = []
    for o, p in zip(objs, paths):
        insns = objdump(args.objdump, o.gfx, p, zeros=False)
        names = sorted({mnemonic(t) for t, _ in insns.values()})
        table.append((o, len(insns), names))
    for o, n, names in table:
        if args.markdown:
            print(f"| `{o.name}` | {o.gfx} | {n} | {len(names)} | {' '.join(names)} |")
        else:
            print(f"{o.name} {o.gfx}: {n} instructions, {len(names)} mnemonics: {' '.join(names)}")
    every = sorted({m for _, _, names in table for m in names})
    print(f"all: {len(every)} distinct mnemonics: {' '.join(every)}")


NONE = "(no instruction here)"


def disagreements(want, got):
    """{address: (llvm-objdump's text, the tool's)} where they differ, the
    texts quoted: one entry per llvm-objdump instruction (what the tool
    decoded inside it, after a decode too short, joins that entry) or per
    tool line outside every instruction."""
    starts = sorted(want)
    bad = {a: (t, [f"'{got.get(a, NONE)}'"]) for a, (t, _) in want.items() if got.get(a) != t}
    for a, g in sorted(got.items()):
        if a in want:
            continue
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and a < starts[i] + want[starts[i]][1]:
            s = starts[i]
            bad.setdefault(s, (want[s][0], [f"'{got.get(s, NONE)}'"]))[1].append(f"then '{g}' at +{a - s}")
        else:
            bad[a] = (NONE, [f"'{g}'"])
    return {a: (f"'{w}'", ", ".join(g)) for a, (w, g) in bad.items()}


def cmd_compare(args, objs, work):
    if not shutil.which(args.objdump):
        raise harness.NotRun(f"{args.objdump} is absent (Debian package llvm-15)")
    if not os.access(args.disasm, os.X_OK):
        raise harness.NotRun(f"the shader disassembler {args.disasm} is not built")
    paths = write_objects(objs, work)
    total, bad = 0, []
    for o, p in zip(objs, paths):
        text = sections(o.data)[".text"]
        want = objdump(args.objdump, o.gfx, p)
        got = tool_disasm(args.disasm, o.gfx, p, text[2])
        total += len(want)
        for addr, (w, g) in sorted(disagreements(want, got).items()):
            bad.append(f"{o.name}.{o.gfx} {addr:#x}: llvm-objdump {w} / {os.path.basename(args.disasm)} {g}")
        harness.log(f"{o.name}.{o.gfx}: {len(want)} instructions")
    for b in bad:
        harness.log(b)
    harness.log(f"{len(bad)} disagreements in {total} instructions of {len(objs)} code objects ({args.mcpu})")
    harness.check(total > 0, f"no instruction to compare for {args.mcpu}")
    harness.check(not bad, f"{len(bad)} disagreements")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["extract", "mnemonics", "compare"])
    p.add_argument("--hip-binary", action="append")
    p.add_argument("--rocr")
    p.add_argument("--rocr-image", action="store_true")
    p.add_argument("--rocclr")
    p.add_argument("--out")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--mcpu", choices=sorted(MACH))
    p.add_argument("--disasm")
    p.add_argument("--objdump", default="llvm-objdump-15")
    args = p.parse_args()
    if args.command == "compare" and not (args.mcpu and args.disasm):
        p.error("compare needs --mcpu and --disasm")
    if args.command == "extract" and not args.out:
        p.error("extract needs --out")

    def body():
        with tempfile.TemporaryDirectory(prefix="code_objects.") as work:
            objs = collect(args, work)
            if args.command == "extract":
                for path in write_objects(objs, args.out):
                    print(path)
            elif args.command == "mnemonics":
                cmd_mnemonics(args, objs, os.path.join(work, "co"))
            else:
                cmd_compare(args, objs, os.path.join(work, "co"))
    if args.command == "compare":
        harness.main_guard(body)
    else:
        with harness.not_run():
            body()


if __name__ == "__main__":
    main()
