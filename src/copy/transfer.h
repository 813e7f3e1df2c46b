// SPDX-License-Identifier: GPL-2.0-only
//
// The one data path between GPU buffers and a checkpoint image, with a
// direction: dump (GPU -> file) and restore (file -> GPU) share it.
//
// The file layout is the raw concatenation of the BOs' contents in the order
// given (BO bucket order). Staging memory is allocated ONCE (anonymous,
// page aligned, page-multiple), attached to the engine, and split into two
// halves whose total never exceeds the bound. Each half holds one chunk: a
// run of the file, made of pieces of one or more BOs (a BO larger than a
// half takes several chunks; many small BOs share one chunk, and one chunk
// is ONE engine submission). The DMA of chunk n+1 overlaps the file write of
// chunk n (dump); the file read of chunk n+1 overlaps the DMA of chunk n
// (restore). At most one submission is outstanding.
//
// Errors stop the pipeline at once; an outstanding DMA is waited for before
// the staging memory is detached and freed, and the first error is the one
// returned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/result.h"
#include "copy/dma_engine.h"
#include "base/byte_stream.h"
#include "config/config.h"

namespace amdcr {

// kDefaultStagingBound (the bound per GPU when KFD_MAX_BUFFER_SIZE is unset)
// is in config/config.h, with the reason for its size.

enum class Direction { GpuToFile, FileToGpu };

// How the staging memory is sized for a bound and a set of BOs.
struct StagingPlan {
	size_t half_bytes = 0;	// page multiple, > 0
	size_t total_bytes = 0; // 2 * half_bytes, <= bound
};

// half = min(round_down(bound / 2, page), round_up(total BO bytes, page)),
// at least one page. EINVAL when the bound is below two pages.
Result<StagingPlan> plan_staging(uint64_t bound, std::span<const GpuBuffer> bos);
Result<StagingPlan> plan_staging(uint64_t bound, uint64_t total_bytes);

// Where the transfer gets its buffers: their sizes up front (the file
// layout and the staging plan need them), their engine addresses one by
// one, in order, when the pipeline reaches them. A feed may still be
// preparing later buffers (importing dma-bufs) while earlier ones copy.
class BufferFeed {
public:
	virtual ~BufferFeed() = default;
	virtual size_t count() const = 0;
	virtual uint64_t size(size_t i) const = 0;
	// Buffer i (its size() bytes are copied); may block until it is ready.
	// Called once per buffer, in increasing i.
	virtual Result<GpuBuffer> get(size_t i) = 0;
};

struct TransferStats {
	uint64_t bos = 0;
	uint64_t bytes = 0;
	double seconds = 0;
	uint64_t peak_staging_bytes = 0;
	uint64_t submissions = 0;
};

// Dump: copies `bos` (in order) out through `engine` and appends their
// contents to `sink`.
Result<TransferStats> transfer_to_file(DmaEngine &engine, std::span<const GpuBuffer> bos,
				       ByteSink &sink, uint64_t bound);
Result<TransferStats> transfer_to_file(DmaEngine &engine, BufferFeed &bos, ByteSink &sink,
				       uint64_t bound);
// Restore: reads the contents of `bos` (in order) from `source` and copies
// them in through `engine`.
Result<TransferStats> transfer_from_file(DmaEngine &engine, std::span<const GpuBuffer> bos,
					 ByteSource &source, uint64_t bound);
Result<TransferStats> transfer_from_file(DmaEngine &engine, BufferFeed &bos, ByteSource &source,
					 uint64_t bound);

} // namespace amdcr
