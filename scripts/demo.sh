#!/usr/bin/env bash
# The main job on a fresh machine: install the Debian packages, build, then
# checkpoint a 2-GPU process on an emulated machine and restore it on another
# one (other GPU ids and render minors), all from the build tree. Nothing is
# installed into the system unless asked:
#
#   scripts/demo.sh               build in build/ and run the demo
#   scripts/demo.sh --install     ... then install the plugin and its man page
#                                 under /usr (stripped; PREFIX=... for another
#                                 prefix); the list of installed files is
#                                 build/install_manifest.txt
#   scripts/demo.sh --uninstall   remove exactly the files that list names
#
# Run it as root (or through sudo): the emulated GPU and the CRIU stand-in
# need ptrace and CAP_SYS_ADMIN, as CRIU does.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${PREFIX:-/usr}
manifest=build/install_manifest.txt

case "${1:-}" in
"") install=0 ;;
--install) install=1 ;;
--uninstall)
	if [ ! -f "$manifest" ]; then
		echo "demo.sh: nothing to uninstall: $manifest does not exist (no --install from this tree)" >&2
		exit 1
	fi
	while IFS= read -r f; do
		[ -n "$f" ] || continue
		rm -f -- "$f" && echo "removed: $f"
	done <"$manifest"
	rm -f -- "$manifest"
	exit 0
	;;
*)
	echo "usage: scripts/demo.sh [--install | --uninstall]" >&2
	exit 2
	;;
esac

bash scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"
bash tests/e2e/demo.sh build
if [ "$install" = 1 ]; then
	cmake --install build --prefix "$prefix" --strip
	echo "installed (listed in $manifest; scripts/demo.sh --uninstall removes them):"
	sed 's/^/  /' "$manifest"
fi
