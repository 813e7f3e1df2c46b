// SPDX-License-Identifier: GPL-2.0-only
#include "copy/gpu_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "base/file_io.h"
#include "base/log.h"
#include "copy/sdma_engine.h"
#include "image/pages_file.h"
#include "image/pages_series.h"

namespace amdcr {
namespace {

uint64_t job_bytes(const GpuCopyJob &job)
{
	uint64_t n = 0;
	for (const auto &b : job.bos)
		n += b.size;
	return n;
}

// What one job did, besides its stats.
struct JobOut {
	TransferStats stats;
	std::vector<BoChecksum> checksums; // dump
	uint64_t verified_bytes = 0;	   // restore
};

// A GPU without buffers: an empty pages file at dump, nothing at restore.
Result<JobOut> run_empty(Direction dir, const ImageDir &images, const GpuCopyJob &job)
{
	if (dir == Direction::GpuToFile) {
		auto pages = PagesWriter::create(images, job.pages_file, 0);
		if (!pages)
			return std::move(pages).error();
		if (auto st = pages->commit(); !st)
			return std::move(st).error();
	}
	return JobOut{};
}

// The transfer with the integrity layer around the file side: checksums
// computed on the way out (dump), checked on the way in (restore).
Result<JobOut> transfer_checked(DmaEngine &engine, BufferFeed &bufs, const GpuCopyJob &job,
				ByteSink *sink, ByteSource *source, uint64_t bound)
{
	JobOut out;
	if (sink && !job.checksums) {
		auto stats = transfer_to_file(engine, bufs, *sink, bound);
		if (!stats)
			return std::move(stats).error();
		out.stats = *stats;
		return out;
	}
	if (sink) {
		std::vector<uint64_t> sizes;
		for (const auto &b : job.bos)
			sizes.push_back(b.size);
		ChecksummingSink sums(*sink, sizes);
		auto stats = transfer_to_file(engine, bufs, sums, bound);
		if (!stats)
			return std::move(stats).error();
		auto c = sums.take();
		if (!c)
			return std::move(c).error();
		out.stats = *stats;
		out.checksums = std::move(*c);
		return out;
	}
	std::vector<VerifyingSource::Bo> bos;
	uint64_t at = 0; // in the stream
	for (size_t i = 0; i < job.bos.size(); i++) {
		const GpuCopyBo &b = job.bos[i];
		bos.push_back({b.size, b.expect, b.label.empty() ? strprintf("BO %zu", i) : b.label,
			       job.bo_files.empty() ? 0 : at});
		at += b.size;
	}
	VerifyingSource checked(*source, std::move(bos));
	auto stats = transfer_from_file(engine, bufs, checked, bound);
	if (!stats)
		return std::move(stats).error();
	out.stats = *stats;
	out.verified_bytes = checked.verified_bytes();
	return out;
}

// A job whose BOs each have their own pages file: one transfer over the
// series of files, as if they were one.
Result<JobOut> run_series(Direction dir, const ImageDir &images, const GpuCopyJob &job,
			  DmaEngine &engine, BufferFeed &bufs, uint64_t bound)
{
	if (job.bo_files.size() != job.bos.size())
		return make_error(EINVAL, "%zu pages files for %zu BOs", job.bo_files.size(), job.bos.size());
	std::vector<PagesPart> parts;
	for (size_t i = 0; i < job.bos.size(); i++)
		parts.push_back({job.bo_files[i], job.bos[i].size});
	if (dir == Direction::GpuToFile) {
		PagesSeriesWriter pages(images, std::move(parts));
		auto out = transfer_checked(engine, bufs, job, &pages, nullptr, bound);
		if (!out)
			return out;
		if (auto st = pages.finish(); !st)
			return std::move(st).error();
		return out;
	}
	PagesSeriesReader pages(images, std::move(parts));
	return transfer_checked(engine, bufs, job, nullptr, &pages, bound);
}

Result<JobOut> run_one(Direction dir, const ImageDir &images, const GpuCopyJob &job, uint64_t bound)
{
	if (job.bos.empty())
		return run_empty(dir, images, job);
	auto render = open_at(AT_FDCWD, job.render_path, O_RDWR);
	if (!render)
		return std::move(render).error();
	auto engine = SdmaEngine::create(render->get());
	if (!engine)
		return std::move(engine).error().context(job.render_path);

	// The dma-bufs are imported on worker threads while the first chunks
	// already copy (an import is a kernel round trip per BO).
	std::vector<SdmaEngine::DmabufSpec> specs;
	specs.reserve(job.bos.size());
	for (const auto &b : job.bos)
		specs.push_back({b.dmabuf_fd, b.size});
	ImportFeed bufs(**engine, specs);

	if (!job.bo_files.empty())
		return run_series(dir, images, job, **engine, bufs, bound);
	const uint64_t bytes = job_bytes(job);
	if (dir == Direction::GpuToFile) {
		auto pages = PagesWriter::create(images, job.pages_file, bytes);
		if (!pages)
			return std::move(pages).error();
		auto out = transfer_checked(**engine, bufs, job, &*pages, nullptr, bound);
		if (!out)
			return std::move(out).error().context(job.pages_file);
		if (auto st = pages->commit(); !st)
			return std::move(st).error();
		return out;
	}

	auto pages = PagesReader::open(images, job.pages_file);
	if (!pages)
		return std::move(pages).error();
	if (pages->payload_size() != bytes)
		return make_error(EINVAL, "%s: holds %llu bytes, the BO table needs %llu",
				  job.pages_file.c_str(),
				  static_cast<unsigned long long>(pages->payload_size()),
				  static_cast<unsigned long long>(bytes));
	auto out = transfer_checked(**engine, bufs, job, nullptr, &*pages, bound);
	if (!out)
		return std::move(out).error().context(job.pages_file);
	return out;
}

} // namespace

Result<uint64_t> per_gpu_staging_bound(uint64_t max_buffer_size, size_t gpus)
{
	if (max_buffer_size == 0)
		return kDefaultStagingBound;
	const uint64_t page = page_size();
	const uint64_t share = max_buffer_size / std::max<size_t>(gpus, 1);
	if (share < 2 * page)
		return make_error(EINVAL,
				  "KFD_MAX_BUFFER_SIZE=%llu leaves %llu bytes to each of %zu GPUs; each "
				  "needs at least %llu (raise KFD_MAX_BUFFER_SIZE)",
				  static_cast<unsigned long long>(max_buffer_size),
				  static_cast<unsigned long long>(share), gpus,
				  static_cast<unsigned long long>(2 * page));
	return share;
}

Result<std::vector<GpuCopyResult>> run_gpu_copies(Direction dir, const ImageDir &images,
						  const std::vector<GpuCopyJob> &jobs,
						  uint64_t max_buffer_size)
{
	const size_t with_buffers = static_cast<size_t>(
		std::count_if(jobs.begin(), jobs.end(), [](const GpuCopyJob &j) { return !j.bos.empty(); }));
	auto bound = per_gpu_staging_bound(max_buffer_size, with_buffers);
	if (!bound)
		return std::move(bound).error();
	const uint64_t staging_bound = *bound;
	std::vector<std::optional<Result<JobOut>>> results(jobs.size());
	std::vector<double> seconds(jobs.size());
	{
		std::vector<std::jthread> workers;
		workers.reserve(jobs.size());
		for (size_t i = 0; i < jobs.size(); i++)
			workers.emplace_back([&, i] {
				const auto t0 = std::chrono::steady_clock::now();
				results[i].emplace(run_one(dir, images, jobs[i], staging_bound));
				seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
			});
	} // joins

	std::vector<GpuCopyResult> out;
	for (size_t i = 0; i < jobs.size(); i++) {
		auto &r = *results[i];
		if (!r) {
			// A failed dump leaves no GPU's pages file behind: the
			// jobs that did finish are taken back too.
			if (dir == Direction::GpuToFile)
				remove_job_files(images, jobs);
			return std::move(r).error().context(
				strprintf("gpu 0x%04x", jobs[i].image_gpu_id));
		}
		out.push_back({jobs[i].image_gpu_id, r->stats, seconds[i], std::move(r->checksums),
			       r->verified_bytes});
	}
	for (const auto &r : out)
		log_gpu(LogLevel::Info, r.image_gpu_id,
			"%s %llu BOs, %llu bytes in %.3f s (%.2f GB/s; DMA and file I/O %.3f s), "
			"peak staging %llu bytes, %llu submissions%s",
			dir == Direction::GpuToFile ? "dumped" : "restored",
			static_cast<unsigned long long>(r.stats.bos),
			static_cast<unsigned long long>(r.stats.bytes), r.job_seconds,
			r.job_seconds > 0 ? static_cast<double>(r.stats.bytes) / r.job_seconds / 1e9 : 0.0,
			r.stats.seconds, static_cast<unsigned long long>(r.stats.peak_staging_bytes),
			static_cast<unsigned long long>(r.stats.submissions),
			dir == Direction::GpuToFile
				? (r.checksums.empty() ? "" : ", checksummed")
				: strprintf(", checksums matched for %llu bytes",
					    static_cast<unsigned long long>(r.verified_bytes))
					  .c_str());
	return out;
}

void remove_job_files(const ImageDir &images, const std::vector<GpuCopyJob> &jobs)
{
	for (const auto &j : jobs) {
		if (!j.pages_file.empty())
			(void)images.remove(j.pages_file);
		for (const auto &f : j.bo_files)
			(void)images.remove(f);
	}
}

} // namespace amdcr
