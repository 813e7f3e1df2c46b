#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# ro_sys.sh COMMAND [ARGS..]
#
# Runs COMMAND in a private mount namespace in which the host's /sys is a
# read-only bind of itself, and exits with COMMAND's status. A program on
# the emulated machine that writes sysfs must get the emulator's answers
# (its files live in the emulator's root): anything that reached the
# host's /sys here fails with EROFS, and cannot change the host.
#
# Exit 77 (CTest's SKIP_RETURN_CODE) with the reason on stdout when the
# namespace or the mounts are not permitted here; any other failure is
# COMMAND's (or a broken premise, reported as a failure).
set -u

. "$(dirname "$0")/private_mount_ns.sh"
enter_private_mount_ns "$0" "$@"
shift

if ! err=$(mount --bind /sys /sys 2>&1 && mount -o remount,bind,ro /sys 2>&1); then
  echo "NOT RUN: a read-only bind of /sys is not permitted here: $err"
  exit 77
fi
# The premise: this namespace's /sys (the topmost mount there) is read-only.
opts=$(awk '$5 == "/sys" { o = $6 } END { print o }' /proc/self/mountinfo)
case ",$opts," in
  *,ro,*) ;;
  *) echo "FAIL: /sys is not read-only after the bind: $opts"; exit 1 ;;
esac
echo "ro_sys: /sys is a read-only bind in this mount namespace"
"$@"
