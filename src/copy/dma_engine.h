// SPDX-License-Identifier: GPL-2.0-only
//
// DmaEngine: the seam between the copy pipeline (transfer.h) and the thing
// that moves bytes between GPU memory and staging memory. SdmaEngine
// (sdma_engine.h) is the real one; unit tests use a fake that memcpy's on a
// worker thread.
//
// Addresses are the engine's device addresses (GPU VAs for SDMA). The
// pipeline keeps at most ONE submission outstanding: it calls wait() on a
// ticket before the next submit(). An engine may refuse a second
// outstanding submission with EBUSY.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/result.h"

namespace amdcr {

// One linear copy of any size between two engine addresses; an engine
// splits it as its packets require.
struct CopyRange {
	uint64_t src = 0;
	uint64_t dst = 0;
	uint64_t bytes = 0;
};

// A GPU buffer as the engine addresses it.
struct GpuBuffer {
	uint64_t va = 0;
	uint64_t size = 0;
};

class DmaEngine {
public:
	virtual ~DmaEngine() = default;

	// Makes the host memory [ptr, ptr + size) (page aligned, page-multiple
	// size) addressable by the engine and returns its device address.
	// One staging area at a time; detach_staging() undoes it.
	virtual Result<uint64_t> attach_staging(void *ptr, size_t size) = 0;
	// Only called with no submission outstanding.
	virtual void detach_staging() = 0;

	// Limits the pipeline respects when it builds a submission.
	virtual uint64_t max_bytes_per_range() const = 0;
	virtual size_t max_ranges_per_submission() const = 0;

	// Starts copying `ranges` as one submission; returns a ticket.
	virtual Result<uint64_t> submit(std::span<const CopyRange> ranges) = 0;
	// Waits for the submission `ticket` to finish; its error if it failed.
	virtual Status wait(uint64_t ticket) = 0;
};

} // namespace amdcr
