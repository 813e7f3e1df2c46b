// SPDX-License-Identifier: GPL-2.0-only
//
// Test doubles for the copy pipeline:
// - FakeEngine: a DmaEngine whose "GPU" is a worker thread. submit()
//   encodes the ranges into an SDMA IB with the real encoder, and the worker
//   executes the decoded packets (memcpy between fake VRAM buffers and the
//   staging memory), so every test also checks the encoding. It records
//   protocol violations (two outstanding submissions, detach under a running
//   job, a range outside any buffer) instead of crashing.
// - VectorSink / VectorSource: the file side, with error injection.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "copy/dma_engine.h"
#include "copy/sdma_packets.h"
#include "base/byte_stream.h"

namespace amdcr::test {

// Walks an IB: copy packets out, NOPs skipped. Returns false on a dword it
// does not understand.
struct DecodedCopy {
	uint64_t src, dst, bytes;
};
inline bool decode_ib(const SdmaCaps &caps, const uint32_t *ib, size_t dwords,
		      std::vector<DecodedCopy> &out, size_t *nops = nullptr)
{
	size_t i = 0, n = 0;
	while (i < dwords) {
		const uint32_t h = ib[i];
		if (h == kSdmaNop) {
			++i;
			++n;
			continue;
		}
		if ((h & 0xff) != kSdmaOpCopy || ((h >> 8) & 0xff) != kSdmaSubOpCopyLinear ||
		    (h >> 16) != 0 || i + kSdmaCopyDwords > dwords || ib[i + 2] != 0)
			return false;
		DecodedCopy c;
		c.bytes = uint64_t(ib[i + 1]) + (caps.count_is_bytes_minus_one ? 1 : 0);
		c.src = uint64_t(ib[i + 3]) | uint64_t(ib[i + 4]) << 32;
		c.dst = uint64_t(ib[i + 5]) | uint64_t(ib[i + 6]) << 32;
		out.push_back(c);
		i += kSdmaCopyDwords;
	}
	if (nops)
		*nops = n;
	return true;
}

class FakeEngine final : public DmaEngine {
public:
	explicit FakeEngine(uint32_t family = kAmdgpuFamilyAi, size_t max_ranges = 64)
		: caps_(SdmaCaps::for_family(family)), max_ranges_(max_ranges),
		  worker_([this] { run(); })
	{
	}
	~FakeEngine() override
	{
		{
			std::lock_guard lk(mu_);
			stop_ = true;
		}
		cv_.notify_all();
		worker_.join();
	}

	// A fake VRAM buffer at a fresh VA (with a gap after it).
	GpuBuffer add_buffer(std::vector<uint8_t> &mem)
	{
		std::lock_guard lk(mu_);
		const uint64_t va = next_va_;
		next_va_ += (mem.size() + 0x10000) / 0x1000 * 0x1000 + 0x1000;
		regions_[va] = Region{mem.data(), mem.size()};
		return GpuBuffer{va, mem.size()};
	}

	// Error injection: the n-th (1-based) submit() fails / the n-th job
	// completes with an error.
	std::optional<unsigned> fail_submit_at;
	std::optional<unsigned> fail_job_at;

	// Observations.
	unsigned submits() const { std::lock_guard lk(mu_); return submits_; }
	unsigned violations() const { std::lock_guard lk(mu_); return violations_; }
	size_t max_ranges_seen() const { std::lock_guard lk(mu_); return max_ranges_seen_; }
	size_t attached_bytes() const { std::lock_guard lk(mu_); return attached_bytes_; }
	unsigned attaches() const { std::lock_guard lk(mu_); return attaches_; }
	unsigned detaches() const { std::lock_guard lk(mu_); return detaches_; }
	bool staging_attached() const { std::lock_guard lk(mu_); return staging_ptr_ != nullptr; }
	// Submitted and not yet waited for.
	bool outstanding() const { std::lock_guard lk(mu_); return outstanding_.has_value(); }

	Result<uint64_t> attach_staging(void *ptr, size_t size) override
	{
		std::lock_guard lk(mu_);
		if (staging_ptr_)
			++violations_;
		staging_ptr_ = static_cast<uint8_t *>(ptr);
		attached_bytes_ = size;
		++attaches_;
		regions_[kStagingVa] = Region{staging_ptr_, size};
		return kStagingVa;
	}
	void detach_staging() override
	{
		std::lock_guard lk(mu_);
		if (outstanding_ || running_ || !jobs_.empty())
			++violations_;
		regions_.erase(kStagingVa);
		staging_ptr_ = nullptr;
		++detaches_;
	}
	uint64_t max_bytes_per_range() const override { return caps_.max_bytes_per_packet; }
	size_t max_ranges_per_submission() const override { return max_ranges_; }

	Result<uint64_t> submit(std::span<const CopyRange> ranges) override
	{
		std::lock_guard lk(mu_);
		++submits_;
		if (fail_submit_at && submits_ == *fail_submit_at)
			return make_error(ESRCH, "injected submit failure");
		if (outstanding_) {
			++violations_;
			return make_error(EBUSY, "two outstanding submissions");
		}
		if (ranges.size() > max_ranges_ || ranges.empty())
			++violations_;
		max_ranges_seen_ = std::max(max_ranges_seen_, ranges.size());
		Job job;
		job.ticket = ++ticket_;
		job.fail = fail_job_at && job.ticket == *fail_job_at;
		job.ib.resize(sdma_ib_dwords(ranges.size() * 4 + 4));
		const size_t dw = sdma_encode_copies(caps_, ranges, job.ib);
		if (dw == 0 || dw % kSdmaIbAlignDwords != 0) {
			++violations_;
			return make_error(EINVAL, "encoding failed");
		}
		job.ib.resize(dw);
		outstanding_ = job.ticket;
		jobs_.push_back(std::move(job));
		cv_.notify_all();
		return ticket_;
	}

	Status wait(uint64_t ticket) override
	{
		std::unique_lock lk(mu_);
		if (!outstanding_ || *outstanding_ != ticket) {
			++violations_;
			return make_error(EINVAL, "wait on unknown ticket");
		}
		cv_.wait(lk, [&] { return done_ >= ticket; });
		outstanding_.reset();
		auto it = results_.find(ticket);
		const int err = it == results_.end() ? 0 : it->second;
		results_.erase(ticket);
		if (err)
			return make_error(err, "fake SDMA job %llu failed", (unsigned long long)ticket);
		return ok_status();
	}

private:
	static constexpr uint64_t kStagingVa = 0x7000'0000'0000ull;
	struct Region {
		uint8_t *ptr;
		size_t size;
	};
	struct Job {
		uint64_t ticket = 0;
		bool fail = false;
		std::vector<uint32_t> ib;
	};

	// With mu_ held.
	uint8_t *resolve(uint64_t va, uint64_t bytes)
	{
		auto it = regions_.upper_bound(va);
		if (it == regions_.begin())
			return nullptr;
		--it;
		const uint64_t off = va - it->first;
		if (off > it->second.size || bytes > it->second.size - off)
			return nullptr;
		return it->second.ptr + off;
	}

	void run()
	{
		std::unique_lock lk(mu_);
		for (;;) {
			cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
			if (jobs_.empty())
				return;
			Job job = std::move(jobs_.front());
			jobs_.pop_front();
			running_ = true;
			std::vector<DecodedCopy> copies;
			int err = 0;
			if (!decode_ib(caps_, job.ib.data(), job.ib.size(), copies)) {
				++violations_;
				err = EINVAL;
			}
			for (const auto &c : copies) {
				if (c.bytes > caps_.max_bytes_per_packet)
					++violations_;
				uint8_t *s = resolve(c.src, c.bytes);
				uint8_t *d = resolve(c.dst, c.bytes);
				if (!s || !d) {
					++violations_;
					err = EFAULT;
					continue;
				}
				// The copy itself runs without the lock, like a
				// real engine running beside the CPU.
				lk.unlock();
				std::memcpy(d, s, c.bytes);
				lk.lock();
			}
			if (job.fail)
				err = EIO;
			if (err)
				results_[job.ticket] = err;
			done_ = job.ticket;
			running_ = false;
			cv_.notify_all();
		}
	}

	SdmaCaps caps_;
	size_t max_ranges_;
	mutable std::mutex mu_;
	std::condition_variable cv_;
	std::deque<Job> jobs_;
	std::map<uint64_t, Region> regions_;
	std::map<uint64_t, int> results_;
	uint64_t next_va_ = 0x1'0000'0000ull;
	uint64_t ticket_ = 0;
	uint64_t done_ = 0;
	std::optional<uint64_t> outstanding_;
	uint8_t *staging_ptr_ = nullptr;
	size_t attached_bytes_ = 0;
	size_t max_ranges_seen_ = 0;
	unsigned submits_ = 0, violations_ = 0, attaches_ = 0, detaches_ = 0;
	bool running_ = false;
	bool stop_ = false;
	std::thread worker_; // last: starts after everything above exists
};

class VectorSink final : public ByteSink {
public:
	explicit VectorSink(const FakeEngine *engine = nullptr) : engine_(engine) {}
	std::vector<uint8_t> data;
	std::optional<unsigned> fail_at; // 1-based call number
	unsigned calls = 0;
	unsigned calls_during_dma = 0;
	std::function<void()> on_write; // called at each write (tests)

	Status write(const void *buf, size_t len) override
	{
		++calls;
		if (on_write)
			on_write();
		if (engine_ && engine_->outstanding())
			++calls_during_dma;
		if (fail_at && calls == *fail_at)
			return make_error(ENOSPC, "injected write failure");
		const auto *p = static_cast<const uint8_t *>(buf);
		data.insert(data.end(), p, p + len);
		return ok_status();
	}

private:
	const FakeEngine *engine_;
};

class VectorSource final : public ByteSource {
public:
	VectorSource(const std::vector<uint8_t> &d, const FakeEngine *engine = nullptr)
		: data_(d), engine_(engine)
	{
	}
	std::optional<unsigned> fail_at;
	unsigned calls = 0;
	unsigned calls_during_dma = 0;

	Status read(void *buf, size_t len) override
	{
		++calls;
		if (engine_ && engine_->outstanding())
			++calls_during_dma;
		if (fail_at && calls == *fail_at)
			return make_error(EIO, "injected read failure");
		if (len > data_.size() - pos_)
			return make_error(EINVAL, "short image");
		std::memcpy(buf, data_.data() + pos_, len);
		pos_ += len;
		return ok_status();
	}
	Status skip(uint64_t len) override
	{
		if (len > data_.size() - pos_)
			return make_error(EINVAL, "short image");
		pos_ += len;
		return ok_status();
	}
	uint64_t remaining() const override { return data_.size() - pos_; }

private:
	const std::vector<uint8_t> &data_;
	const FakeEngine *engine_;
	size_t pos_ = 0;
};

} // namespace amdcr::test
