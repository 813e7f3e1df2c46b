// SPDX-License-Identifier: GPL-2.0-only
#include "base/checksum.h"

#define XXH_STATIC_LINKING_ONLY // XXH3_state_t by value: no allocation that can fail
#include <xxhash.h>

namespace amdcr {

struct StreamingChecksum::State {
	XXH3_state_t xxh;
};

uint64_t checksum64(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}

StreamingChecksum::StreamingChecksum() : state_(std::make_unique<State>())
{
	reset();
}

StreamingChecksum::StreamingChecksum(StreamingChecksum &&) noexcept = default;
StreamingChecksum &StreamingChecksum::operator=(StreamingChecksum &&) noexcept = default;
StreamingChecksum::~StreamingChecksum() = default;

void StreamingChecksum::reset()
{
	// XXH3_64bits_reset fails only for a null state.
	(void)XXH3_64bits_reset(&state_->xxh);
}

void StreamingChecksum::update(const void *data, size_t len)
{
	// Fails only for a null state or a null pointer with a length.
	if (len > 0)
		(void)XXH3_64bits_update(&state_->xxh, data, len);
}

uint64_t StreamingChecksum::digest() const
{
	return XXH3_64bits_digest(&state_->xxh);
}

} // namespace amdcr
