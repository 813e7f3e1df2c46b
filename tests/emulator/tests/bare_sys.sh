#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# bare_sys.sh COMMAND [ARGS..]
#
# Runs COMMAND in a private mount namespace in which every
# /sys/devices/system/cpu/cpu<N> holds nothing but `topology/` (no cache/,
# no node links, no `online`), as on minimal VM kernels, and exits with
# COMMAND's status. An emulated program must not care: everything it reads
# about CPUs comes from the emulator's root.
#
# Exit 77 (CTest's SKIP_RETURN_CODE) with the reason on stdout when the
# namespace or the mounts are not permitted here; any other failure is
# COMMAND's (or a broken premise, reported as a failure).
set -u

. "$(dirname "$0")/private_mount_ns.sh"
enter_private_mount_ns "$0" "$@"
shift

# The copies live on a tmpfs of this namespace, mounted on a directory that
# is removed when the command has ended (the bind mounts keep the tmpfs).
base=$(mktemp -d "${TMPDIR:-/tmp}/bare-sys.XXXXXX") || exit 1
trap 'umount "$base" 2>/dev/null; rmdir "$base" 2>/dev/null' EXIT
if ! err=$(mount -t tmpfs tmpfs "$base" 2>&1); then
  echo "NOT RUN: mount is not permitted in the namespace: $err"
  exit 77
fi
stripped=0
for d in /sys/devices/system/cpu/cpu[0-9]*; do
  [ -d "$d" ] || continue
  f=$base/${d##*/}
  mkdir -p "$f"
  [ -d "$d/topology" ] && cp -r "$d/topology" "$f/"
  if ! err=$(mount --bind "$f" "$d" 2>&1); then
    echo "NOT RUN: bind mount over $d is not permitted: $err"
    exit 77
  fi
  stripped=$((stripped + 1))
done
# The premise: no CPU's cache or node link is visible any more.
for d in /sys/devices/system/cpu/cpu[0-9]*; do
  [ -d "$d" ] || continue
  for e in "$d"/*; do
    if [ "${e##*/}" != topology ] && [ -e "$e" ]; then
      echo "FAIL: $e is still visible after the bind mount"
      exit 1
    fi
  done
done
echo "bare_sys: $stripped CPU directories reduced to topology/"
"$@"
