// SPDX-License-Identifier: GPL-2.0-only
//
// An SDMA linear copy as the tests' own GPU programs submit it, written
// here from the packet format (not the plugin's encoder, src/copy): SDMA v4
// COPY LINEAR packets of 7 dwords (header: op 1, sub-op 0; count: bytes - 1
// in 22 bits; a parameter dword 0; source and destination, low and high
// halves), at most kSdmaMaxCopy bytes each, the IB padded with NOP dwords
// (0) to a multiple of 8.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace testcommon {

inline constexpr uint64_t kSdmaMaxCopy = 1ull << 22;

// Dwords of the IB that copies `n` bytes.
inline uint64_t sdma_copy_ib_dwords(uint64_t n)
{
	const uint64_t packets = (n + kSdmaMaxCopy - 1) / kSdmaMaxCopy;
	return (packets * 7 + 7) / 8 * 8;
}

// Writes that IB at `ib` (sdma_copy_ib_dwords(n) dwords): `n` bytes from
// GPU VA `src` to GPU VA `dst`.
inline void sdma_copy_ib(uint32_t *ib, uint64_t src, uint64_t dst, uint64_t n)
{
	std::memset(ib, 0, sdma_copy_ib_dwords(n) * 4);
	for (uint64_t done = 0; done < n;) {
		const uint64_t chunk = std::min(kSdmaMaxCopy, n - done);
		ib[0] = 1; // COPY, LINEAR
		ib[1] = uint32_t(chunk - 1);
		ib[2] = 0;
		ib[3] = uint32_t(src + done);
		ib[4] = uint32_t((src + done) >> 32);
		ib[5] = uint32_t(dst + done);
		ib[6] = uint32_t((dst + done) >> 32);
		ib += 7;
		done += chunk;
	}
}

} // namespace testcommon
