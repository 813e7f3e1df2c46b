#!/usr/bin/env bash
# extract_proto.sh DIR TARBALL OUT: checks TARBALL against DIR/SHA256SUMS and
# writes its plugins/amdgpu/criu-amdgpu.proto to OUT.
set -euo pipefail
dir=$1 tarball=$2 out=$3
(cd "$dir" && grep -E "[[:space:]]\*?$tarball\$" SHA256SUMS | sha256sum -c --quiet -) ||
	{ echo "extract_proto: $dir/$tarball does not match SHA256SUMS" >&2; exit 1; }
tar -xJOf "$dir/$tarball" --wildcards '*/plugins/amdgpu/criu-amdgpu.proto' >"$out.tmp"
[ -s "$out.tmp" ] || { echo "extract_proto: no plugins/amdgpu/criu-amdgpu.proto in $tarball" >&2; exit 1; }
mv "$out.tmp" "$out"
