#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Unit test of bench.py's machine-limit pipeline (no GPU, no root): it
moves every byte through its two halves, and a stage that fails (a write
to /dev/full) makes it raise instead of leaving the other stage waiting
forever (which hung bench_ci once).

    python3 bench/test_pipeline.py
"""
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

MiB = 1 << 20


def run(path, dump, engine_gbps=0.0, nbytes=8 * MiB, half=MiB):
    """(raised exception or None, finished within 60 s)."""
    src = memoryview(bytes(range(256)) * (half // 256))
    out = {}

    def go():
        try:
            bench.pipeline(path, nbytes, src, [bytearray(half), bytearray(half)], bytearray(half), engine_gbps,
                           dump)
        except Exception as e:  # noqa: BLE001
            out["error"] = e
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(60)
    return out.get("error"), not t.is_alive()


def main():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "probe")
        err, done = run(path, True, engine_gbps=0.5)
        if err or not done or os.path.getsize(path) != 8 * MiB:
            failures.append("dump through a file: %s, finished %s, %d bytes" % (err, done, os.path.getsize(path)))
        err, done = run(path, False)
        if err or not done:
            failures.append("restore from the file: %s, finished %s" % (err, done))
    err, done = run("/dev/full", True)
    if not done or not isinstance(err, OSError):
        failures.append("a failing write: finished %s, raised %r (want OSError)" % (done, err))
    for f in failures:
        print("FAIL: " + f)
    print("test_pipeline: %s" % ("%d failure(s)" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
