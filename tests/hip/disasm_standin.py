#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A stand-in for kfdemu-shader-disasm made of llvm-objdump-15, to check
code_objects.py's comparison itself (hip_code_objects_selftest).

  disasm_standin.py [--corrupt] --mcpu GFX FILE

Prints each instruction of FILE's .text as kfdemu-shader-disasm does,
"<hex offset within .text>: <mnemonic> <operands>", with its own spacing
(columns aligned, no comments). --corrupt changes the operands of every
100th instruction and drops the 50th, so that the comparison must find
and count those disagreements.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import code_objects  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mcpu", required=True)
    p.add_argument("--corrupt", action="store_true")
    p.add_argument("file")
    a = p.parse_args()
    base = code_objects.sections(open(a.file, "rb").read())[".text"][2]
    insns = code_objects.objdump(os.environ.get("LLVM_OBJDUMP", "llvm-objdump-15"), a.mcpu, a.file)
    for k, (addr, (text, _)) in enumerate(sorted(insns.items())):
        if a.corrupt and k % 100 == 50:
            continue
        if a.corrupt and k % 100 == 99:
            text += ", v0"
        name, _, ops = text.partition(" ")
        print(f"{addr - base:x}:  {name:<24}{ops.replace(', ', ',  ')}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.SubprocessError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
