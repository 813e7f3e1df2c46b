// SPDX-License-Identifier: GPL-2.0-only
//
// `amdgpu-img diff`: what differs between two checkpoints. Images are paired
// by CRIU file id (and a lone KFD image on each side with each other); KFD
// BOs by (gpu_id, VA), render BOs by index. For each pair it reports the
// process and topology facts, BOs only on one side, BO attributes (not the
// mmap offset, which the driver assigns anew in every process), per GPU
// the bytes deduplication stored once elsewhere where the sides differ in
// them, and the contents of BOs present on both sides with the same size,
// compared chunk by chunk from the pages files (two buffers of one chunk
// each; a deduplicated image's referenced chunks from the files storing
// them, image/kfd_chain.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "inspect/checkpoint.h"

namespace amdcr::inspect {

inline constexpr uint64_t kDefaultDiffChunk = 1u << 20;
inline constexpr uint64_t kMaxDiffChunk = 64u << 20; // each of the two buffers

struct DiffOptions {
	uint64_t chunk_bytes = kDefaultDiffChunk; // 1 .. kMaxDiffChunk
};

// One line per difference, "" for none. Errors: an image that does not
// decode on either side, a chunk size out of range, a pages file that
// cannot be read (each naming the file).
Result<std::vector<std::string>> diff_checkpoints(const Checkpoint &a, const Checkpoint &b,
						  const DiffOptions &opt = {});

} // namespace amdcr::inspect
