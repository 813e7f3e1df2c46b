#!/usr/bin/env bash
# The build refuses an upward (or sideways) #include between layers of src/,
# and accepts includes of the layers below: compiles the object
# libraries of tests/layers/CMakeLists.txt in build dir $1.
set -u
b=$1
fail() { echo "FAIL: $*"; exit 1; }
cmake --build "$b" --target layer_copy_includes_lower >/dev/null 2>&1 ||
	fail "copy including base, device and image did not compile (the control)"
for t in base_includes_plugin:plugin/dump.h device_includes_image:image/kfd_image.h \
	inspect_includes_plugin:plugin/dump.h; do
	target=${t%%:*} header=${t#*:}
	out=$(cmake --build "$b" --target "layer_$target" 2>&1) && fail "$target compiled"
	grep -q "$header: No such file" <<<"$out" || fail "$target failed for another reason: $out"
	echo "ok - $target refused: $header is not on its include path"
done
echo "1 passed, 0 failed"
