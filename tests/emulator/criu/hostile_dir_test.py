#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Real CRIU and a hostile image directory, on the emulated GPU.

    hostile_dir_test.py (realcriu_test.py's arguments) --scenario SCENARIO

The machinery (Run, the workload, the kfd-emu phases, the guardian checks)
is realcriu_test.py's; the scenarios are the rows of this file's table,
SCENARIOS, in realcriu_test.py's shape: what runs, the workload's flags,
the machine, the text (--help) and the CTest tests (--list, which
criu/hostile_dir.cmake registers), so a new scenario is one row.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "common"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import realcriu_test as rc  # noqa: E402
from harness import log  # noqa: E402

STOPPED_SECONDS = 3


def copying(run, p):
    """Waits until the dump's GPU copy runs (a pages file of a KFD file
    whose image is not written yet is being written)."""
    def busy():
        done = {m.group(1) for m in (re.fullmatch(r"amdgpu-kfd-(\d+)\.img", n) for n in os.listdir(run.images)) if m}
        tmp = {m.group(1) for m in (re.match(r"\.amdgpu-pages-(\d+)-", n) for n in rc.temp_files(run.images)) if m}
        return bool(tmp - done) or p.poll() is not None
    rc.expect(rc.wait_for(busy, 60, "the dump's GPU copy"), "the dump's copy never started", False)
    rc.expect(p.poll() is None, f"criu dump ended ({p.returncode}) before its copy could be interrupted", False)


def dump_stopped(run):
    procs = run.start()
    (_, pid), = procs
    p = rc.criu_popen(run, "dump", ["-t", str(pid)], "dump.log")
    copying(run, p)
    os.kill(p.pid, signal.SIGSTOP)
    log(f"criu dump (pid {p.pid}) stopped during the copy; temporary files: {rc.temp_files(run.images)}")
    t0 = time.monotonic()
    while time.monotonic() - t0 < STOPPED_SECONDS:
        rc.expect(run.emu.ctl("queues", pid).get("state") == "paused",
                  f"the queues of {pid} are no longer paused while CRIU is stopped: {run.emu.ctl('queues', pid)}",
                  False)
        rc.expect(len(rc.guardians()) == 1, f"guardians while CRIU is stopped: {rc.guardians()}", False)
        rc.expect(not rc.guardian_log(run.images), "the guardian acted while CRIU was only stopped: "
                  f"{rc.guardian_log(run.images)!r}", False)
        time.sleep(0.2)
    log(f"{STOPPED_SECONDS} s stopped: {pid} still paused, the guardian waiting and silent")
    try:
        rc.after_dump_killed(run, procs, p, "dump-killed", [pid], "while stopped")
    except rc.Failure:
        late_repair(run, pid)
        raise


def late_repair(run, pid, seconds=10):
    """After a failed check of the repair: when (if at all) the guardian's
    log and the resumed queues came, and what one queues check (two `ctl`
    processes) costs now, so a failure under load says where the time went."""
    t0 = time.monotonic()
    said = rc.wait_for(lambda: rc.guardian_log(run.images), seconds)
    log(f"guardian log {'after ' + format(time.monotonic() - t0, '.2f') + ' s more' if said else 'still empty'}: "
        f"{rc.guardian_log(run.images)!r}")
    t1 = time.monotonic()
    running = rc.queues_running(run.emu, pid)
    log(f"queues of {pid} running {time.monotonic() - t0:.2f} s after the failed check: {running} "
        f"(one check took {time.monotonic() - t1:.2f} s)")


def dump_killed_planted_log(run):
    away = tempfile.mkdtemp(prefix="amdcr-hostile-away.")
    secret = os.path.join(away, "secret")
    with open(secret, "w") as f:
        f.write("root's\n")
    os.chmod(secret, 0o600)
    procs = run.start()
    (_, pid), = procs
    link = os.path.join(run.images, rc.GUARDIAN_LOG)
    os.symlink(secret, link)
    p = rc.criu_popen(run, "dump", ["-t", str(pid)], "dump.log")
    copying(run, p)
    tmps = rc.temp_files(run.images)
    status = rc.kill_criu(p, "dump-killed")
    log(f"criu dump killed during the copy ({status}); temporary files then: {tmps}")
    rc.expect(rc.wait_for(lambda: rc.queues_running(run.emu, pid), 1.0),
              f"queues of {pid} not running 1 s after CRIU ended: {run.emu.ctl('queues', pid)}", False)
    rc.expect(not (left := rc.temp_files_left(run.images)), f"temporary files left: {left}", False)
    rc.expect(not (still := rc.guardians_left()), f"guardians left: {still}", False)
    with open(secret) as f:
        said = f.read()
    rc.expect(said == "root's\n", f"the guardian wrote through the planted link: {said!r}", False)
    rc.expect(os.path.islink(link), "the planted link was replaced", False)
    log(f"the guardian resumed {pid} and removed {tmps}; the file behind the planted link is unchanged")
    v = rc.verdict(procs[0][0], pid, rc.SLOW_VERDICT_SECONDS)
    rc.expect(v == "OK", f"workload {pid} after CRIU was killed: {v}", False)
    run.wl.wait(timeout=30)
    shutil.rmtree(away)


def dump_guardian_killed(run):
    procs = run.start()
    (_, pid), = procs
    p = rc.criu_popen(run, "dump", ["-t", str(pid)], "dump.log")
    copying(run, p)
    g = rc.guardians()
    rc.expect(len(g) == 1, f"guardian processes during the dump: {g} (want exactly one)", False)
    os.kill(g[0], signal.SIGKILL)
    log(f"guardian {g[0]} killed during the copy")
    try:
        status = p.wait(timeout=rc.CRIU_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise rc.Failure("criu dump did not end after its guardian was killed", False)
    dump_log = os.path.join(run.images, "dump.log")
    rc.expect(status == 0, f"criu dump failed ({status}) after its guardian was killed", False)
    warned = [l for l in open(dump_log, errors="replace") if "amdgpu_plugin: Warn:" in l and
              f"the guardian (pid {g[0]}) ended during the dump" in l]
    if not warned:
        rc.show_log(dump_log)
    rc.expect(len(warned) == 1, f"the dump log has {len(warned)} warnings that the guardian ended (want 1)", False)
    log(f"the plugin warned: {warned[0].strip()}")
    run.wl.wait(timeout=30)  # dumped (CRIU ends it)


def stalling_post_dump(run, marker):
    """A CRIU action script that, at post-dump, writes its pid to `marker`
    and sleeps (CRIU waits for it: the dump is over but for its end)."""
    script = os.path.join(run.work, "stall-post-dump.sh")
    with open(script, "w") as f:
        f.write('#!/bin/sh\n[ "$CRTOOLS_SCRIPT_ACTION" = post-dump ] || exit 0\n'
                f'echo $$ > {marker}.tmp && mv {marker}.tmp {marker}\nexec sleep 120\n')
    os.chmod(script, 0o755)
    return ["--action-script", script]


def kept_files(images):
    return sorted(n for n in os.listdir(images) if n.startswith(".amdgpu-") and ".old-" in n)


def img_verify(run):
    v = subprocess.run([run.args.amdgpu_img, "verify", run.images], capture_output=True, text=True, errors="replace")
    warned = {}
    for line in v.stdout.splitlines():
        m = re.match(r"warning: (\.amdgpu-\S+\.old-\S+): (.*)", line)
        if m:
            warned[m.group(1)] = m.group(2)
    return v, warned


def dump_killed_kept(run):
    procs = run.start()
    (_, pid), = procs
    rc.expect(run.criu_run("dump", ["-t", str(pid), "--leave-running"], "dump-1.log") == 0, "dump 1 failed", False)
    first = {n: open(os.path.join(run.images, n), "rb").read() for n in os.listdir(run.images) if rc.OURS.fullmatch(n)}
    marker = os.path.join(run.work, "post-dump.pid")
    remaps = set(glob.glob("/dev/shm/link_remap.*"))
    p = rc.criu_popen(run, "dump", ["-t", str(pid), "--leave-running"] + stalling_post_dump(run, marker), "dump-2.log")
    rc.expect(rc.wait_for(lambda: os.path.exists(marker) or p.poll() is not None, 60, "dump 2's post-dump"),
              "dump 2 never reached its post-dump script", False)
    rc.expect(p.poll() is None, f"dump 2 ended ({p.returncode}) before its post-dump script", False)
    status = rc.kill_criu(p, "dump-killed")
    os.kill(int(open(marker).read()), signal.SIGKILL)
    for f in set(glob.glob("/dev/shm/link_remap.*")) - remaps:
        os.unlink(f)  # the killed CRIU's --link-remap file, which the next dump would collide with
    rc.expect(not (still := rc.guardians_left()), f"guardians left: {still}", False)
    rc.expect(rc.alive(pid), f"the workload {pid} did not survive dump 2's kill", False)
    kept = kept_files(run.images)
    log(f"dump 2 killed at post-dump ({status}); kept files: {kept}")
    rc.expect(kept, "dump 2 kept no older file", False)
    for k in kept:
        orig = re.fullmatch(r"\.(.*)\.old-.*", k).group(1)
        rc.expect(open(os.path.join(run.images, k), "rb").read() == first.get(orig),
                  f"{k} is not dump 1's {orig} byte for byte", False)
    kfd = next(n for n in first if n.startswith("amdgpu-kfd-"))
    planted = f".{kfd}.old-planted"
    with open(os.path.join(run.images, planted), "wb") as f:
        f.write(b"no image of the plugin\n")
    v, warned = img_verify(run)
    rc.expect(sorted(warned) == sorted(kept + [planted]), f"verify warned of {sorted(warned)}: want "
              f"{sorted(kept + [planted])}: {v.stdout}", False)
    rc.expect(all("of dump " in warned[k] for k in kept) and "no dump identity" in warned[planted],
              f"verify's warnings: {warned}", False)
    log(f"verify after the killed dump (exit {v.returncode}) warns of each kept file: {warned[kept[0]]}")

    run.dump([pid])
    text = open(os.path.join(run.images, "dump.log"), errors="replace").read()
    rc.expect(kept_files(run.images) == [planted], f"after dump 3 the kept files are {kept_files(run.images)}: "
              f"want only {planted}", False)
    removed = [l for l in text.splitlines() if "files an earlier dump into this directory kept" in l]
    rc.expect(removed and all(k in removed[0] for k in kept), f"dump 3's log does not name {kept}: {removed}", False)
    rc.expect(any("amdgpu_plugin: Warn:" in l and planted in l and "no dump identity" in l for l in text.splitlines()),
              f"dump 3's log has no warning naming {planted}", False)
    log(f"dump 3: {removed[0].split('amdgpu_plugin: ')[-1].strip()}")
    run.restore(pid)
    run.verdicts(procs)
    v, warned = img_verify(run)
    rc.expect(v.returncode == 0 and sorted(warned) == [planted], f"verify of dump 3: exit {v.returncode}, "
              f"warnings of {sorted(warned)}: {v.stdout}")
    log("restored from dump 3 with the planted file beside it; verify exit 0, warning of it only")


def restore_fifo_kfd(run):
    procs = run.start()
    (_, pid), = procs
    run.dump([pid])
    kfd = sorted(n for n in os.listdir(run.images) if re.fullmatch(r"amdgpu-kfd-\d+\.img", n))
    rc.expect(kfd, f"no KFD image in {sorted(os.listdir(run.images))}")
    os.unlink(os.path.join(run.images, kfd[0]))
    os.mkfifo(os.path.join(run.images, kfd[0]))
    log(f"{kfd[0]} replaced by a FIFO")
    rc.CRIU_TIMEOUT = 30  # criu_run's limit: a hang is a failure within it
    status = run.criu_run("restore", ["-d", "--pidfile", os.path.join(run.work, "restored.pid")], "restore.log")
    errs = rc.plugin_errors(os.path.join(run.images, "restore.log"))
    rc.expect(status != 0, "criu restore succeeded with a FIFO for a KFD image")
    if not errs:
        rc.show_log(os.path.join(run.images, "restore.log"))
    rc.expect(any(kfd[0] in e and "a FIFO, not a regular file" in e for e in errs),
              f"no plugin error naming {kfd[0]} as a FIFO: {errs}")
    log(f"restore refused: {errs[0].strip()}")
    rc.expect(rc.wait_for(lambda: not rc.alive(pid), 5), f"a process {pid} is alive after the failed restore")
    left = rc.reap_children()
    rc.expect(not left, f"processes left after the failed restore: {left}")


# The scenarios: one row each, in realcriu_test.py's Scenario shape (its
# Run reads the workload's flags from it). `slow`: on realcriu_test.py's
# slow machine, with its VRAM BOs of the dump-killed scenarios.
KILLED = {"flags": ("--user-queue",), "vram_mib": rc.KILL_VRAM_MIB, "slow": True}
SCENARIOS = {s.name: s for s in (
    rc.Scenario("dump-stopped", dump_stopped, rc.tests("hostile_dump_stopped", "MI100"), **KILLED,
                doc="criu dump stopped (SIGSTOP) during its GPU copy, on the slow machine of the dump-killed "
                    "scenarios: for 3 s the process stays paused, the guardian runs and does nothing (no log, no "
                    "UNPAUSE: a stopped CRIU may be continued, and must then find the queues as it left them); "
                    "then CRIU is killed while stopped and the guardian repairs as for any killed dump "
                    "(realcriu_test.after_dump_killed: queues active within 1 s, no temporary file, the process's "
                    "next GPU work completes)."),
    rc.Scenario("dump-killed-planted-log", dump_killed_planted_log,
                rc.tests("hostile_dump_killed_planted_log", "MI100"), **KILLED,
                doc="dump-killed with amdgpu-guardian.log planted in the image directory as a symbolic link to a "
                    "root-owned 0600 file elsewhere: the guardian still resumes the process and removes the "
                    "temporary files, the file elsewhere is unchanged and the link still a link (the guardian's "
                    "lines go to syslog only)."),
    rc.Scenario("dump-guardian-killed", dump_guardian_killed, rc.tests("hostile_dump_guardian_killed", "MI100"),
                **KILLED,
                doc="the guardian SIGKILLed during the dump's GPU copy (slow machine): the dump goes on and "
                    "succeeds, and its log has the plugin's warning that the guardian ended and the rest of the "
                    "dump is unguarded (it used to be a debug line)."),
    rc.Scenario("dump-killed-kept", dump_killed_kept, rc.tests("hostile_dump_killed_kept", "MI100"),
                flags=("--user-queue",), needs=("amdgpu-img",),
                doc="a dump killed after it replaced an older checkpoint's GPU files, before it ended: `criu dump "
                    "--leave-running` into the directory, then a second one whose post-dump action script stalls "
                    "until CRIU is SIGKILLed there (every GPU file written, the older ones kept under hidden names, "
                    "neither put back nor removed). Its kept files (.<name>.old-<random>) must be the first dump's "
                    "byte for byte; a file of no dump identity is planted under such a name too. amdgpu-img verify "
                    "warns naming each (the first dump's identity, or none); a third dump (ending the process) "
                    "succeeds, removes the first dump's kept files (its log names each) and leaves the planted one "
                    "with a warning naming it; its restore succeeds and the process's GPU work is checked; verify "
                    "then exits 0 warning of the planted file only."),
    rc.Scenario("restore-fifo-kfd", restore_fifo_kfd, rc.tests("hostile_restore_fifo_kfd", "MI100"),
                flags=("--user-queue",),
                doc="a dumped checkpoint whose amdgpu-kfd-<id>.img is replaced by a FIFO: criu restore fails "
                    "within 30 s (it used to hang in the plugin's open) with the plugin's error naming the file as "
                    "a FIFO; no restored process is left."),
)}
# realcriu_test.py's Run finds the row of the scenario it runs there.
rc.SCENARIOS.update(SCENARIOS)


def inside(args, criu):
    harness.become_subreaper()
    sc = SCENARIOS[args.scenario]
    if sc.vram_mib:
        os.environ["KFDEMU_WORKLOAD_VRAM_MIB"] = str(sc.vram_mib)
    run = rc.Run(args, criu, args.work)
    try:
        sc.run(run)
    finally:
        run.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="\n".join(rc.scenarios_doc(SCENARIOS)),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action=rc.ListTests, scenarios=SCENARIOS,
                    help="print the CTest tests of every scenario (JSON) and exit")
    rc.add_run_args(ap)
    ap.add_argument("--scenario", required=True, choices=SCENARIOS, metavar="SCENARIO",
                    help="one of the scenarios below")
    ap.add_argument("--amdgpu-img", default="", help="the inspector (dump-killed-kept)")
    args = ap.parse_args()
    args.interop = ""
    if args.phase:
        harness.run_phase(lambda: inside(args, args.criu))

    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    with harness.not_run():
        criu = realcriu.require_criu(args, own_run=True)
    work = harness.work_dir("kfdemu-hostile.")
    log(f"CRIU {criu}, machine {args.machine}, scenario {args.scenario}, work {work}")
    me = harness.self_command(__file__, "--criu", criu, "--work", work)
    machine = rc.slow_machine(work, args.machine) if SCENARIOS[args.scenario].slow else args.machine
    status = subprocess.run([args.kfd_emu, "--machine", machine, "--"] + me + ["--phase", "all"]).returncode
    harness.finish(status == 0, work, args.keep)


if __name__ == "__main__":
    main()
