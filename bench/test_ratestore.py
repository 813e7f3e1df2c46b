#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What the benchmark relies on in amdcr-ratestore (bench/ratestore.cpp):
the files the plugin and criu-host write come back byte for byte, and the
file operations they use behave as on a disk file system. Asserts no
timing (the rate is the benchmark's to measure).

    python3 bench/test_ratestore.py BIN_DIR

Exit 77 (not run) without root, /dev/fuse or the built store."""
import errno
import os
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20


def check(ok, what):
    if not ok:
        print("FAIL: " + what)
        sys.exit(1)


def expect_errno(fn, code, what):
    try:
        fn()
    except OSError as e:
        check(e.errno == code, "%s: errno %d, expected %d" % (what, e.errno, code))
        return
    check(False, "%s: succeeded, expected errno %d" % (what, code))


def exercise(mnt):
    # Contents at unaligned offsets across chunk boundaries, as a pages
    # file's 8-byte header puts them.
    data = os.urandom(3 * MiB + 12345)
    d = os.path.join(mnt, "images")
    os.mkdir(d)
    tmp, final = os.path.join(d, ".pages.tmp"), os.path.join(d, "pages.img")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    check(os.pwrite(fd, b"HEADER!!", 0) == 8, "header write")
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:done + 777777], 8 + done)
    os.close(fd)
    os.rename(tmp, final)
    check(os.listdir(d) == ["pages.img"], "rename: %s" % os.listdir(d))
    with open(final, "rb") as f:
        back = f.read()
    check(back == b"HEADER!!" + data, "contents read back differ")
    check(os.stat(final).st_size == 8 + len(data), "size")

    # A hole: an unwritten MiB reads as zeros; SEEK_DATA/SEEK_HOLE find it.
    sparse = os.path.join(d, "sparse.img")
    fd = os.open(sparse, os.O_CREAT | os.O_RDWR, 0o600)
    os.pwrite(fd, b"a" * MiB, 0)
    os.pwrite(fd, b"b" * MiB, 2 * MiB)
    check(os.pread(fd, MiB, MiB) == bytes(MiB), "hole reads as zeros")
    check(os.lseek(fd, MiB, os.SEEK_HOLE) == MiB, "SEEK_HOLE")
    check(os.lseek(fd, MiB, os.SEEK_DATA) == 2 * MiB, "SEEK_DATA")
    expect_errno(lambda: os.lseek(fd, 3 * MiB, os.SEEK_DATA), errno.ENXIO, "SEEK_DATA at the end")
    # Punching a hole frees it and reads as zeros; a partial one zeroes.
    blocks = os.fstat(fd).st_blocks
    subprocess.run(["fallocate", "--punch-hole", "--keep-size", "-o", "0", "-l", str(MiB), sparse], check=True)
    check(os.fstat(fd).st_blocks < blocks, "punch hole frees the chunk")
    check(os.pread(fd, MiB, 0) == bytes(MiB), "punched range reads as zeros")
    os.ftruncate(fd, 2 * MiB + 10)
    check(os.pread(fd, 20, 2 * MiB) == b"b" * 10, "truncate keeps what is below")
    os.close(fd)

    # An unlinked open file keeps its data until closed; the store gets it back.
    free0 = os.statvfs(mnt).f_bfree
    fd = os.open(os.path.join(d, "gone"), os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, b"z" * (2 * MiB))
    os.unlink(os.path.join(d, "gone"))
    check(os.pread(fd, 4, 0) == b"zzzz", "unlinked open file readable")
    os.close(fd)
    for _ in range(100):  # FUSE sends the release after close returns
        if os.statvfs(mnt).f_bfree == free0:
            break
        time.sleep(0.05)
    check(os.statvfs(mnt).f_bfree == free0, "unlinked file's chunks returned")

    # A relative symbolic link to a directory (an incremental checkpoint's
    # `parent`): readlink gives the target, paths resolve through it, and
    # unlinking it leaves the target.
    sib = os.path.join(mnt, "older")
    os.mkdir(sib)
    with open(os.path.join(sib, "x.img"), "wb") as f:
        f.write(b"older!")
    link = os.path.join(d, "parent")
    os.symlink("../older", link)
    check(os.readlink(link) == "../older", "readlink: %r" % os.readlink(link))
    check(os.path.islink(link) and os.path.isdir(link), "a link to a directory")
    with open(os.path.join(link, "x.img"), "rb") as f:
        check(f.read() == b"older!", "a file read through the link")
    expect_errno(lambda: os.symlink("elsewhere", link), errno.EEXIST, "a second link of that name")
    os.unlink(link)
    check(os.listdir(sib) == ["x.img"], "unlinking the link keeps its target")
    os.unlink(os.path.join(sib, "x.img"))
    os.rmdir(sib)

    # Full: ENOSPC, and the store still answers.
    big = os.path.join(d, "big")
    fd = os.open(big, os.O_CREAT | os.O_WRONLY, 0o600)
    written = [0]

    def fill():  # odd-sized writes, so that the last one is cut short
        for _ in range(64):
            written[0] += os.write(fd, b"x" * (MiB + 4096))
    expect_errno(fill, errno.ENOSPC, "writing past capacity")
    check(os.fstat(fd).st_size == written[0], "size %d after writes that returned %d bytes" %
          (os.fstat(fd).st_size, written[0]))
    os.close(fd)
    os.unlink(big)
    for name in os.listdir(d):
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    check(os.listdir(mnt) == [], "empty at the end")


def main():
    exe = os.path.join(sys.argv[1], "bench", "amdcr-ratestore")
    for missing, why in ((os.geteuid() != 0, "needs root (mount)"), (not os.path.exists("/dev/fuse"), "no /dev/fuse"),
                         (not os.path.exists(exe), exe + " not built (fuse3 missing)")):
        if missing:
            print("NOT RUN: " + why)
            return 77
    mnt = tempfile.mkdtemp(prefix="amdcr-ratestore-")
    p = subprocess.Popen([exe, "--write-gbps", "4", "--read-gbps", "4", "--capacity", "32M", mnt])
    try:
        for _ in range(300):
            if any(l.split()[1:3] == [mnt, "fuse.ratestore"] for l in open("/proc/mounts")):
                break
            check(p.poll() is None, "amdcr-ratestore exited (%s)" % p.returncode)
            time.sleep(0.1)
        else:
            check(False, "not mounted after 30 s")
        exercise(mnt)
    finally:
        subprocess.run(["umount", mnt], check=False)
        p.terminate()
        p.wait(timeout=30)
        os.rmdir(mnt)
    print("ratestore: contents, rename, holes, punch, unlink-while-open, symbolic links, ENOSPC: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
