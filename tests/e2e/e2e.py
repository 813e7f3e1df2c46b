#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end checkpoint/restore tests: emulated GPU + CRIU host + plugin.

Each scenario starts emulated machines with kfd-emu and, inside them, runs
the GPU workload, the CRIU host (criu-host dump/restore) with the built
amdgpu_plugin.so, and checks what came out: the images against the
emulator's own view of the BOs, the restored tasks through the verifier,
the queues' state, the staging memory, the error messages.

    e2e.py --bin-dir BUILD SCENARIO      (run by CTest; see e2e_tests.cmake)
    e2e.py --bin-dir BUILD --list

A scenario re-invokes this script inside kfd-emu with --inner STEP; the
steps talk through files in a scratch directory.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from harness import Failed, check, log  # noqa: E402,F401  (integrity.py uses e2e.Failed, e2e.check)

HERE = os.path.dirname(os.path.abspath(__file__))
# Per GPU: 4 KiB .. over the default staging bound (64 MiB: copied in
# several passes), odd sizes.
BIG_VRAM = "4K,12K,1M+4K,7M+12K,33M+4K,65M+36K"
SMALL_VRAM = "4K,12K,1M+4K,5M+12K"
GTT = "8K,3M+4K"


class Bins:
    def __init__(self, d):
        self.emu = os.path.join(d, "tests/emulator/kfd-emu")
        self.host = os.path.join(d, "tests/host/criu-host")
        self.plugin = os.path.join(d, "amdgpu_plugin.so")
        self.test_plugin = os.path.join(d, "tests/host/test_plugin.so")
        self.workload = os.path.join(d, "tests/e2e/gpu-workload")
        self.verify = os.path.join(d, "tests/e2e/libgpu_verify.so")
        self.img_check = os.path.join(d, "tests/e2e/img-check")


# --------------------------------------------------------------------------
# Inside an emulated machine
# --------------------------------------------------------------------------

def ctl(bins, *query):
    out = subprocess.run([bins.emu, "ctl", *query], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise Failed("kfd-emu ctl %s: %s" % (" ".join(query), out.stderr.strip()))
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else out.stdout


def start_workload(bins, state, args):
    manifest = os.path.join(state, "manifest")
    ready = os.path.join(state, "ready")
    for f in glob.glob(ready + "*"):
        os.unlink(f)
    # The workload writes to a file of its own, opened O_APPEND: a restored
    # task gets its stdout back at the dumped offset, so sharing ours (a file
    # the caller redirected to) would overwrite what was printed since.
    with open(os.path.join(state, "workload.out"), "ab") as out:
        p = subprocess.Popen([bins.workload, "--manifest", manifest, "--ready", ready] + args,
                             stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while not os.path.exists(ready):
        if p.poll() is not None:
            raise Failed("gpu-workload exited with %d before it was ready" % p.returncode)
        if time.time() > deadline:
            p.kill()
            raise Failed("gpu-workload not ready after 300 s")
        time.sleep(0.05)
    relay_output(os.path.join(state, "workload.out"), 0)
    return p, manifest


def relay_output(path, start):
    """Prints what the workload (or its restored self) wrote to `path` from
    byte `start` on; returns the file's size."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    sys.stdout.write(data.decode(errors="replace"))
    sys.stdout.flush()
    return start + len(data)


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_host(bins, args, env_extra, logfile, stats=None):
    """Runs criu-host; returns (exit status, log + output, seconds, pid).
    `stats`, when given, receives the host's peak RSS (bytes)."""
    env = dict(os.environ)
    env["CRIU_HOST_KFDEMU"] = bins.emu
    env.update(env_extra)
    t0 = time.time()
    out_path = logfile + ".out"
    with open(out_path, "w") as out:
        p = subprocess.Popen([bins.host] + args + ["-v4", "-o", logfile], env=env,
                             stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(p.pid, 0)
    dt = time.time() - t0
    rc = os.waitstatus_to_exitcode(status)
    if stats is not None:
        stats["maxrss"] = usage.ru_maxrss * 1024
    text = open(logfile).read() if os.path.exists(logfile) else ""
    return rc, text + open(out_path).read(), dt, p.pid


def plugin_lines(text):
    """Lines that name the amdgpu plugin: its own (prefixed 'amdgpu_plugin: ')
    and the host's records of its hook calls."""
    return [l for l in text.splitlines() if "amdgpu_plugin:" in l]


def inner_dump(bins, a):
    json.dump(dump_one(bins, a.state, json.load(open(a.spec))), open(os.path.join(a.state, "dump.json"), "w"))
    return 0


def dump_one(bins, state, st):
    """Runs the workload of spec `st` (see Run.dump), dumps it into
    STATE/images with the spec's fault set for the dump only, ends it;
    returns what came out."""
    wl_args = st["workload"]
    p, manifest = start_workload(bins, state, wl_args)
    result = {"pid": p.pid, "manifest": manifest}
    try:
        before = {b["va"]: b for b in ctl(bins, "bos", str(p.pid))["bos"]}
        if st.get("fault"):
            ctl(bins, "faults", st["fault"])
        result["counters_before"] = ctl(bins, "counters")
        images = os.path.join(state, "images")
        if st.get("images_dir"):  # elsewhere (the benchmark's fixed-rate store)
            os.makedirs(st["images_dir"])
            os.symlink(st["images_dir"], images)
        os.makedirs(images, exist_ok=True)
        if st.get("old_images"):  # an older checkpoint's files in the same directory
            for n in os.listdir(st["old_images"]):
                shutil.copy2(os.path.join(st["old_images"], n), images)
        plugins = ["--plugin", bins.plugin] + sum((["--plugin", x] for x in st.get("extra_plugins", [])), [])
        if st.get("pre_dump"):
            result["pre_dump"] = inner_pre_dump(bins, state, p.pid, plugins)
            os.symlink("../pre", os.path.join(images, "parent"))  # what --prev-images-dir ../pre makes
        usage = {}
        rc, text, dt, hostpid = run_host(bins, ["dump", "-t", str(p.pid), "-D", images] + plugins,
                                         st.get("env", {}), os.path.join(state, "dump.log"), usage)
        result["host_maxrss"] = usage.get("maxrss")
        if st.get("fault"):
            ctl(bins, "faults", "")
        result.update(rc=rc, seconds=dt, log=text)
        procs = {q["pid"]: q for q in ctl(bins, "processes")["processes"]}
        q = ctl(bins, "queues", str(p.pid))
        result["queues_state"] = q["state"]
        result["paused"] = procs.get(p.pid, {}).get("paused")
        result["alive"] = p.poll() is None
        result["kfd_images"] = sorted(os.path.basename(f) for f in glob.glob(images + "/amdgpu-kfd-*.img"))
        if rc == 0 and not st.get("skip_checks"):
            chk = subprocess.run([bins.img_check, "--images", images, "--manifest", manifest],
                                 capture_output=True, text=True)
            result["img_check_rc"] = chk.returncode
            result["img_check_err"] = chk.stderr
            decoded = json.loads(chk.stdout) if chk.stdout.strip() else {"kfd": []}
            mism, compared = [], 0
            for k in decoded["kfd"]:
                for b in k["bos"]:
                    if b["fnv"] is None:
                        continue
                    e = before.get(b["addr"])
                    compared += 1
                    if e is None:
                        mism.append("image BO %#x not in the emulator" % b["addr"])
                    elif e["checksum"] != b["fnv"] or e["size"] != b["size"]:
                        mism.append("BO %#x: image %s/%d, emulator %s/%d" %
                                    (b["addr"], b["fnv"], b["size"], e["checksum"], e["size"]))
            result["compared"] = compared
            result["mismatches"] = mism
            result["content_bos_in_emulator"] = sum(1 for b in before.values() if b["type"] in ("vram", "gtt"))
        result["counters"] = ctl(bins, "counters")
        # The staging memory: userptr BOs the dumping process registered.
        result["userptr"] = ctl(bins, "userptr", str(hostpid))
        # Every file of ours in the image directory, under any name
        # (temporaries included).
        result["ours_left"] = sorted(n for n in os.listdir(images) if n.startswith((".amdgpu-", "amdgpu-")))
    finally:
        stop(p)
    return result


def kfd_criu_calls(bins):
    """The emulator's counts of KFD CRIU calls (AMDKFD_IOC_CRIU_OP and its
    sub-ops: PROCESS_INFO pauses) and of SDMA jobs."""
    c = ctl(bins, "counters")
    return {k: v for k, v in c["ioctls"].items() if "CRIU" in k}, c["sdma_jobs"]


def inner_pre_dump(bins, state, pid, plugins):
    """criu-host pre-dump of `pid` into STATE/pre (the hooks of CRIU's
    pre-dump: init, PAUSE_DEVICES, HANDLE_DEVICE_VMA, no exit); what the
    plugin did around it."""
    pre = os.path.join(state, "pre")
    os.makedirs(pre)
    calls = kfd_criu_calls(bins)
    rc, text, _, _ = run_host(bins, ["pre-dump", "-t", str(pid), "-D", pre] + plugins, {},
                              os.path.join(state, "pre-dump.log"))
    return {"rc": rc, "log": text, "calls_unchanged": kfd_criu_calls(bins) == calls,
            "files": sorted(os.listdir(pre)), "queues_state": ctl(bins, "queues", str(pid))["state"],
            "claimed": len([l for l in text.splitlines() if "HANDLE_DEVICE_VMA" in l and "= 0" in l
                            and "amdgpu_plugin" in l])}


def inner_restore(bins, a):
    json.dump(restore_one(bins, a.state, json.load(open(a.spec))), open(os.path.join(a.state, "restore.json"), "w"))
    return 0


def restore_one(bins, state, st):
    """Restores the dump of spec `st` (see Run.restore) with the spec's
    fault set for the restore only; returns what came out."""
    images = os.path.join(st["images_state"], "images")
    manifest = os.path.join(st["images_state"], "manifest")
    if st.get("fault"):
        ctl(bins, "faults", st["fault"])
    plugins = ["--plugin", bins.plugin] + sum((["--plugin", x] for x in st.get("extra_plugins", [])), [])
    verifier = ["--verifier", bins.verify + ":verify_gpu_state", "--verifier-arg", manifest + "," + bins.emu]
    out = os.path.join(st["images_state"], "workload.out")
    out_start = os.path.getsize(out) if os.path.exists(out) else None
    usage = {}
    rc, text, dt, hostpid = run_host(bins, ["restore", "-D", images] + plugins +
                                     (verifier if st.get("verify", True) else []),
                                     st.get("env", {}), os.path.join(state, "restore.log"), usage)
    if st.get("fault"):
        ctl(bins, "faults", "")
    if rc != 0:  # the failed restore's tasks are killed: until the model has let go of them
        deadline = time.time() + 5
        while time.time() < deadline and any(p.get("restored") for p in ctl(bins, "processes")["processes"]):
            time.sleep(0.05)
    if out_start is not None:
        relay_output(out, out_start)
    result = {"rc": rc, "seconds": dt, "log": text, "counters": ctl(bins, "counters"),
              "host_maxrss": usage.get("maxrss"),
              "processes": ctl(bins, "processes"),
              # CRIU's main process's staging memory (parallel restore),
              # and the staging (GEM userptr BOs) of all processes at any
              # one moment.
              "userptr": ctl(bins, "userptr", str(hostpid)),
              "userptr_all": ctl(bins, "userptr", "gem-all")}
    return result


def inner_cases(bins, a):
    """Several dumps or restores in turn on this one machine (the spec's
    `cases`, each a Run.dump or Run.restore spec with its `step`), each in
    STATE/NN; STATE/cases.json: their results, in order."""
    out = []
    for i, st in enumerate(json.load(open(a.spec))["cases"]):
        state = os.path.join(a.state, "%02d" % i)
        os.makedirs(state)
        r = {"dump": dump_one, "restore": restore_one}[st["step"]](bins, state, st)
        r["state"] = state
        out.append(r)
    json.dump({"cases": out}, open(os.path.join(a.state, "cases.json"), "w"))
    return 0


# --------------------------------------------------------------------------
# Outside: scenarios
# --------------------------------------------------------------------------

class Run:
    def __init__(self, bins, scratch):
        self.bins = bins
        self.scratch = scratch
        self.n = 0

    def machine(self, machine_args, step, spec):
        self.n += 1
        state = os.path.join(self.scratch, "%02d-%s" % (self.n, step))
        os.makedirs(state, exist_ok=True)
        spec_path = os.path.join(state, "spec.json")
        json.dump(spec, open(spec_path, "w"))
        cmd = [self.bins.emu] + machine_args + ["--", sys.executable, os.path.abspath(__file__),
                                                "--bin-dir", ARGS.bin_dir, "--inner", step,
                                                "--state", state, "--spec", spec_path]
        r = subprocess.run(cmd, timeout=3600)
        check(r.returncode == 0, "%s on %s: the inner step failed (%d)" % (step, machine_args, r.returncode))
        out = json.load(open(os.path.join(state, step + ".json")))
        out["state"] = state
        return out

    def dump(self, machine_args, workload, env=None, fault=None, extra_plugins=None, skip_checks=False,
             images_dir=None, pre_dump=False, old_images=None):
        """images_dir: where the images go (a new directory; the dump's
        state links to it), instead of inside the dump's state. pre_dump:
        a criu-host pre-dump first, the dump's `parent` linked to it.
        old_images: a directory whose files are copied into the images
        directory before the dump (an older checkpoint there)."""
        out = self.machine(machine_args, "dump", dump_spec(workload, env, fault, extra_plugins, skip_checks,
                                                           images_dir, pre_dump, old_images))
        out["images_dir"] = images_dir
        return out

    def restore(self, machine_args, dumped, env=None, fault=None, verify=True, extra_plugins=None):
        return self.machine(machine_args, "restore", {"images_state": dumped["state"], "env": env or {},
                                                      "fault": fault, "verify": verify,
                                                      "extra_plugins": extra_plugins or []})

    def dumps(self, machine_args, workload, faults, env=None, skip_checks=False):
        """One dump of `workload` per fault of `faults`, in turn on one
        machine (each its own workload process; the fault set for its dump
        only); their results, in order. A workload list in place of
        `workload` gives each dump its own."""
        wls = workload if workload and isinstance(workload[0], list) else [workload] * len(faults)
        return self.cases(machine_args,
                          [dump_spec(wl, env, f, skip_checks=skip_checks) for wl, f in zip(wls, faults)])

    def restores(self, machine_args, dumped, faults, env=None):
        """One restore of `dumped` per fault of `faults`, in turn on one
        machine (the fault set for its restore only); their results."""
        return self.cases(machine_args, [{"step": "restore", "images_state": dumped["state"], "env": env or {},
                                          "fault": f} for f in faults])

    def cases(self, machine_args, cases):
        """Dumps and restores (dump_spec()s and restores()' specs) in turn
        on one machine; their results, in order."""
        return self.machine(machine_args, "cases", {"cases": cases})["cases"]


def dump_spec(workload, env=None, fault=None, extra_plugins=None, skip_checks=False, images_dir=None,
              pre_dump=False, old_images=None):
    """The spec of one dump (see Run.dump), for Run.dump and Run.cases."""
    return {"step": "dump", "workload": workload, "env": env or {}, "fault": fault,
            "extra_plugins": extra_plugins or [], "skip_checks": skip_checks, "images_dir": images_dir,
            "pre_dump": pre_dump, "old_images": old_images}


def no_leaks(text, what):
    leaks = [l for l in text.splitlines() if "leaked by a plugin" in l]
    check(not leaks, "%s: %s" % (what, "; ".join(leaks[:5])))


def expect_good_dump(d, what):
    no_leaks(d["log"], what)
    tail = "\n".join(d["log"].splitlines()[-25:])
    check(d["rc"] == 0, "%s: dump failed (%d):\n%s" % (what, d["rc"], tail))
    check(d["alive"], "%s: the workload died" % what)
    check(d["queues_state"] == "active", "%s: queues %s after the dump" % (what, d["queues_state"]))
    check(d["img_check_rc"] == 0, "%s: images do not decode or patterns differ: %s" % (what, d["img_check_err"]))
    check(not d["mismatches"], "%s: pages differ from the emulator's BOs: %s" % (what, d["mismatches"][:5]))
    check(d["compared"] == d["content_bos_in_emulator"],
          "%s: %d BOs with contents in the images, the emulator has %d" %
          (what, d["compared"], d["content_bos_in_emulator"]))
    log("  %s: dump ok, %d BOs byte-equal to the emulator's, %.1f s" % (what, d["compared"], d["seconds"]))


def verified_tasks(text):
    """Tasks whose verifier passed, by the host's report of its result (the
    verifier's result includes the emulator checks)."""
    return [l for l in text.splitlines() if "verify_gpu_state() = 0 (pass)" in l]


def expect_good_restore(r, what, tasks=1):
    no_leaks(r["log"], what)
    tail = "\n".join(r["log"].splitlines()[-30:])
    check(r["rc"] == 0, "%s: restore failed (%d):\n%s" % (what, r["rc"], tail))
    good = set(verified_tasks(r["log"]))
    check(len(good) == tasks, "%s: %d/%d tasks verified:\n%s" % (what, len(good), tasks, tail))
    log("  %s: restore ok, %d task(s) verified, %.1f s" % (what, tasks, r["seconds"]))


OTHER_2 = ["--machine", "2xMI210", "--gpu-ids", "0x7a01,0x7a02", "--minors", "131,130"]


def sc_roundtrip(run):
    """Dump 2 GPUs with BOs from 4 KiB to over 64 MiB (up to 5 MiB with
    --small); restore on the same machine with a smaller staging bound, and
    on another machine (other gpu_ids, minors, order)."""
    d = run.dump(["--machine", "2xMI210"], ["--vram", SMALL_VRAM if ARGS.small else BIG_VRAM, "--gtt", GTT])
    expect_good_dump(d, "2xMI210")
    r = run.restore(["--machine", "2xMI210"], d, env={"KFD_MAX_BUFFER_SIZE": "8M"})
    expect_good_restore(r, "same machine, KFD_MAX_BUFFER_SIZE=8M")
    r = run.restore(OTHER_2, d)
    expect_good_restore(r, "other gpu_ids/minors")


def sc_bounded(run):
    """KFD_MAX_BUFFER_SIZE well below the largest BO: same bytes, staging
    memory within the bound (the emulator's count of the dumping process's
    userptr memory), and a restore with another bound."""
    bound = 16 << 20
    d = run.dump(["--machine", "2xMI210"], ["--vram", "4K,40M+4K,12K", "--gtt", GTT],
                 env={"KFD_MAX_BUFFER_SIZE": "16M"})
    expect_good_dump(d, "bounded dump")
    up = d.get("userptr")
    check(up is not None, "no userptr figures for the host process")
    check(0 < up["peak"] <= bound, "staging peak %d bytes, bound %d" % (up["peak"], bound))
    log("  staging peak %d bytes <= bound %d" % (up["peak"], bound))
    r = run.restore(["--machine", "2xMI210"], d, env={"KFD_MAX_BUFFER_SIZE": "1M"})
    expect_good_restore(r, "restore with KFD_MAX_BUFFER_SIZE=1M")


def sc_hive(run):
    """8-GPU XGMI hive onto a hive with other gpu_ids and minors."""
    d = run.dump(["--machine", "8xMI300X"], ["--vram", SMALL_VRAM, "--gtt", GTT])
    expect_good_dump(d, "8xMI300X")
    ids = ",".join("0x%x" % (0x8100 + i) for i in range(8))
    minors = ",".join(str(135 - i) for i in range(8))
    r = run.restore(["--machine", "8xMI300X", "--gpu-ids", ids, "--minors", minors], d)
    expect_good_restore(r, "hive onto hive")


def sc_bigger(run):
    """Restore onto a bigger node: a 2-GPU checkpoint (2xMI300X: PCIe, each
    GPU reaching the other's VRAM over PCIe, stored as p2p_links) restores
    onto the 8xMI300X XGMI node (more GPUs and io links, XGMI for the PCIe
    peer link). Onto two MI300X without that peer link it is refused,
    naming the lost link."""
    d = run.dump(["--machine", "2xMI300X"], ["--vram", SMALL_VRAM, "--gtt", GTT])
    expect_good_dump(d, "2xMI300X")
    # As a scheduler gives a job its GPUs: the restore's device cgroup
    # allows two of the eight (KFD restores a process onto exactly as many
    # GPUs as its cgroup allows), here the two on the second CPU node.
    r = run.restore(["--machine", "8xMI300X", "--device-cgroup", "132,133"], d)
    expect_good_restore(r, "2xMI300X onto 8xMI300X (GPUs renderD132, renderD133)")
    for m in ("0x3a07", "0xd259"):
        check(re.search(r"gpu %s: restoring onto local gpu 0x(c358|7b6a) \(renderD13[23]\)" % m, r["log"]),
              "gpu %s was not restored onto renderD132/133:\n%s" % (m, "\n".join(plugin_lines(r["log"]))[-2000:]))
    profile = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "emulator", "profiles",
                           "2xMI300X.machine")
    flat = os.path.join(run.scratch, "2xMI300X-no-p2p.machine")
    with open(flat, "w") as f:
        f.write("pcie_p2p 0\n" + open(profile).read())
    r = run.restore(["--machine", flat], d)
    refused(r, "no PCIe peer link", "PCIe or XGMI", "cannot be relaxed")


def sc_tree(run):
    """A process tree with two GPU processes."""
    d = run.dump(["--machine", "2xMI210"], ["--vram", SMALL_VRAM, "--gtt", GTT, "--children", "1"])
    check(d["rc"] == 0, "tree dump failed:\n" + d["log"][-3000:])
    check(len(d["kfd_images"]) == 2, "expected 2 KFD images, got %s" % d["kfd_images"])
    check(d["queues_state"] == "active", "root queues %s" % d["queues_state"])
    r = run.restore(["--machine", "2xMI210"], d)
    expect_good_restore(r, "tree of 2 GPU processes", tasks=2)


def refused(r, what, *needles):
    check(r["rc"] != 0, "%s: restore succeeded, it should have been refused" % what)
    check(not verified_tasks(r["log"]), "%s: a verifier reported success" % what)
    low = r["log"]
    for n in needles:
        check(n in low, "%s: the log does not say %r:\n%s" % (what, n, "\n".join(plugin_lines(low))[-3000:]))
    created = [p for p in r["processes"]["processes"] if p.get("restored")]
    log("  %s: refused, the log names %s" % (what, ", ".join(needles)))
    return created


def sc_incompatible(run):
    """Targets that cannot take the checkpoint are refused before any GPU
    state changes, naming the property and its KFD_*_CHECK; with that check
    switched off the restore succeeds."""
    d = run.dump(["--machine", "MI100"], ["--vram", SMALL_VRAM, "--gtt", GTT])
    expect_good_dump(d, "MI100")
    small = run.restore(["--machine", "MI100", "--vram", "16G"], d)
    created = refused(small, "smaller VRAM", "vram_size", "KFD_VRAM_SIZE_CHECK")
    check(not created, "GPU state was created before the refusal: %s" % created)
    r = run.restore(["--machine", "MI100", "--vram", "16G"], d, env={"KFD_VRAM_SIZE_CHECK": "0"})
    expect_good_restore(r, "smaller VRAM with KFD_VRAM_SIZE_CHECK=0")
    old = run.restore(["--machine", "MI100", "--fw-version", "1"], d)
    refused(old, "older firmware", "fw_version", "KFD_FW_VER_CHECK")
    r = run.restore(["--machine", "MI100", "--fw-version", "1"], d, env={"KFD_FW_VER_CHECK": "no"})
    expect_good_restore(r, "older firmware with KFD_FW_VER_CHECK=no")
    d2 = run.dump(["--machine", "2xMI210"], ["--vram", SMALL_VRAM, "--gtt", GTT])
    expect_good_dump(d2, "2xMI210")
    fewer = run.restore(["--machine", "MI100"], d2)
    refused(fewer, "fewer GPUs", "2 GPUs")


DUMP_FAULTS = [
    "AMDKFD_IOC_GET_VERSION", "CRIU_OP:PROCESS_INFO", "CRIU_OP:CHECKPOINT",
    "DRM_IOCTL_VERSION", "DRM_IOCTL_AMDGPU_INFO", "DRM_IOCTL_AMDGPU_CTX", "DRM_IOCTL_AMDGPU_GEM_CREATE",
    "DRM_IOCTL_AMDGPU_GEM_VA", "DRM_IOCTL_AMDGPU_GEM_MMAP", "DRM_IOCTL_AMDGPU_GEM_USERPTR",
    "DRM_IOCTL_PRIME_FD_TO_HANDLE", "DRM_IOCTL_AMDGPU_BO_LIST", "DRM_IOCTL_AMDGPU_CS",
    "DRM_IOCTL_AMDGPU_WAIT_CS", "sdma",
]


def sc_dump_faults(run):
    """For each ioctl and SDMA job on the dump path, one failure: the host
    reports the error, no file of ours is left in the image directory
    (under any name: temporaries included), and the target's queues run
    again. Then UNPAUSE failing once: the plugin reports it, the queues
    still run. All on one machine, each dump of a workload of its own; a
    dump without a fault last finds the machine as good as new."""
    small = ["--vram", "4K,1M+4K", "--gtt", "8K"]
    cases = run.dumps(["--machine", "2xMI210"], [small] * len(DUMP_FAULTS) + [["--vram", "4K"], small],
                      ["%s:nth=1:errno=EIO" % t for t in DUMP_FAULTS] + ["CRIU_OP:UNPAUSE:nth=1:errno=EIO", None])
    for target, d in zip(DUMP_FAULTS, cases):
        check(d["rc"] != 0, "%s: the dump succeeded despite the fault" % target)
        check(d["alive"], "%s: the workload died" % target)
        check(d["queues_state"] == "active" and not d["paused"],
              "%s: queues %s (paused %s) after the failed dump" % (target, d["queues_state"], d["paused"]))
        check(not d["ours_left"], "%s: files of the failed dump are left: %s" % (target, d["ours_left"]))
        no_leaks(d["log"], target)
        errs = [l for l in plugin_lines(d["log"]) if "failed" in l or "error" in l.lower()]
        check(errs, "%s: no error line from the plugin:\n%s" % (target, d["log"][-2000:]))
        removed = [l for l in plugin_lines(d["log"]) if "removed the" in l]
        log("  fault %-32s -> dump failed cleanly, no file left: %s%s" %
            (target, errs[0][:150], (" (" + removed[0].split("amdgpu_plugin: ")[-1] + ")") if removed else ""))
    d = cases[-2]
    check(d["queues_state"] == "active", "UNPAUSE fault: queues %s" % d["queues_state"])
    log("  fault CRIU_OP:UNPAUSE (once) -> rc %d, queues running" % d["rc"])
    expect_good_dump(cases[-1], "the same machine after the faults, no fault")


RESTORE_FAULTS = [
    "CRIU_OP:RESTORE", "CRIU_OP:RESUME", "DRM_IOCTL_AMDGPU_GEM_CREATE", "DRM_IOCTL_AMDGPU_GEM_VA",
    "DRM_IOCTL_AMDGPU_GEM_USERPTR", "DRM_IOCTL_PRIME_FD_TO_HANDLE", "DRM_IOCTL_AMDGPU_CS",
    "DRM_IOCTL_AMDGPU_WAIT_CS", "sdma", "AMDKFD_IOC_GET_VERSION",
]


def sc_restore_faults(run):
    """For each ioctl and SDMA job on the restore path, one failure: a clear
    error, nothing reported as success, no restored process left in the
    emulator. All on one machine; a restore without a fault last restores
    and verifies the task there."""
    d = run.dump(["--machine", "2xMI210"], ["--vram", "4K,1M+4K", "--gtt", "8K"])
    expect_good_dump(d, "2xMI210")
    cases = run.restores(["--machine", "2xMI210"], d, ["%s:nth=1:errno=EIO" % t for t in RESTORE_FAULTS] + [None])
    for target, r in zip(RESTORE_FAULTS, cases):
        check(r["rc"] != 0, "%s: the restore reported success despite the fault" % target)
        check(not verified_tasks(r["log"]), "%s: a verifier passed" % target)
        no_leaks(r["log"], target)
        errs = [l for l in plugin_lines(r["log"]) if "fail" in l or "error" in l.lower()]
        check(errs, "%s: no error line from the plugin:\n%s" % (target, r["log"][-2000:]))
        left = [p for p in r["processes"]["processes"] if p.get("restored")]
        check(not left, "%s: restored processes left in the emulator: %s" % (target, left))
        log("  fault %-32s -> restore failed cleanly: %s" % (target, errs[0][:150]))
    expect_good_restore(cases[-1], "the same machine after the faults, no fault")


def sc_coexist(run):
    """A second plugin loaded after ours still receives DUMP_DEVICES_LATE
    (and every other hook ours declines)."""
    rec = os.path.join(run.scratch, "tp.log")
    tp = os.path.join(run.scratch, "tp_after.so")
    shutil.copy(run.bins.test_plugin, tp)
    env = {"TESTPLUGIN_LOG": rec}
    os.environ.update(env)
    d = run.dump(["--machine", "MI100"], ["--vram", "4K", "--gtt", "8K"], env=env, extra_plugins=[tp])
    expect_good_dump(d, "MI100 with a second plugin")
    calls = open(rec).read() if os.path.exists(rec) else ""
    check("DUMP_DEVICES_LATE" in calls, "the second plugin never got DUMP_DEVICES_LATE:\n" + calls)
    log("  second plugin received DUMP_DEVICES_LATE after ours")


def summary_lines(text, verb):
    """The plugin's per-GPU copy summary lines (see copy_summary)."""
    return [l for l in text.splitlines() if "amdgpu_plugin: gpu 0x" in l and (": %s " % verb) in l]


def from_task(line):
    """Whether a host log line came from a restored task ('(SS.UUUUUU) PID: ...')."""
    return re.match(r"\(\s*[\d.]+\)\s+\d+: ", line) is not None


def sc_parallel(run):
    """KFD_PARALLEL_RESTORE (default on): the GPU memory of the restored
    tasks is copied by CRIU's main process (criu-host), within
    KFD_MAX_BUFFER_SIZE in total; =0 copies in the task. A fault in the
    main process's copy, and a damaged pages file, fail the restore: no
    task verified, none left, the error named. Without POST_FORKING (12
    hooks) the tasks copy; the tasks, restored concurrently, take turns, so
    that their staging together stays within the bound."""
    d = run.dump(["--machine", "2xMI210"], ["--vram", "4K,1M+4K,9M+12K", "--gtt", GTT, "--children", "1"])
    check(d["rc"] == 0, "tree dump failed:\n" + d["log"][-3000:])
    bound = 1 << 20
    r = run.restore(["--machine", "2xMI210"], d, env={"KFD_MAX_BUFFER_SIZE": str(bound)})
    expect_good_restore(r, "parallel restore of a tree, KFD_MAX_BUFFER_SIZE=1M", tasks=2)
    lines = summary_lines(r["log"], "restored")
    check(len(lines) == 4, "parallel: %d summary lines, expected 2 tasks x 2 GPUs:\n%s" % (len(lines), "\n".join(lines)))
    check(not [l for l in lines if from_task(l)], "parallel: a task copied its own memory:\n" + "\n".join(lines))
    check("parallel restore: the GPU memory of 2 task(s) is restored and checked" in r["log"],
          "parallel: no outcome line for 2 tasks")
    _, _, peak = copy_summary(r["log"], "restored")
    up = r["userptr"]
    check(0 < up["peak"] <= bound and peak <= bound // 2,
          "parallel: staging of CRIU's main process peaked at %d bytes (per GPU %d), bound %d" %
          (up["peak"], peak, bound))
    log("  parallel: every copy in CRIU's main process, staging peak %d bytes <= %d" % (up["peak"], bound))

    # The tasks copy their own, at once (criu-host restores them
    # concurrently, as CRIU does), each GPU's copy slowed to take about
    # 0.2 s: without turns their staging would add up.
    slow = ["--machine", "2xMI210", "--sdma-gbps", "0.05"]
    for what, env in (("KFD_PARALLEL_RESTORE=0", {"KFD_PARALLEL_RESTORE": "0"}),
                      ("CRIU 4.0/4.1's 12 hooks (no POST_FORKING)", {"CRIU_HOST_HOOKS": "12"})):
        r = run.restore(slow, d, env=dict(env, KFD_MAX_BUFFER_SIZE=str(bound)))
        expect_good_restore(r, what, tasks=2)
        lines = summary_lines(r["log"], "restored")
        check(len(lines) == 4 and all(from_task(l) for l in lines),
              "%s: the copies must be the tasks' own:\n%s" % (what, "\n".join(lines)))
        check("no parallel restore" in r["log"], "%s: the log does not say why there is no parallel restore" % what)
        every = r["userptr_all"]["peak"]
        check(0 < every <= bound, "%s: the tasks' staging together peaked at %d bytes, bound %d" % (what, every, bound))
        log("  %s: every copy in its task, their staging together peaked at %d bytes <= %d" % (what, every, bound))

    def failed(r, what, needle):
        check(r["rc"] != 0, "%s: the restore succeeded" % what)
        check(not verified_tasks(r["log"]), "%s: a verifier passed" % what)
        no_leaks(r["log"], what)
        errs = [l for l in plugin_lines(r["log"]) if "Error" in l and "parallel restore" in l]
        check(errs and needle in errs[0] and "killed the restored task(s)" in errs[0],
              "%s: no parallel restore error naming %r:\n%s" % (what, needle, "\n".join(plugin_lines(r["log"]))[-3000:]))
        left = [p for p in r["processes"]["processes"] if p.get("restored")]
        check(not left, "%s: restored processes left in the emulator: %s" % (what, left))
        log("  %s -> restore failed, tasks killed: %s" % (what, errs[0].split("amdgpu_plugin: ")[-1][:160]))

    r = run.restore(["--machine", "2xMI210"], d, fault="sdma:nth=3:errno=EIO")
    failed(r, "SDMA fault in the main process's copy", "gpu 0x")
    pages = sorted(glob.glob(os.path.join(d["state"], "images", "amdgpu-pages-*.img")), key=os.path.getsize)
    with open(pages[-1], "r+b") as f:
        f.seek(os.path.getsize(pages[-1]) - 5000)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x10]))
    r = run.restore(["--machine", "2xMI210"], d)
    failed(r, "one byte of %s flipped" % os.path.basename(pages[-1]), "checksum")


def copy_summary(text, verb):
    """(bytes, seconds) of the plugin's per-GPU summary lines: GPUs copy in
    parallel, so the phase lasts as long as the slowest GPU."""
    total, slowest, peak = 0, 0.0, 0
    seen = set()
    for l in text.splitlines():
        if "amdgpu_plugin: gpu 0x" in l and (": %s " % verb) in l and l not in seen:
            seen.add(l)
            words = l.split()
            total += int(words[words.index("bytes") - 1])
            slowest = max(slowest, float(words[words.index("s") - 1]))
            peak = max(peak, int(words[words.index("staging") + 1]))
    return total, slowest, peak


def sc_demo(run):
    """The README's main job: checkpoint a 2-GPU workload on one emulated
    machine, end it, restore it on another (other gpu_ids and minors),
    verify the GPU memory, and print a summary."""
    gib = 1 << 30
    log("demo: emulated machine A: 2 x MI210 (gpu_ids and render minors of the profile)")
    log("demo: running gpu-workload (libhsakmt) with 2 x %s + small BOs on each GPU ..." %
        ARGS.demo_bo.replace("M", " MiB"))
    large = "%s+36K,%s+4K" % (ARGS.demo_bo, ARGS.demo_bo)
    d = run.dump(["--machine", "2xMI210"], ["--vram", "4K,12K,1M+4K," + large, "--gtt", GTT])
    expect_good_dump(d, "checkpoint on machine A")
    db, ds, dpeak = copy_summary(d["log"], "dumped")
    log("demo: the workload is ended; machine B: 2 x MI210 with gpu_ids 0x7a01,0x7a02 and minors 131,130")
    r = run.restore(OTHER_2, d)
    expect_good_restore(r, "restore on machine B")
    rb, rs, rpeak = copy_summary(r["log"], "restored")
    mapping = [l.split("amdgpu_plugin: ")[1] for l in r["log"].splitlines() if "restoring onto local gpu" in l]
    print()
    print("checkpoint/restore summary")
    print("  GPU mapping:     " + "\n                   ".join(sorted(set(mapping))))
    print("  checkpoint:      %.2f GiB of GPU memory in %.2f s (%.2f GB/s); whole dump %.2f s" %
          (db / gib, ds, db / ds / 1e9 if ds else 0, d["seconds"]))
    print("  restore:         %.2f GiB of GPU memory in %.2f s (%.2f GB/s); host run incl. verification %.2f s" %
          (rb / gib, rs, rb / rs / 1e9 if rs else 0, r["seconds"]))
    print("  staging memory:  peak %.1f MiB per GPU on dump, %.1f MiB on restore (dumping process total %.1f MiB)" %
          (dpeak / 2**20, rpeak / 2**20, d["userptr"]["peak"] / 2**20))
    print("  verification:    PASSED (contents bit-exact through the restored CPU mappings, "
          "same GPU VAs, queues running)")


def sc_pre_copy(run):
    """CRIU's pre-dump hook sequence (criu-host pre-dump: init(PRE_DUMP),
    PAUSE_DEVICES, HANDLE_DEVICE_VMA, no exit; docs/incremental.md) with the
    plugin on 2 GPUs: it succeeds, the plugin claims the device mappings,
    makes no KFD CRIU call (nothing paused) and no SDMA job, writes nothing;
    the queues stay active. Then a dump whose `parent` is the pre-dump's
    directory: complete (no GPU image there to take chunks from), the
    images equal to the emulator's BOs; restored and verified."""
    d = run.dump(["--machine", "2xMI210"], ["--vram", SMALL_VRAM, "--gtt", GTT], pre_dump=True)
    pre = d["pre_dump"]
    tail = "\n".join(pre["log"].splitlines()[-20:])
    check(pre["rc"] == 0, "pre-dump failed (%d):\n%s" % (pre["rc"], tail))
    check(pre["claimed"] > 0 and "Can't handle non-regular mapping" not in pre["log"],
          "pre-dump: %d device mappings claimed by amdgpu_plugin:\n%s" % (pre["claimed"], tail))
    check("amdgpu_plugin: exit" not in pre["log"] and "exit(PRE_DUMP" not in pre["log"],
          "the host called exit in a pre-dump")
    check(pre["calls_unchanged"], "the pre-dump made KFD CRIU calls or SDMA jobs")
    check(not [f for f in pre["files"] if "amdgpu" in f], "the pre-dump wrote %s" % pre["files"])
    check(pre["queues_state"] == "active", "queues %s after the pre-dump" % pre["queues_state"])
    no_leaks(pre["log"], "pre-dump")
    log("  pre-dump ok: %d device mappings claimed, no KFD CRIU call, no SDMA job, no file, queues active" %
        pre["claimed"])
    expect_good_dump(d, "dump after the pre-dump")
    check("incremental on" not in d["log"], "the dump after a pre-dump says it is incremental")
    r = run.restore(["--machine", "2xMI210"], d)
    expect_good_restore(r, "restore of the dump after the pre-dump")


REPLICA = 8 * 2**20 + 3 * 2**20 + 4096  # --replica 8M,3M+4K: per GPU, per process


PAGES_SEAL = 32  # the plugin's seal after a pages file's payload (src/image/pages_file.h)


def pages_payloads(images):
    """{file: payload bytes its 8-byte header announces} of the KFD pages
    files in `images`."""
    out = {}
    for f in glob.glob(os.path.join(images, "amdgpu-pages-*.img")):
        with open(f, "rb") as fh:
            out[f] = int.from_bytes(fh.read(8), "little")
    return out


def dedup_summary(text):
    """(written, not written again) of the dump's summary line, or None."""
    m = re.search(r"deduplicated: (\d+) bytes \([^)]*\) written, (\d+) bytes", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def sc_dedup(run):
    """Deduplicated checkpoints: a tree of 2 GPU processes on 2 GPUs, each
    holding the same replica BOs on both GPUs plus BOs of its own. The
    replicas' chunks are written once (3 of their 4 copies not written: the
    dump's summary, its bytes copied = written + not written, and the pages
    files' sizes), the images decode with every pattern intact (read as a
    restore reads them), the restore verifies every byte in both tasks and
    reads each process's replica chunks once for both its GPUs; amdgpu-img
    diff finds no difference with itself and, against its flattened copy,
    only what deduplication saved per GPU; a
    byte of a replica's stored chunk damaged is refused before any task
    resumes, naming the file and the BOs referring to it."""
    wl = ["--vram", "4K,1M+4K", "--gtt", "8K", "--replica", "8M,3M+4K", "--children", "1"]
    d = run.dump(["--machine", "2xMI210"], wl)
    check(d["rc"] == 0, "dedup dump failed:\n" + d["log"][-3000:])
    # (The tree's BOs are not compared with the emulator's as one process's;
    # the restore's verifier checks every byte in both tasks.)
    check(d["img_check_rc"] == 0, "images do not decode or patterns differ: %s" % d["img_check_err"])
    s = dedup_summary(d["log"])
    check(s is not None, "no 'deduplicated:' in the dump's summary line")
    check(s[1] >= 3 * REPLICA, "%d bytes not written again, expected at least 3 x %d" % (s[1], REPLICA))
    images = os.path.join(d["state"], "images")
    m = re.search(r"amdgpu_plugin: dump: .*?BOs \(\d+ with contents\), (\d+) bytes", d["log"])
    check(m and int(m.group(1)) == s[0] + s[1], "the summary's bytes (%s) are not %d written + %d not written" %
          (m and m.group(1), s[0], s[1]))
    payloads = pages_payloads(images)
    check(sum(payloads.values()) == s[0],
          "the pages files hold %d bytes, the summary says %d written" % (sum(payloads.values()), s[0]))
    for f, n in payloads.items():  # cut to the payload, the seal right after it
        check(os.path.getsize(f) == 8 + n + PAGES_SEAL, "%s: %d bytes, not the header, its %d-byte payload and "
              "the %d-byte seal" % (os.path.basename(f), os.path.getsize(f), n, PAGES_SEAL))
    log("  dedup dump ok: %d bytes copied, %d written, %d not written again (%.2f x the replicas)" %
        (s[0] + s[1], s[0], s[1], s[1] / REPLICA))
    r = run.restore(["--machine", "2xMI210"], d)
    expect_good_restore(r, "deduplicated tree", tasks=2)
    # Each process reads its replicas' chunks once for its two GPUs: of
    # the 4 copies, 2 come from memory (the second process reads them
    # again: a run is one process's).
    m = re.search(r"amdgpu_plugin: restore: .*?, (\d+) bytes \(.*?deduplicated: (\d+) bytes \([^)]*\) read "
                  r"from pages files", r["log"])
    check(m is not None, "no 'deduplicated: ... read from pages files' in the restore's summary line")
    restored, read = int(m.group(1)), int(m.group(2))
    check(restored == s[0] + s[1] and read <= restored - 2 * REPLICA,
          "the restore read %d of %d bytes; at most %d expected (each process's replica chunks once)" %
          (read, restored, restored - 2 * REPLICA))
    log("  dedup restore ok: %d bytes restored, %d read from pages files (%.2f x the bytes stored)" %
        (restored, read, read / s[0]))
    # amdgpu-img diff reads the deduplicated chunks where they are stored:
    # against itself no difference; against its flattened copy the same
    # contents, and per GPU what deduplication saved on one side only.
    amdgpu_img = os.path.join(ARGS.bin_dir, "amdgpu-img")
    same = subprocess.run([amdgpu_img, "diff", images, images], capture_output=True, text=True)
    check(same.returncode == 0 and not same.stdout.strip(), "diff of the checkpoint with itself: exit %d\n%s%s" %
          (same.returncode, same.stdout, same.stderr))
    flat = os.path.join(run.scratch, "flat")
    f = subprocess.run([amdgpu_img, "flatten", images, flat], capture_output=True, text=True)
    check(f.returncode == 0, "flatten: %s%s" % (f.stdout, f.stderr))
    df = subprocess.run([amdgpu_img, "diff", images, flat], capture_output=True, text=True)
    lines = df.stdout.strip().splitlines()
    check(df.returncode == 1 and lines and all("deduplicated: GPU 0x" in l and "-> 0 bytes of" in l for l in lines),
          "diff against the flattened copy: exit %d, want only per-GPU deduplication lines:\n%s%s" %
          (df.returncode, df.stdout, df.stderr))
    log("  amdgpu-img diff: none with itself; against the flattened copy %d per-GPU deduplication lines, "
        "no contents differ" % len(lines))
    # The first chunk each 8 MiB replica BO stores itself (GPUs copying
    # at once share the storing), one byte of it: every such chunk is one
    # the other copies refer to.
    shown = json.loads(subprocess.run([amdgpu_img, "show", "--json", images], capture_output=True, text=True,
                                      check=True).stdout)
    stores = [b for k in shown["kfd"] for b in k["bos"]
              if b["size"] == 8 << 20 and b.get("bytes_stored_elsewhere", 0) < b["size"]]
    check(stores, "no 8 MiB replica BO stores a chunk")
    damaged = sorted(set(b["pages_file"] for b in stores))
    for b in stores:
        with open(os.path.join(images, b["pages_file"]), "r+b") as f:
            f.seek(8 + b["pages_offset"] + 17)  # after the 8-byte header
            x = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([x[0] ^ 0x20]))
    r = run.restore(["--machine", "2xMI210"], d)
    refused(r, "stored replica chunks damaged", "of 8;", "a deduplicated chunk that", "do not match their checksum")
    check(any(f in r["log"] for f in damaged), "the refusal names none of %s" % damaged)


def sc_dedup_8x(run):
    """Replicas on 8 x MI300X (the issue's node, the real-CRIU case's
    stand-in): one process whose VRAM holds the same 2 MiB + 4 KiB on every
    GPU plus 64 KiB of its own per GPU. The dump writes the replica once
    (7 of its 8 copies not written); the restore reads every stored byte
    once (the summary's bytes read = the pages files' payloads) and copies
    the replica to all 8 GPUs, every byte verified in the task."""
    replica = 2 * 2**20 + 4096
    machine = ["--machine", "8xMI300X"]
    d = run.dump(machine, ["--vram", "64K", "--gtt", "", "--replica", "2M+4K"])
    check(d["rc"] == 0, "dump failed:\n" + d["log"][-3000:])
    s = dedup_summary(d["log"])
    check(s is not None and s[1] >= 7 * replica, "want 7 x %d bytes not written again, the summary says %s" %
          (replica, s))
    stored = sum(pages_payloads(os.path.join(d["state"], "images")).values())
    r = run.restore(machine, d)
    expect_good_restore(r, "replicas on 8 GPUs")
    m = re.search(r"amdgpu_plugin: restore: .*?, (\d+) bytes \(.*?deduplicated: (\d+) bytes \([^)]*\) read "
                  r"from pages files", r["log"])
    check(m is not None and int(m.group(1)) == s[0] + s[1] and int(m.group(2)) == stored,
          "the restore should read the %d bytes stored once each: %s" % (stored, m and m.groups()))
    log("  8 x MI300X: %d bytes restored, %d read = the %d stored" % (int(m.group(1)), int(m.group(2)), stored))


SCENARIOS = {
    "roundtrip": sc_roundtrip, "bounded": sc_bounded, "hive": sc_hive, "bigger": sc_bigger, "tree": sc_tree,
    "incompatible": sc_incompatible, "dump_faults": sc_dump_faults, "restore_faults": sc_restore_faults,
    "coexist": sc_coexist, "demo": sc_demo, "parallel": sc_parallel, "pre_copy": sc_pre_copy,
    "dedup": sc_dedup, "dedup_8x": sc_dedup_8x,
}


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--inner")
    ap.add_argument("--state")
    ap.add_argument("--spec")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--small", action="store_true",
                    help="roundtrip: SMALL_VRAM's BOs in place of BIG_VRAM's (for variants that test the hooks, not sizes)")
    ap.add_argument("--demo-bo", default="512M",
                    help="demo: the size of its two large BOs per GPU (plus 36 KiB and 4 KiB)")
    ap.add_argument("scenario", nargs="?")
    ARGS = ap.parse_args()
    bins = Bins(os.path.abspath(ARGS.bin_dir))
    if ARGS.inner:
        return {"dump": inner_dump, "restore": inner_restore, "cases": inner_cases}[ARGS.inner](bins, ARGS)
    if ARGS.list:
        print("\n".join(SCENARIOS))
        return 0
    scratch = tempfile.mkdtemp(prefix="amdcr-e2e-%s-" % ARGS.scenario, dir=os.environ.get("AMDCR_E2E_TMP"))
    try:
        SCENARIOS[ARGS.scenario](Run(bins, scratch))
        log("e2e %s: passed" % ARGS.scenario)
        return 0
    except Failed as e:
        log("e2e %s: FAILED: %s" % (ARGS.scenario, e))
        log("(scratch kept in %s)" % scratch)
        ARGS.keep = True
        return 1
    finally:
        if not ARGS.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
