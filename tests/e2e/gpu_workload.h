// SPDX-License-Identifier: GPL-2.0-only
//
// The test workload's manifest and data pattern, shared by the workload
// (which fills its BOs), the verifier (which checks them in a restored
// task) and the tests (which compare pages files and the emulator's BOs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace e2e {

struct ManifestBo {
	uint32_t node = 0;	// HSA node the memory was allocated on
	uint32_t render_minor = 0; // its GPU's render node (0: system memory)
	bool vram = false;	// VRAM, else system memory (GTT)
	// A GEM BO on libhsakmt's render-node file (--gem), not a KFD BO:
	// addr is its CPU mapping only (its GPU VA is elsewhere) and its
	// contents go to amdgpu-drm-pages files, not the KFD pages files.
	bool gem = false;
	uint64_t addr = 0;	// CPU address; == GPU VA for KFD BOs (libhsakmt's SVM layout)
	uint64_t size = 0;	// allocation size (page multiple)
	uint64_t fill = 0;	// bytes of the pattern written from addr
	uint64_t seed = 0;
};

struct Manifest {
	int pid = 0;
	std::vector<ManifestBo> bos;
};

bool write_manifest(const std::string &path, const Manifest &m);
bool read_manifest(const std::string &path, Manifest *m);

} // namespace e2e
