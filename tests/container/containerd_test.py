#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A GPU container under containerd + runc + real CRIU, on the emulated GPU.

    containerd_test.py --criu-list LIST --criu-version V --realcriu-lib DIR \
        --emu-criu-lib DIR --kfd-emu K --adapter A.so --plugin P.so \
        --shim S.so --workload X [--keep]

Kubernetes' path below the kubelet: containerd's checkpoint of a container
(an OCI image holding CRIU's images, the container's spec and runtime
options), moved between nodes with `ctr images export/import`, restored
as a new container by containerd's runc shim (runc restore, CRIU). The
workload (kfdemu_criu_workload: libhsakmt, libdrm_amdgpu) is the init of a
container `ctr run` starts with /dev/kfd and two render nodes; CRIU (the
one listed for V) runs where runc runs it, with our plugin loaded through
/etc/criu/runc.conf, the file runc gives CRIU for a container without an
org.criu.config annotation (a CRI container's case). Each node runs its own
containerd, started here with its own root, state and socket directories,
stopped at the end of its phase; /run and /dev are tmpfs of the test's
private mount namespace (private_mounts). Steps:

1. node `first` (2xMI210: 0xa1a1 on renderD128, 0xb2b2 on renderD129):
   `ctr containers checkpoint --task` of the running container (containerd
   pauses it, runc dumps it leaving it running, then resumes it): the
   original's GPU queues are active again and its own verdict (below) is
   OK; it is removed, and `ctr containers restore --live` makes a new
   container of the checkpoint on the same node. The restored init has every BO with its dumped
   contents on its GPU, its fd table, its device mappings, its queues
   active; its own verdict (patterns, SDMA copies through libdrm_amdgpu,
   new BOs, its event, its queue) is OK. `ctr images export` of the
   checkpoint and the container's image.
2. node `second` (four MI210, other gpu_ids, the 64G GPUs at renderD129 and
   renderD130), a new containerd, `ctr images import`:
   a. `restore --live` of the checkpoint as it is: the container has
      renderD128 and renderD129, a subset of the node's four GPUs (its /dev
      comes from the checkpoint, its device cgroup from the checkpointed
      spec); the plugin maps 0xa1a1 onto 0x2222 (renderD129) and 0xb2b2
      onto 0x1111 (renderD128), checked as in 1;
   b. CRIU #2723/#2888: the checkpoint with its spec's devices changed as a
      device plugin's allocation changes them (renderD130 and renderD131
      in linux.devices and the device cgroup), the container's /dev still
      the checkpoint's: the restore must fail, before any GPU state, with
      the plugin's error naming renderD128 and renderD129 (in /dev, denied
      by the cgroup: "Operation not permitted") and that the runtime must
      pass them in; the model has no process with BOs afterwards;
   c. the checkpoint with the spec and CRIU's image of the container's /dev
      tmpfs both changed (renderD128 -> renderD130, renderD129 ->
      renderD131): restores onto 0x3333 (renderD130) and 0x4444
      (renderD131), checked as in 1.

Exit: 0 pass, 1 fail, 77 NOT RUN (not root, containerd, ctr, runc or
busybox-static missing or not working, CRIU not listed / not usable,
sanitizer build, a mount of the private namespace refused).
"""
import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import container_test as ct  # noqa: E402  (the podman test's helpers)
import harness  # noqa: E402
from harness import Failed, NotRun, log  # noqa: E402

CTR_TIMEOUT = 180
IMAGE = ct.IMAGE
CHECKPOINT = "localhost/kfdemu-gpu-checkpoint:1"
FIRST = ["--machine", "2xMI210", "--gpu-ids", "0xa1a1,0xb2b2", "--minors", "128,129", "--vram", "64G,32G"]
FIRST_MINORS = [128, 129]
# Four MI210 (container_test.write_four_mi210): other gpu_ids; 0xa1a1
# (64G) fits 0x2222 and 0x3333 only.
SECOND = ["--gpu-ids", "0x1111,0x2222,0x3333,0x4444", "--minors", "128,129,130,131",
          "--vram", "32G,64G,64G,32G"]
SECOND_MINORS = [128, 129, 130, 131]
# What the device plugin gives the container in steps 2b and 2c.
PLUGIN_RENAMES = {128: 130, 129: 131}
# Expected (checkpointed gpu -> local gpu, checkpointed minor -> local minor).
AS_IS = ({0xa1a1: 0x2222, 0xb2b2: 0x1111}, {128: 129, 129: 128})
RENAMED = ({0xa1a1: 0x3333, 0xb2b2: 0x4444}, {128: 130, 129: 131})
# The CRIU configuration file runc gives CRIU when the container has no
# org.criu.config annotation (as CRI containers have none): in the test's
# private mount namespace only (private_mounts).
RUNC_CONF = "/etc/criu/runc.conf"
# The containerd content of a checkpoint (containerd 1.6's media types).
MT_CRIU = "application/vnd.containerd.container.criu.checkpoint.criu.tar"
MT_SPEC = "application/vnd.containerd.container.checkpoint.config.v1+proto"

# --------------------------------------------------------------------------
# The node's environment: /run, /etc and /dev of the private mount namespace
# --------------------------------------------------------------------------

def private_mounts(work):
    """In the test's private mount namespace: a tmpfs on /run (containerd
    1.6 puts its shims' sockets in /run/containerd/s, runc its state in
    /run/containerd/runc, ctr its FIFOs in /run/containerd/fifo: none of
    that reaches the host); an overlay on /etc whose upper directory holds
    /etc/criu/runc.conf (RUNC_CONF); and a tmpfs on /dev: `ctr run
    --device` takes a host path and gives the container the node at the
    same path, so /dev/kfd and /dev/dri/renderD<m> must be there; this
    /dev has the usual nodes, a devpts, a /dev/shm and those, which no
    other process of the machine sees. CRIU's kernel-feature cache in the
    /run it covers (container_test.require_host) is carried over."""
    import realcriu  # on sys.path since require_host
    kdat = None
    if os.path.exists(realcriu.KDAT):
        with open(realcriu.KDAT, "rb") as f:
            kdat = f.read()
    mount("tmpfs", "/run", "mode=755")
    if kdat is not None:
        fd = os.open(realcriu.KDAT, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(kdat)
    for d in ("etc-upper", "etc-work"):
        os.makedirs(os.path.join(work, d))
    mount("overlay", "/etc", f"lowerdir=/etc,upperdir={work}/etc-upper,workdir={work}/etc-work")
    os.makedirs(os.path.dirname(RUNC_CONF), exist_ok=True)
    mount("tmpfs", "/dev", "mode=755")
    for name, (maj, mnr) in {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8),
                             "urandom": (1, 9), "tty": (5, 0)}.items():
        os.mknod(f"/dev/{name}", 0o666 | 0o020000, os.makedev(maj, mnr))
    for d in ("pts", "shm", "mqueue", "dri"):
        os.makedirs(f"/dev/{d}")
    mount("devpts", "/dev/pts", "newinstance,ptmxmode=0666")
    os.symlink("pts/ptmx", "/dev/ptmx")
    mount("tmpfs", "/dev/shm", "mode=1777")
    mount("mqueue", "/dev/mqueue", "")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"/dev/{name}")
    os.symlink("/proc/self/fd", "/dev/fd")


def mount(fstype, target, options):
    """A mount in the private namespace, or NOT RUN saying why not."""
    r = subprocess.run(["mount", "-t", fstype] + (["-o", options] if options else []) + [fstype, target],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise NotRun(f"cannot mount {fstype} on {target} in a private mount namespace: {r.stderr.strip()}")


def device_nodes(minors):
    """/dev/kfd and /dev/dri/renderD<m> of the next machine (character
    devices with the emulated numbers), for `ctr run --device`. Made before
    the machine starts: under the shim /dev/dri lists the emulated nodes."""
    for path in os.listdir("/dev/dri"):
        os.unlink(os.path.join("/dev/dri", path))
    if not os.path.exists("/dev/kfd"):
        os.mknod("/dev/kfd", 0o666 | 0o020000, os.makedev(510, 0))
    for m in minors:
        os.mknod(f"/dev/dri/renderD{m}", 0o666 | 0o020000, os.makedev(226, m))


# --------------------------------------------------------------------------
# The container image (an OCI archive, no registry) and containerd
# --------------------------------------------------------------------------

def oci_archive(rootfs_tar, out, name):
    """An OCI image layout tar of one uncompressed layer, named `name` for
    `ctr images import`."""
    blobs = {}

    def add(data, media_type):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    with open(rootfs_tar, "rb") as f:
        layer = add(f.read(), "application/vnd.oci.image.layer.v1.tar")
    config = add(json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                             "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode(),
                 "application/vnd.oci.image.config.v1+json")
    manifest = add(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "config": config, "layers": [layer]}).encode(),
                   "application/vnd.oci.image.manifest.v1+json")
    manifest["annotations"] = {"io.containerd.image.name": name,
                               "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}
    files = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
             "index.json": json.dumps({"schemaVersion": 2, "manifests": [manifest]}).encode()}
    files.update({"blobs/sha256/" + d.split(":", 1)[1]: data for d, data in blobs.items()})
    write_tar(out, files)


def write_tar(out, files):
    with tarfile.open(out, "w") as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))


def namespace(work):
    """The containerd namespace of this run (the work directory's name):
    the containers' cgroups are /<namespace>/<container> (runc's
    cgroupfs, the same path on every node: a restore keeps the
    checkpointed spec's), so that concurrent runs do not share them.
    containerd takes letters and digits joined by single '.', '_' or '-'
    (tempfile's names may hold two in a row, e.g. "kfdemu-containerd.__y5"):
    each run of other characters becomes one '-'."""
    return re.sub(r"[^A-Za-z0-9]+", "-", os.path.basename(work)).strip("-")


def remove_cgroups(work):
    """The namespace's cgroup directories runc leaves (empty) in each
    cgroup v1 hierarchy."""
    base = "/sys/fs/cgroup"
    for ctrl in os.listdir(base) if os.path.isdir(base) else []:
        top = os.path.join(base, ctrl, namespace(work))
        if not os.path.isdir(top):
            continue
        for d in sorted((e.path for e in os.scandir(top) if e.is_dir()), reverse=True) + [top]:
            try:
                os.rmdir(d)
            except OSError as e:
                log(f"cleanup: cgroup {d}: {e.strerror}")


class Containerd:
    """A containerd of its own (root, state, sockets under `d`), the CRI
    plugin off, runc as the runtime (the runc v2 shim), our criu first on
    PATH, no shim (containerd, its shims and runc are the runtime, not GPU
    programs)."""

    def __init__(self, work, d):
        self.d = d
        self.namespace = namespace(work)
        self.sock = os.path.join(d, "containerd.sock")
        os.makedirs(d)
        self.config = os.path.join(d, "config.toml")
        with open(self.config, "w") as f:
            f.write(f'version = 2\nroot = "{d}/root"\nstate = "{d}/state"\n'
                    'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                    f'[grpc]\n  address = "{self.sock}"\n[ttrpc]\n  address = "{self.sock}.ttrpc"\n'
                    f'[debug]\n  address = "{d}/debug.sock"\n  level = "info"\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("KFDEMU_") and k != "LD_PRELOAD"}
        env["PATH"] = os.path.join(work, "bin") + ":" + env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        self.env = env
        self.proc = None

    def start(self):
        self.log_file = open(os.path.join(self.d, "containerd.log"), "w")
        self.proc = subprocess.Popen(["containerd", "--config", self.config], env=self.env,
                                     stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if os.path.exists(self.sock) and self.ctr("version", check=False, quiet=True).returncode == 0:
                log(f"containerd {self.proc.pid} serving {self.sock}")
                return
            time.sleep(0.2)
        raise Failed(f"containerd did not start: {self.tail()}")

    def tail(self, n=3000):
        try:
            with open(os.path.join(self.d, "containerd.log"), errors="replace") as f:
                return f.read()[-n:]
        except OSError as e:
            return f"(no log: {e.strerror})"

    def ctr(self, *a, check=True, timeout=CTR_TIMEOUT, quiet=False):
        t0 = time.monotonic()
        cmd = ["ctr", "--address", self.sock, "--namespace", self.namespace] + list(a)
        try:
            r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise Failed(f"ctr {' '.join(a[:2])}: no end within {timeout}s")
        if check and r.returncode != 0:
            raise Failed(f"ctr {' '.join(a)}: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-2000:]}")
        if not quiet:
            log(f"ctr {' '.join(a[:3])}: exit {r.returncode} after {time.monotonic() - t0:.1f}s")
        return r

    def pid(self, name):
        """The host pid of container `name`'s init (`ctr tasks ls`)."""
        for line in self.ctr("tasks", "ls", quiet=True).stdout.splitlines()[1:]:
            f = line.split()
            if f and f[0] == name:
                return int(f[1])
        raise Failed(f"no task of container {name}")

    def remove(self, name):
        """Container `name` killed (SIGKILL) and removed, its task first."""
        self.ctr("tasks", "kill", "--signal", "SIGKILL", name, check=False, quiet=True)
        for _ in range(100):
            if self.ctr("tasks", "delete", name, check=False, quiet=True).returncode == 0:
                break
            r = self.ctr("tasks", "ls", quiet=True)
            if not any(l.split()[:1] == [name] for l in r.stdout.splitlines()[1:]):
                break
            time.sleep(0.1)
        self.ctr("containers", "delete", name, check=False, quiet=True)

    def stop(self):
        """Every container removed (their shims end with them), then
        containerd itself (inside() then kills what is left of our
        children by pid: we are a subreaper, shims are reparented to us)."""
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                r = self.ctr("containers", "ls", "-q", check=False, quiet=True, timeout=60)
                for name in r.stdout.split():
                    self.remove(name)
        except Failed as e:
            log(f"cleanup: {e}")
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()
        self.proc = None


# --------------------------------------------------------------------------
# CRIU's logs and the checkpoint image's contents
# --------------------------------------------------------------------------

def set_criu_log(work, step):
    """RUNC_CONF: the CRIU configuration of container_test.write_criu_side
    (our plugin directory, link-remap) and `log-file` for this step: CRIU
    takes a log file named in runc's configuration file over runc's own
    (containerd removes runc's work directory, and its log, with a failed
    restore's bundle). Returns the log's path."""
    path = os.path.join(work, "logs", f"{step}.log")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.path.join(work, "criu.conf")) as f:
        lines = f.readlines()
    with open(RUNC_CONF, "w") as f:
        f.writelines(lines + [f"log-file {path}\n"])
    return path


def plugin_lines(path, what=""):
    try:
        with open(path, errors="replace") as f:
            return [l.rstrip() for l in f if "amdgpu_plugin" in l and what in l]
    except OSError:
        return []


def show_criu_log(rc, path):
    if os.path.exists(path):
        rc.show_log(path, 25)
    else:
        log(f"(no CRIU log at {path})")


class CheckpointArchive:
    """`ctr images export` of a checkpoint, unpacked: index.json, the blobs,
    the checkpoint's own index (by `ref`), its CRIU images (a tar) and its
    spec (a protobuf Any holding the OCI spec as JSON)."""

    def __init__(self, archive, d, ref):
        self.d = d
        os.makedirs(d)
        subprocess.run(["tar", "-C", d, "-xf", archive], check=True)
        with open(os.path.join(d, "index.json")) as f:
            self.top = json.load(f)
        self.entry = next(m for m in self.top["manifests"]
                          if m.get("annotations", {}).get("io.containerd.image.name") == ref)
        self.index = json.loads(self.blob(self.entry["digest"]))

    def blob(self, digest):
        with open(os.path.join(self.d, "blobs", *digest.split(":", 1)), "rb") as f:
            return f.read()

    def put(self, data, old):
        """`data` as a new blob in place of descriptor `old` (updated)."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.d, "blobs", "sha256", digest.split(":", 1)[1]), "wb") as f:
            f.write(data)
        old["digest"], old["size"] = digest, len(data)

    def part(self, media_type):
        return next(m for m in self.index["manifests"] if m["mediaType"] == media_type)

    def edit_spec(self, fn):
        desc = self.part(MT_SPEC)
        type_url, value = pb_any_decode(self.blob(desc["digest"]))
        spec = json.loads(value)
        fn(spec)
        self.put(pb_any_encode(type_url, json.dumps(spec).encode()), desc)

    def edit_criu_images(self, fn):
        """fn(directory of CRIU's images), then re-packed."""
        desc = self.part(MT_CRIU)
        d = os.path.join(self.d, "criu")
        os.makedirs(d)
        tar = os.path.join(self.d, "criu.tar")
        with open(tar, "wb") as f:
            f.write(self.blob(desc["digest"]))
        subprocess.run(["tar", "-C", d, "--numeric-owner", "-xpf", tar], check=True)
        fn(d)
        subprocess.run(["tar", "-C", d, "--numeric-owner", "-cf", tar, "."], check=True)
        with open(tar, "rb") as f:
            self.put(f.read(), desc)
        shutil.rmtree(d)
        os.unlink(tar)

    def write(self, out, ref):
        """The edited archive, the checkpoint named `ref`."""
        self.put(json.dumps(self.index).encode(), self.entry)
        self.entry["annotations"]["io.containerd.image.name"] = ref
        with open(os.path.join(self.d, "index.json"), "w") as f:
            json.dump(self.top, f)
        subprocess.run(["tar", "-C", self.d, "-cf", out, "."], check=True)


def pb_any_decode(data):
    """google.protobuf.Any: (type_url, value)."""
    try:
        fields = {field: v for field, _, v in harness.pb_fields(data, wires=(2,))}
    except ValueError as e:
        raise Failed(f"checkpoint spec: {e}")
    return fields.get(1, b"").decode(), fields.get(2, b"")


def pb_any_encode(type_url, value):
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7f) | (0x80 if n > 0x7f else 0))
            n >>= 7
            if not n:
                return bytes(out)
    t = type_url.encode()
    return b"\x0a" + varint(len(t)) + t + b"\x12" + varint(len(value)) + value


def rename_spec_devices(spec, renames):
    """The render nodes of `renames` {old: new} in the spec's device list
    and device cgroup: what a device plugin's other allocation makes of
    the spec containerd's CRI plugin writes."""
    for d in spec["linux"].get("devices", []) + spec["linux"]["resources"].get("devices", []):
        if d.get("major") == 226 and d.get("minor") in renames:
            new = renames[d["minor"]]
            d["minor"] = new
            if "path" in d:
                d["path"] = f"/dev/dri/renderD{new}"


def spec_render_minors(spec):
    return sorted(d["minor"] for d in spec["linux"].get("devices", []) if d.get("major") == 226)


# --------------------------------------------------------------------------
# Inside a machine (kfd-emu): the phases
# --------------------------------------------------------------------------

def devices_cgroup(pid):
    """The device cgroup's allow list of `pid` (cgroup v1), or None."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                if "devices" in ctrls.split(","):
                    with open(f"/sys/fs/cgroup/devices{path}/devices.list") as g:
                        return [l.strip() for l in g if "226:" in l or "a " in l]
    except OSError:
        pass
    return None


def restore(rc, emu, node, st, work, name, ref, expected, what):
    """`ctr containers restore --live` of `ref` as container `name`, the
    checks of `expected` (gpu map, minor map), the workload's verdict."""
    gpus, minors = expected
    for f in ("go", "result"):
        if os.path.exists(os.path.join(st["wl"], f)):
            os.unlink(os.path.join(st["wl"], f))
    criu_log = set_criu_log(work, name)
    try:
        node.ctr("containers", "restore", "--live", name, ref)
    except Failed:
        show_criu_log(rc, criu_log)
        raise
    for line in plugin_lines(criu_log, "restoring onto"):
        log(f"  {line}")
    pid = node.pid(name)
    log(f"{what}: /dev/dri of the restored container: {sorted(os.listdir(f'/proc/{pid}/root/dev/dri'))}, "
        f"device cgroup: {devices_cgroup(pid)}")
    ct.check_restored(rc, emu, pid, st["before"], gpus, minors, what)
    log(f"restored init's time namespace: {ct.timens_offsets(pid)}")
    v = rc.verdict(st["wl"], pid)
    node.remove(name)
    rc.expect(v == "OK", f"{what}: the restored workload: {v}")


def phase_first(args, rc, emu, work, node):
    node.start()
    node.ctr("images", "import", os.path.join(work, "image.tar"))
    wl = os.path.join(work, "wl")
    os.makedirs(wl)
    os.chmod(wl, 0o777)
    root = os.environ["KFDEMU_ROOT"]
    libdir = os.path.join(work, "criu-plugins")
    # No org.criu.config annotation (a CRI runtime passes none of its
    # own): runc gives CRIU RUNC_CONF.
    cmd = ["run", "-d", "--log-uri", f"file://{work}/gpu.out",
           # As in the podman test: the machine's root (the daemon's
           # socket), the workload's directory, the CRIU plugin directory.
           "--mount", f"type=bind,src={root},dst={root},options=rbind:rw",
           "--mount", f"type=bind,src={wl},dst={wl},options=rbind:rw",
           "--mount", f"type=bind,src={libdir},dst={libdir},options=rbind:ro",
           "--env", "LD_PRELOAD=/kfdemu/libkfdemu_shim.so", "--env", f"KFDEMU_ROOT={root}",
           "--env", f"KFDEMU_SOCKET={os.environ['KFDEMU_SOCKET']}"]
    for dev in ["/dev/kfd"] + [f"/dev/dri/renderD{m}" for m in FIRST_MINORS]:
        cmd += ["--device", dev]
    node.ctr(*cmd, IMAGE, "gpu", "/kfdemu/workload", wl)
    ready = os.path.join(wl, "ready")
    if not rc.wait_for(lambda: os.path.exists(ready), 60, "the workload in the container"):
        raise Failed(f"the workload did not get ready: {open(os.path.join(work, 'gpu.out')).read()[-2000:]}")
    pid = node.pid("gpu")
    before = rc.snapshot(emu, pid)
    log(f"container init {pid}: {len(before['bos'])} BOs on GPUs "
        f"{sorted(hex(g) for g in {b['actual_gpu_id'] for b in before['bos']})}, "
        f"{len(before['vmas'])} device mappings, {len(before['queues']['queues'])} queue(s), device cgroup "
        f"{devices_cgroup(pid)}")
    rc.expect(before["bos"] and before["vmas"] and before["queues"]["queues"],
              "the workload has no BOs, mappings or queues")

    criu_log = set_criu_log(work, "checkpoint")
    try:
        node.ctr("containers", "checkpoint", "--task", "gpu", CHECKPOINT)
    except Failed:
        show_criu_log(rc, criu_log)
        raise
    rc.expect(plugin_lines(criu_log), f"the dump log has no line of amdgpu_plugin: was it loaded through "
              f"{RUNC_CONF}?")
    n = rc.check_running(emu, pid, before, "the checkpointed container, resumed")
    log(f"the checkpointed container {pid} runs on: not paused, {n} active queue(s)")
    # It is a process CRIU dumped and left running: it goes on with its
    # GPU (its verdict; the restored copy waits for its own).
    v = rc.verdict(wl, pid)
    rc.expect(v == "OK", f"the checkpointed container, left running: {v}")
    node.remove("gpu")
    st = {"before": before, "wl": wl}
    ct.save_state(work, st)
    restore(rc, emu, node, st, work, "gpu-restored", CHECKPOINT, ({}, {}), "restored on the same node")
    # No Docker manifest.json: it cannot describe a checkpoint.
    node.ctr("images", "export", "--skip-manifest-json", os.path.join(work, "checkpoint.tar"), CHECKPOINT)


def phase_second(args, rc, emu, work, node):
    st = ct.load_state(work)
    node.start()
    # The container's image as from a registry; the checkpoint not
    # unpacked (it has no layers: containerd 1.6 cannot unpack it).
    node.ctr("images", "import", os.path.join(work, "image.tar"))
    archive = os.path.join(work, "checkpoint.tar")
    node.ctr("images", "import", "--no-unpack", archive)
    restore(rc, emu, node, st, work, "gpu-as-is", CHECKPOINT, AS_IS,
            "restored on the second node, as checkpointed")

    # 2b: the device plugin's renderD130/131 in the spec only.
    ck = CheckpointArchive(archive, os.path.join(work, "spec-only"), CHECKPOINT)
    ck.edit_spec(lambda s: rename_spec_devices(s, PLUGIN_RENAMES))
    ck.write(os.path.join(work, "spec-only.tar"), CHECKPOINT + "-spec-only")
    node.ctr("images", "import", "--no-unpack", os.path.join(work, "spec-only.tar"))
    criu_log = set_criu_log(work, "spec-only")
    r = node.ctr("containers", "restore", "--live", "gpu-spec-only", CHECKPOINT + "-spec-only", check=False)
    errors = plugin_lines(criu_log, "Error")
    for line in errors:
        log(f"  {line}")
    if r.returncode == 0:
        pid = node.pid("gpu-spec-only")
        log(f"restored: /dev/dri {sorted(os.listdir(f'/proc/{pid}/root/dev/dri'))}, device cgroup "
            f"{devices_cgroup(pid)}; " + "; ".join(plugin_lines(criu_log, "restoring onto")))
    else:
        log(f"ctr: {(r.stderr or r.stdout).strip()[-600:]}")
    rc.expect(r.returncode != 0, "the restore with the spec's render nodes other than the container's "
              "/dev (renderD130/131 in the spec, renderD128/129 in /dev) succeeded")
    # The nodes to name are the checkpoint's, which the container's /dev
    # has and its cgroup denies: a spec passing them restores (step 2a).
    want = [f"--device /dev/dri/renderD{m}" for m in FIRST_MINORS]
    said = [l for l in errors if "container runtime must pass" in l and "Operation not permitted" in l
            and all(w in l for w in want)]
    if not said:
        show_criu_log(rc, criu_log)
    rc.expect(said, f"no plugin error says the cgroup denies the container's nodes and that the runtime "
              f"must pass them in ({' '.join(want)})")
    left = [p for p in emu.ctl("processes")["processes"] if p.get("bos")]
    rc.expect(not left, f"the failed restore left GPU state in the model: {left}")
    node.remove("gpu-spec-only")

    # 2c: the spec and the container's /dev image both changed.
    ck = CheckpointArchive(archive, os.path.join(work, "renamed"), CHECKPOINT)
    ck.edit_spec(lambda s: rename_spec_devices(s, PLUGIN_RENAMES))
    ck.edit_criu_images(lambda d: ct.edit_dev_images(d, PLUGIN_RENAMES))
    ck.write(os.path.join(work, "renamed.tar"), CHECKPOINT + "-renamed")
    node.ctr("images", "import", "--no-unpack", os.path.join(work, "renamed.tar"))
    restore(rc, emu, node, st, work, "gpu-renamed", CHECKPOINT + "-renamed", RENAMED,
            "restored on the second node, the device plugin's nodes in the spec and in /dev")


def inside(args):
    rc, emu = ct.machine_helpers(args)
    harness.become_subreaper()
    sys.path.insert(0, args.realcriu_lib)
    import realcriu
    node = Containerd(args.work, os.path.join(args.work, f"containerd-{args.phase}"))
    try:
        {"first": phase_first, "second": phase_second}[args.phase](args, rc, emu, args.work, node)
    finally:
        node.stop()
        for pid in rc.reap_children():
            log(f"cleanup: pid {pid} left by containerd, killed")
            realcriu.end_process(pid)


def run_nodes(args, work, criu):
    """The node's private mounts, the container image, runc's criu, then
    the two nodes one after the other, each running this script's phase
    (--phase) inside its machine; True when both passed."""
    root = os.path.join(work, "machine")
    private_mounts(work)
    ct.rootfs_tar(args, work)
    oci_archive(os.path.join(work, "rootfs.tar"), os.path.join(work, "image.tar"), IMAGE)
    ct.write_criu_side(args, work, root, criu)
    four = os.path.join(work, ct.FOUR_MI210)
    ct.write_four_mi210(four)
    me = harness.self_command(__file__, "--work", work)
    emu = [args.kfd_emu, "--root", root]
    rc = 1
    for name, machine, minors in (("first", FIRST, FIRST_MINORS),
                                  ("second", ["--machine", four] + SECOND, SECOND_MINORS)):
        log(f"node {name}: {' '.join(machine)}")
        device_nodes(minors)
        rc = subprocess.run(emu + machine + ["--"] + me + ["--phase", name]).returncode
        if rc != 0:
            break
    return rc == 0


def main():
    ap = argparse.ArgumentParser()
    ct.add_common_args(ap)
    args = ap.parse_args()

    ct.run_test(args, __file__, [("containerd", "containerd"), ("ctr", "containerd"), ("runc", "runc")],
                "kfdemu-containerd.", inside, run_nodes, remove_cgroups)


if __name__ == "__main__":
    main()
