#!/usr/bin/env bash
# Image interop between the plugin and the upstream plugin of one CRIU
# version: each side writes the sample checkpoint (sample.h), the other
# side reads it, and both read the same facts from both files.
#   check.sh UPSTREAM_CODEC OUR_CODEC HAS_RENDER_BOS(0|1) VERSION
set -u
up=$1 ours=$2 render=$3 ver=$4
T=$(mktemp -d /tmp/amdcr-interop.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL ($ver): $*"; exit 1; }
nh=() # CRIU 4.0-4.2.1 have no kfd_bo_entry.handle
[ "$render" = 1 ] || nh=(--no-handle)
n=0

mkdir "$T/up" "$T/our"
"$up" write-kfd "$T/up/amdgpu-kfd-3.img" || fail "upstream could not write a KFD image"
"$ours" write-kfd "$T/our" 3 || fail "the plugin could not write a KFD image"
"$up" read-kfd "$T/up/amdgpu-kfd-3.img" >"$T/up.by-up" || fail "upstream cannot read its own image"
"$ours" read-kfd "$T/up" 3 "${nh[@]}" >"$T/up.by-our" || fail "the plugin refuses upstream's KFD image"
diff -u "$T/up.by-up" "$T/up.by-our" || fail "the plugin reads upstream's KFD image differently"
"$up" read-kfd "$T/our/amdgpu-kfd-3.img" >"$T/our.by-up" || fail "upstream refuses the plugin's KFD image"
diff -u "$T/up.by-up" "$T/our.by-up" || fail "upstream reads other facts from the plugin's KFD image"
echo "ok - KFD image: upstream's read by the plugin, the plugin's read by upstream, same facts"; n=$((n + 1))

if [ "$render" = 1 ]; then
	"$up" write-render "$T/up/amdgpu-renderD-5.img" || fail "upstream could not write a render image"
	"$ours" write-render "$T/our" 5 || fail "the plugin could not write a render image"
	"$up" read-render "$T/up/amdgpu-renderD-5.img" >"$T/r.by-up" || fail "upstream cannot read its render image"
	"$ours" read-render "$T/up" 5 >"$T/r.by-our" || fail "the plugin refuses upstream's render image"
	diff -u "$T/r.by-up" "$T/r.by-our" || fail "the plugin reads upstream's render image differently"
	"$up" read-render "$T/our/amdgpu-renderD-5.img" >"$T/r2.by-up" || fail "upstream refuses the plugin's render image"
	diff -u "$T/r.by-up" "$T/r2.by-up" || fail "upstream reads other facts from the plugin's render image"
	echo "ok - render node image (drm_bo_entry, drm_vm_entry; ours with a bo_metadata): both ways, same facts"; n=$((n + 1))
else
	# This CRIU's plugin writes no handle: the plugin reads "none".
	[ "$("$ours" read-kfd "$T/up" 3 | grep -c 'handle 0xffffffff$')" = 4 ] ||
		fail "a KFD image without handles does not read as 'no handle' (0xffffffff)"
	echo "ok - KFD image without kfd_bo_entry.handle: every BO reads as unshared (0xffffffff)"; n=$((n + 1))

	# This CRIU's render node image has gpu_id alone. The plugin reads it
	# as a gpu_id-only image of the file it is read for, its render minor
	# taken from the KFD image's device entry of that GPU; upstream reads
	# the plugin's image (unknown fields skipped) as the same GPU.
	"$up" write-render "$T/up/amdgpu-renderD-5.img" || fail "upstream could not write a render image"
	"$ours" write-render "$T/our" 5 || fail "the plugin could not write a render image"
	"$up" read-render "$T/up/amdgpu-renderD-5.img" >"$T/r.by-up" || fail "upstream cannot read its render image"
	"$ours" read-render "$T/up" 5 --gpu-only >"$T/r.by-our" || fail "the plugin refuses upstream's render image"
	diff -u "$T/r.by-up" "$T/r.by-our" || fail "the plugin reads upstream's render image differently"
	"$ours" read-render "$T/up" 5 --resolve 3 >"$T/r.resolved" ||
		fail "the plugin cannot take the render minor of upstream's render image from its KFD image"
	printf 'gpu_id_only 1\nrender gpu 0x%x id 5 minor %u bos 0\n' 0x1a2b 129 | diff -u - "$T/r.resolved" ||
		fail "upstream's gpu_id-only render image does not read as file 5 on the KFD image's renderD129"
	"$up" read-render "$T/our/amdgpu-renderD-5.img" >"$T/r2.by-up" || fail "upstream refuses the plugin's render image"
	diff -u "$T/r.by-up" "$T/r2.by-up" || fail "upstream reads another GPU from the plugin's render image"
	echo "ok - render node image of CRIU 4.0-4.2.1 (gpu_id alone): both ways, render minor from the KFD image"
	n=$((n + 1))
fi
echo "$n passed, 0 failed"
