// SPDX-License-Identifier: GPL-2.0-only
#include "copy/transfer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <optional>
#include <utility>
#include <vector>

#include "base/file_io.h"
#include "base/scoped.h"

namespace amdcr {

namespace {


// Anonymous, page-aligned memory (what a userptr BO needs), unmapped on
// destruction.
class StagingMemory {
public:
	static Result<StagingMemory> allocate(size_t size)
	{
		void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return errno_error(errno, strprintf("staging memory: mmap(%zu bytes)", size));
		return StagingMemory(static_cast<uint8_t *>(p), size);
	}
	StagingMemory(StagingMemory &&o) noexcept
		: ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0))
	{
	}
	StagingMemory &operator=(StagingMemory &&) = delete;
	StagingMemory(const StagingMemory &) = delete;
	StagingMemory &operator=(const StagingMemory &) = delete;
	~StagingMemory()
	{
		if (ptr_)
			::munmap(ptr_, size_);
	}
	uint8_t *data() const { return ptr_; }
	size_t size() const { return size_; }

private:
	StagingMemory(uint8_t *p, size_t n) : ptr_(p), size_(n) {}
	uint8_t *ptr_ = nullptr;
	size_t size_ = 0;
};

// The one outstanding submission. If it is still outstanding when this goes
// away (an error path), it is waited for, so the staging memory is never
// detached or freed under a running DMA; that wait's own error is dropped,
// the first error is already on its way out.
class Outstanding {
public:
	explicit Outstanding(DmaEngine &engine) : engine_(engine) {}
	Outstanding(const Outstanding &) = delete;
	Outstanding &operator=(const Outstanding &) = delete;
	~Outstanding()
	{
		if (ticket_)
			(void)engine_.wait(*ticket_);
	}
	void set(uint64_t ticket) { ticket_ = ticket; }
	Status wait()
	{
		const uint64_t t = *ticket_;
		ticket_.reset();
		return engine_.wait(t);
	}

private:
	DmaEngine &engine_;
	std::optional<uint64_t> ticket_;
};

// One staging half's worth of the file: the ranges that fill it.
struct Chunk {
	std::vector<CopyRange> ranges;
	size_t bytes = 0;
};

// Walks the BOs in order and cuts them into chunks.
class Chunker {
public:
	Chunker(Direction dir, BufferFeed &bos, uint64_t max_range, size_t max_ranges)
		: dir_(dir), bos_(bos), max_range_(max_range), max_ranges_(max_ranges)
	{
	}

	// Fills `c` with the next chunk for the half at `half_va` of
	// `half_bytes`; empty when all BOs are done. Fails when the feed
	// cannot provide the next buffer.
	Status next(Chunk &c, uint64_t half_va, size_t half_bytes)
	{
		c.ranges.clear();
		c.bytes = 0;
		while (bo_ < bos_.count() && c.bytes < half_bytes && c.ranges.size() < max_ranges_) {
			if (!current_) {
				auto b = bos_.get(bo_);
				if (!b)
					return std::move(b).error();
				current_ = GpuBuffer{b->va, bos_.size(bo_)};
			}
			const GpuBuffer &b = *current_;
			const uint64_t n = std::min({b.size - off_, uint64_t(half_bytes - c.bytes), max_range_});
			if (n > 0) {
				const uint64_t gpu = b.va + off_;
				const uint64_t host = half_va + c.bytes;
				if (dir_ == Direction::GpuToFile)
					c.ranges.push_back(CopyRange{gpu, host, n});
				else
					c.ranges.push_back(CopyRange{host, gpu, n});
				c.bytes += n;
				off_ += n;
			}
			if (off_ == b.size) {
				++bo_;
				off_ = 0;
				current_.reset();
			}
		}
		return ok_status();
	}

private:
	Direction dir_;
	BufferFeed &bos_;
	uint64_t max_range_;
	size_t max_ranges_;
	size_t bo_ = 0;
	uint64_t off_ = 0;
	std::optional<GpuBuffer> current_;
};

// A feed over buffers that are all ready.
class SpanFeed final : public BufferFeed {
public:
	explicit SpanFeed(std::span<const GpuBuffer> bos) : bos_(bos) {}
	size_t count() const override { return bos_.size(); }
	uint64_t size(size_t i) const override { return bos_[i].size; }
	Result<GpuBuffer> get(size_t i) override { return bos_[i]; }

private:
	std::span<const GpuBuffer> bos_;
};

// The file side: the sink (dump) or the source (restore).
struct FileSide {
	ByteSink *sink = nullptr;
	ByteSource *source = nullptr;

	Status step(uint8_t *buf, size_t len) const
	{
		return sink ? sink->write(buf, len) : source->read(buf, len);
	}
};

Result<TransferStats> run(DmaEngine &engine, BufferFeed &bos, Direction dir, const FileSide &file,
			  uint64_t bound)
{
	const auto start = std::chrono::steady_clock::now();
	TransferStats stats;
	stats.bos = bos.count();
	for (size_t i = 0; i < bos.count(); i++)
		stats.bytes += bos.size(i);
	if (stats.bytes == 0)
		return stats;

	if (file.source && file.source->remaining() < stats.bytes)
		return make_error(EINVAL, "image holds %" PRIu64 " bytes, the BOs need %" PRIu64,
				  file.source->remaining(), stats.bytes);
	if (engine.max_bytes_per_range() == 0 || engine.max_ranges_per_submission() == 0)
		return make_error(EINVAL, "DMA engine accepts no copies");

	auto plan = plan_staging(bound, stats.bytes);
	if (!plan)
		return std::move(plan).error();
	if (plan->total_bytes > bound || plan->total_bytes != 2 * plan->half_bytes)
		return make_error(EINVAL, "staging plan of %zu bytes exceeds the bound of %" PRIu64,
				  plan->total_bytes, bound);
	const size_t half = plan->half_bytes;

	auto mem = StagingMemory::allocate(plan->total_bytes);
	if (!mem)
		return std::move(mem).error();
	auto staging_va = engine.attach_staging(mem->data(), mem->size());
	if (!staging_va)
		return std::move(staging_va).error().context("staging memory");
	ScopeExit detach([&engine] { engine.detach_staging(); });
	// Declared after `detach`: an outstanding DMA is drained first.
	Outstanding outstanding(engine);
	stats.peak_staging_bytes = plan->total_bytes;

	auto half_ptr = [&](int h) { return mem->data() + size_t(h) * half; };
	auto half_va = [&](int h) { return *staging_va + uint64_t(h) * half; };

	Chunker chunker(dir, bos, engine.max_bytes_per_range(), engine.max_ranges_per_submission());
	Chunk chunks[2];
	int h = 0;
	if (auto st = chunker.next(chunks[0], half_va(0), half); !st)
		return std::move(st).error();
	if (dir == Direction::FileToGpu) {
		if (auto st = file.step(half_ptr(0), chunks[0].bytes); !st)
			return std::move(st).error();
	}
	// Each round runs the DMA of the chunk in half h while the file side
	// handles the chunk in the other half: the previous chunk (dump: it
	// has been copied out) or the next one (restore: it is read in).
	while (chunks[h].bytes > 0) {
		auto ticket = engine.submit(chunks[h].ranges);
		if (!ticket)
			return std::move(ticket).error();
		outstanding.set(*ticket);
		++stats.submissions;

		const int o = h ^ 1;
		if (dir == Direction::FileToGpu) {
			// Restore: the next chunk is read in while this one copies.
			if (auto st = chunker.next(chunks[o], half_va(o), half); !st)
				return std::move(st).error();
			if (chunks[o].bytes > 0)
				if (auto st = file.step(half_ptr(o), chunks[o].bytes); !st)
					return std::move(st).error();
		} else {
			// Dump: the chunk copied in the previous round is written,
			// then the next chunk is laid out (its buffers may still be
			// arriving from the feed) while this one copies.
			if (chunks[o].bytes > 0)
				if (auto st = file.step(half_ptr(o), chunks[o].bytes); !st)
					return std::move(st).error();
			if (auto st = chunker.next(chunks[o], half_va(o), half); !st)
				return std::move(st).error();
		}
		if (auto st = outstanding.wait(); !st)
			return std::move(st).error();
		h = o;
	}
	// Dump: the last chunk copied out is still to be written.
	if (dir == Direction::GpuToFile && chunks[h ^ 1].bytes > 0) {
		if (auto st = file.step(half_ptr(h ^ 1), chunks[h ^ 1].bytes); !st)
			return std::move(st).error();
	}

	stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	return stats;
}

} // namespace

Result<StagingPlan> plan_staging(uint64_t bound, uint64_t total)
{
	const uint64_t page = page_size();
	if (bound < 2 * page)
		return make_error(EINVAL, "staging bound of %" PRIu64 " bytes is below two pages",
				  bound);
	const uint64_t most = bound / 2 / page * page;
	const uint64_t needed = std::max<uint64_t>((total + page - 1) / page * page, page);
	StagingPlan plan;
	plan.half_bytes = static_cast<size_t>(std::min(most, needed));
	plan.total_bytes = 2 * plan.half_bytes;
	return plan;
}

Result<StagingPlan> plan_staging(uint64_t bound, std::span<const GpuBuffer> bos)
{
	uint64_t total = 0;
	for (const auto &b : bos)
		total += b.size;
	return plan_staging(bound, total);
}

Result<TransferStats> transfer_to_file(DmaEngine &engine, BufferFeed &bos, ByteSink &sink,
				       uint64_t bound)
{
	return run(engine, bos, Direction::GpuToFile, FileSide{&sink, nullptr}, bound);
}

Result<TransferStats> transfer_from_file(DmaEngine &engine, BufferFeed &bos, ByteSource &source,
					 uint64_t bound)
{
	return run(engine, bos, Direction::FileToGpu, FileSide{nullptr, &source}, bound);
}

Result<TransferStats> transfer_to_file(DmaEngine &engine, std::span<const GpuBuffer> bos,
				       ByteSink &sink, uint64_t bound)
{
	SpanFeed feed(bos);
	return transfer_to_file(engine, feed, sink, bound);
}

Result<TransferStats> transfer_from_file(DmaEngine &engine, std::span<const GpuBuffer> bos,
					 ByteSource &source, uint64_t bound)
{
	SpanFeed feed(bos);
	return transfer_from_file(engine, feed, source, bound);
}

} // namespace amdcr
