// SPDX-License-Identifier: GPL-2.0-only
//
// The integrity layer (image/content_checksum.h) around the pipelined
// transfer, as run_gpu_copies uses it: checksums computed on the way to the
// file whatever the staging halves cut, checked on the way back, and a
// damaged byte stopping the restore with its BO and range, staging freed.
#include <criterion/criterion.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../common/assert_ok.h"
#include "copy/transfer.h"
#include "fakes.h"
#include "image/content_checksum.h"
#include "image/from_parent.h"

using namespace amdcr;
using namespace amdcr::test;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;

struct Buffers {
	std::vector<std::unique_ptr<std::vector<uint8_t>>> mem;
	std::vector<GpuBuffer> bufs;

	Buffers(FakeEngine &eng, const std::vector<uint64_t> &sizes, bool random)
	{
		uint32_t x = 12345;
		for (uint64_t s : sizes) {
			mem.push_back(std::make_unique<std::vector<uint8_t>>(s));
			if (random)
				for (auto &b : *mem.back()) {
					x = x * 1103515245u + 12345u;
					b = static_cast<uint8_t>(x >> 16);
				}
			bufs.push_back(eng.add_buffer(*mem.back()));
		}
	}
};

struct Dumped {
	std::vector<uint8_t> file;
	std::vector<BoChecksum> sums;
};

Dumped dump(FakeEngine &eng, const Buffers &src, const std::vector<uint64_t> &sizes, uint64_t bound)
{
	VectorSink file(&eng);
	std::vector<DeltaSink::Bo> bos;
	for (uint64_t s : sizes)
		bos.push_back({s, nullptr}); // a complete dump: every byte written
	DeltaSink sink(file, std::move(bos));
	cr_assert_ok(transfer_to_file(eng, src.bufs, sink, bound));
	auto sums = sink.take();
	cr_assert_ok(sums);
	return {file.data, std::move(sums->checksums)};
}

Status restore(FakeEngine &eng, Buffers &dst, const std::vector<uint64_t> &sizes, const Dumped &d,
	       uint64_t bound)
{
	VectorSource file(d.file, &eng);
	std::vector<VerifyingSource::Bo> bos;
	for (size_t i = 0; i < sizes.size(); i++)
		bos.push_back({sizes[i], &d.sums[i], "BO " + std::to_string(i)});
	VerifyingSource src(file, bos);
	auto st = transfer_from_file(eng, dst.bufs, src, bound);
	if (st)
		cr_assert_eq(src.verified_bytes(), d.file.size());
	if (!st)
		return std::move(st).error();
	return ok_status();
}

} // namespace

Test(transfer_integrity, checksums_do_not_depend_on_the_staging_bound)
{
	// BOs that straddle halves and chunks: odd page counts, one above 1 MiB.
	const std::vector<uint64_t> sizes = {4 * KiB, MiB + 12 * KiB, 3 * MiB + 4 * KiB, 8 * KiB};
	std::vector<BoChecksum> first;
	for (uint64_t bound : {64 * MiB, 1 * MiB, 40 * KiB, 8 * KiB}) {
		FakeEngine eng;
		Buffers src(eng, sizes, true);
		Dumped d = dump(eng, src, sizes, bound);
		if (first.empty())
			first = d.sums;
		cr_assert(d.sums == first, "bound %llu changed the checksums", (unsigned long long)bound);
		Buffers dst(eng, sizes, false);
		cr_assert_ok(restore(eng, dst, sizes, d, bound), "bound %llu", (unsigned long long)bound);
		for (size_t i = 0; i < sizes.size(); i++)
			cr_assert(*dst.mem[i] == *src.mem[i]);
		cr_assert_eq(eng.violations(), 0u);
	}
	cr_assert_eq(first[2].chunks.size(), 4u);
}

Test(transfer_integrity, a_damaged_byte_stops_the_restore_with_its_bo_and_range)
{
	const std::vector<uint64_t> sizes = {8 * KiB, 2 * MiB + 4 * KiB};
	FakeEngine eng;
	Buffers src(eng, sizes, true);
	Dumped d = dump(eng, src, sizes, 256 * KiB);
	d.file[8 * KiB + MiB + 77] ^= 0x40; // BO 1, its second chunk
	Buffers dst(eng, sizes, false);
	Status st = restore(eng, dst, sizes, d, 256 * KiB);
	cr_assert_not(st.ok());
	cr_assert_eq(st.error().code(), EBADMSG);
	const std::string msg = st.error().message();
	cr_assert(msg.find("BO 1: bytes 0x100000..0x1fffff") != std::string::npos, "%s", msg.c_str());
	cr_assert(msg.find("payload offset 0x102000") != std::string::npos, "%s", msg.c_str());
	// The pipeline stopped cleanly: staging detached, nothing outstanding.
	cr_assert(!eng.staging_attached());
	cr_assert(!eng.outstanding());
	cr_assert_eq(eng.attaches(), eng.detaches());
}
