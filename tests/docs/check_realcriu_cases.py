#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The emulator README's real-CRIU case table against the scenario tables
(CTest docs_realcriu_cases).

    check_realcriu_cases.py --source DIR

The tests emu_realcriu_<version>_<case> are registered (tests/emulator/
criu/criu.cmake, hostile_dir.cmake) from the `--list` of the scripts in
SCRIPTS, one JSON object per test, from the rows of their scenario tables.
tests/emulator/README.md, "Real CRIU", describes them in a table whose
first column (`case`) names them, in backquotes, several to a cell, with
`{a,b}` standing for each of its alternatives (`x_{a,b}_{c,d}`: x_a_c,
x_a_d, x_b_c, x_b_d). Checked, both ways:
  - every test of every --list is named by one row: a new scenario row
    needs its README row (what it does, what it proves);
  - every name of the table is a test of some --list: a renamed or
    removed test leaves no stale row;
  - no test is named by two rows;
  - what a test runs with beyond its scenario, in its --list entry (a
    kfd-emu fault rule from the start, `--emu-fault RULE`; an environment
    variable, `NAME=VALUE`), is written in its row as the list has it.
The rows' prose is not compared with the scenarios' `doc` (their --help):
the README says more (what each check proves, how it fails without the
fix), and neither is generated from the other.

Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import re
import subprocess
import sys

README = os.path.join("tests", "emulator", "README.md")
SCRIPTS = [os.path.join("tests", "emulator", "criu", s)
           for s in ("realcriu_test.py", "hostile_dir_test.py", "verify_parity_test.py")]
SECTION = "## Real CRIU"
HEADER = "| case | passes when |"
NAME = re.compile(r"[A-Za-z0-9_]+")


def fail(problems):
    print("\n  ".join(["FAIL: the real-CRIU case table of " + README + ":"] + problems))
    sys.exit(1)


def listed_tests(src):
    """{test name: (script, its --list entry)} of every script in SCRIPTS."""
    tests, problems = {}, []
    for script in SCRIPTS:
        r = subprocess.run([sys.executable, os.path.join(src, script), "--list"], capture_output=True, text=True)
        if r.returncode != 0:
            fail([f"{script} --list failed ({r.returncode}): {r.stderr.strip()}"])
        entries = json.loads(r.stdout)
        if not entries:
            fail([f"{script} --list registers no test: the check would prove nothing"])
        for e in entries:
            if e["name"] in tests:
                problems.append(f"{e['name']} is registered by both {tests[e['name']][0]} and {script}")
            tests[e["name"]] = (script, e)
    return tests, problems


def expand(pattern):
    """The names `pattern` stands for: each {a,b,..} one of its alternatives."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [n for alt in m.group(1).split(",")
            for n in expand(pattern[:m.start()] + alt + pattern[m.end():])]


def table_rows(src):
    """[(line number, [names], row text)] of the case table, and problems."""
    lines = open(os.path.join(src, README)).read().split("\n")
    try:
        start = lines.index(SECTION)
        head = lines.index(HEADER, start)
    except ValueError:
        fail([f"no table headed '{HEADER}' under '{SECTION}'"])
    rows, problems = [], []
    n = head + 2  # past the header and its |---|---| line
    while n < len(lines) and lines[n].startswith("|"):
        cell = lines[n][1:].split("|", 1)[0]
        patterns = re.findall(r"`([^`]*)`", cell)
        if not patterns:
            problems.append(f"line {n + 1}: the row names no test in backquotes: {cell.strip()}")
        names = []
        for pattern in patterns:
            for name in expand(pattern):
                if NAME.fullmatch(name):
                    names.append(name)
                else:
                    problems.append(f"line {n + 1}: `{pattern}` in the case column is not a test name "
                                    "(letters, digits, '_' and {a,b} alternatives)")
        rows.append((n + 1, names, lines[n]))
        n += 1
    if not rows:
        fail([f"the table headed '{HEADER}' has no row"])
    return rows, problems


def settings(entry):
    """What a test runs with beyond its scenario, as its row must say it."""
    args = entry["args"]
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--emu-fault"] + list(entry["env"])


def check(src):
    tests, problems = listed_tests(src)
    rows, bad = table_rows(src)
    problems += bad
    row_of = {}
    for line, names, text in rows:
        for name in names:
            if name in row_of:
                problems.append(f"{name} is named by the rows of lines {row_of[name][0]} and {line}: "
                                "describe each test in one row")
                continue
            row_of[name] = (line, text)
    for name, (script, entry) in tests.items():
        if name not in row_of:
            problems.append(f"emu_realcriu_*_{name} ({script} --list, scenario {entry['scenario']}) has no row: "
                            "add one saying what it does and what it proves")
            continue
        line, text = row_of[name]
        for s in settings(entry):
            if s not in text:
                problems.append(f"line {line}: the row of {name} does not say `{s}`, which {script} --list "
                                "gives it")
    for name, (line, _) in sorted(row_of.items(), key=lambda x: x[1][0]):
        if name not in tests:
            scripts = ", ".join(map(os.path.basename, SCRIPTS))
            problems.append(f"line {line}: `{name}` is a test of no --list ({scripts}): a stale row, renamed or "
                            "removed")
    if problems:
        fail(problems)
    print(f"{len(tests)} tests of {len(SCRIPTS)} scripts' --list, each named by one of the {len(rows)} rows of "
          f"{README}'s case table, which names no other")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    check(ap.parse_args().source)
    print("PASS")


if __name__ == "__main__":
    main()
