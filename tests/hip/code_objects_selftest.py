#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The comparison of code_objects.py checked on itself: with
disasm_standin.py (llvm-objdump's own text in kfdemu-shader-disasm's
format) as the disassembler it must pass; with the stand-in's --corrupt
(every 100th instruction's operands changed, every 50th of each hundred
dropped) it must fail and count exactly those disagreements.

  code_objects_selftest.py --mcpu GFX [--objdump LLVM_OBJDUMP] [SOURCES]
(SOURCES as code_objects.py takes them.)
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, HERE)
import code_objects  # noqa: E402
import harness  # noqa: E402


def compare(args, disasm):
    cmd = [sys.executable, os.path.join(HERE, "code_objects.py"), "compare", "--disasm", disasm] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def body():
    args = sys.argv[1:]
    objdump = args[args.index("--objdump") + 1] if "--objdump" in args else "llvm-objdump-15"
    mcpu = args[args.index("--mcpu") + 1]
    env_standin = os.path.join(HERE, "disasm_standin.py")
    with tempfile.TemporaryDirectory(prefix="code_objects_selftest.") as work:
        # The stand-ins as executables (compare runs TOOL --mcpu GFX FILE).
        tools = {}
        for name, extra in (("same", ""), ("corrupt", " --corrupt")):
            tools[name] = os.path.join(work, name)
            with open(tools[name], "w") as f:
                f.write(f"#!/bin/sh\nLLVM_OBJDUMP='{objdump}' exec '{sys.executable}' '{env_standin}'{extra} \"$@\"\n")
            os.chmod(tools[name], 0o755)
        r = compare(args, tools["same"])
        harness.log(r.stdout.strip())
        if r.returncode == harness.NOT_RUN:
            raise harness.NotRun(r.stdout.strip().splitlines()[-1])
        harness.check(r.returncode == 0, f"the same disassembly compared as different: {r.stderr.strip()}")
        counts = [int(n) for n in re.findall(r"^\S+: (\d+) instructions$", r.stdout, re.M)]
        want = sum(len([k for k in range(n) if k % 100 in (50, 99)]) for n in counts)
        harness.check(want > 0, "too few instructions to corrupt any")
        r = compare(args, tools["corrupt"])
        harness.log("\n".join(r.stdout.strip().splitlines()[-3:]))
        m = re.search(r"^(\d+) disagreements in", r.stdout, re.M)
        harness.check(r.returncode == 1 and m and int(m.group(1)) == want,
                      f"a corrupted disassembly: expected exit 1 and {want} disagreements, got exit "
                      f"{r.returncode} and {m.group(1) if m else 'no count'}")
        harness.log(f"{mcpu}: the comparison passes the same text and finds all {want} corrupted instructions")


if __name__ == "__main__":
    harness.main_guard(body)
