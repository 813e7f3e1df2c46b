// SPDX-License-Identifier: GPL-2.0-only
//
// The pipelined transfer against a fake engine: byte-exact round trips in
// both directions within the staging bound, the staging plan, batching,
// overlap, error paths; and the per-GPU staging bound (KFD_MAX_BUFFER_SIZE)
// of copy/gpu_copy.h.
#include <criterion/criterion.h>

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "../common/assert_ok.h"
#include "copy/gpu_copy.h"
#include "copy/transfer.h"
#include "fakes.h"
#include "testcommon/pattern.h"

using namespace amdcr;
using namespace amdcr::test;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;

uint64_t page() { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }

// Deterministic, position- and buffer-dependent contents.
void fill(std::vector<uint8_t> &v, uint32_t seed)
{
	testcommon::fill_pattern(v.data(), v.size(), seed);
}

struct Bos {
	std::vector<std::unique_ptr<std::vector<uint8_t>>> mem;
	std::vector<GpuBuffer> bufs;

	Bos(FakeEngine &eng, const std::vector<uint64_t> &sizes, bool random)
	{
		uint32_t seed = 1;
		for (uint64_t s : sizes) {
			mem.push_back(std::make_unique<std::vector<uint8_t>>(s));
			if (random)
				fill(*mem.back(), seed++);
			bufs.push_back(eng.add_buffer(*mem.back()));
		}
	}
	std::vector<uint8_t> concat() const
	{
		std::vector<uint8_t> out;
		for (const auto &m : mem)
			out.insert(out.end(), m->begin(), m->end());
		return out;
	}
};

// Dump `sizes` with `bound`, restore into fresh buffers, compare.
void round_trip(const std::vector<uint64_t> &sizes, uint64_t bound,
		uint32_t family = kAmdgpuFamilyAi, size_t max_ranges = 64)
{
	FakeEngine eng(family, max_ranges);
	Bos src(eng, sizes, true);
	VectorSink sink(&eng);
	auto dumped = transfer_to_file(eng, src.bufs, sink, bound);
	cr_assert_ok(dumped, "dump");
	const auto expect = src.concat();
	cr_assert_eq(sink.data.size(), expect.size());
	cr_assert(sink.data == expect, "dumped bytes differ");
	cr_assert_eq(dumped->bytes, expect.size());
	cr_assert_eq(dumped->bos, sizes.size());
	cr_assert_leq(dumped->peak_staging_bytes, bound);
	cr_assert_leq(eng.attached_bytes(), bound);
	cr_assert_eq(dumped->submissions, eng.submits());

	Bos dst(eng, sizes, false);
	VectorSource source(sink.data, &eng);
	auto restored = transfer_from_file(eng, dst.bufs, source, bound);
	cr_assert_ok(restored, "restore");
	cr_assert_eq(source.remaining(), 0u);
	for (size_t i = 0; i < sizes.size(); ++i)
		cr_assert(*dst.mem[i] == *src.mem[i], "BO %zu (%llu bytes) differs after restore", i,
			  (unsigned long long)sizes[i]);
	cr_assert_leq(restored->peak_staging_bytes, bound);
	cr_assert_eq(eng.violations(), 0u);
	cr_assert_eq(eng.attaches(), eng.detaches());
	cr_assert(!eng.staging_attached());
}

} // namespace

// ---- staging plan ----------------------------------------------------------

Test(staging_plan, halves_of_the_bound_rounded_down_to_pages)
{
	std::vector<GpuBuffer> bos{{0, 100 * MiB}};
	auto p = plan_staging(64 * MiB, bos);
	cr_assert(p.ok());
	cr_assert_eq(p->half_bytes, 32 * MiB);
	cr_assert_eq(p->total_bytes, 64 * MiB);

	p = plan_staging(1 * MiB + 123, bos);
	cr_assert(p.ok());
	cr_assert_eq(p->half_bytes % page(), 0u);
	cr_assert_leq(p->total_bytes, 1 * MiB + 123);
	cr_assert_eq(p->total_bytes, 2 * p->half_bytes);
}

Test(staging_plan, shrinks_to_the_data)
{
	std::vector<GpuBuffer> bos{{0, 5000}, {0, 1}};
	auto p = plan_staging(64 * MiB, bos);
	cr_assert(p.ok());
	cr_assert_eq(p->half_bytes, 2 * page());
}

Test(staging_plan, bound_below_two_pages_is_einval)
{
	std::vector<GpuBuffer> bos{{0, 4096}};
	auto p = plan_staging(2 * page() - 1, bos);
	cr_assert(!p.ok());
	cr_assert_eq(p.error().code(), EINVAL);
	cr_assert(plan_staging(2 * page(), bos).ok());
}

// ---- the staging bound of one GPU (per_gpu_staging_bound) ---------------------

// KFD_MAX_BUFFER_SIZE unset (0): the documented 64 MiB (README, man page)
// for each GPU, however many copy in parallel.
Test(staging_bound, unset_gives_each_gpu_64_mib)
{
	for (size_t gpus : {1, 2, 8}) {
		auto b = per_gpu_staging_bound(0, gpus);
		cr_assert_ok(b, "%zu GPUs", gpus);
		cr_assert_eq(*b, 64 * MiB, "%zu GPUs", gpus);
	}
}

// KFD_MAX_BUFFER_SIZE set: the whole process's bound, shared evenly.
Test(staging_bound, set_is_shared_by_the_gpus)
{
	auto one = per_gpu_staging_bound(64 * MiB, 1);
	cr_assert_ok(one);
	cr_assert_eq(*one, 64 * MiB);
	auto four = per_gpu_staging_bound(64 * MiB, 4);
	cr_assert_ok(four);
	cr_assert_eq(*four, 16 * MiB);
	auto small = per_gpu_staging_bound(1 * MiB, 8);
	cr_assert_ok(small);
	cr_assert_eq(*small, 128 * KiB);
}

Test(staging_bound, less_than_two_pages_per_gpu_is_einval)
{
	auto at = per_gpu_staging_bound(3 * 2 * page(), 3);
	cr_assert_ok(at);
	cr_assert_eq(*at, 2 * page());
	auto below = per_gpu_staging_bound(3 * 2 * page() - 1, 3);
	cr_assert(!below.ok());
	cr_assert_eq(below.error().code(), EINVAL);
	cr_assert(below.error().message().find("KFD_MAX_BUFFER_SIZE") != std::string::npos, "%s",
		  below.error().message().c_str());
}

// ---- round trips -------------------------------------------------------------

Test(transfer, round_trip_small_and_odd_sizes)
{
	round_trip({4 * KiB, 1, 4097, 12345, 3 * MiB + 17, 8 * KiB, 7}, 1 * MiB);
}

Test(transfer, round_trip_exactly_half_and_one_more)
{
	const uint64_t bound = 1 * MiB, half = bound / 2;
	round_trip({half}, bound);
	round_trip({half + 1}, bound);
	round_trip({half - 1, half, half + 1, 1}, bound);
}

Test(transfer, round_trip_tens_of_mib_with_default_bound)
{
	round_trip({32 * MiB, 32 * MiB + 1, 4 * KiB, 20 * MiB + 3}, kDefaultStagingBound);
}

Test(transfer, round_trip_pre_ai_family)
{
	// VI: packets of at most 0x1fffff bytes, count = bytes.
	round_trip({4 * MiB + 5, 0x1fffff, 0x200000, 33}, 8 * MiB, 130);
}

Test(transfer, round_trip_with_zero_sized_bo)
{
	round_trip({4096, 0, 4096}, 64 * KiB);
}

Test(transfer, bound_smaller_than_the_largest_bo)
{
	for (uint64_t bound : {2 * page(), 64 * KiB, 1 * MiB + 123, 7 * MiB})
		round_trip({9 * MiB + 11, 100, 2 * MiB}, bound);
}

Test(transfer, nothing_to_copy_allocates_nothing)
{
	FakeEngine eng;
	VectorSink sink;
	std::vector<GpuBuffer> none;
	auto r = transfer_to_file(eng, none, sink, 64 * MiB);
	cr_assert(r.ok());
	cr_assert_eq(r->bytes, 0u);
	cr_assert_eq(eng.attaches(), 0u);
	cr_assert_eq(sink.calls, 0u);
}

// ---- batching and overlap ----------------------------------------------------

Test(transfer, many_small_bos_share_submissions)
{
	FakeEngine eng(kAmdgpuFamilyAi, 4096);
	std::vector<uint64_t> sizes(1000, 4 * KiB);
	Bos src(eng, sizes, true);
	VectorSink sink(&eng);
	auto r = transfer_to_file(eng, src.bufs, sink, 8 * MiB);
	cr_assert(r.ok());
	// 4000 KiB fit one 4 MiB half: one submission, one file write.
	cr_assert_eq(r->submissions, 1u);
	cr_assert_eq(sink.calls, 1u);
	cr_assert(sink.data == src.concat());
	cr_assert_eq(eng.violations(), 0u);
}

Test(transfer, submissions_respect_the_engine_range_limit)
{
	FakeEngine eng(kAmdgpuFamilyAi, 100);
	std::vector<uint64_t> sizes(1000, 4 * KiB);
	Bos src(eng, sizes, true);
	VectorSink sink(&eng);
	auto r = transfer_to_file(eng, src.bufs, sink, 64 * MiB);
	cr_assert(r.ok());
	cr_assert_eq(r->submissions, 10u);
	cr_assert_eq(eng.max_ranges_seen(), 100u);
	cr_assert(sink.data == src.concat());

	Bos dst(eng, sizes, false);
	VectorSource source(sink.data, &eng);
	auto back = transfer_from_file(eng, dst.bufs, source, 64 * MiB);
	cr_assert(back.ok());
	cr_assert(dst.concat() == src.concat());
	cr_assert_eq(eng.violations(), 0u);
}

Test(transfer, dump_writes_while_the_next_chunk_copies)
{
	FakeEngine eng;
	Bos src(eng, {10 * MiB}, true);
	VectorSink sink(&eng);
	auto r = transfer_to_file(eng, src.bufs, sink, 2 * MiB); // 1 MiB halves: 10 chunks
	cr_assert(r.ok());
	cr_assert_eq(r->submissions, 10u);
	cr_assert_eq(sink.calls, 10u);
	// Every write but the last overlaps the next chunk's DMA.
	cr_assert_eq(sink.calls_during_dma, 9u);
	cr_assert(sink.data == src.concat());
}

Test(transfer, restore_reads_while_the_previous_chunk_copies)
{
	FakeEngine eng;
	Bos src(eng, {10 * MiB}, true);
	const auto image = src.concat();
	Bos dst(eng, {10 * MiB}, false);
	VectorSource source(image, &eng);
	auto r = transfer_from_file(eng, dst.bufs, source, 2 * MiB);
	cr_assert(r.ok());
	cr_assert_eq(source.calls, 10u);
	// Every read but the first overlaps the previous chunk's DMA.
	cr_assert_eq(source.calls_during_dma, 9u);
	cr_assert(dst.concat() == image);
}

// ---- errors ------------------------------------------------------------------

Test(transfer_errors, submit_failure_is_returned)
{
	for (Direction dir : {Direction::GpuToFile, Direction::FileToGpu}) {
		FakeEngine eng;
		eng.fail_submit_at = 2;
		Bos bos(eng, {5 * MiB}, true);
		const auto image = bos.concat();
		VectorSink sink(&eng);
		VectorSource source(image, &eng);
		auto r = dir == Direction::GpuToFile ? transfer_to_file(eng, bos.bufs, sink, 2 * MiB)
						     : transfer_from_file(eng, bos.bufs, source, 2 * MiB);
		cr_assert(!r.ok());
		cr_assert_eq(r.error().code(), ESRCH, "%s", r.error().message().c_str());
		cr_assert_eq(eng.violations(), 0u);
		cr_assert(!eng.staging_attached());
		cr_assert(!eng.outstanding());
	}
}

Test(transfer_errors, job_failure_is_returned)
{
	for (Direction dir : {Direction::GpuToFile, Direction::FileToGpu}) {
		FakeEngine eng;
		eng.fail_job_at = 3;
		Bos bos(eng, {5 * MiB}, true);
		const auto image = bos.concat();
		VectorSink sink(&eng);
		VectorSource source(image, &eng);
		auto r = dir == Direction::GpuToFile ? transfer_to_file(eng, bos.bufs, sink, 2 * MiB)
						     : transfer_from_file(eng, bos.bufs, source, 2 * MiB);
		cr_assert(!r.ok());
		cr_assert_eq(r.error().code(), EIO, "%s", r.error().message().c_str());
		cr_assert_eq(eng.submits(), 3u, "the pipeline stops at the failed job");
		cr_assert_eq(eng.violations(), 0u);
		cr_assert(!eng.staging_attached());
	}
}

Test(transfer_errors, sink_failure_drains_the_dma_and_wins)
{
	FakeEngine eng;
	// The write of chunk 2 fails while chunk 3 is in flight; chunk 3's
	// job fails too, but the first error is the one returned.
	eng.fail_job_at = 3;
	Bos bos(eng, {5 * MiB}, true);
	VectorSink sink(&eng);
	sink.fail_at = 2;
	auto r = transfer_to_file(eng, bos.bufs, sink, 2 * MiB);
	cr_assert(!r.ok());
	cr_assert_eq(r.error().code(), ENOSPC, "%s", r.error().message().c_str());
	cr_assert_eq(sink.calls, 2u);
	cr_assert_eq(eng.submits(), 3u);
	cr_assert_eq(eng.violations(), 0u, "staging detached under a running DMA");
	cr_assert(!eng.outstanding());
	cr_assert(!eng.staging_attached());
}

Test(transfer_errors, source_failure_drains_the_dma_and_wins)
{
	FakeEngine eng;
	eng.fail_job_at = 1;
	Bos bos(eng, {5 * MiB}, true);
	const auto image = bos.concat();
	VectorSource source(image, &eng);
	source.fail_at = 2; // chunk 2's read, while chunk 1 copies
	auto r = transfer_from_file(eng, bos.bufs, source, 2 * MiB);
	cr_assert(!r.ok());
	cr_assert_eq(r.error().code(), EIO, "%s", r.error().message().c_str());
	cr_assert(r.error().message().find("injected read") != std::string::npos);
	cr_assert_eq(eng.submits(), 1u);
	cr_assert_eq(eng.violations(), 0u);
	cr_assert(!eng.staging_attached());
}

Test(transfer_errors, short_image_fails_before_any_dma)
{
	FakeEngine eng;
	Bos bos(eng, {8 * KiB, 8 * KiB}, false);
	std::vector<uint8_t> image(16 * KiB - 1);
	VectorSource source(image, &eng);
	auto r = transfer_from_file(eng, bos.bufs, source, 1 * MiB);
	cr_assert(!r.ok());
	cr_assert_eq(r.error().code(), EINVAL);
	cr_assert_eq(eng.submits(), 0u);
	cr_assert_eq(eng.attaches(), 0u);
}

Test(transfer_errors, bound_too_small)
{
	FakeEngine eng;
	Bos bos(eng, {8 * KiB}, false);
	VectorSink sink;
	auto r = transfer_to_file(eng, bos.bufs, sink, page());
	cr_assert(!r.ok());
	cr_assert_eq(r.error().code(), EINVAL);
	cr_assert_eq(eng.attaches(), 0u);
}

// ---- buffers arriving while the transfer runs (BufferFeed) -------------------

namespace {

// Hands out buffers one by one, recording how many the transfer had asked
// for when each submission was made; fails at `fail_at` if set.
class RecordingFeed final : public BufferFeed {
public:
	RecordingFeed(const std::vector<GpuBuffer> &bufs, size_t fail_at = SIZE_MAX)
		: bufs_(bufs), fail_at_(fail_at)
	{
	}
	size_t count() const override { return bufs_.size(); }
	uint64_t size(size_t i) const override { return bufs_[i].size; }
	Result<GpuBuffer> get(size_t i) override
	{
		cr_assert_eq(i, fetched, "buffers must be asked for in order, once each");
		if (i == fail_at_)
			return make_error(ENOMEM, "import %zu failed", i);
		fetched++;
		return bufs_[i];
	}
	size_t fetched = 0;

private:
	const std::vector<GpuBuffer> &bufs_;
	size_t fail_at_;
};

} // namespace

// The first chunks are copied and written before the last buffers are asked
// for: a feed that imports dma-bufs overlaps the copy.
Test(transfer_feed, streams_buffers_into_the_pipeline)
{
	FakeEngine eng(kAmdgpuFamilyAi, 4096);
	std::vector<uint64_t> sizes(64, 64 * KiB); // 4 MiB, 8 chunks of 512 KiB
	Bos src(eng, sizes, true);
	RecordingFeed feed(src.bufs);
	VectorSink sink(&eng);
	size_t fetched_at_first_write = 0;
	sink.on_write = [&] {
		if (!fetched_at_first_write)
			fetched_at_first_write = feed.fetched;
	};
	auto r = transfer_to_file(eng, feed, sink, 1 * MiB);
	cr_assert_ok(r);
	cr_assert(sink.data == src.concat());
	cr_assert_eq(feed.fetched, sizes.size());
	cr_expect_lt(fetched_at_first_write, sizes.size(),
		     "the first chunk was written only after every buffer was fetched (%zu of %zu)",
		     fetched_at_first_write, sizes.size());
	cr_expect_eq(eng.violations(), 0u);

	// Restore through a feed too.
	Bos dst(eng, sizes, false);
	RecordingFeed back(dst.bufs);
	VectorSource source(sink.data, &eng);
	auto rr = transfer_from_file(eng, back, source, 1 * MiB);
	cr_assert_ok(rr);
	for (size_t i = 0; i < sizes.size(); i++)
		cr_assert(*dst.mem[i] == *src.mem[i], "BO %zu differs", i);
}

// A buffer the feed cannot provide stops both directions with its error,
// after the DMA in flight has drained.
Test(transfer_feed, feed_failure_is_returned)
{
	for (bool dump : {true, false}) {
		FakeEngine eng(kAmdgpuFamilyAi, 4096);
		std::vector<uint64_t> sizes(32, 64 * KiB);
		Bos bos(eng, sizes, true);
		RecordingFeed feed(bos.bufs, 20);
		Result<TransferStats> r = TransferStats{};
		if (dump) {
			VectorSink sink(&eng);
			r = transfer_to_file(eng, feed, sink, 256 * KiB);
		} else {
			std::vector<uint8_t> image(32 * 64 * KiB);
			VectorSource source(image, &eng);
			r = transfer_from_file(eng, feed, source, 256 * KiB);
		}
		cr_assert_not(r.ok());
		cr_expect_eq(r.error().code(), ENOMEM);
		cr_expect(r.error().message().find("import 20 failed") != std::string::npos, "%s",
			  r.error().message().c_str());
		cr_expect_eq(eng.attaches(), eng.detaches(), "staging detached");
		cr_expect_not(eng.staging_attached());
		cr_expect_eq(eng.violations(), 0u);
	}
}
