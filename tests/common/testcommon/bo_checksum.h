// SPDX-License-Identifier: GPL-2.0-only
//
// The one checksum of a BO's contents that tests compare: the emulator's
// introspection reports it for live BOs (tests/emulator/model,
// introspect.cpp), img-check for the BOs in a checkpoint's pages files
// (tests/e2e), tests/hip/hip_criu_test.py (bo_checksum) for bytes CRIU
// dumped. All three must agree on every byte, so it is defined here once
// (and in that Python function, which says so).
//
// FNV-1a 64 over the contents' 64-bit words in the host's byte order
// (little-endian: x86-64), the last word zero-padded when the size is not
// a multiple of 8: per word, h ^= word, then h *= the FNV prime. One
// multiplication per 8 bytes instead of per byte: the emulator hashes every
// BO at each `bos` query, its costliest function in CI (byte-wise). A change
// in one word always changes the result (each step is a bijection of h),
// and a run of zero words is one multiplication by a power of the prime
// (skip_zero_words), so sparse BOs cost only their data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace testcommon {

inline constexpr uint64_t kBoChecksumBasis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kBoChecksumPrime = 0x100000001b3ull;

// Folds `n` bytes into `h`. Every call but a BO's last must pass a
// multiple of 8 bytes (the words are the BO's, counted from its start).
inline void fold_words(uint64_t &h, const void *data, size_t n)
{
	const auto *p = static_cast<const unsigned char *>(data);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		std::memcpy(&w, p + i, 8);
		h = (h ^ w) * kBoChecksumPrime;
	}
	if (i < n) {
		uint64_t w = 0;
		std::memcpy(&w, p + i, n - i);
		h = (h ^ w) * kBoChecksumPrime;
	}
}

// Folds `words` zero words into `h`: h * prime^words.
inline void skip_zero_words(uint64_t &h, uint64_t words)
{
	uint64_t factor = 1, base = kBoChecksumPrime;
	for (; words; words >>= 1) {
		if (words & 1)
			factor *= base;
		base *= base;
	}
	h *= factor;
}

// The checksum of `n` bytes at `data`, as a whole BO.
inline uint64_t bo_checksum(const void *data, size_t n)
{
	uint64_t h = kBoChecksumBasis;
	fold_words(h, data, n);
	return h;
}

} // namespace testcommon
