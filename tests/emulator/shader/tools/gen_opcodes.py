#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Generates opcodes.inc: the GFX9 opcode numbers, names and operand layouts
of gfx908 and gfx90a, as LLVM's own disassembler (llvm-mc-15) reports them.

For every encoding family and every opcode number it builds one probe
instruction whose register fields hold distinctive numbers (vdst 8, src0 16,
src1 24, src2 32), disassembles all probes in one llvm-mc run, keeps the
probes that decode as a whole, and turns the printed operands into a template
(%<field><width><kind>) the disassembler fills in. The opcode numbers are
facts of the ISA; this script only reads them off the reference tool, so the
table is regenerated rather than edited:

  tests/emulator/shader/tools/gen_opcodes.py > tests/emulator/shader/opcodes.inc
"""
import re
import subprocess
import sys

LLVM_MC = "llvm-mc-15"


def words(*ws):
    return b"".join(w.to_bytes(4, "little") for w in ws)


def probes():
    """(family, opcode, [(bytes, field->probe number)]): every family's
    opcodes, each with variants that leave fields an instruction does not
    use at zero (LLVM rejects some encodings with stray bits there)."""
    out = []

    def add(fam, op, *variants):
        out.append((fam, op, list(variants)))

    for op in range(0x60):  # SOP2: sdst 8, ssrc0 16, ssrc1 24
        add("SOP2", op, (words(0x80000000 | op << 23 | 8 << 16 | 24 << 8 | 16), {"D": 8, "A": 16, "B": 24}))
    for op in range(0x1D):  # SOPK (0x1d-0x1f are SOP1/SOPC/SOPP)
        add("SOPK", op, (words(0xB0000000 | op << 23 | 8 << 16 | 0x1234), {"D": 8}))
    for op in range(256):  # SOP1
        add("SOP1", op, (words(0xBE800000 | 8 << 16 | op << 8 | 16), {"D": 8, "A": 16}),
            (words(0xBE800000 | op << 8 | 16), {"A": 16}),
            (words(0xBE800000 | 8 << 16 | op << 8), {"D": 8}))
    for op in range(128):  # SOPC
        add("SOPC", op, (words(0xBF000000 | op << 16 | 24 << 8 | 16), {"A": 16, "B": 24}))
    for op in range(128):  # SOPP
        add("SOPP", op, (words(0xBF800000 | op << 16 | 0x10), {}), (words(0xBF800000 | op << 16), {}))
    for op in range(256):  # SMEM: sdata 8, sbase s[16:17], imm offset 0x123
        add("SMEM", op, (words(0xC0000000 | op << 18 | 1 << 17 | 8 << 6 | 8, 0x123), {"D": 8, "A": 16}),
            (words(0xC0000000 | op << 18 | 1 << 17, 0), {}))
    for op in range(63):  # VOP2 (madmk/madak/fmamk/fmaak carry a literal)
        f = {"D": 8, "A": 16, "B": 24}
        add("VOP2", op, (words(op << 25 | 8 << 17 | 24 << 9 | 272), f),
            (words(op << 25 | 8 << 17 | 24 << 9 | 272, 0x11223344), f))
    for op in range(256):  # VOP1
        add("VOP1", op, (words(0x7E000000 | 8 << 17 | op << 9 | 272), {"D": 8, "A": 16}),
            (words(0x7E000000 | op << 9), {}))
    for op in range(256):  # VOPC
        add("VOPC", op, (words(0x7C000000 | op << 17 | 24 << 9 | 272), {"A": 16, "B": 24}))
    # VOP3: vdst 8, src 16/24/32, sdst (VOP3b) s[0:1]. Opcodes from 0x380
    # on are VOP3P's space (bits 31:23 0x1a7), probed below as VOP3P.
    for op in range(0x380):
        f = {"D": 8, "A": 16, "B": 24, "C": 32, "E": 0}
        add("VOP3", op, *[(words(0xD0000000 | op << 16 | 8, srcs), f)
                          for srcs in (272 | 280 << 9 | 288 << 18, 272 | 280 << 9, 272, 0)])
    for op in range(128):  # VOP3P, op_sel_hi all set (the default) or clear (MAI);
        # one source for v_accvgpr_read/write
        f = {"D": 8, "A": 16, "B": 24, "C": 32}
        add("VOP3P", op, *[(words(0xD3800000 | op << 16 | hi << 14 | 8, srcs | (3 * hi) << 27), f)
                           for hi in (1, 0) for srcs in (272 | 280 << 9 | 288 << 18, 272 | 280 << 9, 272)])
    for op in range(256):  # DS: vdst 8, addr 16, data0 24, data1 32
        # and with the gds bit (16), which the GWS opcodes (ds_gws_init...)
        # require: LLVM rejects them without it. The disassembler prints
        # `gds` from the bit, so template() leaves it out.
        f = {"D": 8, "A": 16, "B": 24, "C": 32}
        add("DS", op, *[(words(0xD8000000 | gds << 16 | op << 17, w), f) for gds in (0, 1) for w in (
            16 | 24 << 8 | 32 << 16 | 8 << 24, 16 | 24 << 8 | 8 << 24, 16 | 8 << 24,
            16 | 24 << 8 | 32 << 16, 16 | 24 << 8, 16, 24 << 8, 8 << 24, 0)])
    for seg, fam in ((0, "FLAT"), (1, "SCRATCH"), (2, "GLOBAL")):
        for op in range(128):  # vdst 8, addr 16, data 24
            f = {"D": 8, "A": 16, "B": 24}
            saddr = 0 if fam == "FLAT" else 0x7F  # FLAT has no saddr (0); off for the others
            add(fam, op, *[(words(0xDC000000 | op << 18 | seg << 14, w | saddr << 16), f)
                           for w in (16 | 24 << 8 | 8 << 24, 16 | 8 << 24, 16 | 24 << 8)])
    for op in range(128):  # MUBUF: vdata 8, srsrc s[16:19], soffset s44, no vaddr
        add("MUBUF", op, (words(0xE0000000 | op << 18, 16 | 8 << 8 | 4 << 16 | 44 << 24),
                          {"D": 8, "R": 16, "O": 44}))
    for op in range(128):  # MIMG: vdata 8, vaddr 16, srsrc s[24:31], ssamp s[40:43], dmask 1
        f = {"D": 8, "A": 16, "R": 24, "S": 40}
        add("MIMG", op, (words(0xF0000000 | op << 18 | 1 << 8, 16 | 8 << 8 | 6 << 16 | 10 << 21), f),
            (words(0xF0000000 | op << 18 | 1 << 8, 16 | 8 << 8 | 6 << 16), f))
    return out


REG = re.compile(r"^(v|s|a|ttmp)(?:(\d+)|\[(\d+):(\d+)\])$")


def template(fam, text, fields):
    ops = [t.strip() for t in text.split(",")] if text else []
    tail = ""
    if ops and " " in ops[-1]:
        ops[-1], tail = ops[-1].split(" ", 1)
    if fam == "DS":
        ops = [o for o in ops if o != "gds"]
        tail = " ".join(t for t in tail.split() if t != "gds")
    tmpl = []
    for o in ops:
        m = REG.match(o)
        if m:
            lo = int(m.group(2) or m.group(3))
            width = 1 if m.group(2) else int(m.group(4)) - lo + 1
            for f, n in fields.items():
                if n == lo and not (f == "E" and m.group(1) != "s"):
                    tmpl.append("%" + f + str(width) + m.group(1)[0])
                    break
            else:
                tmpl.append(o)
        elif o == "0x123" and fam == "SMEM":
            tmpl.append("%O")
        elif o == "0x11223344":
            tmpl.append("%L")
        elif o == "0x1234" and fam == "SOPK":
            tmpl.append("%K")
        else:
            tmpl.append(o)
    return ", ".join(tmpl) + (" " + tail if tail else "")


def run(cpu):
    # llvm-mc decodes its input as one byte stream and skips an invalid word
    # 4 bytes at a time, so a rejected probe's tail decodes as junk that may
    # run into the next probe. Each probe is therefore followed by three
    # `s_movk_i32 s0, <index>` markers (more than junk can swallow); a probe
    # decodes when the first instruction after the previous marker spans it
    # whole.
    ps = [(fam, op, enc, f) for fam, op, vs in probes() for enc, f in vs]
    lines = []
    for i, p in enumerate(ps):
        enc = p[2] + words(*([0xB0000000 | i] * 3))
        lines.append(",".join("0x%02x" % b for b in enc))
    r = subprocess.run([LLVM_MC, "-disassemble", "-arch=amdgcn", "-mcpu=" + cpu, "-show-encoding"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    groups = [[] for _ in ps]
    i = 0
    for line in r.stdout.splitlines():
        m = re.match(r"\s+(\S+)\s*(.*?)\s*; encoding: \[(.*)\]", line)
        if not m:
            continue
        if m.group(1) == "s_movk_i32" and m.group(2).startswith("s0, "):
            i = max(i, int(m.group(2)[4:], 16) + 1)
            continue
        if i < len(ps):
            groups[i].append((m.group(1), m.group(2), len(m.group(3).split(","))))
    # Of an opcode's variants that decode, the one printing the fewest
    # modifiers (the others set bits the opcode reads as modifiers).
    best = {}
    for (fam, op, enc, fields), g in zip(ps, groups):
        if g and g[0][2] == len(enc):
            name, text = g[0][0], g[0][1]
            score = len(text.split())
            if (fam, op) not in best or score < best[(fam, op)][0]:
                best[(fam, op)] = (score, name, template(fam, text, fields))
    rows = [(fam, op, name, tmpl) for (fam, op), (_, name, tmpl) in sorted(best.items())]
    return rows


def main():
    print("// SPDX-License-Identifier: GPL-2.0-only")
    print("// Generated by tools/gen_opcodes.py from llvm-mc-15's disassembler: do not edit.")
    print("// OP(target, family, opcode, mnemonic, operand template)")
    enum = {"SOP2": "Sop2", "SOPK": "Sopk", "SOP1": "Sop1", "SOPC": "Sopc", "SOPP": "Sopp",
            "SMEM": "Smem", "VOP2": "Vop2", "VOP1": "Vop1", "VOPC": "Vopc", "VOP3": "Vop3",
            "VOP3P": "Vop3p", "DS": "Ds", "FLAT": "Flat", "SCRATCH": "Scratch",
            "GLOBAL": "Global", "MUBUF": "Mubuf", "MIMG": "Mimg"}
    for cpu, tgt in (("gfx908", "Gfx908"), ("gfx90a", "Gfx90a")):
        for fam, op, name, tmpl in run(cpu):
            print('OP(%s, %s, 0x%x, "%s", "%s")' % (tgt, enum[fam], op, name, tmpl))


if __name__ == "__main__":
    sys.exit(main())
