// SPDX-License-Identifier: GPL-2.0-only
//
// The one test data pattern. Every workload that writes GPU or image data
// and every verifier that checks it (in C++ here, in Python in
// tests/common/testcommon.py) uses this definition, so that a writer and a
// checker can never disagree about what "seed 7's bytes" are.
//
// Byte b of seed s's pattern is byte b % 8 (little-endian) of
// pattern_word(s, b / 8). Distinct seeds give distinct data; no word is a
// run of equal bytes in practice, so a zeroed or shifted page shows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace testcommon {

// Word `i` of seed `seed`'s pattern: the golden-ratio step then
// SplitMix64's finaliser.
constexpr uint64_t pattern_word(uint64_t seed, uint64_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + i;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

// Writes `len` bytes of the pattern at `dst` (any length, any alignment).
inline void fill_pattern(void *dst, uint64_t len, uint64_t seed)
{
	auto *p = static_cast<unsigned char *>(dst);
	const uint64_t words = len / 8;
	for (uint64_t i = 0; i < words; i++) {
		const uint64_t w = pattern_word(seed, i);
		std::memcpy(p + i * 8, &w, 8);
	}
	if (len % 8 == 0)
		return; // also keeps a null `dst` of length 0 away from memcpy
	const uint64_t w = pattern_word(seed, words);
	std::memcpy(p + words * 8, &w, len % 8);
}

inline std::vector<uint8_t> pattern_bytes(size_t len, uint64_t seed)
{
	std::vector<uint8_t> out(len);
	fill_pattern(out.data(), len, seed);
	return out;
}

// Offset of the first byte of `src` that differs from the pattern, or -1.
inline int64_t check_pattern(const void *src, uint64_t len, uint64_t seed)
{
	const auto *p = static_cast<const unsigned char *>(src);
	for (uint64_t i = 0; i * 8 < len; i++) {
		const uint64_t w = pattern_word(seed, i);
		const uint64_t n = len - i * 8 < 8 ? len - i * 8 : 8;
		if (std::memcmp(p + i * 8, &w, n) == 0)
			continue;
		const auto *want = reinterpret_cast<const unsigned char *>(&w);
		for (uint64_t b = 0; b < n; b++)
			if (p[i * 8 + b] != want[b])
				return static_cast<int64_t>(i * 8 + b);
	}
	return -1;
}

} // namespace testcommon
