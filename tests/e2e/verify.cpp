// SPDX-License-Identifier: GPL-2.0-only
//
// The restored task's verifier (loaded by criu-host restore --verifier
// libgpu_verify.so:verify_gpu_state --verifier-arg MANIFEST): every BO of
// the manifest must hold its pattern at its old CPU address, which the
// restore mapped again through the plugin's new offsets.
#include <cstdio>

#include "gpu_workload.h"

extern "C" __attribute__((visibility("default"))) int verify_gpu_state(const char *manifest)
{
	e2e::Manifest m;
	if (!e2e::read_manifest(manifest, &m)) {
		std::fprintf(stderr, "verify: cannot read manifest %s\n", manifest);
		return 2;
	}
	int bad = 0;
	for (const auto &b : m.bos) {
		const int64_t at = e2e::check_pattern(reinterpret_cast<const void *>(b.addr), b.fill, b.seed);
		if (at >= 0) {
			std::fprintf(stderr, "verify: BO at %#llx (%llu bytes, %s): first bad byte at offset %lld\n",
				     static_cast<unsigned long long>(b.addr), static_cast<unsigned long long>(b.size),
				     b.vram ? "vram" : "gtt", static_cast<long long>(at));
			bad++;
		}
	}
	std::printf("verify: %zu BOs checked through their restored CPU mappings, %d bad\n", m.bos.size(), bad);
	return bad ? 1 : 0;
}
