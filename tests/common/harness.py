# SPDX-License-Identifier: GPL-2.0-only
"""What every Python test harness shares: its verdicts and the end of its
main().

A harness ends with one of three verdicts, as CTest reads exit codes:
0 PASS, 1 FAIL, 77 NOT RUN (CTest's SKIP_RETURN_CODE: something the test
needs is absent, and the reason is printed; never counted as a pass).

  NotRun, Failed            the two ways a check ends a test early
  check(cond, what)         Failed(what) unless cond
  require_built(paths..)    NotRun naming the first path that does not exist
  not_run()                 NotRun inside it: "NOT RUN: reason", exit 77
  main_guard(fn)            fn() to its verdict: PASS, FAIL (exit 1), NOT RUN
  run_phase(fn)             a phase the harness runs of itself inside an
                            emulated machine (--phase): exit 0, or
                            STEP_FAILED with "step failed: reason"
  work_dir(prefix)          the run's work directory
  self_command(script, ..)  the command that runs this harness again
  finish(ok, work, keep)    "PASS"/"FAIL", the work directory removed or
                            kept ("work directory kept: DIR"), the exit
  conclude(body, work, ..)  ok = body() (NOT RUN inside it too), a cleanup
                            whatever happened, then finish
  become_subreaper()        restored and orphaned tasks become our children
  private_dev_shm(), private_run()
                            a /dev/shm, a /run of the test's own
  pb_varint(data, i), pb_fields(data, wires)
                            a protobuf varint, a message's fields

Import it with tests/common on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
"""
import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

NOT_RUN = 77
# The exit of a phase that failed a step (the outer run reports FAIL).
STEP_FAILED = 2


def pb_varint(data, i):
    """The protobuf varint at data[i]: (its value, the index after it)."""
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return n, i


def pb_fields(data, wires=(0, 1, 2, 5)):
    """[(field number, wire type, value)] of the protobuf message `data`:
    an int for varint (0) and fixed 64/32-bit (1, 5) fields, bytes for
    length-delimited (2) ones. ValueError for a wire type not in `wires`
    (groups never are)."""
    out, i = [], 0
    while i < len(data):
        key, i = pb_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire not in wires:
            raise ValueError(f"protobuf field {field}: wire type {wire} not expected")
        if wire == 0:
            v, i = pb_varint(data, i)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            v, i = int.from_bytes(data[i:i + n], "little"), i + n
        elif wire == 2:
            n, i = pb_varint(data, i)
            v, i = data[i:i + n], i + n
        else:
            raise ValueError(f"protobuf field {field}: wire type {wire} not expected")
        out.append((field, wire, v))
    return out


def log(msg):
    print(msg, flush=True)


class NotRun(Exception):
    """Something the test needs is absent: report NOT RUN, never pass."""


class Failed(Exception):
    """A check or a step failed."""


def check(cond, what):
    if not cond:
        raise Failed(what)


def require_built(*paths):
    """NotRun unless every one of `paths` (the build's programs and
    libraries a test runs) exists."""
    for p in paths:
        if not os.path.exists(p):
            raise NotRun(f"{p} is not built")


@contextlib.contextmanager
def not_run():
    """A NotRun raised inside ends the harness: 'NOT RUN: reason', exit 77."""
    try:
        yield
    except NotRun as e:
        log(f"NOT RUN: {e}")
        sys.exit(NOT_RUN)


def main_guard(fn):
    """Runs fn(); maps NotRun to 'NOT RUN: reason' + exit 77 and Failed to
    'FAIL: reason' + exit 1; prints PASS when fn returns."""
    with not_run():
        try:
            fn()
        except Failed as e:
            log(f"FAIL: {e}")
            sys.exit(1)
    log("PASS")


def run_phase(fn, step_exit=lambda e: STEP_FAILED):
    """Runs fn(), a phase inside an emulated machine, and exits: 0 when it
    returns; on a Failed `e`, step_exit(e) (STEP_FAILED unless the harness
    tells failures apart), on a subprocess error (a timeout) STEP_FAILED,
    each after 'step failed: reason'."""
    try:
        fn()
    except Failed as e:
        log(f"step failed: {e}")
        sys.exit(step_exit(e))
    except subprocess.SubprocessError as e:
        log(f"step failed: {e}")
        sys.exit(STEP_FAILED)
    sys.exit(0)


def work_dir(prefix):
    """A new work directory, readable by the tasks a test runs as others."""
    work = tempfile.mkdtemp(prefix=prefix)
    os.chmod(work, 0o755)
    return work


def self_command(script, *extra):
    """The command that runs `script` (the harness's __file__) again with
    this run's arguments and `extra` ones."""
    return [sys.executable, os.path.abspath(script)] + sys.argv[1:] + list(extra)


def finish(ok, work, keep=False, why=""):
    """The end of a harness's run: "PASS" or "FAIL" (followed by `why`),
    its work directory removed after a pass (unless `keep`), named after a
    failure ("work directory kept: DIR", which bench.py reads); exits 0 on
    a pass, 1 on a failure."""
    log(("PASS" if ok else "FAIL") + why)
    if ok and not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log(f"work directory kept: {work}")
    sys.exit(0 if ok else 1)


def conclude(body, work, keep=False, cleanup=None):
    """The end of a harness's main() whose run may still find something
    absent: ok = body(), a NotRun inside it reported (exit 77); cleanup()
    after it whatever happened; then finish(ok, work, keep)."""
    ok = False
    with not_run():
        try:
            ok = body()
        finally:
            if cleanup:
                cleanup()
    finish(ok, work, keep)


def private_dev_shm():
    """This process (and what it starts) gets a /dev/shm of its own: an
    empty tmpfs in a private mount namespace. libhsakmt's
    hsakmt_shared_mem, its named semaphores and CRIU's link_remap files of
    them live there, and tests run at the same time (other worktrees, ctest
    -j) would otherwise share and delete each other's. Call it while the
    process has one thread (unshare(CLONE_NEWNS) refuses otherwise)."""
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 0x4000, 1 << 18

    def call(what, ret):
        if ret != 0:
            raise Failed(f"{what}: {os.strerror(ctypes.get_errno())}")
    call("unshare(CLONE_NEWNS)", libc.unshare(CLONE_NEWNS))
    call("mount --make-rprivate /", libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None))
    call("mount tmpfs /dev/shm", libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 0, b"mode=1777"))


def private_run():
    """This process (and what it starts) gets a /run of its own, in the
    private mount namespace of private_dev_shm() (call it after): a tmpfs,
    with every entry of the host's /run bound into it (directories with
    what is mounted below them), so that what is there stays reachable,
    and what is created at its top (CRIU's criu.kdat) stays the test's.
    CRIU keeps its kernel-feature cache /run/criu.kdat only on a tmpfs
    (criu/kerndat.c kerndat_save_cache); where the host's /run is not one,
    every CRIU run probes the kernel again (realcriu.kdat_cache). The
    host's criu.kdat files are left out: the test's cache is its own."""
    libc = ctypes.CDLL(None, use_errno=True)
    MS_BIND, MS_REC = 0x1000, 0x4000

    def call(what, ret):
        if ret != 0:
            raise Failed(f"{what}: {os.strerror(ctypes.get_errno())}")
    host = os.open("/run", os.O_PATH | os.O_DIRECTORY)
    try:
        call("mount tmpfs /run", libc.mount(b"tmpfs", b"/run", b"tmpfs", 0, b"mode=755"))
        for name in os.listdir(f"/proc/self/fd/{host}"):
            if name.startswith("criu.kdat"):
                continue
            src, dst = f"/proc/self/fd/{host}/{name}", f"/run/{name}"
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                continue
            if os.path.isdir(src):
                os.mkdir(dst)
            else:
                open(dst, "w").close()
            call(f"mount --rbind {name} into the private /run",
                 libc.mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None))
    finally:
        os.close(host)


def machine_root(prefix):
    """A new directory for `kfd-emu --root` (two machines one after the
    other at one root path), in the test's own /dev/shm: call it after
    private_dev_shm(). The root's thousand small files (sysfs, device
    nodes) belong in memory, as kfd-emu's own default root does
    (launcher/main.cpp, default_root_parent: seconds per machine on a disk
    mounted with discard)."""
    return tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")


def become_subreaper():
    """Restored tasks (criu restore -d) and the orphans of a killed process
    tree are reparented to us, so that we can wait for them."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise Failed(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
