// SPDX-License-Identifier: GPL-2.0-only
//
// SDMA linear-copy packet encoding (pure functions, no device).
//
// A linear copy is 7 dwords: header (op 1 COPY, sub-op 0 LINEAR), count,
// a parameter dword (endian swap; 0), src lo/hi, dst lo/hi. SDMA v4 and
// newer (family >= AMDGPU_FAMILY_AI, 141) encode count as bytes - 1 in a
// 22-bit field, so one packet moves at most 0x400000 bytes (the kernel's
// copy_max_bytes for sdma v4/v5); CIK/VI SDMA encodes bytes, at most
// 0x1fffff. An IB is padded with NOP dwords (0) to a multiple of 8 dwords.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "copy/dma_engine.h" // CopyRange

namespace amdcr {

inline constexpr uint32_t kAmdgpuFamilyAi = 141;
inline constexpr uint32_t kSdmaOpCopy = 1;
inline constexpr uint32_t kSdmaSubOpCopyLinear = 0;
inline constexpr uint32_t kSdmaNop = 0;
inline constexpr size_t kSdmaCopyDwords = 7;
inline constexpr size_t kSdmaIbAlignDwords = 8;

struct SdmaCaps {
	uint64_t max_bytes_per_packet = 0;
	bool count_is_bytes_minus_one = false;

	static SdmaCaps for_family(uint32_t family_id);
};

// Packets needed for `bytes` bytes (0 for 0 bytes).
uint64_t sdma_packets_for(const SdmaCaps &caps, uint64_t bytes);
// Dwords of an IB holding `packets` copy packets, padded.
size_t sdma_ib_dwords(size_t packets);
// The most packets an IB of `capacity_dwords` dwords can hold (padded).
size_t sdma_max_packets(size_t capacity_dwords);

// Writes the copy packets for `ranges` into `ib` and NOP-pads the result to
// a multiple of 8 dwords. Returns the IB length in dwords, or 0 when it does
// not fit in `ib` (nothing meaningful is written then) or `ranges` is empty.
size_t sdma_encode_copies(const SdmaCaps &caps, std::span<const CopyRange> ranges,
			  std::span<uint32_t> ib);

} // namespace amdcr
