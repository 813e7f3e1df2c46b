#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A stand-in for criu-image-streamer (not packaged in Debian), for tests.

    streamer.py capture --images-dir DIR --store STORE
    streamer.py serve   --images-dir DIR --store STORE [--report FILE]

It speaks the protocol of CRIU's criu/img-streamer.c (identical in CRIU
4.2.1 and criu-dev 2cf8f13): CRIU connects to DIR/streamer-capture.sock
(dump) or DIR/streamer-serve.sock (restore) and, per image file, sends a
request: a native u32 length, then an img_streamer_request_entry protobuf
(field 1, string: the file name). At dump it then passes the read end of a
pipe (SCM_RIGHTS, 1 byte of data) and writes the file into it. At restore
the streamer first answers an img_streamer_reply_entry (field 1, bool:
exists), framed the same way; when the file exists CRIU passes the write end
of a pipe and the streamer writes the file into it.

capture  stores each file under STORE/<name> (a second file of the same name
         is appended, as criu-image-streamer does) and, when CRIU has
         disconnected and every pipe has ended, STORE/streamer-index.json:
         the files in the order they were requested, with their sizes.
serve    serves STORE's files, one request at a time, each file once (like
         criu-image-streamer, which drops a file from memory once served: a
         second request of it is answered "does not exist"). A pipe closed
         before the whole file was written is an error (criu-image-streamer
         fails then too). --report FILE: JSON of what was requested, served,
         missing and refused as already served, written at the end.
         --copy-out GLOB: before serving, also copy the stored files whose
         names match GLOB into DIR (the emulator's CRIU adapter reads
         mm-<pid>.img there, tests/emulator/README.md "Real CRIU"; a real
         streamer has no such option).

Nothing is written to DIR but the socket, removed at the end (and the
--copy-out files). Prints
"socket-init" on stdout once the socket listens. Exit 0 on success, 1 on a
protocol or I/O error (the reason on stderr).
"""
import argparse
import array
import fcntl
import fnmatch
import json
import os
import shutil
import socket
import struct
import sys
import threading

SOCKETS = {"capture": "streamer-capture.sock", "serve": "streamer-serve.sock"}
INDEX = "streamer-index.json"
CHUNK = 1 << 20
PIPE_SIZE = 1 << 20  # criu-image-streamer sets its CRIU pipes to 1 MiB too
F_SETPIPE_SZ = 1031


def widen(fd):
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass  # above /proc/sys/fs/pipe-max-size: keep the default


class ProtocolError(Exception):
    pass


def recv_exact(conn, n):
    """n bytes from conn; b"" at a clean EOF before the first byte."""
    buf = b""
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            if buf:
                raise ProtocolError(f"connection ended inside a message ({len(buf)} of {n} bytes)")
            return b""
        buf += part
    return buf


def varint(data, pos):
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtocolError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def read_request(conn):
    """The next requested file name, or None when CRIU has disconnected."""
    head = recv_exact(conn, 4)
    if not head:
        return None
    (size,) = struct.unpack("=I", head)
    msg = recv_exact(conn, size)
    if len(msg) != size:
        raise ProtocolError("connection ended inside a request")
    pos, name = 0, None
    while pos < len(msg):
        key, pos = varint(msg, pos)
        field, wire = key >> 3, key & 7
        if wire == 2:
            n, pos = varint(msg, pos)
            value = msg[pos:pos + n]
            pos += n
            if field == 1:
                name = value.decode()
        elif wire == 0:
            _, pos = varint(msg, pos)
        else:
            raise ProtocolError(f"unexpected wire type {wire} in a request")
    if not name or "/" in name or name in (".", "..", INDEX):
        raise ProtocolError(f"bad file name in request: {name!r}")
    return name


def send_reply(conn, exists):
    msg = bytes([0x08, 1 if exists else 0])  # field 1, varint
    conn.sendall(struct.pack("=I", len(msg)) + msg)


def recv_pipe(conn):
    fds = array.array("i")
    data, anc, _, _ = conn.recvmsg(1, socket.CMSG_SPACE(fds.itemsize))
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(data) != 1 or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ProtocolError(f"expected one pipe with 1 byte, got {len(fds)} fds and {len(data)} bytes")
    return fds[0]


def listen(images_dir, mode):
    path = os.path.join(images_dir, SOCKETS[mode])
    if os.path.exists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)
    print("socket-init", flush=True)
    return sock, path


def capture(args):
    os.makedirs(args.store, exist_ok=True)
    sock, path = listen(args.images_dir, "capture")
    order, sizes, errors, threads = [], {}, [], []
    lock = threading.Lock()

    def drain(name, fd):
        n = 0
        try:
            with os.fdopen(fd, "rb", buffering=0) as pipe, open(os.path.join(args.store, name), "ab") as out:
                while True:
                    chunk = pipe.read(CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
                    n += len(chunk)
        except OSError as e:
            with lock:
                errors.append(f"{name}: {e}")
        with lock:
            sizes[name] = sizes.get(name, 0) + n

    try:
        conn, _ = sock.accept()
        with conn:
            while (name := read_request(conn)) is not None:
                fd = recv_pipe(conn)
                widen(fd)
                with lock:
                    if name not in order:  # a second one is appended, as criu-image-streamer does
                        open(os.path.join(args.store, name), "wb").close()
                    order.append(name)
                t = threading.Thread(target=drain, args=(name, fd))
                t.start()
                threads.append(t)
    finally:
        for t in threads:
            t.join()
        sock.close()
        os.unlink(path)
    with open(os.path.join(args.store, INDEX), "w") as f:
        json.dump([{"name": n, "size": sizes.get(n, 0)} for n in dict.fromkeys(order)], f, indent=1)
    if errors:
        raise ProtocolError("; ".join(errors))
    print(f"captured {len(set(order))} files, {sum(sizes.values())} bytes", file=sys.stderr)


def serve(args):
    with open(os.path.join(args.store, INDEX)) as f:
        files = [e["name"] for e in json.load(f)]
    left = set(files)
    for name in files:
        if args.copy_out and fnmatch.fnmatchcase(name, args.copy_out):
            shutil.copyfile(os.path.join(args.store, name), os.path.join(args.images_dir, name))
    report = {"requested": [], "served": [], "missing": [], "already_served": [], "error": None}
    sock, path = listen(args.images_dir, "serve")
    try:
        conn, _ = sock.accept()
        with conn:
            while (name := read_request(conn)) is not None:
                report["requested"].append(name)
                if name not in left:
                    key = "already_served" if name in report["served"] else "missing"
                    report[key].append(name)
                    send_reply(conn, False)
                    continue
                left.discard(name)
                send_reply(conn, True)
                fd = recv_pipe(conn)
                widen(fd)
                with os.fdopen(fd, "wb", buffering=0) as pipe, open(os.path.join(args.store, name), "rb") as src:
                    while chunk := src.read(CHUNK):
                        try:
                            pipe.write(chunk)
                        except BrokenPipeError:
                            raise ProtocolError(f"{name}: CRIU closed the pipe before the end of the file")
                report["served"].append(name)
    except ProtocolError as e:
        report["error"] = str(e)
        raise
    finally:
        sock.close()
        os.unlink(path)
        if args.report:
            report["not_requested"] = sorted(left)
            with open(args.report, "w") as f:
                json.dump(report, f, indent=1)
    print(f"served {len(report['served'])} of {len(files)} files", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["capture", "serve"])
    ap.add_argument("--images-dir", required=True, help="where CRIU looks for the socket (criu -D)")
    ap.add_argument("--store", required=True, help="where the captured files are kept")
    ap.add_argument("--report", default="", help="serve: write what was requested and served here")
    ap.add_argument("--copy-out", default="", help="serve: copy the stored files matching this glob to DIR")
    args = ap.parse_args()
    try:
        (capture if args.mode == "capture" else serve)(args)
    except (ProtocolError, OSError) as e:
        print(f"streamer {args.mode}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
