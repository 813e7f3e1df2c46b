// SPDX-License-Identifier: GPL-2.0-only
//
// amdgpu-img flatten SRC DST: a self-contained copy of a checkpoint whose
// KFD images may be links of a chain (image/kfd_chain.h) or deduplicated
// (image/chunk_index.h). Every KFD image that names a parent or refers to
// chunks stored elsewhere is written without them, its pages files complete (each
// byte read from the checkpoint holding it, checked against the image's
// checksums), so the copy is what a complete dump writes and upstream's
// plugin restores it. Every other file of SRC is copied as it is (pages
// files keep their holes). CRIU's own images are CRIU's: when SRC has a
// `parent` link (CRIU's memory images of a --track-mem chain may need it),
// DST gets one to the same directory, by its absolute path.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace amdcr::inspect {

struct FlattenReport {
	size_t files = 0;	      // files written to DST
	size_t chains = 0;	      // KFD images that were links of a chain
	uint64_t from_parents = 0; // bytes read from SRC's parent checkpoints
	uint64_t deduplicated = 0; // bytes of deduplicated chunks written out again
	std::string parent_link;   // where DST's parent link points ("" = none)
};

// DST must not exist or be an empty directory (EEXIST otherwise).
Result<FlattenReport> flatten_checkpoint(const std::string &src, const std::string &dst);

} // namespace amdcr::inspect
