// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/gpu_copy.h"

#include <fcntl.h>

#include <optional>
#include <thread>

#include "base/file_io.h"
#include "base/log.h"
#include "copy/sdma_engine.h"

namespace amdcr {
namespace {

// The pages file being written, as the transfer's sink.
class AtomicFileSink final : public ByteSink {
public:
	explicit AtomicFileSink(AtomicFile &f) : f_(f) {}
	Status write(const void *buf, size_t len) override { return f_.write(buf, len); }

private:
	AtomicFile &f_;
};

// A pages file read sequentially, as the transfer's source.
class FileSource final : public ByteSource {
public:
	FileSource(UniqueFd fd, uint64_t size, std::string name)
		: fd_(std::move(fd)), size_(size), name_(std::move(name))
	{
	}
	Status read(void *buf, size_t len) override
	{
		if (len > size_ - pos_)
			return make_error(EIO, "%s: truncated: %zu bytes wanted at offset %llu, %llu left",
					  name_.c_str(), len, static_cast<unsigned long long>(pos_),
					  static_cast<unsigned long long>(size_ - pos_));
		auto n = pread_full(fd_.get(), buf, len, pos_);
		if (!n)
			return std::move(n).error().context(name_);
		if (*n != len)
			return make_error(EIO, "%s: truncated at offset %llu", name_.c_str(),
					  static_cast<unsigned long long>(pos_ + *n));
		pos_ += len;
		return ok_status();
	}
	Status skip(uint64_t len) override
	{
		if (len > size_ - pos_)
			return make_error(EIO, "%s: cannot skip %llu bytes at offset %llu", name_.c_str(),
					  static_cast<unsigned long long>(len),
					  static_cast<unsigned long long>(pos_));
		pos_ += len;
		return ok_status();
	}
	uint64_t remaining() const override { return size_ - pos_; }

private:
	UniqueFd fd_;
	uint64_t size_ = 0;
	uint64_t pos_ = 0;
	std::string name_;
};

uint64_t job_bytes(const GpuCopyJob &job)
{
	uint64_t n = 0;
	for (const auto &b : job.bos)
		n += b.size;
	return n;
}

Result<TransferStats> run_one(Direction dir, const ImageDir &images, const GpuCopyJob &job,
			      uint64_t bound)
{
	auto render = open_at(AT_FDCWD, job.render_path, O_RDWR);
	if (!render)
		return std::move(render).error();
	auto engine = SdmaEngine::create(render->get());
	if (!engine)
		return std::move(engine).error().context(job.render_path);

	std::vector<GpuBuffer> bufs;
	bufs.reserve(job.bos.size());
	for (size_t i = 0; i < job.bos.size(); i++) {
		auto b = (*engine)->import_dmabuf(job.bos[i].dmabuf_fd, job.bos[i].size);
		if (!b)
			return std::move(b).error().context(strprintf("BO %zu", i));
		bufs.push_back(*b);
	}

	if (dir == Direction::GpuToFile) {
		auto file = images.create(job.pages_file);
		if (!file)
			return std::move(file).error();
		AtomicFileSink sink(*file);
		auto stats = transfer_to_file(**engine, bufs, sink, bound);
		if (!stats)
			return std::move(stats).error().context(job.pages_file);
		if (auto st = file->commit(); !st)
			return std::move(st).error();
		return stats;
	}

	auto size = images.file_size(job.pages_file);
	if (!size)
		return std::move(size).error();
	const uint64_t want = job_bytes(job);
	if (*size != want)
		return make_error(EINVAL, "%s: holds %llu bytes, the BO table needs %llu",
				  job.pages_file.c_str(), static_cast<unsigned long long>(*size),
				  static_cast<unsigned long long>(want));
	auto fd = images.open_read(job.pages_file);
	if (!fd)
		return std::move(fd).error();
	FileSource source(std::move(*fd), *size, job.pages_file);
	auto stats = transfer_from_file(**engine, bufs, source, bound);
	if (!stats)
		return std::move(stats).error().context(job.pages_file);
	return stats;
}

} // namespace

Result<std::vector<GpuCopyResult>> run_gpu_copies(Direction dir, const ImageDir &images,
						  const std::vector<GpuCopyJob> &jobs,
						  uint64_t staging_bound)
{
	std::vector<std::optional<Result<TransferStats>>> results(jobs.size());
	{
		std::vector<std::jthread> workers;
		workers.reserve(jobs.size());
		for (size_t i = 0; i < jobs.size(); i++)
			workers.emplace_back([&, i] {
				results[i].emplace(run_one(dir, images, jobs[i], staging_bound));
			});
	} // joins

	std::vector<GpuCopyResult> out;
	for (size_t i = 0; i < jobs.size(); i++) {
		auto &r = *results[i];
		if (!r)
			return std::move(r).error().context(
				strprintf("gpu 0x%04x", jobs[i].image_gpu_id));
		out.push_back({jobs[i].image_gpu_id, *r});
	}
	for (const auto &r : out)
		log_gpu(LogLevel::Info, r.image_gpu_id,
			"%s %llu BOs, %llu bytes in %.3f s (%.2f GB/s), peak staging %llu bytes, %llu submissions",
			dir == Direction::GpuToFile ? "dumped" : "restored",
			static_cast<unsigned long long>(r.stats.bos),
			static_cast<unsigned long long>(r.stats.bytes), r.stats.seconds, r.stats.gbps,
			static_cast<unsigned long long>(r.stats.peak_staging_bytes),
			static_cast<unsigned long long>(r.stats.submissions));
	return out;
}

} // namespace amdcr
