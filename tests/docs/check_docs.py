#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The documents against the code (CTest docs_*).

    check_docs.py --source DIR markup     every man/*.adoc renders without an
                                          asciidoctor warning, and the rendered
                                          text has no markup left over (a '*'
                                          or '_' that asciidoctor did not take)
    check_docs.py --source DIR variables  the KFD_* variables the sources read
                                          (string literals under src/) are the
                                          ones README.md and every man page
                                          that names one document, both ways
    check_docs.py --source DIR messages   every message the man pages quote
                                          as the plugin's (a TROUBLESHOOTING
                                          or DIAGNOSTICS term not marked
                                          "(from CRIU)") is in the sources:
                                          each literal piece of it between
                                          placeholders ("...", _italic_
                                          words) occurs in src/
    check_docs.py --source DIR message_style  the plugin's messages name GPUs
                                          one way, "gpu 0x%04x" (src/base/
                                          log.h): no format string under src/
                                          (but the inspector's) prints a
                                          gpu_id in decimal or another hex form

Exit 0 pass, 1 fail, 77 NOT RUN (markup: asciidoctor or man missing).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

NOT_RUN = 77
VAR = re.compile(r"KFD_[A-Z0-9_]*[A-Z0-9]")
# Rendered text may show these literally: a pattern of variable names.
ALLOWED_STARS = ("KFD_*_CHECK",)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def sources(src, exts=(".cpp", ".h")):
    for d, _, files in os.walk(os.path.join(src, "src")):
        for f in files:
            if f.endswith(exts):
                yield os.path.join(d, f)


def man_pages(src):
    return sorted(glob.glob(os.path.join(src, "man", "*.adoc")))


def case_markup(src):
    for tool in ("asciidoctor", "man"):
        if not shutil.which(tool):
            print(f"NOT RUN: {tool} is not installed (scripts/install-deps.sh installs it)")
            sys.exit(NOT_RUN)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for page in man_pages(src):
            out = os.path.join(tmp, os.path.basename(page)[:-5] + ".1")
            r = subprocess.run(["asciidoctor", "-b", "manpage", "--failure-level=WARN", "-o", out, page],
                               capture_output=True, text=True)
            if r.returncode != 0 or r.stderr.strip():
                problems.append(f"{page}: asciidoctor: {r.stderr.strip()}")
                continue
            # Not a terminal: man(1) prints plain text (no overstrike).
            text = subprocess.run(["man", "-l", out], capture_output=True, text=True,
                                  env=dict(os.environ, MANWIDTH="200")).stdout
            for n, line in enumerate(text.splitlines(), 1):
                clean = line
                for ok in ALLOWED_STARS:
                    clean = clean.replace(ok, "")
                if "*" in clean or re.search(r"(^|[\s(])_\w|\w_($|[\s).,:;])", clean):
                    problems.append(f"{os.path.basename(page)}: rendered line {n} has markup left: {line.strip()}")
            print(f"{os.path.basename(page)}: rendered cleanly")
    if problems:
        fail("\n  ".join(["man page markup:"] + problems))


def case_variables(src):
    code = set()
    for f in sources(src):
        code.update(re.findall(r'"(KFD_[A-Z0-9_]*[A-Z0-9])"', open(f, errors="replace").read()))
    if not code:
        fail("no KFD_* variable found in src/: the check would prove nothing")
    docs = {"README.md": os.path.join(src, "README.md")}
    docs.update({os.path.basename(p): p for p in man_pages(src)})
    problems = []
    for name, path in docs.items():
        named = set(VAR.findall(open(path).read()))
        if not named and name != "README.md":
            continue  # a man page about something else (no variables)
        for v in sorted(code - named):
            problems.append(f"{name} does not document {v}, which src/ reads")
        for v in sorted(named - code):
            problems.append(f"{name} documents {v}, which nothing in src/ reads")
    if problems:
        fail("\n  ".join(["KFD_* variables:"] + problems))
    print(f"{len(code)} KFD_* variables, documented in {', '.join(docs)}: {', '.join(sorted(code))}")


def quoted_messages(page):
    """The TROUBLESHOOTING and DIAGNOSTICS terms of a man page that quote
    the plugin."""
    text = open(page).read()
    out = []
    for section in ("TROUBLESHOOTING", "DIAGNOSTICS"):
        m = re.search(r"^== " + section + r"\n(.*?)(^== |\Z)", text, re.S | re.M)
        if not m:
            continue
        for term in re.findall(r"^(.+)::\s*$", m.group(1), re.M):
            if "(from CRIU)" in term or not term.startswith("*"):
                continue
            out.append(term)
    return out


def literal_pieces(term):
    # Italic words are placeholders; "..." stands for any text; bold is markup.
    t = re.sub(r"__[^_]+__|(?<![\w])_[^_]+_(?![\w])", "\x00", term)
    t = t.replace("...", "\x00").replace("*", "")
    return [p.strip() for p in t.split("\x00") if len(p.strip()) >= 6]


def case_messages(src):
    code = "\n".join(open(f, errors="replace").read() for f in sources(src))
    problems, checked = [], 0
    for page in man_pages(src):
        for term in quoted_messages(page):
            for piece in literal_pieces(term):
                checked += 1
                if piece not in code:
                    problems.append(f"{os.path.basename(page)} quotes \"{piece}\" (in {term}), "
                                    "which no source file under src/ contains")
    if checked == 0:
        fail("no quoted plugin message found in the man pages: the check would prove nothing")
    if problems:
        fail("\n  ".join(["quoted messages:"] + problems))
    print(f"{checked} quoted message pieces found in src/")


# A gpu_id printed any other way than "gpu 0x%04x": in decimal, unpadded,
# or as "GPU 0x"/"gpu_id 0x".
OTHER_GPU_FORMS = re.compile(r"(?i:gpu(?:_id)?) %[0-9]*[ud]|(?i:gpu(?:_id)?) 0x%[0-9]*[xX]|GPU 0x%04x|gpu_id 0x%04x")


def case_message_style(src):
    problems, formats = [], 0
    for f in sources(src):
        if os.sep + "inspect" + os.sep in f:
            continue  # amdgpu-img's own output format (man amdgpu-img)
        for n, line in enumerate(open(f, errors="replace"), 1):
            for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', line):
                if "%" not in lit:
                    continue
                formats += 1
                for m in OTHER_GPU_FORMS.finditer(lit):
                    if m.group(0) != "gpu 0x%04x":
                        problems.append(f"{os.path.relpath(f, src)}:{n}: \"{m.group(0)}\" in \"{lit}\"")
    if formats == 0:
        fail("no format string found under src/: the check would prove nothing")
    if problems:
        fail("\n  ".join(["GPU ids not written \"gpu 0x%04x\":"] + problems))
    print(f"{formats} format strings: every GPU id is written gpu 0x%04x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("case", choices=["markup", "variables", "messages", "message_style"])
    a = ap.parse_args()
    {"markup": case_markup, "variables": case_variables, "messages": case_messages,
     "message_style": case_message_style}[a.case](a.source)
    print("PASS")


if __name__ == "__main__":
    main()
