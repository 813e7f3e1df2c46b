# SPDX-License-Identifier: GPL-2.0-only
#
# Sourced by the scripts of this folder that run a command in a private
# mount namespace (bare_sys.sh, ro_sys.sh):
#
#   . "$(dirname "$0")/private_mount_ns.sh"
#   enter_private_mount_ns "$0" "$@"
#   shift    # --inner
#
# enter_private_mount_ns SCRIPT ARGS..: when ARGS do not start with --inner
# (the script's first run), SCRIPT runs again as `SCRIPT --inner ARGS..` in
# a private mount namespace (`unshare -m --propagation private`), in place
# of this shell; its mounts end with it. NOT RUN (exit 77, CTest's
# SKIP_RETURN_CODE, the reason on stdout) when unshare(1) is not installed
# or the namespace is not permitted here. Inside (--inner), it returns.

enter_private_mount_ns() {
  [ "${2:-}" = "--inner" ] && return 0
  if ! command -v unshare >/dev/null; then
    echo "NOT RUN: unshare(1) is not installed (util-linux)"
    exit 77
  fi
  local err
  if ! err=$(unshare -m --propagation private true 2>&1); then
    echo "NOT RUN: unshare -m is not permitted here: $err"
    exit 77
  fi
  local script=$1
  shift
  exec unshare -m --propagation private "$script" --inner "$@"
}
