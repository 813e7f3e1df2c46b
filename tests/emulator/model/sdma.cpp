// SPDX-License-Identifier: GPL-2.0-only
//
// SDMA engines: one thread per engine executes resolved jobs in order,
// copying between BO memfd mappings (and client memory for userptr BOs),
// at a modelled bandwidth.
#include "model/state.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

namespace kfdemu::detail {

namespace {
constexpr uint64_t kChunk = 16ull << 20; // granularity of throttling and cancellation
}

SdmaEngine::SdmaEngine(double gbps, std::shared_ptr<ProcessMemory> pm, std::shared_ptr<Counters> counters)
	: bytes_per_ns_(gbps > 0 ? gbps : 0), pm_(std::move(pm)), counters_(std::move(counters)),
	  thread_([this](std::stop_token st) { run(st); })
{
	// sdma_gbps is GB/s (1e9 bytes per second) = bytes per ns.
}

SdmaEngine::~SdmaEngine()
{
	thread_.request_stop();
	cv_.notify_all();
	if (thread_.joinable())
		thread_.join();
}

void SdmaEngine::submit(SdmaJob job)
{
	{
		std::lock_guard lk(mu_);
		q_.push_back(std::move(job));
	}
	cv_.notify_all();
}

void SdmaEngine::drain()
{
	std::unique_lock lk(mu_);
	idle_cv_.wait(lk, [&] { return q_.empty() && !busy_; });
}

void SdmaEngine::run(std::stop_token st)
{
	for (;;) {
		SdmaJob job;
		{
			std::unique_lock lk(mu_);
			busy_ = false;
			if (q_.empty())
				idle_cv_.notify_all();
			if (!cv_.wait(lk, st, [&] { return !q_.empty(); }))
				return;
			job = std::move(q_.front());
			q_.pop_front();
			busy_ = true;
		}
		if (job.hang)
			continue; // never signals: WAIT_CS times out, BOs stay busy
		int err;
		try {
			err = execute(job, st);
		} catch (const std::exception &) {
			err = -ENOMEM; // never let an engine thread die
		}
		if (!err)
			err = job.error_after_ops;
		++counters_->sdma_jobs;
		if (err)
			++counters_->sdma_failed;
		for (auto &b : job.busy)
			--b->busy;
		if (err == -ETIME && job.guilty)
			*job.guilty = true; // the timed-out job's context is blamed
		job.fence->signal(err);
	}
}

int SdmaEngine::execute_now(const SdmaJob &job)
{
	std::stop_source never;
	std::stop_token st = never.get_token();
	try {
		return execute(job, st);
	} catch (const std::exception &) {
		return -ENOMEM;
	}
}

void SdmaEngine::throttle(uint64_t bytes)
{
	if (bytes_per_ns_ <= 0)
		return;
	std::unique_lock lk(bw_mu_);
	auto now = std::chrono::steady_clock::now();
	// Idle time does not bank bandwidth: restart the window after a gap.
	auto due = bw_start_ + std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(bw_bytes_) / bytes_per_ns_));
	if (bw_bytes_ == 0 || now > due + std::chrono::milliseconds(5)) {
		bw_start_ = now;
		bw_bytes_ = 0;
	}
	bw_bytes_ += bytes;
	due = bw_start_ + std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(bw_bytes_) / bytes_per_ns_));
	lk.unlock();
	if (due > now)
		std::this_thread::sleep_until(due);
}

int SdmaEngine::copy_piece(const Segment &s, const Segment &d, uint64_t n, std::vector<uint8_t> &bounce)
{
	uint8_t *sp = s.bo->mem ? s.bo->mem->data() + s.off : nullptr;
	uint8_t *dp = d.bo->mem ? d.bo->mem->data() + d.off : nullptr;
	if (sp && dp) {
		std::memmove(dp, sp, n);
		return 0;
	}
	if (sp)
		return pm_->write(d.bo->userptr_tgid, d.bo->userptr_addr + d.off, sp, n);
	if (dp)
		return pm_->read(s.bo->userptr_tgid, s.bo->userptr_addr + s.off, dp, n);
	bounce.resize(std::min<uint64_t>(n, kChunk));
	if (int e = pm_->read(s.bo->userptr_tgid, s.bo->userptr_addr + s.off, bounce.data(), n))
		return e;
	return pm_->write(d.bo->userptr_tgid, d.bo->userptr_addr + d.off, bounce.data(), n);
}

int SdmaEngine::poll(const SdmaJob &job, const SdmaOp &op, std::stop_token &st)
{
	if (op.dst.size() != 1 || op.dst[0].len != 4)
		return -ECANCELED;
	// amdgpu's job timeout (lockup_timeout; 10 s for compute jobs too since
	// the kernel aligned them): a job still waiting then fails with ETIME,
	// which blames its context.
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	const Segment &d = op.dst[0];
	for (;;) {
		uint32_t v = 0;
		if (d.bo->mem)
			std::memcpy(&v, d.bo->mem->data() + d.off, 4);
		else if (pm_->read(d.bo->userptr_tgid, d.bo->userptr_addr + d.off, &v, 4)) {
			counters_->vm_fault(job.gpu_id, 0, "userptr memory not accessible");
			return -ECANCELED;
		}
		const uint32_t a = v & op.mask, b = op.fill & op.mask;
		const bool ok = op.func == 0 || (op.func == 1 && a < b) || (op.func == 2 && a <= b) ||
				(op.func == 3 && a == b) || (op.func == 4 && a != b) || (op.func == 5 && a >= b) ||
				(op.func == 6 && a > b);
		if (ok)
			return 0;
		if (st.stop_requested())
			return -ECANCELED;
		if (std::chrono::steady_clock::now() >= deadline)
			return -ETIME;
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	}
}

int SdmaEngine::execute(const SdmaJob &job, std::stop_token &st)
{
	std::vector<uint8_t> bounce;
	for (const SdmaOp &op : job.ops) {
		if (op.kind == SdmaOp::Kind::Copy) {
			size_t si = 0, di = 0;
			uint64_t so = 0, dof = 0;
			while (si < op.src.size() && di < op.dst.size()) {
				if (st.stop_requested())
					return -ECANCELED;
				const Segment &s = op.src[si], &d = op.dst[di];
				uint64_t n = std::min({s.len - so, d.len - dof, kChunk});
				Segment sp{s.bo, s.off + so, n}, dp{d.bo, d.off + dof, n};
				if (copy_piece(sp, dp, n, bounce)) {
					counters_->vm_fault(job.gpu_id, 0, "userptr memory not accessible");
					return -ECANCELED;
				}
				counters_->sdma_bytes += n;
				throttle(n);
				so += n;
				dof += n;
				if (so == s.len) {
					++si;
					so = 0;
				}
				if (dof == d.len) {
					++di;
					dof = 0;
				}
			}
			continue;
		}
		if (op.kind == SdmaOp::Kind::Poll) {
			if (int e = poll(job, op, st))
				return e;
			continue;
		}
		// Fill / Write: produce the bytes, then store them segment by segment.
		uint64_t pos = 0;
		for (const Segment &d : op.dst) {
			for (uint64_t done = 0; done < d.len;) {
				uint64_t n = std::min(d.len - done, kChunk);
				std::vector<uint8_t> tmp(n);
				if (op.kind == SdmaOp::Kind::Write) {
					std::memcpy(tmp.data(), op.data.data() + pos, n);
				} else {
					for (uint64_t k = 0; k < n; ++k)
						tmp[k] = static_cast<uint8_t>(op.fill >> (((pos + k) & 3) * 8));
				}
				int e = 0;
				if (d.bo->mem)
					std::memcpy(d.bo->mem->data() + d.off + done, tmp.data(), n);
				else
					e = pm_->write(d.bo->userptr_tgid, d.bo->userptr_addr + d.off + done, tmp.data(), n);
				if (e) {
					counters_->vm_fault(job.gpu_id, 0, "userptr memory not accessible");
					return -ECANCELED;
				}
				counters_->sdma_bytes += n;
				throttle(n);
				done += n;
				pos += n;
			}
		}
	}
	return 0;
}

} // namespace kfdemu::detail
