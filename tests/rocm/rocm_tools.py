#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Debian's rocminfo and rocm-smi (ROCm 5.2) on an emulated machine, their
output checked against the machine: `kfd-emu machine` for the per-GPU
facts the profile resolves (gpu_id, PCI slot, VRAM, ASIC) and, per ASIC,
what the runtime must make of it (gfx target, marketing name from
amdgpu.ids, chip id, compute units, clock, memory clock, VBIOS, power
cap); rocm-smi also shows the firmware versions kfd-emu is given.

  rocm_tools.py --kfd-emu PATH --machine NAME rocminfo|rocm-smi|rocm-smi-writes|rocm-smi-all

rocm-smi-all: `rocm-smi -a`, whose only failures must be those of the real
board (files the kernel does not create for the ASIC, a format rocm-smi
5.2 cannot use).

rocm-smi-writes: rocm-smi's writes (--setperflevel, --setpoweroverdrive,
--resetpoweroverdrive) and shell redirections to sysfs read back as the
kernel's attributes (each write the whole value).

As root, the tools run with a /dev/shm of their own (harness.private_dev_shm):
rocm-smi's library keeps a mutex per card there (rocm_smi_card0, ...),
which tests running at the same time, on machines with the same card
names, would otherwise share.

Exit 0 when every check holds, 1 otherwise, 77 (NOT RUN) when the tool is
not installed."""
import argparse
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import harness  # noqa: E402

# Per ASIC (nodes/N/name): what ROCm 5.2 reports. None: ROCr 5.2 does not
# know the target and leaves the GPU out.
EXPECT = {
    "arcturus": dict(gfx="gfx908", marketing="AMD Instinct MI100", chip=0x738C, cu=120,
                     clock=1502, vbios="113-D3431401-100", series="Instinct MI100", power=290,
                     mclk=1200),
    "aldebaran": dict(gfx="gfx90a", marketing="AMD Instinct MI210", chip=0x740F, cu=104,
                      clock=1700, vbios="113-D67301-063", series="Instinct MI210", power=300,
                      mclk=1600),
    "aqua_vanjaram": None,
}

failures = []


def check(cond, what):
    if cond:
        print(f"ok {what}")
    else:
        print(f"FAIL {what}")
        failures.append(what)


def machine_facts(kfd_emu, machine):
    out = subprocess.run([kfd_emu, "machine", "--machine", machine], check=True,
                         capture_output=True, text=True).stdout
    cpus, gpus = 0, []
    for line in out.splitlines():
        m = re.match(r"node (\d+): gpu (\S+) gpu_id (\d+) renderD(\d+) card(\d+) pci (\S+) vram (\d+)", line)
        if m:
            gpus.append(dict(node=int(m[1]), asic=m[2], gpu_id=int(m[3]), minor=int(m[4]),
                             card=int(m[5]), pci=m[6], vram=int(m[7])))
        elif re.match(r"node \d+: cpu", line):
            cpus += 1
    return cpus, gpus


def bdfid(pci):
    dom, bus, rest = pci.split(":")
    dev, fn = rest.split(".")
    return (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn, 16)


def run_emulated(kfd_emu, machine, argv):
    p = subprocess.run([kfd_emu, "--machine", machine, "--"] + argv, capture_output=True,
                       text=True, timeout=120)
    sys.stdout.write(p.stdout[-4000:] if len(p.stdout) > 4000 else p.stdout)
    sys.stdout.write(p.stderr)
    return p


def rocminfo(kfd_emu, machine):
    cpus, gpus = machine_facts(kfd_emu, machine)
    p = run_emulated(kfd_emu, machine, ["rocminfo"])
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout)
    check("ROCk module is loaded" in out, "rocminfo finds the amdgpu module")
    # Agent blocks: "*******\nAgent N\n*******\n" then "  Key: value" lines.
    agents = []
    for block in re.split(r"\*{7}\s*\nAgent \d+\s*\n\*{7}\s*\n", out)[1:]:
        a = {}
        for line in block.splitlines():
            m = re.match(r"  (\S[^:]*):\s+(.*?)\s*$", line)
            if m and m[1] not in a:
                a[m[1]] = m[2]
        a["pool_sizes"] = [int(x) for x in re.findall(r"Size:\s+(\d+)\(0x[0-9a-f]+\) KB", block)]
        a["isas"] = re.findall(r"Name:\s+(amdgcn-amd-amdhsa--\S+)", block)
        agents.append(a)
    cpu_agents = [a for a in agents if a.get("Device Type") == "CPU"]
    gpu_agents = [a for a in agents if a.get("Device Type") == "GPU"]
    check(p.returncode == 0, f"rocminfo exits 0 (got {p.returncode})")
    check(len(cpu_agents) == cpus, f"{len(cpu_agents)} CPU agents, machine has {cpus} CPU nodes")
    for a in cpu_agents:
        check("(emulated)" in a.get("Name", ""), f"CPU agent {a.get('Node')} is the profile's CPU ({a.get('Name')})")
    known = [g for g in gpus if EXPECT.get(g["asic"])]
    check(len(gpu_agents) == len(known),
          f"{len(gpu_agents)} GPU agents, expected {len(known)} of the machine's {len(gpus)} GPUs")
    for g, a in zip(known, gpu_agents):
        e = EXPECT[g["asic"]]
        tag = f"node {g['node']}"
        check(a.get("Name") == e["gfx"], f"{tag} name {a.get('Name')} == {e['gfx']}")
        check(a.get("Marketing Name") == e["marketing"], f"{tag} marketing name {a.get('Marketing Name')!r}")
        check(a.get("Node") == str(g["node"]), f"{tag} agent node {a.get('Node')}")
        check(a.get("Chip ID", "").startswith(f"{e['chip']}("), f"{tag} chip id {a.get('Chip ID')}")
        check(a.get("Compute Unit") == str(e["cu"]), f"{tag} compute units {a.get('Compute Unit')}")
        check(a.get("Max Clock Freq. (MHz)") == str(e["clock"]), f"{tag} clock {a.get('Max Clock Freq. (MHz)')}")
        check(a.get("BDFID") == str(bdfid(g["pci"])), f"{tag} BDFID {a.get('BDFID')} is {g['pci']}")
        check(bool(a["pool_sizes"]) and a["pool_sizes"][0] == g["vram"] // 1024,
              f"{tag} VRAM pool {a['pool_sizes'][:1]} KB == {g['vram'] // 1024} KB")
        check(bool(a["isas"]) and a["isas"][0].startswith(f"amdgcn-amd-amdhsa--{e['gfx']}"),
              f"{tag} ISA {a['isas'][:1]}")
        check(re.fullmatch(r"GPU-[0-9a-f]{16}", a.get("Uuid", "")) is not None, f"{tag} uuid {a.get('Uuid')}")


def rocm_smi(kfd_emu, machine):
    cpus, gpus = machine_facts(kfd_emu, machine)
    # The shell opens /dev/kfd (a KFD context, as a GPU program has) so
    # that --showpids has a process to list.
    script = ("exec 3</dev/kfd; echo shell-pid $$; rocm-smi; echo concise-rc=$?; rocm-smi --showid --showbus --showvbios "
              "--showproductname --showmeminfo vram --showdriverversion --showuniqueid --showpids")
    p = run_emulated(kfd_emu, machine, ["sh", "-c", script])
    out = p.stdout
    check(p.returncode == 0, f"rocm-smi exits 0 (got {p.returncode})")
    check("concise-rc=0" in out, "plain rocm-smi (the concise table) exits 0")
    check("amdgpu not found" not in out + p.stderr and "No AMD GPUs" not in out + p.stderr,
          "rocm-smi finds the driver and the GPUs")
    check(re.search(r"Driver version:\s+\S+", out) is not None, "driver version shown")
    concise = re.findall(r"^(\d+)\s+[\d.]+c\s+[\d.]+W\s+(\d+)Mhz\s+(\d+)Mhz", out, re.M)
    check(len(concise) == len(gpus), f"concise table has {len(concise)} GPUs of {len(gpus)}")
    for i, g in enumerate(gpus):
        e = EXPECT.get(g["asic"])
        tag = f"GPU[{i}]"
        m = re.search(rf"^GPU\[{i}\]\s+: GPU ID: 0x([0-9a-f]+)", out, re.M)
        if e:
            check(m is not None and int(m[1], 16) == e["chip"], f"{tag} device id {m and m[1]}")
            m = re.search(rf"^GPU\[{i}\]\s+: VBIOS version: (\S+)", out, re.M)
            check(m is not None and m[1] == e["vbios"], f"{tag} vbios {m and m[1]}")
            m = re.search(rf"^GPU\[{i}\]\s+: Card series:\s+(.*?)\s*$", out, re.M)
            check(m is not None and m[1] == e["series"], f"{tag} card series {m and m[1]}")
        m = re.search(rf"^GPU\[{i}\]\s+: PCI Bus: (\S+)", out, re.M)
        check(m is not None and m[1].lower() == g["pci"], f"{tag} PCI bus {m and m[1]} == {g['pci']}")
        m = re.search(rf"^GPU\[{i}\]\s+: VRAM Total Memory \(B\): (\d+)", out, re.M)
        check(m is not None and int(m[1]) == g["vram"], f"{tag} VRAM total {m and m[1]}")
        m = re.search(rf"^GPU\[{i}\]\s+: Unique ID: 0x([0-9a-f]+)", out, re.M)
        check(m is not None, f"{tag} unique id {m and m[1]}")
    shell = re.search(r"shell-pid (\d+)", out)
    listed = re.findall(r"^(\d+)\s+\S+\s+(\d+)\s+\d+\s+\d+\s+\d+\s*$", out, re.M)
    check(shell is not None and any(pid == shell[1] for pid, _ in listed),
          f"--showpids lists the shell holding /dev/kfd (pid {shell and shell[1]}, listed {listed})")


# The 21 firmware blocks rocm-smi 5.2 shows; per ASIC the versions the
# profile's template gives the blocks besides MEC and SDMA (the others 0).
FW_BLOCKS = ["ASD", "CE", "DMCU", "MC", "ME", "MEC", "MEC2", "PFP", "RLC", "RLC SRLC", "RLC SRLG", "RLC SRLS",
             "SDMA", "SDMA2", "SMC", "SOS", "TA RAS", "TA XGMI", "UVD", "VCE", "VCN"]
FW_EXPECT = {
    "arcturus": {"RLC": "24", "SMC": "00.54.29.00", "SOS": "0x0017004f", "TA RAS": "27.00.01.62",
                 "TA XGMI": "32.00.00.17", "VCN": "0x01101015"},
    "aldebaran": {"RLC": "17", "SMC": "00.68.56.00", "SOS": "0x0027007f", "TA RAS": "27.00.01.60",
                  "TA XGMI": "32.00.00.13", "VCN": "0x0110101b"},
}


def rocm_smi_firmware(kfd_emu, machine):
    """Every firmware block rocm-smi shows, with the versions kfd-emu was
    given (--fw-version: MEC and MEC2, --sdma-fw-version: SDMA and SDMA2)
    and the profile's for the others; the board's power cap, per GPU."""
    _, gpus = machine_facts(kfd_emu, machine)
    p = subprocess.run([kfd_emu, "--machine", machine, "--fw-version", "99", "--sdma-fw-version", "7", "--",
                        "rocm-smi", "--showfwinfo", "--showmaxpower"], capture_output=True, text=True, timeout=120)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    out = p.stdout
    check(p.returncode == 0, f"rocm-smi --showfwinfo exits 0 (got {p.returncode})")
    for i, g in enumerate(gpus):
        tag = f"GPU[{i}]"
        for block, want in (("MEC", 99), ("MEC2", 99), ("SDMA", 7), ("SDMA2", 7)):
            m = re.search(rf"^GPU\[{i}\]\s+: {block} firmware version:\s+(\d+)", out, re.M)
            check(m is not None and int(m[1]) == want, f"{tag} {block} firmware {m and m[1]} == {want}")
        fw = FW_EXPECT.get(g["asic"], {})
        for block in FW_BLOCKS:
            if block in ("MEC", "MEC2", "SDMA", "SDMA2"):
                continue
            m = re.search(rf"^GPU\[{i}\]\s+: {block} firmware version:\s+(\S+)", out, re.M)
            got = m and m[1]
            want = fw.get(block)
            ok = got is not None and (got == want if want else got in ("0", "0x00000000", "00.00.00.00"))
            check(ok, f"{tag} {block} firmware {got} == {want or 0}")
        e = EXPECT.get(g["asic"])
        if e:
            m = re.search(rf"^GPU\[{i}\]\s+: Max Graphics Package Power \(W\): ([\d.]+)", out, re.M)
            check(m is not None and float(m[1]) == e["power"], f"{tag} power cap {m and m[1]} == {e['power']}")


def rocm_smi_writes(kfd_emu, machine):
    """rocm-smi's own writes to sysfs, and shell redirections, read back as
    the kernel's attributes would: each write the whole value."""
    _, gpus = machine_facts(kfd_emu, machine)
    dev = f"/sys/class/drm/card{gpus[0]['card']}/device"
    level = f"{dev}/power_dpm_force_performance_level"
    cap = f"{dev}/hwmon/hwmon0/power1_cap"
    script = (f"rocm-smi --setperflevel manual; echo level=$(cat {level}); "
              f"rocm-smi --setperflevel auto; echo level=$(cat {level}); od -c {level} | head -1; "
              f"rocm-smi --autorespond y --setpoweroverdrive 250; echo cap=$(cat {cap}); "
              f"rocm-smi --autorespond y --setpoweroverdrive 25; od -An -c {cap} | tr -d ' \\n'; echo; "
              f"rocm-smi --resetpoweroverdrive; echo cap=$(cat {cap}); "
              f"echo manual > {level}; echo auto > {level}; printf 'redir=%s\\n' \"$(od -An -c {level} | tr -d ' ')\"; "
              f"echo high >> {level}; printf 'append=%s\\n' \"$(od -An -c {level} | tr -d ' ')\"")
    p = run_emulated(kfd_emu, machine, ["sh", "-c", script])
    out = p.stdout
    check("Performance level set to manual" in out, "rocm-smi --setperflevel manual succeeds")
    check(re.findall(r"^level=(\S+)", out, re.M) == ["manual", "auto"], "the level reads back manual, then auto")
    check("0000000   a   u   t   o  \\n" in out, "no stale byte after the shorter value")
    check("Successfully set power to: 250W" in out, "--setpoweroverdrive 250 succeeds")
    check("Successfully set power to: 25W" in out, "--setpoweroverdrive 25 succeeds")
    check(re.search(r"^25000000\\n$", out, re.M) is not None, "power1_cap reads back 25000000 and one newline")
    check(re.findall(r"^cap=(\d+)", out, re.M)[-1:] == [str(EXPECT[gpus[0]["asic"]]["power"] * 1000000)],
          "--resetpoweroverdrive puts back the board's default cap")
    check(re.search(r"^redir=auto\\n$", out, re.M) is not None, "echo > after a longer value reads back auto")
    check(re.search(r"^append=high\\n$", out, re.M) is not None, "echo >> replaces the value too")


# What `rocm-smi -a` fails to read on each ASIC, as on the real board with
# a current amdgpu (whatever amdgpu.ppfeaturemask says: smu_set_funcs
# turns overdrive off for arcturus and on for aldebaran), and the status
# it then exits with (its last failure's):
# * pp_sclk_od, pp_mclk_od: no swsmu driver has them ("sclk OverDrive",
#   "mclk OverDrive", RSMI_STATUS_NOT_SUPPORTED);
# * arcturus: no pp_od_clk_voltage ("od volt", NOT_SUPPORTED, 2);
# * aldebaran: no pp_power_profile_mode ("profiles"), and its
#   pp_od_clk_voltage (GFXCLK and MCLK levels) reads, but rocm-smi 5.2
#   finds no voltage curve regions in that format and asks for none
#   ("volt": the voltage range, RSMI_STATUS_INVALID_ARGS, 1).
SMI_ALL_FAILS = {
    "arcturus": (["sclk OverDrive", "mclk OverDrive", "od volt"], 2),
    "aldebaran": (["sclk OverDrive", "mclk OverDrive", "profiles", "voltage range"], 1),
}


def smi_errors(out, i):
    """The metrics rocm-smi could not read for GPU i, by the words its
    error lines name them with."""
    found = set()
    for line in out.splitlines():
        if not line.startswith("ERROR") or f"GPU[{i}]" not in line:
            continue
        for what in ("sclk OverDrive", "mclk OverDrive", "od volt", "profiles", "Energy Counter"):
            if what in line:
                found.add(what)
        if re.search(rf"GPU\[{i}\]: volt: ", line):
            found.add("voltage range")
        if re.search(rf"GPU\[{i}\]:RSMI_STATUS_NOT_SUPPORTED", line):
            found.add("sclk OverDrive")  # the level's own call, before the sentence naming it
    return found


def rocm_smi_all(kfd_emu, machine):
    """rocm-smi -a: every section shown; the energy counter (gpu_metrics),
    HBM temperatures and, where the driver has them, the power profiles and
    the overdrive clock table read; what fails is exactly what fails on the
    real board (SMI_ALL_FAILS), and so is the exit status."""
    _, gpus = machine_facts(kfd_emu, machine)
    p = run_emulated(kfd_emu, machine, ["rocm-smi", "-a"])
    out = p.stdout + p.stderr
    check("End of ROCm SMI Log" in out, "rocm-smi -a runs to its end")
    # rocm-smi 5.2 names the mclk OverDrive failure for the first GPU only,
    # so each GPU's failures are among the expected ones, and all of them
    # together are the expected ones.
    expected, failed, status = set(), set(), 0
    for i, g in enumerate(gpus):
        tag = f"GPU[{i}]"
        fails, status = SMI_ALL_FAILS.get(g["asic"], ([], status))
        want = set(fails)
        expected |= want
        got = smi_errors(out, i)
        failed |= got
        check(got <= want, f"{tag} fails to read only {sorted(want)} (got {sorted(got)})")
        check(re.search(rf"^GPU\[{i}\]\s+: Energy counter: \d+", out, re.M) is not None, f"{tag} energy counter")
        check(re.search(rf"^GPU\[{i}\]\s+: Temperature \(Sensor HBM 0\) \(C\): 38.0", out, re.M) is not None,
              f"{tag} HBM temperature from gpu_metrics")
        if "profiles" not in want:
            check(re.search(rf"^GPU\[{i}\]\s+: \d+\. Available power profile .*BOOTUP DEFAULT\*", out, re.M)
                  is not None, f"{tag} power profiles, BOOTUP_DEFAULT current")
        if "od volt" not in want:
            # pp_od_clk_voltage's GFXCLK levels as the sclk range, its last
            # MCLK level as the memory clock's top.
            e = EXPECT[g["asic"]]
            m = re.search(rf"^GPU\[{i}\]\s+: OD_SCLK:\s*\n.*: 0: (\d+)Mhz\s*\n.*: 1: (\d+)Mhz\s*\n"
                          rf".*: OD_MCLK:\s*\n.*: 1: (\d+)Mhz", out, re.M)
            check(m is not None and int(m[2]) == e["clock"] and int(m[3]) == e["mclk"],
                  f"{tag} overdrive table sclk {m and m[1]}-{m and m[2]} MHz, mclk {m and m[3]} MHz")
    check(failed == expected, f"the failures are exactly {sorted(expected)} (got {sorted(failed)})")
    check(p.returncode == status, f"rocm-smi -a exits {status} (got {p.returncode})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kfd-emu", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("tool", choices=["rocminfo", "rocm-smi", "rocm-smi-writes", "rocm-smi-all"])
    a = ap.parse_args()
    tool = "rocm-smi" if a.tool.startswith("rocm-smi") else a.tool
    if not shutil.which(tool):
        print(f"NOT RUN: {tool} is not installed (Debian package {tool}; scripts/install-deps.sh)")
        return 77
    if os.geteuid() == 0:
        harness.private_dev_shm()
    if a.tool == "rocminfo":
        rocminfo(a.kfd_emu, a.machine)
    elif a.tool == "rocm-smi-writes":
        rocm_smi_writes(a.kfd_emu, a.machine)
    elif a.tool == "rocm-smi-all":
        rocm_smi_all(a.kfd_emu, a.machine)
    else:
        rocm_smi(a.kfd_emu, a.machine)
        rocm_smi_firmware(a.kfd_emu, a.machine)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
