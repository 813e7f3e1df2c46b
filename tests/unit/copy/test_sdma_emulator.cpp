// SPDX-License-Identifier: GPL-2.0-only
//
// Smoke test of SdmaEngine + the transfer through the real libdrm_amdgpu,
// against the emulated GPU (run under `kfd-emu --machine 2xMI210`; skips
// when no render node is present). BOs are allocated and filled through
// libdrm, exported as dma-bufs, imported by the engine (as the plugin does
// with KFD's dma-bufs), dumped to memory and restored into fresh BOs.
#include <criterion/criterion.h>

#include <amdgpu_drm.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "../common/assert_ok.h"
#include "../common/captured_stderr.h"
#include "base/unique_fd.h"
#include "copy/gpu_copy.h"
#include "copy/sdma_engine.h"
#include "copy/transfer.h"
#include "device/amdgpu.h"
#include "fakes.h"
#include "testcommon/pattern.h"

using namespace amdcr;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;

UniqueFd open_render(int minor)
{
	const std::string path = "/dev/dri/renderD" + std::to_string(minor);
	return UniqueFd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
}

struct TestBo {
	Bo bo;
	UniqueFd dmabuf;
	uint64_t copy_bytes;
};

// Allocates, fills (pattern from `seed`, or zeros) and exports one BO.
TestBo make_bo(const Device &dev, uint64_t alloc, uint64_t copy, uint32_t domain, uint32_t seed)
{
	auto bo = Bo::alloc(dev, alloc, domain, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED);
	cr_assert_ok(bo);
	{
		auto cpu = CpuMapping::map(*bo);
		cr_assert_ok(cpu);
		if (seed)
			testcommon::fill_pattern(cpu->ptr(), alloc, seed);
		else
			std::memset(cpu->ptr(), 0, alloc);
	}
	auto fd = bo->export_dmabuf();
	cr_assert_ok(fd);
	return TestBo{std::move(*bo), std::move(*fd), copy};
}

std::vector<uint8_t> read_bo(const Bo &bo, uint64_t bytes)
{
	auto cpu = CpuMapping::map(bo);
	cr_assert(cpu.ok());
	const auto *p = static_cast<const uint8_t *>(cpu->ptr());
	return std::vector<uint8_t>(p, p + bytes);
}

void round_trip_on(int minor)
{
	UniqueFd render = open_render(minor);
	if (!render)
		cr_skip_test("no /dev/dri/renderD%d (run under kfd-emu)", minor);
	auto dev = Device::initialize(render.get());
	cr_assert_ok(dev);

	struct Spec {
		uint64_t alloc, copy;
		uint32_t domain;
	};
	std::vector<Spec> specs{
		{4 * KiB, 4 * KiB, AMDGPU_GEM_DOMAIN_VRAM},   {8 * KiB, 5000, AMDGPU_GEM_DOMAIN_GTT},
		{3 * MiB, 3 * MiB, AMDGPU_GEM_DOMAIN_VRAM},   {64 * KiB, 64 * KiB, AMDGPU_GEM_DOMAIN_VRAM},
		{9 * MiB, 9 * MiB - 3, AMDGPU_GEM_DOMAIN_VRAM},
	};
	for (int i = 0; i < 40; ++i)
		specs.push_back({4 * KiB, 4 * KiB, AMDGPU_GEM_DOMAIN_GTT});

	std::vector<TestBo> src, dst;
	uint32_t seed = 1;
	for (const auto &s : specs) {
		src.push_back(make_bo(*dev, s.alloc, s.copy, s.domain, seed++));
		dst.push_back(make_bo(*dev, s.alloc, s.copy, s.domain, 0));
	}

	SdmaEngineOptions opts;
	opts.ib_packets = 16; // several submissions for the small BOs too
	auto eng = SdmaEngine::create(render.get(), opts);
	cr_assert_ok(eng);
	cr_assert_geq((*eng)->family_id(), kAmdgpuFamilyAi);

	// Dump.
	std::vector<GpuBuffer> bufs;
	for (const auto &b : src) {
		auto g = (*eng)->import_dmabuf(b.dmabuf.get(), b.copy_bytes);
		cr_assert_ok(g);
		bufs.push_back(*g);
	}
	test::VectorSink sink;
	const uint64_t bound = 1 * MiB; // 512 KiB halves: many chunks
	auto dumped = transfer_to_file(**eng, bufs, sink, bound);
	cr_assert_ok(dumped);
	cr_assert_leq(dumped->peak_staging_bytes, bound);
	std::vector<uint8_t> expect;
	for (const auto &b : src) {
		auto v = read_bo(b.bo, b.copy_bytes);
		expect.insert(expect.end(), v.begin(), v.end());
	}
	cr_assert_eq(sink.data.size(), expect.size());
	cr_assert(sink.data == expect, "dumped bytes differ from the BOs");
	(*eng)->release_buffers();

	// Restore into the zeroed BOs.
	bufs.clear();
	for (const auto &b : dst) {
		auto g = (*eng)->import_dmabuf(b.dmabuf.get(), b.copy_bytes);
		cr_assert_ok(g);
		bufs.push_back(*g);
	}
	test::VectorSource source(sink.data);
	auto restored = transfer_from_file(**eng, bufs, source, bound);
	cr_assert_ok(restored);
	(*eng)->release_buffers();
	for (size_t i = 0; i < src.size(); ++i) {
		const auto want = read_bo(src[i].bo, src[i].copy_bytes);
		const auto got = read_bo(dst[i].bo, dst[i].bo.size());
		cr_assert(std::equal(want.begin(), want.end(), got.begin()), "BO %zu differs", i);
		// Nothing written past the copied range (SDMA count encoding).
		for (uint64_t j = src[i].copy_bytes; j < got.size(); ++j)
			cr_assert_eq(got[j], 0, "BO %zu: byte %llu past the copy was written", i,
				     (unsigned long long)j);
	}
}

} // namespace

Test(sdma_emulator, round_trip_gpu0) { round_trip_on(128); }
Test(sdma_emulator, round_trip_gpu1) { round_trip_on(129); }

Test(sdma_emulator, import_larger_than_dmabuf_is_einval)
{
	UniqueFd render = open_render(128);
	if (!render)
		cr_skip_test("no render node (run under kfd-emu)");
	auto dev = Device::initialize(render.get());
	cr_assert(dev.ok());
	auto b = make_bo(*dev, 4 * KiB, 4 * KiB, AMDGPU_GEM_DOMAIN_VRAM, 3);
	auto eng = SdmaEngine::create(render.get());
	cr_assert(eng.ok());
	auto g = (*eng)->import_dmabuf(b.dmabuf.get(), 8 * KiB);
	cr_assert(!g.ok());
	cr_assert_eq(g.error().code(), EINVAL);
	cr_assert(g.error().message().find("dma-buf fd") != std::string::npos);
}

// ---- faults injected by the emulator (run by their own CTest entries) -------

namespace {

// AMDCR_TEST_SDMA_FAULT names the fault kfd-emu was started with:
// "fail" (sdma:nth=3:errno=EIO) or "hang" (sdma:nth=2:hang).
const char *sdma_fault() { return std::getenv("AMDCR_TEST_SDMA_FAULT"); }

Result<TransferStats> dump_under_fault(uint64_t fence_timeout_ns, test::VectorSink &sink)
{
	UniqueFd render = open_render(128);
	cr_assert(render.valid());
	auto dev = Device::initialize(render.get());
	cr_assert(dev.ok());
	std::vector<TestBo> bos;
	bos.push_back(make_bo(*dev, 4 * MiB, 4 * MiB, AMDGPU_GEM_DOMAIN_VRAM, 5));
	SdmaEngineOptions opts;
	opts.fence_timeout_ns = fence_timeout_ns;
	auto eng = SdmaEngine::create(render.get(), opts);
	cr_assert(eng.ok());
	auto g = (*eng)->import_dmabuf(bos[0].dmabuf.get());
	cr_assert(g.ok());
	std::vector<GpuBuffer> bufs{*g};
	return transfer_to_file(**eng, bufs, sink, 1 * MiB); // 8 chunks of 512 KiB
}

} // namespace

Test(sdma_fault, failed_job_stops_the_dump_with_its_error)
{
	if (!sdma_fault() || std::string(sdma_fault()) != "fail")
		cr_skip_test("needs kfd-emu --fault sdma:nth=3:errno=EIO");
	test::VectorSink sink;
	auto r = dump_under_fault(AMDGPU_TIMEOUT_INFINITE, sink);
	cr_assert(!r.ok());
	cr_assert_eq(r.error().code(), EIO, "%s", r.error().message().c_str());
	cr_assert(r.error().message().find("SDMA") != std::string::npos, "%s",
		  r.error().message().c_str());
	// Chunks 1 and 2 were written (2 while 3 was copying), nothing after.
	cr_assert_eq(sink.data.size(), 1 * MiB);
}

Test(sdma_fault, hung_job_times_out)
{
	if (!sdma_fault() || std::string(sdma_fault()) != "hang")
		cr_skip_test("needs kfd-emu --fault sdma:nth=2:hang");
	test::VectorSink sink;
	auto r = dump_under_fault(200ull * 1000 * 1000, sink);
	cr_assert(!r.ok());
	cr_assert_eq(r.error().code(), ETIMEDOUT, "%s", r.error().message().c_str());
	cr_assert_eq(sink.data.size(), 512 * KiB);
}

// ---- run_gpu_copies on a throttled engine (its own CTest entry) -------------

namespace {

// AMDCR_TEST_SLOW_SDMA: kfd-emu runs with --sdma-gbps 0.01 (10 MB/s), so
// 8 MiB take about 0.8 s.
bool slow_sdma() { return std::getenv("AMDCR_TEST_SLOW_SDMA") != nullptr; }

struct Dumped {
	Result<std::vector<GpuCopyResult>> result;
	std::string log;
};

// Dumps two 4 MiB BOs of renderD128 into a temporary image directory.
Dumped dump_two_bos(CopySettings settings)
{
	UniqueFd render = open_render(128);
	cr_assert(render.valid());
	auto dev = Device::initialize(render.get());
	cr_assert_ok(dev);
	std::vector<TestBo> bos;
	bos.push_back(make_bo(*dev, 4 * MiB, 4 * MiB, AMDGPU_GEM_DOMAIN_VRAM, 3));
	bos.push_back(make_bo(*dev, 4 * MiB, 4 * MiB, AMDGPU_GEM_DOMAIN_GTT, 4));
	char tmpl[] = "/tmp/amdcr-gpu-copy.XXXXXX";
	cr_assert_not_null(::mkdtemp(tmpl));
	auto images = ImageDir::open(tmpl);
	cr_assert_ok(images);
	GpuCopyJob job;
	job.image_gpu_id = 0x1234;
	job.render_path = "/dev/dri/renderD128";
	job.pages_file = "amdgpu-pages-1-1234.img";
	for (const auto &b : bos)
		job.bos.push_back({b.dmabuf.get(), b.copy_bytes});
	Dumped out{run_gpu_copies(Direction::GpuToFile, *images, {job}, settings), ""};
	out.log = test::captured_stderr();
	(void)images->remove(job.pages_file);
	::rmdir(tmpl);
	return out;
}

} // namespace

Test(gpu_copy, progress_lines_while_a_long_copy_runs, .init = test::redirect_stderr)
{
	if (!slow_sdma())
		cr_skip_test("needs kfd-emu --sdma-gbps 0.01 and AMDCR_TEST_SLOW_SDMA");
	CopyTotals totals;
	CopySettings settings;
	settings.progress_interval_s = 0.2;
	settings.totals = &totals;
	Dumped d = dump_two_bos(settings);
	cr_assert_ok(d.result);
	const std::regex line(R"(amdgpu_plugin: dump: ([0-9.]+) of 0\.01 GiB of GPU memory copied \((\d+)%\) on 1 GPU in \d+ s, [0-9.]+ GB/s)");
	std::vector<int> percents;
	for (auto it = std::sregex_iterator(d.log.begin(), d.log.end(), line); it != std::sregex_iterator(); ++it)
		percents.push_back(std::stoi((*it)[2]));
	// About 0.8 s of copying: a line every 0.2 s, the first after 0.2 s.
	cr_assert_geq(percents.size(), 2u, "%s", d.log.c_str());
	cr_assert_leq(percents.size(), 8u, "%s", d.log.c_str());
	for (size_t i = 1; i < percents.size(); i++)
		cr_assert_geq(percents[i], percents[i - 1], "%s", d.log.c_str());
	cr_assert_leq(percents.back(), 100);
	// The run's totals, for the dump's summary line.
	cr_assert_eq(totals.gpus(), 1u);
	cr_assert_eq(totals.copied_bos.load(), 2u);
	cr_assert_eq(totals.bytes.load(), 8 * MiB);
	cr_assert_gt(totals.peak_staging.load(), 0u);
	cr_assert_leq(totals.peak_staging.load(), kDefaultStagingBound);
	cr_assert_gt(totals.seconds(), 0.4);
}

Test(gpu_copy, no_progress_line_when_switched_off, .init = test::redirect_stderr)
{
	if (!slow_sdma())
		cr_skip_test("needs kfd-emu --sdma-gbps 0.01 and AMDCR_TEST_SLOW_SDMA");
	CopySettings settings;
	settings.progress_interval_s = 0;
	Dumped d = dump_two_bos(settings);
	cr_assert_ok(d.result);
	cr_assert(d.log.find("GPU memory copied") == std::string::npos, "%s", d.log.c_str());
}
