# SPDX-License-Identifier: GPL-2.0-only
"""Helpers for tests that run the plugin under a real CRIU binary.

Reusable pieces (run_test.py is one user; a GPU round trip under real CRIU
can be another):

  find_criu(list_file, version)    the binary scripts/build-criu.sh listed
  criu_hook_count(criu)            the hook slots that CRIU binary has
  require_usable(criu)             NOT RUN (exit 77) unless CRIU can run here
  require_criu(args)               the CRIU a harness runs (--criu, or the one
                                   listed for --criu-version), usable, in a
                                   build without sanitizers
  private_criu_run(args, criu)     a /run of the harness's own, for kdat_cache
  kdat_cache(criu, dir)            CRIU's kernel-feature cache, kept per boot
  make_libdir(dir, plugins)        a plugin directory CRIU loads in our order
  Criu(...).dump(pid) / .restore() criu dump / restore -v4 with a plugin dir
  plugin_lines(log)                CRIU's 'Plugin "X" (version V hooks N)'
  log_problems(log, file_names)    CRIU's error/warning lines about plugins
  read_tap(path), tap_problems()   plugin messages with their log levels
  read_witness(path)               what the witness plugin received
  start_counter(counter, work)     the GPU-less counter, counting
  witness_problems(...)            missing and unexpected witness events
  end_process(pid)                 SIGTERM, SIGKILL, reaped

The verdicts (NotRun, Failed) and the end of a harness's main() are
tests/common/harness.py's, which every harness shares.

Facts used (CRIU 4.2.1 and criu-dev sources): CRIU loads every *.so of its
plugin directory in readdir order (criu/plugin.c cr_plugin_init) and logs
each loaded plugin at debug level as 'Plugin "<name>" (version <v> hooks
<n>)'; its error and warning macros (criu/include/log.h) start the message
with "Error (<file>:<line>): " and "Warn  (<file>:<line>): "; at -v4 each
line starts with a "(SS.uuuuuu) " timestamp (criu/log.c), after which a
restored task's lines carry "<pid>: ". Messages that a plugin prints through
print_on_level() carry no level in the log, hence the level tap
(log_tap.c).
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import harness  # noqa: E402
from harness import Failed, NotRun  # noqa: E402

# CRIU's kernel-feature cache (criu/kerndat.c: KDAT_RUNDIR "/" KERNDAT_CACHE_NAME)
KDAT = "/run/criu.kdat"

STAGE_DUMP = 0
STAGE_RESTORE = 2

WITNESS = "realcriu_witness"


# --------------------------------------------------------------------------
# Finding and judging a CRIU binary
# --------------------------------------------------------------------------

def find_criu(list_file, version):
    """The binary listed for `version` in scripts/build-criu.sh's list. When
    it is not there, NOT RUN says why, with the script's criu-bins.why beside
    the list (the ways to get a CRIU) when the script wrote one."""
    if not os.path.exists(list_file):
        raise NotRun(f"{list_file} does not exist: scripts/build-criu.sh has not run")
    with open(list_file) as f:
        for line in f:
            ver, _, path = line.rstrip("\n").partition("\t")
            if ver == version:
                if not os.access(path, os.X_OK):
                    raise NotRun(f"criu {version}: {path} is not an executable")
                return path
    why = ""
    try:
        with open(os.path.join(os.path.dirname(list_file), "criu-bins.why")) as f:
            why = ": " + f.read().strip()
    except OSError:
        pass
    raise NotRun(f"criu {version} is not listed in {list_file} (scripts/build-criu.sh made no such binary){why}")


def criu_hook_count(criu):
    """Hook slots of this CRIU binary, from the size of its exported plugin
    registry cr_plugin_ctl: one list head (16 bytes on x86-64) for the list
    of plugins plus one per hook slot (13 in 4.0-4.2.1, 15 in criu-dev).
    Read from the binary itself, independently of any plugin."""
    out = subprocess.run(["nm", "-D", "-S", "--defined-only", criu], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == "cr_plugin_ctl":
            size = int(parts[1], 16)
            if size % 16:
                raise Failed(f"{criu}: cr_plugin_ctl is {size:#x} bytes, not a list of 16-byte heads")
            return size // 16 - 1
    raise Failed(f"{criu} exports no cr_plugin_ctl: not a CRIU 4.x binary?")


def require_root():
    if os.geteuid() != 0:
        raise NotRun("CRIU dumps and restores only as root")


def require_usable(criu):
    """NOT RUN unless we are root and `criu check` passes on this kernel."""
    require_root()
    r = subprocess.run([criu, "check"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        raise NotRun(f"`{criu} check` fails on this machine: {' | '.join(tail)}")


def require_criu(args, own_run=False, check=True):
    """The CRIU binary a harness runs: args.criu, or the one listed for
    args.criu_version in args.criu_list; NOT RUN in a sanitizer build
    (args.sanitized, the build's AMDCR_SANITIZE) and unless CRIU is usable
    here (require_usable). `own_run`: first the harness (one thread yet)
    gets a mount namespace of its own with its own /dev/shm and /run
    (harness.private_dev_shm, private_run), in which its CRIU runs share
    a kernel-feature cache (kdat_cache) beside args.criu_list. `check`
    False: the harness runs `criu check` (require_usable) later itself, in
    the namespace it is about to make."""
    if args.sanitized.upper() not in ("", "OFF", "0", "FALSE", "NO"):
        raise NotRun(f"sanitizer build ({args.sanitized}): CRIU cannot load a sanitized plugin")
    criu = args.criu or find_criu(args.criu_list, args.criu_version)
    keep = None
    if own_run:
        require_root()
        harness.private_dev_shm()
        keep = private_criu_run(args, criu)
    if not check:
        require_root()
        return criu
    require_usable(criu)
    if keep:
        keep()
    return criu


def private_criu_run(args, criu):
    """In the harness's own mount namespace: a /run of its own
    (harness.private_run), in which the runs of `criu` share a
    kernel-feature cache beside args.criu_list (kdat_cache). Returns
    kdat_cache's answer: what to call after the first CRIU run, or None."""
    harness.private_run()
    if not args.criu_list:
        return None
    return kdat_cache(criu, os.path.join(os.path.dirname(args.criu_list), "kdat"))


def kdat_cache(criu, cache_dir):
    """CRIU's kernel-feature cache for this test's runs of `criu`: CRIU
    probes the kernel at every start (0.2 s quiet; tens of seconds were
    seen on a loaded machine, creating a network namespace and a veth)
    unless it finds /run/criu.kdat, which it writes only on a tmpfs; the
    test's /run is one (harness.private_run). The first test of a boot
    keeps the file its `criu check` wrote in `cache_dir`, and later tests
    start from a copy. CRIU checks only the file's size and magic numbers
    (criu/kerndat.c kerndat_try_load_cache) and, like CRIU with its /run,
    trusts the rest until the next boot; so the copy is named by the boot
    (its boot_id) and the binary (path, inode, size, modification time),
    and no other boot or binary ever reads it. Copies the file in, if there
    is one; returns what to call after the first CRIU run: keeping the file
    it wrote, when there was none, or None."""
    st = os.stat(criu)
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    ident = f"{boot}\0{os.path.realpath(criu)}\0{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
    cached = os.path.join(cache_dir, f"criu.kdat.{hashlib.sha256(ident.encode()).hexdigest()[:24]}")
    if os.path.exists(cached):
        shutil.copyfile(cached, KDAT)
        os.chmod(KDAT, 0o600)
        return None

    def keep():
        if not os.path.exists(KDAT):
            return
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{cached}.{os.getpid()}"
        shutil.copyfile(KDAT, tmp)
        os.replace(tmp, cached)
    return keep


# --------------------------------------------------------------------------
# The plugin directory
# --------------------------------------------------------------------------

def make_libdir(libdir, plugins, attempts=256):
    """Fill `libdir` (recreated) with symlinks to the plugins, such that
    readdir lists them in the given order, which is CRIU's load order.

    plugins: [(stem, path_to_so)] in the wanted load order. readdir order
    depends on the file system (ext4: a hash of the name; tmpfs: creation
    order), so names stem.so, stem-1.so, ... and both creation orders are
    tried until os.listdir (readdir, unsorted) agrees. CRIU does not care
    about file names (it uses the descriptor's name). Returns {stem: file
    name}. The caller should still confirm the order from CRIU's log
    (plugin_lines)."""
    stems = [s for s, _ in plugins]
    for attempt in range(attempts):
        shutil.rmtree(libdir, ignore_errors=True)
        os.makedirs(libdir)
        names = [f"{s}.so" if attempt == 0 else f"{s}-{attempt}.so" for s in stems]
        entries = list(zip(names, (os.path.abspath(p) for _, p in plugins)))
        for name, target in (entries if attempt % 2 == 0 else reversed(entries)):
            os.symlink(target, os.path.join(libdir, name))
        if [n for n in os.listdir(libdir) if n.endswith(".so")] == names:
            return dict(zip(stems, names))
    raise Failed(f"no names found that {libdir} lists in the order {stems}")


# --------------------------------------------------------------------------
# Running CRIU
# --------------------------------------------------------------------------

class Run:
    def __init__(self, args, returncode, log_path, output):
        self.args = args
        self.returncode = returncode
        self.log_path = log_path
        self.output = output
        self.log = ""
        if os.path.exists(log_path):
            with open(log_path, errors="replace") as f:
                self.log = f.read()

    def ok(self):
        return self.returncode == 0

    def describe(self):
        tail = "\n".join(self.log.splitlines()[-15:])
        return (f"`{' '.join(self.args)}` exited {self.returncode}; log {self.log_path} ends:\n{tail}"
                f"\n{self.output.strip()}")


class Criu:
    """One CRIU binary with a plugin directory, a work directory and the
    environment for its plugins (e.g. REALCRIU_WITNESS_LOG) and preloads."""

    def __init__(self, criu, libdir, work, env=None, preload=None):
        self.criu = criu
        self.libdir = libdir
        self.work = work
        self.env = dict(os.environ)
        self.env.update(env or {})
        if preload:
            self.env["LD_PRELOAD"] = preload

    def _run(self, args, log_name, timeout=60):
        log_path = os.path.join(self.work, log_name)
        r = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout)
        return Run(args, r.returncode, log_path, r.stdout + r.stderr)

    def dump(self, pid, images, log_name="dump.log", extra=()):
        os.makedirs(images, exist_ok=True)
        return self._run([self.criu, "dump", "-t", str(pid), "-D", images, "--shell-job", "-v4",
                          "-o", os.path.join(self.work, log_name), "--libdir", self.libdir,
                          *extra], log_name)

    def restore(self, images, pidfile, log_name="restore.log", extra=()):
        """criu restore -d: CRIU exits once the tasks run; they become
        children of the nearest subreaper (harness.become_subreaper)."""
        return self._run([self.criu, "restore", "-D", images, "--shell-job", "-v4",
                          "-o", os.path.join(self.work, log_name), "--libdir", self.libdir,
                          "-d", "--pidfile", pidfile, *extra], log_name)


def end_process(pid, timeout=5.0):
    """SIGTERM, then SIGKILL, and reap if it is our child. Returns the wait
    status, or None when it is not our child."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.01)


# --------------------------------------------------------------------------
# CRIU's log
# --------------------------------------------------------------------------

PLUGIN_LINE = re.compile(r'Plugin "([^"]+)" \(version (\d+) hooks (\d+)\)')
CRIU_ERROR = "Error ("
CRIU_WARN = "Warn  ("


def plugin_lines(log_text):
    """[(name, version, hooks)] in the order CRIU loaded the plugins."""
    return [(m.group(1), int(m.group(2)), int(m.group(3))) for m in PLUGIN_LINE.finditer(log_text)]


def log_problems(log_text, words):
    """CRIU's error and warning lines that name one of `words` (a plugin's
    file name or descriptor name), and any "Corrupted plugin" line."""
    out = []
    for line in log_text.splitlines():
        if "Corrupted plugin" in line:
            out.append(line)
        elif (CRIU_ERROR in line or CRIU_WARN in line) and any(w in line for w in words):
            out.append(line)
    return out


# --------------------------------------------------------------------------
# The level tap (log_tap.c) and the witness (witness.c)
# --------------------------------------------------------------------------

def read_tap(path):
    """[(pid, library file name, level, message)]; levels 1 error 2 warn
    3 info 4 debug."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            pid, lib, level, msg = line.rstrip("\n").split("\t", 3)
            out.append((int(pid), lib, int(level), msg))
    return out


def tap_problems(entries, lib):
    """The error and warning messages that the library file `lib` printed."""
    return [f"level {lvl}: {msg}" for _, who, lvl, msg in entries if who == lib and lvl <= 2]


def read_witness(path):
    """["EVENT args", ...] in the order the witness received them."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t", 1)[1] for line in f]


def expected_plain_events(hook_count, pid):
    """What a plugin loaded last receives for one GPU-less, single-threaded
    task without external resources, by CRIU's call sites:
      dump:    init(DUMP), PAUSE_DEVICES (criu/seize.c, before freezing),
               CHECKPOINT_DEVICES (seize.c checkpoint_devices, per task),
               DUMP_DEVICES_LATE (criu-dev cr-dump.c, with the root pid),
               exit(DUMP, 0)
      restore: init(RESTORE), RESTORE_INIT (criu-dev plugin.c, after the
               inventory check), POST_FORKING (cr-restore.c),
               RESUME_DEVICES_LATE (cr-restore.c, per task), exit(RESTORE, 0)
    The file, socket, mount, link and device-mapping hooks have nothing to
    do for such a task. Hooks 13 and 14 exist only with 15 slots."""
    late = hook_count >= 15
    dump = [f"init stage={STAGE_DUMP}", f"PAUSE_DEVICES pid={pid}", f"CHECKPOINT_DEVICES pid={pid}"]
    if late:
        dump.append(f"DUMP_DEVICES_LATE id={pid}")
    dump.append(f"exit stage={STAGE_DUMP} ret=0")
    restore = [f"init stage={STAGE_RESTORE}"]
    if late:
        restore.append("RESTORE_INIT")
    restore += ["POST_FORKING", f"RESUME_DEVICES_LATE pid={pid}", f"exit stage={STAGE_RESTORE} ret=0"]
    return dump, restore


def witness_problems(phase, actual, expected):
    """Events missing from `actual`, unexpected ones, and a wrong order."""
    out = [f"witness: {phase}: missing {e}" for e in expected if e not in actual]
    out += [f"witness: {phase}: unexpected {a}" for a in actual if a not in expected]
    if not out and actual != expected:
        out.append(f"witness: {phase}: order {actual}, expected {expected}")
    return out


# --------------------------------------------------------------------------
# The GPU-less target (counter.c)
# --------------------------------------------------------------------------

def read_counts(path):
    with open(path) as f:
        data = f.read()
    # The last line may be half-written while the counter runs.
    return [int(x) for x in data.split("\n")[:-1]]


def counts_problem(counts):
    """None if counts are 0, 1, 2, ... without a gap or restart."""
    for i, n in enumerate(counts):
        if n != i:
            return f"line {i + 1} is {n}, expected {i} (restart or lost state)"
    return None


def wait_counts(path, at_least, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and len(read_counts(path)) >= at_least:
            return True
        time.sleep(0.01)
    return False


def start_counter(counter, work):
    """Starts the GPU-less counter (counter.c) writing to WORK/counts.txt in
    its own session (nothing of the caller's terminal or pipes) and waits
    until it counts. Returns (pid, counts path)."""
    out = os.path.join(work, "counts.txt")
    p = subprocess.Popen([counter, out], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    if not wait_counts(out, 5):
        end_process(p.pid)
        raise Failed("the counter did not start counting")
    return p.pid, out

