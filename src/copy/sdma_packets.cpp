// SPDX-License-Identifier: GPL-2.0-only
#include "copy/sdma_packets.h"

#include <algorithm>

namespace amdcr {

SdmaCaps SdmaCaps::for_family(uint32_t family_id)
{
	SdmaCaps caps;
	if (family_id >= kAmdgpuFamilyAi) {
		// 22-bit count field holding bytes - 1.
		caps.max_bytes_per_packet = 0x400000;
		caps.count_is_bytes_minus_one = true;
	} else {
		caps.max_bytes_per_packet = 0x1fffff;
		caps.count_is_bytes_minus_one = false;
	}
	return caps;
}

uint64_t sdma_packets_for(const SdmaCaps &caps, uint64_t bytes)
{
	return (bytes + caps.max_bytes_per_packet - 1) / caps.max_bytes_per_packet;
}

size_t sdma_ib_dwords(size_t packets)
{
	const size_t dw = packets * kSdmaCopyDwords;
	return (dw + kSdmaIbAlignDwords - 1) / kSdmaIbAlignDwords * kSdmaIbAlignDwords;
}

size_t sdma_max_packets(size_t capacity_dwords)
{
	const size_t usable = capacity_dwords / kSdmaIbAlignDwords * kSdmaIbAlignDwords;
	return usable / kSdmaCopyDwords;
}

size_t sdma_encode_copies(const SdmaCaps &caps, std::span<const CopyRange> ranges,
			  std::span<uint32_t> ib)
{
	if (caps.max_bytes_per_packet == 0)
		return 0;
	size_t packets = 0;
	for (const auto &r : ranges)
		packets += sdma_packets_for(caps, r.bytes);
	const size_t total = sdma_ib_dwords(packets);
	if (packets == 0 || total > ib.size())
		return 0;

	size_t at = 0;
	const uint32_t header = (kSdmaSubOpCopyLinear << 8) | kSdmaOpCopy;
	for (const auto &r : ranges) {
		for (uint64_t done = 0; done < r.bytes;) {
			const uint64_t n = std::min(r.bytes - done, caps.max_bytes_per_packet);
			const uint64_t src = r.src + done;
			const uint64_t dst = r.dst + done;
			ib[at++] = header;
			ib[at++] = static_cast<uint32_t>(caps.count_is_bytes_minus_one ? n - 1 : n);
			ib[at++] = 0;
			ib[at++] = static_cast<uint32_t>(src);
			ib[at++] = static_cast<uint32_t>(src >> 32);
			ib[at++] = static_cast<uint32_t>(dst);
			ib[at++] = static_cast<uint32_t>(dst >> 32);
			done += n;
		}
	}
	while (at < total)
		ib[at++] = kSdmaNop;
	return total;
}

} // namespace amdcr
