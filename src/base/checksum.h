// SPDX-License-Identifier: GPL-2.0-only
//
// The one checksum of the plugin's images: XXH3-64 with seed 0, from
// libxxhash (Debian's libxxhash-dev). It covers the contents of every BO,
// chunk by chunk, and every metadata image (image/framing.h "seal").
//
// Chosen for speed: it hashes at memory bandwidth on one core, far above
// what storage or a DMA engine deliver, so verifying costs a few percent of
// a dump or restore, not a factor. It detects accidental damage (bit rot,
// truncation, a bad copy); it is not a cryptographic MAC and does not stop a
// deliberate forgery.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace amdcr {

// XXH3-64 of `len` bytes.
uint64_t checksum64(const void *data, size_t len);
inline uint64_t checksum64(std::span<const uint8_t> bytes)
{
	return checksum64(bytes.data(), bytes.size());
}

// The same checksum over data that arrives in pieces: the result of
// update(a); update(b) is checksum64(a + b).
class StreamingChecksum {
public:
	StreamingChecksum();
	StreamingChecksum(StreamingChecksum &&) noexcept;
	StreamingChecksum &operator=(StreamingChecksum &&) noexcept;
	~StreamingChecksum();

	// Starts over (the checksum of nothing).
	void reset();
	void update(const void *data, size_t len);
	uint64_t digest() const;

private:
	struct State;
	std::unique_ptr<State> state_;
};

} // namespace amdcr
