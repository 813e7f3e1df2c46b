#!/usr/bin/env bash
# Installs the Debian 12 packages this project builds and tests with.
# Idempotent: does nothing when everything is present.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libdrm-dev libprotobuf-c-dev protobuf-c-compiler
      libhsakmt-dev libcriterion-dev asciidoctor python3
      # man(1), to render the man pages in the docs_markup test
      man-db
      # XXH3 checksums of the images (src/base/checksum.h)
      libxxhash-dev
      # SHA-256 of deduplicated chunks (src/image/chunk_index.h)
      nettle-dev
      # CRIU's own build (scripts/build-criu.sh, for the realcriu tests)
      libprotobuf-dev protobuf-compiler python3-protobuf libnl-3-dev libnet1-dev
      libcap-dev libbsd-dev uuid-dev libgnutls28-dev libnftables-dev libaio-dev
      xz-utils binutils
      # Debian's ROCm 5.2 user space, run on the emulated GPU (tests/rocm)
      rocminfo rocm-smi libhsa-runtime-dev
      # HIP: hipcc (clang-15, lld-15, rocm-device-libs, libamdhip64-dev,
      # amd_comgr) and llvm-objdump-15 (llvm-15), for tests/hip
      hipcc libamdhip64-dev rocm-device-libs clang-15 lld-15 llvm-15
      # ss(8), used by the real-CRIU emulator tests to check daemon sockets;
      # ip netns for the streamed checkpoints' two nodes (tests/emulator/criu/
      # streamer_test.py), which pipe them through zstd; lz4 and zstd for the
      # compression rows of bench/stream_bench.py
      iproute2 zstd lz4
      # amdgpu-img's JSON schema check (tests/inspect); the libFuzzer targets
      # (tests/fuzz, scripts/fuzz.sh)
      python3-jsonschema clang libfuzzer-14-dev
      # a GPU container under podman + runc (tests/container); runc only
      # recommends Debian's criu 3.17, which --no-install-recommends leaves out
      podman runc conmon busybox-static
      # the same under containerd 1.6 (ctr; tests/container/containerd_test.py)
      containerd
      # the benchmark's plot (bench/bench.py --plot) and its fixed-rate
      # store (bench/ratestore.cpp, FUSE)
      python3-matplotlib libfuse3-dev
      # the emulated GPU's shader core (tests/emulator/shader): its test
      # kernels (HIP via clang-15, ROCm device libraries, HIP headers) and
      # the reference assembler/disassembler (llvm-mc-15, llvm-objdump-15)
      llvm-15 clang-15 rocm-device-libs libamdhip64-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # dpkg without its fsync after every file (--force-unsafe-io): a fresh
  # machine installs hundreds of MB here (libllvm15 alone 112 MiB, the
  # containerd and clang headers ~160 MiB more); a crash mid-install is
  # mended by running this again.
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-unsafe-io "${missing[@]}"
fi
