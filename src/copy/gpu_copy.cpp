// SPDX-License-Identifier: GPL-2.0-only
#include "copy/gpu_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>

#include "base/file_io.h"
#include "base/log.h"
#include "copy/sdma_engine.h"
#include "image/pages_file.h"
#include "image/pages_series.h"
#include "image/shared_chunks.h"

namespace amdcr {
namespace {

uint64_t job_bytes(const GpuCopyJob &job)
{
	uint64_t n = 0;
	for (const auto &b : job.bos)
		n += b.size;
	return n;
}

uint64_t monotonic_ns()
{
	timespec ts{};
	::clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

// The bytes that went through, for the progress lines.
class CountingSink final : public ByteSink {
public:
	CountingSink(ByteSink &inner, std::atomic<uint64_t> &moved) : inner_(inner), moved_(moved) {}
	Status write(const void *buf, size_t len) override
	{
		auto st = inner_.write(buf, len);
		if (st)
			moved_.fetch_add(len, std::memory_order_relaxed);
		return st;
	}

private:
	ByteSink &inner_;
	std::atomic<uint64_t> &moved_;
};

class CountingSource final : public ByteSource {
public:
	CountingSource(ByteSource &inner, std::atomic<uint64_t> &moved) : inner_(inner), moved_(moved) {}
	Status read(void *buf, size_t len) override { return count(inner_.read(buf, len), len); }
	Status skip(uint64_t len) override { return count(inner_.skip(len), len); }
	uint64_t remaining() const override { return inner_.remaining(); }

private:
	Status count(Status st, uint64_t len)
	{
		if (st)
			moved_.fetch_add(len, std::memory_order_relaxed);
		return st;
	}
	ByteSource &inner_;
	std::atomic<uint64_t> &moved_;
};

// What one job did, besides its stats.
struct JobOut {
	TransferStats stats;
	std::vector<BoChecksum> checksums; // dump
	uint64_t verified_bytes = 0;	   // restore
	uint64_t read_bytes = 0;	   // restore: from pages files
	uint64_t written_bytes = 0;	   // dump
	uint64_t parent_bytes = 0;	   // dump, incremental
	unsigned hash_threads = 0;	   // dump, incremental
	std::vector<std::optional<FromParent>> from_parent; // dump, incremental
	std::vector<std::optional<ChunkRefs>> dedup;	    // dump, deduplicated
	uint64_t dedup_bytes = 0;			    // dump, deduplicated
};

// A GPU without buffers: an empty pages file at dump, nothing at restore.
Result<JobOut> run_empty(Direction dir, const ImageDir &images, const GpuCopyJob &job)
{
	if (dir == Direction::GpuToFile) {
		auto pages = PagesWriter::create(images, job.pages_file, 0, job.pages_seal);
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
				ByteSink *sink, ByteSource *source, uint64_t bound,
				std::atomic<uint64_t> &moved, DeltaDedup dedup = {})
{
	JobOut out;
	if (sink && !job.checksums) {
		CountingSink counted(*sink, moved);
		auto stats = transfer_to_file(engine, bufs, counted, bound);
		if (!stats)
			return std::move(stats).error();
		out.stats = *stats;
		out.written_bytes = stats->bytes;
		return out;
	}
	if (sink) {
		// Checksums on up to kMaxHashThreads threads; against the parent's
		// (an incremental dump), or none (a complete one: every byte written).
		if (!job.parent_checksums.empty() && job.parent_checksums.size() != job.bos.size())
			return make_error(EINVAL, "%zu parent checksums for %zu BOs", job.parent_checksums.size(),
					  job.bos.size());
		std::vector<DeltaSink::Bo> bos;
		for (size_t i = 0; i < job.bos.size(); i++)
			bos.push_back({job.bos[i].size,
				       job.parent_checksums.empty() ? nullptr : job.parent_checksums[i]});
		DeltaSink delta(*sink, std::move(bos), kChecksumChunkBytes, 0, std::move(dedup));
		CountingSink counted(delta, moved);
		auto stats = transfer_to_file(engine, bufs, counted, bound);
		if (!stats)
			return std::move(stats).error();
		auto d = delta.take();
		if (!d)
			return std::move(d).error();
		out.stats = *stats;
		out.checksums = std::move(d->checksums);
		out.from_parent = std::move(d->from_parent);
		out.written_bytes = d->written_bytes;
		out.parent_bytes = d->parent_bytes;
		out.hash_threads = d->hash_threads;
		out.dedup = std::move(d->dedup);
		out.dedup_bytes = d->dedup_bytes;
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
	CountingSource counted(checked, moved);
	auto stats = transfer_from_file(engine, bufs, counted, bound);
	if (!stats)
		return std::move(stats).error();
	out.stats = *stats;
	out.verified_bytes = checked.verified_bytes();
	out.read_bytes = stats->bytes;
	return out;
}

// A job whose BOs each have their own pages file: one transfer over the
// series of files, as if they were one.
Result<JobOut> run_series(Direction dir, const ImageDir &images, const GpuCopyJob &job,
			  DmaEngine &engine, BufferFeed &bufs, uint64_t bound, std::atomic<uint64_t> &moved)
{
	if (job.bo_files.size() != job.bos.size())
		return make_error(EINVAL, "%zu pages files for %zu BOs", job.bo_files.size(), job.bos.size());
	std::vector<PagesPart> parts;
	for (size_t i = 0; i < job.bos.size(); i++)
		parts.push_back({job.bo_files[i], job.bos[i].size});
	if (dir == Direction::GpuToFile) {
		PagesSeriesWriter pages(images, std::move(parts), job.pages_seal);
		auto out = transfer_checked(engine, bufs, job, &pages, nullptr, bound, moved);
		if (!out)
			return out;
		if (auto st = pages.finish(); !st)
			return std::move(st).error();
		return out;
	}
	PagesSeriesReader pages(images, std::move(parts), job.pages_seal);
	return transfer_checked(engine, bufs, job, nullptr, &pages, bound, moved);
}

Result<JobOut> run_one(Direction dir, const ImageDir &images, const GpuCopyJob &job, uint64_t bound,
		       const SdmaEngineOptions &opts, std::atomic<uint64_t> &moved, SharedChunkReads *shared)
{
	if (job.bos.empty())
		return run_empty(dir, images, job);
	auto render = open_at(AT_FDCWD, job.render_path, O_RDWR);
	if (!render)
		return std::move(render).error();
	auto engine = SdmaEngine::create(render->get(), opts);
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
		return run_series(dir, images, job, **engine, bufs, bound, moved);
	const uint64_t bytes = job_bytes(job);
	if (dir == Direction::GpuToFile) {
		const bool dedup = job.dedup && job.checksums;
		auto pages = job.parent_checksums.empty() && !dedup
				     ? PagesWriter::create(images, job.pages_file, bytes, job.pages_seal)
				     : PagesWriter::create_open_ended(images, job.pages_file, bytes,
								      job.parent_checksums.empty(), job.pages_seal);
		if (!pages)
			return std::move(pages).error();
		DeltaDedup index;
		if (dedup) {
			auto fd = pages->open_reader();
			if (!fd)
				return std::move(fd).error();
			index = {job.dedup, std::make_shared<const IndexedFile>(IndexedFile{job.pages_file, std::move(*fd)})};
		}
		auto out = transfer_checked(**engine, bufs, job, &*pages, nullptr, bound, moved, std::move(index));
		if (!out)
			return std::move(out).error().context(job.pages_file);
		if (auto st = pages->commit(); !st)
			return std::move(st).error();
		return out;
	}
	if (job.chain) { // a chain's link: each byte from the checkpoint holding it
		if (job.chain->total != bytes)
			return make_error(EINVAL, "%s: the chain holds %llu bytes, the BO table needs %llu",
					  job.pages_file.c_str(), static_cast<unsigned long long>(job.chain->total),
					  static_cast<unsigned long long>(bytes));
		ChainSource chain(images, *job.chain, shared);
		auto out = transfer_checked(**engine, bufs, job, nullptr, &chain, bound, moved);
		if (!out)
			return std::move(out).error().context(job.pages_file);
		out->read_bytes = chain.file_bytes();
		return out;
	}
	auto pages = PagesReader::open(images, job.pages_file, job.pages_seal);
	if (!pages)
		return std::move(pages).error();
	if (pages->payload_size() != bytes)
		return make_error(EINVAL, "%s: holds %llu bytes, the BO table needs %llu",
				  job.pages_file.c_str(),
				  static_cast<unsigned long long>(pages->payload_size()),
				  static_cast<unsigned long long>(bytes));
	auto out = transfer_checked(**engine, bufs, job, nullptr, &*pages, bound, moved);
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

namespace {

// The plan of the chunks several of a restore's streams hold, when there
// are any (image/shared_chunks.h); its budget is set once the staging
// bound is known.
std::unique_ptr<SharedChunkReads> shared_chunk_plan(const std::vector<GpuCopyJob> &jobs)
{
	std::vector<const ChainPages *> streams;
	for (const auto &j : jobs)
		if (j.chain && !j.bos.empty())
			streams.push_back(j.chain);
	auto plan = std::make_unique<SharedChunkReads>(streams);
	return plan->empty() ? nullptr : std::move(plan);
}

// The chunk index of a deduplicated dump's jobs (one per checkpoint), or
// nullptr.
ChunkIndex *dedup_index(Direction dir, const std::vector<GpuCopyJob> &jobs)
{
	if (dir != Direction::GpuToFile)
		return nullptr;
	for (const auto &j : jobs)
		if (j.dedup && j.checksums && !j.bos.empty() && j.bo_files.empty())
			return j.dedup;
	return nullptr;
}

const char *verb(Direction dir)
{
	return dir == Direction::GpuToFile ? "dump" : "restore";
}

// The jobs' threads, and a progress line while they run long.
class JobWaiter {
public:
	explicit JobWaiter(size_t jobs) : left_(jobs) {}
	void done()
	{
		std::lock_guard lk(mu_);
		left_--;
		cv_.notify_all();
	}
	// Returns once every job is done; every `interval` seconds before that
	// (0: never), logs how far the copies are.
	void wait(Direction dir, double interval, uint64_t total, const std::atomic<uint64_t> &moved,
		  size_t gpus, DeferredLog *deferred)
	{
		const auto t0 = std::chrono::steady_clock::now();
		std::unique_lock lk(mu_);
		if (interval <= 0) {
			cv_.wait(lk, [&] { return left_ == 0; });
			return;
		}
		const auto step = std::chrono::duration<double>(interval);
		while (!cv_.wait_for(lk, step, [&] { return left_ == 0; })) {
			const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
			const uint64_t n = moved.load(std::memory_order_relaxed);
			log_msg_to(deferred, LogLevel::Info,
				   "%s: %.2f of %.2f GiB of GPU memory copied (%llu%%) on %zu GPU%s in %.0f s, %.2f GB/s",
				   verb(dir), static_cast<double>(n) / (1ull << 30),
				   static_cast<double>(total) / (1ull << 30),
				   static_cast<unsigned long long>(total ? n * 100 / total : 100), gpus,
				   gpus == 1 ? "" : "s", secs, static_cast<double>(n) / secs / 1e9);
		}
	}

private:
	std::mutex mu_;
	std::condition_variable cv_;
	size_t left_;
};

void log_job_lines(Direction dir, const std::vector<GpuCopyResult> &out, DeferredLog *deferred)
{
	for (const auto &r : out)
		log_gpu_to(deferred, LogLevel::Debug, r.image_gpu_id,
			"%s %llu BOs with contents, %llu bytes in %.3f s (%.2f GB/s; DMA and file I/O %.3f s), "
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
}

void atomic_max(std::atomic<uint64_t> &a, uint64_t v)
{
	uint64_t cur = a.load();
	while (cur < v && !a.compare_exchange_weak(cur, v)) {
	}
}

void atomic_min(std::atomic<uint64_t> &a, uint64_t v)
{
	uint64_t cur = a.load();
	while (cur > v && !a.compare_exchange_weak(cur, v)) {
	}
}

// `held`: the run's staging besides the GPUs' (chunks held or kept).
void add_totals(CopyTotals &t, const std::vector<GpuCopyResult> &out, uint64_t t0, uint64_t t1, uint64_t held)
{
	uint64_t staging = held;
	for (const auto &r : out) {
		t.add_gpu(r.image_gpu_id);
		t.copied_bos += r.stats.bos;
		t.bytes += r.stats.bytes;
		t.verified_bytes += r.verified_bytes;
		t.read_bytes += r.read_bytes;
		t.written_bytes += r.written_bytes;
		t.parent_bytes += r.parent_bytes;
		t.dedup_bytes += r.dedup_bytes;
		t.incremental_gpus += r.incremental ? 1 : 0;
		atomic_max(t.hash_threads, r.hash_threads);
		staging += r.stats.peak_staging_bytes;
	}
	atomic_max(t.peak_staging, staging);
	atomic_min(t.first_ns, t0);
	atomic_max(t.last_ns, t1);
}

} // namespace

void CopyTotals::add_gpu(uint32_t gpu_id)
{
	const uint64_t key = uint64_t{gpu_id} + 1;
	for (auto &slot : gpu_keys) {
		uint64_t cur = 0;
		if (slot.compare_exchange_strong(cur, key) || cur == key)
			return;
	}
}

size_t CopyTotals::gpus() const
{
	return static_cast<size_t>(std::count_if(std::begin(gpu_keys), std::end(gpu_keys),
						 [](const std::atomic<uint64_t> &k) { return k.load() != 0; }));
}

double CopyTotals::seconds() const
{
	const uint64_t a = first_ns.load(), b = last_ns.load();
	return b > a ? static_cast<double>(b - a) / 1e9 : 0.0;
}

Result<std::vector<GpuCopyResult>> run_gpu_copies(Direction dir, const ImageDir &images,
						  const std::vector<GpuCopyJob> &jobs,
						  const CopySettings &settings)
{
	const size_t with_buffers = static_cast<size_t>(
		std::count_if(jobs.begin(), jobs.end(), [](const GpuCopyJob &j) { return !j.bos.empty(); }));
	auto shared = dir == Direction::FileToGpu ? shared_chunk_plan(jobs) : nullptr;
	if (shared) { // one more share for the chunks held, if it holds one
		auto b = per_gpu_staging_bound(settings.max_buffer_size, with_buffers + 1);
		if (b && *b >= kChecksumChunkBytes)
			shared->set_budget(*b);
		else
			shared.reset(); // each holder reads its own, as without the plan
	}
	// Dump, deduplicated: one more share for the chunks the index keeps to
	// compare with, if it holds one (else candidates compare by digest).
	ChunkIndex *index = dedup_index(dir, jobs);
	bool cached = false;
	if (index) {
		auto b = per_gpu_staging_bound(settings.max_buffer_size, with_buffers + 1);
		cached = b && *b >= kChecksumChunkBytes;
		index->set_cache_budget(cached ? *b : 0);
	}
	auto bound = per_gpu_staging_bound(settings.max_buffer_size,
					   with_buffers + (shared || cached ? 1 : 0));
	if (!bound)
		return std::move(bound).error();
	const uint64_t staging_bound = *bound;
	std::optional<StagingGateHold> hold;
	if (settings.gate && with_buffers) {
		const auto asked = std::chrono::steady_clock::now();
		bool waited = false;
		if (auto st = settings.gate->acquire(settings.cancel, &waited); !st)
			return std::move(st).error();
		hold.emplace(settings.gate);
		if (waited)
			log_msg_to(settings.log, LogLevel::Debug,
				   "waited %.3f s for another process's copy of GPU memory: the processes of a "
				   "restore copy one at a time, within one KFD_MAX_BUFFER_SIZE",
				   std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count());
	}
	SdmaEngineOptions opts;
	opts.fence_timeout_ns = settings.sdma_timeout_s * 1'000'000'000;
	uint64_t total = 0;
	for (const auto &j : jobs)
		total += job_bytes(j);
	std::atomic<uint64_t> moved{0};
	std::vector<std::optional<Result<JobOut>>> results(jobs.size());
	std::vector<double> seconds(jobs.size());
	const uint64_t t0 = monotonic_ns();
	{
		JobWaiter waiter(jobs.size());
		std::vector<std::jthread> workers;
		workers.reserve(jobs.size());
		for (size_t i = 0; i < jobs.size(); i++)
			workers.emplace_back([&, i] {
				const auto start = std::chrono::steady_clock::now();
				results[i].emplace(run_one(dir, images, jobs[i], staging_bound, opts, moved, shared.get()));
				seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
				waiter.done();
			});
		waiter.wait(dir, settings.progress_interval_s, total, moved, with_buffers, settings.log);
	} // joins
	const uint64_t t1 = monotonic_ns();

	std::vector<GpuCopyResult> out;
	for (size_t i = 0; i < jobs.size(); i++) {
		auto &r = *results[i];
		if (!r) {
			// A job that failed left no file (its AtomicFile
			// dropped the temporary); the files of the jobs that
			// finished are the caller's to remove (a dump's
			// CreatedFiles, by inode): never by their names here,
			// which may be an older checkpoint's files.
			return std::move(r).error().context(
				strprintf("gpu 0x%04x", jobs[i].image_gpu_id));
		}
		out.push_back({jobs[i].image_gpu_id, r->stats, seconds[i], std::move(r->checksums),
			       r->verified_bytes, r->read_bytes, r->written_bytes, r->parent_bytes,
			       !jobs[i].parent_checksums.empty(), r->hash_threads, std::move(r->from_parent),
			       std::move(r->dedup), r->dedup_bytes});
	}
	log_job_lines(dir, out, settings.log);
	if (index)
		log_msg_to(settings.log, LogLevel::Debug,
			   "deduplication index so far: %zu chunks written, %llu compared in memory, %llu stored "
			   "chunks read back for their digest, %llu checksum collisions, cache peak %llu bytes",
			   index->size(), static_cast<unsigned long long>(index->byte_compares()),
			   static_cast<unsigned long long>(index->read_backs()),
			   static_cast<unsigned long long>(index->collisions()),
			   static_cast<unsigned long long>(index->cache_peak()));
	if (settings.totals)
		add_totals(*settings.totals, out, t0, t1, shared ? shared->peak_bytes() : index ? index->cache_peak() : 0);
	return out;
}

} // namespace amdcr
