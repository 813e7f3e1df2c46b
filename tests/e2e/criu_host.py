# SPDX-License-Identifier: GPL-2.0-only
"""What the e2e harnesses that run the CRIU stand-in inside one emulated
machine share (render_e2e.py, dmabuf_e2e.py): the build's binaries they
all run, a criu-host run with its log, and the host side of main()."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import harness  # noqa: E402


class Bins:
    """kfd-emu, criu-host and the plugin of the build in `d`."""

    def __init__(self, d):
        self.emu = os.path.join(d, "tests/emulator/kfd-emu")
        self.host = os.path.join(d, "tests/host/criu-host")
        self.plugin = os.path.join(d, "amdgpu_plugin.so")


def run(bins, args, env, log, timeout=600):
    """criu-host `args` (-v4, its log at `log`, its output at `log`.out)
    with the emulator's kfd-emu and `env` added to the environment, killed
    after `timeout` s. Returns (exit status, log + output, its pid)."""
    e = dict(os.environ, CRIU_HOST_KFDEMU=bins.emu, **env)
    with open(log + ".out", "w") as out:
        p = subprocess.Popen([bins.host] + args + ["-v4", "-o", log], env=e, stdout=out, stderr=subprocess.STDOUT)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
    text = (open(log).read() if os.path.exists(log) else "") + open(log + ".out").read()
    return rc, text, p.pid


def run_inside_machine(script, bins, prefix, why, machine="MI100", timeout=900):
    """The host side of main(): a new work directory `prefix`*, `script`
    run again with --inner --work DIR inside `kfd-emu --machine machine`,
    and the verdict on its exit status (harness.finish, `why` after it)."""
    work = harness.work_dir(prefix)
    r = subprocess.run([bins.emu, "--machine", machine, "--"] + harness.self_command(script, "--inner", "--work", work),
                       timeout=timeout)
    harness.finish(r.returncode == 0, work, why=why)
