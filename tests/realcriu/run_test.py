#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The plugin under a real CRIU binary (CTest realcriu_<version>_<case>).

    run_test.py --criu-list LIST --criu-version VER --plugin amdgpu_plugin.so \
                --bins DIR --work DIR CASE

LIST is scripts/build-criu.sh's list of binaries; DIR holds this folder's
build products (witness, greedy and tap libraries, the counter). Cases:

  abi             CRIU loads amdgpu_plugin: its log shows 'Plugin
                  "amdgpu_plugin" (version 512 hooks N)' with N = the hook
                  slots of that CRIU (13 in 4.2.1, 15 in criu-dev), and no
                  "Corrupted plugin".
  plain           a GPU-less counter is dumped and restored with
                  amdgpu_plugin loaded before the witness plugin: both
                  succeed, the counter goes on from where it was, no error or
                  warning from amdgpu_plugin (CRIU's log and the level tap),
                  and the witness received exactly the hooks that CRIU calls
                  for such a process.
  greedy_control  the same with a greedy plugin between the two, which
                  claims PAUSE_DEVICES and POST_FORKING: passes only when the
                  checks report exactly those two hooks missing at the
                  witness and the greedy plugin's two warnings, i.e. the
                  checks of `plain` can fail.
  warning_control the same as plain with KFD_MAX_BUFFER_SIZE invalid, which
                  amdgpu_plugin warns about at each init: passes only when the
                  level tap reports exactly those two warnings, i.e. it sees
                  amdgpu_plugin's own messages.

Exit 0 pass, 1 fail, 77 NOT RUN (no CRIU, not root, CRIU unusable here).
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import harness  # noqa: E402
import realcriu as rc  # noqa: E402
from harness import Failed, log  # noqa: E402

PLUGIN = "amdgpu_plugin"
GREEDY = "realcriu_greedy"


class Setup:
    def __init__(self, a):
        self.criu = rc.find_criu(a.criu_list, a.criu_version)
        if not os.path.exists(a.plugin):
            raise Failed(f"{a.plugin} is not built")
        rc.require_usable(self.criu)
        self.hooks = rc.criu_hook_count(self.criu)
        log(f"criu {a.criu_version}: {self.criu}, {self.hooks} hook slots (from cr_plugin_ctl)")
        if self.hooks not in (13, 15):
            raise Failed(f"{self.criu} has {self.hooks} hook slots; the witness knows 13 and 15")
        self.plugin = a.plugin
        self.witness = os.path.join(a.bins, f"realcriu_witness{self.hooks}.so")
        self.greedy = os.path.join(a.bins, "realcriu_greedy.so")
        self.tap = os.path.join(a.bins, "realcriu_log_tap.so")
        self.counter = os.path.join(a.bins, "realcriu-counter")
        self.work = os.path.abspath(a.work)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)


def check_plugin_line(run, hooks, what):
    lines = rc.plugin_lines(run.log)
    mine = [l for l in lines if l[0] == PLUGIN]
    want = (PLUGIN, 512, hooks)
    if mine != [want]:
        raise Failed(f"{what}: CRIU logged plugins {lines}, expected {want} once\n{run.describe()}")
    log(f'{what}: CRIU logged Plugin "{PLUGIN}" (version 512 hooks {hooks})')


def case_abi(s):
    libdir = os.path.join(s.work, "lib")
    rc.make_libdir(libdir, [(PLUGIN, s.plugin)])
    pid, _ = rc.start_counter(s.counter, s.work)
    criu = rc.Criu(s.criu, libdir, s.work)
    try:
        run = criu.dump(pid, os.path.join(s.work, "images"))
    finally:
        rc.end_process(pid)
    problems = rc.log_problems(run.log, [PLUGIN])
    if problems:
        raise Failed("CRIU's log:\n  " + "\n  ".join(problems))
    check_plugin_line(run, s.hooks, "dump")
    if not run.ok():
        raise Failed(f"dump failed\n{run.describe()}")


def round_trip(s, plugins, extra_env=None):
    """Counter dumped and restored with `plugins` (stems, in load order),
    CRIU's environment plus `extra_env`. Returns the list of problems found
    (empty when all is well); raises Failed when CRIU itself failed."""
    paths = {PLUGIN: s.plugin, GREEDY: s.greedy, rc.WITNESS: s.witness}
    libdir = os.path.join(s.work, "lib")
    names = rc.make_libdir(libdir, [(p, paths[p]) for p in plugins])
    log(f"plugin directory in readdir (= load) order: {[names[p] for p in plugins]}")
    tap = {ph: os.path.join(s.work, f"tap-{ph}.txt") for ph in ("dump", "restore")}
    witness = {ph: os.path.join(s.work, f"witness-{ph}.txt") for ph in ("dump", "restore")}
    images = os.path.join(s.work, "images")
    pidfile = os.path.join(s.work, "restored.pid")
    harness.become_subreaper()

    pid, counts_path = rc.start_counter(s.counter, s.work)
    env = dict(extra_env or {}, REALCRIU_LOG_TAP=tap["dump"], REALCRIU_WITNESS_LOG=witness["dump"])
    try:
        dump = rc.Criu(s.criu, libdir, s.work, env, s.tap).dump(pid, images)
    finally:
        status = rc.end_process(pid)  # reaps the dumped task: its pid is free again
    if not dump.ok():
        raise Failed(f"dump failed\n{dump.describe()}")
    log(f"dump: ok (the task ended with wait status {status:#x})")
    before = rc.read_counts(counts_path)

    env.update(REALCRIU_LOG_TAP=tap["restore"], REALCRIU_WITNESS_LOG=witness["restore"])
    restore = rc.Criu(s.criu, libdir, s.work, env, s.tap).restore(images, pidfile)
    if not restore.ok():
        raise Failed(f"restore failed\n{restore.describe()}")
    with open(pidfile) as f:
        restored = int(f.read())
    try:
        if restored != pid:
            raise Failed(f"restored pid {restored}, dumped {pid}")
        grew = rc.wait_counts(counts_path, len(before) + 20)
    finally:
        rc.end_process(restored)
    after = rc.read_counts(counts_path)
    if not grew:
        raise Failed(f"the restored counter stopped at {len(after)} lines (was {len(before)})")
    bad = rc.counts_problem(after)
    if bad:
        raise Failed(f"the restored counter did not continue: {bad}")
    log(f"restore: ok; the counter went on from {before[-1]} to {after[-1]} without a gap")

    problems = []
    for run, what in ((dump, "dump"), (restore, "restore")):
        # The stems are the descriptors' names.
        order = [l[0] for l in rc.plugin_lines(run.log)]
        if order != plugins:
            raise Failed(f"{what}: CRIU loaded {order}, wanted {plugins}")
        check_plugin_line(run, s.hooks, what)
        problems += [f"criu log: {what}: {l}" for l in rc.log_problems(run.log, [names[PLUGIN], PLUGIN])]
        # No GPU state, so no guardian (plugin/guardian.h; the emulated
        # round trips see the same line when there is GPU state).
        problems += [f"criu log: {what}: a guardian without GPU state: {l}" for l in run.log.splitlines()
                     if "amdgpu_plugin: guardian started" in l]
    log(f"CRIU loaded the plugins in the order {plugins} (its log)")

    for phase in ("dump", "restore"):
        taps = rc.read_tap(tap[phase])
        for p in plugins:
            problems += [f"tap: {phase}: {p}: {m}" for m in rc.tap_problems(taps, names[p])]
        log(f"level tap: {phase}: {len(taps)} plugin messages, "
            f"{sum(1 for t in taps if t[1] == names[PLUGIN])} from {PLUGIN}")

    exp_dump, exp_restore = rc.expected_plain_events(s.hooks, pid)
    for phase, expected in (("dump", exp_dump), ("restore", exp_restore)):
        actual = rc.read_witness(witness[phase])
        log(f"witness: {phase}: {actual}")
        problems += rc.witness_problems(phase, actual, expected)
    return problems, pid


def case_plain(s):
    problems, _ = round_trip(s, [PLUGIN, rc.WITNESS])
    if problems:
        raise Failed("\n  " + "\n  ".join(problems))


def case_greedy_control(s):
    problems, pid = round_trip(s, [PLUGIN, GREEDY, rc.WITNESS])
    expected = [f"witness: dump: missing PAUSE_DEVICES pid={pid}",
                "witness: restore: missing POST_FORKING"]
    expected += [f"tap: {ph}: {GREEDY}: level 2: {GREEDY}: swallowed {h}"
                 for ph, h in (("dump", "PAUSE_DEVICES"), ("restore", "POST_FORKING"))]
    log("the checks reported (expected exactly the greedy plugin's effects):\n  " + "\n  ".join(problems))
    if sorted(problems) != sorted(expected):
        raise Failed("the checks did not report exactly the greedy plugin's effects; expected:\n  "
                     + "\n  ".join(expected))


def case_warning_control(s):
    bad = "not-a-size"
    problems, _ = round_trip(s, [PLUGIN, rc.WITNESS], {"KFD_MAX_BUFFER_SIZE": bad})
    log("the checks reported (expected exactly amdgpu_plugin's warning at each init):\n  "
        + "\n  ".join(problems))
    for phase in ("dump", "restore"):
        # A warning says so in its text too (CRIU's log shows no level).
        want = f'tap: {phase}: {PLUGIN}: level 2: {PLUGIN}: Warn: KFD_MAX_BUFFER_SIZE="{bad}"'
        if len([p for p in problems if p.startswith(want)]) != 1:
            raise Failed(f"expected one problem starting {want!r}")
    if len(problems) != 2:
        raise Failed("the checks reported more than amdgpu_plugin's two warnings")


CASES = {"abi": case_abi, "plain": case_plain, "greedy_control": case_greedy_control,
         "warning_control": case_warning_control}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--criu-list", required=True)
    ap.add_argument("--criu-version", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--bins", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    a = ap.parse_args()
    harness.main_guard(lambda: CASES[a.case](Setup(a)))


if __name__ == "__main__":
    main()
